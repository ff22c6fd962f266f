"""Array methods: `a.sum()`, `a.prod()`, `a.max()`, `a.min()`, `a.mean()` over every element of an
array or a view of any dimension, with NumPy 2's result types.

The function forms `np.sum(a)`, `np.prod(a)`, `np.max(a)` / `np.amax(a)`, `np.min(a)` / `np.amin(a)`
and `np.mean(a)` are the same reductions.

Sums and products of integers wrap (as NumPy's do). Float sums, means and products, and the float64
mean of integers, are NumPy's bit for bit: they take NumPy's order, pairwise summation included
(gpuc/frontend/arrays/pairwise.py). `max`/`min` propagate NaN as NumPy does; of an empty array (NumPy raises
ValueError) they give the identity of the reduction (-inf/+inf, the integer type's minimum/maximum,
False/True); `mean` of an empty array is NaN, as NumPy's (which warns).
"""

from __future__ import annotations

import ast
import math

from ...llvm import ConstantFP, ConstantInt
from ..core.errors import UserError
from ..core.plans import CallPlan, Handler
from .pairwise import reduce_array
from ..core.types import ArrayType, ScalarType, float16, float32, float64, int64, int_range, uint64
from .views import loop_nest, element, shapes_of
from ..core.types import an

METHODS = ("sum", "prod", "max", "min", "mean")


def result_type(method: str, dtype: ScalarType) -> ScalarType:
    """NumPy 2's (on 64-bit Linux) result dtype of `a.<method>()` for an array of `dtype`."""
    if method in ("max", "min"):
        return dtype
    if method == "mean":
        return dtype if dtype.is_float else float64
    if dtype.is_float:
        return dtype
    return uint64 if dtype.is_int and not dtype.signed else int64


def _accumulator(method: str, dtype: ScalarType) -> ScalarType:
    if method in ("max", "min"):
        return dtype
    if method == "mean" and not dtype.is_float:
        return float64
    return result_type(method, dtype)


def _in_numpys_order(method: str, dtype: ScalarType) -> bool:
    """Whether NumPy's order decides the bits: float sums, means and products, integer means."""
    return method == "mean" or method in ("sum", "prod") and dtype.is_float


def method_call(typer, node: ast.Call):
    """Type `a.sum()` and the other methods of an array; None when `node` is no such call."""
    func = node.func
    if not (isinstance(func, ast.Attribute) and func.attr in METHODS):
        return None
    t = typer.expr(func.value)
    if not isinstance(t, ArrayType):
        return None
    if not isinstance(t.dtype, ScalarType):
        raise UserError(f"a.{func.attr}() of {t.dtype} arrays is not supported",
                        hint="write the loop over the elements", node=node)
    if node.args or node.keywords:
        raise UserError(f"a.{func.attr}() takes no arguments in gpuc functions (no axis, dtype, out, ...)",
                        hint=f"reduce a view instead, e.g. a[i, :].{func.attr}() for one row", node=node)
    handler = Reduction(func.attr)
    plan = CallPlan(result_type(func.attr, t.dtype), (t,))
    typer.typed.calls[id(node)] = (handler, plan)
    return plan.result


class Reduction(Handler):
    """a.<method>() over every element: integer sums and products, max and min in row-major order, the
    others in NumPy's (gpuc/frontend/arrays/pairwise.py)."""

    def __init__(self, method: str) -> None:
        self.method, self.name = method, f"a.{method}"

    def _identity(self, lw, t: ScalarType):
        if self.method in ("sum", "mean"):
            return lw.const(t, 0)
        if self.method == "prod":
            return lw.const(t, 1)
        low = self.method == "max"
        if t.is_float:
            return ConstantFP.get(lw.ltype(t), -math.inf if low else math.inf)
        lo, hi = int_range(t)
        return lw.bits(t, lo if low else hi) if not t.is_bool else ConstantInt.get(lw.ctx.i1, 0 if low else 1)

    def _combine(self, lw, acc, v, t: ScalarType):
        b = lw.b
        if self.method in ("sum", "mean"):
            return b.fadd(acc, v) if t.is_float else b.add(acc, v)
        if self.method == "prod":
            return b.fmul(acc, v) if t.is_float else b.mul(acc, v)
        if t.is_float:  # NaN wins, and stays (nothing compares above it)
            better = b.or_(b.fcmp("ogt" if self.method == "max" else "olt", v, acc), b.fcmp("uno", v, v))
        else:
            signed = "s" if t.signed else "u"
            better = b.icmp(f"{signed}gt" if self.method == "max" else f"{signed}lt", v, acc)
        return b.select(better, v, acc)

    def array_node(self, node: ast.Call):
        return node.func.value

    def lower(self, lw, node, plan):
        (t,) = plan.args
        array = lw.expr(self.array_node(node))
        if _in_numpys_order(self.method, t.dtype):
            return self._lower_in_numpys_order(lw, array, t, plan.result)
        acc_t = _accumulator(self.method, t.dtype)
        slot = lw.alloca_builder.alloca(lw.ltype(acc_t), f"{self.method}.acc")
        lw.b.store(self._identity(lw, acc_t), slot)
        shapes = shapes_of(lw, array, t)

        def step(idx):
            v = lw.convert(lw.load_element(element(lw, array, t, idx), t.dtype), t.dtype, acc_t)
            lw.b.store(self._combine(lw, lw.b.load(lw.ltype(acc_t), slot), v, acc_t), slot)
        loop_nest(lw, shapes, step)
        acc = lw.b.load(lw.ltype(acc_t), slot)
        return lw.convert(acc, acc_t, plan.result)

    def _lower_in_numpys_order(self, lw, array, t: ArrayType, result: ScalarType):
        """NumPy's bits: float16 sums and products compute in float32 and round to half after each chunk;
        a mean sums a float16 array in float32 and any other integer or bool array in float64 (a cast,
        which NumPy buffers), divides in float64 (NumPy divides by an intp count) and rounds once."""
        dtype = t.dtype
        cast = self.method == "mean" and (dtype == float16 or not dtype.is_float)
        acc_t = float32 if dtype == float16 else (dtype if dtype.is_float else float64)
        res_t = acc_t if cast else dtype
        method = "prod" if self.method == "prod" else "sum"
        value, count = reduce_array(lw, array, t, method, res_t, acc_t, self._identity(lw, res_t), cast)
        if self.method != "mean":
            return value
        mean = lw.b.fdiv(lw.convert(value, res_t, float64), lw.convert(count, int64, float64))
        return lw.convert(mean, float64, result)


class NumpyReduction(Reduction):
    """np.sum(a) and the other function forms: the method of the array `a`."""

    keywords = True  # to say what works instead of axis=, dtype=, ...

    def __init__(self, function: str, method: str) -> None:
        super().__init__(method)
        self.function, self.name = function, f"np.{function}"

    def array_node(self, node: ast.Call):
        return node.args[0]

    def type(self, typer, node: ast.Call):
        name = f"np.{self.function}"
        if len(node.args) != 1:
            raise UserError(f"{name}() takes one array in gpuc functions, not {len(node.args)} arguments "
                            "(no axis, dtype, out, ...)",
                            hint=f"reduce a view instead, e.g. {name}(a[i, :]) or a[i, :].{self.method}() for one "
                                 "row, or write the loop", node=node.args[1] if len(node.args) > 1 else node)
        if node.keywords:
            keyword = node.keywords[0]
            raise UserError(f"{name}() takes no keyword arguments in gpuc functions ({keyword.arg}= is not "
                            "supported)",
                            hint=f"for axis=, reduce a view, e.g. a[i, :].{self.method}() for one row, or write "
                                 "the loop", node=keyword.value)
        t = typer.value_expr(node.args[0], f"the argument of {name}()")
        if not isinstance(t, ArrayType):
            raise UserError(f"{name}() takes an array in gpuc functions, not {an(t)}",
                            hint=f"of a number x, {name}(x) is x itself", node=node.args[0])
        if not isinstance(t.dtype, ScalarType):
            raise UserError(f"{name}() of {t.dtype} arrays is not supported",
                            hint="write the loop over the elements", node=node)
        return CallPlan(result_type(self.method, t.dtype), (t,))


#: np.<function> -> the array method it computes
FUNCTIONS = {"sum": "sum", "prod": "prod", "max": "max", "amax": "max", "min": "min", "amin": "min",
             "mean": "mean"}


def numpy_reduction_calls() -> dict:
    """The call table's entries for np.sum(a), np.prod(a), np.max(a) / np.amax(a), np.min(a) / np.amin(a)
    and np.mean(a)."""
    import numpy as np
    return {getattr(np, name): NumpyReduction(name, method) for name, method in FUNCTIONS.items()}
