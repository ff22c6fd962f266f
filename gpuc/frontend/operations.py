"""Operator and builtin tables: how each operator, builtin, math function and intrinsic is typed and lowered.

Typing produces a *plan* (the operand and result types); the lowering follows the plan, so the two
passes cannot disagree about conversions.
"""

from __future__ import annotations

import ast
import builtins as _py
import math
import operator
import types as _pytypes
from dataclasses import dataclass

from ..abi import INDEX_MARKER, NDRANGE_MARKER
from ..llvm import ConstantFP, ConstantInt
from .errors import UserError
from .types import (ArrayType, ComplexType, GType, ScalarType, TupleType, boolean, check_scalar, common_type,
                    float64, int64, int_range, none, promote)

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
        from .types import complex128
        return complex128
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy is a dependency
        return None
    if isinstance(value, np.generic):
        from .types import as_type
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


# -- operator plans -------------------------------------------------------------------------


@dataclass(frozen=True)
class BinPlan:
    op: str
    operand: ScalarType      # both sides are converted to this type (the exponent of "powi" excepted)
    result: ScalarType
    kind: str = ""           # "powi" when a float is raised to an integer power


def binary_plan(op: str, lt, rt, lw: bool, rw: bool, rconst=None, lconst=None) -> BinPlan:
    if isinstance(lt, ComplexType) or isinstance(rt, ComplexType):
        from . import complex
        return complex.binary_plan(op, lt, rt, lw, rw)
    lt, rt = check_scalar(lt, f"the left operand of {op}"), check_scalar(rt, f"the right operand of {op}")
    operand = promote(lt, rt, lw, rw)
    if lw and not rw:
        check_literal_fits(lconst, operand)
    if rw and not lw:
        check_literal_fits(rconst, operand)
    if op in "&|^" or op in ("<<", ">>"):
        if operand.is_float:
            raise UserError(f"operator {op} needs integers or bools, not {lt} and {rt}")
        if op in ("<<", ">>") and operand.is_bool:
            operand = int64
        return BinPlan(op, operand, operand)
    if operand.is_bool:
        operand = int64  # Python: True + True == 2
    if op == "/":
        result = operand if operand.is_float else float64
        return BinPlan(op, result, result)
    if op == "**":
        if rt.is_int or rt.is_bool:
            if type(rconst) is int and rconst < 0 and operand.is_int:
                raise UserError("integers cannot be raised to a negative power",
                                hint="make the base a float: float(x) ** -n")
            if operand.is_float:
                return BinPlan(op, operand, operand, "powi")
    return BinPlan(op, operand, operand)


@dataclass(frozen=True)
class UnaryPlan:
    op: str
    operand: ScalarType
    result: ScalarType


def unary_plan(op: str, t) -> UnaryPlan:
    names = {"USub": "-", "UAdd": "+", "Not": "not", "Invert": "~"}
    if isinstance(t, ComplexType):
        from . import complex
        return complex.unary_plan(op, t)
    t = check_scalar(t, f"the operand of {names.get(op, op)}")
    if op == "Not":
        return UnaryPlan(op, t, boolean)
    if op == "Invert":
        if t.is_float:
            raise UserError(f"operator ~ needs an integer or a bool, not {t}")
        return UnaryPlan(op, t, t)  # ~ on bool is logical not, as in NumPy
    if op in ("USub", "UAdd"):
        operand = int64 if t.is_bool else t
        return UnaryPlan(op, operand, operand)
    raise UserError(f"unary operator {op} is not supported")


@dataclass(frozen=True)
class ComparePlan:
    op: str
    operand: ScalarType
    result: bool | None = None   # known at compile time: a literal lies outside the operand type's range


_COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
            "!=": operator.ne}


def compare_plan(op: str, lt, rt, lw: bool, rw: bool, lconst=None, rconst=None) -> ComparePlan:
    """Both sides convert to the promoted type; `lconst`/`rconst` are the values of literal sides."""
    if isinstance(lt, ComplexType) or isinstance(rt, ComplexType):
        from . import complex
        return complex.compare_plan(op, lt, rt, lw, rw)
    lt, rt = check_scalar(lt, "a compared value"), check_scalar(rt, "a compared value")
    operand = promote(lt, rt, lw, rw)
    return ComparePlan(op, operand, exact_compare(op, operand, lconst, rconst))


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


# -- lowering of arithmetic (shared by binary operators and augmented assignment) --------------


def _safe_divisor(lw, a, b, t):
    """(divisor, b == 0): `b`, or 1 where the hardware division would trap or LLVM's would be undefined
    (b == 0, and MIN / -1 for signed types); with 1 the quotient is `a` and the remainder 0."""
    bld = lw.b
    zero = ConstantInt.get(b.type, 0)
    by_zero = bld.icmp("eq", b, zero)
    bad = by_zero
    if t.signed:
        overflow = bld.and_(bld.icmp("eq", a, ConstantInt.get(a.type, -(1 << (t.bits - 1)))),
                            bld.icmp("eq", b, ConstantInt.get(b.type, -1)))
        bad = bld.or_(by_zero, overflow)
    return bld.select(bad, ConstantInt.get(b.type, 1), b), by_zero


def _int_floordiv(lw, a, b, t):
    """Python's floored quotient; as NumPy, x // 0 is 0 and MIN // -1 wraps to MIN."""
    bld = lw.b
    d, by_zero = _safe_divisor(lw, a, b, t)
    zero = ConstantInt.get(a.type, 0)
    if t.signed:
        q, r = bld.sdiv(a, d), bld.srem(a, d)
        adjust = bld.and_(bld.icmp("ne", r, zero), bld.icmp("slt", bld.xor(r, d), zero))
        q = bld.sub(q, bld.zext(adjust, a.type))
    else:
        q = bld.udiv(a, d)
    return bld.select(by_zero, zero, q)


def _int_mod(lw, a, b, t):
    """Python's remainder (the divisor's sign); as NumPy, x % 0 and MIN % -1 are 0."""
    bld = lw.b
    d, _ = _safe_divisor(lw, a, b, t)
    if not t.signed:
        return bld.urem(a, d)
    r = bld.srem(a, d)
    zero = ConstantInt.get(a.type, 0)
    adjust = bld.and_(bld.icmp("ne", r, zero), bld.icmp("slt", bld.xor(r, d), zero))
    return bld.select(adjust, bld.add(r, d), r)


def _int_shift(lw, a, b, t, op):
    """`<<` / `>>` as NumPy defines them for any count: a count outside [0, bits) shifts every bit out
    (0, or -1 for `>>` of a negative signed value) instead of LLVM's poison."""
    bld = lw.b
    in_range = bld.icmp("ult", b, ConstantInt.get(b.type, t.bits))
    count = bld.select(in_range, b, ConstantInt.get(b.type, t.bits - 1))
    if op == "<<":
        return bld.select(in_range, bld.shl(a, count), ConstantInt.get(a.type, 0))
    if t.signed:
        return bld.ashr(a, count)  # a count of bits - 1 already gives 0 or -1
    return bld.select(in_range, bld.lshr(a, count), ConstantInt.get(a.type, 0))


def _float_divmod(lw, a, b, t):
    """CPython's float_divmod: (floor quotient, remainder with the divisor's sign); NumPy's by zero."""
    bld = lw.b
    zero, one, half = (ConstantFP.get(a.type, v) for v in (0.0, 1.0, 0.5))
    from .mathlib import emit
    mod = emit(lw, "fmod", t, [a, b])  # C's fmod, exact on every target (NVPTX's frem is not)
    div = bld.fdiv(bld.fsub(a, mod), b)
    mod_nonzero = bld.fcmp("une", mod, zero)
    fix = bld.and_(mod_nonzero, bld.xor(bld.fcmp("olt", b, zero), bld.fcmp("olt", mod, zero)))
    mod = bld.select(fix, bld.fadd(mod, b), mod)
    div = bld.select(fix, bld.fsub(div, one), div)
    mod = bld.select(mod_nonzero, mod, lw.math("copysign", t, [zero, b]))
    floordiv = lw.math("floor", t, [div])
    floordiv = bld.select(bld.fcmp("ogt", bld.fsub(div, floordiv), half), bld.fadd(floordiv, one), floordiv)
    floordiv = bld.select(bld.fcmp("une", div, zero), floordiv, lw.math("copysign", t, [zero, bld.fdiv(a, b)]))
    # by zero, NumPy's quotient is a / b (±inf, or NaN for 0 // 0); Python raises ZeroDivisionError
    floordiv = bld.select(bld.fcmp("oeq", b, zero), bld.fdiv(a, b), floordiv)
    return floordiv, mod


def _int_pow(lw, a, b, t):
    """Exponentiation by squaring in a loop; a negative exponent gives 1 (documented)."""
    bld, fn = lw.b, lw.fn
    ty = a.type
    zero, one = ConstantInt.get(ty, 0), ConstantInt.get(ty, 1)
    before = bld.block
    head, body, done = fn.append_block("pow.head"), fn.append_block("pow.body"), fn.append_block("pow.done")
    bld.br(head)
    bld.position_at_end(head)
    result = bld.phi(ty, name="pow.result")
    base = bld.phi(ty, name="pow.base")
    exp = bld.phi(ty, name="pow.exp")
    cmp = "sgt" if t.signed else "ugt"
    bld.cond_br(bld.icmp(cmp, exp, zero), body, done)
    bld.position_at_end(body)
    odd = bld.icmp("ne", bld.and_(exp, one), zero)
    new_result = bld.select(odd, bld.mul(result, base), result)
    new_base, new_exp = bld.mul(base, base), bld.lshr(exp, one)
    bld.br(head)
    result.add_incoming(one, before), result.add_incoming(new_result, body)
    base.add_incoming(a, before), base.add_incoming(new_base, body)
    exp.add_incoming(b, before), exp.add_incoming(new_exp, body)
    bld.position_at_end(done)
    return result


def _float_pow_int(lw, a, b, plan, exponent_type, exponent_const):
    """float ** int: multiply out constant exponents (exact like powi); otherwise pow(x, float(n))."""
    t = plan.operand
    if type(exponent_const) is int and abs(exponent_const) <= 64:
        n, result, square = abs(exponent_const), ConstantFP.get(a.type, 1.0), a
        while n:
            if n & 1:
                result = lw.b.fmul(result, square) if not _is_one(result) else square
            n >>= 1
            if n:
                square = lw.b.fmul(square, square)
        return lw.b.fdiv(ConstantFP.get(a.type, 1.0), result) if exponent_const < 0 else result
    return lw.math("pow", t, [a, lw.convert(b, exponent_type, t)])


def _is_one(v) -> bool:
    return isinstance(v, ConstantFP) and v.value == 1.0


def lower_binary(lw, plan: BinPlan, left, lt, right, rt, rconst=None):
    t, op, bld = plan.operand, plan.op, lw.b
    if plan.kind == "complex":
        from . import complex
        return complex.lower_binary(lw, plan, left, lt, right, rt, rconst)
    if t.is_float and t.bits == 16:  # computed in float32 and rounded, as NumPy does (small_dtypes.py)
        from .small_dtypes import lower_half_binary
        return lower_half_binary(lw, plan, lw.convert(left, lt, t), right, rt, rconst)
    a = lw.convert(left, lt, t)
    if plan.kind == "powi":
        return _float_pow_int(lw, a, right, plan, rt, rconst)
    b = lw.convert(right, rt, t)
    if t.is_float:
        simple = {"+": bld.fadd, "-": bld.fsub, "*": bld.fmul, "/": bld.fdiv}
        if op in simple:
            return simple[op](a, b)
        if op == "//":
            return _float_divmod(lw, a, b, t)[0]
        if op == "%":
            return _float_divmod(lw, a, b, t)[1]
        if op == "**":
            return lw.math("pow", t, [a, b])
    simple = {"+": bld.add, "-": bld.sub, "*": bld.mul, "&": bld.and_, "|": bld.or_, "^": bld.xor}
    if op in simple:
        return simple[op](a, b)
    if op in ("<<", ">>"):
        return _int_shift(lw, a, b, t, op)
    if op == "//":
        return _int_floordiv(lw, a, b, t)
    if op == "%":
        return _int_mod(lw, a, b, t)
    if op == "**":
        return _int_pow(lw, a, b, t)
    raise AssertionError(f"no lowering for {op} on {t}")


def lower_unary(lw, plan: UnaryPlan, value, t):
    bld = lw.b
    if isinstance(t, ComplexType):
        from . import complex
        return complex.lower_unary(lw, plan, value, t)
    if plan.op == "Not":
        return bld.not_(lw.truth(value, t))
    if plan.op == "Invert":
        return bld.not_(value)
    v = lw.convert(value, t, plan.operand)
    if plan.op == "UAdd":
        return v
    return bld.fneg(v) if plan.operand.is_float else bld.sub(ConstantInt.get(v.type, 0), v)


def lower_compare(lw, plan: ComparePlan, left, lt, right, rt):
    t = plan.operand
    a, b = lw.convert(left, lt, t), lw.convert(right, rt, t)
    if isinstance(t, ComplexType):
        from . import complex
        return complex.lower_compare(lw, plan, a, b)
    if t.is_float:
        return lw.b.fcmp(FCMP[plan.op], a, b)
    return lw.b.icmp(ICMP[(plan.op, t.signed)], a, b)


# -- calls: builtins, math, intrinsics ------------------------------------------------------


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
                raise UserError(f"{self.name}() does not take complex numbers (a {t}; Python raises TypeError)",
                                hint="use z.real, z.imag, abs(z) or cmath's functions", node=a)
            if not isinstance(t, ScalarType):
                raise UserError(f"{self.name}() needs numbers, not a {t}", node=a)
        return types

    def type(self, typer, node):
        raise NotImplementedError

    def lower(self, lw, node, plan):
        raise NotImplementedError


class Convert(Handler):
    """int(x), float(x), bool(x), gpuc.float32(x), ...: NumPy-style conversion (floats truncate to ints)."""

    def __init__(self, name: str, target: ScalarType) -> None:
        self.name, self.target = name, target

    def type(self, typer, node):
        (t,) = self.scalars(typer, node, 1)
        typer.fit(node.args[0], self.target)  # np.uint32(-1) is an error in NumPy 2
        return CallPlan(self.target, (t,))

    def lower(self, lw, node, plan):
        return lw.operand(node.args[0], self.target)


class Abs(Handler):
    name = "abs"

    def type(self, typer, node):
        (t,) = self.scalars(typer, node, 1)
        result = int64 if t.is_bool else t
        return CallPlan(result, (t,))

    def lower(self, lw, node, plan):
        t = plan.result
        v = lw.convert(lw.expr(node.args[0]), plan.args[0], t)
        if t.is_float:
            return lw.math("fabs", t, [v])
        if not t.signed:
            return v
        neg = lw.b.icmp("slt", v, ConstantInt.get(v.type, 0))
        return lw.b.select(neg, lw.b.sub(ConstantInt.get(v.type, 0), v), v)


class MinMax(Handler):
    """min/max of two or more numbers with Python's rule: the first of equal (or NaN-unordered) items wins."""

    def __init__(self, name: str) -> None:
        self.name = name

    def type(self, typer, node):
        if len(node.args) == 1:
            raise UserError(f"{self.name}() of an iterable is not supported; pass the numbers: "
                            f"{self.name}(a, b, ...)")
        types = self.scalars(typer, node, 2, 1000)
        result = common_type(types, [typer.is_weak(a) for a in node.args])
        for a in node.args:
            typer.fit(a, result)
        return CallPlan(result, tuple(types))

    def lower(self, lw, node, plan):
        t = plan.result
        values = [lw.operand(a, t) for a in node.args]
        pred = "<" if self.name == "min" else ">"
        current = values[0]
        for v in values[1:]:
            better = lower_compare(lw, ComparePlan(pred, t), v, t, current, t)
            current = lw.b.select(better, v, current)
        return current


class Len(Handler):
    name = "len"

    def type(self, typer, node):
        (t,) = self.args(typer, node, 1)
        if not isinstance(t, (ArrayType, TupleType)):
            raise UserError(f"len() needs an array or a tuple, not a {t}")
        return CallPlan(int64, (t,))

    def lower(self, lw, node, plan):
        (t,) = plan.args
        if isinstance(t, TupleType):
            return ConstantInt.get(lw.ctx.i64, len(t.elements))
        return lw.b.extract_value(lw.expr(node.args[0]), 1)


def emit_math(lw, name: str, t: ScalarType, args):
    """math.<name> on `args` of float type `t`, as the target computes it (see mathlib, which builds
    on Handler and CallPlan)."""
    from .mathlib import emit
    return emit(lw, name, t, args)


class ContextIntrinsic(Handler):
    """gpuc.index(dim=0), gpuc.ndrange(dim=0) and the block model's geometry (thread_index, ...,
    lane_index(), warp_size()): calls of a gpuc.ctx.* marker `i64 (i32 dim)` (docs/kernel-abi.md)."""

    keywords = True

    def __init__(self, name: str, marker: str | None = None, takes_dim: bool = True) -> None:
        self.name, self.takes_dim = name, takes_dim
        self.marker = marker or (INDEX_MARKER if name == "index" else NDRANGE_MARKER)

    def type(self, typer, node):
        if not self.takes_dim:
            if node.args or node.keywords:
                raise UserError(f"gpuc.{self.name}() takes no arguments")
            return CallPlan(int64, (), 0)
        if len(node.args) + len(node.keywords) > 1 or any(k.arg != "dim" for k in node.keywords):
            raise UserError(f"gpuc.{self.name}() takes one argument, dim (0, 1 or 2)")
        arg = node.args[0] if node.args else (node.keywords[0].value if node.keywords else None)
        dim = 0
        if arg is not None:
            typer.expr(arg)
            dim = typer.typed.consts.get(id(arg))
            if type(dim) is not int or dim not in (0, 1, 2):
                raise UserError(f"gpuc.{self.name}(dim) needs a constant dim of 0, 1 or 2", node=arg)
        return CallPlan(int64, (), dim)

    def lower(self, lw, node, plan):
        fn = lw.declare(self.marker, lw.ctx.i64, [lw.ctx.i32])
        return lw.b.call(fn, [ConstantInt.get(lw.ctx.i32, plan.extra)])


class MarkerCall(Handler):
    """A gpuc.marker(...) object: each call emits `call <restype> @<name>(<args>)`."""

    def __init__(self, marker) -> None:
        self.marker, self.name = marker, marker.name

    def type(self, typer, node):
        want = self.marker.argtypes
        got = self.args(typer, node, len(want))
        for a, g, w in zip(node.args, got, want):
            if g != w and not (isinstance(g, ScalarType) and isinstance(w, ScalarType)) and not (
                    isinstance(w, ArrayType) and w.accepts(g)):
                raise UserError(f"marker {self.name} takes a {w} here, not a {g}", node=a)
            typer.fit(a, w)
        return CallPlan(self.marker.restype, tuple(got))

    def lower(self, lw, node, plan):
        want = self.marker.argtypes
        args = []
        for a, g, w in zip(node.args, plan.args, want):
            args += lw.flatten(lw.operand(a, w) if isinstance(w, ScalarType) else lw.expr(a), w)
        params = [p for w in want for p in lw.abi_params(w)]
        fn = lw.declare(self.name, lw.ltype(plan.result), params)
        call = lw.b.call(fn, args)
        return None if plan.result == none else call


def _calls() -> dict:
    from . import intrinsics
    from .types import SCALARS

    table = {int: Convert("int", int64), float: Convert("float", float64), bool: Convert("bool", boolean),
             _py.abs: Abs(), _py.min: MinMax("min"), _py.max: MinMax("max"), _py.len: Len(),
             intrinsics.index: ContextIntrinsic("index"), intrinsics.ndrange: ContextIntrinsic("ndrange")}
    from .pointers import Deferred
    table[intrinsics.deferred] = Deferred()
    from . import autodiff
    table[autodiff.derivative], table[autodiff.jvp] = autodiff.Derivative(), autodiff.JVP()
    from . import reverse
    table[reverse.grad], table[reverse.value_and_grad] = reverse.Grad(False), reverse.Grad(True)
    table[reverse.vjp] = reverse.VJP()
    for t in SCALARS:
        table[t] = Convert(t.name, t)
    from .atomics import atomic_calls
    from .bitops import bitop_calls
    from .blocks import block_calls
    from .mathlib import math_calls
    from .numpy_math import numpy_math_calls
    from .numpy_scalars import numpy_calls
    table.update(atomic_calls())
    table.update(bitop_calls())
    table.update(block_calls())
    table.update(math_calls())
    table.update(numpy_math_calls())
    table.update(numpy_calls())
    from .complex_calls import complex_calls
    table.update(complex_calls(table))
    return table


_CALLS: dict | None = None


def lookup_call(obj) -> Handler | None:
    global _CALLS
    if _CALLS is None:
        _CALLS = _calls()
    from .intrinsics import Marker
    if isinstance(obj, Marker):
        return MarkerCall(obj)
    from .reverse import AdjointCall, AdjointRequest
    if isinstance(obj, AdjointRequest):
        return AdjointCall(obj)
    try:
        return _CALLS.get(obj)
    except TypeError:  # unhashable
        return None


def takes_keywords(obj) -> bool:
    handler = lookup_call(obj)
    return handler is not None and handler.keywords


def is_known_object(value) -> bool:
    from .source import GpucFunction
    return (isinstance(value, (_pytypes.ModuleType, GpucFunction)) or value is range
            or lookup_call(value) is not None)


def array_attribute(t: ArrayType, attr: str) -> GType | None:
    return {"shape": TupleType((int64,) * t.ndim), "ndim": int64, "size": int64}.get(attr)
