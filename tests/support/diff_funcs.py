"""Small @gpuc.funcs covering every supported construct, with argument cases: run by the interpreter and by gpuc."""

from __future__ import annotations

import math

import numpy as np

import gpuc
from gpuc import Array, boolean, float32, float64, int32, int64, uint32, uint64

SCALE = 3          # a global constant: a weak literal inside functions
OFFSET = 0.25

A1f64, A2f64, A3f64 = Array[float64, 1], Array[float64, 2], Array[float64, 3]
A1i64, A1f32, A1b = Array[int64, 1], Array[float32, 1], Array[boolean, 1]

CASES = []  # (func, argtypes, [args, ...], rtol)


def case(argtypes, *args, rtol=1e-12):
    def register(fn):
        CASES.append((fn, tuple(argtypes), list(args), rtol))
        return fn
    return register


INTS = [(7, 2), (-7, 2), (7, -2), (-7, -2), (6, 3), (-6, 3), (0, 5), (1, -1)]
FLOATS = [(7.5, 2.0), (-7.5, 2.0), (7.5, -2.0), (-7.5, -2.0), (6.0, 3.0), (-6.0, 3.0), (0.0, -5.0), (-0.0, 5.0),
          (1e300, 1e-10), (0.3, 0.1)]


# -- arithmetic ------------------------------------------------------------------------------

@case((int64, int64), *INTS)
@gpuc.func
def int_arith(a, b):
    return a * b + a - b * SCALE


@case((int64, int64), *INTS)
@gpuc.func
def int_floordiv(a, b):
    return a // b


@case((int64, int64), *INTS)
@gpuc.func
def int_mod(a, b):
    return a % b


@case((float64, float64), *FLOATS)
@gpuc.func
def float_floordiv(a, b):
    return a // b


@case((float64, float64), *FLOATS)
@gpuc.func
def float_mod(a, b):
    return a % b


@case((int64, int64), *INTS)
@gpuc.func
def true_div(a, b):
    return a / b


@case((int64, int64), (2, 10), (-3, 5), (7, 0), (0, 3), (5, 1))
@gpuc.func
def int_pow(a, n):
    return a ** n + a ** 3


@case((float64,), (1.5,), (-2.25,), (10.0,))
@gpuc.func
def float_pow_int(x):
    return x ** 2 + x ** 3 - x ** -2 + 2.0 ** x


@case((float64, int64), (1.5, 3), (-2.0, 5), (3.0, -2), (2.0, 0))
@gpuc.func
def float_pow_runtime_int(x, n):
    return x ** n


@case((int64, int64), (12, 10), (-12, 3), (255, 4), (1, 62))
@gpuc.func
def bitwise(a, b):
    return (a & b) + (a | b) * 3 - (a ^ b) + (a << 2) + (a >> 1) + ~b


@case((int64, float64), (3, 1.5), (-4, 0.25), (0, -0.0))
@gpuc.func
def unary(a, x):
    return -a + +a * 2, -x, not a, not x


@case((boolean, boolean), (True, True), (True, False), (False, False))
@gpuc.func
def bool_arith(p, q):
    return p + q + p * 3, p & q, p | q, p ^ q


# -- typed scalars and promotion --------------------------------------------------------------

@case((int32, uint32), (5, 7), (-5, 3), (2147483647, 4294967295))
@gpuc.func
def mixed_int_widths(a, b):
    return a + b  # int32 + uint32 -> int64 (NumPy 2)


@case((float32, float32), (1.5, 2.25), (-3.0, 0.125))
@gpuc.func
def float32_arith(x, y):
    return x * y + 1.5  # a Python float stays weak: float32


@case((float32, int64), (1.5, 2), (-3.25, -7))
@gpuc.func
def float32_int_promotion(x, n):
    return x + n  # float32 + int64 -> float64


@case((uint64, uint64), (17, 5), (2**63 + 5, 3), (10, 10))
@gpuc.func
def uint64_divmod(a, b):
    return a // b, a % b


@case((uint32,), (7,), (4000000000,))
@gpuc.func
def uint32_literals(a):
    return a + 1, a // 2, a > 3


@case((float64,), (3.7,), (-3.7,), (0.5,), (-0.5,))
@gpuc.func
def conversions(x):
    return int(x) + int(True), float(int(x)), bool(x), gpuc.int32(x) + gpuc.int32(2)


@case((float64,), (0.1,), (1e10,), (-2.5,))
@gpuc.func
def to_float32(x):
    y = gpuc.float32(x)
    return y * gpuc.float32(2)


# -- comparisons and logic ---------------------------------------------------------------------

@case((int64, int64, int64), (1, 2, 3), (1, 3, 2), (2, 2, 2), (3, 2, 1))
@gpuc.func
def chained(a, b, c):
    return (a < b < c) + 2 * (a == b != c) + 4 * (a <= b >= c) + 8 * (a != c)


@case((float64, float64), (1.0, 2.0), (math.nan, 1.0), (math.nan, math.nan), (2.0, 2.0))
@gpuc.func
def float_compare(x, y):
    return x < y, x <= y, x == y, x != y, x > y, x >= y


@gpuc.func
def touch(a):
    a[0] += 1
    return True


@case((A1i64, int64), (np.zeros(1, np.int64), 1), (np.zeros(1, np.int64), -1), (np.zeros(1, np.int64), 0))
@gpuc.func
def short_circuit(a, x):
    r = 0
    if x > 0 and touch(a):
        r += 1
    if x > 0 or touch(a):
        r += 2
    if not (x < 0 and touch(a)):
        r += 4
    return r + 10 * a[0]


@case((int64, float64), (0, 2.5), (3, 0.0), (4, 1.5))
@gpuc.func
def boolop_values(a, x):
    return (a or x) + (a and x) * 10


@case((int64,), (5,), (-5,), (0,))
@gpuc.func
def conditional_expression(n):
    return (1 if n > 0 else -1 if n < 0 else 0) * 100 + (n if n % 2 == 0 else -n)


# -- control flow ---------------------------------------------------------------------------------

@case((int64,), (-3,), (0,), (7,), (12,), (100,))
@gpuc.func
def classify(n):
    """if / elif / else, with pass."""
    if n < 0:
        r = -1
    elif n == 0:
        pass
        r = 0
    elif n < 10:
        r = 1
    else:
        r = 2
    return r


@case((int64, int64), (48, 18), (17, 5), (0, 9), (100, 100))
@gpuc.func
def gcd(a, b):
    while b != 0:
        a, b = b, a % b
    return a


@case((int64,), (27,), (1,), (97,))
@gpuc.func
def collatz(n):
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


@case((int64, int64, int64), (0, 10, 1), (10, 0, -1), (10, 0, -3), (0, 10, 4), (5, 5, 1), (0, 10, -1), (-5, 5, 2))
@gpuc.func
def range_forms(start, stop, step):
    total = 0
    for i in range(start, stop, step):
        total = total * 3 + i
    for j in range(stop):
        total += j
    for k in range(10, 0, -2):
        total -= k
    return total


@case((int32,), (5,), (0,), (-2,))
@gpuc.func
def range_int32(n):
    s = gpuc.int32(0)
    for i in range(n):
        s += i
    return s


@case((int64,), (20,), (3,))
@gpuc.func
def break_continue(n):
    s = 0
    for i in range(n):
        if i % 3 == 0:
            continue
        if i > 10:
            break
        s += i
    return s


@case((int64,), (10,), (1,))
@gpuc.func
def nested_loops(n):
    count = 0
    for i in range(n):
        for j in range(i):
            if j * i > 20:
                break
            count += 1
    return count


@case((int64,), (10,), (0,))
@gpuc.func
def while_true(n):
    i = 0
    while True:
        i += 1
        if i >= n:
            break
    return i


@case((int64,), (5,), (0,))
@gpuc.func
def loop_variable_after_loop(n):
    i = -1
    for i in range(n):
        pass
    return i


@case((int64,), (3,), (4,))
@gpuc.func
def rebinding(n):
    x = n * 2
    x = x * 0.5  # rebinding to another type is fine where paths do not join
    y: float64 = 2
    return x + y


# -- functions ------------------------------------------------------------------------------------

@gpuc.func
def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


@case((int64,), (0,), (1,), (15,))
@gpuc.func
def call_recursive(n):
    return fib(n)


@gpuc.func
def is_even(n):
    if n == 0:
        return True
    return is_odd(n - 1)


@gpuc.func
def is_odd(n):
    if n == 0:
        return False
    return is_even(n - 1)


@case((int64,), (0,), (7,), (10,))
@gpuc.func
def mutual_recursion(n):
    return is_even(n)


@gpuc.func
def divmod_(a, b):
    return a // b, a % b


@case((int64, int64), *INTS)
@gpuc.func
def tuples(a, b):
    q, r = divmod_(a, b)
    t = (q, r, 1.5)
    a, b = b, a
    return q * b + r, t[0] + t[-1] + t[1]


@case((float64, float64), (1.0, 2.0))
@gpuc.func
def annotated(x: float64, y: float) -> float:
    return x * y


@case((float64,), (1.0,), (-2.0,))
@gpuc.func
def globals_and_literals(x):
    return x * SCALE + OFFSET + 1


def make_closure(k):
    @gpuc.func
    def scaled(x):
        return x * k
    return scaled


scaled_by_7 = case((int64,), (6,))(make_closure(7))


@case((float64,), (2.0,), (-1.0,))
@gpuc.func
def early_return(x):
    if x < 0:
        return 0  # a literal adapts to the function's float64 return type
    return x * 2


# -- builtins and math ---------------------------------------------------------------------------

@case((int64, float64), (-3, 2.5), (4, -0.5), (0, math.nan))
@gpuc.func
def builtins_(n, x):
    return abs(n), abs(x), min(n, x), max(n, x, 7), min(x, n), max(3, 2, 1), abs(-2.5)


@case((float64,), (0.5,), (2.0,), (10.0,))
@gpuc.func
def math_funcs(x):
    return (math.sqrt(x) + math.exp(x) + math.log(x) + math.log2(x) + math.log10(x) + math.sin(x) + math.cos(x)
            + math.tan(x) + math.tanh(x) + math.pow(x, 1.5) + math.fabs(-x) + math.copysign(3.0, -x)
            + gpuc.fma(x, 2.0, 1.0))


@case((float64,), (2.5,), (-2.5,), (3.0,))
@gpuc.func
def math_rounding(x):
    return math.floor(x), math.ceil(x), math.floor(x) // 2


@case((float64,), (1.0,), (math.inf,), (-math.inf,), (math.nan,))
@gpuc.func
def math_predicates(x):
    return math.isnan(x) + 2 * math.isinf(x) + 4 * (x == math.inf) + 8 * math.isnan(math.nan) + math.pi * 0 + \
        math.e * 0


@case((float32,), (2.0,), (0.5,), rtol=1e-6)
@gpuc.func
def math_float32(x):
    return math.sqrt(x) + math.sin(x) * math.exp(x)


# -- arrays -------------------------------------------------------------------------------------

@case((A1f64,), (np.arange(10.0),), (np.linspace(0, 1, 7)[::2],), (np.zeros(0),))
@gpuc.func
def array_sum(a):
    s = 0.0
    for i in range(len(a)):
        s += a[i]
    return s


@case((A2f64,), (np.arange(12.0).reshape(3, 4),), (np.arange(12.0).reshape(3, 4).T,))
@gpuc.func
def array_2d(a):
    s = 0.0
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            s += a[i, j] * (i + 1) - j
    return s, a.size + a.ndim


@case((A3f64,), (np.arange(24.0).reshape(2, 3, 4),))
@gpuc.func
def array_3d(a):
    n, m, k = a.shape
    return a[n - 1, m - 1, k - 1] + a[0, 1, 2] + a[-1, -2, -3]


@case((A1f64, float64), (np.arange(5.0), 2.0), (np.arange(9.0)[::3], -1.0))
@gpuc.func
def array_store(a, x):
    for i in range(len(a)):
        a[i] = a[i] * x + 1
    a[-1] += 100
    a[0] = 7  # an int stored into a float64 array converts


@case((A1i64, A1f32), (np.arange(6), np.zeros(6, np.float32)))
@gpuc.func
def array_convert(src, dst):
    for i in range(len(src)):
        dst[i] = src[i] / 4
    return src[len(src) - 1]


@case((A1b, A1f64), (np.array([True, False, True, True]), np.array([1.0, -2.0, 0.0, 3.0])))
@gpuc.func
def bool_arrays(mask, x):
    count = 0
    for i in range(len(mask)):
        if mask[i]:
            count += 1
        mask[i] = x[i] > 0
    return count


@gpuc.func
def helper_sum(a):
    return array_sum(a) + a[0]


@case((A1f64,), (np.arange(1.0, 6.0),))
@gpuc.func
def array_through_calls(a):
    return helper_sum(a) * 2


@case((A1i64, A1f64), (np.zeros(3, np.int64), np.zeros(2)))
@gpuc.func
def atomics(counts, sums):
    for i in range(10):
        gpuc.atomic_add(counts, i % 3, 1)
        old = gpuc.atomic_add(sums, i % 2, 0.5)
    return old


@case((A1f64, float64), (np.array([1.0, 5.0, 3.0, 5.0]), 5.0), (np.array([1.0, 2.0]), 9.0))
@gpuc.func
def find_first(a, x):
    for i in range(len(a)):
        if a[i] == x:
            return i
    return -1
