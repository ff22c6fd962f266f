"""cmath's functions in gpuc functions, computed as CPython's cmathmodule.c computes them.

Each function is the same sequence of IEEE operations and libm calls as CPython's (through mathlib, so
the target's math library computes sin, log, hypot, ...), in float64; complex64 arguments of NumPy's
functions are computed in float64 and rounded. Where a part is infinite or NaN, CPython looks the result
up in a 7x7 table of C99 Annex G's values, indexed by the kind of each part (-inf, negative, -0, +0,
positive, +inf, NaN); gpuc reads the same tables, taken from the host's cmath when the table is first
needed (from NumPy for the entries where cmath raises instead of returning the value), with integer
masks and selects (no memory, no branches: every target has them).
"""

from __future__ import annotations

import cmath
import math
from functools import lru_cache

from ...llvm import ConstantInt
from .complex import F, c_quot, make, parts
from ..core.types import complex128, float64

_LARGE = 1.7976931348623157e308 / 4.0              # CM_LARGE_DOUBLE = DBL_MAX / 4
_SQRT_LARGE = math.sqrt(_LARGE)
_LOG_LARGE = math.log(_LARGE)
_DBL_MIN = 2.2250738585072014e-308
_SQRT_DBL_MIN = math.sqrt(_DBL_MIN)
_LN2, _LN10, _E = 0.6931471805599453, 2.302585092994046, 2.718281828459045
_SCALE_UP, _SCALE_DOWN = 2.0 ** 53, 2.0 ** -27     # ldexp(x, CM_SCALE_UP), ldexp(x, CM_SCALE_DOWN)

# -- special values -----------------------------------------------------------------------------

#: One representative of each kind of double, in CPython's order (special_type()).
_KINDS = (-math.inf, -1.5, -0.0, 0.0, 1.5, math.inf, math.nan)


def _numpy_value(name: str, z: complex) -> complex:
    import numpy as np
    fn = {"acos": np.arccos, "acosh": np.arccosh, "asinh": np.arcsinh, "atanh": np.arctanh}.get(name) or getattr(np, name)
    with np.errstate(all="ignore"):
        return complex(fn(np.complex128(z)))


@lru_cache(maxsize=None)
def special_table(name: str) -> tuple:
    """((re, im) per kind of real part and kind of imaginary part), None where both are finite."""
    rows = []
    for x in _KINDS:
        row = []
        for y in _KINDS:
            if math.isfinite(x) and math.isfinite(y):
                row.append(None)
                continue
            if name == "rect":
                try:
                    w = cmath.rect(x, y)
                except (ValueError, OverflowError):  # r nonzero, phi infinite: C99's spirit, as CPython's table
                    w = complex(math.inf if math.isinf(x) else math.nan, math.nan)
            else:
                try:
                    w = getattr(cmath, name)(complex(x, y))
                except (ValueError, OverflowError):
                    w = _numpy_value(name, complex(x, y))
            row.append((w.real, w.imag))
        rows.append(tuple(row))
    return tuple(rows)


def _kind(f: F, x):
    """CPython's special_type(x) as an i64: 0 -inf, 1 negative, 2 -0, 3 +0, 4 positive, 5 +inf, 6 NaN."""
    b, i64 = f.b, f.lw.ctx.i64

    def k(n):
        return ConstantInt.get(i64, n)
    negative = f.lt(f.copysign(1.0, x), 0.0)
    finite = b.select(f.eq(x, 0.0), b.select(negative, k(2), k(3)), b.select(negative, k(1), k(4)))
    infinite = b.select(negative, k(0), k(5))
    return b.select(f.isnan(x), k(6), b.select(f.isinf(x), infinite, finite))


def _key(v: float):
    return "nan" if math.isnan(v) else (v, math.copysign(1.0, v))


def _lookup(f: F, table, z):
    """table[kind(re)][kind(im)]: for each value a 49-bit mask of where it stands, tested at the index."""
    b, i64 = f.b, f.lw.ctx.i64
    index = b.add(b.mul(_kind(f, z[0]), ConstantInt.get(i64, 7)), _kind(f, z[1]))
    out = []
    for part in range(2):
        masks: dict = {}
        values = {}
        for i, row in enumerate(table):
            for j, entry in enumerate(row):
                if entry is not None:
                    key = _key(entry[part])
                    masks[key] = masks.get(key, 0) | (1 << (7 * i + j))
                    values[key] = entry[part]
        keys = sorted(masks, key=lambda key: -bin(masks[key]).count("1"))
        result = f.v(values[keys[0]])
        for key in keys[1:]:
            bit = b.and_(b.lshr(ConstantInt.get(i64, masks[key]), index), ConstantInt.get(i64, 1))
            result = f.sel(b.icmp("ne", bit, ConstantInt.get(i64, 0)), values[key], result)
        out.append(result)
    return tuple(out)


def _special(f: F, name: str, z, finite_result, infinite=None):
    """`finite_result` where both parts of z are finite; else `infinite` (CPython's computed cases: an
    infinite real part with a finite nonzero imaginary part) where given and it applies, else the table."""
    table = _lookup(f, special_table(name), z)
    if infinite is not None:
        applies = f.and_(f.isinf(z[0]), f.isfinite(z[1]), f.ne(z[1], 0.0))
        table = f.sel2(applies, infinite, table)
    return f.sel2(f.and_(f.isfinite(z[0]), f.isfinite(z[1])), finite_result, table)


# -- the functions (cmathmodule.c) ----------------------------------------------------------------


def c_sqrt(f: F, z):
    ax, ay = f.fabs(z[0]), f.fabs(z[1])
    small = f.and_(f.lt(ax, _DBL_MIN), f.lt(ay, _DBL_MIN))
    up = ax * _SCALE_UP
    s_small = f.sqrt(up + f.hypot(up, ay * _SCALE_UP)) * _SCALE_DOWN
    ax8 = ax / 8.0
    s = f.sel(small, s_small, 2.0 * f.sqrt(ax8 + f.hypot(ax8, ay / 8.0)))
    d = ay / (2.0 * s)
    r = f.sel2(f.ge(z[0], 0.0), (s, f.copysign(d, z[1])), (d, f.copysign(s, z[1])))
    r = f.sel2(f.and_(f.eq(z[0], 0.0), f.eq(z[1], 0.0)), (f.v(0.0), z[1]), r)
    return _special(f, "sqrt", z, r)


def _inf_signs(f: F, y, real_sign: float, imag_sign: float, real_zero=False):
    """(copysign(INF or 0, cos y) * real_sign, copysign(INF, sin y) * imag_sign) for CPython's computed cases."""
    mag = 0.0 if real_zero else math.inf
    re = f.copysign(mag, f.cos(y))
    im = f.copysign(mag, f.sin(y))
    return (-re if real_sign < 0 else re), (-im if imag_sign < 0 else im)


def c_exp(f: F, z):
    big = f.gt(z[0], _LOG_LARGE)
    l = f.sel(big, f.exp(z[0] - 1.0), f.exp(z[0]))
    c, s = f.cos(z[1]), f.sin(z[1])
    r = f.sel2(big, (l * c * _E, l * s * _E), (l * c, l * s))
    positive = f.gt(z[0], 0.0)
    infinite = f.sel2(positive, _inf_signs(f, z[1], 1, 1), _inf_signs(f, z[1], 1, 1, real_zero=True))
    return _special(f, "exp", z, r, infinite)


def _cosh_sinh(f: F, z, name: str):
    x, y = z
    big = f.gt(f.fabs(x), _LOG_LARGE)
    xm1 = x - f.copysign(1.0, x)
    c, s = f.cos(y), f.sin(y)
    if name == "cosh":
        r = f.sel2(big, (c * f.cosh(xm1) * _E, s * f.sinh(xm1) * _E), (c * f.cosh(x), s * f.sinh(x)))
        infinite = f.sel2(f.gt(x, 0.0), _inf_signs(f, y, 1, 1), _inf_signs(f, y, 1, -1))
    else:
        r = f.sel2(big, (c * f.sinh(xm1) * _E, s * f.cosh(xm1) * _E), (c * f.sinh(x), s * f.cosh(x)))
        infinite = f.sel2(f.gt(x, 0.0), _inf_signs(f, y, 1, 1), _inf_signs(f, y, -1, 1))
    return _special(f, name, z, r, infinite)


def c_cosh(f, z):
    return _cosh_sinh(f, z, "cosh")


def c_sinh(f, z):
    return _cosh_sinh(f, z, "sinh")


def c_tanh(f: F, z):
    x, y = z
    big = f.gt(f.fabs(x), _LOG_LARGE)
    r_big = f.copysign(1.0, x), 4.0 * f.sin(y) * f.cos(y) * f.exp(-2.0 * f.fabs(x))
    tx, ty = f.tanh(x), f.tan(y)
    cx = 1.0 / f.cosh(x)
    txty = tx * ty
    denom = 1.0 + txty * txty
    r = f.sel2(big, r_big, (tx * (1.0 + ty * ty) / denom, ((ty / denom) * cx) * cx))
    sign = f.copysign(0.0, 2.0 * f.sin(y) * f.cos(y))
    infinite = f.sel(f.gt(x, 0.0), 1.0, -1.0), sign
    return _special(f, "tanh", z, r, infinite)


def c_log(f: F, z):
    ax, ay = f.fabs(z[0]), f.fabs(z[1])
    large = f.or_(f.gt(ax, _LARGE), f.gt(ay, _LARGE))
    re_large = f.log(f.hypot(ax / 2.0, ay / 2.0)) + _LN2
    nonzero = f.or_(f.gt(ax, 0.0), f.gt(ay, 0.0))
    re_tiny = f.sel(nonzero, f.log(f.hypot(ax * _SCALE_UP, ay * _SCALE_UP)) - 53 * _LN2, -math.inf)
    h = f.hypot(ax, ay)
    am, an = f.sel(f.gt(ax, ay), ax, ay), f.sel(f.gt(ax, ay), ay, ax)
    near_one = f.and_(f.le(0.71, h), f.le(h, 1.73))
    re_mid = f.sel(near_one, f.log1p((am - 1.0) * (am + 1.0) + an * an) / 2.0, f.log(h))
    tiny = f.and_(f.lt(ax, _DBL_MIN), f.lt(ay, _DBL_MIN))
    re = f.sel(large, re_large, f.sel(tiny, re_tiny, re_mid))
    return _special(f, "log", z, (re, f.atan2(z[1], z[0])))


def c_log10(f: F, z):
    r = c_log(f, z)
    return r[0] / _LN10, r[1] / _LN10


def c_asinh(f: F, z):
    x, y = z
    large = f.or_(f.gt(f.fabs(x), _LARGE), f.gt(f.fabs(y), _LARGE))
    big_log = f.log(f.hypot(x / 2.0, y / 2.0)) + _LN2 * 2.0
    re_large = f.sel(f.ge(y, 0.0), f.copysign(big_log, x), -f.copysign(big_log, -x))
    s1r, s1i = c_sqrt(f, (1.0 + y, -x))
    s2r, s2i = c_sqrt(f, (1.0 - y, x))
    r = f.asinh(s1r * s2i - s2r * s1i), f.atan2(y, s1r * s2r - s1i * s2i)
    r = f.sel2(large, (re_large, f.atan2(y, f.fabs(x))), r)
    return _special(f, "asinh", z, r)


def c_acos(f: F, z):
    x, y = z
    large = f.or_(f.gt(f.fabs(x), _LARGE), f.gt(f.fabs(y), _LARGE))
    r_large = f.atan2(f.fabs(y), x), -f.copysign(f.log(f.hypot(x / 2.0, y / 2.0)) + _LN2 * 2.0, y)
    s1r, s1i = c_sqrt(f, (1.0 - x, -y))
    s2r, s2i = c_sqrt(f, (1.0 + x, y))
    r = 2.0 * f.atan2(s1r, s2r), f.asinh(s2r * s1i - s2i * s1r)
    return _special(f, "acos", z, f.sel2(large, r_large, r))


def c_acosh(f: F, z):
    x, y = z
    large = f.or_(f.gt(f.fabs(x), _LARGE), f.gt(f.fabs(y), _LARGE))
    r_large = f.log(f.hypot(x / 2.0, y / 2.0)) + _LN2 * 2.0, f.atan2(y, x)
    s1r, s1i = c_sqrt(f, (x - 1.0, y))
    s2r, s2i = c_sqrt(f, (x + 1.0, y))
    r = f.asinh(s1r * s2r + s1i * s2i), 2.0 * f.atan2(s1i, s2r)
    return _special(f, "acosh", z, f.sel2(large, r_large, r))


def c_atanh(f: F, z):
    negative = f.lt(z[0], 0.0)  # atanh(z) = -atanh(-z) makes the real part nonnegative
    x, y = f.sel(negative, -z[0], z[0]), f.sel(negative, -z[1], z[1])
    ay = f.fabs(y)
    large = f.or_(f.gt(x, _SQRT_LARGE), f.gt(ay, _SQRT_LARGE))
    h = f.hypot(x / 2.0, y / 2.0)
    r_large = x / 4.0 / h / h, f.copysign(math.pi / 2.0, y)
    r_one = f.sel2(f.eq(ay, 0.0), (f.v(math.inf), y),
                   (-f.log(f.sqrt(ay) / f.sqrt(f.hypot(ay, 2.0))), f.copysign(f.atan2(2.0, -ay) / 2.0, y)))
    one = f.and_(f.eq(x, 1.0), f.lt(ay, _SQRT_DBL_MIN))
    r = (f.log1p(4.0 * x / ((1.0 - x) * (1.0 - x) + ay * ay)) / 4.0,
         -f.atan2(-2.0 * y, (1.0 - x) * (1.0 + x) - ay * ay) / 2.0)
    r = f.sel2(large, r_large, f.sel2(one, r_one, r))
    r = f.sel2(negative, (-r[0], -r[1]), r)
    return _special(f, "atanh", z, r)


def _times_i(fn):
    """g(z) = -i fn(iz) (sin from sinh, tan from tanh, asin from asinh, atan from atanh), as CPython."""
    def g(f, z):
        s = fn(f, (-z[1], z[0]))
        return s[1], -s[0]
    return g


def c_cos(f, z):
    return c_cosh(f, (-z[1], z[0]))


def c_rect(f: F, r, phi):
    z = (r, phi)
    finite = f.sel2(f.eq(phi, 0.0), (r, r * phi), (r * f.cos(phi), r * f.sin(phi)))
    infinite = f.sel2(f.gt(r, 0.0), _inf_signs(f, phi, 1, 1), _inf_signs(f, phi, -1, -1))
    return _special(f, "rect", z, finite, infinite)


#: cmath's functions of one complex number giving one: name -> its computation on (re, im) pairs of V.
FUNCTIONS = {
    "sqrt": c_sqrt, "exp": c_exp, "log": c_log, "log10": c_log10, "sinh": c_sinh, "cosh": c_cosh,
    "tanh": c_tanh, "asinh": c_asinh, "acosh": c_acosh, "atanh": c_atanh, "acos": c_acos, "cos": c_cos,
    "sin": _times_i(c_sinh), "tan": _times_i(c_tanh), "asin": _times_i(c_asinh), "atan": _times_i(c_atanh),
}
#: The mathlib functions they call (a target must have them all).
NEEDS = ("fabs", "copysign", "sqrt", "hypot", "log", "log1p", "atan2", "exp", "cos", "sin", "tan", "cosh", "sinh",
         "tanh", "asinh", "pow", "floor")


def apply(lw, name: str, z, t=complex128):
    """cmath.<name> of the complex value `z` (of type `t`), computed in float64 and given as a `t`."""
    f = F(lw, float64)
    re, im = parts(lw, lw.convert(z, t, complex128))
    w = FUNCTIONS[name](f, (f.v(re), f.v(im)))
    result = make(lw, complex128, w[0].v, w[1].v)
    return lw.convert(result, complex128, t)


def log_base(lw, z, base):
    """cmath.log(z, base): c_log(z) / c_log(base) (CPython's quotient)."""
    f = F(lw, float64)
    a = c_log(f, tuple(f.v(p) for p in parts(lw, z)))
    b = c_log(f, tuple(f.v(p) for p in parts(lw, base)))
    q = c_quot(f, a, b)
    return make(lw, complex128, q[0].v, q[1].v)


def rect(lw, r, phi):
    f = F(lw, float64)
    w = c_rect(f, f.v(r), f.v(phi))
    return make(lw, complex128, w[0].v, w[1].v)
