"""@gpuc.func functions with their analytic derivatives, for the tangent transformation's tests."""

from __future__ import annotations

import math

import gpuc
from support.reverse_kernels import horner, horner_slope as horner_d  # shared with the reverse-mode tests


@gpuc.func
def poly(x):
    return 3.0 * x ** 3 - 2.0 * x * x + x - 7.0


@gpuc.func
def rational(x):
    return (x * x + 1.0) / (x - 3.0)


@gpuc.func
def newton_sqrt(x):
    # Newton's iteration for sqrt(x), stopping when the step is small: a data-dependent exit.
    y = x
    step = y
    i = 0
    while abs(step) > 1e-9 * y and i < 60:
        step = (y * y - x) / (2.0 * y)
        y = y - step
        i += 1
    return y


@gpuc.func
def branchy(x):
    if x > 1.0:
        return x * x * x
    return 2.0 * x + 5.0


@gpuc.func
def clamp_mix(x):
    return min(x * x, 4.0) + max(x, 0.5 * x + 1.0)


@gpuc.func
def fact_pow(x, n):
    if n == 0:
        return 1.0
    return x * fact_pow(x, n - 1)


@gpuc.func
def helper_sq(x):
    return x * x + math.sin(x)


@gpuc.func
def calls_helper(x):
    return helper_sq(x) * helper_sq(2.0 * x)


@gpuc.func
def mixed_int(x, k):
    return x * k + float(k * k)


def _m(name):
    return getattr(math, name)


# (name, function, extra argument values, derivative(x, *extra), points x)
CASES = [
    ("poly", poly, (), lambda x: 9 * x * x - 4 * x + 1, (0.3, 1.7, -2.0)),
    ("rational", rational, (), lambda x: (x * x - 6 * x - 1) / (x - 3) ** 2, (0.5, 2.0, 4.5)),
    ("horner", horner, (7,), horner_d, (0.4, 1.3)),
    ("horner_short", horner, (2,), horner_d, (0.4, 1.3)),
    ("newton_sqrt", newton_sqrt, (), lambda x: 0.5 / math.sqrt(x), (2.0, 9.0, 0.3)),
    ("branchy", branchy, (), lambda x: 3 * x * x if x > 1 else 2.0, (0.5, 2.5)),
    ("clamp_mix", clamp_mix, (), lambda x: (2 * x if x * x < 4 else 0.0) + (1.0 if x > 0.5 * x + 1 else 0.5),
     (0.5, 1.5, 3.0)),
    ("recursion", fact_pow, (5,), lambda x, n: n * x ** (n - 1), (0.7, 1.9)),
    ("calls", calls_helper, (),
     lambda x: (2 * x + math.cos(x)) * (4 * x * x + math.sin(2 * x))
     + (x * x + math.sin(x)) * (8 * x + 2 * math.cos(2 * x)), (0.3, 1.1)),
    ("int_args", mixed_int, (3,), lambda x, k: float(k), (0.3,)),
]

# math.<name>(x) and its derivative, at points inside the domain.
UNARY = {
    "sqrt": (lambda x: 0.5 / math.sqrt(x), (0.5, 3.0)),
    "cbrt": (lambda x: 1 / (3 * math.cbrt(x) ** 2), (0.5, 8.0)),
    "exp": (math.exp, (-1.0, 0.7)),
    "exp2": (lambda x: math.log(2) * 2 ** x, (-1.0, 0.7)),
    "expm1": (math.exp, (-1.0, 0.7)),
    "log": (lambda x: 1 / x, (0.5, 3.0)),
    "log2": (lambda x: 1 / (x * math.log(2)), (0.5, 3.0)),
    "log10": (lambda x: 1 / (x * math.log(10)), (0.5, 3.0)),
    "log1p": (lambda x: 1 / (1 + x), (0.5, 3.0)),
    "sin": (math.cos, (0.3, 2.0)),
    "cos": (lambda x: -math.sin(x), (0.3, 2.0)),
    "tan": (lambda x: 1 / math.cos(x) ** 2, (0.3, 1.0)),
    "asin": (lambda x: 1 / math.sqrt(1 - x * x), (0.2, -0.6)),
    "acos": (lambda x: -1 / math.sqrt(1 - x * x), (0.2, -0.6)),
    "atan": (lambda x: 1 / (1 + x * x), (0.2, 3.0)),
    "sinh": (math.cosh, (0.2, -1.5)),
    "cosh": (math.sinh, (0.2, -1.5)),
    "tanh": (lambda x: 1 - math.tanh(x) ** 2, (0.2, -1.5)),
    "asinh": (lambda x: 1 / math.sqrt(x * x + 1), (0.2, -1.5)),
    "acosh": (lambda x: 1 / math.sqrt(x * x - 1), (1.2, 3.5)),
    "atanh": (lambda x: 1 / (1 - x * x), (0.2, -0.5)),
    "erf": (lambda x: 2 / math.sqrt(math.pi) * math.exp(-x * x), (0.2, -1.5)),
    "erfc": (lambda x: -2 / math.sqrt(math.pi) * math.exp(-x * x), (0.2, -1.5)),
    "fabs": (lambda x: math.copysign(1.0, x), (0.2, -1.5)),
    "floor": (lambda x: 0.0, (0.2, -1.5)),
    "ceil": (lambda x: 0.0, (0.2, -1.5)),
    "trunc": (lambda x: 0.0, (0.2, -1.5)),
}

# math.<name>(x, c) with c a constant, and math.<name>(c, x): derivatives in x.
BINARY = {
    "pow": ((2.5, lambda x, c: c * x ** (c - 1)), (1.7, lambda x, c: c ** x * math.log(c)), (0.6, 2.0)),
    "atan2": ((0.7, lambda x, c: c / (x * x + c * c)), (0.7, lambda x, c: -c / (x * x + c * c)), (0.6, -2.0)),
    "hypot": ((0.7, lambda x, c: x / math.hypot(x, c)), (0.7, lambda x, c: x / math.hypot(x, c)), (0.6, -2.0)),
    "copysign": ((-1.0, lambda x, c: -1.0 if x > 0 else 1.0), (-1.0, lambda x, c: 0.0), (0.6, -2.0)),
    "fmod": ((0.7, lambda x, c: 1.0), (2.5, lambda x, c: -math.trunc(c / x)), (1.6, 3.1)),
}


# One @gpuc.func per math function: math.<name>(2x) - x, and for binary ones x first, then x second.
@gpuc.func
def m_sqrt(x):
    return math.sqrt(x + x) - x


@gpuc.func
def m_cbrt(x):
    return math.cbrt(x + x) - x


@gpuc.func
def m_exp(x):
    return math.exp(x + x) - x


@gpuc.func
def m_exp2(x):
    return math.exp2(x + x) - x


@gpuc.func
def m_expm1(x):
    return math.expm1(x + x) - x


@gpuc.func
def m_log(x):
    return math.log(x + x) - x


@gpuc.func
def m_log2(x):
    return math.log2(x + x) - x


@gpuc.func
def m_log10(x):
    return math.log10(x + x) - x


@gpuc.func
def m_log1p(x):
    return math.log1p(x + x) - x


@gpuc.func
def m_sin(x):
    return math.sin(x + x) - x


@gpuc.func
def m_cos(x):
    return math.cos(x + x) - x


@gpuc.func
def m_tan(x):
    return math.tan(x + x) - x


@gpuc.func
def m_asin(x):
    return math.asin(x + x) - x


@gpuc.func
def m_acos(x):
    return math.acos(x + x) - x


@gpuc.func
def m_atan(x):
    return math.atan(x + x) - x


@gpuc.func
def m_sinh(x):
    return math.sinh(x + x) - x


@gpuc.func
def m_cosh(x):
    return math.cosh(x + x) - x


@gpuc.func
def m_tanh(x):
    return math.tanh(x + x) - x


@gpuc.func
def m_asinh(x):
    return math.asinh(x + x) - x


@gpuc.func
def m_acosh(x):
    return math.acosh(x + x) - x


@gpuc.func
def m_atanh(x):
    return math.atanh(x + x) - x


@gpuc.func
def m_erf(x):
    return math.erf(x + x) - x


@gpuc.func
def m_erfc(x):
    return math.erfc(x + x) - x


@gpuc.func
def m_fabs(x):
    return math.fabs(x + x) - x


@gpuc.func
def m_floor(x):
    return float(math.floor(x + x)) - x


@gpuc.func
def m_ceil(x):
    return float(math.ceil(x + x)) - x


@gpuc.func
def m_trunc(x):
    return float(math.trunc(x + x)) - x


@gpuc.func
def m_pow_a(x, c):
    return math.pow(x, c)


@gpuc.func
def m_pow_b(x, c):
    return math.pow(c, x)


@gpuc.func
def m_atan2_a(x, c):
    return math.atan2(x, c)


@gpuc.func
def m_atan2_b(x, c):
    return math.atan2(c, x)


@gpuc.func
def m_hypot_a(x, c):
    return math.hypot(x, c)


@gpuc.func
def m_hypot_b(x, c):
    return math.hypot(c, x)


@gpuc.func
def m_copysign_a(x, c):
    return math.copysign(x, c)


@gpuc.func
def m_copysign_b(x, c):
    return math.copysign(c, x)


@gpuc.func
def m_fmod_a(x, c):
    return math.fmod(x, c)


@gpuc.func
def m_fmod_b(x, c):
    return math.fmod(c, x)


MATH_UNARY = {name: globals()[f'm_{name}'] for name in UNARY}
MATH_BINARY = {name: (globals()[f'm_{name}_a'], globals()[f'm_{name}_b']) for name in BINARY}
