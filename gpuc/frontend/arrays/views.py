"""Array views: slicing (`a[i, :]`, `a[lo:hi:step]`, `a[i]` of an N-D array), copies into views
(`out[i, :] = a[i, :]`, `out[1:] = 0.0`) and read-only arrays.

A view is an array of the same representation as an argument (data pointer, shapes, element
strides: docs/kernel-abi.md), so everything that takes an array takes a view; no element is copied.
Slice bounds follow Python's `slice.indices` (out-of-range and negative bounds are clipped, as NumPy
does). A copy into a view follows NumPy's assignment: the source broadcasts (a scalar, or an array
whose dimensions are equal or 1 from the right); where the shapes do not match at run time the
statement writes nothing (NumPy raises ValueError, before writing anything); a source that may
overlap the destination is read as if through a temporary.
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass

from ...llvm import Constant, ConstantInt
from ..core.errors import UserError
from ..core.types import ArrayType, ScalarType, int64, memory_type, uint64
from ..core.types import an

READONLY = "readonly"  # the space of a global NumPy array frozen into the module (global_arrays.py)

_INDEX_HINT = "index with integers and slices: a[i], a[i, j], a[i, :], a[lo:hi], a[lo:hi:step], a[::-1]"


@dataclass(frozen=True)
class ViewPlan:
    """How `a[...]` makes a view: per dimension of `a`, ("index", node), ("slice", lower, upper, step)
    (nodes, None where left out) or ("all",)."""

    parts: tuple
    result: ArrayType


def _is_none(node) -> bool:
    return node is None or isinstance(node, ast.Constant) and node.value is None


class NewAxis:
    """`None` or `np.newaxis` in an index: a new dimension of length 1 (stride 0) in the view."""

    def __init__(self, node) -> None:
        self.node = node


def mark_new_axes(typer, indices) -> list:
    """The indices with each `None`, `np.newaxis` (or another global name bound to None) as a NewAxis."""
    return [NewAxis(i) if _names_none(typer, i) else i for i in indices]


def _names_none(typer, node) -> bool:
    if isinstance(node, ast.Constant):
        return node.value is None
    if isinstance(node, ast.Name) and node.id not in typer.locals and node.id not in typer.env:
        return typer.typed.function.resolve(node.id) is None
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id not in typer.locals:
        module = typer.typed.function.resolve(node.value.id)
        return inspect.ismodule(module) and hasattr(module, node.attr) and getattr(module, node.attr) is None
    return False


def _expand(base: ArrayType, indices) -> list:
    """The indices with `...` expanded and missing trailing dimensions filled with `:` (None);
    NewAxis entries stay where they are and take no dimension of `base`."""
    ellipses = [k for k, i in enumerate(indices) if isinstance(i, ast.Constant) and i.value is Ellipsis]
    if len(ellipses) > 1:
        raise UserError("an index can only have a single ellipsis ('...')", node=indices[ellipses[1]])
    named = len(indices) - len(ellipses) - sum(isinstance(i, NewAxis) for i in indices)
    if named > base.ndim:
        raise UserError(f"too many indices for a {base.ndim}-dimensional array: {named}", hint=_INDEX_HINT)
    if ellipses:
        k = ellipses[0]
        return list(indices[:k]) + [None] * (base.ndim - named) + list(indices[k + 1:])
    return list(indices) + [None] * (base.ndim - named)


def is_view(base: ArrayType, indices) -> bool:
    """Whether `a[indices]` makes a view rather than naming an element."""
    return len(indices) < base.ndim or any(
        isinstance(i, (ast.Slice, NewAxis)) or isinstance(i, ast.Constant) and i.value is Ellipsis for i in indices)


def _int_index(typer, node, what: str) -> None:
    t = typer.value_expr(node, an(what))
    if not (isinstance(t, ScalarType) and (t.is_int or t.is_bool)):
        raise UserError(f"{what} must be an integer, not {t}", hint="convert with int(...)", node=node)


def type_view(typer, node: ast.Subscript, base: ArrayType, indices) -> ArrayType:
    """Type `a[...]` that makes a view; records its ViewPlan under the subscript."""
    parts = []
    for i in _expand(base, indices):
        if i is None:
            parts.append(("all",))
        elif isinstance(i, NewAxis):
            parts.append(("new",))
        elif isinstance(i, ast.Slice):
            for bound in (i.lower, i.upper, i.step):
                if not _is_none(bound):
                    _int_index(typer, bound, "slice bound")
                    typer.consumed(bound)  # a literal bound is clipped to the dimension, never materialized
            step = None if _is_none(i.step) else i.step
            if step is not None and typer.is_literal(step) and typer.typed.consts[id(step)] == 0:
                raise UserError("slice step cannot be zero", node=step)
            parts.append(("slice", None if _is_none(i.lower) else i.lower, None if _is_none(i.upper) else i.upper,
                          step))
        else:
            _int_index(typer, i, "array index")
            parts.append(("index", i))
    kept = [p for p in parts if p[0] != "index"]
    if not kept:
        raise UserError("an ellipsis with every dimension indexed makes a 0-d array, which gpuc does not have",
                        hint="leave out the '...' to read the element", node=node.slice)
    last = parts[-1]
    unit = last[0] == "all" or last[0] == "slice" and (
        last[3] is None or typer.is_literal(last[3]) and typer.typed.consts[id(last[3])] == 1)
    new_axes = any(p[0] == "new" for p in parts)  # stride 0: never promised C-contiguous
    layout = "C" if base.layout == "C" and unit and kept and not new_axes else "A"
    result = ArrayType(base.dtype, len(kept), layout, base.space)
    typer.typed.calls[id(node)] = ViewPlan(tuple(parts), result)
    return result


def row_type(t: ArrayType) -> ArrayType:
    """The type of `a[i]` for an N-D array `a` (N > 1): what `for row in a` binds."""
    return ArrayType(t.dtype, t.ndim - 1, t.layout, t.space)


def check_writable(t: ArrayType, what: str = "assigned to") -> None:
    if t.space == READONLY:
        raise UserError(f"a global NumPy array is a compile-time constant and cannot be {what}",
                        hint="pass the array as an argument to write into it")


# -- lowering: views ---------------------------------------------------------------------------

def _i64(lw, node, clip: bool):
    """An index or slice bound as an int64: a literal is clipped to int64's range (it only meets
    lengths), an unsigned value above int64's range saturates rather than wrapping negative."""
    i64 = lw.ctx.i64
    if lw.is_literal(node):
        value = int(lw.typed.consts[id(node)])
        return ConstantInt.get(i64, max(-(1 << 63), min((1 << 63) - 1, value)) & ((1 << 64) - 1))
    t = lw.type_of(node)
    v = lw.convert(lw.expr(node), t, int64) if t != int64 else lw.expr(node)
    if clip and t == uint64:
        v = lw.b.select(lw.b.icmp("slt", v, ConstantInt.get(i64, 0)), ConstantInt.get(i64, (1 << 63) - 1), v)
    return v


def _clamp(lw, v, low, high):
    b = lw.b
    v = b.select(b.icmp("slt", v, low), low, v)
    return b.select(b.icmp("sgt", v, high), high, v)


def slice_indices(lw, n, lower, upper, step):
    """(start, length, step) of slice(lower, upper, step) over a dimension of length n, as Python's
    slice.indices computes them; `lower`, `upper`, `step` are int64 values or None. A step of 0 at run
    time (Python raises ValueError) gives an empty view."""
    b, i64 = lw.b, lw.ctx.i64
    zero, one, minus = (ConstantInt.get(i64, v & ((1 << 64) - 1)) for v in (0, 1, -1))
    step = one if step is None else step
    negative = b.icmp("slt", step, zero)

    def bound(v, default_up, default_down):
        if v is None:
            return b.select(negative, default_down, default_up)
        v = b.select(b.icmp("slt", v, zero), b.add(v, n), v)  # n + v cannot overflow: v < 0, n >= 0
        # clip: [0, n] going up, [-1, n - 1] going down
        return b.select(negative, _clamp(lw, v, minus, b.sub(n, one)), _clamp(lw, v, zero, n))
    start = bound(lower, zero, b.sub(n, one))
    stop = bound(upper, n, minus)
    distance = b.select(negative, b.sub(start, stop), b.sub(stop, start))  # within [-n - 1, n + 1]
    size = b.select(negative, b.sub(zero, step), step)  # -(-2**63) wraps to 2**63: right as unsigned
    zero_step = b.icmp("eq", step, zero)
    size = b.select(zero_step, one, size)  # never divide by 0 (a trap on x86): the view is empty then
    length = b.add(b.udiv(b.sub(distance, one), size), one)
    empty = b.or_(b.icmp("sle", distance, zero), zero_step)
    return start, b.select(empty, zero, length), step


def lower_view(lw, node: ast.Subscript):
    """The array struct of the view `node` makes."""
    plan = lw.typed.calls[id(node)]
    base = lw.expr(node.value)
    bt = lw.type_of(node.value)
    return make_view(lw, base, bt, plan, node)


def make_view(lw, base, bt: ArrayType, plan: ViewPlan, node: ast.Subscript):
    b, i64 = lw.b, lw.ctx.i64
    zero = ConstantInt.get(i64, 0)
    offset, shapes, strides, checks = zero, [], [], []
    dims = iter(range(bt.ndim))  # the base's dimension each part (but a new axis) takes
    for part in plan.parts:
        if part[0] == "new":
            shapes.append(ConstantInt.get(i64, 1))
            strides.append(zero)
            continue
        k = next(dims)
        n = b.extract_value(base, 1 + k)
        stride = b.extract_value(base, 1 + bt.ndim + k)
        if part[0] == "all":
            shapes.append(n)
            strides.append(stride)
            continue
        if part[0] == "index":
            i = raw = _i64(lw, part[1], clip=False)
            wrap = None
            if lw.type_of(part[1]).signed and not lw.is_literal(part[1]) or lw.is_literal(part[1]) and \
                    lw.typed.consts[id(part[1])] < 0:
                wrap = b.select(b.icmp("slt", i, zero), n, zero)
                i = b.add(i, wrap)  # from the end, as element access does
            if lw.boundscheck:
                checks.append((k, raw, wrap, lw.type_of(part[1])))
            offset = b.add(offset, b.mul(i, stride))
            continue
        lower, upper, step = (None if x is None else _i64(lw, x, clip=True) for x in part[1:])
        start, length, step = slice_indices(lw, n, lower, upper, step)
        offset = b.add(offset, b.mul(start, stride))
        shapes.append(length)
        strides.append(b.mul(stride, step))
    if checks:  # an index out of range (recorded) makes a view of nothing at the base's start
        ok = lw.check_indices(node, base, bt.ndim, checks)
        offset = b.select(ok, offset, zero)
        shapes = [b.select(ok, s, zero) for s in shapes]
    data = b.gep(memory_type(bt.dtype, lw.ctx), b.extract_value(base, 0), [offset], inbounds=False)
    return array_value(lw, plan.result, data, shapes, strides)


def array_value(lw, t: ArrayType, data, shapes, strides):
    value = Constant.poison(lw.ltype(t))
    for k, f in enumerate([data, *shapes, *strides]):
        value = lw.b.insert_value(value, f, k)
    return value


def row(lw, array, t: ArrayType, i):
    """`a[i]` of an N-D array for a non-negative int64 `i`: a view of one less dimension."""
    b = lw.b
    data = b.gep(memory_type(t.dtype, lw.ctx), b.extract_value(array, 0),
                 [b.mul(i, b.extract_value(array, 1 + t.ndim))], inbounds=False)
    shapes = [b.extract_value(array, 1 + k) for k in range(1, t.ndim)]
    strides = [b.extract_value(array, 1 + t.ndim + k) for k in range(1, t.ndim)]
    return array_value(lw, row_type(t), data, shapes, strides)


# -- loops over every element --------------------------------------------------------------------

def loop_nest(lw, shapes, body) -> None:
    """Run `body(indices)` for every index tuple (int64 values, row-major) of `shapes`."""
    b, i64 = lw.b, lw.ctx.i64
    open_loops = []
    for k, n in enumerate(shapes):
        slot = lw.alloca_builder.alloca(i64, f"each.i{k}")
        b.store(ConstantInt.get(i64, 0), slot)
        head, inner, done = (lw.fn.append_block(f"each.{s}") for s in ("cond", "body", "end"))
        b.br(head)
        b.position_at_end(head)
        i = b.load(i64, slot)
        b.cond_br(b.icmp("slt", i, n), inner, done)
        b.position_at_end(inner)
        open_loops.append((slot, head, done, i))
    body([i for *_, i in open_loops])
    for slot, head, done, i in reversed(open_loops):
        b.store(b.nsw_add(i, ConstantInt.get(i64, 1)), slot)
        b.br(head)
        b.position_at_end(done)


def element(lw, array, t: ArrayType, indices):
    """&a[indices] for in-range, non-negative int64 indices."""
    return lw.element_ptr(array, t, [(i, uint64) for i in indices])


def shapes_of(lw, array, t: ArrayType) -> list:
    return [lw.b.extract_value(array, 1 + k) for k in range(t.ndim)]


# -- copies into views ---------------------------------------------------------------------------

def type_copy(typer, target: ast.Subscript, dest: ArrayType, t, value_node) -> None:
    """`view = value`: a number broadcast to every element, or an array of broadcastable shape."""
    check_writable(dest)
    if isinstance(t, ScalarType):
        if value_node is not None:
            typer.fit(value_node, dest.dtype)
        return
    if not isinstance(t, ArrayType):
        raise UserError(f"cannot assign {an(t)} to an array view", hint="assign a number or an array",
                        node=target)
    if t.ndim > dest.ndim:
        raise UserError(f"cannot copy a {t.ndim}-D array into a {dest.ndim}-D view (NumPy cannot broadcast it)",
                        hint="index the source down to the view's dimensions", node=target)


def type_augmented(typer, node: ast.AugAssign, dest: ArrayType, t, op: str) -> None:
    """`view op= value`, as NumPy's `np.<op>(view, value, out=view)`: the value broadcasts as in a copy,
    the operation's dtype follows NumPy 2's promotion, and its result must cast to the view's dtype
    under NumPy's 'same_kind' rule (`int_view += 1.5` is an error in NumPy too)."""
    import numpy as np
    from ..numeric import arithmetic as B
    from ..core.types import ComplexType

    target = node.target
    check_writable(dest)
    if isinstance(t, ArrayType):
        type_copy(typer, target, dest, t, None)
    elif not isinstance(t, (ScalarType, ComplexType)):
        raise UserError(f"cannot apply `{op}=` with {an(t)} to an array view", hint="use a number or an array",
                        node=node.value)
    element_t = t.dtype if isinstance(t, ArrayType) else t
    weak = not isinstance(t, ArrayType) and typer.is_weak(node.value)
    plan = B.binary_plan(op, dest.dtype, element_t, False, weak, typer.typed.consts.get(id(node.value)))
    if not isinstance(t, ArrayType):
        typer.fit(node.value, plan.operand)
    result, into = np.dtype(plan.result.name), np.dtype(dest.dtype.name)
    if dest.dtype.is_bool and getattr(element_t, "is_bool", False) and op in ("+", "*"):
        # NumPy's arrays of bool add as `or` and multiply as `and` (bool results); the scalar plan's int64
        # sum or product, stored as a bool (nonzero), is the same value
        result = into
    if not np.can_cast(result, into, "same_kind"):
        raise UserError(f"`{op}=` on a view of {dest.dtype} computes {plan.result}, which NumPy does not cast back "
                        f"to {dest.dtype} in place (casting='same_kind')",
                        hint=f"convert the value to {dest.dtype} first, or write into an array of {plan.result}",
                        node=target)
    typer.typed.calls[id(node)] = plan
    typer.typed.types[id(target)] = dest


def lower_augmented(lw, node: ast.AugAssign, plan) -> None:
    """`view op= value` (see type_augmented): the view first, then the value, as Python evaluates them."""
    from ..numeric import arithmetic as B
    from .copying import copy_array

    dest_t = lw.type_of(node.target)
    dest = lower_view(lw, node.target)
    t = lw.type_of(node.value)
    const = lw.typed.consts.get(id(node.value))

    def combine(old, value, vt):
        return lw.convert(B.lower_binary(lw, plan, old, dest_t.dtype, value, vt, const), plan.result, dest_t.dtype)

    if isinstance(t, ArrayType):
        copy_array(lw, dest, dest_t, lw.expr(node.value), t, combine=lambda old, v: combine(old, v, t.dtype))
        return
    right, rt = lw.binary_operand(node.value, plan)
    loop_nest(lw, shapes_of(lw, dest, dest_t), lambda idx: _update(lw, element(lw, dest, dest_t, idx), dest_t.dtype,
                                                                   lambda old: combine(old, right, rt)))


def _update(lw, at, dtype, fn) -> None:
    lw.store_element(at, fn(lw.load_element(at, dtype)), dtype)


def lower_copy(lw, target: ast.Subscript, value, t, source) -> None:
    dest_t = lw.type_of(target)
    dest = lower_view(lw, target)
    shapes = shapes_of(lw, dest, dest_t)
    if not isinstance(t, ArrayType):
        v = lw.operand(source, dest_t.dtype) if value is None else lw.convert(value, t, dest_t.dtype)
        loop_nest(lw, shapes, lambda idx: lw.store_element(element(lw, dest, dest_t, idx), v, dest_t.dtype))
        return
    from .copying import copy_array
    copy_array(lw, dest, dest_t, value, t)


def check_returnable(t: ArrayType, kernel: bool) -> None:
    """A func may return an argument array or a view of one; a local array lives in the func's frame."""
    if kernel:
        return  # the kernel's own error says kernels return nothing
    if t.space == "local":
        raise UserError("functions cannot return gpuc.local arrays (or views of them): the array lives in the "
                        "function's own frame", hint="create the local array in the caller and pass it in")
