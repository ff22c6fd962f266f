"""Array methods: `a.sum()`, `a.prod()`, `a.max()`, `a.min()`, `a.mean()` over every element of an
array or a view of any dimension, with NumPy 2's result types.

Sums and products of integers wrap (as NumPy's do); a float32 sum or mean accumulates in float64 and
rounds once at the end, float64 sums accumulate in order. NumPy sums floats pairwise, so results can
differ from NumPy's in the last bits (both stay within NumPy's own error bound, about
log2(n) * n * eps * sum(|a|) for pairwise, n * eps * sum(|a|) for an in-order float64 sum). `max`/`min`
propagate NaN as NumPy does; of an empty array (NumPy raises ValueError) they give the identity of
the reduction (-inf/+inf, the integer type's minimum/maximum, False/True); `mean` of an empty array
is NaN, as NumPy's (which warns).
"""

from __future__ import annotations

import ast
import math

from ..llvm import ConstantFP, ConstantInt
from .errors import UserError
from .operations import CallPlan, Handler
from .types import ArrayType, ScalarType, float64, int64, int_range, uint64
from .views import loop_nest, element, shapes_of

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
    if method == "mean" or dtype.is_float:
        return float64
    return result_type(method, dtype)


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
    """a.<method>() over every element, in row-major order."""

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

    def lower(self, lw, node, plan):
        (t,) = plan.args
        array = lw.expr(node.func.value)
        acc_t = _accumulator(self.method, t.dtype)
        slot = lw.alloca_builder.alloca(lw.ltype(acc_t), f"{self.method}.acc")
        lw.b.store(self._identity(lw, acc_t), slot)
        shapes = shapes_of(lw, array, t)

        def step(idx):
            v = lw.convert(lw.load_element(element(lw, array, t, idx), t.dtype), t.dtype, acc_t)
            lw.b.store(self._combine(lw, lw.b.load(lw.ltype(acc_t), slot), v, acc_t), slot)
        loop_nest(lw, shapes, step)
        acc = lw.b.load(lw.ltype(acc_t), slot)
        if self.method == "mean":
            count = ConstantInt.get(lw.ctx.i64, 1)
            for n in shapes:
                count = lw.b.mul(count, n)
            acc = lw.b.fdiv(acc, lw.convert(count, int64, float64))
        return lw.convert(acc, acc_t, plan.result)
