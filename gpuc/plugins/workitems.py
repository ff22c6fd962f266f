"""Blocks on the CPU: a kernel with barriers becomes a function that runs one whole block, its work
items in loops between the barriers (the work-item-loop technique of pocl and CPU OpenCL/SYCL).

Written against the public API only, like the context plugin that calls it (docs/kernel-abi.md,
"Blocks"). The transformation works on the kernel's IR after every function that reaches a
`gpuc.ctx.*` marker has been inlined into it:

1. Every synchronization call (barrier, barrier_count/all/any, syncwarp, a shuffle, a vote) starts a
   block of its own: a *site*. The code a work item runs from the kernel's entry or from a site up to
   the next site (or its return) is a *region*.
2. Values live across a site are *demoted*: stored, per work item, in the block's scratch memory
   right after their definition and loaded where they are used; every alloca (a local array, a
   variable kept in memory) gets one copy per work item there too. Nothing else crosses a site. A
   value the same in every item of the block (block_uniform.py) has one copy for the block instead,
   which a region reads once, before its loop over items, where it reads the value it began with.
   Each slot's accesses carry an alias scope of their own (`!alias.scope`, `!noalias` of the other
   slots'), declared anew for each call: the slots are disjoint arrays of one allocation, which LLVM
   cannot tell apart by itself (it would check at run time, in front of a vector loop, that a region's
   slots do not overlap, and run rows narrower than its minimum for that scalar).
3. Each region is copied into a loop over the work items of a *group*, the sites it reaches
   becoming exits that say which site the work item arrived at. The loop is declared free of
   dependences between items (a race-free kernel's items touch no memory another item writes between
   two barriers), so that LLVM runs it in vector lanes. A group is the whole block, or a
   warp when the kernel uses warp operations: a warp runs on through its warp operations and waits
   at block barriers. The items of a group must agree on the site they arrive at (items that
   returned count as arrived); when they do not, the launch stops with an error naming both
   sites.
4. A dispatcher runs the groups region after region until every work item has returned. What a
   synchronization call gives comes from the values the items arrived with: barrier counts and
   votes are computed before the region after the call runs; a shuffle reads its source item's
   value as the region runs, from a copy of the group's values made at the site where the region
   stores that value again (a loop around the shuffle: an item going round would overwrite its
   value before the items after it had read it).

The function that results takes the block's context, %gpuc.BlockContext (gpuc/abi.py), and is
what the CPU's blocks wrapper (gpuc/targets/cpu_launch.py) calls for each block.
"""

from __future__ import annotations

from gpuc.abi import (BARRIER_MARKER, BARRIER_PREDICATE_MARKERS, BLOCK_DIM_MARKER, BLOCK_INDEX_MARKER,
                      DYNAMIC_SHARED_GLOBAL, FENCE_MARKERS, GRID_BARRIER_MARKER, GRID_DIM_MARKER, INDEX_MARKER,
                      LANE_INDEX_MARKER, NDRANGE_MARKER, SHARED_BYTES_MARKER, SHARED_MARKER, SHUFFLE_MARKER_PREFIX,
                      SERIAL_ITEMS_ATTRIBUTE, SYNCWARP_MARKER, THREAD_INDEX_MARKER, VOTE_MARKERS, WARP_SIZE_MARKER, block_context_type,
                      BLOCK_CONTEXT_FIELDS, GRID_RECORD_WORDS, MAX_EXTENT)
from gpuc.compiler import freeze_reads_before_writes, immediate_dominators, reverse_postorder
from gpuc.errors import CompilationError
from gpuc.llvm import (AllocaInst, Argument, ArrayType, BasicBlock, Builder, CallInst, CompareInst, Constant, ConstantInt,
                       FunctionType, Instruction, LoadInst, PHINode, PoisonValue, StoreInst, TargetData, UndefValue)

from .block_uniform import uniform_values

#: Work items per warp on the CPU: the width of NVIDIA's warps, so that kernels written for them
#: (ballots into 32 bits, `lane == 31` tests) give the same results.
CPU_WARP_SIZE = 32
#: The alignment of the per-item slots' arrays in a block's scratch memory (and so the most their accesses assume).
SLOT_ALIGN = 16
#: Metadata on a load or store of shared memory whose producer vouches that no other item of the block touches
#: that element between the barriers around it (an adjoint's reverse of the primal's store there, in a kernel
#: free of data races: the shadow of the element the item stored): a region's loop over items runs it in
#: lanes even where the kernel relies on the items' order for that array (SERIAL_ITEMS_ATTRIBUTE).
OWN_ELEMENT = "gpuc.item.own"
#: Scratch memory up to this size comes from the stack, more from malloc.
STACK_SCRATCH = 256 << 10
#: Shared arrays up to this size in all are allocas of the block function, larger ones scratch memory.
STACK_SHARED = 64 << 10
#: The error record's flag: work items diverged (1), a block's scratch memory could not be allocated (2).
DIVERGED, OUT_OF_MEMORY = 1, 2
#: Exit codes of a region: a work item returned (or was done before), no item arrived yet.
RETURNED, NOBODY = 0, -1
INT32_MAX = (1 << 31) - 1
#: The resume point of a group all of whose items returned.
FINISHED = -2
_PREDICATES = {name: kind for kind, name in BARRIER_PREDICATE_MARKERS.items()}
_VOTES = {name: kind for kind, name in VOTE_MARKERS.items()}


def _is_warp_site(name: str) -> bool:
    return name == SYNCWARP_MARKER or name in _VOTES or name.startswith(SHUFFLE_MARKER_PREFIX)


def _is_site(name: str) -> bool:
    return name == BARRIER_MARKER or name in _PREDICATES or _is_warp_site(name) or name == GRID_BARRIER_MARKER


class Site:
    """A synchronization call at the head of its block; `code` is its exit code (1, 2, ...)."""

    def __init__(self, code: int, call: CallInst) -> None:
        self.code, self.call = code, call
        self.marker = call.callee.name
        self.warp = _is_warp_site(self.marker)
        self.where = call.args[-1]  # the ptr to "file:line:col"

    @property
    def block(self):
        """The block the call heads (splitting before later sites moves what precedes them)."""
        return self.call.parent


class BlockKernel:
    """Rewrites `kernel` (every marker call inside it) into the block function."""

    def __init__(self, module, kernel, job) -> None:
        self.module, self.fn, self.job = module, kernel, job
        self.llctx = module.context
        self.i1, self.i8, self.i32, self.i64 = (self.llctx.i1, self.llctx.i8, self.llctx.i32, self.llctx.i64)
        self.ptr = self.llctx.ptr()
        self.data = TargetData.from_layout(module.data_layout)
        self.slots: list = []  # (LLVM type, per-item bytes) by slot id
        #: Slots of values uniform across the block: one copy for the whole block, which every item
        #: that defines the value writes (all with the same value).
        self.mirrored: set = set()
        #: Loads of those slots that read the value the slot held when the region began (by slot): the
        #: region reads it once, before its loop over items.
        self.entry_reads: dict = {}
        #: The kernel's values uniform across the block (block_uniform.py), before demotion; empty in
        #: kernels with warp operations or grid barriers.
        self.uniform: set = set()
        self.b = Builder(self.llctx)

    def close(self) -> None:
        self.data.close()
        self.b.close()

    # -- 1: sites --------------------------------------------------------------------------------
    def split_sites(self) -> list[Site]:
        sites = []
        for block in list(self.fn.blocks):
            for inst in list(block.instructions):
                if isinstance(inst, CallInst) and inst.callee is not None and _is_site(inst.callee.name):
                    self._split_before(inst)
                    sites.append(Site(len(sites) + 1, inst))
        return sites

    def _split_before(self, inst: Instruction) -> None:
        """Make `inst` the first instruction of its block: what precedes it (phis included) moves to a
        new block in front, which the block's predecessors branch to instead."""
        block = inst.parent
        if block.instructions.first == inst and block != self.fn.entry_block:
            return
        self.b.split_before(inst)
        self.b.br(block)

    # -- 2: demotion ---------------------------------------------------------------------------
    def slot_declaration(self):
        return self.module.get_or_insert_function("gpuc.wi.slot", FunctionType.get(self.ptr, [self.i64]))

    def new_slot(self, ty) -> int:
        """A value kept per work item: an array of one `ty` per item (consecutive items' values side by side,
        so that a region's loop over items can load and store them in vectors), each aligned to its size up
        to 16 bytes."""
        size = max(1, self.data.size_of(ty))
        size = 1 << (size - 1).bit_length() if size <= 16 else -(-size // 16) * 16
        self.slots.append((ty, size))
        return len(self.slots) - 1

    def slot_address(self, slot: int):
        """A call of the per-item address of `slot` at the builder's position (resolved per region)."""
        return self.b.call(self.slot_declaration(), [ConstantInt.get(self.i64, slot)])

    def replicate_allocas(self) -> None:
        """Every alloca (a local array, a variable kept in memory) becomes a slot: its address is
        taken again where it is used."""
        for inst in list(self.fn.entry_block.instructions) + [i for b in list(self.fn.blocks)[1:]
                                                               for i in list(b.instructions)]:
            if not isinstance(inst, AllocaInst):
                continue
            size = inst.operands[0]
            if not isinstance(size, ConstantInt):
                raise CompilationError(f"@{self.fn.name} allocates memory of a size known only at run time, "
                                       "which a kernel with barriers cannot do on the CPU")
            ty = ArrayType.get(inst.allocated_type, size.value) if size.value != 1 else inst.allocated_type
            slot = self.new_slot(ty)
            for use in list(inst.uses):
                user = use.user
                if isinstance(user, CallInst) and user.callee is not None and \
                        user.callee.name.startswith("llvm.lifetime."):
                    user.erase()  # the copies live as long as the block
                    continue
                self._position_for_use(user, inst)
                address = self.slot_address(slot)
                for i, op in enumerate(user.operands):
                    if op == inst and not (isinstance(user, PHINode) and user.incoming_blocks[i] != self.b.block):
                        user.operands[i] = address
            inst.erase()

    def _position_for_use(self, user, value) -> None:
        if isinstance(user, PHINode):
            for v, pred in user.incoming:
                if v == value:
                    self.b.position_before(pred.terminator)
                    return
        self.b.position_before(user)

    def rematerialize(self, sites: list[Site]) -> None:
        """Values live across a site that are computed from the launch geometry, shared memory's
        address, arguments and constants alone (thread indices, `gpuc.index()`, a shared array) are
        computed again where they are used instead of being kept per work item."""
        for value in _live_in(self.fn, {s.block for s in sites}):
            tree = _recomputable(value)
            if tree is None:
                continue
            for use in list(value.uses):
                user = use.user
                if user.parent == value.parent and not isinstance(user, PHINode):
                    continue  # after the definition in its block: no site between them
                if isinstance(user, CallInst) and user.callee is not None and _is_site(user.callee.name):
                    continue  # a site's operand is read for other work items too: it stays per item
                self._position_for_use(user, value)
                copy = self._copy_tree(value, tree, {})
                for i, op in enumerate(user.operands):
                    if op == value and not (isinstance(user, PHINode) and user.incoming_blocks[i] != self.b.block):
                        user.operands[i] = copy

    def _copy_tree(self, value, tree, made):
        if value in made:
            return made[value]
        if isinstance(value, PHINode):  # a phi of one value (and undef): that value
            source = _single_source(value)
            made[value] = self._copy_tree(source, tree, made) if source in tree else source
            return made[value]
        new = value.clone()
        for i, op in enumerate(value.operands):
            if op in tree:
                new.operands[i] = self._copy_tree(op, tree, made)
        made[value] = self.b.insert(new, value.name)
        return made[value]

    def demote_live_values(self, sites: list[Site]) -> None:
        live = _live_in(self.fn, {s.block for s in sites})
        uniform = self._uniform(sites)
        stored = {}  # slot of a uniform value -> its store
        for value in live:
            ty = value.type
            slot = self.new_slot(ty)
            uses = [(u.user, u) for u in list(value.uses)]
            if isinstance(value, PHINode):
                self.b.position_before(_first_non_phi(value.parent))
            else:
                self.b.position_after(value)
            store = self.b.store(value, self.slot_address(slot))
            if value in uniform:
                stored[slot] = store
            for user, _ in uses:
                if isinstance(user, PHINode):
                    for i, (v, pred) in enumerate(user.incoming):
                        if v == value:
                            self.b.position_before(pred.terminator)
                            user.operands[i] = self.b.load(ty, self.slot_address(slot))
                    continue
                if user.parent == value.parent and not isinstance(value, PHINode) and _after(value, user):
                    continue  # in the same block, after the definition: no site between them
                if user.parent == value.parent and isinstance(value, PHINode):
                    continue
                self.b.position_before(user)
                loaded = self.b.load(ty, self.slot_address(slot))
                for i, op in enumerate(user.operands):
                    if op == value:
                        user.operands[i] = loaded
        if stored:
            entry, mixed = _reads_of(self.fn, {s.block for s in sites}, stored)
            self.mirrored = set(stored) - mixed
            self.entry_reads = {load: slot for load, slot in entry.items() if slot in self.mirrored}

    def _uniform(self, sites: list[Site]) -> set:
        """The values uniform across the block that may be kept once for the block: none in kernels with
        warp operations (groups run a region one after another, and a group's items would overwrite the
        value before the next group had read it) or grid barriers; and no operand of a site (read per
        item there)."""
        if any(s.warp or s.marker == GRID_BARRIER_MARKER for s in sites):
            return set()
        self.uniform = uniform_values(self.fn, same_for_every_item)
        return self.uniform - {a for s in sites for a in s.call.args}


def same_for_every_item(call) -> bool:
    """Whether `call` gives every work item of a block the same result from the same arguments."""
    callee = call.callee
    if callee is None:
        return False
    return callee.name in _UNIFORM_MARKERS or callee.name in _PREDICATES or _pure_intrinsic(call)


#: Markers whose value is the same for every work item of a block.
_UNIFORM_MARKERS = frozenset({NDRANGE_MARKER, BLOCK_INDEX_MARKER, BLOCK_DIM_MARKER, GRID_DIM_MARKER,
                              WARP_SIZE_MARKER, SHARED_BYTES_MARKER, SHARED_MARKER})


def _reads_of(fn, heads: set, stored: dict):
    """For the slots `stored` (slot -> its one store): the loads that no path from a region's start (the
    function's entry or a site's block) reaches through the slot's store, which read what the slot held
    when the region began (load -> slot), and the slots some load of which is reached through the
    store on some paths only. (The other loads follow the store on every path: they read what this
    item stored in this region.) A forward may/must analysis, one bit per slot."""
    bit = {slot: 1 << k for k, slot in enumerate(stored)}
    every = (1 << len(bit)) - 1
    stores = {store: bit[slot] for slot, store in stored.items()}
    blocks = list(fn.blocks)
    starts = set(heads) | {fn.entry_block}
    out = {blk: (0, every) for blk in blocks}  # (may, must) after each block

    def enter(blk):
        if blk in starts:
            return 0, 0
        may, must = 0, every
        for pred in blk.predecessors:
            may, must = may | out[pred][0], must & out[pred][1]
        return may, must

    def walk(blk, state, entry=None, mixed=None):
        may, must = state
        for inst in blk.instructions:
            if inst in stores:
                may, must = may | stores[inst], must | stores[inst]
            elif entry is not None and isinstance(inst, LoadInst):
                slot = _slot_of(inst)
                if slot in bit:
                    if not may & bit[slot]:
                        entry[inst] = slot
                    elif not must & bit[slot]:
                        mixed.add(slot)
        return may, must

    changed = True
    while changed:
        changed = False
        for blk in blocks:
            new = walk(blk, enter(blk))
            if new != out[blk]:
                out[blk], changed = new, True
    entry, mixed = {}, set()
    for blk in blocks:
        walk(blk, enter(blk), entry, mixed)
    return entry, mixed


def _shared_globals(fn) -> list:
    """The shared arrays (globals) `fn` uses through gpuc.ctx.shared, the dynamic one aside."""
    found = []
    for block in fn.blocks:
        for inst in block.instructions:
            if isinstance(inst, CallInst) and inst.callee is not None and inst.callee.name == SHARED_MARKER:
                gv = inst.args[0]
                if gv.name != DYNAMIC_SHARED_GLOBAL and gv not in found:
                    found.append(gv)
    return found


#: Markers whose value a work item can compute anywhere (the same value each time).
_RECOMPUTABLE_MARKERS = frozenset({INDEX_MARKER, NDRANGE_MARKER, THREAD_INDEX_MARKER, BLOCK_INDEX_MARKER,
                                   BLOCK_DIM_MARKER, GRID_DIM_MARKER, LANE_INDEX_MARKER, WARP_SIZE_MARKER,
                                   SHARED_BYTES_MARKER, SHARED_MARKER})
_PURE = frozenset({"add", "sub", "mul", "shl", "lshr", "ashr", "and", "or", "xor", "udiv", "sdiv", "urem", "srem",
                   "icmp", "select", "trunc", "zext", "sext", "insertvalue", "extractvalue", "getelementptr",
                   "freeze"})
#: At most this many instructions are copied to recompute one value.
_RECOMPUTE_LIMIT = 12


def _recomputable(value):
    """The instructions computing `value` from recomputable markers, arguments and constants (a set,
    `value` included), or None when it reads memory or takes more than _RECOMPUTE_LIMIT of them."""
    tree, work = set(), [value]
    while work:
        inst = work.pop()
        if inst in tree:
            continue
        if isinstance(inst, PHINode):
            # SSA construction's phi of a value and undef (a slot written on some paths only): the
            # value, wherever the phi is not undef
            source = _single_source(inst)
            if source is None:
                return None
            tree.add(inst)
            if isinstance(source, Instruction):
                work.append(source)
            continue
        if isinstance(inst, CallInst):
            callee = inst.callee
            if callee is None or callee.name not in _RECOMPUTABLE_MARKERS:
                return None
        elif inst.opcode_name not in _PURE:
            return None
        if inst.opcode_name in ("udiv", "sdiv", "urem", "srem") and not isinstance(inst.operands[1], ConstantInt):
            return None  # a division by a value that may be 0 where the copy lands
        tree.add(inst)
        if len(tree) > _RECOMPUTE_LIMIT:
            return None
        work += [op for op in inst.operands if isinstance(op, Instruction)]
    return tree


def _pure_intrinsic(call) -> bool:
    callee = call.callee
    return callee is not None and callee.name.startswith(("llvm.assume", "llvm.fmuladd", "llvm.fma.", "llvm.fabs",
                                                          "llvm.smin", "llvm.smax", "llvm.umin", "llvm.umax"))


def _single_source(phi):
    """The one value `phi` takes but for undef, poison and itself, or None."""
    found = {v for v in phi.incoming_values if v != phi and not isinstance(v, (UndefValue, PoisonValue))}
    return found.pop() if len(found) == 1 else None


def _where(inst) -> str:
    where = inst.args[-1].name if isinstance(inst, CallInst) and inst.args else ""
    return where[len("gpuc.site."):] if where.startswith("gpuc.site.") else f"@{inst.function.name}"


def _first_non_phi(block):
    for inst in block.instructions:
        if not isinstance(inst, PHINode):
            return inst
    raise AssertionError("a block without a terminator")


def _after(value, user) -> bool:
    """Whether `user` follows `value` in their common block."""
    for inst in value.parent.instructions:
        if inst == value:
            return True
        if inst == user:
            return False
    return False


def _live_in(fn, heads: set) -> list:
    """The instructions live on entry to any of the blocks `heads` (their SSA liveness), in function order."""
    blocks = list(fn.blocks)
    uses, defs, phi_uses = {}, {}, {b: set() for b in blocks}
    for b in blocks:
        used, defined = set(), set()
        for inst in b.instructions:
            if isinstance(inst, PHINode):
                for v, pred in inst.incoming:
                    if isinstance(v, Instruction):
                        phi_uses[pred].add(v)
            else:
                for op in inst.operands:
                    if isinstance(op, Instruction) and op not in defined:
                        used.add(op)
            defined.add(inst)
        uses[b], defs[b] = used, defined
    live_in = {b: set() for b in blocks}
    changed = True
    while changed:
        changed = False
        for b in reversed(blocks):
            out = set(phi_uses[b])
            for s in b.successors:
                out |= live_in[s]
            new = uses[b] | (out - defs[b])
            if new != live_in[b]:
                live_in[b], changed = new, True
    found = set()
    for h in heads:
        found |= live_in[h]
    order = {inst: k for k, inst in enumerate(i for b in blocks for i in b.instructions)}
    return sorted(found, key=order.__getitem__)


class _Region:
    """The blocks one region's copy holds: reached from `start` without entering a site."""

    def __init__(self, code: int, start, heads: dict) -> None:
        self.code, self.start = code, start
        order, seen, work = [], {start}, [start]
        while work:
            block = work.pop()
            order.append(block)
            for succ in block.successors:
                if succ not in seen and succ not in heads:
                    seen.add(succ)
                    work.append(succ)
        self.blocks = order
        #: Whether a work item can leave the region at a site (else every item returns in it).
        self.reaches_site = any(succ in heads for blk in order for succ in blk.successors)
        #: Whether the items that return in the region must be marked done one by one: the group goes
        #: on after it (else the group's flags are set all at once at its end). They are marked after
        #: the region's loop over items (_arrivals), so that they stay sources for the region's shuffles
        #: until it ends, and so that the loop stores no byte per item beside the bytes it loads (a
        #: masked vector store of bytes stalls the next iteration's load of the flags next to them).
        self.marks_returns = self.reaches_site
        #: Dispatcher._exits, once found.
        self.exits: dict | None = None


class Dispatcher:
    """Step 3 and 4: the block function's new body around copies of the regions."""

    def __init__(self, kernel: BlockKernel, sites: list[Site]) -> None:
        self.k, self.sites = kernel, sites
        self.fn, self.b = kernel.fn, kernel.b
        self.i1, self.i8, self.i32, self.i64, self.ptr = kernel.i1, kernel.i8, kernel.i32, kernel.i64, kernel.ptr
        self.heads = {s.block: s for s in sites}
        self.warp = any(s.warp for s in sites)
        #: Whether the kernel has grid barriers: then the block's state lives between calls (phases).
        self.grid = any(s.marker == GRID_BARRIER_MARKER for s in sites)

    def c64(self, v):
        return ConstantInt.get(self.i64, v)

    def c32(self, v):
        return ConstantInt.get(self.i32, v)

    def block(self, name: str):
        return self.fn.append_block(name)

    # -- the entry: the block's context, scratch memory, shared memory ---------------------------
    def entry(self, old_entry) -> None:
        b, k = self.b, self.k
        module = k.module
        entry = self.block("block.entry")
        entry.move_before(old_entry)
        b.position_at_end(entry)
        ctx, cty = self.fn.args[-1], block_context_type(module)

        def field(name, dim=None):
            indices = [self.c32(0), self.c32(BLOCK_CONTEXT_FIELDS[name])] + ([] if dim is None else [self.c32(dim)])
            ty = self.ptr if name == "error" else self.i64
            return b.load(ty, b.gep(cty, ctx, indices), f"{name}{'' if dim is None else dim}", align=8)

        self.uniform = {name: [field(name, d) for d in range(3)]
                        for name in ("ndrange", "block_dim", "grid_dim", "block_index")}
        self.shared_bytes, self.error = field("shared_bytes"), field("error")
        bx, by, bz = self.uniform["block_dim"]
        self.items = b.mul(b.mul(bx, by), bz, "items")
        width = CPU_WARP_SIZE if self.warp else None
        self.group_size = self.c64(width) if width else self.items
        self.groups = (b.udiv(b.add(self.items, self.c64(width - 1)), self.c64(width), "groups") if width
                       else self.c64(1))
        self.codes = k.new_slot(self.i32)  # the site each item arrived at, for the divergence error
        # per-item slots: an array each; mirrored slots: one copy each, after the resume points
        self.slot_offsets, per_item, block_wide = [], 0, 0
        for slot, (_, size) in enumerate(k.slots):
            if slot in k.mirrored:
                self.slot_offsets.append(block_wide)
                block_wide += -(-size // 16) * 16
            else:
                self.slot_offsets.append(per_item)
                per_item += size
        items16 = self.items16 = b.and_(b.add(self.items, self.c64(15)), self.c64(-16))
        done_at = b.mul(items16, self.c64(per_item))  # each slot's array 16-byte aligned
        resume_at = b.add(done_at, items16)
        self.mirror_at = b.add(resume_at, b.and_(b.add(b.mul(self.groups, self.c64(4)), self.c64(15)), self.c64(-16)))
        static_at = b.add(self.mirror_at, self.c64(block_wide))
        # shared arrays: allocas of the function (one per block), but in the scratch memory when it
        # must outlive the call (grid barriers)
        self.static_shared, static_bytes = {}, 0
        shared = _shared_globals(self.fn)
        if self.grid or sum(k.data.size_of(gv.value_type) for gv in shared) > STACK_SHARED:
            for gv in shared:
                self.static_shared[gv] = static_bytes
                static_bytes += -(-max(1, k.data.size_of(gv.value_type)) // 64) * 64
        self.static_at = static_at
        dynamic_at = b.add(static_at, self.c64(static_bytes))
        total = b.add(dynamic_at, self.shared_bytes, "scratch.bytes")
        if self.grid:
            self.grid_entry(module, ctx, cty, field, total, done_at, static_at)
        else:
            self.local_entry(module, total, done_at, static_at)
        i8 = self.i8
        self.slot_addresses = []  # (address, slot) of each slot_at
        self.declare_slot_scopes()
        self.done = b.gep(i8, self.scratch, [done_at], "done")
        self.resume = b.gep(i8, self.scratch, [resume_at], "resume")
        self.dynamic = b.gep(i8, self.scratch, [dynamic_at], "shared.dynamic")
        # block-wide and warp-wide results of the last barrier or vote
        self.bar_count = self.static_alloca(self.i32, "barrier.count")
        self.bar_active = self.static_alloca(self.i32, "barrier.active")
        self.vote_bits = self.static_alloca(self.i64, "vote.bits")
        self.vote_mask = self.static_alloca(self.i64, "vote.mask")
        # an item that arrived at the site the block waits at: uniform values are read from its copies
        self.shared = {}
        self.sites_table = self._sites_table()
        # the access group of what a region's loop over items reads and writes: free of dependences
        # between items but where the kernel relies on their order (SERIAL_ITEMS_ATTRIBUTE)
        # (CompilerConfig(vectorize=False): LLVM's vectorizer decides alone, checking what it must)
        vectorize = getattr(k.job.config, "vectorize", True)
        self.parallel = module.new_access_group() if vectorize else None
        self.hints = [("llvm.loop.vectorize.width", _lanes(k.job.config.target))] if vectorize else []
        serial = self.fn.attributes.get(SERIAL_ITEMS_ATTRIBUTE)
        self.serial = None if serial is None else set(filter(None, serial.split(",")))
        self.ready = b.block

    def _memset(self, module, at, size) -> None:
        self._memset_to(at, 0, size)

    def _memset_to(self, at, byte: int, size) -> None:
        memset = self.k.module.get_or_insert_function("llvm.memset.p0.i64", FunctionType.get(
            self.k.llctx.void, [self.ptr, self.i8, self.i64, self.i1]))
        self.b.call(memset, [at, ConstantInt.get(self.i8, byte), size, ConstantInt.get(self.i1, 0)])

    def local_entry(self, module, total, done_at, static_at) -> None:
        """Scratch memory for this call: on the stack when small, else from malloc."""
        b = self.b
        small = b.icmp("ule", total, self.c64(STACK_SCRATCH))
        on_stack, on_heap, ready = self.block("scratch.stack"), self.block("scratch.heap"), self.block("scratch.ready")
        b.cond_br(small, on_stack, on_heap)
        b.position_at_end(on_stack)
        stack = b.alloca(self.i8, "scratch", size=total, align=64)
        b.br(ready)
        b.position_at_end(on_heap)
        malloc = module.get_or_insert_function("malloc", FunctionType.get(self.ptr, [self.i64]))
        heap = b.call(malloc, [total], "scratch")
        self._out_of_memory(heap, total)
        came = b.block
        b.br(ready)
        b.position_at_end(ready)
        self.scratch = b.phi(self.ptr, [(stack, on_stack), (heap, came)], "scratch")
        self.on_heap = b.phi(self.i1, [(ConstantInt.get(self.i1, 0), on_stack),
                                       (ConstantInt.get(self.i1, 1), came)])
        self._memset(module, b.gep(self.i8, self.scratch, [done_at]), b.sub(static_at, done_at))

    def _out_of_memory(self, pointer, size) -> None:
        """Where malloc gave null: record (once per launch) that the block's `size` bytes of scratch
        memory could not be had, and end the block; the builder goes on where it did not."""
        b = self.b
        failed, fine = self.block("scratch.failed"), self.block("scratch.fine")
        b.cond_br(b.icmp("eq", pointer, Constant.null(self.ptr)), failed, fine)
        b.position_at_end(failed)
        first = b.extract_value(b.cmpxchg(self.error, self.c32(0), self.c32(OUT_OF_MEMORY)), 1)
        write, skip = self.block("scratch.failed.write"), self.block("scratch.failed.end")
        b.cond_br(first, write, skip)
        b.position_at_end(write)
        b.store(size, b.gep(self.i64, self.error, [self.c64(2)]), align=8)
        b.br(skip)
        b.position_at_end(skip)
        b.ret()
        b.position_at_end(fine)

    def grid_entry(self, module, ctx, cty, field, total, done_at, static_at) -> None:
        """Scratch memory kept in the block's grid record between the launch's phases: allocated by
        the block's first call, freed by the call in which its last work item returns."""
        b = self.b
        x, y, z = self.uniform["block_index"]
        gx, gy, _ = self.uniform["grid_dim"]
        linear = b.add(x, b.mul(gx, b.add(y, b.mul(gy, z))))
        grid = b.load(self.ptr, b.gep(cty, ctx, [self.c32(0), self.c32(BLOCK_CONTEXT_FIELDS["grid"])]), "grid",
                      align=8)
        self.record = b.gep(self.i64, grid, [b.mul(linear, self.c64(GRID_RECORD_WORDS))], "record")
        status = b.load(self.i64, b.gep(self.i64, self.record, [self.c64(1)]), "status", align=8)
        finished, going = self.block("grid.finished"), self.block("grid.going")
        b.cond_br(b.icmp("eq", status, self.c64(-1)), finished, going)
        b.position_at_end(finished)
        b.ret()
        b.position_at_end(going)
        old = b.load(self.ptr, self.record, "scratch.kept", align=8)
        fresh, ready = self.block("scratch.fresh"), self.block("scratch.ready")
        start = b.block
        b.cond_br(b.icmp("eq", old, Constant.null(self.ptr)), fresh, ready)
        b.position_at_end(fresh)
        malloc = module.get_or_insert_function("malloc", FunctionType.get(self.ptr, [self.i64]))
        new = b.call(malloc, [total], "scratch")
        self._out_of_memory(new, total)
        self._memset(module, b.gep(self.i8, new, [done_at]), b.sub(static_at, done_at))
        b.store(new, self.record, align=8)
        came = b.block
        b.br(ready)
        b.position_at_end(ready)
        self.scratch = b.phi(self.ptr, [(old, start), (new, came)], "scratch")
        self.on_heap = ConstantInt.get(self.i1, 1)

    def static_alloca(self, ty, name: str, count: int = 1, align: int = 16):
        """An alloca in the function's entry block (a static one: LLVM gives it a frame slot)."""
        here = self.b.block
        entry = self.fn.entry_block
        first = entry.instructions.first
        self.b.position_before(first)
        size = None if count == 1 else self.c64(count)
        slot = self.b.alloca(ty, name, size=size, align=align)
        self.b.position_at_end(here)
        return slot

    def shared_memory(self, gv):
        """The block's copy of the shared array `gv` (an alloca of the function: one per block)."""
        found = self.shared.get(gv)
        if found is None and gv in self.static_shared:
            here = self.b.block
            self.b.position_at_end(self.ready)
            term = self.ready.terminator
            if term is not None:
                self.b.position_before(term)
            found = self.shared[gv] = self.b.gep(self.i8, self.scratch,
                                                 [self.b.add(self.static_at, self.c64(self.static_shared[gv]))])
            self.b.position_at_end(here)
        if found is None:
            ty = gv.value_type
            found = self.shared[gv] = self.static_alloca(ty, gv.name, align=max(16, gv.alignment or 16))
        return found

    def _sites_table(self):
        """A constant table of the sites' locations by exit code, for the divergence error."""
        k = self.k
        entries = [Constant.null(self.ptr)] + [s.where if str(s.where.type) == "ptr" else Constant.null(self.ptr)
                                               for s in self.sites]
        ty = ArrayType.get(self.ptr, len(entries))
        gv = k.module.add_global(ty, "gpuc.sites")
        gv.initializer = Constant.array(self.ptr, entries)
        gv.is_global_constant = True
        gv.linkage = "private"
        return gv, ty

    # -- loops the dispatcher needs ---------------------------------------------------------------
    def loop(self, lo, hi, inits, body, name: str, parallel: bool = False):
        """for i in [lo, hi): accs = body(i, accs), at the builder's position; returns the final accs
        with the builder after the loop. `parallel`: `body` (straight-line code) touches only memory of
        its own item."""
        b = self.b
        before = b.block
        head, inside, after = self.block(f"{name}.head"), self.block(f"{name}.body"), self.block(f"{name}.end")
        b.br(head)
        b.position_at_end(head)
        i = b.phi(self.i64, [(lo, before)], f"{name}.i")
        accs = [b.phi(v.type, [(v, before)]) for v in inits]
        b.cond_br(b.icmp("ult", i, hi), inside, after)
        b.position_at_end(inside)
        new = body(i, accs)
        latch = b.block
        i.add_incoming(b.add(i, self.c64(1)), latch)
        for phi, v in zip(accs, new):
            phi.add_incoming(v, latch)
        back = b.br(head)
        if parallel:
            self._mark_parallel([inside] if inside == latch else [inside, latch])
            if self.parallel is not None:
                back.set_loop_hints(parallel_accesses=self.parallel)
        b.position_at_end(after)
        return accs

    def is_done(self, item):
        return self.b.icmp("ne", self.b.load(self.i8, self.b.gep(self.i8, self.done, [item])), ConstantInt.get(self.i8, 0))

    def operand_for(self, value, item):
        """What `value` (a site's operand) is for work item `item`: its slot's copy when it was demoted."""
        slot = _slot_of(value)
        if slot is None:
            return value
        return self.b.load(value.type, self.slot_at(slot, item))

    def slot_at(self, slot: int, item):
        b = self.b
        if slot in self.k.mirrored:
            address = b.gep(self.i8, self.scratch, [b.add(self.mirror_at, self.c64(self.slot_offsets[slot]))])
        else:
            base = b.mul(self.items16, self.c64(self.slot_offsets[slot]))
            address = b.gep(self.i8, self.scratch, [b.add(base, b.mul(item, self.c64(self.k.slots[slot][1])))])
        self.slot_addresses.append((address, slot))
        return address

    def declare_slot_scopes(self) -> None:
        """One alias scope per slot, declared at the builder's position (once the scratch memory is there)."""
        module, b = self.k.module, self.b
        domain = f"gpuc.scratch.{self.fn.name}"
        self.slot_scopes = module.new_alias_scopes(domain, [f"{domain}.{slot}" for slot in range(len(self.k.slots))])
        declare = module.declare_intrinsic("llvm.experimental.noalias.scope.decl",
                                           FunctionType.get(self.k.llctx.void, [self.k.llctx.metadata]))
        for scope in self.slot_scopes:
            b.call(declare, [scope.as_list()])

    def scope_slot_accesses(self) -> None:
        """Put the loads and stores of each slot (through its addresses and GEPs of them) in the slot's
        alias scope, apart from the other slots' (Instruction.set_alias_scopes), and none of them aligned
        beyond SLOT_ALIGN: a slot's array starts at a multiple of 16 bytes (in malloc's memory, or after
        smaller slots), its items at multiples of its size, whatever alignment a value's type (a vector of
        four doubles: 32) or an alloca asked for (an aligned vector move there faulted)."""
        scopes = self.slot_scopes
        for address, slot in self.slot_addresses:
            if slot >= len(scopes) or not address.alive:  # erased with a region's unused copy
                continue
            others = scopes[:slot] + scopes[slot + 1:]
            work = [address]
            while work:
                pointer = work.pop()
                for user in pointer.users:
                    if isinstance(user, LoadInst) and user.operands[0] == pointer or \
                            isinstance(user, StoreInst) and user.operands[1] == pointer:
                        user.set_alias_scopes([scopes[slot]], others)
                        if user.alignment > SLOT_ALIGN:
                            user.alignment = SLOT_ALIGN
                    elif isinstance(user, Instruction) and user.opcode_name == "getelementptr" and \
                            user.operands[0] == pointer:
                        work.append(user)

    # -- the schedule ---------------------------------------------------------------------------
    def build(self, old_blocks) -> None:
        b = self.b
        regions = [_Region(0, old_blocks[0], self.heads)] + [_Region(s.code, s.block, self.heads)
                                                             for s in self.sites]
        self.asides = self._asides(regions)
        self.fail = self.block("block.diverged")
        self.finish = self.block("block.finish")
        round_head, group_head, group_body = self.block("round"), self.block("group"), self.block("group.body")
        step, group_after, group_next = self.block("step"), self.block("group.after"), self.block("group.next")
        round_end = self.block("round.end")
        b.br(round_head)
        b.position_at_end(round_head)
        b.br(group_head)
        b.position_at_end(group_head)
        g = b.phi(self.i64, [(self.c64(0), round_head)], "g")
        ab = b.phi(self.i32, [(self.c32(NOBODY), round_head)], "arrived")
        abg = b.phi(self.i64, [(self.c64(-1), round_head)], "arrived.group")
        b.cond_br(b.icmp("ult", g, self.groups), group_body, round_end)
        b.position_at_end(group_body)
        self.lo = b.mul(g, self.group_size, "lo")
        self.hi = b.select(b.icmp("ult", b.add(self.lo, self.group_size), self.items),
                           b.add(self.lo, self.group_size), self.items, "hi")
        resume_ptr = b.gep(self.i32, self.resume, [g])
        resumed = b.load(self.i32, resume_ptr, "resume")
        start = self.block("group.start")
        b.cond_br(b.icmp("eq", resumed, self.c32(FINISHED)), group_next, start)
        b.position_at_end(start)
        b.br(step)
        b.position_at_end(step)
        r = b.phi(self.i32, [(resumed, start)], "region")
        pres = [self.block(f"region{region.code}") for region in regions]
        b.switch(r, self.fail, [(self.c32(region.code), pre) for region, pre in zip(regions, pres)])
        # group.after: where the group's items arrived
        b.position_at_end(group_after)
        e = b.phi(self.i32, [], "exit")
        self.group_after, self.exit_phi = group_after, e
        uniform_exits = [self._uniform_exit(region) for region in regions]
        # (with vectorization off, every region runs every item and looks at every item's exit: the plain
        # schedule, which the random block kernels compare the other with)
        self.never_done = self.parallel is not None and self._never_done(regions, uniform_exits)
        for region, pre, uniform_exit in zip(regions, pres, uniform_exits):
            b.position_at_end(pre)
            self.region_loop(region, uniform_exit)
        b.position_at_end(group_after)
        finished, barrier = self.block("group.finished"), self.block("group.barrier")
        cases = []
        for s in self.sites:
            if s.warp:
                prep = self.block(f"warp.site{s.code}")
                cases.append((self.c32(s.code), prep))
                b.position_at_end(prep)
                if s.marker in _VOTES:
                    self.warp_vote(s)
                elif s.code in self.asides:
                    self.set_aside(s)
                r.add_incoming(self.c32(s.code), b.block)
                b.br(step)
        b.position_at_end(group_after)
        b.switch(e, barrier, [(self.c32(NOBODY), finished)] + cases)
        b.position_at_end(finished)
        b.store(self.c32(FINISHED), resume_ptr)
        # every item of the group returned (in a region that may not have said so per item)
        self._memset_to(b.gep(self.i8, self.done, [self.lo]), 1, b.sub(self.hi, self.lo))
        b.br(group_next)
        b.position_at_end(barrier)
        b.store(e, resume_ptr)
        agree = b.or_(b.icmp("eq", ab, self.c32(NOBODY)), b.icmp("eq", ab, e))
        first_group = b.select(b.icmp("eq", ab, self.c32(NOBODY)), g, abg)
        b.cond_br(agree, group_next, self.diverging(ab, e, b.mul(abg, self.group_size), self.lo))
        b.position_at_end(group_next)
        ab_next = b.phi(self.i32, [(ab, group_body), (ab, finished), (e, barrier)])
        abg_next = b.phi(self.i64, [(abg, group_body), (abg, finished), (first_group, barrier)])
        g.add_incoming(b.add(g, self.c64(1)), group_next)
        ab.add_incoming(ab_next, group_next)
        abg.add_incoming(abg_next, group_next)
        b.br(group_head)
        # round.end: everybody returned, or all waiting groups are at block barrier `ab`
        b.position_at_end(round_end)
        more = self.block("round.more")
        b.cond_br(b.icmp("eq", ab, self.c32(NOBODY)), self.finish, more)
        b.position_at_end(more)
        predicate_sites = [s for s in self.sites if s.marker in _PREDICATES]
        grid_sites = [s for s in self.sites if s.marker == GRID_BARRIER_MARKER]
        if predicate_sites or grid_sites:
            preps = [self.block(f"barrier.site{s.code}") for s in predicate_sites]
            waits = [self.block(f"grid.site{s.code}") for s in grid_sites]
            b.switch(ab, round_head, [(self.c32(s.code), prep) for s, prep in zip(predicate_sites, preps)]
                     + [(self.c32(s.code), wait) for s, wait in zip(grid_sites, waits)])
            for s, wait in zip(grid_sites, waits):
                # the block waits at a grid barrier: the next phase's call goes on from there
                b.position_at_end(wait)
                b.store(b.sext(ab, self.i64), b.gep(self.i64, self.record, [self.c64(1)]), align=8)
                b.store(s.where, b.gep(self.i64, self.record, [self.c64(2)]), align=8)
                b.ret()
            for s, prep in zip(predicate_sites, preps):
                b.position_at_end(prep)
                self.block_count(s)
                b.br(round_head)
        else:
            b.br(round_head)
        self.finish_blocks()
        self.scope_slot_accesses()

    def _asides(self, regions) -> dict:
        """The shuffle sites whose region stores the shuffled value's slot (the value is defined in
        it: a loop around the shuffle), by exit code, with that slot. An item running the region
        would overwrite its value before the group's later items had read it, so the group's values
        are set aside at the site (`set_aside`) and the shuffle reads them there."""
        found = {}
        for site, region in zip(self.sites, regions[1:]):
            slot = _slot_of(site.call.args[0]) if site.marker.startswith(SHUFFLE_MARKER_PREFIX) else None
            if slot is not None and slot in _stored_slots(region.blocks):
                found[site.code] = slot
        if found:
            size = max(self.k.slots[slot][1] for slot in found.values())
            self.aside = self.static_alloca(self.i8, "shuffle.aside", count=CPU_WARP_SIZE * size)
        return found

    def diverging(self, code_a, code_b, item_a, item_b):
        """A block that records (once per launch) that work items `item_a` and `item_b` of this block
        arrived at the sites `code_a` and `code_b`, and ends the block. The record (gpuc/abi.py,
        BLOCK_ERROR_WORDS): i32 flag, then i64 block, item a, item b, ptr site a, ptr site b."""
        b = self.b
        here = b.block
        block = self.block("diverged")
        b.position_at_end(block)
        record = self.error
        first = b.extract_value(b.cmpxchg(record, self.c32(0), self.c32(DIVERGED)), 1)
        write, skip = self.block("diverged.write"), self.block("diverged.skip")
        b.cond_br(first, write, skip)
        b.position_at_end(write)
        x, y, z = self.uniform["block_index"]
        gx, gy, _ = self.uniform["grid_dim"]
        linear = b.add(x, b.mul(gx, b.add(y, b.mul(gy, z))))
        table, ty = self.sites_table
        sites = [b.load(self.ptr, b.gep(ty, table, [self.c64(0), b.zext(code, self.i64)])) for code in (code_a, code_b)]
        for index, value in enumerate((linear, item_a, item_b, *sites), start=1):
            b.store(value, b.gep(self.i64, record, [self.c64(index)]), align=8)
        b.br(skip)
        b.position_at_end(skip)
        b.br(self.finish)
        b.position_at_end(here)
        return block

    def finish_blocks(self) -> None:
        b = self.b
        module = self.k.module
        b.position_at_end(self.fail)
        b.unreachable()
        b.position_at_end(self.finish)
        heap, done = self.block("scratch.free"), self.block("block.done")
        b.cond_br(self.on_heap, heap, done)
        b.position_at_end(heap)
        free = module.get_or_insert_function("free", FunctionType.get(self.k.llctx.void, [self.ptr]))
        b.call(free, [self.scratch])
        if self.grid:
            b.store(Constant.null(self.ptr), self.record, align=8)
            b.store(self.c64(-1), b.gep(self.i64, self.record, [self.c64(1)]), align=8)
        b.br(done)
        b.position_at_end(done)
        b.ret()

    # -- one region: its copy in a loop over the group's work items ----------------------------
    def region_loop(self, region: _Region, uniform_exit: bool) -> None:
        b = self.b
        # Each item stores the site it arrived at in `codes`; a loop after the region's finds the least and
        # the greatest. (Carried through the region's loop, they would keep LLVM's loop vectorizer from it:
        # folded into the phis of the exits' constant codes, they are no reductions it knows.)
        init = []
        reads = self._region_entry_reads(region)
        entry = self.block(f"r{region.code}.items")
        latch = self.block(f"r{region.code}.arrived")
        # where none has returned, and every item leaves alike: the items past an idle tail need not run
        tail = self._idle_tails(region) if uniform_exit and self.never_done and self._leaves_at_barrier(region) \
            else None
        limit = self._probe_limit(region, tail, reads) if tail is not None else None
        b.br(entry)
        b.position_at_end(entry)
        if self.warp:
            accs, wi, tids, close = self.linear_items(region, init, latch)
        else:
            accs, wi, tids, close = self.nested_items(region, init, latch, limit)
        head = b.block
        copy = _Copy(self, region, wi, tids, latch, reads)
        # LLVM's loop vectorizer runs these loops in lanes: guard them as the launch loop is
        freeze_reads_before_writes(copy.bmap.values(), _pure_intrinsic)
        if region.code == 0 or self.never_done:  # no work item has returned yet, or all did at once
            b.br(copy.entry)
            skip = []
        else:
            skipped = b.icmp("ne", b.load(self.i8, b.gep(self.i8, self.done, [wi])), ConstantInt.get(self.i8, 0))
            b.cond_br(skipped, latch, copy.entry)
            skip = [(self.c32(RETURNED), head)]
        b.position_at_end(latch)
        code = b.phi(self.i32, skip + copy.exits, "code")
        b.store(code, self.slot_at(self.codes, wi))
        # (LLVM takes a vector width asked for as leave to reorder the loop's float sums: not where the
        # items add into a shared array one after another)
        close([], self.hints if self._mark_parallel([head, *copy.bmap.values(), latch]) else [])
        if uniform_exit:
            # every item that ran the region left it where the others did (or all returned, and the group
            # is finished): no divergence to look for, no item to mark done
            # and where none may have returned before, the group's first item left as every other did
            high = b.load(self.i32, self.slot_at(self.codes, self.lo)) if self.never_done else \
                self._highest_code(region)
            self.exit_phi.add_incoming(b.select(b.icmp("eq", high, self.c32(RETURNED)), self.c32(NOBODY), high),
                                       b.block)
            b.br(self.group_after)
            return
        low, high = self._arrivals(region)
        # the items agree when every one that arrived somewhere arrived at the same site
        agreed = b.select(b.icmp("eq", high, self.c32(RETURNED)), self.c32(NOBODY), high)
        ok = b.or_(b.icmp("eq", high, self.c32(RETURNED)), b.icmp("eq", low, high))
        after = self.block(f"r{region.code}.end")
        here = b.block
        failed = self.block(f"r{region.code}.diverged")
        b.position_at_end(failed)
        low_item, high_item = self._first_at(low, high)
        b.br(self.diverging(low, high, low_item, high_item))
        b.position_at_end(here)
        b.cond_br(ok, after, failed)
        b.position_at_end(after)
        self.exit_phi.add_incoming(agreed, b.block)
        b.br(self.group_after)

    def _exits(self, region: _Region) -> dict:
        """What a work item in each block of `region` may reach on its way out: site codes (the
        region's own start included, an arrival there) and RETURNED."""
        if region.exits is not None:
            return region.exits
        exits = region.exits = {blk: set() for blk in region.blocks}
        changed = True
        while changed:
            changed = False
            for blk in reversed(region.blocks):
                found = set(exits[blk])
                term = blk.terminator
                if term is not None and term.opcode_name == "ret":
                    found.add(RETURNED)
                for succ in blk.successors:
                    found |= _step_into(succ, self.heads, exits)
                if found != exits[blk]:
                    exits[blk], changed = found, True
        return exits

    def _uniform_exit(self, region: _Region) -> bool:
        """Whether every item that runs `region` leaves it at the same site (or every one returns): each
        branch on a condition that may differ between items either has one exit in reach from both its
        sides, or its sides meet again inside the region (a block every way from it passes before it
        leaves: the items that took either side go on together). (Blocks in reach of two exits are then
        reached through branches that agree for all items.)"""
        uniform = self.k.uniform
        if not uniform:
            return False
        exits = self._exits(region)
        if not any(exits.values()):
            return False
        meets = None
        for blk in region.blocks:
            condition = _condition_of(blk.terminator)
            if condition is None or condition in uniform:
                continue
            reached = set()
            for succ in blk.successors:
                reached |= _step_into(succ, self.heads, exits)
            if len(reached) > 1:
                meets = _post_dominators(region, self.heads) if meets is None else meets
                if meets.get(blk, _LEAVES) is _LEAVES:
                    return False
        return True

    def _never_done(self, regions, uniform_exits) -> bool:
        """Whether no work item of a group can have returned while others go on: each region where an
        item may return is left alike by all its items (then all return, and the group is finished)."""
        return all(uniform_exit or not region.reaches_site or RETURNED not in self._exits(region)[region.start]
                   for region, uniform_exit in zip(regions, uniform_exits))

    def _idle_tails(self, region: _Region):
        """The branches of `region` past which the items from some x thread index on only leave it, as
        (block, how the limit follows from the compare's operand, that operand), and the blocks before
        them; or None. The branch compares the x index with a value uniform across the block (`t < stride`,
        `t == 0`). On the way to it every branch is uniform (every item reaches it, or none does) and no
        item stores anything but uniform values, which one item stores for all (so that the items past
        the limit need not run); it is in no loop of the region; from its idle side no item stores, calls
        or waits for anything before it leaves."""
        k, heads = self.k, self.heads
        inside = set(region.blocks)
        arrival = heads[region.start].call if region.start in heads else None  # the barrier it starts at

        def uniform(v):
            return isinstance(v, Constant) or v in k.uniform or _slot_of(v) in k.mirrored

        def within(starts):
            seen, work = set(), [blk for blk in starts if blk in inside and blk not in heads]
            while work:
                blk = work.pop()
                if blk not in seen:
                    seen.add(blk)
                    work += [s for s in blk.successors if s in inside and s not in heads]
            return seen

        def reaching(target):  # the blocks from which a step within the region leads to `target`
            seen, work = set(), [target]
            while work:
                blk = work.pop()
                if blk in heads:
                    continue  # a step into a site's block leaves the region
                for pred in blk.predecessors:
                    if pred in inside and pred not in seen:
                        seen.add(pred)
                        work.append(pred)
            return [blk for blk in region.blocks if blk in seen]

        tails, kept = [], set()
        for guard in region.blocks:
            found = _tail_compare(guard.terminator, uniform)
            if found is None:
                continue
            kind, limit, work, idle = found
            before = reaching(guard)
            if guard in before:
                continue  # in a loop of the region: the limit would change on the way
            branches = [_condition_of(blk.terminator) for blk in before]
            if all(c is None or uniform(c) for c in branches) and \
                    all(_inert(inst) or inst == arrival or self._mirrored_store(inst)
                        for blk in before + [guard] for inst in blk.instructions) and \
                    self._idle(guard, within([idle])):
                tails.append((guard, kind, limit))
                kept |= {guard, *before}
        return (tails, kept) if tails else None

    def _idle(self, guard, blocks: set) -> bool:
        """Whether the items that step from `guard` into `blocks` (the idle side) do nothing there: they
        store, call and wait for nothing, but for their own copy of a value that they leave undefined (a
        phi of undef on every way they come by: what the work side computed, for the reverse)."""
        comes = blocks | {guard}
        for blk in blocks:
            for inst in blk.instructions:
                if _inert(inst):
                    continue
                value = inst.operands[0] if isinstance(inst, StoreInst) else None
                if not (isinstance(value, PHINode) and value.parent == blk and _slot_of_address(inst.operands[1])
                        is not None and all(isinstance(v, (UndefValue, PoisonValue)) for v, pred in value.incoming
                                            if pred in comes)):
                    return False
        return True

    def _leaves_at_barrier(self, region: _Region) -> bool:
        """Whether the items leave `region` only by returning or at plain barriers (whose sites read no
        value of theirs)."""
        plain = {s.code for s in self.sites if s.marker == BARRIER_MARKER}
        return self._exits(region)[region.start] <= plain | {RETURNED}

    def _probe_limit(self, region: _Region, tails, reads):
        """Runs `region` for the group's first item as far as an idle tail's branch (storing uniform values
        alone on the way, as every item does) and gives the x index from which on the items take that
        branch's idle side: the block's width where the item leaves the region before any."""
        b = self.b
        tails, before = tails
        bx = self.uniform["block_dim"][0]
        none, after = self.block(f"r{region.code}.probe.none"), self.block(f"r{region.code}.probe.end")
        copy = _Copy(self, region, self.lo, [self.c64(0)] * 3, none, reads)
        b.br(copy.entry)
        kept = {copy.bmap[blk] for blk in before}
        for blk in kept:
            term = blk.terminator
            for i, op in enumerate(term.operands):
                if isinstance(op, BasicBlock) and op in copy.bmap.values() and op not in kept:
                    term.operands[i] = none
        limits = [(bx, none)]
        for guard, kind, value in tails:
            at = copy.bmap[guard]
            at.terminator.erase()
            b.position_at_end(at)
            v = copy.vmap.get(value, value)
            signed = kind.startswith("signed")
            if kind.endswith("at most"):
                v = b.add(self._minmax("smin" if signed else "umin", v, b.sub(bx, self.c64(1)), 64), self.c64(1))
            else:
                v = self._minmax("smin" if signed else "umin", v, bx, 64)
            if signed:
                v = self._minmax("smax", v, self.c64(0), 64)
            b.br(after)
            limits.append((v, at))
        _erase_blocks([blk for blk in copy.bmap.values() if blk not in kept])
        _erase_blocks([stub for stub in copy.stubs.values() if not stub.predecessors])
        b.position_at_end(none)
        b.br(after)
        b.position_at_end(after)
        return b.phi(self.i64, limits, f"r{region.code}.limit")

    def _mirrored_store(self, inst) -> bool:
        return isinstance(inst, StoreInst) and _slot_of_address(inst.operands[1]) in self.k.mirrored

    def _region_entry_reads(self, region: _Region) -> dict:
        """The region's loads of uniform values as the region began (BlockKernel.entry_reads), each
        with its value, loaded here, before the loop over items."""
        k, b = self.k, self.b
        values, found = {}, {}
        for load in (inst for blk in region.blocks for inst in blk.instructions if inst in k.entry_reads):
            slot = k.entry_reads[load]
            if slot not in values:
                values[slot] = b.load(load.type, self.slot_at(slot, None), f"uniform{slot}")
            found[load] = values[slot]
        return found

    def _mark_parallel(self, blocks) -> bool:
        """Put the plain loads and stores of `blocks` (a region's loop over items), and the intrinsics that
        touch memory, in the access group of accesses free of dependences between items. Atomics,
        volatile accesses, fences, calls of functions, and in a kernel that relies on the items' order
        for some shared arrays, the accesses that may reach them stay out: a loop holding any is not
        parallel (LLVM checks its dependences as usual). Whether no access stayed out for the items'
        order."""
        if self.parallel is None:
            return False
        serial = None
        if self.serial is not None:
            serial = {address for gv, address in self.shared.items() if gv.name in self.serial}
            if DYNAMIC_SHARED_GLOBAL in self.serial:  # an adjoint's: the primal's dynamic memory, then its shadow
                serial.add(self.dynamic)
        ordered = False
        for blk in blocks:
            for inst in blk.instructions:
                op = inst.opcode_name
                if op in ("load", "store"):
                    if inst.is_volatile or inst.ordering not in (None, "notatomic"):
                        continue
                    pointer = inst.operands[0 if op == "load" else 1]
                    if serial is not None and inst.string_metadata(OWN_ELEMENT) is None \
                            and _may_reach(pointer, serial, self.scratch):
                        ordered = True
                        continue
                    inst.set_access_group(self.parallel)
                elif isinstance(inst, CallInst):
                    name = inst.callee.name if inst.callee is not None else ""
                    if name.startswith(_GROUPED_INTRINSICS):
                        if serial is not None and name.startswith(_MEMORY_INTRINSICS):
                            ordered = True
                        else:
                            inst.set_access_group(self.parallel)
        return not ordered

    def _highest_code(self, region: _Region):
        """The greatest exit code of the group's items in `region` (RETURNED when every one returned)."""
        b = self.b

        def body(j, accs):
            return [self._minmax("smax", accs[0], b.load(self.i32, self.slot_at(self.codes, j)))]
        return self.loop(self.lo, self.hi, [self.c32(RETURNED)], body, f"r{region.code}.exit", parallel=True)[0]

    def _minmax(self, which: str, a, b_, bits: int = 32):
        ty = self.i32 if bits == 32 else self.i64
        fn = self.k.module.declare_intrinsic(f"llvm.{which}.i{bits}", FunctionType.get(ty, [ty, ty]))
        return self.b.call(fn, [a, b_])

    def _arrivals(self, region: _Region):
        """(the least site an item of the group arrived at, the greatest code: RETURNED when none arrived)."""
        b = self.b

        def body(j, accs):
            low, high = accs
            code = b.load(self.i32, self.slot_at(self.codes, j))
            arrived = b.icmp("ne", code, self.c32(RETURNED))
            if region.marks_returns:  # an item that returned in the region (or was done before it)
                at = b.gep(self.i8, self.done, [j])
                b.store(b.select(arrived, b.load(self.i8, at), ConstantInt.get(self.i8, 1)), at)
            return [self._minmax("smin", low, b.select(arrived, code, self.c32(INT32_MAX))),
                    self._minmax("smax", high, code)]
        return self.loop(self.lo, self.hi, [self.c32(INT32_MAX), self.c32(RETURNED)], body, f"r{region.code}.codes",
                         parallel=True)

    def _first_at(self, low, high):
        """The first item of the group that arrived at site `low`, and the first at `high` (from `codes`)."""
        b = self.b

        def body(j, accs):
            first_low, first_high = accs
            code = b.load(self.i32, self.slot_at(self.codes, j))
            none_low, none_high = b.icmp("eq", first_low, self.c64(-1)), b.icmp("eq", first_high, self.c64(-1))
            return [b.select(b.and_(none_low, b.icmp("eq", code, low)), j, first_low),
                    b.select(b.and_(none_high, b.icmp("eq", code, high)), j, first_high)]
        return self.loop(self.lo, self.hi, [self.c64(-1), self.c64(-1)], body, "diverged.items")

    def nested_items(self, region: _Region, init, latch, limit=None):
        """Loops over the block's work items, z, y, x (x innermost: the vectorizable one; x below `limit`
        where given, at most the block's width, at least 1). Returns the
        accumulators' phis, the linear index, the thread index and `close(new, hints)`, which ends the loops
        at `latch` (the builder there) and returns the accumulators after them."""
        b = self.b
        bx, by, bz = self.uniform["block_dim"]
        pre = b.block
        zbody, ybody, xbody = (self.block(f"r{region.code}.{n}") for n in ("z", "y", "x"))
        xend, yend = self.block(f"r{region.code}.xend"), self.block(f"r{region.code}.yend")
        b.br(zbody)
        b.position_at_end(zbody)
        z = b.phi(self.i64, [(self.c64(0), pre)], "tid2")
        accs_z = [b.phi(v.type, [(v, pre)]) for v in init]
        b.br(ybody)
        b.position_at_end(ybody)
        y = b.phi(self.i64, [(self.c64(0), zbody)], "tid1")
        accs_y = [b.phi(v.type, [(a, zbody)]) for v, a in zip(init, accs_z)]
        row = b.mul(bx, b.add(y, b.mul(by, z)), "row")
        b.br(xbody)
        b.position_at_end(xbody)
        x = b.phi(self.i64, [(self.c64(0), ybody)], "tid0")
        accs_x = [b.phi(v.type, [(a, ybody)]) for v, a in zip(init, accs_y)]
        wi = b.add(row, x, "wi")

        def close(new, hints=()):
            out = self.block(f"r{region.code}.done")
            # innermost first: each level steps its counter and loops back, or falls to the next
            for counter, accs, bound, body, after in ((x, accs_x, bx if limit is None else limit, xbody, xend),
                                                      (y, accs_y, by, ybody, yend),
                                                      (z, accs_z, bz, zbody, out)):
                here = b.block
                following = b.add(counter, self.c64(1))
                counter.add_incoming(following, here)
                for phi, v in zip(accs, new):
                    phi.add_incoming(v, here)
                branch = b.cond_br(b.icmp("ult", following, bound), body, after)
                if counter is x and self.parallel is not None:
                    branch.set_loop_hints(*hints, parallel_accesses=self.parallel)
                b.position_at_end(after)
            return new

        return accs_x, wi, [x, y, z], close

    def linear_items(self, region: _Region, init, latch):
        """A loop over the group's items lo..hi (a warp), the thread index carried, x fastest."""
        b = self.b
        bx, by, _ = self.uniform["block_dim"]
        pre = b.block
        t0 = b.urem(self.lo, bx)
        rest = b.udiv(self.lo, bx)
        t1, t2 = b.urem(rest, by), b.udiv(rest, by)
        head = self.block(f"r{region.code}.item")
        b.br(head)
        b.position_at_end(head)
        wi = b.phi(self.i64, [(self.lo, pre)], "wi")
        tids = [b.phi(self.i64, [(t, pre)], f"tid{d}") for d, t in enumerate((t0, t1, t2))]
        accs = [b.phi(v.type, [(v, pre)]) for v in init]

        def close(new, hints=()):
            here = b.block
            wi_next = b.add(wi, self.c64(1))
            x1 = b.add(tids[0], self.c64(1))
            wrap_x = b.icmp("eq", x1, bx)
            y1 = b.add(tids[1], self.c64(1))
            wrap_y = b.and_(wrap_x, b.icmp("eq", y1, by))
            nx = b.select(wrap_x, self.c64(0), x1)
            ny = b.select(wrap_x, b.select(wrap_y, self.c64(0), y1), tids[1])
            nz = b.select(wrap_y, b.add(tids[2], self.c64(1)), tids[2])
            for phi, v in zip((wi, *tids, *accs), (wi_next, nx, ny, nz, *new)):
                phi.add_incoming(v, here)
            out = self.block(f"r{region.code}.done")
            branch = b.cond_br(b.icmp("ult", wi_next, self.hi), head, out)
            if self.parallel is not None:
                branch.set_loop_hints(*hints, parallel_accesses=self.parallel)
            b.position_at_end(out)
            return new

        return accs, wi, tids, close

    # -- block and warp results ---------------------------------------------------------------
    def block_count(self, site: Site) -> None:
        b = self.b
        predicate = site.call.args[0]

        def body(j, accs):
            count, active = accs
            live = b.xor(self.is_done(j), ConstantInt.get(self.i1, 1))
            p = b.and_(live, self.operand_for(predicate, j))
            return [b.add(count, b.zext(p, self.i32)), b.add(active, b.zext(live, self.i32))]

        count, active = self.loop(self.c64(0), self.items, [self.c32(0), self.c32(0)], body, f"count{site.code}")
        b.store(count, self.bar_count)
        b.store(active, self.bar_active)

    def warp_vote(self, site: Site) -> None:
        b = self.b
        predicate = site.call.args[0]

        def body(j, accs):
            bits, mask = accs
            live = b.xor(self.is_done(j), ConstantInt.get(self.i1, 1))
            p = b.and_(live, self.operand_for(predicate, j))
            lane = b.sub(j, self.lo)
            return [b.or_(bits, b.shl(b.zext(p, self.i64), lane)), b.or_(mask, b.shl(b.zext(live, self.i64), lane))]

        bits, mask = self.loop(self.lo, self.hi, [self.c64(0), self.c64(0)], body, f"vote{site.code}")
        b.store(bits, self.vote_bits)
        b.store(mask, self.vote_mask)

    def set_aside(self, site: Site) -> None:
        """Copy the group's values of the shuffle at `site` (their slot, items lo..hi) aside."""
        slot = self.asides[site.code]
        size = self.k.slots[slot][1]
        b = self.b
        memcpy = self.k.module.get_or_insert_function("llvm.memcpy.p0.p0.i64", FunctionType.get(
            self.k.llctx.void, [self.ptr, self.ptr, self.i64, self.i1]))
        group_bytes = b.mul(b.sub(self.hi, self.lo), self.c64(size))
        b.call(memcpy, [self.aside, self.slot_at(slot, self.lo), group_bytes, ConstantInt.get(self.i1, 0)])


#: Intrinsics that touch memory only as their operands say (or not at all) and may join a region's
#: access group.
_GROUPED_INTRINSICS = ("llvm.assume", "llvm.memcpy.", "llvm.memmove.", "llvm.memset.", "llvm.lifetime.",
                       "llvm.masked.load.", "llvm.masked.store.", "llvm.experimental.noalias.scope.decl")


#: ... of which these write or read memory through their operands.
_MEMORY_INTRINSICS = ("llvm.memcpy.", "llvm.memmove.", "llvm.memset.", "llvm.masked.")


def _may_reach(pointer, serial: set, scratch) -> bool:
    """Whether `pointer` may point into the shared arrays whose block copies are `serial`: it does
    unless every value it is computed from (through GEPs, selects and phis) is a function argument, an
    alloca, or the block's scratch memory (another array, a slot) without passing through them."""
    seen, work = set(), [pointer]
    while work:
        v = work.pop()
        if v in seen:
            continue
        seen.add(v)
        if v in serial:
            return True
        if v == scratch or isinstance(v, (AllocaInst, Argument)):
            continue
        if isinstance(v, Instruction) and v.opcode_name == "getelementptr":
            work.append(v.operands[0])
        elif isinstance(v, Instruction) and v.opcode_name == "select":
            work += [v.operands[1], v.operands[2]]
        elif isinstance(v, PHINode):
            work += list(v.incoming_values)
        else:
            return True
    return False


def _lanes(target) -> int:
    """The vector width a loop over a block's items runs at: eight 32-bit lanes where the CPU has 256-bit
    registers (one register of float32, two of int64 or float64 values), else four. (LLVM's cost model
    would pick four for most of them, being wary of their 64-bit item indices; eight runs the tiled
    matmul and the tree reduction about 1.3x faster on AVX-512.)"""
    features = getattr(target, "features", None)
    text = features() if callable(features) else ""
    return 8 if "+avx" in text.split(",") or "+avx2" in text.split(",") else 4


#: The region's way out, in _post_dominators: where its items arrive at a site or return.
_LEAVES = object()


def _post_dominators(region: _Region, heads: dict) -> dict:
    """The immediate post-dominator of each block of `region` (that every way from it to the region's
    end passes), _LEAVES where none is in the region."""
    inside = set(region.blocks)

    def onward(blk):  # successors, with _LEAVES for a step out of the region
        if blk is _LEAVES:
            return []
        found = [s for s in blk.successors if s in inside and s not in heads]
        term = blk.terminator
        if len(found) < len(blk.successors) or term is None or term.opcode_name == "ret":
            found.append(_LEAVES)
        return found

    back = {blk: [] for blk in region.blocks}
    back[_LEAVES] = []
    for blk in region.blocks:
        for succ in onward(blk):
            back[succ].append(blk)
    rpo, _ = reverse_postorder(_LEAVES, lambda blk: back[blk])
    idom = immediate_dominators(rpo, onward)
    return {blk: idom[blk] for blk in region.blocks if blk in idom}


def _step_into(succ, heads: dict, exits: dict) -> set:
    """What a step into block `succ` may reach (Dispatcher._exits): a site's block is an arrival there."""
    return {heads[succ].code} if succ in heads else exits.get(succ, set())


#: Compares of an x thread index with a uniform value whose true side is the items [0, limit): how
#: the limit follows from the value (below it, at most it).
_BELOW = {"ult": "below", "slt": "signed below", "ule": "at most", "sle": "signed at most", "eq": "at most"}
_SWAPPED = {"ult": "ugt", "ugt": "ult", "ule": "uge", "uge": "ule", "slt": "sgt", "sgt": "slt", "sle": "sge",
            "sge": "sle", "eq": "eq", "ne": "ne"}
_INVERSE = {"ult": "uge", "uge": "ult", "ule": "ugt", "ugt": "ule", "slt": "sge", "sge": "slt", "sle": "sgt",
            "sgt": "sle", "eq": "ne", "ne": "eq"}


def _tail_compare(term, uniform):
    """For a branch on `x <op> v` (x the x thread index, v `uniform(v)` or a constant): (how the limit
    follows from v, v, the work side, the idle side) where the work side is the items x < limit."""
    condition = _condition_of(term)
    if condition is None or term.opcode_name != "br" or not isinstance(condition, CompareInst) or condition.is_float:
        return None
    lhs, rhs = condition.lhs, condition.rhs
    predicate = condition.predicate
    if not _is_x_index(lhs):
        lhs, rhs, predicate = rhs, lhs, _SWAPPED[predicate]
    if not _is_x_index(lhs) or isinstance(rhs, CallInst) or not (isinstance(rhs, ConstantInt) or uniform(rhs)):
        return None
    work, idle = term.successors
    if predicate not in _BELOW:
        work, idle, predicate = idle, work, _INVERSE[predicate]
    if predicate not in _BELOW or work == idle:
        return None
    return _BELOW[predicate], rhs, work, idle


def _is_x_index(value) -> bool:
    return isinstance(value, CallInst) and value.callee is not None and value.callee.name == THREAD_INDEX_MARKER \
        and isinstance(value.args[0], ConstantInt) and value.args[0].value == 0


def _inert(inst) -> bool:
    """Whether a work item can skip `inst`: it stores, calls and waits for nothing."""
    op = inst.opcode_name
    if op in ("store", "atomicrmw", "cmpxchg", "fence", "va_arg"):
        return False
    if isinstance(inst, CallInst):
        name = inst.callee.name if inst.callee is not None else ""
        return _pure_intrinsic(inst) or name == "gpuc.wi.slot" or \
            (name.startswith("gpuc.ctx.") and name not in FENCE_MARKERS.values() and not _is_site(name))
    return True


def _condition_of(term):
    """The condition of a conditional branch or a switch, else None."""
    if term is None or term.opcode_name not in ("br", "switch") or len(term.operands) < 2:
        return None
    return term.operands[0]


def _stored_slots(blocks) -> set:
    """The slots of demoted values that `blocks` store (at the values' definitions)."""
    found = set()
    for block in blocks:
        for inst in block.instructions:
            address = inst.operands[1] if isinstance(inst, StoreInst) else None
            if isinstance(address, CallInst) and address.callee is not None and \
                    address.callee.name == "gpuc.wi.slot":
                found.add(address.args[0].value)
    return found


def _slot_of(value) -> int | None:
    """The slot a demoted value is loaded from, or None."""
    return _slot_of_address(value.operands[0]) if isinstance(value, LoadInst) else None


def _slot_of_address(address) -> int | None:
    """The slot whose per-item address `address` is, or None."""
    if isinstance(address, CallInst) and address.callee is not None and address.callee.name == "gpuc.wi.slot":
        return address.args[0].value
    return None


class _Copy:
    """One region's copy for work item `wi` (its thread index `tids`), branching to `latch` with the
    exit code where the item arrives at a site or returns: `exits` lists (code, block) for its phi."""

    def __init__(self, d: Dispatcher, region: _Region, wi, tids, latch, reads: dict) -> None:
        self.d, self.region, self.wi, self.tids, self.latch = d, region, wi, tids, latch
        b = d.b
        here = b.block
        self.exits: list = []
        self.bmap = {blk: d.block(f"r{region.code}.{blk.name or 'b'}") for blk in region.blocks}
        self.entry = self.bmap[region.start]
        self.stubs: dict = {}
        vmap, pairs, phis = {}, [], []
        for blk in region.blocks:
            b.position_at_end(self.bmap[blk])
            for inst in blk.instructions:
                if isinstance(inst, PHINode):
                    new = b.phi(inst.type, [], inst.name)
                    phis.append((inst, new))
                elif inst in reads:  # read once for the block, before the loop over items
                    vmap[inst] = reads[inst]
                    continue
                elif inst.opcode_name == "ret":  # `done` is set after the region's loop (_arrivals)
                    b.br(latch)
                    self.exits.append((d.c32(RETURNED), b.block))
                    continue
                else:
                    new = b.insert(inst.clone(), inst.name)
                    pairs.append((inst, new))
                vmap[inst] = new
        for inst, new in pairs:
            for i, op in enumerate(inst.operands):
                if isinstance(op, BasicBlock):
                    new.operands[i] = self.target(op)
                elif isinstance(op, Instruction):
                    mapped = vmap.get(op)
                    if mapped is None:
                        raise AssertionError(f"{op} is used in region {region.code} of @{d.fn.name} but not defined "
                                             "there, nor demoted")
                    new.operands[i] = mapped
        for inst, new in phis:
            for v, pred in inst.incoming:
                if pred in self.bmap:
                    new.add_incoming(vmap.get(v, v) if isinstance(v, Instruction) else v, self.bmap[pred])
        self.vmap = vmap
        self.resolve([new for _, new in pairs])
        b.position_at_end(here)

    def target(self, block):
        d, region = self.d, self.region
        site = d.heads.get(block)
        if site is None:
            return self.bmap[block]
        stub = self.stubs.get(block)
        if stub is None:
            here = d.b.block
            stub = self.stubs[block] = d.block(f"r{region.code}.to{site.code}")
            d.b.position_at_end(stub)
            d.b.br(self.latch)
            self.exits.append((d.c32(site.code), stub))
            if here is not None:
                d.b.position_at_end(here)
        return stub

    # -- the markers, for this work item ----------------------------------------------------------
    def resolve(self, copies) -> None:
        calls = [c for c in copies if isinstance(c, CallInst) and c.callee is not None]
        site = self.d.heads.get(self.region.start)
        if site is not None:
            for c in calls:
                if c.callee.name == site.marker and _is_site(c.callee.name):
                    self.site_value(site, c)
                    calls.remove(c)
                    break
        for c in calls:
            name = c.callee.name
            if name == "gpuc.wi.slot" or name.startswith("gpuc.ctx."):
                self.d.b.position_before(c)
                value = self.marker_value(name, c)
                _replace(c, value)

    def marker_value(self, name: str, c):
        d, b = self.d, self.d.b
        if name == "gpuc.wi.slot":
            return d.slot_at(c.args[0].value, self.wi)
        dim = c.args[0].value if c.args and isinstance(c.args[0], ConstantInt) else 0
        if name == INDEX_MARKER:
            return self.in_range(b.add(b.mul(d.uniform["block_index"][dim], d.uniform["block_dim"][dim]),
                                       self.tids[dim]))
        if name == THREAD_INDEX_MARKER:
            return self.in_range(self.tids[dim])
        uniform = {NDRANGE_MARKER: "ndrange", BLOCK_INDEX_MARKER: "block_index", BLOCK_DIM_MARKER: "block_dim",
                   GRID_DIM_MARKER: "grid_dim"}.get(name)
        if uniform is not None:
            return d.uniform[uniform][dim]
        if name == LANE_INDEX_MARKER:
            return b.and_(self.wi, d.c64(CPU_WARP_SIZE - 1))
        if name == WARP_SIZE_MARKER:
            return d.c64(CPU_WARP_SIZE)
        if name == SHARED_BYTES_MARKER:
            return d.shared_bytes
        if name == SHARED_MARKER:
            gv = c.args[0]
            return d.dynamic if gv.name == DYNAMIC_SHARED_GLOBAL else d.shared_memory(gv)
        if name in FENCE_MARKERS.values():
            b.fence("seq_cst", single_thread=name == FENCE_MARKERS["block"])
            return None
        raise CompilationError(f"{_where(c)}: @{name} cannot be used in a kernel with barriers on the CPU")

    def in_range(self, value):
        """`value` (an index), with LLVM told that it lies in [0, 2**62): as the context plugin does for
        gpuc.index(), so that Python's negative-index wraparound folds away and loops vectorize."""
        d, b = self.d, self.d.b
        module = d.k.module
        assume = module.get_or_insert_function("llvm.assume", FunctionType.get(d.k.llctx.void, [d.i1]))
        b.call(assume, [b.icmp("ult", value, d.c64(MAX_EXTENT))])
        return value

    def site_value(self, site: Site, c) -> None:
        d, b = self.d, self.d.b
        b.position_before(c)
        name = site.marker
        value = None
        if name in _PREDICATES:
            count = b.load(d.i32, d.bar_count)
            kind = _PREDICATES[name]
            value = (count if kind == "count" else b.icmp("ne", count, d.c32(0)) if kind == "any"
                     else b.icmp("eq", count, b.load(d.i32, d.bar_active)))
        elif name in _VOTES:
            bits = b.load(d.i64, d.vote_bits)
            kind = _VOTES[name]
            value = (bits if kind == "ballot" else b.icmp("ne", bits, d.c64(0)) if kind == "any"
                     else b.icmp("eq", bits, b.load(d.i64, d.vote_mask)))
        elif name.startswith(SHUFFLE_MARKER_PREFIX):
            value = self.shuffle(site, c.args[0], c.args[1])
        _replace(c, value)

    def shuffle(self, site: Site, own, operand):
        d, b = self.d, self.d.b
        kind = site.marker[len(SHUFFLE_MARKER_PREFIX):].split(".")[0]
        wi = self.wi
        lane = b.sub(wi, d.lo)
        op = b.sext(operand, d.i64)
        source = {"idx": lambda: b.and_(op, d.c64(CPU_WARP_SIZE - 1)), "up": lambda: b.sub(lane, op),
                  "down": lambda: b.add(lane, op), "xor": lambda: b.xor(lane, op)}[kind]()
        item = b.add(d.lo, source)
        inside = b.and_(b.icmp("ult", source, d.c64(CPU_WARP_SIZE)), b.icmp("ult", item, d.hi))
        safe = b.select(inside, item, wi)
        gone = b.icmp("eq", b.load(d.i8, b.gep(d.i8, d.done, [safe])), ConstantInt.get(d.i8, 1))
        live = b.and_(inside, b.xor(gone, ConstantInt.get(d.i1, 1)))
        slot = _slot_of(own)
        if slot is None:
            return own
        source_item = b.select(live, safe, wi)
        if site.code not in d.asides:
            return b.load(own.type, d.slot_at(slot, source_item))
        at = b.mul(b.sub(source_item, d.lo), d.c64(d.k.slots[slot][1]))
        return b.load(own.type, b.gep(d.i8, d.aside, [at]))


def _replace(call, value) -> None:
    if call.uses:
        call.replace_all_uses_with(value)
    call.erase()


def _erase_blocks(blocks) -> None:
    for block in blocks:
        for inst in block.instructions:
            if inst.uses:
                inst.replace_all_uses_with(Constant.poison(inst.type))
    for block in blocks:
        for inst in reversed(list(block.instructions)):
            inst.erase()
    for block in blocks:
        block.erase()


def lower_blocks(job, module, kernel) -> None:
    """Turn `kernel` (with every marker call inlined into it and its trailing `ptr %gpuc.ctx`, a
    %gpuc.BlockContext) into the function that runs one block (see the module doc)."""
    kernel_ = BlockKernel(module, kernel, job)
    try:
        sites = kernel_.split_sites()
        kernel_.replicate_allocas()
        kernel_.rematerialize(sites)
        kernel_.demote_live_values(sites)
        old_blocks = list(kernel.blocks)
        dispatcher = Dispatcher(kernel_, sites)
        dispatcher.entry(old_blocks[0])
        dispatcher.build(old_blocks)
        _erase_blocks(old_blocks)
        slot = module.functions.get("gpuc.wi.slot")
        if slot is not None and not slot.uses:
            slot.erase()
    finally:
        kernel_.close()
