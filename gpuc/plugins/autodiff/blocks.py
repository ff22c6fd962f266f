"""Adjoints of kernels that use blocks: shared memory, barriers and warp operations, reversed before
the context plugin lowers them for the target (docs/autodiff.md, "Adjoints of kernels with blocks").

The adjoint request of such a kernel is resolved at the `early` point, ahead of the context plugin,
on the kernel as every work item runs it (its callees inlined, optimized once): the block-model
markers are still calls, and the reverse sweep gives each its reverse (Enzyme's rules for GPU code):

- a barrier (or barrier_count/all/any) is a barrier again where its reverse runs, so that every
  item's adds into a shadow of shared memory happen before another item reads that shadow; syncwarp
  and fences likewise; a grid barrier is refused;
- each `gpuc.shared.array` gets a shadow array in shared memory, zeroed by the block's items at the
  start of the adjoint (then a barrier); pointers into it are shadowed like array parameters;
  `gpuc.shared.dynamic` memory's shadow follows it in the adjoint's own dynamic shared memory, which
  the launch sizes for both (`dynamic_layout`, gpuc.abi.adjoint_shared_bytes);
- a shuffle moves the cotangent back to the lane the value came from: the adjoint of `shfl_xor(v, m)`
  is `shfl_xor(a, m)`; of `shfl_down(v, d)` an `shfl_up` of it, and the other way round, with the
  lanes whose read fell outside the warp keeping their own; of `shfl_idx` (and of any shuffle whose
  operand is not a constant distance above 0) a loop over the warp's lanes, each lane adding what the
  lanes that read it got;
- votes, ballots and the geometry carry no derivative.

The result is a kernel with blocks like any other: the CPU runs it in work-item loops, the GPUs
natively.
"""

from __future__ import annotations

import gpuc.llvm as llvm
from gpuc.abi import (BARRIER_MARKER, BARRIER_PREDICATE_MARKERS, BLOCK_DIM_MARKER, BLOCK_MARKERS,
                      DYNAMIC_SHARED_GLOBAL, FENCE_MARKERS, GEOMETRY_MARKERS, GRID_BARRIER_MARKER, INDEX_MARKER, LANE_INDEX_MARKER, NDRANGE_MARKER, SHARED_MARKER,
                      MAX_EXTENT, SHADOW_ALIGN, SHARED_BYTES_MARKER, SHUFFLE_MARKER_PREFIX, SYNCWARP_MARKER,
                      THREAD_INDEX_MARKER, WARP_SIZE_MARKER)

_BARRIERS = (BARRIER_MARKER, *BARRIER_PREDICATE_MARKERS.values())
_FENCES = tuple(FENCE_MARKERS.values())
_GEOMETRY = frozenset(GEOMETRY_MARKERS + (SHARED_MARKER,))
_PURE = frozenset(GEOMETRY_MARKERS + (INDEX_MARKER, NDRANGE_MARKER))


def uses_blocks(fn: llvm.Function) -> bool:
    """Whether `fn` (its callees inlined) calls a marker of the block model."""
    return any(isinstance(inst, llvm.CallInst) and isinstance(inst.callee, llvm.Function)
               and inst.callee.name in BLOCK_MARKERS for inst in fn.instructions())


def prepare(module: llvm.Module, kernel: llvm.Function) -> None:
    """Make `kernel`'s block-model markers safe and clear to optimize before the context plugin lowers
    them: the synchronization markers `convergent` (never a call that some work items reach and others
    not: a barrier duplicated into both arms of a branch), the geometry and index markers pure, with
    their values known to lie in [0, MAX_EXTENT) (Python's wrap-around of negative indices folds away,
    so the adjoint sees `x[i]` as the work item's own element)."""
    ctx = module.context
    assume = module.get_or_insert_function("llvm.assume", llvm.FunctionType.get(ctx.void, [ctx.i1]))
    with llvm.Builder(ctx) as b:
        for inst in list(kernel.instructions()):
            if isinstance(inst, llvm.CallInst) and isinstance(inst.callee, llvm.Function) \
                    and inst.callee.name in _PURE and str(inst.type) == "i64":
                b.position_after(inst)
                b.call(assume, [b.icmp("ult", inst, llvm.ConstantInt.get(ctx.i64, MAX_EXTENT))])
    for fn in module.functions:
        if not fn.is_declaration:
            continue
        if fn.name in BLOCK_MARKERS and fn.name not in _GEOMETRY:
            fn.attributes.add("convergent")
        elif fn.name in _PURE:  # one value per work item: repeated calls are one (the adjoint's indices)
            for attribute in ("nounwind", "willreturn", "speculatable"):
                fn.attributes.add(attribute)
            fn.attributes.add("memory", 0)  # memory(none)


def is_shared(inst) -> bool:
    """Whether `inst` is `gpuc.ctx.shared(@array)`: a pointer into the block's shared memory."""
    return (isinstance(inst, llvm.CallInst) and isinstance(inst.callee, llvm.Function)
            and inst.callee.name == SHARED_MARKER)


def is_marker(callee) -> bool:
    return isinstance(callee, llvm.Function) and callee.is_declaration and callee.name.startswith("gpuc.ctx.")


# -- the forward part: shadows of shared arrays ----------------------------------------------------

def shared_shadow(r, inst, new) -> llvm.Value:
    """The shadow of shared array `inst` (fn's `gpuc.ctx.shared(@a)`, cloned as `new`): the same
    marker of `@a.shadow`, a shared array of the same type, zeroed at the adjoint's start; for
    `gpuc.shared.dynamic`, the adjoint kernel's dynamic shared memory past the primal's (`dynamic_layout`)."""
    array = inst.args[0]
    if isinstance(array, llvm.GlobalVariable) and array.name == DYNAMIC_SHARED_GLOBAL and r.adjoint_kernel:
        _, pad = dynamic_layout(r)
        return r.b.gep(r.ctx.i8, new, [pad])
    if not isinstance(array, llvm.GlobalVariable) or array.name == DYNAMIC_SHARED_GLOBAL:
        raise r.error(inst, "the shadow of gpuc.shared.dynamic memory is supported in adjoint kernels, not in "
                            "gradients of funcs", "differentiate the kernel with gpuc.adjoint, or use "
                            "gpuc.shared.array(shape, dtype) with a constant shape")
    module = r.module
    name = f"{array.name}.shadow"
    shadow = module.globals.get(name)
    if shadow is None:
        shadow = module.add_global(array.value_type, name, array.type.address_space)
        shadow.initializer = llvm.Constant.undef(array.value_type)
        shadow.linkage = "internal"
        shadow.alignment = array.alignment
        r.shared_shadows.append(shadow)
    return r.b.call(new.callee, [shadow])


def is_shared_bytes(inst) -> bool:
    """Whether `inst` is `gpuc.ctx.shared_bytes(0)`: the size of the launch's dynamic shared memory."""
    return (isinstance(inst, llvm.CallInst) and isinstance(inst.callee, llvm.Function)
            and inst.callee.name == SHARED_BYTES_MARKER)


def dynamic_layout(r):
    """(the primal's dynamic shared bytes S, the offset of their shadow) in the adjoint kernel, computed
    once at its start: it runs with gpuc.abi.adjoint_shared_bytes(S) = pad + S bytes, pad the least
    multiple of SHADOW_ALIGN at or above S, so pad = SHADOW_ALIGN * ceil(total / (2 * SHADOW_ALIGN))."""
    if r.dynamic is None:
        i32, i64 = r.ctx.i32, r.ctx.i64
        b = r.b
        saved = b.block
        first = r.alloca_block.terminator
        if first is not None:
            b.position_before(first)
        else:
            b.position_at_end(r.alloca_block)
        marker = _declare(r.module, SHARED_BYTES_MARKER, i64, [i32])
        total = b.call(marker, [llvm.ConstantInt.get(i32, 0)], "shared_bytes.total")
        c = lambda v: llvm.ConstantInt.get(i64, v)  # noqa: E731
        pad = b.mul(b.udiv(b.add(total, c(2 * SHADOW_ALIGN - 1)), c(2 * SHADOW_ALIGN)), c(SHADOW_ALIGN), "shadow.at")
        r.dynamic = (b.sub(total, pad, "shared_bytes"), pad)
        b.position_at_end(saved)
    return r.dynamic


def zero_shared_shadows(r, b: llvm.Builder, site) -> None:
    """At the adjoint's start (`b` at the end of its first block): the block's items zero every
    shared shadow together, one byte in turn each (where the items run one after another, the first
    item zeroes them, and the others go straight on), then wait at a barrier. Leaves `b` in a new
    block."""
    module, ctx = r.module, r.ctx
    i32, i64 = ctx.i32, ctx.i64
    geometry = llvm.FunctionType.get(i64, [i32])
    thread = module.get_or_insert_function(THREAD_INDEX_MARKER, geometry)
    dim = module.get_or_insert_function(BLOCK_DIM_MARKER, geometry)
    t = [b.call(thread, [llvm.ConstantInt.get(i32, d)]) for d in range(3)]
    shared = module.functions[SHARED_MARKER]
    with llvm.TargetData.from_layout(module.data_layout) as td:
        regions = [(b.call(shared, [shadow]), llvm.ConstantInt.get(i64, td.size_of(shadow.value_type)))
                   for shadow in r.shared_shadows]
    if r.dynamic is not None:
        size, pad = r.dynamic
        base = b.call(shared, [module.globals[DYNAMIC_SHARED_GLOBAL]])
        regions.append((b.gep(ctx.i8, base, [pad]), size))
    gfn = r.gfn
    if r.settings.serial_blocks:
        memset = module.get_or_insert_function("llvm.memset.p0.i64", llvm.FunctionType.get(
            ctx.void, [ctx.ptr(), ctx.i8, i64, ctx.i1]))
        first, done = gfn.append_block("shadow.zero"), gfn.append_block("shadow.zeroed")
        zero = llvm.ConstantInt.get(i64, 0)
        # x first, alone: the CPU's loops over items then run one item per row up to the barrier
        for d in range(3):
            following = first if d == 2 else gfn.append_block(f"shadow.zero.{d + 1}")
            b.cond_br(b.icmp("eq", t[d], zero), following, done)
            b.position_at_end(following)
        for base, size in regions:
            b.call(memset, [base, llvm.ConstantInt.get(ctx.i8, 0), size, llvm.ConstantInt.get(ctx.i1, 0)])
        b.br(done)
        b.position_at_end(done)
        b.call(_declare(module, BARRIER_MARKER, ctx.void, [ctx.ptr()]), [site])
        return
    n = [b.call(dim, [llvm.ConstantInt.get(i32, d)]) for d in range(3)]
    linear = b.add(t[0], b.mul(n[0], b.add(t[1], b.mul(n[1], t[2]))))
    step = b.mul(n[0], b.mul(n[1], n[2]))
    for base, size in regions:
        before = b.block
        loop, done = gfn.append_block("shadow.zero"), gfn.append_block("shadow.zeroed")
        b.cond_br(b.icmp("ult", linear, size), loop, done)
        b.position_at_end(loop)
        k = b.phi(i64, [(linear, before)])
        b.store(llvm.ConstantInt.get(ctx.i8, 0), b.gep(ctx.i8, base, [k]))
        following = b.add(k, step)
        k.add_incoming(following, loop)
        b.cond_br(b.icmp("ult", following, size), loop, done)
        b.position_at_end(done)
    b.call(_declare(module, BARRIER_MARKER, ctx.void, [ctx.ptr()]), [site])


def site_of(fn: llvm.Function):
    """A source site to name at the barriers the adjoint adds: one of fn's synchronization calls'."""
    for inst in fn.instructions():
        if isinstance(inst, llvm.CallInst) and isinstance(inst.callee, llvm.Function) and inst.args \
                and inst.callee.name.startswith("gpuc.ctx.") and inst.callee.name != SHARED_MARKER \
                and inst.args[-1].name.startswith("gpuc.site"):
            return inst.args[-1]
    return llvm.Constant.null(fn.parent.context.ptr())


# -- the reverse part ----------------------------------------------------------------------------

def reverse(r, inst) -> None:
    """The reverse of a block-model marker call `inst` in reverse transformer `r`."""
    name = inst.callee.name
    if name in _BARRIERS:
        _declared_call(r, BARRIER_MARKER, [r.primal(inst.args[-1])])
    elif name == SYNCWARP_MARKER or name in _FENCES:
        r.b.call(inst.callee, [r.primal(a) for a in inst.args])
    elif name == GRID_BARRIER_MARKER:
        raise r.error(inst, "the adjoint of a kernel with a grid barrier is not supported",
                      "split the kernel in two launches where the grid synchronizes, and differentiate each")
    elif name.startswith(SHUFFLE_MARKER_PREFIX) and inst in r.varied:
        _shuffle(r, inst)


def _declared_call(r, name: str, args):
    ctx = r.ctx
    return r.b.call(_declare(r.module, name, ctx.void, [a.type for a in args]), args)


def _declare(module, name, result, params):
    """The marker `name`, declared as the frontend does, with `convergent` where it synchronizes: the
    reverse sweep's own barriers and shuffles must not move into branches some items skip."""
    fn = module.get_or_insert_function(name, llvm.FunctionType.get(result, params))
    if name in BLOCK_MARKERS and name not in _GEOMETRY:
        fn.attributes.add("convergent")
    return fn


def _shuffle(r, inst) -> None:
    a = r.take(inst)
    if a is None:
        return
    b, module, ctx = r.b, r.module, r.ctx
    i32, i64 = ctx.i32, ctx.i64
    kind = inst.callee.name[len(SHUFFLE_MARKER_PREFIX):].split(".")[0]
    value, operand, site = inst.args
    operand, site = r.primal(operand), r.primal(site)

    def shuffle(k, v, op):
        suffix = {ctx.float: "float", ctx.double: "double", i32: "i32", i64: "i64"}[v.type]
        return b.call(_declare(module, f"{SHUFFLE_MARKER_PREFIX}{k}.{suffix}", v.type, [v.type, i32, site.type]),
                      [v, op, site])

    lane = b.trunc(b.call(_declare(module, LANE_INDEX_MARKER, i64, [i32]), [llvm.ConstantInt.get(i32, 0)]), i32)
    zero = llvm.Constant.null(a.type)
    if kind == "xor" and isinstance(operand, llvm.ConstantInt):
        r.accumulate(value, shuffle("xor", a, operand))
        return
    if kind in ("up", "down") and isinstance(operand, llvm.ConstantInt) and 0 < operand.value < 1 << 31:
        # (a distance of 0 reads the lane's own value, as a read outside the warp does: the loop below
        # tells them apart)
        back = "up" if kind == "down" else "down"
        d = operand
        # what the lanes that read this one got: for down, lane u - d (when u >= d); for up, lane u + d
        # (when it exists: its own index comes back from a shuffle of lane indices otherwise)
        got = shuffle(back, a, d)
        if kind == "down":
            reader = b.icmp("uge", lane, d)
        else:
            reader = b.icmp("ne", shuffle("down", lane, d), lane)
        # a lane whose own read fell outside the warp got its own value
        kept = b.icmp("eq", shuffle(kind, lane, d), lane)
        share = b.fadd(b.select(reader, got, zero), b.select(kept, a, zero))
        r.accumulate(value, share)
        return
    _scatter(r, inst, a, value, kind, operand, lane, shuffle)


def _scatter(r, inst, a, value, kind, operand, lane, shuffle) -> None:
    """The adjoint of a shuffle reading from any lane: for each lane k of the warp in turn, every lane
    adds k's cotangent where k read it."""
    b, module, ctx = r.b, r.module, r.ctx
    i32, i64 = ctx.i32, ctx.i64
    source = shuffle(kind, lane, operand)  # the lane each lane read (its own where it fell outside)
    width = b.trunc(b.call(_declare(module, WARP_SIZE_MARKER, i64, [i32]), [llvm.ConstantInt.get(i32, 0)]), i32)
    gfn = r.gfn
    before = b.block
    loop, done = gfn.append_block("unshuffle"), gfn.append_block("unshuffled")
    b.br(loop)
    b.position_at_end(loop)
    k = b.phi(i32, [(llvm.ConstantInt.get(i32, 0), before)])
    total = b.phi(a.type, [(llvm.Constant.null(a.type), before)])
    from_k = shuffle("idx", source, k)
    got = shuffle("idx", a, k)
    # lane k exists (in a partial warp, a read past the block's last item gives the reader's own value)
    exists = b.icmp("eq", shuffle("idx", lane, k), k)
    read_here = b.and_(exists, b.icmp("eq", from_k, lane))
    total_next = b.fadd(total, b.select(read_here, got, llvm.Constant.null(a.type)))
    k_next = b.add(k, llvm.ConstantInt.get(i32, 1))
    k.add_incoming(k_next, loop)
    total.add_incoming(total_next, loop)
    b.cond_br(b.icmp("ult", k_next, width), loop, done)
    b.position_at_end(done)
    r.accumulate(value, total_next)


# -- shared memory read again in the reverse -------------------------------------------------------
#
# A value loaded from shared memory inside a loop would go on every work item's tape (a tiled
# matmul's items each tape a row and a column of every tile: TILE times the tile per block). Instead,
# the reverse restores shared memory as it goes: each store into a shared array keeps the value it
# overwrites (on the tape), and its reverse puts that value back. So when the reverse of an
# instruction runs, shared memory holds what it held when the instruction ran forward, and a value
# loaded from it just before can be loaded again: one float per store on the tape, none per load.
# This holds for kernels free of data races (what the GPUs require of the primal): between two
# barriers, an element one item writes is read or written by no other item.

#: Calls between a shared load and its user that cannot write memory: pure LLVM intrinsics.
_PURE_INTRINSIC_PREFIXES = ("llvm.fmuladd", "llvm.fma.", "llvm.fabs", "llvm.sqrt", "llvm.minnum", "llvm.maxnum",
                            "llvm.minimum", "llvm.maximum", "llvm.copysign", "llvm.floor", "llvm.ceil", "llvm.trunc",
                            "llvm.round", "llvm.rint", "llvm.assume", "llvm.dbg.")


def reloaded_loads(r) -> tuple[set, set]:
    """(the loads from shared memory whose value the reverse of their users loads again, the stores
    into those shared arrays, which the reverse undoes). Empty when the function writes shared memory
    other than with plain stores (atomics, calls): then every value the reverse needs goes on the tape."""
    arrays_of = {}

    def arrays(pointer):
        if pointer not in r.shadowed or pointer in r.stack:
            return None
        found = arrays_of.get(pointer)
        if found is None:
            roots = r._roots_of(pointer)
            found = arrays_of[pointer] = (frozenset(x.args[0] for x in roots)
                                          if roots and all(is_shared(x) for x in roots) else frozenset())
        return found or None

    loads, stores = set(), []
    for block in r.order:
        for inst in block.instructions:
            op = inst.opcode_name
            if op in ("atomicrmw", "cmpxchg") and arrays(inst.operands[0]):
                return set(), set()
            if op == "call" and not is_shared(inst) and any(arrays(a) for a in inst.args):
                return set(), set()
            if op == "store" and arrays(inst.operands[1]):
                stores.append(inst)
            elif op == "load" and arrays(inst.operands[0]) and inst in r.varied and _used_at_once(inst) \
                    and _available(r, inst.operands[0], block):
                loads.add(inst)
    read = set().union(*(arrays(load.operands[0]) for load in loads))
    return loads, {store for store in stores if arrays(store.operands[1]) & read}


def _used_at_once(load) -> bool:
    """Whether every user of `load` follows it in its block with nothing between them that may write
    memory (so the value is still in memory where the user runs)."""
    users = {u.user for u in load.uses}
    if any(u.parent != load.parent or isinstance(u, llvm.PHINode) for u in users):
        return False
    inst = load.next
    while users and inst is not None:
        users.discard(inst)
        op = inst.opcode_name
        if op in ("store", "atomicrmw", "cmpxchg", "fence"):
            break
        if op == "call" and not (isinstance(inst.callee, llvm.Function)
                                 and inst.callee.name.startswith(_PURE_INTRINSIC_PREFIXES)):
            break
        inst = inst.next
    return not users


#: Instructions the reverse computes again from their operands instead of taping their value (an address).
_RECOMPUTED = frozenset({"add", "sub", "mul", "shl", "lshr", "ashr", "and", "or", "xor", "udiv", "sdiv", "urem",
                         "srem", "icmp", "select", "trunc", "zext", "sext", "getelementptr", "addrspacecast"})
_RECOMPUTE_LIMIT = 16


def _taped(r, value, block) -> bool:
    """Whether the reverse of `block` would take fn's `value` from the tape (computed per iteration of a
    loop that `block` is in)."""
    return isinstance(value, llvm.Instruction) and value.parent in r.cyclic and block in r.cyclic


def _available(r, pointer, block) -> bool:
    """Whether the reverse of `block` gets `pointer` without a tape: computed outside the loops `block` is
    in, or from such values by a few integer operations and GEPs (computed again: they ran forward with
    the same operands, so they cannot fault). Else taping the loaded value is as cheap."""
    seen, work = set(), [pointer]
    while work:
        v = work.pop()
        if v in seen or not _taped(r, v, block):
            continue
        if v.opcode_name not in _RECOMPUTED or len(seen) >= _RECOMPUTE_LIMIT:
            return False
        seen.add(v)
        work += v.operands
    return True


def recomputed(r, value):
    """fn's `value` in the reverse block being built, computed again where `_available` allows."""
    if not _taped(r, value, r.current):
        return r.primal(value)
    new = r.vmap[value].clone()
    for k, op in enumerate(value.operands):
        new.operands[k] = recomputed(r, op)
    return r.b.insert(new)
