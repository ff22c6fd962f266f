"""Funcs with hand-derived gradients, for the reverse-mode tests: (f, args, gradient) with `gradient` a
function of the same arguments giving df/da for every float argument a, in order."""

from __future__ import annotations

import math

import numpy as np

import gpuc
from support.reverse_kernels import horner, horner_slope


@gpuc.func
def product(x, y):
    return x * y


@gpuc.func
def quotient(x, y):
    return x / y - y / (x + 2.0)


@gpuc.func
def difference(x, y):
    return (x - y) * (x - 3.0 * y)


@gpuc.func
def poly(x):
    return ((((0.5 * x - 1.25) * x + 2.0) * x - 0.75) * x + 3.0) * x - 1.0


@gpuc.func
def transcendental(x, y):
    return math.exp(-x * x) * math.sin(3.0 * y) + math.log(1.0 + x * x) + math.sqrt(1.0 + y * y)


@gpuc.func
def trig(x):
    return math.tan(x) + math.atan(x) + math.cos(x) * math.asin(x / 4.0) + math.acos(x / 5.0)


@gpuc.func
def hyperbolic(x):
    return math.sinh(x) * math.cosh(x) + math.tanh(x) + math.asinh(x) + math.atanh(x / 3.0)


@gpuc.func
def logs(x):
    return math.log2(x) + math.log10(x) + math.log1p(x) + math.exp2(x) + math.expm1(x)


@gpuc.func
def powers(x, y):
    return x ** y + x ** 3 + math.pow(y, 0.5)


@gpuc.func
def two_argument(x, y):
    return math.atan2(x, y) + math.hypot(x, y) + math.copysign(x, -1.0) + math.fmod(x * 7.0, y)


@gpuc.func
def erfs(x):
    return math.erf(x) + math.erfc(2.0 * x)


@gpuc.func
def steps(x):
    return math.floor(x) * x + math.ceil(x) + math.trunc(x * 2.0) * x


@gpuc.func
def min_max_abs(x, y):
    return max(x, y) * min(x, y) + abs(x - y) + abs(-x)


@gpuc.func
def branch(x, y):
    if x > y:
        return x * x * y
    return x + y * y


@gpuc.func
def early_return(x):
    if x > 2.0:
        return 3.0 * x
    y = x * x
    if y > 1.0:
        return y * x
    return y


@gpuc.func
def nested_loops(x, n, m):
    s = 0.0
    for i in range(n):
        t = x
        for j in range(m):
            t = t * x + math.sin(t) * (i + 1.0)
        s += t
    return s


@gpuc.func
def escape(x):
    v = x
    while v < 100.0:
        v = v * v + 1.0
    return v


@gpuc.func
def newton_sqrt(a):
    x = a
    for _ in range(30):
        x = 0.5 * (x + a / x)
    return x


@gpuc.func
def in_place(x, y):
    z = x
    z *= y
    z /= x + 1.0
    z -= y
    z += x * x
    z **= 2
    return z


@gpuc.func
def power(x, n) -> float:
    if n == 0:
        return 1.0
    return x * power(x, n - 1)


@gpuc.func
def fib_like(x, n) -> float:
    if n < 2:
        return x
    return fib_like(x, n - 1) + math.sin(fib_like(x, n - 2))


@gpuc.func
def of_tuple(p, s):
    return p[0] * p[1] * s + math.sqrt(p[0])


@gpuc.func
def of_nested_tuple(p):
    return p[0] * p[1][0] + p[1][1] * p[1][1]


@gpuc.func
def helper(x):
    return x * math.exp(x)


@gpuc.func
def calls_helper(x, y):
    return helper(x) * helper(y) + helper(x * y)


@gpuc.func
def with_array(x, a, n):
    s = 0.0
    for i in range(n):
        s += a[i] * x ** i
    return s


@gpuc.func
def with_ints(x, k):
    return x * k + (k % 3) * x * x


@gpuc.func
def select_chain(x):
    y = x if x > 0.0 else -x
    z = y * 2.0 if y > 1.0 else y * y
    return z + x


@gpuc.func
def three(x, y, z):
    return x * y * z + x / (y * y + z * z + 1.0)


@gpuc.func
def sq(x):
    return x * x


@gpuc.func
def cube(x):
    return x * x * x


@gpuc.func
def through_pointers(x, c):
    p = gpuc.deferred(sq, x)
    q = gpuc.deferred(cube, x)
    return p(x) + c * q(x)


@gpuc.func
def loop_with_break(x, n):
    acc = x
    for i in range(n):
        acc = acc * 1.1 + math.sin(acc)
        if acc > 50.0:
            break
    return acc


@gpuc.func
def more_math(x):
    return math.acosh(1.0 + x * x) + math.cbrt(x) + gpuc.fma(x, x, 1.0) * math.exp(x) + math.floor(x + 0.5) * x + x ** 3


def _nested(x, n, m):
    # d/dx of the loop, by dual numbers in plain Python
    s, ds = 0.0, 0.0
    for i in range(n):
        t, dt = x, 1.0
        for _ in range(m):
            t, dt = t * x + math.sin(t) * (i + 1.0), dt * x + t + math.cos(t) * dt * (i + 1.0)
        s, ds = s + t, ds + dt
    return ds


def _escape(x):
    v, dv = x, 1.0
    while v < 100.0:
        v, dv = v * v + 1.0, 2 * v * dv
    return dv


def _newton(a):
    return 0.5 / math.sqrt(a)


def _in_place(x, y):
    z = x * y / (x + 1.0) - y + x * x
    dzx = y / (x + 1.0) - x * y / (x + 1.0) ** 2 + 2 * x
    dzy = x / (x + 1.0) - 1.0
    return (2 * z * dzx, 2 * z * dzy)


def _fib_like(x, n):
    def go(k):
        if k < 2:
            return x, 1.0
        a, da = go(k - 1)
        b, db = go(k - 2)
        return a + math.sin(b), da + math.cos(b) * db
    return go(n)[1]


def _loop_with_break(x, n):
    acc, d = x, 1.0
    for _ in range(n):
        acc, d = acc * 1.1 + math.sin(acc), d * 1.1 + math.cos(acc) * d
        if acc > 50.0:
            break
    return d


_A = np.array([1.0, -2.0, 0.5, 3.0, 0.25])

#: (name, f, args, analytic gradient (a tuple over the float arguments))
CASES = [
    ("product", product, (2.0, 3.0), lambda x, y: (y, x)),
    ("quotient", quotient, (1.5, 0.7), lambda x, y: (1 / y + y / (x + 2) ** 2, -x / y ** 2 - 1 / (x + 2))),
    ("difference", difference, (1.5, 0.7), lambda x, y: ((x - 3 * y) + (x - y), -(x - 3 * y) - 3 * (x - y))),
    ("poly", poly, (0.8,), lambda x: (2.5 * x ** 4 - 5 * x ** 3 + 6 * x ** 2 - 1.5 * x + 3,)),
    ("transcendental", transcendental, (0.4, 0.9), lambda x, y: (
        -2 * x * math.exp(-x * x) * math.sin(3 * y) + 2 * x / (1 + x * x),
        3 * math.exp(-x * x) * math.cos(3 * y) + y / math.sqrt(1 + y * y))),
    ("trig", trig, (0.6,), lambda x: (1 / math.cos(x) ** 2 + 1 / (1 + x * x) - math.sin(x) * math.asin(x / 4)
                                      + math.cos(x) / (4 * math.sqrt(1 - (x / 4) ** 2))
                                      - 1 / (5 * math.sqrt(1 - (x / 5) ** 2)),)),
    ("hyperbolic", hyperbolic, (0.7,), lambda x: (math.cosh(x) ** 2 + math.sinh(x) ** 2 + 1 - math.tanh(x) ** 2
                                                  + 1 / math.sqrt(x * x + 1) + 1 / (3 * (1 - (x / 3) ** 2)),)),
    ("logs", logs, (1.3,), lambda x: (1 / (x * math.log(2)) + 1 / (x * math.log(10)) + 1 / (1 + x)
                                      + math.log(2) * 2 ** x + math.exp(x),)),
    ("powers", powers, (1.7, 2.3), lambda x, y: (y * x ** (y - 1) + 3 * x * x,
                                                 x ** y * math.log(x) + 0.5 / math.sqrt(y))),
    ("two_argument", two_argument, (0.9, 1.6), lambda x, y: (
        y / (x * x + y * y) + x / math.hypot(x, y) - 1 + 7.0,
        -x / (x * x + y * y) + y / math.hypot(x, y) - math.trunc(x * 7 / y))),
    ("erfs", erfs, (0.45,), lambda x: (2 / math.sqrt(math.pi) * (math.exp(-x * x) - 2 * math.exp(-4 * x * x)),)),
    ("steps", steps, (1.3,), lambda x: (math.floor(x) + math.trunc(2 * x),)),
    ("min_max_abs", min_max_abs, (2.0, 3.5), lambda x, y: (y - 1 + 1, x + 1)),
    ("branch_taken", branch, (3.0, 2.0), lambda x, y: (2 * x * y, x * x)),
    ("branch_not_taken", branch, (1.0, 2.0), lambda x, y: (1.0, 2 * y)),
    ("early_return_first", early_return, (2.5,), lambda x: (3.0,)),
    ("early_return_second", early_return, (1.5,), lambda x: (3 * x * x,)),
    ("early_return_last", early_return, (0.5,), lambda x: (2 * x,)),
    ("horner_runtime_trip_count", horner, (0.7, 9), lambda x, n: (horner_slope(x, n),)),
    ("horner_zero_trips", horner, (0.7, 0), lambda x, n: (0.0,)),
    ("nested_loops", nested_loops, (0.6, 3, 4), lambda x, n, m: (_nested(x, n, m),)),
    ("data_dependent_while", escape, (1.5,), lambda x: (_escape(x),)),
    ("newton_sqrt", newton_sqrt, (2.0,), lambda a: (_newton(a),)),
    ("in_place_updates", in_place, (1.2, 0.8), _in_place),
    ("recursion", power, (1.3, 5), lambda x, n: (n * x ** (n - 1),)),
    ("double_recursion", fib_like, (0.3, 6), lambda x, n: (_fib_like(x, n),)),
    ("tuple_argument", of_tuple, ((2.0, 3.0), 1.5), lambda p, s: ((p[1] * s + 0.5 / math.sqrt(p[0]), p[0] * s),
                                                                 p[0] * p[1])),
    ("nested_tuple", of_nested_tuple, ((2.0, (3.0, 4.0)),), lambda p: ((p[1][0], (p[0], 2 * p[1][1])),)),
    ("calls_helper", calls_helper, (0.3, 0.6), lambda x, y: (
        (1 + x) * math.exp(x) * y * math.exp(y) + y * (1 + x * y) * math.exp(x * y),
        x * math.exp(x) * (1 + y) * math.exp(y) + x * (1 + x * y) * math.exp(x * y))),
    ("array_constant", with_array, (0.5, _A, 5), lambda x, a, n: (sum(a[i] * i * x ** (i - 1) for i in range(1, n)),)),
    ("int_constant", with_ints, (1.5, 7), lambda x, k: (k + 2 * (k % 3) * x,)),
    ("select_chain", select_chain, (-1.5,), lambda x: (-2.0 + 1,)),
    ("three_arguments", three, (0.5, 1.5, 2.0), lambda x, y, z: (
        y * z + 1 / (y * y + z * z + 1), x * z - 2 * x * y / (y * y + z * z + 1) ** 2,
        x * y - 2 * x * z / (y * y + z * z + 1) ** 2)),
    ("deferred_pointers", through_pointers, (2.0, 1.0), lambda x, c: (2 * x + 3 * c * x * x, x ** 3)),
    ("more_math", more_math, (0.8,), lambda x: (2 * x / math.sqrt((1 + x * x) ** 2 - 1) + 1 / (3 * x ** (2 / 3))
                                                + (2 * x + x * x + 1) * math.exp(x) + math.floor(x + 0.5) + 3 * x * x,)),
    ("loop_with_break", loop_with_break, (1.2, 40), lambda x, n: (_loop_with_break(x, n),)),
]
