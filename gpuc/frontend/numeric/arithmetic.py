"""Operators on numbers: the plans of binary, unary and comparison operators (promotion, literal
checks, complex numbers through numeric/complex.py) and their lowering, shared by expressions and
augmented assignment."""

from __future__ import annotations

from ...llvm import ConstantFP, ConstantInt
from ..core.errors import UserError
from ..core.plans import (FCMP, ICMP, BinPlan, ComparePlan, UnaryPlan, check_literal_fits, exact_compare)
from ..core.types import ComplexType, ScalarType, boolean, check_scalar, float16, float32, float64, int64, promote
from . import complex as complex_numbers
from .mathlib import emit

def binary_plan(op: str, lt, rt, lw: bool, rw: bool, rconst=None, lconst=None) -> BinPlan:
    if isinstance(lt, ComplexType) or isinstance(rt, ComplexType):
        return complex_numbers.binary_plan(op, lt, rt, lw, rw)
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



def unary_plan(op: str, t) -> UnaryPlan:
    names = {"USub": "-", "UAdd": "+", "Not": "not", "Invert": "~"}
    if isinstance(t, ComplexType):
        return complex_numbers.unary_plan(op, t)
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



def compare_plan(op: str, lt, rt, lw: bool, rw: bool, lconst=None, rconst=None) -> ComparePlan:
    """Both sides convert to the promoted type; `lconst`/`rconst` are the values of literal sides."""
    if isinstance(lt, ComplexType) or isinstance(rt, ComplexType):
        return complex_numbers.compare_plan(op, lt, rt, lw, rw)
    lt, rt = check_scalar(lt, "a compared value"), check_scalar(rt, "a compared value")
    operand = promote(lt, rt, lw, rw)
    return ComparePlan(op, operand, exact_compare(op, operand, lconst, rconst))



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
        return complex_numbers.lower_binary(lw, plan, left, lt, right, rt, rconst)
    if t.is_float and t.bits == 16:  # computed in float32 and rounded, as NumPy does (small_dtypes.py)
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


def lower_half_binary(lw, plan, a, b, rt, rconst):
    """A binary operation whose operands are float16 (`a` already converted; `b` of type `rt`, the
    integer exponent of "powi"): computed in float32, rounded to float16."""
    wide = BinPlan(plan.op, float32, float32 if plan.result == float16 else plan.result, plan.kind)
    a32 = lw.convert(a, float16, float32)
    b_type = rt if plan.kind == "powi" else float32
    b32 = b if plan.kind == "powi" else lw.convert(lw.convert(b, rt, float16), float16, float32)
    result = lower_binary(lw, wide, a32, float32, b32, b_type, rconst)
    return lw.convert(result, float32, float16) if plan.result == float16 else result


def lower_unary(lw, plan: UnaryPlan, value, t):
    bld = lw.b
    if isinstance(t, ComplexType):
        return complex_numbers.lower_unary(lw, plan, value, t)
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
        return complex_numbers.lower_compare(lw, plan, a, b)
    if t.is_float:
        return lw.b.fcmp(FCMP[plan.op], a, b)
    return lw.b.icmp(ICMP[(plan.op, t.signed)], a, b)


def emit_math(lw, name: str, t: ScalarType, args):
    """math.<name> on `args` of float type `t`, as the target computes it (see mathlib, which builds
    on Handler and CallPlan)."""
    return emit(lw, name, t, args)

