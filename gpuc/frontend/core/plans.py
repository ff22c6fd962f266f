"""What typing decides and lowering follows: the plans of operators and calls, the `Handler` base of
every callable the frontend knows, and the typing of constants. Typing produces a *plan* (the operand and
result types); the lowering follows the plan, so the two passes cannot disagree about conversions."""

from __future__ import annotations

import ast
import math
import operator
from dataclasses import dataclass

from .errors import UserError
from .types import ArrayType, ComplexType, GType, ScalarType, TupleType, as_type, boolean, complex128, float64, int64, int_range
from .types import an

# -- constants ------------------------------------------------------------------------------


def constant_type(value) -> ScalarType | None:
    """The type of a compile-time constant: Python bool/int/float (weak) or a NumPy scalar (strong)."""
    if isinstance(value, bool):
        return boolean
    if isinstance(value, int):
        if not -(1 << 63) <= value < (1 << 64):
            if value.bit_length() > 128:  # e.g. 1 << 2**31, which is not even computed
                raise UserError("this integer is far beyond 64 bits", hint="literals are 64-bit integers")
            raise UserError(f"the integer {value} does not fit in 64 bits")
        return int64
    if isinstance(value, float):
        return float64
    if isinstance(value, complex):
        return complex128
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy is a dependency
        return None
    if isinstance(value, np.generic):
        try:
            return as_type(value.dtype)
        except TypeError:
            return None
    return None


def check_literal_fits(value, t: ScalarType) -> None:
    """A weak literal used as a `t` must be representable: an integer in t's range, a float converted
    to an integer (truncated, as NumPy does) too. Any number converts to a float or a bool."""
    if isinstance(value, complex) and not isinstance(t, ComplexType):
        raise UserError(f"the complex literal {value} cannot be converted to {t}",
                        hint="take its .real or .imag, or make the other operand complex")
    if isinstance(t, ComplexType):
        return
    if not t.is_int or type(value) is bool or not isinstance(value, (int, float)):
        return
    lo, hi = int_range(t)
    if type(value) is float and not (math.isfinite(value) and lo <= int(value) <= hi):
        raise UserError(f"the literal {value} cannot be converted to {t} (out of its range)")
    if type(value) is int and not lo <= value <= hi:
        hint = ("integers of 2**63 and more fit uint64 values and floats only: write gpuc.uint64(...) or a float"
                if value >= 1 << 63 else "convert the other operand first, e.g. int(x) or gpuc.int64(x)")
        raise UserError(f"the literal {value} does not fit in {t}", hint=hint)



@dataclass(frozen=True)
class BinPlan:
    op: str
    operand: ScalarType      # both sides are converted to this type (the exponent of "powi" excepted)
    result: ScalarType
    kind: str = ""           # "powi" when a float is raised to an integer power



@dataclass(frozen=True)
class UnaryPlan:
    op: str
    operand: ScalarType
    result: ScalarType



@dataclass(frozen=True)
class ComparePlan:
    op: str
    operand: ScalarType
    result: bool | None = None   # known at compile time: a literal lies outside the operand type's range


_COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
            "!=": operator.ne}



def exact_compare(op: str, t: ScalarType, left, right) -> bool | None:
    """Python's result of `left op right` when a literal side (an int; None: not a literal) lies outside
    the range of the integer type `t`: every value of `t` is on the same side of such a literal, so any
    one of them stands for the other side. None when both sides fit `t`."""
    if not t.is_int:
        return None
    lo, hi = int_range(t)
    left_out, right_out = (type(v) is int and not lo <= v <= hi for v in (left, right))
    if not (left_out or right_out):
        return None
    return _COMPARE[op](left if left_out else lo, right if right_out else lo)


ICMP = {("<", True): "slt", ("<=", True): "sle", (">", True): "sgt", (">=", True): "sge",
        ("<", False): "ult", ("<=", False): "ule", (">", False): "ugt", (">=", False): "uge",
        ("==", True): "eq", ("!=", True): "ne", ("==", False): "eq", ("!=", False): "ne"}
FCMP = {"<": "olt", "<=": "ole", ">": "ogt", ">=": "oge", "==": "oeq", "!=": "une"}  # NaN != NaN is True



@dataclass(frozen=True)
class CallPlan:
    result: GType
    args: tuple = ()     # argument types
    extra: object = None
    calls: tuple = ()    # typed functions the lowering calls directly (defined in the module with the caller)


class Handler:
    """A callable known to the frontend: `type` checks a call and makes a plan, `lower` emits it."""

    name = "?"
    keywords = False

    def args(self, typer, node: ast.Call, low: int, high: int | None = None) -> list:
        n = len(node.args)
        high = low if high is None else high
        if not low <= n <= high:
            count = f"{low}" if low == high else (f"at least {low}" if high > 99 else f"{low} to {high}")
            raise UserError(f"{self.name}() takes {count} argument(s), but {n} were given")
        return [typer.value_expr(a, f"an argument of {self.name}()") for a in node.args]

    def scalars(self, typer, node, low, high=None) -> list[ScalarType]:
        types = self.args(typer, node, low, high)
        for a, t in zip(node.args, types):
            if isinstance(t, ComplexType):
                raise UserError(f"{self.name}() does not take complex numbers ({an(t)}; Python raises TypeError)",
                                hint="use z.real, z.imag, abs(z) or cmath's functions", node=a)
            if not isinstance(t, ScalarType):
                raise UserError(f"{self.name}() needs numbers, not {an(t)}", node=a)
        return types

    def type(self, typer, node):
        raise NotImplementedError

    def lower(self, lw, node, plan):
        raise NotImplementedError



def array_attribute(t: ArrayType, attr: str) -> GType | None:
    return {"shape": TupleType((int64,) * t.ndim), "ndim": int64, "size": int64}.get(attr)
