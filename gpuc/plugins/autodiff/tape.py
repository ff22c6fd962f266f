"""The reverse sweep's tape: values stored per loop iteration, in memory that grows with the trip counts.

A gradient function keeps one tape, `{ptr data, i64 top, i64 capacity, ptr first}` in a stack slot,
starting in a small buffer on the stack (`first`, 512 bytes: short loops allocate nothing). The values
the reverses of a loop's blocks need go on as one record per iteration (`push`, at the end of the block
that carries them, reverse.py's `_records`); the reverse of that block pops the record back (`pop`).
Records are popped in the reverse order of their pushes, so one stack serves every loop, nested loops and
recursion alike. Growing (doubling, from 256 bytes) and freeing
go through two small helper functions per module that call the target's allocator
(`Target.heap_functions`): the tape is bounded by the work item's own trip counts, never by a
fixed maximum. The growing helper takes the state's fields and returns the new ones, so that the
state slot's address never leaves the function and the optimizer keeps its fields in registers.

On a target without an allocator (GCN, SPIR-V) the tape is its first buffer alone, HEAPLESS_BYTES per
work item (`Bounded`): a push that would outgrow it traps where the target can (GCN), else fills the
launch's error record (gpuc.abi.BOUNDS_TAPE, read by the OpenCL runtime after the launch, which raises a
MemoryError naming the gradient) and marks the tape failed: later pushes write the buffer's start, and the
next pop ends the item's reverse sweep (a branch to its end, before any popped value is used: a pointer
read from a failed tape would be garbage); its results are wrong, and the launch raises. No memory outside
the buffer is touched.
"""

from __future__ import annotations

from dataclasses import dataclass

import gpuc.llvm as llvm
from gpuc.abi import BOUNDS_SHAPE_WORDS, BOUNDS_TAPE, bounds_failure, bounds_record, site_text

from ..block_uniform import UNIFORM_READ

RESERVE = "gpuc.autodiff.tape.reserve"
GROW = "gpuc.autodiff.tape.grow"
FREE = "gpuc.autodiff.tape.free"
_ALIGN = 16
_FIRST = 256
INLINE_BYTES = 512
#: ... and in a kernel with blocks, where the CPU keeps it per work item in the block's scratch memory
#: (one allocation per block): a tiled loop's records for a few dozen tiles, so that items do not each
#: call the allocator.
BLOCK_INLINE_BYTES = 2048
#: ... and on a target without an allocator, where the first buffer is all the tape has.
HEAPLESS_BYTES = 4096
BOUNDED_RESERVE = RESERVE + ".bounded"


@dataclass(frozen=True)
class Bounded:
    """How a tape without an allocator reports outgrowing its buffer: `trap` (llvm.trap stops the launch),
    else the launch's error record in `record_space` (global memory), naming `site` ("file:line:col: the
    reverse sweep's tape of f"), a C string in `site_space`."""
    trap: bool
    site: str = ""
    record_space: int = 0
    site_space: int = 0


#: Metadata on every access of a tape (its state, its records) and on the calls that grow and free it: they
#: touch only memory of the work item's own, so that a CPU launch may run items in vector lanes, each with
#: its own tape (the vectorize plugin's `PRIVATE`, gpuc/plugins/vectorize/private.py).
PRIVATE = "gpuc.item.private"


def _own(inst):
    inst.set_string_metadata(PRIVATE, "")
    return inst


def state_type(module: llvm.Module):
    ctx = module.context
    return ctx.struct_type([ctx.ptr(), ctx.i64, ctx.i64, ctx.ptr()])


def record_size(b: llvm.Builder, module: llvm.Module, record) -> llvm.Value:
    """The size of a record of type `record`, rounded up to 16 bytes (a constant expression)."""
    ctx = module.context
    end = b.gep(record, llvm.Constant.null(ctx.ptr()), [llvm.ConstantInt.get(ctx.i64, 1)], inbounds=False)
    size = b.ptrtoint(end, ctx.i64)
    return b.and_(b.add(size, llvm.ConstantInt.get(ctx.i64, _ALIGN - 1)), llvm.ConstantInt.get(ctx.i64, -_ALIGN))


def init(b: llvm.Builder, module: llvm.Module, state, first, size: int = INLINE_BYTES) -> None:
    """Start the tape at `state` empty, in the stack buffer `first` of `size` bytes (16-byte aligned)."""
    ty, i64 = state_type(module), module.context.i64
    _own(b.store(first, b.struct_gep(ty, state, 0)))
    _own(b.store(llvm.ConstantInt.get(i64, 0), b.struct_gep(ty, state, 1)))
    _own(b.store(llvm.ConstantInt.get(i64, size), b.struct_gep(ty, state, 2)))
    _own(b.store(first, b.struct_gep(ty, state, 3)))


def push(b: llvm.Builder, module: llvm.Module, state, heap, values, bounded: Bounded | None = None) -> None:
    """Store `values` as one record on the tape at `state` (growing it when full; without a `heap`, as
    `bounded` says)."""
    record = module.context.struct_type([v.type for v in values])
    size = record_size(b, module, record)
    if heap is None:
        site = llvm.Constant.null(module.context.ptr(bounded.site_space)) if bounded.trap else \
            site_text(module, bounded.site, bounded.site_space)
        at = _own(b.call(_bounded_reserve(module, bounded), [state, size, site]))
    else:
        at = _own(b.call(_reserve(module, heap), [state, size]))
    for k, v in enumerate(values):
        _own(b.store(v, b.struct_gep(record, at, k), align=_align(module, v.type)))


def pop(b: llvm.Builder, module: llvm.Module, state, types, uniform=(), bounded: bool = False) -> tuple:
    """Take the last record (of `types`) off the tape at `state`: its values, and on a `bounded` tape (no
    allocator) whether it failed (an i1, else None), when the values are the buffer's first bytes and must
    not be used: the caller ends the reverse sweep there. The reads of the fields whose indices are in
    `uniform` (values uniform across a block when pushed) say so (UNIFORM_READ)."""
    ctx, i64 = module.context, module.context.i64
    record = ctx.struct_type(list(types))
    ty = state_type(module)
    top_ptr = b.struct_gep(ty, state, 1)
    top = b.sub(_own(b.load(i64, top_ptr)), record_size(b, module, record))
    failed = None
    if bounded:  # a failed tape (capacity 0: it outgrew its buffer) reads its start. (Read as volatile: the
        # branches LLVM threads through the test otherwise crashed Intel's OpenCL CPU compiler, on
        # test_reverse_kernels.py's fill_row, whose tape never fails.)
        capacity = _own(b.load(i64, b.struct_gep(ty, state, 2), volatile=True))
        failed = b.icmp("eq", capacity, llvm.ConstantInt.get(i64, 0))
        top = b.select(failed, llvm.ConstantInt.get(i64, 0), top)
    _own(b.store(top, top_ptr))
    data = _own(b.load(ctx.ptr(), b.struct_gep(ty, state, 0)))
    at = b.gep(ctx.i8, data, [top])
    values = [_own(b.load(t, b.struct_gep(record, at, k), align=_align(module, t))) for k, t in enumerate(types)]
    for k in uniform:
        values[k].set_string_metadata(UNIFORM_READ, "")
    return values, failed


def _align(module: llvm.Module, ty) -> int:
    # Records start 16-byte aligned and fields sit at multiples of their own alignment within them.
    with llvm.TargetData.from_layout(module.data_layout) as td:
        return min(_ALIGN, td.abi_alignment(ty))


def release(b: llvm.Builder, module: llvm.Module, state, heap) -> None:
    if heap is not None:  # (a bounded tape is its stack buffer alone)
        _own(b.call(_free(module, heap), [state]))


def _heap(module: llvm.Module, heap):
    ctx = module.context
    malloc_name, free_name = heap
    malloc = module.get_or_insert_function(malloc_name, llvm.FunctionType.get(ctx.ptr(), [ctx.i64]))
    free = module.get_or_insert_function(free_name, llvm.FunctionType.get(ctx.void, [ctx.ptr()]))
    return malloc, free


def _reserve(module: llvm.Module, heap) -> llvm.Function:
    """`ptr @gpuc.autodiff.tape.reserve(ptr %state, i64 %size)`: room for a record of `size` bytes
    on top of the tape (inlined; growing is a call of a cold helper)."""
    existing = module.functions.get(RESERVE)
    if existing is not None and not existing.is_declaration:
        return existing
    ctx, i64 = module.context, module.context.i64
    fn = existing or module.add_function(RESERVE, llvm.FunctionType.get(ctx.ptr(), [ctx.ptr(), i64]))
    fn.linkage = "internal"
    for attr in ("alwaysinline", "nounwind"):
        fn.attributes.add(attr)
    state, size = fn.args
    ty = state_type(module)
    with llvm.Builder(ctx) as b:
        b.position_at_end(fn.append_block("entry"))
        top_ptr = b.struct_gep(ty, state, 1)
        top = _own(b.load(i64, top_ptr))
        end = b.add(top, size)
        full = b.icmp("ugt", end, _own(b.load(i64, b.struct_gep(ty, state, 2))))
        grow, done = fn.append_block("grow"), fn.append_block("done")
        b.cond_br(full, grow, done)
        b.position_at_end(grow)
        data_ptr, cap_ptr = b.struct_gep(ty, state, 0), b.struct_gep(ty, state, 2)
        doubled = b.shl(_own(b.load(i64, cap_ptr)), llvm.ConstantInt.get(i64, 1))  # at least double it
        wanted = b.select(b.icmp("ugt", doubled, end), doubled, end)
        least = llvm.ConstantInt.get(i64, _FIRST)
        capacity = b.select(b.icmp("ugt", wanted, least), wanted, least)
        old = _own(b.load(ctx.ptr(), data_ptr))
        first = _own(b.load(ctx.ptr(), b.struct_gep(ty, state, 3)))
        _own(b.store(_own(b.call(_grow(module, heap), [old, top, first, capacity])), data_ptr))
        _own(b.store(capacity, cap_ptr))
        b.br(done)
        b.position_at_end(done)
        _own(b.store(end, top_ptr))
        b.ret(b.gep(ctx.i8, _own(b.load(ctx.ptr(), b.struct_gep(ty, state, 0))), [top]))
    return fn


def _bounded_reserve(module: llvm.Module, bounded: Bounded) -> llvm.Function:
    """`ptr @gpuc.autodiff.tape.reserve.bounded(ptr %state, i64 %size, ptr %site)`: room for a record of
    `size` bytes on top of a tape that cannot grow (see the module doc; `site` names it in the record)."""
    existing = module.functions.get(BOUNDED_RESERVE)
    if existing is not None and not existing.is_declaration:
        return existing
    ctx, i64 = module.context, module.context.i64
    fn = existing or module.add_function(BOUNDED_RESERVE, llvm.FunctionType.get(
        ctx.ptr(), [ctx.ptr(), i64, ctx.ptr(bounded.site_space)]))
    fn.linkage = "internal"
    for attr in ("alwaysinline", "nounwind"):
        fn.attributes.add(attr)
    state, size, site = fn.args
    ty = state_type(module)
    zero = llvm.ConstantInt.get(i64, 0)
    with llvm.Builder(ctx) as b:
        entry = fn.append_block("entry")
        b.position_at_end(entry)
        top_ptr = b.struct_gep(ty, state, 1)
        top = _own(b.load(i64, top_ptr))
        end = b.add(top, size)
        capacity = _own(b.load(i64, b.struct_gep(ty, state, 2)))
        full, done = fn.append_block("full"), fn.append_block("done")
        b.cond_br(b.icmp("ugt", end, capacity), full, done)
        b.position_at_end(full)
        if bounded.trap:
            b.call(module.declare_intrinsic("llvm.trap", llvm.FunctionType.get(ctx.void, [])), [])
            b.unreachable()
        else:  # the launch's record says so; the tape is failed from here on (capacity 0)
            record = bounds_record(module, True, bounded.record_space)
            fail = bounds_failure(module, record, bounded.site_space, True)
            b.call(fail, [site, zero, end, llvm.ConstantInt.get(i64, BOUNDS_TAPE), capacity,
                          *[zero] * (BOUNDS_SHAPE_WORDS - 1)])
            _own(b.store(zero, b.struct_gep(ty, state, 2)))
            b.ret(_own(b.load(ctx.ptr(), b.struct_gep(ty, state, 3))))  # the buffer's start: written, never read
        b.position_at_end(done)
        _own(b.store(end, top_ptr))
        b.ret(b.gep(ctx.i8, _own(b.load(ctx.ptr(), b.struct_gep(ty, state, 0))), [top]))
    return fn


def _grow(module: llvm.Module, heap) -> llvm.Function:
    """`ptr @gpuc.autodiff.tape.grow(ptr %data, i64 %top, ptr %first, i64 %size)`: the tape's memory
    moved to `size` bytes of the heap (its first `top` bytes copied, the old memory freed unless it is
    the stack buffer `first`)."""
    existing = module.functions.get(GROW)
    if existing is not None and not existing.is_declaration:
        return existing
    ctx, i64 = module.context, module.context.i64
    fn = existing or module.add_function(GROW, llvm.FunctionType.get(ctx.ptr(), [ctx.ptr(), i64, ctx.ptr(), i64]))
    fn.linkage = "internal"
    for attr in ("noinline", "cold", "nounwind"):
        fn.attributes.add(attr)
    old, top, first_buffer, size = fn.args
    malloc, free = _heap(module, heap)
    with llvm.Builder(ctx) as b:
        b.position_at_end(fn.append_block("entry"))
        new = b.call(malloc, [size])
        failed, got = fn.append_block("out_of_memory"), fn.append_block("allocated")
        b.cond_br(b.icmp("eq", new, llvm.Constant.null(ctx.ptr())), failed, got)
        b.position_at_end(failed)  # no memory for the tape: stop rather than write through null
        b.call(module.declare_intrinsic("llvm.trap", llvm.FunctionType.get(ctx.void, [])), [])
        b.unreachable()
        b.position_at_end(got)
        memcpy = module.declare_intrinsic("llvm.memcpy.p0.p0.i64", llvm.FunctionType.get(
            ctx.void, [ctx.ptr(), ctx.ptr(), i64, ctx.i1]))
        b.call(memcpy, [new, old, top, llvm.ConstantInt.get(ctx.i1, 0)])
        release, done = fn.append_block("release"), fn.append_block("done")
        b.cond_br(b.icmp("eq", old, first_buffer), done, release)
        b.position_at_end(release)  # the stack buffer is not the heap's
        b.call(free, [old])
        b.br(done)
        b.position_at_end(done)
        b.ret(new)
    return fn


def _free(module: llvm.Module, heap) -> llvm.Function:
    """`void @gpuc.autodiff.tape.free(ptr %state)`: give the tape's memory back (unless it never left
    the stack buffer)."""
    existing = module.functions.get(FREE)
    if existing is not None and not existing.is_declaration:
        return existing
    ctx = module.context
    fn = existing or module.add_function(FREE, llvm.FunctionType.get(ctx.void, [ctx.ptr()]))
    fn.linkage = "internal"
    for attr in ("alwaysinline", "nounwind"):  # inlined, the state slot's address stays in its function
        fn.attributes.add(attr)
    (state,) = fn.args
    _, free = _heap(module, heap)
    with llvm.Builder(ctx) as b:
        b.position_at_end(fn.append_block("entry"))
        ty = state_type(module)
        data = _own(b.load(ctx.ptr(), b.struct_gep(ty, state, 0)))
        release, done = fn.append_block("release"), fn.append_block("done")
        b.cond_br(b.icmp("eq", data, _own(b.load(ctx.ptr(), b.struct_gep(ty, state, 3)))), done, release)
        b.position_at_end(release)
        _own(b.call(free, [data]))
        b.br(done)
        b.position_at_end(done)
        b.ret()
    return fn
