"""NumPy 2's order of a float reduction over a whole array, which `a.sum()`, `a.mean()` and `a.prod()`
follow so that their results are NumPy's, bit for bit (gpuc/frontend/arrays/array_methods.py).

NumPy reduces with its iterator. The axes are sorted by |stride|, innermost first (a stable insertion
sort in which a zero stride compares with nothing; an axis of extent 1 has stride 0), each is walked in
its own direction, and adjacent axes that form one stride are coalesced. npyiter_find_buffering_setup
then picks a core, axes 0..best_dim, whose elements reach the inner loop in chunks: one run of axis 0
when nothing is buffered, otherwise up to 8192 elements (a multiple of the elements of axes
0..best_dim-1, never past one pass of axis best_dim). A cast (the float64 sum of an integer `mean`, the
float32 sum of a float16 `mean`) buffers from the start. Each chunk is one call of the ufunc's loop:
`res += pairwise_sum(chunk)` from res = +0.0, `res *= x` for each element; float16 computes in float32
and rounds to half after each chunk.

pairwise_sum (NumPy's loops_utils.h.src): below 8 elements a loop from -0.0; up to 128 (PW_BLOCKSIZE)
eight accumulators combined as ((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7)), then the rest in order; above,
the two halves, split at n/2 rounded down to a multiple of 8. Here it runs without recursion: the
leaves (blocks of at most 128) are summed in order, and a small stack holds each pending left half's
sum and the length of its right half.
"""

from __future__ import annotations

from ...llvm import ArrayType as LLArray, Constant, ConstantFP, ConstantInt, VectorType
from ..core.types import ScalarType, memory_type
from .views import loop_nest

BUFSIZE = 8192  # NPY_BUFSIZE, NumPy's default buffer
BLOCK = 128     # PW_BLOCKSIZE
DEPTH = 64      # the split halves each length: no 64-bit length nests deeper


def _c(lw, v: int):
    return ConstantInt.get(lw.ctx.i64, v)


def _abs(lw, v):
    b = lw.b
    return b.select(b.icmp("slt", v, _c(lw, 0)), b.sub(_c(lw, 0), v), v)


# -- the iterator's axes and chunks -------------------------------------------------------------

def iteration_axes(lw, shapes, strides) -> tuple[list, object]:
    """NumPy's iteration axes, innermost first, as (extent, stride) pairs padded with (1, 0), and
    their number after coalescing."""
    b = lw.b
    zero, one = _c(lw, 0), _c(lw, 1)
    axes = [(n, b.select(b.icmp("eq", n, one), zero, s)) for n, s in zip(reversed(shapes), reversed(strides))]
    for i0 in range(1, len(axes)):  # npyiter_find_best_axis_ordering
        s0 = axes[i0][1]
        ipos, stopped = _c(lw, i0), ConstantInt.get(lw.ctx.i1, 0)
        for i1 in range(i0 - 1, -1, -1):
            s1 = axes[i1][1]
            compared = b.and_(b.icmp("ne", s0, zero), b.icmp("ne", s1, zero))
            larger = b.icmp("sgt", _abs(lw, s1), _abs(lw, s0))
            ipos = b.select(b.and_(b.and_(compared, b.not_(stopped)), larger), _c(lw, i1), ipos)
            stopped = b.or_(stopped, b.and_(compared, b.not_(larger)))
        moved = [tuple(b.select(b.icmp("eq", ipos, zero), axes[i0][f], axes[0][f]) for f in (0, 1))]
        for k in range(1, i0 + 1):  # axis i0 goes to ipos, the axes from ipos on move out by one
            at, after = b.icmp("eq", ipos, _c(lw, k)), b.icmp("slt", ipos, _c(lw, k))
            moved.append(tuple(b.select(at, axes[i0][f], b.select(after, axes[k - 1][f], axes[k][f]))
                               for f in (0, 1)))
        axes[:i0 + 1] = moved
    return _coalesce(lw, axes)


def _coalesce(lw, axes) -> tuple[list, object]:
    """npyiter_coalesce_axes: merge each axis into the previous one where they form one stride."""
    b = lw.b
    zero, one = _c(lw, 0), _c(lw, 1)
    out = [(one, zero)] * len(axes)
    count = zero
    (n0, s0) = axes[0]
    for n, s in axes[1:]:
        merge = b.or_(b.or_(b.and_(b.icmp("eq", n0, one), b.icmp("eq", s0, zero)),
                            b.and_(b.icmp("eq", n, one), b.icmp("eq", s, zero))),
                      b.icmp("eq", b.mul(s0, n0), s))
        for j in range(len(out)):
            put = b.and_(b.not_(merge), b.icmp("eq", count, _c(lw, j)))
            out[j] = (b.select(put, n0, out[j][0]), b.select(put, s0, out[j][1]))
        count = b.select(merge, count, b.add(count, one))
        n0, s0 = (b.select(merge, b.mul(n0, n), n), b.select(merge, b.select(b.icmp("ne", s0, zero), s0, s), s))
    for j in range(len(out)):
        put = b.icmp("eq", count, _c(lw, j))
        out[j] = (b.select(put, n0, out[j][0]), b.select(put, s0, out[j][1]))
    return out, b.add(count, one)


def buffering(lw, axes, count, cast: bool) -> tuple:
    """npyiter_find_buffering_setup for a reduction to one value of a non-empty array (the input never
    coalesces further, the output's strides are all 0): (best_dim, span, chunk), where `span` elements
    (axes 0..best_dim) form one core and reach the loop `chunk` at a time."""
    b = lw.b
    size = axes[0][0]
    best_dim, best_cost, best_size, best_core = _c(lw, 0), _c(lw, 2 if cast else 1), size, _c(lw, 1)
    active = ConstantInt.get(lw.ctx.i1, 1)
    limit = _c(lw, BUFSIZE)
    for idim in range(1, len(axes)):
        full = b.icmp("sge", size, limit)
        if idim == 1 and not cast:  # the cost is still 1: no buffer yet, the inner loop may grow
            full = ConstantInt.get(lw.ctx.i1, 0)
        active = b.and_(active, b.and_(b.icmp("slt", _c(lw, idim), count), b.not_(full)))
        core, grown = size, b.mul(size, axes[idim][0])
        bufsize = b.select(b.icmp("sgt", grown, limit), limit, grown)
        better = b.icmp("sle", b.mul(_c(lw, 2), best_size), b.mul(best_cost, bufsize))
        take = b.and_(active, better)
        best_cost = b.select(take, _c(lw, 2), best_cost)
        best_core = b.select(take, core, best_core)
        best_size = b.select(take, grown, best_size)
        best_dim = b.select(take, _c(lw, idim), best_dim)
        size = b.select(active, grown, size)
    buffered = b.icmp("sgt", best_dim, _c(lw, 0))
    if cast:
        buffered = ConstantInt.get(lw.ctx.i1, 1)
    limited = b.mul(best_core, b.udiv(limit, best_core))
    chunk = b.select(b.and_(buffered, b.icmp("sgt", best_size, limit)), limited, best_size)
    return best_dim, best_size, chunk


# -- where the elements come from ---------------------------------------------------------------

class _Run:
    """A chunk that is one strided run: element i at base + i * stride."""

    def __init__(self, lw, base, stride, dtype: ScalarType, acc_t: ScalarType) -> None:
        self.lw, self.base, self.stride, self.dtype, self.acc_t = lw, base, stride, dtype, acc_t

    def _ptr(self, i):
        lw = self.lw
        offset = i if self.stride is None else lw.b.mul(i, self.stride)
        return lw.b.gep(memory_type(self.dtype, lw.ctx), self.base, [offset], inbounds=False)

    def load(self, i):
        lw = self.lw
        return lw.convert(lw.load_element(self._ptr(i), self.dtype), self.dtype, self.acc_t)

    def load8(self, i):
        """Elements i..i+7 as a vector: one vector load where the stride is 1."""
        lw = self.lw
        if self.stride is not None:
            return _gather8(lw, self.acc_t, lambda j: self.load(lw.b.add(i, _c(lw, j))))
        mem = memory_type(self.dtype, lw.ctx)
        vec = lw.b.load(VectorType.get(mem, 8), self._ptr(i), align=max(1, self.dtype.bits // 8))
        return _vconvert(lw, vec, self.dtype, self.acc_t)


class _Walk:
    """Elements in the iterator's order through every axis: a cursor that each load advances."""

    def __init__(self, lw, data, axes, dtype: ScalarType, acc_t: ScalarType) -> None:
        self.lw, self.data, self.axes, self.dtype, self.acc_t = lw, data, axes, dtype, acc_t
        i64 = lw.ctx.i64
        self.offset = lw.alloca_builder.alloca(i64, "walk.offset")
        self.index = [lw.alloca_builder.alloca(i64, f"walk.i{k}") for k in range(len(axes))]
        for slot in (self.offset, *self.index):
            lw.b.store(_c(lw, 0), slot)

    def load(self, _i):
        lw = self.lw
        b, i64 = lw.b, lw.ctx.i64
        offset = b.load(i64, self.offset)
        ptr = b.gep(memory_type(self.dtype, lw.ctx), self.data, [offset], inbounds=False)
        value = lw.convert(lw.load_element(ptr, self.dtype), self.dtype, self.acc_t)
        carry = _c(lw, 1)
        for (n, s), slot in zip(self.axes, self.index):
            i = b.add(b.load(i64, slot), carry)
            offset = b.add(offset, b.mul(carry, s))
            wrap = b.icmp("eq", i, n)
            b.store(b.select(wrap, _c(lw, 0), i), slot)
            offset = b.sub(offset, b.select(wrap, b.mul(n, s), _c(lw, 0)))
            carry = b.zext(wrap, i64)
        b.store(offset, self.offset)
        return value

    def load8(self, i):
        return _gather8(self.lw, self.acc_t, self.load)


def _gather8(lw, acc_t: ScalarType, load):
    vec = Constant.poison(VectorType.get(lw.ltype(acc_t), 8))
    for j in range(8):
        vec = lw.b.insert_element(vec, load(j), ConstantInt.get(lw.ctx.i32, j))
    return vec


def _vconvert(lw, vec, dtype: ScalarType, acc_t: ScalarType):
    b, ty = lw.b, VectorType.get(lw.ltype(acc_t), 8)
    if dtype == acc_t:
        return vec
    if dtype.is_float:
        return b.fpext(vec, ty)
    return b.sitofp(vec, ty) if dtype.signed and not dtype.is_bool else b.uitofp(vec, ty)


# -- pairwise summation and the in-order product ------------------------------------------------

def pairwise_sum(lw, acc_t: ScalarType, source, length):
    """NumPy's pairwise_sum of `length` elements of `source`, computed in `acc_t`."""
    b, i64, ty = lw.b, lw.ctx.i64, lw.ltype(acc_t)
    new = lw.alloca_builder.alloca
    left, right = new(LLArray.get(ty, DEPTH), "pw.left"), new(LLArray.get(i64, DEPTH), "pw.right")
    depth, todo, pos, value = new(i64, "pw.depth"), new(i64, "pw.todo"), new(i64, "pw.pos"), new(ty, "pw.sum")
    for slot, v in ((depth, _c(lw, 0)), (todo, length), (pos, _c(lw, 0))):
        b.store(v, slot)
    descend, split, leaf, ascend, check, pop, right_half, done = (
        lw.fn.append_block(f"pw.{s}") for s in ("descend", "split", "leaf", "ascend", "check", "pop", "right",
                                                 "done"))

    def at(array, elem, d):
        return b.gep(LLArray.get(elem, DEPTH), array, [_c(lw, 0), d])

    b.br(descend)
    b.position_at_end(descend)
    n = b.load(i64, todo)
    b.cond_br(b.icmp("sgt", n, _c(lw, BLOCK)), split, leaf)
    b.position_at_end(split)  # left half n2 = n / 2 rounded down to a multiple of 8, right half after it
    n2 = b.and_(b.lshr(n, _c(lw, 1)), _c(lw, -8))
    d = b.load(i64, depth)
    b.store(b.sub(n, n2), at(right, i64, d))
    b.store(b.add(d, _c(lw, 1)), depth)
    b.store(n2, todo)
    b.br(descend)
    b.position_at_end(leaf)
    p = b.load(i64, pos)
    b.store(_leaf_sum(lw, acc_t, source, p, n), value)
    b.store(b.add(p, n), pos)
    b.br(ascend)
    b.position_at_end(ascend)  # a finished half: add it to its finished left half, or start its right half
    d = b.load(i64, depth)
    b.cond_br(b.icmp("sgt", d, _c(lw, 0)), check, done)
    b.position_at_end(check)
    top = b.sub(d, _c(lw, 1))
    r = b.load(i64, at(right, i64, top))
    b.cond_br(b.icmp("eq", r, _c(lw, 0)), pop, right_half)
    b.position_at_end(pop)
    b.store(b.fadd(b.load(ty, at(left, ty, top)), b.load(ty, value)), value)
    b.store(top, depth)
    b.br(ascend)
    b.position_at_end(right_half)
    b.store(b.load(ty, value), at(left, ty, top))
    b.store(r, todo)
    b.store(_c(lw, 0), at(right, i64, top))
    b.br(descend)
    b.position_at_end(done)
    return b.load(ty, value)


def _leaf_sum(lw, acc_t: ScalarType, source, start, n):
    """pairwise_sum of at most BLOCK elements from `start`: in order below 8, else eight accumulators."""
    b, ty = lw.b, lw.ltype(acc_t)
    res = lw.alloca_builder.alloca(ty, "pw.leaf")
    few, block, end = (lw.fn.append_block(f"pw.{s}") for s in ("few", "block", "leafend"))
    b.cond_br(b.icmp("slt", n, _c(lw, 8)), few, block)

    def add_each(first, count):
        loop_nest(lw, [count], lambda i: b.store(
            b.fadd(b.load(ty, res), source.load(b.add(b.add(start, first), i[0]))), res))

    b.position_at_end(few)
    b.store(ConstantFP.get(ty, -0.0), res)
    add_each(_c(lw, 0), n)
    b.br(end)
    b.position_at_end(block)
    vty = VectorType.get(ty, 8)
    acc = lw.alloca_builder.alloca(vty, "pw.r")
    b.store(source.load8(start), acc)
    groups = b.sub(b.ashr(n, _c(lw, 3)), _c(lw, 1))
    loop_nest(lw, [groups], lambda g: b.store(
        b.fadd(b.load(vty, acc), source.load8(b.add(start, b.shl(b.add(g[0], _c(lw, 1)), _c(lw, 3))))), acc))
    r = b.load(vty, acc)
    lane = [b.extract_element(r, ConstantInt.get(lw.ctx.i32, j)) for j in range(8)]
    b.store(b.fadd(b.fadd(b.fadd(lane[0], lane[1]), b.fadd(lane[2], lane[3])),
                   b.fadd(b.fadd(lane[4], lane[5]), b.fadd(lane[6], lane[7]))), res)
    whole = b.and_(n, _c(lw, -8))
    add_each(whole, b.sub(n, whole))
    b.br(end)
    b.position_at_end(end)
    return b.load(ty, res)


def product(lw, acc_t: ScalarType, source, length, init):
    """`init` times each of `length` elements of `source`, in order, in `acc_t`."""
    b, ty = lw.b, lw.ltype(acc_t)
    acc = lw.alloca_builder.alloca(ty, "prod.acc")
    b.store(init, acc)
    loop_nest(lw, [length], lambda i: b.store(b.fmul(b.load(ty, acc), source.load(i[0])), acc))
    return b.load(ty, acc)


# -- the whole reduction ------------------------------------------------------------------------

def reduce_array(lw, array, t, method: str, res_t: ScalarType, acc_t: ScalarType, init, cast: bool):
    """The pairwise sum (`method` "sum") or the product ("prod") of every element of `array`, converted
    to `acc_t`, in NumPy's order: the running result (`res_t`, from `init`) combined with each chunk,
    which is computed in `acc_t`; `cast` where NumPy buffers a cast. Returns the result and the number
    of elements."""
    b = lw.b
    ndim = t.ndim
    shapes = [b.extract_value(array, 1 + k) for k in range(ndim)]
    strides = [b.extract_value(array, 1 + ndim + k) for k in range(ndim)]
    data = b.extract_value(array, 0)
    total = _c(lw, 1)
    for n in shapes:
        total = b.mul(total, n)
    slot = lw.alloca_builder.alloca(lw.ltype(res_t), f"{method}.res")
    b.store(init, slot)
    work, end = lw.fn.append_block(f"{method}.work"), lw.fn.append_block(f"{method}.end")
    b.cond_br(b.icmp("sgt", total, _c(lw, 0)), work, end)
    b.position_at_end(work)
    axes, count = iteration_axes(lw, shapes, strides)
    best_dim, span, chunk = buffering(lw, axes, count, cast)
    walk = _Walk(lw, data, axes, t.dtype, acc_t) if ndim > 1 else None

    def combine(source, length):
        res = b.load(lw.ltype(res_t), slot)
        if method == "prod":
            value = lw.convert(product(lw, acc_t, source, length, lw.convert(res, res_t, acc_t)), acc_t, res_t)
        else:
            value = lw.convert(b.fadd(lw.convert(res, res_t, acc_t), pairwise_sum(lw, acc_t, source, length)),
                               acc_t, res_t)
        b.store(value, slot)

    def each_chunk(index):
        c, k = index
        start = b.mul(k, chunk)
        length = b.sub(span, start)
        length = b.select(b.icmp("slt", chunk, length), chunk, length)
        (n0, s0) = axes[0]
        run, unit, strided, walked, joined = (lw.fn.append_block(f"{method}.{s}") for s in
                                              ("run", "unit", "strided", "walked", "joined"))
        b.cond_br(b.icmp("eq", best_dim, _c(lw, 0)), run, walked)
        b.position_at_end(run)  # the core is one run of axis 0
        base = b.gep(memory_type(t.dtype, lw.ctx), data, [b.add(_offset(lw, axes, b.mul(c, span)),
                                                                 b.mul(start, s0))], inbounds=False)
        b.cond_br(b.icmp("eq", s0, _c(lw, 1)), unit, strided)
        for block, stride in ((unit, None), (strided, s0)):
            b.position_at_end(block)
            combine(_Run(lw, base, stride, t.dtype, acc_t), length)
            b.br(joined)
        b.position_at_end(walked)
        if walk is not None:
            combine(walk, length)
            b.br(joined)
        else:
            b.unreachable()
        b.position_at_end(joined)

    chunks = b.udiv(b.add(span, b.sub(chunk, _c(lw, 1))), chunk)
    loop_nest(lw, [b.udiv(total, span), chunks], each_chunk)
    b.br(end)
    b.position_at_end(end)
    return b.load(lw.ltype(res_t), slot), total


def _offset(lw, axes, flat):
    """The element offset of the `flat`-th element in the iterator's order."""
    b = lw.b
    offset = _c(lw, 0)
    for n, s in axes:
        offset = b.add(offset, b.mul(b.urem(flat, n), s))
        flat = b.udiv(flat, n)
    return offset
