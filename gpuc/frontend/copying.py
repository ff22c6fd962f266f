"""Copying an array into a view (`out[lo:hi] = x[lo:hi]`) with NumPy's semantics: broadcasting, a
statement that writes nothing where the shapes do not match at run time, and a source read as if
through a temporary where it may overlap the destination: disjoint views (checked at run time) copy
directly, a shift within one layout is copied in an order that reads every element before overwriting
it, anything else goes through a heap buffer where the target has an allocator (docs/frontend.md,
Views, says what GCN and SPIR-V do without one)."""

from __future__ import annotations

from ..llvm import Constant, ConstantInt
from .types import ArrayType, memory_type
from .views import element, loop_nest, shapes_of


def copy_array(lw, dest, dt: ArrayType, src, st: ArrayType) -> None:
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

    def move(idx):
        value = lw.load_element(element(lw, src, st, source_indices(idx)), st.dtype)
        lw.store_element(element(lw, dest, dt, idx), lw.convert(value, st.dtype, dt.dtype), dt.dtype)

    if dt.space != st.space:  # different memories never overlap
        loop_nest(lw, dshapes, move)
        b.br(done)
        b.position_at_end(done)
        return
    fast, slow = lw.fn.append_block("copy.disjoint"), lw.fn.append_block("copy.overlap")
    b.cond_br(_overlap(lw, dest, dt, src, st), slow, fast)
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
    heap = lw.target.heap_functions
    if heap is not None:
        _through_temporary(lw, heap, dest, dt, dshapes, src, st, source_indices, move)
    elif dt.ndim == 1:
        _ordered(lw, dest, src, st, dshapes[0], move)
    else:
        loop_nest(lw, dshapes, move)  # documented: no allocator on this target
    b.br(done)
    b.position_at_end(done)


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
    size = ConstantInt.get(i64, max(1, t.dtype.bits // 8))
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


def _through_temporary(lw, heap, dest, dt, dshapes, src, st, source_indices, move) -> None:
    """Read every source element into a heap buffer, then write the destination from it."""
    b, ctx = lw.b, lw.ctx
    i64 = ctx.i64
    count = ConstantInt.get(i64, 1)
    for n in dshapes:
        count = b.mul(count, n)
    mem = memory_type(st.dtype, ctx)
    size = ConstantInt.get(i64, max(1, st.dtype.bits // 8))
    malloc = lw.declare(heap[0], ctx.ptr(), [i64])
    free = lw.declare(heap[1], ctx.void, [ctx.ptr()])
    buffer = b.call(malloc, [b.mul(count, size)])
    have, none = lw.fn.append_block("copy.temporary"), lw.fn.append_block("copy.noheap")
    after = lw.fn.append_block("copy.copied")
    b.cond_br(b.icmp("ne", buffer, Constant.null(ctx.ptr())), have, none)

    def linear(idx):
        at = ConstantInt.get(i64, 0)
        for i, n in zip(idx, dshapes):
            at = b.add(b.mul(at, n), i)
        return b.gep(mem, buffer, [at])

    b.position_at_end(have)
    loop_nest(lw, dshapes, lambda idx: lw.store_element(
        linear(idx), lw.load_element(element(lw, src, st, source_indices(idx)), st.dtype), st.dtype))
    loop_nest(lw, dshapes, lambda idx: lw.store_element(
        element(lw, dest, dt, idx), lw.convert(lw.load_element(linear(idx), st.dtype), st.dtype, dt.dtype),
        dt.dtype))
    b.call(free, [buffer])
    b.br(after)
    b.position_at_end(none)  # out of memory: the direct copy is all that is left
    loop_nest(lw, dshapes, move)
    b.br(after)
    b.position_at_end(after)


def _ordered(lw, dest, src, st, n, move) -> None:
    """A 1-D copy without a temporary: element k goes to d + k*ds from s + k*ss; run backwards where the
    destination lies ahead of the source in the direction of its stride (exact for equal strides)."""
    b, i64 = lw.b, lw.ctx.i64
    zero, one = ConstantInt.get(i64, 0), ConstantInt.get(i64, 1)
    d = b.ptrtoint(b.extract_value(dest, 0), i64)
    s = b.ptrtoint(b.extract_value(src, 0), i64)
    stride = b.extract_value(dest, 2)
    backward = b.xor(b.icmp("sgt", b.sub(d, s), zero), b.icmp("slt", stride, zero))
    forward_block, backward_block = lw.fn.append_block("copy.forward"), lw.fn.append_block("copy.backward")
    done = lw.fn.append_block("copy.ordered")
    b.cond_br(backward, backward_block, forward_block)
    b.position_at_end(forward_block)
    loop_nest(lw, [n], move)
    b.br(done)
    b.position_at_end(backward_block)
    loop_nest(lw, [n], lambda idx: move([b.sub(b.sub(n, one), idx[0])]))
    b.br(done)
    b.position_at_end(done)
