"""Copying an array into a view (`out[lo:hi] = x[lo:hi]`) and augmented assignment to a view
(`a[1:] += x`) with NumPy's semantics: broadcasting, a statement that writes nothing where the shapes
do not match at run time, and a source read as if through a temporary where it may overlap the
destination (docs/frontend.md, Views):

- disjoint views (checked at run time) are copied directly;
- a shift within one layout is copied in an order that reads every element before overwriting it;
- a source of one element is read once;
- a source of at most STACK_BYTES bytes goes through a buffer on the stack;
- a 1-D copy whose writes all stay on one side of the reads still to come runs in that order;
- anything else goes through a heap buffer where the target has an allocator. Where it has none, or
  the allocation fails, the copy fails: a trap (the kernel stops with an error) where the target has
  one, and on SPIR-V, which has none, the statement writes nothing.
"""

from __future__ import annotations

import ast

from ...llvm import ArrayType as LLArray
from ...llvm import Constant, ConstantInt
from ..core.errors import UserError
from ..core.types import ArrayType, ComplexType, ScalarType, memory_type
from .views import check_writable, element, loop_nest, lower_view, shapes_of

#: The stack buffer for overlapping copies of small sources: one per function and dtype, 16-byte aligned.
STACK_BYTES = 256


def copy_array(lw, dest, dt: ArrayType, src, st: ArrayType, combine=None) -> None:
    """dest[...] = src, broadcast and converted; with `combine`, dest[...] = combine(dest[...], src[...])
    element by element, `combine(old, value)` taking dest's dtype and st's dtype to dest's dtype."""
    b, i64 = lw.b, lw.ctx.i64
    zero, one = ConstantInt.get(i64, 0), ConstantInt.get(i64, 1)
    dshapes, sshapes = shapes_of(lw, dest, dt), shapes_of(lw, src, st)
    shift = dt.ndim - st.ndim
    ok = ConstantInt.get(lw.ctx.i1, 1)
    for k, s in enumerate(sshapes):
        fits = b.or_(b.icmp("eq", s, dshapes[shift + k]), b.icmp("eq", s, one))
        ok = b.and_(ok, fits)
    go, done = lw.fn.append_block("copy.go"), lw.fn.append_block("copy.end")
    b.cond_br(ok, go, done)
    b.position_at_end(go)

    def source_indices(idx):  # a source dimension of length 1 broadcasts
        return [b.select(b.icmp("eq", sshapes[k], one), zero, idx[shift + k]) for k in range(st.ndim)]

    def put(idx, value):
        at = element(lw, dest, dt, idx)
        if combine is None:
            new = lw.convert(value, st.dtype, dt.dtype)
        else:
            new = combine(lw.load_element(at, dt.dtype), value)
        lw.store_element(at, new, dt.dtype)

    def move(idx):
        put(idx, lw.load_element(element(lw, src, st, source_indices(idx)), st.dtype))

    if dt.space != st.space:  # different memories never overlap
        loop_nest(lw, dshapes, move)
        b.br(done)
        b.position_at_end(done)
        return
    empty = ConstantInt.get(lw.ctx.i1, 0)
    for n in dshapes:
        empty = b.or_(empty, b.icmp("eq", n, zero))
    fast, slow = lw.fn.append_block("copy.disjoint"), lw.fn.append_block("copy.overlap")
    b.cond_br(b.and_(_overlap(lw, dest, dt, src, st), b.not_(empty)), slow, fast)
    b.position_at_end(fast)
    loop_nest(lw, dshapes, move)
    b.br(done)
    b.position_at_end(slow)
    if dt.ndim == st.ndim:  # a shifted copy of one layout: ordered, without a temporary
        safe, backward = _translation(lw, dest, dt, src, st)
        ordered, other = lw.fn.append_block("copy.shifted"), lw.fn.append_block("copy.general")
        b.cond_br(safe, ordered, other)
        b.position_at_end(ordered)
        _either_way(lw, backward, dshapes, move)
        b.br(done)
        b.position_at_end(other)
    _general(lw, dest, dt, dshapes, src, st, sshapes, source_indices, put, move)
    b.br(done)
    b.position_at_end(done)


def _general(lw, dest, dt, dshapes, src, st, sshapes, source_indices, put, move) -> None:
    """An overlapping copy that is no shift: see the module doc for the order of the ways tried."""
    b, i64 = lw.b, lw.ctx.i64
    size = ConstantInt.get(i64, _bytes(st.dtype))
    count = ConstantInt.get(i64, 1)
    for n in sshapes:
        count = b.mul(count, n)

    def branch(condition, name):
        """Continue in a new block where `condition` holds; the returned block is where it does not."""
        taken, rest = lw.fn.append_block(name), lw.fn.append_block("copy.else")
        b.cond_br(condition, taken, rest)
        b.position_at_end(taken)
        return rest

    rest = branch(b.icmp("eq", count, ConstantInt.get(i64, 1)), "copy.single")
    value = lw.load_element(element(lw, src, st, [ConstantInt.get(i64, 0)] * st.ndim), st.dtype)
    loop_nest(lw, dshapes, lambda idx: put(idx, value))
    done = lw.fn.append_block("copy.copied")
    b.br(done)
    b.position_at_end(rest)
    rest = branch(b.icmp("ule", b.mul(count, size), ConstantInt.get(i64, STACK_BYTES)), "copy.stack")
    _through(lw, _stack_buffer(lw, st.dtype), dshapes, src, st, sshapes, source_indices, put)
    b.br(done)
    b.position_at_end(rest)
    if dt.ndim == 1:
        forward, backward = _one_sided(lw, dest, dt, src, st, dshapes[0])
        rest = branch(b.or_(forward, backward), "copy.ordered")
        _either_way(lw, b.not_(forward), dshapes, move)
        b.br(done)
        b.position_at_end(rest)
    heap = lw.target.heap_functions
    if heap is not None:
        malloc = lw.declare(heap[0], lw.ctx.ptr(), [i64])
        free = lw.declare(heap[1], lw.ctx.void, [lw.ctx.ptr()])
        buffer = b.call(malloc, [b.mul(count, size)])
        failed = branch(b.icmp("ne", buffer, Constant.null(lw.ctx.ptr())), "copy.temporary")
        _through(lw, buffer, dshapes, src, st, sshapes, source_indices, put)
        b.call(free, [buffer])
        b.br(done)
        b.position_at_end(failed)
    _fail(lw)
    b.br(done)
    b.position_at_end(done)


def _bytes(dtype) -> int:
    return max(1, dtype.bits // 8)


def _stack_buffer(lw, dtype):
    """The function's STACK_BYTES buffer for overlapping copies of `dtype` sources (copies never nest:
    one serves every copy; one per dtype, so that derivatives see one float type in each)."""
    buffers = lw.__dict__.setdefault("_copy_buffers", {})
    slot = buffers.get((id(lw.fn), dtype))
    if slot is None:
        slot = buffers[(id(lw.fn), dtype)] = lw.alloca_builder.alloca(
            LLArray.get(lw.ctx.i8, STACK_BYTES), "copy.buffer", align=16)
    return slot


def _through(lw, buffer, dshapes, src, st, sshapes, source_indices, put) -> None:
    """Read every source element into `buffer` (row-major), then write the destination from it."""
    b = lw.b
    mem = memory_type(st.dtype, lw.ctx)

    def held(idx):
        at = ConstantInt.get(lw.ctx.i64, 0)
        for i, n in zip(idx, sshapes):
            at = b.add(b.mul(at, n), i)
        return b.gep(mem, buffer, [at])

    loop_nest(lw, sshapes, lambda idx: lw.store_element(
        held(idx), lw.load_element(element(lw, src, st, idx), st.dtype), st.dtype))
    loop_nest(lw, dshapes, lambda idx: put(idx, lw.load_element(held(source_indices(idx)), st.dtype)))


def _fail(lw) -> None:
    """An overlapping copy this target cannot do exactly: stop the kernel where the target can trap
    (its launch reports an error); on SPIR-V, which cannot, leave the destination as it was."""
    if not lw.target.can_trap:
        return
    b, ctx = lw.b, lw.ctx
    b.call(lw.declare("llvm.trap", ctx.void, []), [])
    b.unreachable()
    b.position_at_end(lw.fn.append_block("copy.trapped"))  # no predecessors: the caller's branch is dead


def _one_sided(lw, dest, dt, src, st, n):
    """(forward, backward) for a 1-D copy of n >= 2 elements (none broadcast): whether running it
    forwards (backwards) writes no element a later step still reads. Element j goes to
    d + j*ds from s + j*ss; a write at step j meets a read at step k where g(j, k) = d - s + j*ds - k*ss
    lies within (-dest size, source size). g is linear, so on the triangle of pairs j < k (j > k) it
    stays on one side of that interval where its three corners do."""
    b, i64 = lw.b, lw.ctx.i64
    c = lambda v: ConstantInt.get(i64, v & ((1 << 64) - 1))  # noqa: E731
    dsize, ssize = _bytes(dt.dtype), _bytes(st.dtype)
    d = b.ptrtoint(b.extract_value(dest, 0), i64)
    s = b.ptrtoint(b.extract_value(src, 0), i64)
    ds = b.mul(b.extract_value(dest, 2), c(dsize))
    ss = b.mul(b.extract_value(src, 2), c(ssize))
    last, before = b.sub(n, c(1)), b.sub(n, c(2))
    base = b.sub(d, s)

    def g(j, k):
        return b.sub(b.add(base, b.mul(j, ds)), b.mul(k, ss))

    def one_side(corners):
        below = above = ConstantInt.get(lw.ctx.i1, 1)
        for v in corners:
            below = b.and_(below, b.icmp("sle", v, c(-dsize)))
            above = b.and_(above, b.icmp("sge", v, c(ssize)))
        return b.or_(below, above)

    zero, one = c(0), c(1)
    forward = one_side([g(zero, one), g(zero, last), g(before, last)])
    backward = one_side([g(one, zero), g(last, zero), g(last, before)])
    return forward, backward


def _translation(lw, dest, dt, src, st):
    """(whether the copy is a shift that an ordered loop does exactly, whether to run it backwards).

    It is when both views have one shape and one set of strides, and row-major order visits their
    elements in address order (each stride beyond what the inner dimensions span, all of one sign):
    then every element is read before the shift overwrites it, going forwards where the destination
    lies below the source in that order and backwards where above."""
    b, i64 = lw.b, lw.ctx.i64
    zero, one = ConstantInt.get(i64, 0), ConstantInt.get(i64, 1)
    true = ConstantInt.get(lw.ctx.i1, 1)
    same, up, down, nested = true, true, true, true
    span = zero  # what the dimensions inside the current one span, in elements
    for k in reversed(range(dt.ndim)):
        n, stride = b.extract_value(dest, 1 + k), b.extract_value(dest, 1 + dt.ndim + k)
        same = b.and_(same, b.and_(b.icmp("eq", n, b.extract_value(src, 1 + k)),
                                   b.icmp("eq", stride, b.extract_value(src, 1 + st.ndim + k))))
        trivial = b.icmp("sle", n, one)
        size = b.select(b.icmp("slt", stride, zero), b.sub(zero, stride), stride)
        up = b.and_(up, b.or_(trivial, b.icmp("sgt", stride, zero)))
        down = b.and_(down, b.or_(trivial, b.icmp("slt", stride, zero)))
        nested = b.and_(nested, b.or_(trivial, b.icmp("sgt", size, span)))
        span = b.add(span, b.select(trivial, zero, b.mul(b.sub(n, one), size)))
    safe = b.and_(same, b.and_(nested, b.or_(up, down)))
    if dt.dtype != st.dtype:  # a shift is in elements: only of one element size
        safe = b.and_(safe, ConstantInt.get(lw.ctx.i1, int(_bytes(dt.dtype) == _bytes(st.dtype))))
    d = b.ptrtoint(b.extract_value(dest, 0), i64)
    s = b.ptrtoint(b.extract_value(src, 0), i64)
    backward = b.xor(b.icmp("sgt", d, s), down)
    return safe, backward


def _either_way(lw, backward, shapes, move) -> None:
    """Row-major order over `shapes`, or its exact reverse where `backward`."""
    b, one = lw.b, ConstantInt.get(lw.ctx.i64, 1)
    forward_block, backward_block = lw.fn.append_block("copy.up"), lw.fn.append_block("copy.down")
    joined = lw.fn.append_block("copy.moved")
    b.cond_br(backward, backward_block, forward_block)
    b.position_at_end(forward_block)
    loop_nest(lw, shapes, move)
    b.br(joined)
    b.position_at_end(backward_block)
    loop_nest(lw, shapes, lambda idx: move([b.sub(b.sub(n, one), i) for n, i in zip(shapes, idx)]))
    b.br(joined)
    b.position_at_end(joined)


def _extent(lw, array, t: ArrayType):
    """[first byte, last byte + 1) of the elements of a view, as integers."""
    b, i64 = lw.b, lw.ctx.i64
    zero, one = ConstantInt.get(i64, 0), ConstantInt.get(i64, 1)
    size = ConstantInt.get(i64, _bytes(t.dtype))
    low = high = zero
    for k in range(t.ndim):
        n, stride = b.extract_value(array, 1 + k), b.extract_value(array, 1 + t.ndim + k)
        reach = b.mul(b.sub(n, one), stride)
        negative = b.icmp("slt", reach, zero)
        low = b.add(low, b.select(negative, reach, zero))
        high = b.add(high, b.select(negative, zero, reach))
    address = b.ptrtoint(b.extract_value(array, 0), i64)
    return b.add(address, b.mul(low, size)), b.add(address, b.add(b.mul(high, size), size))


def _overlap(lw, dest, dt, src, st):
    (d0, d1), (s0, s1) = _extent(lw, dest, dt), _extent(lw, src, st)
    return lw.b.and_(lw.b.icmp("ult", d0, s1), lw.b.icmp("ult", s0, d1))
