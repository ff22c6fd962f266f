"""The functions the autodiff plugin's acceptance tests differentiate, each with its analytic derivative.

TABLE rows: (id, @gpuc.func f(x, *consts), f'(x, *consts) in Python, points x, constants). The
tests call gpuc.derivative(f, x, *consts) on the host, nest it for higher orders, and compile each
derivative for the GPU targets.
"""

from __future__ import annotations

import math

import gpuc
from tangent_cases import horner  # the Horner loop with a run-time trip count, shared with the tangent tests
from tangent_cases import horner_d as horner_prime

# -- polynomials and rational functions ------------------------------------------------------


@gpuc.func
def cubic(x):
    return 3.0 * x * x * x - 2.0 * x * x + x - 7.0


@gpuc.func
def quintic(x):
    return x * x * x * x * x - x


@gpuc.func
def rational(x):
    return (x * x + 1.0) / (x - 3.0)


@gpuc.func
def reciprocal_square(x):
    return 1.0 / (x * x + 0.5)


@gpuc.func
def negated(x):
    return -(x * x) + x


@gpuc.func
def remainder(x):
    return x * x % 1.5  # frem: d = 2x where the quotient is constant


@gpuc.func
def scaled(x, a):
    return a * x * x + a


# -- math functions ------------------------------------------------------------------------------


@gpuc.func
def m_sqrt(x):
    return math.sqrt(x)


@gpuc.func
def m_cbrt(x):
    return math.cbrt(x)


@gpuc.func
def m_exp(x):
    return math.exp(x)


@gpuc.func
def m_exp2(x):
    return math.exp2(x)


@gpuc.func
def m_expm1(x):
    return math.expm1(x)


@gpuc.func
def m_log(x):
    return math.log(x)


@gpuc.func
def m_log2(x):
    return math.log2(x)


@gpuc.func
def m_log10(x):
    return math.log10(x)


@gpuc.func
def m_log1p(x):
    return math.log1p(x)


@gpuc.func
def m_pow(x):
    return math.pow(x, 2.5)


@gpuc.func
def m_pow_exponent(x):
    return math.pow(1.7, x)


@gpuc.func
def m_sin(x):
    return math.sin(x)


@gpuc.func
def m_cos(x):
    return math.cos(x)


@gpuc.func
def m_tan(x):
    return math.tan(x)


@gpuc.func
def m_asin(x):
    return math.asin(x)


@gpuc.func
def m_acos(x):
    return math.acos(x)


@gpuc.func
def m_atan(x):
    return math.atan(x)


@gpuc.func
def m_atan2(x):
    return math.atan2(x, 0.7)


@gpuc.func
def m_hypot(x):
    return math.hypot(x, 1.3)


@gpuc.func
def m_sinh(x):
    return math.sinh(x)


@gpuc.func
def m_cosh(x):
    return math.cosh(x)


@gpuc.func
def m_tanh(x):
    return math.tanh(x)


@gpuc.func
def m_asinh(x):
    return math.asinh(x)


@gpuc.func
def m_acosh(x):
    return math.acosh(x)


@gpuc.func
def m_atanh(x):
    return math.atanh(x)


@gpuc.func
def m_erf(x):
    return math.erf(x)


@gpuc.func
def m_erfc(x):
    return math.erfc(x)


@gpuc.func
def m_fabs(x):
    return math.fabs(x) * x


@gpuc.func
def m_copysign(x):
    return math.copysign(x * x, -1.0)


@gpuc.func
def m_floor_ceil(x):
    return x * x + math.floor(x) + math.ceil(3.0 * x)


@gpuc.func
def m_fmod(x):
    return math.fmod(x * x, 0.8)


@gpuc.func
def m_fma(x):
    return gpuc.fma(x, x, 3.0 * x)


@gpuc.func
def mix(x):
    return math.exp(-x * x) * math.sin(3.0 * x) + math.log(1.0 + x * x)


# -- control flow, loops, calls ------------------------------------------------------------------


@gpuc.func
def branches(x):
    if x > 0.5:
        return x * x * x
    return 2.0 * x


@gpuc.func
def minimum_maximum(x):
    return min(x * x, 1.0 + x) + max(math.sin(x), 0.25 * x)


@gpuc.func
def newton_sqrt(x):
    # Iterates until the iterate stops decreasing (a data-dependent exit), then twice more.
    y = x + 1.0
    settled = 0
    while settled < 2:
        z = 0.5 * (y + x / y)
        if z >= y:
            settled += 1
        y = z
    return y


@gpuc.func
def power_rec(x, n):
    if n == 0:
        return 1.0
    return x * power_rec(x, n - 1)


@gpuc.func
def square_plus(x):
    return x * x + math.sin(x)


@gpuc.func
def calls_helper(x):
    return square_plus(x) * x


@gpuc.func
def through_pointer(x):
    p = gpuc.deferred(square_plus, x)
    return p(x) * 2.0


@gpuc.func
def with_conversion(x, k):
    return x * k + x / (k + 1)  # int -> float conversions of a constant


X = (0.3, 0.7, 1.6)
UNIT = (-0.6, 0.2, 0.55)  # inside (-1, 1)

TABLE = [
    ("cubic", cubic, lambda x: 9 * x * x - 4 * x + 1, (-1.2, 0.4, 2.0), ()),
    ("quintic", quintic, lambda x: 5 * x ** 4 - 1, X, ()),
    ("rational", rational, lambda x: (2 * x * (x - 3) - (x * x + 1)) / (x - 3) ** 2, X, ()),
    ("reciprocal_square", reciprocal_square, lambda x: -2 * x / (x * x + 0.5) ** 2, X, ()),
    ("negated", negated, lambda x: -2 * x + 1, X, ()),
    ("remainder", remainder, lambda x: 2 * x, X, ()),
    ("scaled", scaled, lambda x, a: 2 * a * x, X, (2.5,)),
    ("sqrt", m_sqrt, lambda x: 0.5 / math.sqrt(x), X, ()),
    ("cbrt", m_cbrt, lambda x: 1 / (3 * math.cbrt(x) ** 2), X, ()),
    ("exp", m_exp, math.exp, X, ()),
    ("exp2", m_exp2, lambda x: math.log(2) * 2 ** x, X, ()),
    ("expm1", m_expm1, math.exp, X, ()),
    ("log", m_log, lambda x: 1 / x, X, ()),
    ("log2", m_log2, lambda x: 1 / (x * math.log(2)), X, ()),
    ("log10", m_log10, lambda x: 1 / (x * math.log(10)), X, ()),
    ("log1p", m_log1p, lambda x: 1 / (1 + x), X, ()),
    ("pow", m_pow, lambda x: 2.5 * x ** 1.5, X, ()),
    ("pow_exponent", m_pow_exponent, lambda x: math.log(1.7) * 1.7 ** x, X, ()),
    ("sin", m_sin, math.cos, X, ()),
    ("cos", m_cos, lambda x: -math.sin(x), X, ()),
    ("tan", m_tan, lambda x: 1 / math.cos(x) ** 2, X, ()),
    ("asin", m_asin, lambda x: 1 / math.sqrt(1 - x * x), UNIT, ()),
    ("acos", m_acos, lambda x: -1 / math.sqrt(1 - x * x), UNIT, ()),
    ("atan", m_atan, lambda x: 1 / (1 + x * x), X, ()),
    ("atan2", m_atan2, lambda x: 0.7 / (x * x + 0.49), X, ()),
    ("hypot", m_hypot, lambda x: x / math.hypot(x, 1.3), X, ()),
    ("sinh", m_sinh, math.cosh, X, ()),
    ("cosh", m_cosh, math.sinh, X, ()),
    ("tanh", m_tanh, lambda x: 1 - math.tanh(x) ** 2, X, ()),
    ("asinh", m_asinh, lambda x: 1 / math.sqrt(x * x + 1), X, ()),
    ("acosh", m_acosh, lambda x: 1 / math.sqrt(x * x - 1), (1.2, 1.6, 3.0), ()),
    ("atanh", m_atanh, lambda x: 1 / (1 - x * x), UNIT, ()),
    ("erf", m_erf, lambda x: 2 / math.sqrt(math.pi) * math.exp(-x * x), X, ()),
    ("erfc", m_erfc, lambda x: -2 / math.sqrt(math.pi) * math.exp(-x * x), X, ()),
    ("fabs", m_fabs, lambda x: 2 * abs(x), (-0.8, 0.3, 1.6), ()),
    ("copysign", m_copysign, lambda x: -2 * x, (-0.8, 0.3, 1.6), ()),
    ("floor_ceil", m_floor_ceil, lambda x: 2 * x, (0.3, 0.7, 1.6), ()),
    ("fmod", m_fmod, lambda x: 2 * x, X, ()),
    ("fma", m_fma, lambda x: 2 * x + 3, X, ()),
    ("mix", mix, lambda x: (math.exp(-x * x) * (-2 * x * math.sin(3 * x) + 3 * math.cos(3 * x))
                            + 2 * x / (1 + x * x)), X, ()),
    ("branches", branches, lambda x: 3 * x * x if x > 0.5 else 2.0, (0.2, 0.7, 1.6), ()),
    ("min_max", minimum_maximum, lambda x: (2 * x if x * x < 1 + x else 1.0)
     + (math.cos(x) if math.sin(x) >= 0.25 * x else 0.25), (0.3, 1.2, 2.0), ()),
    ("horner", horner, horner_prime, X, (7,)),
    ("newton_sqrt", newton_sqrt, lambda x: 0.5 / math.sqrt(x), (0.3, 2.0, 9.0), ()),
    ("recursion", power_rec, lambda x, n: n * x ** (n - 1), X, (5,)),
    ("calls", calls_helper, lambda x: 3 * x * x + math.sin(x) + x * math.cos(x), X, ()),
    ("through_pointer", through_pointer, lambda x: 2 * (2 * x + math.cos(x)), X, ()),
    ("int_conversion", with_conversion, lambda x, k: k + 1 / (k + 1), X, (3,)),
]



def derivative_of(f, constants: int = 0):
    """A @gpuc.func computing d f / d x (x the first argument; with `constants` further arguments)."""
    if constants == 0:
        @gpuc.func
        def d(x):
            return gpuc.derivative(f, x)
    else:
        @gpuc.func
        def d(x, c):
            return gpuc.derivative(f, x, c)
    return d


@gpuc.func
def x_sin_x(x):
    return x * math.sin(x)


@gpuc.func
def x_exp_2x(x):
    return x * math.exp(2.0 * x)


def _falling(n, k):
    return math.prod(range(n - k + 1, n + 1))


# Nested cases: (id, f, constants, derivative of order n at (x, *constants) for n = 1..4, points).
NESTED = [
    ("x_sin_x", x_sin_x, (), lambda n, x: [math.sin(x) + x * math.cos(x), 2 * math.cos(x) - x * math.sin(x),
                                            -3 * math.sin(x) - x * math.cos(x),
                                            -4 * math.cos(x) + x * math.sin(x)][n - 1], X),
    ("x_exp_2x", x_exp_2x, (), lambda n, x: math.exp(2 * x) * (2 ** n * x + n * 2 ** (n - 1)), X),
    ("recursion", power_rec, (6,), lambda n, x, k: _falling(k, n) * x ** (k - n), X),
    ("horner", horner, (7,), lambda n, x, k: sum((i + 1.0) * _falling(k - 1 - i, n) * x ** (k - 1 - i - n)
                                                 for i in range(k) if k - 1 - i >= n), X),
    ("log", m_log, (), lambda n, x: (-1) ** (n - 1) * math.factorial(n - 1) / x ** n, X),
]
