"""Views in random programs, for the generator (a mixin of support.progen.Generator), the reference typer
and the reference interpreter: reductions of array views (`a0[1:, ::2].max()`, `a1[::-1].sum()`) and
copies into views of the outputs (`o1[2:5] = a0[::2]`, `o0[4:10:2] = o0[::-6]` overlapping, `o2[13:] = x`).

Slice bounds are literals, so the reference takes the views with NumPy itself; the methods are the
exact ones (integer sums wrap in NumPy as in gpuc; max/min of any dtype), so no tolerance applies.
A max/min of an empty view (NumPy raises ValueError) has no defined result here. A copy reads its
source before writing (NumPy's semantics for overlapping views) and converts each element as a store
of it would.
"""

from __future__ import annotations

import ast

import numpy as np

from .expressions import Ex, _fits_text
from .numeric import Arr, Expected, Undefined, fits, from_numpy, is_float, is_scalar

VIEW_FEATURES = {"views"}
METHODS = ("sum", "max", "min")
SLICES_1D = ["1:", "::-1", "::2", "-3:", "1:5:2", ":4", "4:1:-1", "::-2", "-100:2", "2:100"]
SLICES_2D = ["1:, ::2", "::-1", "0", ":, 1:", "-1, ::-1", "1:, -1", "::2, 1:3", "2:0:-1, ::-3"]
THREE_OF_16 = ["2:5", "13:", "::-6", "4:10:2", "-3:", "7:4:-1", "1:4", "::6"]     # views of 3 output elements
THREE_OF_6 = ["1:4", "::2", "::-2", "-3:", "4:1:-1", "1::2"]                     # ... of a 1-D argument (6)
THREE_OF_3_4 = [":, 1", "::-1, -1", "1, 1:", "0, :3", "2, ::-1][1:"]              # ... of a 2-D argument (3, 4)


def result_type(method: str, dtype: str) -> str:
    if method != "sum":
        return dtype
    if is_float(dtype):
        return dtype
    return "uint64" if dtype.startswith("uint") else "int64"


class ViewRules:
    def e_view_reduce(self, scope, want=None, *_):
        arrays = list(self.arrays.items())
        if not arrays:
            return None
        name, (dtype, ndim) = self.rng.choice(arrays)
        methods = [m for m in METHODS if not (m == "sum" and is_float(dtype))]
        method = self.rng.choice(methods)
        t = result_type(method, dtype)
        if not self.ok(t, want):
            return None
        view = self.rng.choice(SLICES_1D if ndim == 1 else SLICES_2D)
        return Ex(f"{name}[{view}].{method}()", t)


    def s_view_copy(self, scope):
        if not self.in_kernel or not self.outs:
            return None
        dest = self.rng.choice(THREE_OF_16)
        r = self.rng.random()
        if r < 0.4 and self.arrays:
            name, (dtype, ndim) = self.rng.choice(list(self.arrays.items()))
            out = self.out_for(dtype)
            if out is None:
                return None
            source = f"{name}[{self.rng.choice(THREE_OF_6 if ndim == 1 else THREE_OF_3_4)}]"
        elif r < 0.7:  # the same output: overlapping views, read as if through a temporary
            out, _ = self.rng.choice(self.outs)
            source = f"{out}[{self.rng.choice(THREE_OF_16)}]"
        else:
            ex = self.expr(scope, 1)
            if not isinstance(ex.t, str):
                return None
            out = self.out_for(ex.t)
            if out is None or (ex.weak and not _fits_text(ex.text, dict(self.outs)[out])):
                return None
            source = ex.text
        self.emit(f"{out}[{dest}] = {source}")
        return True


def is_view(node) -> bool:
    """Whether the subscript `node` makes a view (a slice in its index)."""
    index = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    return any(isinstance(i, ast.Slice) for i in index) or isinstance(node.value, ast.Subscript) and is_view(
        node.value)


def type_view(typer, node, env):
    """The reference typer's type of a view `a[...]` with literal slices."""
    base = node.value
    while isinstance(base, ast.Subscript):
        base = base.value
    t, _ = typer.expr(base, env)
    if not isinstance(t, Arr):
        raise Undefined("a view of a non-array")
    return Arr(t.dtype, _take(np.zeros((16,) * t.ndim), node, base).ndim)  # the rank only


def _take(array, node, base):
    """NumPy's view of `array` (standing for `base`) that the subscript `node` makes."""
    text = ast.unparse(node).replace(ast.unparse(base), "a", 1)
    return eval(text, {"a": array})  # noqa: S307 - literal slices only


def type_copy(view: Arr, t, weak: bool, value) -> None:
    """The reference typer's check of `view = value`: a number (a literal must fit) or an array."""
    if is_scalar(t):
        if weak and not fits(value, view.dtype):
            raise Expected("literal", f"{value!r} stored in a {view.dtype} array")
    elif not isinstance(t, Arr) or t.ndim > view.ndim:
        raise Undefined(f"copying a {t} into a view")


def eval_view(reference, node, env):
    base = node.value
    while isinstance(base, ast.Subscript):
        base = base.value
    return _take(reference.eval(base, env), node, base)


def copy_into_view(reference, target, value, env, stmt):
    """`view = value` on reference values: every element stored as `reference.store` stores one."""
    base = target.value
    while isinstance(base, ast.Subscript):
        base = base.value
    array = reference.eval(base, env)
    positions = _take(np.arange(array.size).reshape(array.shape), target, base)
    if isinstance(value, np.ndarray):
        dtype = "bool" if value.dtype == np.bool_ else value.dtype.name
        if value.shape != positions.shape:
            raise Undefined("a copy of mismatched shapes")
        values = [from_numpy(v, dtype) for v in value.reshape(-1).copy()]  # read before any write
    else:
        values = [value] * positions.size
    for flat, v in zip(positions.reshape(-1), values):
        reference.store(array, np.unravel_index(int(flat), array.shape), v, stmt)


def is_view_method(node) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in METHODS \
        and isinstance(node.func.value, ast.Subscript)


def type_method(typer, node, env):
    """The reference typer's type of `a[...].method()`."""
    base, _ = typer.expr(node.func.value.value, env)
    if not isinstance(base, Arr) or node.args:
        raise Undefined("a method of a non-array")
    return result_type(node.func.attr, base.dtype), False


def eval_method(reference, node, env):
    """The reference value of `a[...].method()`: NumPy's, on NumPy's view."""
    array = reference.eval(node.func.value.value, env)
    text = ast.unparse(ast.Subscript(ast.Name("a", ast.Load()), node.func.value.slice, ast.Load()))
    view = eval(text, {"a": array})  # noqa: S307 - literal slices only
    if view.size == 0 and node.func.attr != "sum":
        raise Undefined("max/min of an empty view")
    dtype = "bool" if array.dtype.name == "bool" else array.dtype.name
    return from_numpy(getattr(view, node.func.attr)(), result_type(node.func.attr, dtype))
