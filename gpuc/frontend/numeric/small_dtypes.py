"""The small dtypes (int8, uint8, int16, uint16, float16): how float16 arithmetic is computed, and which
atomics the small dtypes have.

The integer types need nothing of their own: LLVM's i8 and i16 arithmetic wraps as NumPy's does, and
promotion (types.promote) follows NumPy 2. float16 computes as NumPy computes it: each operation and
each math function widens its operands to float32, computes there and rounds the result to float16.
For + - * / and sqrt this is the correctly rounded half result (float32 holds more than twice
half's precision, so the double rounding is exact); for //, %, ** and the math functions it is
what NumPy's float16 loops do. Only conversions between half and other types reach the targets,
which every target has (PTX's cvt, GCN's and SPIR-V's conversions, the CPU's F16C or libcalls).
"""

from __future__ import annotations

from ..core.types import ScalarType, float16, float32, float64

#: The element types of the small dtypes for which each atomic is defined (gpuc/frontend/constructs/atomics.py
#: adds them to its own); a target that cannot do one says why (Target.atomic_issue).
SMALL_INTEGERS = ("int8", "uint8", "int16", "uint16")
SMALL_UNSIGNED = ("uint8", "uint16")
SMALL_FLOATS = ("float16",)


def computes_in(t: ScalarType) -> ScalarType:
    """The type in which operations on `t` are computed: float32 for float16, `t` itself otherwise."""
    return float32 if t == float16 else t


def through_float32(lw, args, compute):
    """`compute` applied to the float16 `args` widened to float32, its result rounded back to float16
    (a tuple of results rounds each)."""
    wide = [lw.convert(a, float16, float32) for a in args]
    result = compute(wide)
    if isinstance(result, tuple):
        return tuple(lw.convert(r, float32, float16) for r in result)
    return lw.convert(result, float32, float16)


def double_to_half(lw, value):
    """float64 -> float16 rounded once, as NumPy's npy_double_to_half: round to float32 *to odd*
    (truncate, then set the last bit where inexact), which keeps enough to round to half correctly;
    CPUs convert only float32 to half (x86's F16C), and a float64 libcall may not be linked."""
    from ...llvm import ConstantInt
    b, ctx = lw.b, lw.ctx
    narrow = b.fptrunc(value, ctx.float)
    back = b.fpext(narrow, ctx.double)
    bits = b.bitcast(narrow, ctx.i32)
    away = b.fcmp("ogt", lw.math("fabs", float64, [back]), lw.math("fabs", float64, [value]))
    inexact = b.fcmp("one", back, value)  # false for NaN: a NaN converts as it is
    toward_zero = b.select(away, b.sub(bits, ConstantInt.get(ctx.i32, 1)), bits)
    odd = b.select(inexact, b.or_(toward_zero, ConstantInt.get(ctx.i32, 1)), bits)
    return b.fptrunc(b.bitcast(odd, ctx.float), ctx.half)
