"""Python kernels covering the kernel model, each with a launch size and fresh arguments: the differential suite."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

import gpuc
from gpuc import atomic_add, index  # intrinsics imported by name work too


@dataclass(frozen=True)
class KernelCase:
    kernel: gpuc.frontend.Kernel
    n: object                     # the index space: an int or a tuple of up to 3 ints
    make: object                  # () -> the launch arguments (fresh, deterministic arrays and scalars)
    rtol: float = 1e-12           # for float arrays; integer and bool arrays compare exactly
    compare: dict = field(default_factory=dict)  # argument position -> "sum" | "sorted" (order-dependent results)

    @property
    def id(self) -> str:
        return self.kernel.__name__


CASES: list[KernelCase] = []


def case(n, *, rtol=1e-12, compare=None):
    def register(make):
        def wrap(kernel):
            CASES.append(KernelCase(kernel, n, make, rtol, compare or {}))
            return kernel
        return wrap
    return register


def rng(seed=0):
    return np.random.default_rng(seed)


# -- device functions --------------------------------------------------------------------------

@gpuc.func
def axpy(a, x, y):
    return a * x + y


@gpuc.func
def minmax(a, b):
    return min(a, b), max(a, b)


@gpuc.func
def inner_index():
    return gpuc.index(0)


@gpuc.func
def middle_index(scale):
    return inner_index() * scale + gpuc.ndrange(0) - gpuc.ndrange(0)


@gpuc.func
def outer_index():
    return middle_index(1)


@gpuc.func
def collatz_steps(n):
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


# -- 1-D: the classics -------------------------------------------------------------------------

@case(1000, rtol=1e-6)(lambda: (np.float32(2.5), rng(1).standard_normal(1000, dtype=np.float32),
                                rng(2).standard_normal(1000, dtype=np.float32)))
@gpuc.kernel
def saxpy(a, x, y):
    i = gpuc.index()
    if i < len(y):
        y[i] = axpy(a, x[i], y[i])


@case(300)(lambda: (-1.25, rng(3).random(900)[::3], rng(4).random(600)[::2]))
@gpuc.kernel
def daxpy_strided(a, x, y):
    i = gpuc.index()
    y[i] = axpy(a, x[i], y[i])


@case(5000, rtol=1e-9, compare={1: "sum"})(lambda: (rng(5).standard_normal(5000), np.zeros(1)))
@gpuc.kernel
def atomic_sum(x, total):
    i = gpuc.index()
    if i < x.shape[0]:
        gpuc.atomic_add(total, 0, x[i] * x[i])


@case(4000, rtol=1e-4, compare={1: "sum"})(lambda: (rng(6).random(4000, dtype=np.float32),
                                                    np.zeros(1, np.float32)))
@gpuc.kernel
def atomic_sum_f32(x, total):
    gpuc.atomic_add(total, 0, x[gpuc.index()])


@case(3000)(lambda: (rng(7).integers(0, 1 << 20, 3000), np.zeros(16, np.int64)))
@gpuc.kernel
def atomic_histogram(values, bins):
    v = values[index()]
    atomic_add(bins, v % len(bins), 1)


@case(2000, compare={1: "sorted"})(lambda: (np.zeros(1, np.uint32), np.full(2000, 99, np.uint32)))
@gpuc.kernel
def atomic_tickets(counter, order):
    order[gpuc.index()] = gpuc.atomic_add(counter, 0, 1)


@case(500)(lambda: (rng(8).standard_normal(400), 350, np.zeros(500)))
@gpuc.kernel
def early_return(x, limit, out):
    i = gpuc.index()
    if i >= limit or i >= len(x):
        return
    if x[i] < 0.0:
        out[i] = -1.0
        return
    out[i] = math.sqrt(x[i])


@case(257)(lambda: (rng(9).standard_normal(6), rng(10).standard_normal(257, dtype=np.float32),
                    np.zeros(257)))
@gpuc.kernel
def horner(coeffs, x, out):
    i = gpuc.index()
    acc = 0.0
    for k in range(len(coeffs) - 1, -1, -1):
        acc = acc * x[i] + coeffs[k]
    out[i] = acc


@case(200)(lambda: (np.arange(1, 201, dtype=np.int64), np.zeros(200, np.int64)))
@gpuc.kernel
def collatz(start, steps):
    i = gpuc.index()
    steps[i] = collatz_steps(start[i])


@case(400)(lambda: (rng(11).integers(-50, 50, (20, 20)), np.zeros(20, np.int64)))
@gpuc.kernel
def row_sum_break(a, out):
    r = gpuc.index()
    if r >= a.shape[0]:
        return
    s = 0
    for c in range(a.shape[1]):
        v = a[r, c]
        if v == 0:
            continue
        if v < -45:
            break
        s += v
    out[r] = s


@case(300)(lambda: (rng(12).standard_normal(300), rng(13).standard_normal(300), np.zeros(300), np.zeros(300),
                    np.zeros(300)))
@gpuc.kernel
def tuple_minmax(x, y, lo_out, hi_out, width):
    i = gpuc.index()
    lo, hi = minmax(x[i], y[i])
    t = (lo, hi)
    lo_out[i] = t[0]
    hi_out[i] = hi
    width[i] = t[-1] - lo


@case(256)(lambda: (np.linspace(-4.0, 4.0, 256), np.zeros(256)))
@gpuc.kernel
def clamp_branches(x, out):
    i = gpuc.index()
    v = x[i]
    if v < -2.0:
        r = -2.0
    elif v > 2.0:
        r = max(v * 0.5, 2.0)
    elif abs(v) < 0.5:
        r = 0.0 if v < 0.0 else v * v
    else:
        r = min(v, 1.5)
    out[i] = r


# -- every dtype -------------------------------------------------------------------------------

@case(64)(lambda: (True, np.int32(-7), 1 << 40, np.uint32(4000000000), np.uint64(1 << 63), np.float32(0.1),
                   2.75, np.zeros(64, np.int64), np.zeros(64, np.uint64), np.zeros(64), np.zeros(64, np.float32)))
@gpuc.kernel
def all_scalars(b, i32, i64, u32, u64, f32, f64, out_i, out_u, out_f, out_f32):
    k = gpuc.index()
    out_i[k] = k * i64 + i32 + (k if b else -k)
    out_u[k] = u64 + gpuc.uint64(u32) * gpuc.uint64(k)
    out_f[k] = f64 * k + f32
    out_f32[k] = f32 * gpuc.float32(k)


@case(500)(lambda: (rng(14).integers(-1000, 1000, 500, dtype=np.int32),
                    rng(15).integers(1, 30, 500, dtype=np.int32) * np.where(rng(16).random(500) < 0.5, -1, 1)
                    .astype(np.int32), np.zeros(500, np.int32)))
@gpuc.kernel
def int32_ops(a, b, out):
    i = gpuc.index()
    x = a[i]
    y = b[i]
    out[i] = (x // y) + (x % y) * 3 ^ (x << 2) | (y & 6)


@case(500)(lambda: (rng(17).integers(0, 1 << 32, 500, dtype=np.uint32),
                    rng(18).integers(0, 1 << 32, 500, dtype=np.uint32), np.zeros(500, np.uint32)))
@gpuc.kernel
def uint32_ops(a, b, out):
    i = gpuc.index()
    h = a[i] * 2654435761 + b[i]
    out[i] = (h >> 3) ^ ~b[i] + (a[i] // (b[i] | 1)) - a[i] % 7


@case(500)(lambda: (rng(19).integers(1, 1 << 63, 500, dtype=np.uint64), np.zeros(500, np.uint64)))
@gpuc.kernel
def uint64_xorshift(a, out):
    i = gpuc.index()
    x = a[i]
    for _ in range(3):
        x ^= x << 13
        x ^= x >> 7
        x ^= x << 17
    out[i] = x


@case(300)(lambda: (rng(20).integers(-10 ** 12, 10 ** 12, 300), np.zeros(300, np.int64)))
@gpuc.kernel
def int64_loop(a, out):
    i = gpuc.index()
    s = 0
    for k in range(a[i] % 7):
        s += k * a[i] - (a[i] >> 3)
    out[i] = s ** 2 // 1000 if s > 0 else -s % 97


@case(300)(lambda: (rng(21).random(300) < 0.5, rng(22).random(300) < 0.3, np.zeros(300, bool),
                    np.zeros(300, np.int32)))
@gpuc.kernel
def bool_logic(a, b, out, count):
    i = gpuc.index()
    out[i] = a[i] and not b[i]
    if a[i] or b[i]:
        count[i] = 1 + (2 if a[i] else 0)
    else:
        count[i] = -1


@case(400)(lambda: (np.linspace(-700.5, 700.5, 400), np.zeros(400, np.int32), np.zeros(400, np.int64),
                    np.zeros(400, np.float32), np.zeros(400, np.int64)))
@gpuc.kernel
def conversions(x, as_i32, as_i64, as_f32, floors):
    i = gpuc.index()
    as_i32[i] = gpuc.int32(x[i])
    as_i64[i] = int(x[i] * 3.0)
    as_f32[i] = gpuc.float32(x[i])
    floors[i] = math.floor(x[i] / 7.0) + math.ceil(x[i])


@case(300)(lambda: (rng(23).random(300) * 3.0 + 0.1, np.zeros(300), np.zeros(300), np.zeros(300)))
@gpuc.kernel
def math_f64(x, a, b, c):
    i = gpuc.index()
    v = x[i]
    a[i] = math.sqrt(v) + math.exp(-v) * math.sin(v)
    b[i] = math.log(v) + math.tanh(v) - math.cos(v * math.pi) + math.pow(v, 1.5)
    c[i] = gpuc.fma(v, v, -1.0) + math.fabs(math.copysign(v, -1.0)) + math.log2(v) + math.log10(v)


# libmvec's float32 functions are within 4 ulp (docs/targets.md): b stays away from its root near 0.2,
# where a last-bit difference in exp, sin or log would be a large relative one.
@case(300, rtol=1e-5)(lambda: (rng(24).random(300, dtype=np.float32) * 3 + 0.3, np.zeros(300, np.float32),
                               np.zeros(300, np.float32)))
@gpuc.kernel
def math_f32(x, a, b):
    i = gpuc.index()
    v = x[i]
    a[i] = math.sqrt(v) * v + math.fabs(v - 1.5)
    b[i] = math.exp(v) + math.sin(v) + math.log(v)


# -- 2-D and 3-D index spaces (index(0) walks the last, contiguous axis) -------------------------

@case((40, 30))(lambda: (rng(25).random((30, 40)), np.zeros((30, 40)), 0.2))
@gpuc.kernel
def stencil5(u, out, alpha):
    i = gpuc.index(0)
    j = gpuc.index(1)
    rows, cols = u.shape
    if 0 < j < rows - 1 and 0 < i < cols - 1:
        out[j, i] = u[j, i] + alpha * (u[j - 1, i] + u[j + 1, i] + u[j, i - 1] + u[j, i + 1] - 4.0 * u[j, i])
    else:
        out[j, i] = u[j, i]


@case((12, 9))(lambda: (rng(26).integers(0, 1000, (12, 9)).T, np.zeros((9, 12), np.int64)))
@gpuc.kernel
def transposed_copy(src, out):
    c = gpuc.index(0)
    r = gpuc.index(1)
    out[r, c] = src[r, c] + r * 100 + c


@case((11, 13))(lambda: (rng(27).standard_normal((13, 7)), rng(28).standard_normal((11, 7)).T,
                         np.zeros((13, 11))))
@gpuc.kernel
def matmul(a, b, c):
    col = gpuc.index(0)
    row = gpuc.index(1)
    acc = 0.0
    for k in range(a.shape[1]):
        acc += a[row, k] * b[k, col]
    c[row, col] = acc


@case((16, 5), rtol=1e-6)(lambda: (rng(29).random((5, 16), dtype=np.float32), np.zeros(20, np.float32)[::-1][:16]))
@gpuc.kernel
def column_max_negative_stride(a, out):
    c = gpuc.index(0)
    r = gpuc.index(1)
    if r == 0:
        m = a[0, c]
        for k in range(1, a.shape[0]):
            m = max(m, a[k, c])
        out[c] = m


@case((8, 6))(lambda: (rng(30).integers(0, 10 ** 6, (8, 6)), np.zeros((4, 5), np.int32)))
@gpuc.kernel
def atomic_histogram_2d(values, hist):
    v = values[gpuc.index(0), gpuc.index(1)]
    gpuc.atomic_add(hist, (v // 7 % hist.shape[0], v % hist.shape[1]), 1)


@case((6, 5, 4), rtol=1e-6)(lambda: (rng(31).random((6, 4, 5), dtype=np.float32).transpose(1, 2, 0),
                                     rng(32).random((4, 5, 6), dtype=np.float32), np.float32(3.0),
                                     np.zeros((4, 5, 6), np.float32)))
@gpuc.kernel
def add3d_transposed(a, b, s, out):
    i = gpuc.index(0)
    j = gpuc.index(1)
    k = gpuc.index(2)
    if k < a.shape[0] and j < a.shape[1] and i < a.shape[2]:
        out[k, j, i] = a[k, j, i] + b[k, j, i] * s


@case((5, 4, 3))(lambda: (np.full((3, 4, 5), -1, np.int64),))
@gpuc.kernel
def ndrange_linear(out):
    i0 = gpuc.index(0)
    i1 = gpuc.index(1)
    i2 = gpuc.index(2)
    out[i2, i1, i0] = i0 + gpuc.ndrange(0) * (i1 + gpuc.ndrange(1) * i2)


@case(100)(lambda: (np.zeros(100, np.int64),))
@gpuc.kernel
def deep_index(out):
    i = outer_index()
    out[i] = i * 3 + 1
