"""Reverse-mode differentiation of LLVM functions: gradient functions and adjoint kernels.

The gradient function of f runs f forward (a copy of its blocks, side effects included), then
walks the blocks it ran backwards, each reverse block applying the adjoint rules of its
instructions in reverse order (docs/autodiff.md, "Reverse mode"):

- Adjoints of SSA values live in stack slots, read and zeroed where the value is defined
  (so a loop's values start each iteration's reverse at zero); promoting them to registers is
  LLVM's work.
- Which predecessor a block was entered from is a phi of the forward copy; the reverse of the
  block branches back to the reverse of that predecessor.
- Primal values a reverse block needs come from a stack slot written where they are defined
  when that block or the definition runs at most once (outside every cycle of the CFG); inside
  loops, what the reverses of a loop's blocks need goes onto a tape, one record per iteration
  (`_records`), which the reverse pops (gpuc/plugins/autodiff/tape.py). Integer values, comparisons and
  addresses that follow from the loops' counters are computed again instead (recompute.py), and so are the
  callees of calls that are not inlined (recursion), whose gradient functions rerun them.
- Memory: pointers into arrays with a shadow (a kernel's float arrays, an active pointer
  parameter) and into the function's own stack slots have shadow pointers. The reverse of a
  load adds the value's adjoint to the shadow; the reverse of a store moves the shadow into the
  stored value's adjoint and zeroes it (Enzyme's semantics). Adds into the shadow of an array
  that several work items may touch are atomic, except where every access of that array is at
  the work item's own index.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import gpuc.llvm as llvm
from gpuc.abi import (ADJOINT_DISTINCT_ATTRIBUTE, ADJOINT_OUTPUTS_KEPT_ATTRIBUTE, ADJOINT_SPANS_ATTRIBUTE,
                      DYNAMIC_SHARED_GLOBAL, LAUNCH_SIZE_PARAMS, MAX_EXTENT, SERIAL_ITEMS_ATTRIBUTE)
from gpuc.compiler import dominates, immediate_dominators, natural_loop, on_cycle, reverse_postorder
from gpuc.errors import CompilationError

from . import access, blocks, masked, recompute, restore, sums, tape, temporaries
from .cfg import Copier, cyclic_blocks, keep_loops_whole, reverse_post_order, successors
from .kinds import carries_floats, define, error, locate
from .memory import allocates, stores_into_outputs
from .memory import is_pointer as _is_pointer, pointer_sources as _pointer_sources, roots as _roots
from .reverse_rules import RULES, accumulate_into, additive_zero, memory_effects, zero
from ..block_uniform import uniform_values
from ..workitems import OWN_ELEMENT, same_for_every_item

_UNSUPPORTED = ("invoke", "callbr", "va_arg", "landingpad", "resume", "indirectbr", "catchswitch", "cleanupret")
_DERIVED = ("getelementptr", "addrspacecast", "bitcast", "select", "phi")


#: Metadata on the load and the store of `shadow += contribution` into an array's shadow (not atomic): the
#: adds of several work items into one element may run in any order, so that a CPU launch may run items in
#: vector lanes where their elements meet (a stencil's neighbours; gpuc/plugins/vectorize/memory.py).
ACCUMULATE = "gpuc.accumulate"


@dataclass(frozen=True)
class Settings:
    """What the target offers the reverse sweep."""

    #: (malloc, free) names for the tape, or None when the target has no allocator.
    heap: tuple | None = None
    #: Whether float atomicrmw fadd exists, and why not.
    float_atomics: bool = True
    float_atomics_missing: str = ""
    #: Whether several work items may run the function at once (adds into shared shadows are atomic).
    concurrent: bool = False
    #: With `concurrent`: only work items farther apart than every shift of a NEAR array run at once
    #: (the CPU's parity schedule), so only ANY arrays need atomic adds (access.py).
    parity: bool = False
    #: With `concurrent`: a block's work items run one after another (the CPU), so adds into the shadow of
    #: its shared memory need no atomics.
    serial_blocks: bool = False
    #: With `concurrent`: the CPU's launch entry runs chunks of items on one thread each, and the `last`
    #: point lowers the marker of sums.py: adds of every item into one element are summed per chunk.
    chunk_sums: bool = False
    target_name: str = "this target"
    #: With `concurrent`: blocks that run at once differ along every dimension the plugin reports (the
    #: CPU's blockwise schedule), so arrays one coordinate of which is index(d) for such a d need no atomics.
    blockwise: bool = False
    #: Without a heap, how a tape that outgrows its buffer is reported (tape.Bounded's fields but the site):
    #: `trap`, else the launch's error record in `record_space` (None: the target has neither, and loops
    #: that need a tape are refused), its site text in `site_space`.
    trap: bool = False
    record_space: int | None = None
    site_space: int = 0
    #: Where the Python function an LLVM function was compiled from is defined (by name; None unknown):
    #: what a bounded tape's error names where its instructions carry no location.
    definition: object = None


def _recursive(fn: llvm.Function) -> bool:
    """Whether `fn` calls itself, directly or through other defined functions."""
    seen, work = set(), [fn]
    while work:
        for inst in work.pop().instructions():
            callee = getattr(inst, "callee", None) if isinstance(inst, llvm.CallInst) else None
            if not isinstance(callee, llvm.Function) or callee.is_declaration:
                continue
            if callee.name == fn.name:
                return True
            if callee.name not in seen:
                seen.add(callee.name)
                work.append(callee)
    return False


def gradient_name(fn: llvm.Function, mask: str, settings: Settings) -> str:
    return f"{fn.name}.gradient.{mask}" + (".concurrent" if settings.concurrent else "")


def callee_settings(settings: Settings) -> Settings:
    """What a callee's gradient is built with: it cannot tell work items' elements apart."""
    return replace(settings, parity=False, blockwise=False)


def gradient_function(module: llvm.Module, fn: llvm.Function, mask: str, settings: Settings) -> llvm.Function:
    """The gradient function of `fn` for activity `mask` (one "0"/"1" per parameter).

    An active float-carrying parameter gets an adjoint; an active pointer parameter a shadow
    pointer. The result, internal `@<fn>.gradient.<mask>`, takes fn's parameters, then one shadow
    per active pointer parameter, then (when fn returns floats) the cotangent of the result, and
    returns `{R, A...}`: fn's result R (when it carries floats) and one adjoint per active
    float-carrying parameter, or void when that is empty. Built once per function and mask.
    """
    name = gradient_name(fn, mask, settings)
    existing = module.functions.get(name)
    if existing is not None and not existing.is_declaration:
        return existing
    if fn.is_declaration:
        raise ValueError(f"{fn.name} is a declaration; only a defined function can be differentiated")
    params = fn.function_type.params
    active = [c == "1" for c in mask]
    if len(active) != len(params):
        raise ValueError(f"{fn.name} has {len(params)} parameters; the mask {mask} gives {len(active)}")
    ctx = module.context
    shadow_params = [t for t, a in zip(params, active) if a and isinstance(t, llvm.PointerType)]
    adjoint_params = [t for t, a in zip(params, active) if a and not isinstance(t, llvm.PointerType)]
    ret = fn.return_type
    returns_floats = carries_floats(ret)
    extra = shadow_params + ([ret] if returns_floats else [])
    fields = ([ret] if returns_floats else []) + adjoint_params
    result = ctx.struct_type(fields) if fields else ctx.void
    fnty = llvm.FunctionType.get(result, list(params) + extra)
    n = len(params)
    shadows, k = {}, n
    for i, (t, a) in enumerate(zip(params, active)):
        if a and isinstance(t, llvm.PointerType):
            shadows[i] = k
            k += 1
    return define(module, name, fnty, existing, lambda gfn: _Reverse(
        module, fn, gfn, settings, active=active, shadows=shadows, cotangent=k if returns_floats else None,
        results=fields).run())


def adjoint_body(module: llvm.Module, kernel: llvm.Function, marker: llvm.CallInst, settings: Settings) -> tuple:
    """Turn `kernel`, whose body ends in the adjoint marker call

        call void @gpuc.autodiff.rev.adjoint(i64 %index0, i64 %index1, i64 %index2, ptr %x, ptr %dx, ...)

    into its own adjoint: the body before the marker is the primal; each (array, shadow) pair names a
    shadow for the array's data pointer; the index values say which offsets are the work item's own.
    Returns (the largest shift along each dimension of the arrays work items share (access.py), how many
    loads from shared memory the reverse loads again instead of taping their values (blocks.py), the
    dimensions along which blocks that run at once must differ (`blockwise`), and with `parity` the
    dimension (or None) whose index work items that run at once must not share (`_atomic_bases`))."""
    args = marker.args
    if len(args) < 3 or len(args) % 2 == 0:
        raise CompilationError(f"the adjoint request in @{kernel.name} is malformed: {str(marker).strip()}")
    indices = {v: d for d, v in enumerate(args[:3]) if isinstance(v, llvm.Instruction)}
    params = list(kernel.args)
    shadows = {}
    for primal, shadow in zip(args[3::2], args[4::2]):
        if not (isinstance(primal, llvm.Argument) and isinstance(shadow, llvm.Argument)):
            raise CompilationError(f"the adjoint request in @{kernel.name} pairs values that are not parameters")
        shadows[params.index(primal)] = params.index(shadow)
    marker.erase()
    read_dims = {d for v, d in indices.items() if _reads_index(v)}
    # Dimensions the launch spans count as read: work items that differ only there share every element.
    spans = kernel.attributes.get(ADJOINT_SPANS_ATTRIBUTE)
    if spans is not None:
        spans = {int(d) for d in spans.split(",") if d}
        read_dims |= spans
    # The primal body moves into a function of the same type; the kernel gets the gradient's body.
    primal = module.add_function(f"{kernel.name}.primal", kernel.function_type)
    primal.linkage = "internal"
    for old, new in zip(kernel.args, primal.args):
        new.name = old.name
        if old.uses:
            old.replace_all_uses_with(new)
    for block in list(kernel.blocks):
        primal.append_existing_block(block)
    grad = module.add_function(f"{kernel.name}.adjoint", kernel.function_type)
    grad.linkage = "internal"
    # The kernel becomes one call of it: inlined with the kernel into a launch loop (the CPU's),
    # whatever its size, so that the loop can vectorize.
    grad.attributes.add("alwaysinline")
    try:
        builder = _Reverse(module, primal, grad, settings, active=[i in shadows for i in range(len(params))],
                           shadows=shadows, cotangent=None, results=[], indices=indices, read_dims=read_dims)
        builder.spans = spans
        builder.mark_uniform = settings.serial_blocks and blocks.uses_blocks(primal)
        builder.adjoint_kernel = True
        builder.distinct = kernel.attributes.get(ADJOINT_DISTINCT_ATTRIBUTE) is not None
        builder.outputs_kept = kernel.attributes.get(ADJOINT_OUTPUTS_KEPT_ATTRIBUTE) is not None
        builder.run()
    except BaseException:
        grad.erase()
        # Leave the kernel as it was (but for the request): the compile reports the error.
        for old, new in zip(primal.args, kernel.args):
            if old.uses:
                old.replace_all_uses_with(new)
        for block in list(primal.blocks):
            kernel.append_existing_block(block)
        primal.erase()
        raise
    primal.erase()
    serial = [g.name for g in builder.shared_shadows] + [DYNAMIC_SHARED_GLOBAL] * (builder.dynamic is not None)
    if settings.serial_blocks and serial:
        # items add into one shadow element without atomics: the CPU's item loops keep their order there
        kernel.attributes.add(SERIAL_ITEMS_ATTRIBUTE, ",".join(serial))
    with llvm.Builder(module.context) as b:
        b.position_at_end(kernel.append_block("entry"))
        b.call(grad, list(kernel.args))
        b.ret()
    return builder.reach, len(builder.reloaded), tuple(sorted(builder.apart_blocks)), builder.slab, builder.kept


class _Reverse(Copier):
    """Builds the body of gradient function `gfn` from `fn` (see the module doc)."""

    def __init__(self, module, fn, gfn, settings: Settings, *, active, shadows: dict, cotangent, results,
                 indices=None, read_dims=(0, 1, 2)) -> None:
        self.module, self.fn, self.gfn, self.settings = module, fn, gfn, settings
        self.ctx = module.context
        self.indices = indices or {}
        self.read_dims = read_dims
        self.spans = None  # the dimensions the launch spans, where the request says (ADJOINT_SPANS_ATTRIBUTE)
        self.reach, self.apart_blocks, self.slab = (0, 0, 0), set(), None
        self.vmap: dict = {}
        self.bmap: dict = {}
        self.rmap: dict = {}
        self.shadows: dict = {}     # fn's pointers -> their shadows in gfn's forward part
        self.adjoints: dict = {}    # fn's active values -> their adjoint slots
        self.slots: dict = {}       # gfn's forward values -> the slots keeping them for the reverse
        self.pushes: dict = {}      # fn's block -> {gfn value: placeholder} popped at its reverse's start
        self.from_phis: dict = {}   # fn's join block -> the i32 phi saying which predecessor it came from
        self.phis: list = []
        self.cotangent_index, self.results = cotangent, results
        self.active_params = active
        self.shadow_params = shadows
        self.current = None
        self.tape_state = None
        self.bounded = None  # tape.Bounded, on a target without an allocator
        self.shared_shadows: list = []  # the shadows of the shared arrays fn uses (blocks.py)
        #: Whether gfn is a kernel's adjoint (adjoint_body), whose dynamic shared memory holds the primal's
        #: and its shadow (blocks.dynamic_layout); then (the primal's bytes, the shadow's offset) once used.
        self.adjoint_kernel = False
        self.dynamic = None
        #: Whether the kernel's own gradient (its arguments the same in every work item) keeps the values
        #: a block's items push alike (block_uniform.py) marked so when popped: block kernels on the CPU
        #: then keep what follows from them once per block. Set by adjoint_body.
        self.mark_uniform = False
        self.uniform_forward = None
        #: Whether the launch checked that the kernel's arrays do not overlap (gpuc.abi.ADJOINT_DISTINCT_ATTRIBUTE):
        #: the reverse may then load again arrays the kernel never writes (restore.py). Set by adjoint_body.
        self.distinct = False
        #: Whether the arrays the kernel only stores into keep what they hold (gpuc.abi.ADJOINT_OUTPUTS_KEPT_ATTRIBUTE):
        #: the forward part leaves out its stores there (`left_out`). Set by adjoint_body.
        self.outputs_kept = False
        self.left_out: set = set()
        self.kept: tuple = ()  # the names of the arrays those stores go to

    # -- analysis ------------------------------------------------------------------------------
    def _analyse(self) -> None:
        fn = self.fn
        self.order = reverse_post_order(fn)
        reachable = set(self.order)
        self.preds = {b: [] for b in self.order}
        for block in self.order:
            for succ in successors(block):
                if block not in self.preds[succ]:
                    self.preds[succ].append(block)
        self.cyclic = cyclic_blocks(self.order, self.preds)
        self.reachable = reachable
        self.temporaries = {inst for block in self.order for inst in block.instructions
                            if allocates(inst, self.settings.heap)}
        shadowed = {a for i, a in enumerate(fn.args) if i in self.shadow_params}
        changed = True
        while changed:  # pointers into shadowed memory: a fixpoint over phis
            changed = False
            for block in self.order:
                for inst in block.instructions:
                    if inst in shadowed or not _is_pointer(inst.type):
                        continue
                    op = inst.opcode_name
                    if op == "alloca" or inst in self.temporaries or blocks.is_shared(inst):
                        shadowed.add(inst)
                        changed = True
                    elif op in _DERIVED and any(v in shadowed for v in _pointer_sources(inst)):
                        shadowed.add(inst)
                        changed = True
        self.shadowed = shadowed
        # Pointers into the work item's private memory only (its stack slots and heap temporaries):
        # every root they may come from is one. One that may point into an array as well is an array
        # access (select(c, t, slot)).
        self.roots = {p: _roots(p) for p in shadowed if isinstance(p, llvm.Instruction)}
        self.stack = {p for p, r in self.roots.items()
                      if r and all(isinstance(x, llvm.AllocaInst) or x in self.temporaries for x in r)}
        varied = {a for i, a in enumerate(fn.args)
                  if self.active_params[i] and carries_floats(a.type)}
        changed = True
        while changed:
            changed = False
            for block in self.order:
                for inst in block.instructions:
                    if inst not in varied and carries_floats(inst.type) and self._varies(inst, varied):
                        varied.add(inst)
                        changed = True
        self.varied = varied
        # shared memory restored by the reverse, its loads read again (blocks.py)
        self.reloaded, self.restored = blocks.reloaded_loads(self)
        self.overwritten: dict = {}  # fn's restored stores -> the value each overwrote (gfn's forward part)
        self.rewound = restore.plan(self)  # ... those whose overwritten value the reverse computes again
        self.atomic_bases = self._atomic_bases()
        self.writes_memory = memory_effects(fn, heap=self.settings.heap)[1]
        if self.outputs_kept:
            into = {store: outputs for store, outputs in stores_into_outputs(fn).items()
                    if store not in self.restored}
            self.left_out = set(into)
            self.kept = tuple(sorted({param.name.removesuffix(".data") for outputs in into.values()
                                      for param in outputs}))

    def _varies(self, inst, varied) -> bool:
        op = inst.opcode_name
        if op == "load" or op == "atomicrmw":
            return inst.operands[0] in self.shadowed
        if op == "call":
            callee = inst.callee
            if masked.kind(callee) == "load":
                return masked.varies(inst, varied, self.shadowed)
            if isinstance(callee, llvm.Function) and not callee.is_declaration:
                return any(a in varied or a in self.shadowed for a in inst.args)
            return any(a in varied for a in inst.args)
        if op == "phi":
            return any(v in varied for v in inst.incoming_values)
        return any(v in varied for v in inst.operands)

    def _atomic_bases(self) -> set:
        """The arrays (pointer parameters) whose shadow several work items running at once may add to:
        with `parity` (runs of items farther apart than any shift run at once) those whose
        footprint is ANY, else all but the OWN ones (access.py); with `blockwise` (blocks that run at once
        differ along every dimension in `apart_blocks`) not those that one coordinate of which is
        index(d) partitions along a d it adds to `apart_blocks` (access.partition)."""
        self.summed, self.summed_primal = set(), set()
        if not self.settings.concurrent:
            return set()
        sized: dict = {}  # base -> [(pointer, or None for no exact access, bytes of the element accessed)]
        written: set = set()  # the bases the function may write through (stores, atomics, calls)
        touched: set = set()  # ... and those it accesses other than by atomic adds whose result is unused
        adds = []  # those atomic adds: (instruction, its pointer's one base)
        with llvm.TargetData.from_layout(self.module.data_layout) as td:
            for block in self.order:
                for inst in block.instructions:
                    op = inst.opcode_name
                    if op in ("load", "store", "atomicrmw"):
                        pointer = inst.operands[0 if op != "store" else 1]
                        if pointer in self.shadowed and pointer not in self.stack:
                            # atomicrmw: every item may add to the same element (gpuc.atomic_add's purpose);
                            # a pointer chosen among several places (select, phi) may be any element
                            roots = self._roots_of(pointer)
                            exact = op != "atomicrmw" and len(roots) == 1 and _base(pointer) in roots
                            ty = inst.type if op == "load" else inst.operands[0 if op == "store" else 1].type
                            element = td.size_of(ty.element_type if isinstance(ty, llvm.VectorType) else ty)
                            for root in roots:
                                sized.setdefault(root, []).append((pointer if exact else None, element))
                            if op != "load":
                                written |= roots
                            if op == "atomicrmw" and inst.operation == "fadd" and not inst.uses \
                                    and len(roots) == 1 and _base(pointer) in roots:
                                adds.append((inst, _base(pointer)))
                            else:
                                touched |= roots
                    elif op == "call":
                        for a in inst.args:
                            if a in self.shadowed and a not in self.stack:
                                for root in self._roots_of(a):
                                    sized.setdefault(root, []).append((None, 0))
                                written |= self._roots_of(a)
                                touched |= self._roots_of(a)
                    elif op == "cmpxchg" and inst.operands[0] in self.shadowed:
                        written |= self._roots_of(inst.operands[0])
                        touched |= self._roots_of(inst.operands[0])
            accesses = {base: [p for p, _ in pairs] for base, pairs in sized.items()}
            found = access.footprints(accesses, self.indices, td.size_of, self.read_dims)
            self.footprints = found
            reach = [max((f.reach[d] for f in found.values() if f.kind == access.NEAR), default=0) for d in range(3)]
            self.reach = tuple(reach)
            shared = (access.ANY,) if self.settings.parity else (access.ANY, access.NEAR)
            atomic = {base for base, f in found.items() if f.kind in shared
                      and not (self.settings.serial_blocks and blocks.is_shared(base))}
            # Arrays one coordinate of which is index(d) (access.partition): items whose indices along d differ
            # never meet there. With blocks that run at once differing along d (`blockwise`), with d the one
            # dimension the launch spans, or with d the slowest it spans and no two items that run at once
            # sharing index(d) (`parity`: the CPU's runs then hold whole slabs), they need no atomics.
            spans = self.spans
            top = max(spans) if spans else None
            for base in sorted(atomic, key=lambda v: v.name):
                if blocks.is_shared(base) or not isinstance(base, llvm.Argument):
                    continue
                if not (self.settings.blockwise or top is not None and (self.settings.parity or spans == {top})):
                    continue
                d = access.partition(sized[base], base, self.indices, td.size_of, list(self.fn.args))
                if d is None:
                    continue
                if self.settings.blockwise:
                    self.apart_blocks.add(d)
                elif d != top:
                    continue
                elif self.settings.parity and d > 0:
                    self.slab = d
                atomic.discard(base)
            if self.settings.chunk_sums and self.settings.float_atomics and not blocks.uses_blocks(self.fn):
                # one element of an array the function only reads, the same for every item (sums.py)
                for base in atomic - written:
                    if isinstance(base, llvm.Argument) and not blocks.is_shared(base):
                        self.summed |= {pointer for pointer, _ in sized[base] if pointer is not None
                                        and access.same_element(pointer, base, self.indices, td.size_of)}
                # the primal's own atomic adds (a loss summed over the items) into one element of an array it
                # accesses no other way
                self.summed_primal = {inst for inst, base in adds
                                      if base not in touched and isinstance(base, llvm.Argument)
                                      and not blocks.is_shared(base) and str(inst.type) in ("float", "double")
                                      and access.same_element(inst.operands[0], base, self.indices, td.size_of)}
        return atomic

    def _roots_of(self, pointer) -> set:
        """The parameters and slots fn's shadowed `pointer` may point into."""
        return self.roots.get(pointer) or {pointer}

    # -- building --------------------------------------------------------------------------------
    def run(self) -> None:
        gfn = self.gfn
        self._analyse()
        b = self.b = llvm.Builder(self.ctx)
        try:
            self.alloca_block = gfn.append_block("alloca")
            for block in self.order:
                self.bmap[block] = gfn.append_block(f"fwd.{block.name}" if block.name else "fwd")
            self.exit = gfn.append_block("fwd.exit")
            for block in self.order:
                self.rmap[block] = gfn.append_block(f"rev.{block.name}" if block.name else "rev")
            self.done = gfn.append_block("rev.done")
            self._arguments()
            self._forward()
            self._reverse()
            self._finish()
            keep_loops_whole(gfn)  # the reverse's loops, whose counters (recompute.py) would let it unroll them
        finally:
            b.close()

    def _arguments(self) -> None:
        b, gfn = self.b, self.gfn
        b.position_at_end(self.alloca_block)
        for i, (arg, new) in enumerate(zip(self.fn.args, gfn.args)):
            new.name = arg.name
            self.vmap[arg] = new
            if i in self.shadow_params:
                shadow = gfn.args[self.shadow_params[i]]
                if not shadow.name:
                    shadow.name = f"{arg.name or 'arg'}.shadow"
                self.shadows[arg] = shadow
            if arg in self.varied:
                self.adjoints[arg] = self._slot(arg.type, f"{arg.name}.adj")
        for block in self.order:  # every active value's adjoint exists before any rule reads it
            for inst in block.instructions:
                if inst in self.varied:
                    self.adjoints[inst] = self._slot(inst.type, f"{inst.name}.adj" if inst.name else "")
        if self.cotangent_index is not None:
            gfn.args[self.cotangent_index].name = "cotangent"

    def _slot(self, ty, name: str = "", *, zeroed: bool = True):
        """A stack slot in gfn's first block (set to -0.0 there: adjoints start at zero)."""
        b = self.b
        saved = b.block
        b.position_at_end(self.alloca_block)
        slot = b.alloca(ty, name)
        if zeroed:
            b.store(additive_zero(b, ty), slot)
        if saved is not None and saved != self.alloca_block:
            b.position_at_end(saved)
        return slot

    def error(self, inst, message: str, hint: str | None = None) -> CompilationError:
        return error(self.fn, inst, message, hint)

    # -- the forward part ------------------------------------------------------------------------
    def _forward(self) -> None:
        b = self.b
        for block in self.order:
            b.position_at_end(self.bmap[block])
            if len(self.preds[block]) > 1:
                self.from_phis[block] = b.phi(self.ctx.i32, name="from")
            for inst in list(block.instructions):
                self._forward_instruction(inst)
        self._fill_phis()
        b.position_at_end(self.exit)
        self.returns = [blk for blk in self.order if blk.terminator.opcode_name == "ret"]
        if not self.returns:
            raise self.error(None, "the function never returns")
        self.exit_from = None
        if len(self.returns) > 1:
            self.exit_from = b.phi(self.ctx.i32, [(llvm.ConstantInt.get(self.ctx.i32, k), self.bmap[blk])
                                                  for k, blk in enumerate(self.returns)], "exit.from")
        ret = self.fn.return_type
        self.result = None
        if str(ret) != "void":
            values = [(self.value(blk.terminator.operands[0]), self.bmap[blk]) for blk in self.returns]
            self.result = values[0][0] if len(values) == 1 else b.phi(ret, values, "result")

    def _forward_instruction(self, inst) -> None:
        op = inst.opcode_name
        if op in _UNSUPPORTED:
            raise self.error(inst, f"`{op}` is not differentiated")
        if op == "phi":
            new = self.vmap[inst] = self.b.phi(inst.type, name=inst.name)
            shadow = None
            if inst in self.shadowed:
                shadow = self.shadows[inst] = self.b.phi(inst.type)
            self.phis.append((inst, new, shadow))
        elif op == "ret":
            self.b.br(self.exit)
        elif op == "alloca":
            self._alloca(inst)
        elif op == "call" and isinstance(inst.callee, llvm.Function) and inst.callee.name.startswith("llvm.dbg."):
            return
        elif self.adjoint_kernel and blocks.is_shared_bytes(inst):  # the primal's, not the adjoint's own
            self.vmap[inst] = blocks.dynamic_layout(self)[0]
        elif inst in self.temporaries:
            self.vmap[inst] = self.clone(inst)
            self.shadows[inst] = self.b.call(temporaries.shadow_allocator(self.module, self.settings.heap),
                                             [self.value(inst.args[0])], f"{inst.name}.shadow" if inst.name else "")
        else:
            self._check_memory(inst)
            if inst in self.left_out:  # into an array that keeps what the primal stored there
                return
            if inst in self.summed_primal:  # summed per chunk of items (sums.py)
                pointer, value = (self.value(v) for v in inst.operands)
                self.b.call(sums.marker(self.module, value.type), [pointer, value])
                return
            if inst in self.restored:
                old = self.overwritten[inst] = self.b.load(inst.operands[0].type, self.value(inst.operands[1]),
                                                           align=inst.alignment)
                if inst in self.rewound:
                    restore.keep_first(self, inst, self.rewound[inst], old)
            new = self.vmap[inst] = self.clone(inst)
            if inst in self.shadowed and blocks.is_shared(inst):
                self.shadows[inst] = blocks.shared_shadow(self, inst, new)
            elif inst in self.shadowed and op in ("getelementptr", "addrspacecast", "bitcast", "select"):
                sources = _pointer_sources(inst)
                if not all(s in self.shadowed for s in sources):
                    raise self.error(inst, "a pointer chosen between shadowed memory and other memory")
                shadow = self.b.insert(new.clone())
                if op == "select":
                    shadow.operands[1], shadow.operands[2] = self.shadows[sources[0]], self.shadows[sources[1]]
                else:
                    shadow.operands[0] = self.shadows[sources[0]]
                self.shadows[inst] = shadow

    def _alloca(self, inst) -> None:
        if inst.parent != self.fn.entry_block or not isinstance(inst.operands[0], llvm.ConstantInt):
            raise self.error(inst, "a stack allocation of run-time size, or outside the entry block")
        b = self.b
        saved = b.block
        b.position_at_end(self.alloca_block)
        new = self.vmap[inst] = b.insert(inst.clone(), inst.name)
        shadow = self.shadows[inst] = b.insert(inst.clone(), f"{inst.name}.shadow" if inst.name else "")
        ty = inst.allocated_type
        count = inst.operands[0].value
        with llvm.TargetData.from_layout(self.module.data_layout) as td:
            size = td.size_of(ty) * count
        i64 = self.ctx.i64
        memset = self.module.declare_intrinsic("llvm.memset.p0.i64", llvm.FunctionType.get(
            self.ctx.void, [new.type, self.ctx.i8, i64, self.ctx.i1]))
        b.call(memset, [shadow, llvm.ConstantInt.get(self.ctx.i8, 0), llvm.ConstantInt.get(i64, size),
                        llvm.ConstantInt.get(self.ctx.i1, 0)])
        b.position_at_end(saved)

    def _check_memory(self, inst) -> None:
        op = inst.opcode_name
        if op == "load" and inst.operands[0] in self.shadowed and isinstance(inst.type, llvm.PointerType):
            raise self.error(inst, "a pointer loaded from memory that has a shadow is not differentiated")
        if op == "store":
            value, pointer = inst.operands
            if value in self.shadowed:
                raise self.error(inst, "a pointer to memory that has a shadow is stored into memory")
            if value in self.varied and pointer not in self.shadowed:
                raise self.error(inst, "a float stored outside the function's own stack and its arrays with "
                                       "shadows (through a constant argument or into a global) would carry a "
                                       "derivative the caller cannot receive")
        if op in ("atomicrmw", "cmpxchg") and inst.operands[0] in self.shadowed:
            if op == "cmpxchg" or inst.operation not in ("fadd", "fsub") and carries_floats(inst.type):
                raise self.error(inst, "atomic operations on floats other than atomic_add and atomic_sub are not "
                                       "differentiated")
        if op == "atomicrmw" and inst.operands[1] in self.varied and inst.operands[0] not in self.shadowed:
            raise self.error(inst, "a float added atomically into memory without a shadow")
        if op == "atomicrmw" and inst in self.varied and inst.uses:
            raise self.error(inst, "the old value an atomic add or subtraction returns is not differentiated; "
                                   "use it as a statement")

    def _fill_phis(self) -> None:
        for inst, new, shadow in self.phis:
            for value, block in inst.incoming:
                if block not in self.reachable:
                    continue
                new.add_incoming(self.value(value), self.bmap[block])
                if shadow is not None:
                    if value not in self.shadows:
                        raise self.error(inst, "a phi of memory that has a shadow and other memory")
                    shadow.add_incoming(self.shadows[value], self.bmap[block])
        i32 = self.ctx.i32
        for block, phi in self.from_phis.items():
            for k, pred in enumerate(self.preds[block]):
                for _ in range(successors(pred).count(block)):  # one entry per edge
                    phi.add_incoming(llvm.ConstantInt.get(i32, k), self.bmap[pred])

    # -- primal values in the reverse ------------------------------------------------------------
    def primal(self, v):
        """fn's value `v` as the forward part computed it, usable in the reverse block being built."""
        if v in self.reloaded and v.parent == self.current:  # shared memory holds it again here (blocks.py)
            return self.b.load(v.type, blocks.recomputed(self, v.operands[0]), align=v.alignment)
        if isinstance(v, llvm.Instruction):
            return self.need(self.vmap[v], v.parent)
        return self.value(v)

    def shadow(self, pointer):
        """The shadow of fn's `pointer`, usable in the reverse block being built."""
        s = self.shadows[pointer]
        if isinstance(pointer, llvm.Instruction):
            return self.need(s, pointer.parent)  # a slot's own shadow is in the first block: as it is
        return s

    def need(self, value, defined_in):
        """`value` (of gfn's forward part, defined in the copy of fn's block `defined_in`) where the
        reverse of the current block runs."""
        if not isinstance(value, llvm.Instruction) or value.parent == self.alloca_block:
            return value
        here = self.current
        if here not in self.cyclic or defined_in not in self.cyclic:
            slot = self.slots.get(value)
            if slot is None:
                slot = self.slots[value] = self._slot(value.type, zeroed=False)
                saved = self.b.block
                after = value.next
                while isinstance(after, llvm.PHINode):
                    after = after.next
                self.b.position_before(after)
                self.b.store(value, slot)
                self.b.position_at_end(saved)
            return self.b.load(value.type, slot)
        if self.recomputation.computable(value):
            return self.recomputation.compute(value, {})
        return self.taped(value)

    def taped(self, value):
        """gfn's forward `value` (defined in a loop) where the reverse of the current block (in a loop) runs:
        from the record that block's iteration pushed."""
        here = self.current
        # without a heap, a tape is a buffer of its own per call (tape.Bounded), which recursion would stack
        if self.settings.heap is None and (not self.settings.trap and self.settings.record_space is None
                                           or self.recursive):
            raise self.error(None, f"the reverse sweep needs values of each iteration of a loop of "
                                   f"{self.fn.name}, kept on a tape in memory allocated at run time, and "
                                   f"{self.settings.target_name} has no memory allocator"
                                   + (" (a buffer of fixed size per call is not given to a recursive function)"
                                      if self.settings.trap or self.settings.record_space is not None else ""),
                             "compile derivatives of loops for the CPU or PTX, which have one; loops whose values "
                             "the reverse sweep does not need (or no loops) compile everywhere")
        pending = self.pushes.setdefault(here, {})
        holder = pending.get(value)
        if holder is None:
            saved = self.b.block
            first = self.rmap[here].instructions.first
            if first is not None:
                self.b.position_before(first)
            else:
                self.b.position_at_end(self.rmap[here])
            holder = pending[value] = self.b.freeze(llvm.Constant.poison(value.type))
            self.b.position_at_end(saved)
        return holder

    # -- adjoints -------------------------------------------------------------------------------
    def take(self, v):
        """The adjoint of fn's value `v`, read and zeroed; None when `v` has none."""
        slot = self.adjoints.get(v)
        if slot is None:
            return None
        a = self.b.load(v.type, slot)
        self.b.store(additive_zero(self.b, v.type), slot)
        return a

    def accumulate(self, v, contribution) -> None:
        """Add `contribution` to the adjoint of fn's value `v` (nothing when `v` is inactive)."""
        if contribution is None or v not in self.varied:
            return
        slot = self.adjoints[v]
        b = self.b
        b.store(accumulate_into(b, b.load(v.type, slot), contribution), slot)

    def shared_element(self, pointer) -> bool:
        """Whether several work items running at once may touch the shadow element of `pointer`."""
        return pointer not in self.stack and bool(self._roots_of(pointer) & self.atomic_bases)

    def in_shared(self, pointer) -> bool:
        """Whether fn's `pointer` points into shared memory only."""
        roots = self._roots_of(pointer)
        return bool(roots) and all(blocks.is_shared(x) for x in roots)

    def take_shadow(self, pointer, ty, align):
        """The value of shadow(pointer) (of `ty`), which then holds zero: where several work items running at
        once may store to the element (all of them the same value, or the kernel's result is one of theirs),
        each exchanges it for zero atomically, so that one of them takes the seed (else each would)."""
        b, s = self.b, self.shadow(pointer)
        if not self.shared_element(pointer) or not isinstance(
                ty.element_type if isinstance(ty, llvm.VectorType) else ty, llvm.FloatingType):
            # Frozen: where LLVM's loop vectorizer predicates this load and the store after it (a store under a
            # branch), LLVM 22's instcombine folds `select(mask, masked.load(s, mask), x)` into a masked load
            # placed after the store, which then reads the zero (a silently lost gradient on one thread).
            load = b.load(ty, s, align=align)
            value = b.freeze(load)
            store = b.store(zero(ty), s, align=align)
            if self.in_shared(pointer):  # the primal stored there: no other item of the block touches it
                load.set_string_metadata(OWN_ELEMENT, "")
                store.set_string_metadata(OWN_ELEMENT, "")
            return value
        if not isinstance(ty, llvm.VectorType):
            return self.exchange_zero(s, ty)
        value = llvm.Constant.undef(ty)
        for k in range(ty.count):
            lane = b.gep(ty.element_type, s, [llvm.ConstantInt.get(self.ctx.i64, k)])
            value = b.insert_element(value, self.exchange_zero(lane, ty.element_type),
                                     llvm.ConstantInt.get(self.ctx.i32, k))
        return value

    def exchange_zero(self, pointer, ty):
        """The float of `ty` at `pointer`, exchanged for zero atomically (on the float's bits: integer
        exchange is on every target)."""
        with llvm.TargetData.from_layout(self.module.data_layout) as td:
            bits = td.size_of(ty) * 8
        word = self.ctx.int_type(bits)
        return self.b.bitcast(self.b.atomic_rmw("xchg", pointer, llvm.ConstantInt.get(word, 0)), ty)

    def add_to_shadow(self, inst, pointer, contribution) -> None:
        """shadow(pointer) += contribution, atomically where several work items may add there."""
        b, s = self.b, self.shadow(pointer)
        ty = contribution.type
        if not self.shared_element(pointer):
            align = inst.alignment if inst.opcode_name == "load" else None  # as the primal's, not the vector's
            old = b.load(ty, s, align=align)
            new = b.store(b.fadd(old, contribution), s, align=align)
            if pointer not in self.stack:  # adds of several work items into one element: any order will do
                old.set_string_metadata(ACCUMULATE, "")
                new.set_string_metadata(ACCUMULATE, "")
            return
        if pointer in self.summed and str(ty) in ("float", "double"):
            b.call(sums.marker(self.module, ty), [s, contribution])
            return
        add = self._atomic_fadd if self.settings.float_atomics else self._compare_exchange_fadd
        if isinstance(ty, llvm.VectorType):
            lane_ty = ty.element_type
            for k in range(ty.count):
                lane = b.extract_element(contribution, llvm.ConstantInt.get(self.ctx.i32, k))
                add(b.gep(lane_ty, s, [llvm.ConstantInt.get(self.ctx.i64, k)]), lane)
        else:
            add(s, contribution)

    def _atomic_fadd(self, pointer, value) -> None:
        self.b.atomic_rmw("fadd", pointer, value)

    def _compare_exchange_fadd(self, pointer, value) -> None:
        """`*pointer += value` atomically on a target without float atomics: a compare-and-swap loop on
        the float's bits (integer compare-and-swap is everywhere)."""
        self.b.compare_exchange_loop(self.gfn, pointer, value.type, lambda b, old: b.fadd(old, value), name="cas.add")

    # -- the reverse part -------------------------------------------------------------------------
    def _reverse(self) -> None:
        b, i32 = self.b, self.ctx.i32
        b.position_at_end(self.exit)
        start = self.gfn.append_block("rev.start")
        b.br(start)
        b.position_at_end(start)
        self.current = None
        cot = None if self.cotangent_index is None else self.gfn.args[self.cotangent_index]
        edges = []
        for blk in self.returns:
            edge = self.gfn.append_block("rev.from.exit")
            b.position_at_end(edge)
            self.current = blk
            if cot is not None:
                self.accumulate(blk.terminator.operands[0], cot)
            b.br(self.rmap[blk])
            edges.append(edge)
        b.position_at_end(start)
        if len(edges) == 1:
            b.br(edges[0])
        else:
            b.switch(self.exit_from, edges[0], [(llvm.ConstantInt.get(i32, k), e) for k, e in enumerate(edges)])
        for block in self.order:
            self.current = block
            b.position_at_end(self.rmap[block])
            body = [i for i in block.instructions if not isinstance(i, llvm.PHINode) and not i.is_terminator]
            for inst in reversed(body):
                self._reverse_instruction(inst)
            self._dispatch(block)
        self.recomputation.step_back()
        if self.pushes and self.mark_uniform and self.uniform_forward is None:  # before any tape code is in gfn
            self.uniform_forward = self.uniform_values()
        for carrier, members in self._records().items():
            members = [(block, _used(pending)) for block, pending in members]
            if any(pending for _, pending in members):
                self._tape(carrier, members)

    def _reverse_instruction(self, inst) -> None:
        rule = RULES.get(inst.opcode_name)
        if rule is not None:
            rule(self, inst)
        elif inst in self.varied:
            raise self.error(inst, f"no derivative rule for `{inst.opcode_name}` on floats")
        old = self.overwritten.get(inst)
        if old is not None:  # shared memory as it was before the store
            rewound = self.rewound.get(inst)
            value = self.need(old, inst.parent) if rewound is None else restore.overwritten(self, inst, rewound)
            self.b.store(value, self.primal(inst.operands[1]), align=inst.alignment)

    def _dispatch(self, block) -> None:
        """The end of `block`'s reverse: phis' adjoints to their incoming values, then back to the
        reverse of the predecessor it was entered from."""
        b, preds = self.b, self.preds[block]
        if not preds:
            b.br(self.done)
            return
        phis = [i for i in block.instructions if isinstance(i, llvm.PHINode)]
        active = [p for p in phis if p in self.varied]
        taken = [(p, self.take(p)) for p in active]
        choice = self.need(self.from_phis[block], block) if len(preds) > 1 else None
        here = b.block
        edges = []
        for pred in preds:
            edge = self.gfn.append_block(f"rev.{block.name}.from.{pred.name}")
            b.position_at_end(edge)
            for phi, a in taken:
                self.accumulate(phi.incoming_value_for(pred), a)
            b.br(self.rmap[pred])
            edges.append(edge)
            self.recomputation.back_edge(block, pred, edge)
        b.position_at_end(here)
        if choice is None:
            b.br(edges[0])
        else:
            i32 = self.ctx.i32
            b.switch(choice, edges[0], [(llvm.ConstantInt.get(i32, k), e) for k, e in enumerate(edges)])

    def _records(self) -> dict:
        """The tape's records: the blocks whose reverse pops values, grouped by the block that pushes them
        (its carrier) -> [(block, its {value: placeholder})]. A block's values go into the record of the
        farthest block C of the same innermost loop (not in a loop inside it) such that every path from the
        block reaches C (C post-dominates it: the reverse of C runs before its reverse, and dominates it)
        before coming back to it: one record, one test of the tape's room, per loop iteration rather than
        per block of the loop's body."""
        carriers = {}
        pdom = self._post_dominators()
        innermost = self.innermost_loops
        for block in self.pushes:
            carrier = here = block
            loop = innermost.get(block)
            while loop is not None:
                nxt = pdom.get(here)
                if nxt is None or innermost.get(nxt) != loop or on_cycle(block, _avoiding(nxt)):
                    break
                carrier = here = nxt
            carriers.setdefault(carrier, []).append((block, self.pushes[block]))
        return carriers

    @functools.cached_property
    def recomputation(self) -> recompute.Recomputation:
        return recompute.Recomputation(self)

    @functools.cached_property
    def innermost_loops(self) -> dict:
        """fn's blocks in natural loops -> the header of the innermost one."""
        return _innermost_loops(self.order, self.preds, self.dominator_tree)

    @functools.cached_property
    def dominator_tree(self) -> dict:
        """fn's immediate dominators."""
        return immediate_dominators(self.order, lambda blk: self.preds[blk])

    def _post_dominators(self) -> dict:
        """fn's reachable blocks that reach a return -> their immediate post-dominator (absent: the return
        blocks, whose is the exit)."""
        exit_ = object()
        succs = {exit_: list(self.returns), **self.preds}
        rpo, _ = reverse_postorder(exit_, lambda blk: succs[blk])
        into = {blk: [] for blk in rpo}
        for blk in rpo:
            for nxt in succs[blk]:
                into[nxt].append(blk)
        idom = immediate_dominators(rpo, lambda blk: into[blk])
        return {blk: up for blk, up in idom.items() if up is not exit_ and blk is not exit_}

    def _tape(self, carrier, members: list) -> None:
        """Push the values of `members` (blocks and their {value: placeholder}, see _records) as one record
        at the end of `carrier`'s forward copy, and pop it at the start of its reverse. A member's value
        reaches the carrier through a stack slot written at the member's end (one per member and value:
        its value there is the one of that iteration); the carrier's own values are pushed as they are."""
        if self.tape_state is None:
            self.tape_state = self._slot(tape.state_type(self.module), "tape", zeroed=False)
            size = tape.BLOCK_INLINE_BYTES if blocks.uses_blocks(self.fn) else tape.INLINE_BYTES
            if self.settings.heap is None:
                size = tape.HEAPLESS_BYTES
                self.bounded = tape.Bounded(self.settings.trap, self._tape_site(carrier),
                                            self.settings.record_space or 0, self.settings.site_space)
            first = self._slot(llvm.ArrayType.get(self.ctx.i8, size), "tape.first", zeroed=False)
            first.alignment = 16
            b = self.b
            b.position_at_end(self.alloca_block)
            if first.type.address_space != 0:  # (GCN's stack: the tape's pointers are generic)
                self.tape_state = b.addrspacecast(self.tape_state, self.ctx.ptr())
                first = b.addrspacecast(first, self.ctx.ptr())
            tape.init(b, self.module, self.tape_state, first, size)
        b = self.b
        b.position_at_end(self.alloca_block)  # (the last record's pop left it before a placeholder, now gone)
        holders, values, slots, uniform = [], [], [], []
        counters = {}  # a loop's counter goes on once, from the carrier: it holds one value per iteration
        for block, pending in members:
            alone = block == carrier or dominates(self.dominator_tree, block, carrier)  # every item there ran it
            for v, holder in pending.items():
                counter = self.recomputation.counter_around(v, carrier)
                if counter and v in counters:
                    holders.append((holder, counters[v]))
                    continue
                if counter:
                    counters[v] = len(values)
                if self.uniform_forward and v in self.uniform_forward and (alone or counter):
                    uniform.append(len(values))
                slot = None if block == carrier or counter else self._slot(v.type, zeroed=False)
                if slot is not None:
                    b.position_before(self.bmap[block].terminator)
                    b.store(v, slot)
                holders.append((holder, len(values)))
                values.append(v)
                slots.append(slot)
        b.position_before(self.bmap[carrier].terminator)
        values = [v if slot is None else b.load(v.type, slot) for v, slot in zip(values, slots)]
        tape.push(b, self.module, self.tape_state, self.settings.heap, values, self.bounded)
        first = self.rmap[carrier].instructions.first
        b.position_before(first)
        popped, failed = tape.pop(b, self.module, self.tape_state, [v.type for v in values], uniform,
                                  bounded=self.bounded is not None and not self.bounded.trap)
        if failed is not None:  # an outgrown bounded tape: the item's reverse sweep ends here (tape.py)
            b.split_before(first)
            b.cond_br(failed, self.done, self.rmap[carrier])
        for holder, k in holders:
            holder.replace_all_uses_with(popped[k])
            holder.erase()

    def uniform_values(self) -> set:
        """gfn's forward values that every work item of a block holds alike (block_uniform.py)."""
        return uniform_values(self.gfn, same_for_every_item, self.bmap[self.order[0]])

    @functools.cached_property
    def recursive(self) -> bool:
        """Whether fn calls itself (directly or not): on a target without an allocator it gets no tape."""
        return _recursive(self.fn)

    def _tape_site(self, block) -> str:
        """What a bounded tape's error names: the first located instruction of the loop block that pushes
        onto it, and its function (the Python name)."""
        insts = [*block.instructions, *(i for other in self.order if other != block for i in other.instructions)]
        where = next((loc for inst in insts if (loc := locate(self.fn, inst)) is not None), None)
        if where is None and self.settings.definition is not None:
            where = self.settings.definition(self.fn.name.removesuffix(".primal"))
        what = f"the reverse sweep's tape of {self.fn.name.split('.')[0]}"
        return f"{where}: {what}" if where is not None else f"@{self.fn.name}: {what}"

    def _finish(self) -> None:
        b = self.b
        b.position_at_end(self.alloca_block)
        if self.shared_shadows or self.dynamic is not None:
            blocks.zero_shared_shadows(self, b, blocks.site_of(self.fn))
        b.br(self.bmap[self.order[0]])
        b.position_at_end(self.done)
        if self.tape_state is not None:
            tape.release(b, self.module, self.tape_state, self.settings.heap)
        if not self.results:
            b.ret()
            return
        fields = []
        if carries_floats(self.fn.return_type):
            fields.append(self.result)
        for i, arg in enumerate(self.fn.args):
            if self.active_params[i] and not isinstance(arg.type, llvm.PointerType):
                slot = self.adjoints.get(arg)
                # + 0.0 turns the -0.0 an untouched adjoint holds into the 0.0 users expect
                fields.append(accumulate_into(b, b.load(arg.type, slot), zero(arg.type)) if slot is not None
                              else zero(arg.type))
        value = llvm.Constant.poison(self.gfn.return_type)
        for k, f in enumerate(fields):
            value = b.insert_value(value, f, k)
        b.ret(value)


# -- helpers ----------------------------------------------------------------------------------------

def _used(pending: dict) -> dict:
    """`pending` ({value: placeholder}, see _Reverse.taped) without the values no rule ended up using (a math
    rule asks for a call's result, which sin's derivative does not read): their placeholders go."""
    for value, holder in list(pending.items()):
        if not holder.uses:
            holder.erase()
            del pending[value]
    return pending


def _avoiding(avoid):
    """fn's successors, but never `avoid`."""
    return lambda block: [s for s in successors(block) if s != avoid]


def _innermost_loops(order, preds, idom) -> dict:
    """Each block of a natural loop (`order`: blocks in reverse post-order, `idom` their dominator tree)
    -> the header of the innermost loop it is in. Blocks on irreducible cycles only are absent."""
    latches = {}
    for block in order:
        for head in successors(block):
            if head in idom and dominates(idom, head, block):  # a back edge: block -> head
                latches.setdefault(head, []).append(block)
    bodies = {head: natural_loop(head, ends, lambda blk: preds[blk]) for head, ends in latches.items()}
    innermost = {}
    for head, body in sorted(bodies.items(), key=lambda item: -len(item[1])):  # outer loops first
        for blk in body:
            innermost[blk] = head
    return innermost


def _reads_index(value) -> bool:
    """Whether the primal body uses the index `value` for more than the launch's own bounds: the
    guard of a rounded-up grid (`index < gpuc.nD`) or the CPU's range assumption (`index < 2**62`).
    A kernel that reads index(d) so is launched with many items along d."""
    for use in value.uses:
        user = use.user
        if isinstance(user, llvm.CompareInst):
            other = [op for op in user.operands if op != value]
            if other and (isinstance(other[0], llvm.Argument) and other[0].name in LAUNCH_SIZE_PARAMS
                          or isinstance(other[0], llvm.ConstantInt) and other[0].value == MAX_EXTENT):
                continue
        return True
    return False


def _base(pointer):
    """The parameter or stack slot a pointer derives from (through GEPs and casts)."""
    seen = set()
    while isinstance(pointer, llvm.Instruction) and pointer.opcode_name in ("getelementptr", "addrspacecast",
                                                                            "bitcast") and pointer not in seen:
        seen.add(pointer)
        pointer = pointer.operands[0]
    return pointer


