"""Views in random programs, for the generator (a mixin of support.progen.Generator), the reference typer
and the reference interpreter: reductions of array views (`a0[1:, ::2].max()`, `a1[::-1].sum()`,
`np.mean(a0[::2])`), copies into views of the outputs (`o1[2:5] = a0[::2]`, `o0[4:10:2] = o0[::-6]`
overlapping, `o2[13:] = x`) and augmented assignments to views (`o0[1:] += o0[:-1]`, `a1[1] *= 2`).

The reference takes the views with NumPy itself, of the very arrays of the launch (same strides), and
reduces them with NumPy's own methods: integer sums and products wrap, and float sums, means and
products are NumPy's bit for bit (docs: gpuc takes NumPy's pairwise order), so no tolerance applies.
A max/min of an empty view (NumPy raises ValueError) gives the documented identity. A copy reads its
source before writing (NumPy's semantics for overlapping views) and converts each element as a store
of it would. `view op= x` is NumPy's `np.op(view, x, out=view, casting='same_kind')`, run on the arrays:
where NumPy refuses the types (the cast back, a literal out of the view's range) the docs require a
compile error.
"""

from __future__ import annotations

import ast

import numpy as np

from .expressions import Ex, _fits_text
from .numeric import (NUMPY, Arr, Expected, Undefined, fits, from_numpy, int_range, is_complex, is_float, is_int,
                      is_scalar, stores)

VIEW_FEATURES = {"views", "view_rows", "runtime_slices", "view_augassign", "view_augassign_bool", "np_reductions"}
METHODS = ("sum", "max", "min", "prod", "mean")
# np.<name>(a) and the method it is (docs/frontend.md: the function forms of the reductions)
NP_REDUCTIONS = {"sum": "sum", "prod": "prod", "max": "max", "amax": "max", "min": "min", "amin": "min",
                 "mean": "mean"}
SLICES_1D = ["1:", "::-1", "::2", "-3:", "1:5:2", ":4", "4:1:-1", "::-2", "-100:2", "2:100"]
SLICES_2D = ["1:, ::2", "::-1", "0", ":, 1:", "-1, ::-1", "1:, -1", "::2, 1:3", "2:0:-1, ::-3"]
THREE_OF_16 = ["2:5", "13:", "::-6", "4:10:2", "-3:", "7:4:-1", "1:4", "::6"]     # views of 3 output elements
THREE_OF_6 = ["1:4", "::2", "::-2", "-3:", "4:1:-1", "1::2"]                     # ... of a 1-D argument (6)
THREE_OF_3_4 = [":, 1", "::-1, -1", "1, 1:", "0, :3", "2, ::-1][1:"]              # ... of a 2-D argument (3, 4)


def result_type(method: str, dtype: str) -> str:
    """NumPy 2's result dtype of `a.<method>()` (64-bit Linux)."""
    if method in ("max", "min"):
        return dtype
    if is_float(dtype):
        return dtype
    if method == "mean":
        return "float64"
    return "uint64" if dtype.startswith("uint") else "int64"


class ViewRules:
    def e_view_reduce(self, scope, want=None, *_):
        arrays = list(self.arrays.items())
        if not arrays:
            return None
        name, (dtype, ndim) = self.rng.choice(arrays)
        method = self.rng.choice(METHODS)
        t = result_type(method, dtype)
        if not self.ok(t, want):
            return None
        view = f"{name}[{self.rng.choice(SLICES_1D if ndim == 1 else SLICES_2D)}]" if self.rng.random() < 0.85 else name
        return Ex(self.reduction_text(view, method), t)

    def reduction_text(self, view: str, method: str) -> str:
        """`view.method()` or, with feature np_reductions, now and then `np.<function>(view)`."""
        if self.on("np_reductions") and self.rng.random() < 0.4:
            function = self.rng.choice([f for f, m in NP_REDUCTIONS.items() if m == method])
            return f"np.{function}({view})"
        return f"{view}.{method}()"


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
            method = self.rng.choice(METHODS)
            t, value = result_type(method, dtype), self.reduction_text(text, method)
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
                method = self.rng.choice(METHODS)
                t, value = result_type(method, dtype), self.reduction_text(row, method)
            elif r < 0.8:
                t, value = "int64", f"len({row})"
            else:
                method = self.rng.choice(METHODS)
                t, value = result_type(method, dtype), self.reduction_text(f"{row}[{self.runtime_slice(scope, -3, 3)}]", method)
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
    """`x.sum()`, `x.max()`, ... of an array, a view or a row variable, or `np.sum(x)`, `np.amax(x)`, ..."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    func = node.func
    if isinstance(func.value, ast.Name) and func.value.id == "np":
        return func.attr in NP_REDUCTIONS and len(node.args) == 1
    return func.attr in METHODS and not (isinstance(func.value, ast.Name) and func.value.id in MODULES)


def _reduced(node):
    """The reduced expression and the method of a reduction call (`is_view_method`)."""
    if isinstance(node.func.value, ast.Name) and node.func.value.id == "np":
        return node.args[0], NP_REDUCTIONS[node.func.attr]
    return node.func.value, node.func.attr


def type_method(typer, node, env):
    """The reference typer's type of `a[...].method()` and `np.<function>(a[...])`."""
    reduced, method = _reduced(node)
    base, _ = typer.expr(reduced, env)
    if not isinstance(base, Arr) or node.keywords or (reduced is node.func.value and node.args):
        raise Undefined("a method of a non-array")
    if is_complex(base.dtype):
        raise Undefined("a reduction of complex numbers")  # not generated
    return result_type(method, base.dtype), False


def eval_method(reference, node, env):
    """NumPy's reduction of the view (its own method, on the launch's memory: NumPy's summation order);
    of an empty view, max and min give the identity of the reduction (docs: -inf/+inf, the integer
    type's minimum/maximum, False/True), where NumPy raises, and mean gives NaN."""
    reduced, method = _reduced(node)
    view = reference.eval(reduced, env)
    dtype = "bool" if view.dtype.name == "bool" else view.dtype.name
    if view.size == 0 and method in ("max", "min"):
        if dtype == "bool":
            return method == "min"
        if is_float(dtype):
            return NUMPY[dtype](-np.inf if method == "max" else np.inf)
        lo, hi = int_range(dtype)
        return lo if method == "max" else hi
    if view.size == 0 and method == "mean":
        return NUMPY[result_type(method, dtype)](np.nan)
    result = getattr(view, method)()
    if method in ("max", "min") and is_float(dtype) and result == 0 and np.signbit(view[view == 0]).any() \
            and not np.signbit(view[view == 0]).all():
        raise Undefined("max/min of +0.0 and -0.0")  # which zero the tie gives is not documented
    return from_numpy(result, result_type(method, dtype))


# -- augmented assignment to views (feature view_augassign) -------------------------------------------
UFUNCS = {ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply, ast.Div: np.true_divide,
          ast.FloorDiv: np.floor_divide, ast.Mod: np.remainder, ast.Pow: np.power, ast.BitAnd: np.bitwise_and,
          ast.BitOr: np.bitwise_or, ast.BitXor: np.bitwise_xor, ast.LShift: np.left_shift,
          ast.RShift: np.right_shift}
# (destination, operand) of the same array and as many elements, overlapping: NumPy reads the operand as
# it was before the statement
OVERLAPPING_16 = [("1:", ":-1"), (":-1", "1:"), ("::-1", ":"), ("::2", "1::2"), (":8", "4:12"), ("::-2", "::2"),
                  ("3:", ":13"), ("2:14", "::-1][1:13"), (":", "::-1")]
ROWS_3_4 = ["0", "1", "-1", "2, :", "1, ::-1", "::-1, 1", ":, -1", "1:, 2"]       # views of a (3, 4) argument


class ViewAugRules:
    """The generator's side of `view op= x`: a view of an output or an argument (a slice, a row, a
    reversed or strided view, a run-time view) updated with a number or an array that broadcasts,
    the same array overlapping included. The types are drawn freely: where NumPy would not cast the
    result back (`int_view += 1.5`), the reference requires gpuc's compile error."""

    def s_view_aug(self, scope):
        if not self.in_kernel or not self.on("view_augassign"):
            return None
        r = self.rng.random()
        two = sorted((n, d) for n, (d, ndim) in self.arrays.items() if ndim == 2)
        one = sorted((n, d) for n, (d, ndim) in self.arrays.items() if ndim == 1)
        if r < 0.25:  # overlapping views of one output
            out, dtype = self.rng.choice(self.outs)
            dest, source = (f"{out}[{v}]" for v in self.rng.choice(OVERLAPPING_16))
            if self.rng.random() < 0.3:
                source = f"{out}[{self.rng.choice(['0:1', '-1:', '5:6'])}]"  # one element: broadcasts
        elif r < 0.45 and two:  # a row, a column, or a view of a 2-D argument
            name, dtype = self.rng.choice(two)
            dest = f"{name}[{self.rng.choice(ROWS_3_4)}]"
            if self.rng.random() < 0.4 and self.loop_depth == 0:
                dest = f"{name}[({self.expr(scope, 2, 'int').text}) % 3]"  # a row chosen at run time
            source = self.aug_source(scope, dtype, two, one)
        elif r < 0.6 and self.on("runtime_slices") and self.arrays:
            dest, dtype = self.runtime_view(scope)
            source = self.aug_source(scope, dtype, two, one)
        else:
            out, dtype = self.rng.choice(self.outs)
            dest = f"{out}[{self.rng.choice(THREE_OF_16 + ['1:', '::-2', ':', '::3'])}]"
            source = self.aug_source(scope, dtype, two, one, three=dest)
        if source is None:
            return None
        self.emit(f"{dest} {self.aug_op(dtype, source)}= {source}")
        return True

    def aug_op(self, dtype, source):
        if dtype == "bool" and not self.on("view_augassign_bool"):
            return self.rng.choice(["&", "|", "^"])
        ops = ["+", "-", "*"] + (["/"] if self.rng.random() < 0.3 else [])
        if is_float(dtype) and self.rng.random() < 0.15:
            ops += ["//", "%"]
        if is_int(dtype) or dtype == "bool":
            ops += ["//", "%", "&", "|", "^"] + (["<<", ">>"] if not source.endswith("]") else [])
        op = self.rng.choice(ops)
        return op

    def aug_source(self, scope, dtype, two, one, three=None):
        """A number (a literal, a typed scalar, an expression) or an array view for `view op= source`."""
        r = self.rng.random()
        if r < 0.25:
            return self.rng.choice(["1", "2", "-1", "3", "0.5", "-2.5", "True", "200", "7"])
        if r < 0.5:
            ex = self.expr(scope, 1)
            if not isinstance(ex.t, str) or (ex.weak and not _fits_text(ex.text, "int64")):
                return None
            if is_int(dtype) and is_int(ex.t):
                return f"({ex.text} & 7)" if self.rng.random() < 0.5 else ex.text
            return ex.text
        if three is not None and self.arrays and r < 0.8:  # three elements, or one
            name, (adt, ndim) = self.rng.choice(sorted(self.arrays.items()))
            return f"{name}[{self.rng.choice(THREE_OF_6 + ['0:1'] if ndim == 1 else THREE_OF_3_4)}]"
        if two and r < 0.75:
            name, _ = self.rng.choice(two)
            return f"{name}[{self.rng.choice(['1', '::-1][0', '-1, :', ':, 2][::-1][0:1', '0, ::-1'])}]"
        if one and r < 0.9:
            name, _ = self.rng.choice(one)
            return f"{name}[{self.rng.choice([':4', '2:', '::-1][1:5', '0:1', '-1:'])}]"
        out, _ = self.rng.choice(self.outs)
        return f"{out}[{self.rng.choice([':4', ':3', '4:8', '::-4', '0:1'])}]"


def _operand_sample(t, weak, value):
    """A stand-in of the operand for NumPy's type resolution: the literal itself (NEP 50: weak), a
    NumPy scalar of its type, or an array of its dtype."""
    if isinstance(t, Arr):
        return np.zeros(1, NUMPY[t.dtype])
    if weak:
        return value
    return NUMPY[t](0)


def type_augmented(typer, s, view: Arr, env):
    """The reference typer's check of `view op= value`: NumPy's `np.op(view, value, out=view,
    casting='same_kind')`, tried on arrays of the launch's types; what NumPy refuses is a compile error."""
    t, weak = typer.expr(s.value, env)
    value = typer.typed.consts.get(id(s.value))
    if isinstance(t, Arr) and t.ndim > view.ndim:
        raise Undefined("an operand of more dimensions than the view")  # not generated
    if not (isinstance(t, Arr) or is_scalar(t)):
        raise Undefined(f"{t} as an augmented operand")
    if isinstance(s.op, ast.Pow):
        raise Undefined("a power into a view")  # not generated (NumPy raises for negative integer powers)
    if is_complex(view.dtype) or is_complex(t.dtype if isinstance(t, Arr) else t):
        raise Undefined("complex views")  # not generated
    ufunc = UFUNCS[type(s.op)]
    dest = np.zeros(1, NUMPY[view.dtype])
    try:
        with np.errstate(all="ignore"):
            ufunc(dest, _operand_sample(t, weak, value), out=dest, casting="same_kind")
    except OverflowError as exc:  # NumPy 2: a Python integer out of the view's range
        raise Expected("literal", f"{value!r} with a {view.dtype} view: {exc}")
    except np._core._exceptions._UFuncOutputCastingError as exc:
        raise Expected("in place", str(exc))
    except np._core._exceptions._UFuncNoLoopError as exc:
        if isinstance(s.op, (ast.BitAnd, ast.BitOr, ast.BitXor, ast.LShift, ast.RShift)):
            raise Expected("bitwise float", str(exc))
        raise Undefined(str(exc))
    except TypeError as exc:  # NumPy's booleans have no subtract: not modelled
        raise Undefined(str(exc))
    typer.typed.optype[id(s)] = "view"


def augment_view(reference, s, env):
    """`view op= value` on reference values: the view (of the launch's memory) first, then the value, as
    Python evaluates them; then NumPy's in-place ufunc, which reads an overlapping operand as it was
    before the statement. An array operand that does not broadcast to the view writes nothing (as a copy)."""
    target = s.target
    view = take(reference, target, env, reference.eval(_base(target), env))
    value = reference.eval(s.value, env)
    t, weak = reference.t.types[id(s.value)]
    if isinstance(value, np.ndarray):
        try:
            operand = np.broadcast_to(value, view.shape).copy()
        except ValueError:
            return
    elif weak:
        operand = reference.t.consts[id(s.value)]
    else:
        operand = NUMPY[t](value)
    with np.errstate(all="ignore"):
        UFUNCS[type(s.op)](view, operand, out=view, casting="same_kind")
