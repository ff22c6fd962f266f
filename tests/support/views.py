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
from .numeric import (NUMPY, Arr, Expected, Undefined, fits, from_numpy, int_range, is_complex, is_float, is_int,
                      is_scalar, stores)

VIEW_FEATURES = {"views", "view_rows", "runtime_slices"}
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


    # -- run-time slices (feature runtime_slices) and rows (feature view_rows) --------------------------
    def slice_bound(self, scope, lo=-8, hi=8):
        """A slice bound: left out, a literal, or computed from the arguments (negative, past the ends,
        of any integer type: an unsigned one can wrap to a huge value, which clips)."""
        r = self.rng.random()
        counts = [n for n, t in scope.vars.items() if isinstance(t, str) and n.startswith("n")]
        if r < 0.15:
            return ""
        if r < 0.35:
            v = self.rng.randint(lo, hi) if self.rng.random() < 0.9 else self.rng.choice([-100, 100, 2**40])
            return str(v) if v >= 0 else f"({v})"
        if counts and r < 0.6:
            return f"{self.rng.choice(counts)}{self.rng.choice(['', ' - 3', ' - 6', ' + 1'])}".replace("(", "")
        ex = self.expr(scope, 2, "int")
        return f"({ex.text} % {hi - lo + 1} - {-lo})" if self.rng.random() < 0.8 else ex.text

    def slice_step(self, scope):
        r = self.rng.random()
        if r < 0.3:
            return ""
        if r < 0.6:
            return str(self.rng.choice([1, 2, 3, -1, -2, -3]))
        ex = self.expr(scope, 2, "int")
        return self.rng.choice([f"({ex.text} % 3 + 1)", f"(-({ex.text} % 3 + 1))", f"({ex.text} % 4 - 2)"])

    def runtime_slice(self, scope, lo=-8, hi=8):
        step = self.slice_step(scope)
        return f"{self.slice_bound(scope, lo, hi)}:{self.slice_bound(scope, lo, hi)}" + (f":{step}" if step else "")

    def runtime_view(self, scope):
        """A view of an argument array with run-time bounds: (text, dtype)."""
        if not self.arrays:
            return None
        name, (dtype, ndim) = self.rng.choice(sorted(self.arrays.items()))
        if ndim == 1:
            return f"{name}[{self.runtime_slice(scope)}]", dtype
        second = self.runtime_slice(scope) if self.rng.random() < 0.6 else str(self.rng.randint(-4, 3))
        return f"{name}[{self.runtime_slice(scope, -4, 4)}, {second}]", dtype

    def s_runtime_slice(self, scope):
        if not self.in_kernel or not self.arrays:
            return None
        view = self.runtime_view(scope)
        text, dtype = view
        r = self.rng.random()
        if r < 0.35:
            method = self.rng.choice([m for m in METHODS if not (m == "sum" and is_float(dtype))])
            t, value = result_type(method, dtype), f"{text}.{method}()"
        elif r < 0.5:
            t, value = "int64", f"len({text})" if text.count(",") == 0 else f"{text}.size"
        elif r < 0.65 and "," not in text:  # the elements of a run-time slice
            out = self.out_for(dtype)
            if out is None:
                return None
            v = self.fresh("e")
            self.emit(f"for {v} in {text}:")
            self.emit(f"    {out}[{self.next_slot()}] = {v}")
            return True
        else:  # a copy into a run-time view of an output (from a view, or a number)
            out, odt = self.rng.choice(self.outs)
            if "," in text or self.rng.random() < 0.3:
                ex = self.expr(scope, 1)
                out = self.out_for(ex.t) if isinstance(ex.t, str) else None  # no float literal into integers
                if out is None or (ex.weak and not _fits_text(ex.text, dict(self.outs)[out])):
                    return None
                source = ex.text
            else:
                if self.out_for(dtype) != out and dtype != odt and not is_float(odt):
                    return None
                source = text
            if self.rng.random() < 0.5 and source == text:  # lengths that match
                start = self.slice_bound(scope, 0, 8) or "0"
                dest = f"{start}:{start} + len({text})"
            else:
                dest = self.runtime_slice(scope)
            self.emit(f"{out}[{dest}] = {source}")
            return True
        out = self.out_for(t)
        if out is None:
            return None
        self.emit(f"{out}[{self.next_slot()}] = {value}")
        return True

    def s_for_rows(self, scope):
        """`for row in m:` over a 2-D argument (or a view of one): each row a view, read with `row[j]`,
        `row.sum()`/`max()`/`min()`, `len(row)`, a slice of it; the body's other statements follow."""
        if not self.in_kernel or self.loop_depth >= 2:
            return None
        two = sorted((n, d) for n, (d, ndim) in self.arrays.items() if ndim == 2)
        if not two:
            return None
        name, dtype = self.rng.choice(two)
        if self.on("runtime_slices") and self.rng.random() < 0.3:
            name = f"{name}[{self.runtime_slice(scope, -4, 4)}]"
        elif self.rng.random() < 0.2:
            name = f"{name}[{self.rng.choice(['::-1', '1:', ':, ::2', '::2, 1:'])}]"
        row = self.fresh("row")
        self.emit(f"for {row} in {name}:")
        for _ in range(self.rng.randint(1, 3)):
            r = self.rng.random()
            if r < 0.35:
                t, value = dtype, f"{row}[{self.rng.randint(-2, 1)}]"
            elif r < 0.65:
                method = self.rng.choice([m for m in METHODS if not (m == "sum" and is_float(dtype))])
                t, value = result_type(method, dtype), f"{row}.{method}()"
            elif r < 0.8:
                t, value = "int64", f"len({row})"
            else:
                method = self.rng.choice([m for m in METHODS if not (m == "sum" and is_float(dtype))])
                t, value = result_type(method, dtype), f"{row}[{self.runtime_slice(scope, -3, 3)}].{method}()"
            out = self.out_for(t)
            if out is None:
                continue
            aug = dict(self.outs)[out] == t and t not in ("bool",) and self.rng.random() < 0.4
            self.emit(f"    {out}[{self.next_slot()}] {'+' if aug else ''}= {value}")
        return self.loop_body(scope, {})


def is_view(node) -> bool:
    """Whether the subscript `node` makes a view (a slice in its index)."""
    index = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    return any(isinstance(i, ast.Slice) for i in index) or isinstance(node.value, ast.Subscript) and is_view(
        node.value)


def _index(node):
    return node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]


def type_view(typer, node, env):
    """The reference typer's type of a view `a[...]`: one dimension per slice and per dimension left out;
    bounds and steps are integers of any type (literals or computed) or left out."""
    t, _ = typer.expr(node.value, env)
    if not isinstance(t, Arr):
        raise Undefined("a view of a non-array")
    index = _index(node)
    if len(index) > t.ndim:
        raise Undefined("a view with more indices than dimensions")
    ndim = t.ndim
    for i in index:
        parts = [i.lower, i.upper, i.step] if isinstance(i, ast.Slice) else [i]
        for part in parts:
            if part is None:
                continue
            pt, weak = typer.expr(part, env)
            value = typer.typed.consts.get(id(part))
            if weak and not (type(value) is int and fits(value, "int64")):
                raise Undefined(f"a slice literal {value!r}")  # not generated
            if not weak and not is_int(pt):
                raise Undefined(f"a slice bound of type {pt}")  # not generated
        if isinstance(i, ast.Slice):
            if i.step is not None and typer.typed.consts.get(id(i.step)) == 0:
                raise Undefined("a literal step of 0")  # a compile error (docs), not generated
        else:
            ndim -= 1
    return Arr(t.dtype, ndim)


def take(reference, node, env, array):
    """The view the subscript `node` makes of `array` (standing for the innermost base): Python's
    `slice.indices` for each slice (a step that is 0 at run time: an empty view, docs), integer indices as
    element indices (negative from the end, out of range undefined)."""
    if isinstance(node.value, ast.Subscript):
        array = take(reference, node.value, env, array)
    key = []
    for dim, i in enumerate(_index(node)):
        n = array.shape[dim] if dim < array.ndim else 0
        if isinstance(i, ast.Slice):
            lo, hi, step = (None if p is None else int(reference.eval(p, env)) for p in (i.lower, i.upper, i.step))
            if step == 0:
                key.append(slice(0, 0))
                continue
            start, stop, step = slice(lo, hi, step).indices(n)
            if not range(start, stop, step):
                key.append(slice(0, 0))
                continue
            step = max(min(step, n + 1), -(n + 1))  # the same elements, a step NumPy can hold
            key.append(slice(start, stop if stop >= 0 else None, step))  # start >= 0 here
        else:
            k = int(reference.eval(i, env))
            if not -n <= k < n:
                raise Undefined(f"index {k} out of bounds for extent {n}")
            key.append(k)
    return array[tuple(key)]


def _base(node):
    while isinstance(node, ast.Subscript):
        node = node.value
    return node


def type_copy(view: Arr, t, weak: bool, value) -> None:
    """The reference typer's check of `view = value`: a number (a literal must fit) or an array."""
    if is_scalar(t):
        if weak and not stores(value, view.dtype):
            raise Expected("literal", f"{value!r} stored in a {view.dtype} array")
    elif not isinstance(t, Arr) or t.ndim > view.ndim:
        raise Undefined(f"copying a {t} into a view")


def eval_view(reference, node, env):
    return take(reference, node, env, reference.eval(_base(node), env))


def copy_into_view(reference, target, value, env, stmt):
    """`view = value` on reference values: every element stored as `reference.store` stores one; an array
    source broadcasts as NumPy's does, and where it cannot the statement writes nothing (docs)."""
    array = reference.eval(_base(target), env)
    positions = take(reference, target, env, np.arange(array.size).reshape(array.shape))
    if isinstance(value, np.ndarray):
        dtype = "bool" if value.dtype == np.bool_ else value.dtype.name
        try:
            source = np.broadcast_to(value, positions.shape)
        except ValueError:
            return  # NumPy raises ValueError before writing; gpuc writes nothing
        values = [from_numpy(v, dtype) for v in source.reshape(-1).copy()]  # read before any write
    else:
        values = [value] * positions.size
    for flat, v in zip(positions.reshape(-1), values):
        reference.store(array, np.unravel_index(int(flat), array.shape), v, stmt)


MODULES = ("np", "math", "cmath", "gpuc")


def is_view_method(node) -> bool:
    """`x.sum()`, `x.max()`, `x.min()` of an array, a view or a row variable."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in METHODS \
        and not (isinstance(node.func.value, ast.Name) and node.func.value.id in MODULES)


def type_method(typer, node, env):
    """The reference typer's type of `a[...].method()`."""
    base, _ = typer.expr(node.func.value, env)
    if not isinstance(base, Arr) or node.args or node.keywords:
        raise Undefined("a method of a non-array")
    if is_complex(base.dtype):
        raise Undefined("a reduction of complex numbers")  # not generated
    return result_type(node.func.attr, base.dtype), False


def eval_method(reference, node, env):
    """NumPy's reduction of the view; of an empty view, max and min give the identity of the reduction
    (docs: -inf/+inf, the integer type's minimum/maximum, False/True), where NumPy raises."""
    view = reference.eval(node.func.value, env)
    dtype = "bool" if view.dtype.name == "bool" else view.dtype.name
    method = node.func.attr
    if view.size == 0 and method != "sum":
        if dtype == "bool":
            return method == "min"
        if is_float(dtype):
            return NUMPY[dtype](-np.inf if method == "max" else np.inf)
        lo, hi = int_range(dtype)
        return lo if method == "max" else hi
    result = getattr(view, method)()
    if method != "sum" and is_float(dtype) and result == 0 and np.signbit(view[view == 0]).any() \
            and not np.signbit(view[view == 0]).all():
        raise Undefined("max/min of +0.0 and -0.0")  # which zero the tie gives is not documented
    return from_numpy(result, result_type(method, dtype))
