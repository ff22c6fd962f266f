"""Kernels written the way users port them from numba-cuda, Numba and NumPy code.

Each `Program` names a kernel, its index space, a function making fresh arguments (one call per
run, so compiled launches and the interpreter's emulation start from identical inputs) and
whether floats compare exactly (`rtol=0`) or within a few ulp (transcendental math only, which
docs/frontend.md leaves to the target's math library).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

import gpuc


@dataclass(frozen=True)
class Program:
    id: str
    kernel: object
    n: object
    make: Callable[[], tuple]
    rtol: float = 0.0
    atol: float = 0.0                # with rtol: for differences of large terms (transcendental math)
    reference: Callable | None = None  # fills the arguments where the interpreter's rules differ (docs)
    gcn_error: str | None = None    # the documented GCN refusal (no device libm), if any
    spirv_error: str | None = None  # the documented SPIR-V refusal (float atomics), if any


def rng(seed=0):
    return np.random.default_rng(seed)


# -- grid-stride loops: fewer work items than elements -------------------------------------------

@gpuc.kernel
def saxpy_grid_stride(a, x, y):
    i = gpuc.index()
    while i < len(y):
        y[i] = a * x[i] + y[i]
        i += gpuc.ndrange()


@gpuc.kernel
def scale_for_stride(out, x, s):
    start = gpuc.index()
    for i in range(start, x.shape[0], gpuc.ndrange()):
        out[i] = x[i] * s + 0.5


# -- atomics: histogram and reduction ------------------------------------------------------------

@gpuc.kernel
def histogram(data, hist, lo, hi):
    i = gpuc.index()
    if i < data.size:
        v = data[i]
        if lo <= v < hi:
            b = int((v - lo) / (hi - lo) * len(hist))
            gpuc.atomic_add(hist, min(b, len(hist) - 1), 1)


@gpuc.kernel
def sum_reduce(x, total):
    acc = np.int64(0)  # a plain `acc = 0` is int64 too (docs), but NumPy would keep a uint32 sum
    i = gpuc.index()
    while i < len(x):
        acc += x[i]
        i += gpuc.ndrange()
    gpuc.atomic_add(total, 0, acc)


@gpuc.kernel
def histogram_2d(img, hist):
    r = gpuc.index(1)
    c = gpuc.index(0)
    v = img[r, c]
    gpuc.atomic_add(hist, (v % 4, v // 4 % 4), np.uint32(1))


# -- per-row prefix sums, stencils, matrix multiply ----------------------------------------------

@gpuc.kernel
def row_prefix(a, out):
    r = gpuc.index()
    s = a[r, 0] - a[r, 0]
    for j in range(a.shape[1]):
        s += a[r, j]
        out[r, j] = s


@gpuc.kernel
def laplace(u, out):
    j = gpuc.index(0)
    i = gpuc.index(1)
    ny, nx = u.shape
    if i == 0 or j == 0 or i == ny - 1 or j == nx - 1:
        out[i, j] = u[i, j]
    else:
        out[i, j] = (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]) * 0.25 - u[i, j]


@gpuc.kernel
def blur_wrap(u, out):
    i = gpuc.index()
    n = len(u)
    out[i] = (u[(i - 1) % n] + u[i] + u[(i + 1) % n]) / 3


@gpuc.kernel
def matmul(a, b, c):
    j = gpuc.index(0)
    i = gpuc.index(1)
    if i < c.shape[0] and j < c.shape[1]:
        acc = 0.0
        for k in range(a.shape[1]):
            acc += a[i, k] * b[k, j]
        c[i, j] = acc


@gpuc.kernel
def fill_3d(a):
    i, j, k = gpuc.index(0), gpuc.index(1), gpuc.index(2)
    a[k, j, i] = i + 10 * j + 100 * k + gpuc.ndrange(2) * 1000


# -- math-heavy kernels ---------------------------------------------------------------------------

@gpuc.func
def cnd(d):
    return 0.5 * (1.0 + math.erf(d / math.sqrt(2.0)))


@gpuc.kernel
def black_scholes(call, put, s, k, t, r, v):
    i = gpuc.index()
    sqrt_t = math.sqrt(t[i])
    d1 = (math.log(s[i] / k[i]) + (r + 0.5 * v * v) * t[i]) / (v * sqrt_t)
    d2 = d1 - v * sqrt_t
    disc = math.exp(-r * t[i])
    call[i] = s[i] * cnd(d1) - k[i] * disc * cnd(d2)
    put[i] = k[i] * disc * cnd(-d2) - s[i] * cnd(-d1)


@gpuc.kernel
def mandelbrot(out, max_iter):
    px = gpuc.index(0)
    py = gpuc.index(1)
    cr = -2.0 + 2.5 * px / gpuc.ndrange(0)
    ci = -1.25 + 2.5 * py / gpuc.ndrange(1)
    zr = 0.0
    zi = 0.0
    n = 0
    for it in range(max_iter):
        if zr * zr + zi * zi > 4.0:
            break
        zr, zi = zr * zr - zi * zi + cr, 2.0 * zr * zi + ci
        n = it + 1
    out[py, px] = n


# -- integer hashes: wrapping uint32/uint64 arithmetic --------------------------------------------

@gpuc.func
def fmix32(h):
    h ^= h >> 16
    h *= 0x85EBCA6B
    h ^= h >> 13
    h *= 0xC2B2AE35
    h ^= h >> 16
    return h


@gpuc.func
def splitmix64(x):
    z = x + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
    z = (z ^ (z >> 27)) * 0x94D049BB133111EB
    return z ^ (z >> 31)


@gpuc.kernel
def hashes(seeds, out32, out64):
    i = gpuc.index()
    out32[i] = fmix32(seeds[i])
    out64[i] = splitmix64(np.uint64(seeds[i]) << 32 | np.uint64(i))


@gpuc.kernel
def xorshift_stream(state, out):
    i = gpuc.index()
    x = state[i]
    for j in range(out.shape[1]):
        x ^= x << 13
        x ^= x >> 7
        x ^= x << 17
        out[i, j] = x


@gpuc.kernel
def fnv1a(words, out):
    i = gpuc.index()
    h = np.uint32(2166136261)
    for j in range(words.shape[1]):
        w = words[i, j]
        for b in range(4):
            h = (h ^ ((w >> np.uint32(8 * b)) & 0xFF)) * np.uint32(16777619)
    out[i] = h


# -- loops with break, while, funcs returning tuples, recursion ---------------------------------

@gpuc.func
def collatz_steps(n):
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n //= 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


@gpuc.kernel
def collatz(out):
    i = gpuc.index()
    out[i] = collatz_steps(i + 1)


@gpuc.func
def bisect_cuberoot(y):
    lo = 0.0
    hi = max(1.0, y)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid == lo or mid == hi:
            break
        if mid * mid * mid < y:
            lo = mid
        else:
            hi = mid
    return lo


@gpuc.func
def newton_sqrt(y):
    x = y if y > 1.0 else 1.0
    steps = 0
    while True:
        nx = 0.5 * (x + y / x)
        steps += 1
        if nx >= x:
            break
        x = nx
    return x, steps


@gpuc.kernel
def root_finding(ys, cube, sq, steps):
    i = gpuc.index()
    cube[i] = bisect_cuberoot(ys[i])
    r, n = newton_sqrt(ys[i])
    sq[i] = r
    steps[i] = n


@gpuc.func
def fib(n: int) -> int:
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


@gpuc.func
def gcd(a: gpuc.uint32, b: gpuc.uint32) -> gpuc.uint32:
    if b == 0:
        return a
    return gcd(b, a % b)


@gpuc.kernel
def recursive(fibs, gs, a, b):
    i = gpuc.index()
    fibs[i] = fib(i)
    gs[i] = gcd(a[i], b[i])


@gpuc.func
def row_range(a, r):
    lo = a[r, 0]
    hi = a[r, 0]
    for j in range(1, a.shape[1]):
        lo = min(lo, a[r, j])
        hi = max(hi, a[r, j])
    return lo, hi


@gpuc.kernel
def normalize_rows(a, out):
    r = gpuc.index()
    lo, hi = row_range(a, r)
    span = hi - lo
    for j in range(a.shape[1]):
        out[r, j] = (a[r, j] - lo) / span if span != 0 else 0.0


# -- float32 kept in float32 (weak literals), with several specializations ------------------------

@gpuc.kernel
def poly_eval(x, out):
    i = gpuc.index()
    v = x[i]
    out[i] = ((0.5 * v - 1.25) * v + 3.0) * v - 0.1


@gpuc.kernel
def clamp_abs(x, out, lo, hi):
    i = gpuc.index()
    v = abs(x[i])
    if v < lo:
        v = lo
    elif v > hi:
        v = hi
    out[i] = v


@gpuc.kernel
def transpose_add(a, b, out):
    j = gpuc.index(0)
    i = gpuc.index(1)
    out[i, j] = a[i, j] + b[j, i]


# -- probes of the documented rules: edge values, specializations, conversions, views ------------

@gpuc.kernel
def early_ret(x, out):
    i = gpuc.index()
    if i >= len(x):
        return
    if x[i] < 0:
        out[i] = -1
        return
    out[i] = x[i] * 2


@gpuc.kernel
def big_hist(x, hist):
    i = gpuc.index()
    gpuc.atomic_add(hist, x[i] % len(hist), 1)


@gpuc.kernel
def big_hist_f(x, hist):
    i = gpuc.index()
    gpuc.atomic_add(hist, x[i] % len(hist), 1.0)


@gpuc.kernel
def divmods(a, b, q, r, s):
    i = gpuc.index()
    q[i] = a[i] // b[i]
    r[i] = a[i] % b[i]
    s[i] = (a[i] << (b[i] & 7)) >> 1


@gpuc.kernel
def specialize(x, out):
    i = gpuc.index()
    v = x[i]
    out[i] = v * v - v // 3 + abs(v) % 5 + min(v, 2) - max(v, 3)


@gpuc.kernel
def f32math(x, out):
    i = gpuc.index()
    v = x[i]
    out[i, 0] = math.sqrt(abs(v))
    out[i, 1] = math.floor(v) + math.ceil(v) * 0.5
    out[i, 2] = math.fabs(v) + math.copysign(1.5, v)
    out[i, 3] = math.fmod(v, 0.75)
    out[i, 4] = math.radians(v)
    out[i, 5] = int(v)
    out[i, 6] = np.float32(v * 3.3)
    out[i, 7] = v ** 2 - v


@gpuc.kernel
def f32trans(x, out):
    i = gpuc.index()
    v = x[i]
    out[i, 0] = math.exp(v)
    out[i, 1] = math.log(abs(v) + 1)
    out[i, 2] = math.sin(v) * math.cos(v)
    out[i, 3] = math.erf(v)
    out[i, 4] = math.tanh(v)
    out[i, 5] = math.atan2(v, 1.5)
    out[i, 6] = math.hypot(v, 2)
    out[i, 7] = math.pow(abs(v), 1.5)


@gpuc.kernel
def tuple_arg(out, p):
    i = gpuc.index()
    scale, (off, flag) = p
    out[i] = i * scale + off if flag else -1.0


@gpuc.kernel
def mask(x, m, cnt):
    i = gpuc.index()
    m[i] = x[i] > 0.5 and not math.isnan(x[i])
    if m[i]:
        gpuc.atomic_add(cnt, 0, np.uint64(1))


@gpuc.kernel
def reverse_rows(a, out):
    r = gpuc.index()
    n = a.shape[1]
    k = 0
    for j in range(n - 1, -1, -1):
        if a[r, j] < 0:
            continue
        out[r, k] = a[r, j]
        k += 1
    while k < n:
        out[r, k] = 0
        k += 1


@gpuc.kernel
def neg_index(a, out):
    i = gpuc.index()
    out[i] = a[-1 - i] + a[i - len(a)]


@gpuc.kernel
def stencil3d(u, out):
    i, j, k = gpuc.index(0), gpuc.index(1), gpuc.index(2)
    nz, ny, nx = u.shape
    s = u[k, j, i] * 6
    cnt = 0
    for dk in range(-1, 2):
        for dj in range(-1, 2):
            for di in range(-1, 2):
                kk, jj, ii = k + dk, j + dj, i + di
                if 0 <= kk < nz and 0 <= jj < ny and 0 <= ii < nx and (dk != 0 or dj != 0 or di != 0):
                    s -= u[kk, jj, ii]
                    cnt += 1
    out[k, j, i] = s / cnt


@gpuc.func
def tile_of():
    return gpuc.index(0) // 4, gpuc.index(1) // 4


@gpuc.kernel
def tiles(out):
    tx, ty = tile_of()
    out[gpuc.index(1), gpuc.index(0)] = tx + 10 * ty


@gpuc.kernel
def grid2d(a):
    y = gpuc.index(1)
    while y < a.shape[0]:
        x = gpuc.index(0)
        while x < a.shape[1]:
            a[y, x] += x * y
            x += gpuc.ndrange(0)
        y += gpuc.ndrange(1)


@gpuc.kernel
def countdown(u, out):
    i = gpuc.index()
    s = np.uint32(0)
    for j in range(u[i], 0, -1):
        s += j
    for j in range(u[i], -1, -2):
        s ^= j
    out[i] = s


@gpuc.kernel
def wrap32(a, b, out):
    i = gpuc.index()
    out[i, 0] = a[i] * 1000003 + 12345
    out[i, 1] = a[i] + b[i]       # int32 + uint32 -> int64
    out[i, 2] = a[i] > -1
    out[i, 3] = b[i] > -1
    out[i, 4] = (a[i] and np.int64(b[i])) + (b[i] or 7)
    out[i, 5] = -a[i] // 7 + -a[i] % 7
    out[i, 6] = a[i] ** 3
    out[i, 7] = ~a[i] ^ (a[i] >> 3)


@gpuc.kernel
def powers(x, n, out):
    i = gpuc.index()
    out[i, 0] = x[i] ** 0.5
    out[i, 1] = x[i] ** n[i]
    out[i, 2] = x[i] ** 2
    out[i, 3] = 2.0 ** n[i]


@gpuc.func
def newton(x0, c):
    x = x0
    it = 0
    while True:
        fx = x * x * x - c
        if abs(fx) < 1e-12:
            break
        it += 1
        if it > 100:
            return x, -1
        x = x - fx / (3 * x * x)
    return x, it


@gpuc.kernel
def solve(c, root, iters):
    i = gpuc.index()
    r, n = newton(1.0, c[i])
    root[i] = r
    iters[i] = n


@gpuc.func
def depth(n: gpuc.int32) -> gpuc.int32:
    if n <= 0:
        return n
    return depth(n - 1) + 1


@gpuc.func
def ackermann(m: int, n: int) -> int:
    if m == 0:
        return n + 1
    if n == 0:
        return ackermann(m - 1, 1)
    return ackermann(m - 1, ackermann(m, n - 1))


@gpuc.kernel
def recur(out):
    i = gpuc.index()
    out[i, 0] = depth(np.int32(i * 10))
    out[i, 1] = ackermann(2, i)


@gpuc.kernel
def conv_mix(x, out):
    i = gpuc.index()
    v = x[i]
    out[i, 0] = np.int32(v)
    out[i, 1] = np.uint32(np.int64(v))
    out[i, 2] = int(v * 100) % 7
    out[i, 3] = bool(v) + np.float32(v) * 2


@gpuc.kernel
def walk_strided(a, out):
    i = gpuc.index(0)
    j = gpuc.index(1)
    out[j, i] = a[j, i] * 2 + a.shape[0] * 100 + a.ndim + a.size


# -- the programs, with their inputs -------------------------------------------------------------

def _f(dtype, *shape, seed=0, lo=-4.0, hi=4.0):
    return rng(seed).uniform(lo, hi, shape).astype(dtype)


def _u(dtype, *shape, seed=0):
    info = np.iinfo(dtype)
    return rng(seed).integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


def matmul_f32_reference(a, b, c):
    """`acc = 0.0` is float64 in kernels (docs): float32 products are summed in float64, not in float32 as NumPy would."""
    acc = np.zeros(c.shape)
    for k in range(a.shape[1]):
        acc += (a[:, k, None] * b[None, k, :]).astype(np.float64)
    c[...] = acc.astype(np.float32)


PROGRAMS = [
    Program("saxpy_grid_stride_f32", saxpy_grid_stride, 7,
            lambda: (np.float32(1.5), _f(np.float32, 100), _f(np.float32, 100, seed=1))),
    Program("saxpy_grid_stride_f64", saxpy_grid_stride, 13,
            lambda: (2.5, _f(np.float64, 1000), _f(np.float64, 1000, seed=1))),
    Program("scale_for_stride_strided", scale_for_stride, 5,
            lambda: (np.zeros(50, np.float32), _f(np.float32, 100)[::2], np.float32(-0.75))),
    Program("histogram", histogram, 500,
            lambda: (rng(2).normal(0.0, 1.0, 500), np.zeros(16, np.int64), -2.0, 2.0)),
    Program("sum_reduce_i64", sum_reduce, 9, lambda: (_u(np.int64, 1000), np.zeros(1, np.int64))),
    Program("sum_reduce_u32", sum_reduce, 9, lambda: (_u(np.uint32, 1000), np.zeros(1, np.int64))),
    Program("histogram_2d", histogram_2d, (13, 11),
            lambda: (rng(3).integers(0, 16, (11, 13), dtype=np.int32), np.zeros((4, 4), np.uint32))),
    Program("row_prefix_f32", row_prefix, 6, lambda: (_f(np.float32, 6, 33), np.zeros((6, 33), np.float32))),
    Program("row_prefix_i32", row_prefix, 6,
            lambda: (_u(np.int32, 6, 33), np.zeros((6, 33), np.int32))),
    Program("row_prefix_transposed", row_prefix, 5,
            lambda: (_f(np.float64, 40, 5).T, np.zeros((5, 40)))),
    Program("laplace", laplace, (17, 9), lambda: (_f(np.float64, 9, 17), np.full((9, 17), np.nan))),
    Program("blur_wrap_f32", blur_wrap, 31, lambda: (_f(np.float32, 31), np.zeros(31, np.float32))),
    Program("blur_wrap_f64_strided", blur_wrap, 20,
            lambda: (_f(np.float64, 60)[::3], np.zeros(20))),
    Program("matmul", matmul, (8, 8),
            lambda: (_f(np.float64, 6, 9), _f(np.float64, 9, 7, seed=1), np.zeros((6, 7)))),
    Program("matmul_transposed_f32", matmul, (5, 4),
            lambda: (_f(np.float32, 4, 3), _f(np.float32, 5, 3, seed=1).T, np.zeros((4, 5), np.float32)),
            reference=matmul_f32_reference),
    Program("fill_3d", fill_3d, (5, 4, 3), lambda: (np.zeros((3, 4, 5), np.int64),)),
    Program("black_scholes", black_scholes, 64,
            lambda: (np.zeros(64), np.zeros(64), _f(np.float64, 64, lo=5, hi=30),
                     _f(np.float64, 64, seed=1, lo=1, hi=100), _f(np.float64, 64, seed=2, lo=0.25, hi=10),
                     0.02, 0.30),
            # The CPU's exp and erf (libmvec, docs/targets.md) differ from libm's in the last bits: a
            # price of 1e-9, the difference of two terms near s, is compared absolutely.
            rtol=1e-12, atol=1e-12),
    Program("mandelbrot", mandelbrot, (24, 16), lambda: (np.zeros((16, 24), np.int64), 50)),
    Program("hashes", hashes, 64,
            lambda: (_u(np.uint32, 64), np.zeros(64, np.uint32), np.zeros(64, np.uint64))),
    Program("xorshift_stream", xorshift_stream, 8,
            lambda: (_u(np.uint64, 8) | np.uint64(1), np.zeros((8, 10), np.uint64))),
    Program("fnv1a", fnv1a, 10, lambda: (_u(np.uint32, 10, 3), np.zeros(10, np.uint32))),
    Program("collatz", collatz, 100, lambda: (np.zeros(100, np.int64),)),
    Program("root_finding", root_finding, 40,
            lambda: (_f(np.float64, 40, lo=0.01, hi=1000), np.zeros(40), np.zeros(40), np.zeros(40, np.int64))),
    Program("recursive", recursive, 20,
            lambda: (np.zeros(20, np.int64), np.zeros(20, np.uint32),
                     rng(4).integers(0, 10**6, 20, dtype=np.uint32), rng(5).integers(0, 10**6, 20, dtype=np.uint32))),
    Program("normalize_rows", normalize_rows, 5,
            lambda: (np.vstack([_f(np.float64, 4, 7), np.full((1, 7), 3.0)]), np.full((5, 7), np.nan))),
    Program("poly_eval_f32", poly_eval, 50, lambda: (_f(np.float32, 50), np.zeros(50, np.float32))),
    Program("poly_eval_f64", poly_eval, 50, lambda: (_f(np.float64, 50), np.zeros(50))),
    Program("clamp_abs_f32", clamp_abs, 40,
            lambda: (_f(np.float32, 40), np.zeros(40, np.float32), np.float32(0.5), np.float32(3))),
    Program("clamp_abs_i32", clamp_abs, 40,
            lambda: (rng(6).integers(-9, 9, 40, dtype=np.int32), np.zeros(40, np.int32), np.int32(2), np.int32(6))),
    Program("transpose_add_views", transpose_add, (4, 3),
            lambda: (_f(np.float64, 6, 12)[::2, ::3], _f(np.float64, 4, 3, seed=1), np.zeros((3, 4)))),
]


def _divmod_inputs(dtype):
    info = np.iinfo(dtype)
    neg = info.min < 0
    return (np.array([info.min, info.max, -7 if neg else 7, 7, 0, 5, info.min, 3], dtype),
            np.array([-1 if neg else 1, 3, 2, -2 if neg else 2, 0, 0, 1, info.max], dtype),
            np.zeros(8, dtype), np.zeros(8, dtype), np.zeros(8, dtype))


_HIST_DATA = rng(7).integers(0, 1000, 50000)

PROGRAMS += [
    Program("early_return", early_ret, 40, lambda: (np.arange(-5, 30, dtype=np.int32), np.zeros(35, np.int32))),
    Program("atomic_hist_50000_items", big_hist, 50000, lambda: (_HIST_DATA.copy(), np.zeros(37, np.int64))),
    Program("atomic_hist_float_counts", big_hist_f, 50000, lambda: (_HIST_DATA.copy(), np.zeros(37))),
    *[Program(f"divmod_shift_{np.dtype(t).name}", divmods, 8, lambda t=t: _divmod_inputs(t))
      for t in (np.int32, np.uint32, np.int64, np.uint64)],
    *[Program(f"specialize_{np.dtype(t).name}", specialize, 20,
              lambda t=t: ((np.arange(20) * 37 - 300).astype(t), np.zeros(20, t)))
      for t in (np.int32, np.uint32, np.int64, np.uint64, np.float32, np.float64)],
    Program("float32_exact_math", f32math, 30,
            lambda: (np.linspace(-5, 5, 30).astype(np.float32), np.zeros((30, 8), np.float32))),
    Program("float32_transcendental", f32trans, 30,
            lambda: (np.linspace(-5, 5, 30).astype(np.float32), np.zeros((30, 8), np.float32)),
            rtol=1e-5),
    Program("tuple_argument", tuple_arg, 10, lambda: (np.zeros(10), (2.5, (np.int32(3), True)))),
    Program("bool_mask", mask, 12,
            lambda: (np.array([0.1, 0.6, np.nan, 1, -0.0, 0.5, 0.7, np.inf, -np.inf, 2, 3, 0.2]),
                     np.zeros(12, bool), np.zeros(1, np.uint64))),
    Program("reverse_rows_continue", reverse_rows, 4,
            lambda: (rng(2).integers(-5, 10, (4, 9)).astype(np.int32)[:, ::-1], np.full((4, 9), -9, np.int32))),
    Program("negative_indices", neg_index, 6, lambda: (np.arange(6.0) ** 2, np.zeros(6))),
    Program("stencil_3d", stencil3d, (5, 4, 3),
            lambda: (rng(3).random((3, 4, 5)).astype(np.float32), np.zeros((3, 4, 5), np.float32))),
    Program("index_in_func_tuple", tiles, (8, 8), lambda: (np.zeros((8, 8), np.int64),)),
    Program("grid_stride_2d", grid2d, (3, 2), lambda: (np.ones((7, 11), np.float32),)),
    Program("unsigned_countdown", countdown, 6,
            lambda: (np.array([0, 1, 2, 3, 10, 100], np.uint32), np.zeros(6, np.uint32))),
    Program("int32_wrapping_mixed", wrap32, 8,
            lambda: (np.array([0, 1, -1, 2**31 - 1, -2**31, 12345, -999, 7], np.int32),
                     np.array([0, 5, 2**32 - 1, 1, 0, 77, 3, 9], np.uint32), np.zeros((8, 8), np.int64))),
    Program("powers", powers, 5,
            lambda: (np.array([0.0, 1.5, 2.0, 9.0, 1e10]), np.array([0, 1, -2, 3, 5]), np.zeros((5, 4))),
            rtol=1e-15),
    Program("newton_while_true", solve, 5,
            lambda: (np.array([1.0, 8.0, 27.5, 0.001, 1e6]), np.zeros(5), np.zeros(5, np.int64))),
    Program("annotated_recursion", recur, 6, lambda: (np.zeros((6, 2), np.int64),)),
    Program("conversions", conv_mix, 6,
            lambda: (np.array([0.0, -0.5, 1.99, -3.7, 100.25, 2e9]), np.zeros((6, 4)))),
    Program("reversed_strided_view", walk_strided, (3, 4),
            lambda: (np.arange(60.0).reshape(5, 12)[::-1, ::4][:4], np.zeros((4, 3)))),
    Program("transposed_int32_view", walk_strided, (3, 4),
            lambda: (np.arange(60, dtype=np.int32).reshape(12, 5).T[1:, ::4], np.zeros((4, 3), np.int32))),
]


@gpuc.func
def halve_steps(n: int) -> (int, (int, float)):
    if n <= 1:
        return (0, (n, 1.0))
    steps, (last, scale) = halve_steps(n // 2)
    return (steps + 1, (last + n % 2, scale * 0.5))


@gpuc.kernel
def recursive_tuples(out):
    i = gpuc.index()
    steps, (bits, scale) = halve_steps(i * 37 + 1)
    out[i, 0] = steps
    out[i, 1] = bits
    out[i, 2] = scale


@gpuc.kernel
def compact(x, out, count):
    i = gpuc.index()
    if x[i] > 0:
        j = gpuc.atomic_add(count, 0, 1)
        out[j] = x[i]


PROGRAMS += [
    Program("recursive_tuple_return", recursive_tuples, 16, lambda: (np.zeros((16, 3)),)),
]


# -- vectorizable loops (float order, NaN in min/max), float division, uint64 conversions ----------

@gpuc.kernel
def dot_rows(a, b, out):
    r = gpuc.index()
    acc = np.float32(0)
    for j in range(a.shape[1]):
        acc += a[r, j] * b[r, j]
    out[r] = acc


@gpuc.kernel
def nan_minmax(x, out):
    r = gpuc.index()
    lo = x[r, 0]
    hi = x[r, 0]
    for j in range(1, x.shape[1]):
        lo = min(lo, x[r, j])
        hi = max(x[r, j], hi)
    out[r, 0] = lo
    out[r, 1] = hi


@gpuc.kernel
def int_sum_vec(x, out):
    r = gpuc.index()
    s = x[r, 0] - x[r, 0]
    m = x[r, 0]
    for j in range(x.shape[1]):
        s += x[r, j] * 3 + 1
        m = max(m, x[r, j])
    out[r, 0] = s
    out[r, 1] = m


@gpuc.kernel
def fdiv(x, y, out):
    i = gpuc.index()
    out[i, 0] = x[i] // y[i]
    out[i, 1] = x[i] % y[i]
    out[i, 2] = abs(x[i])
    out[i, 3] = -x[i] if x[i] < 0 else x[i] * 1.0
    out[i, 4] = x[i] / y[i]


@gpuc.kernel
def u64conv(x, f, out, back):
    i = gpuc.index()
    out[i] = x[i] * 1.0 + np.float32(x[i] & 0xFFFF)
    back[i] = np.uint64(f[i])


def _nan_rows():
    x = rng(11).standard_normal((6, 200))
    x[0, 0] = x[1, 57] = x[2, 199] = np.nan
    x[3, :] = np.nan
    x[4, 100:], x[4, :100] = -0.0, 0.0
    return x, np.zeros((6, 2))


_SPECIAL = np.array([0.0, -0.0, 1.5, -1.5, np.inf, -np.inf, np.nan, 7.0, -7.0, 1e308])

PROGRAMS += [
    Program("float32_dot_rows", dot_rows, 4,
            lambda: (rng(9).standard_normal((4, 1000)).astype(np.float32),
                     rng(10).standard_normal((4, 1000)).astype(np.float32), np.zeros(4, np.float32))),
    Program("nan_min_max_rows", nan_minmax, 6, _nan_rows),
    *[Program(f"vector_sum_max_{np.dtype(t).name}", int_sum_vec, 3,
              lambda t=t: (_u(t, 3, 333, seed=12), np.zeros((3, 2), t)))
      for t in (np.int32, np.uint32, np.int64, np.uint64)],
    Program("float_floor_division_specials", fdiv, 100,
            lambda: (np.repeat(_SPECIAL, 10), np.tile(_SPECIAL, 10), np.zeros((100, 5)))),
    Program("uint64_float_conversions", u64conv, 6,
            lambda: (np.array([0, 1, 2**53 + 1, 2**63, 2**64 - 1, 12345678901234567], np.uint64),
                     np.array([0.0, 1.9, 2.0**63, 1.8e19, 3.5, 2.0**64 - 4096]), np.zeros(6), np.zeros(6, np.uint64))),
]


# -- function pointers: gpuc.deferred ------------------------------------------------------------

SPIRV_NO_INDIRECT_CALLS = "cannot call through a function pointer"


@gpuc.func
def relu(x):
    return x if x > 0.0 else x * 0.0


@gpuc.func
def leaky_relu(x):
    return x if x > 0.0 else 0.01 * x


@gpuc.func
def softsign(x):
    return x / (1.0 + abs(x))


@gpuc.kernel
def activate(x, out, flag):
    """One of several activations, chosen by a runtime flag, through a pointer."""
    i = gpuc.index()
    if flag == 0:
        act = gpuc.deferred(relu, x[i])
    elif flag == 1:
        act = gpuc.deferred(leaky_relu, x[i])
    else:
        act = gpuc.deferred(softsign, x[i])
    out[i] = act(x[i])


def activate_reference(x, out, flag):
    one = x.dtype.type(1.0)
    out[...] = [np.where(x > 0, x, x * 0), np.where(x > 0, x, 0.01 * x), x / (one + np.abs(x))][min(int(flag), 2)]


@gpuc.func
def cube_minus(x, c):
    return x * x * x - c


@gpuc.func
def cube_slope(x, c):
    return 3.0 * x * x


@gpuc.func
def newton_step(f, df, x, c):
    return x - f(x, c) / df(x, c)


@gpuc.kernel
def newton_deferred(cs, roots, iters):
    """Newton's method for x**3 = c with the function and its derivative passed as pointers."""
    i = gpuc.index()
    c = cs[i]
    f = gpuc.deferred(cube_minus, c, c)
    df = gpuc.deferred(cube_slope, (gpuc.float64, gpuc.float64))
    x = 1.0
    for _ in range(iters):
        x = newton_step(f, df, x, c)
    roots[i] = x


def newton_deferred_reference(cs, roots, iters):
    x = np.ones_like(cs)
    for _ in range(iters):
        x = x - (x * x * x - cs) / (3.0 * x * x)
    roots[...] = x


@gpuc.func
def op_add(a, b):
    return a + b


@gpuc.func
def op_sub(a, b):
    return a - b


@gpuc.func
def op_mul(a, b):
    return a * b


@gpuc.func
def op_max(a, b):
    return max(a, b)


@gpuc.func
def pick_op(k):
    if k == 0:
        return gpuc.deferred(op_add, (gpuc.int64, gpuc.int64))
    elif k == 1:
        return gpuc.deferred(op_sub, (gpuc.int64, gpuc.int64))
    elif k == 2:
        return gpuc.deferred(op_mul, (gpuc.int64, gpuc.int64))
    return gpuc.deferred(op_max, (gpuc.int64, gpuc.int64))


@gpuc.kernel
def table_ops(a, b, codes, out):
    """A table of operations: a func picks a pointer by an if-chain, the kernel calls it."""
    i = gpuc.index()
    op = pick_op(codes[i])
    out[i] = op(a[i], b[i])


def table_ops_reference(a, b, codes, out):
    out[...] = np.select([codes == 0, codes == 1, codes == 2], [a + b, a - b, a * b], np.maximum(a, b))


PROGRAMS += [
    *[Program(f"deferred_activation_{np.dtype(t).name}_{flag}", activate, 40,
              lambda t=t, flag=flag: (_f(t, 40, seed=13), np.zeros(40, t), flag),
              reference=activate_reference, spirv_error=SPIRV_NO_INDIRECT_CALLS)
      for t in (np.float32, np.float64) for flag in (0, 1, 2)],
    Program("deferred_newton", newton_deferred, 30,
            lambda: (_f(np.float64, 30, seed=14, lo=0.5, hi=100), np.zeros(30), 12),
            reference=newton_deferred_reference),
    Program("deferred_table", table_ops, 50,
            lambda: (rng(15).integers(-1000, 1000, 50), rng(16).integers(-1000, 1000, 50),
                     rng(17).integers(0, 5, 50), np.zeros(50, np.int64)),
            reference=table_ops_reference, spirv_error=SPIRV_NO_INDIRECT_CALLS),
]


# -- iteration: for over arrays, tuples, enumerate and zip ---------------------------------------

@gpuc.kernel
def stencil_taps(x, out):
    """Taps and offsets zipped from two tuples written in place."""
    i = gpuc.index()
    n = len(x)
    s = 0.0
    for w, d in zip((0.25, 0.5, 0.25), (-1, 0, 1)):
        s += w * x[min(max(i + d, 0), n - 1)]
    out[i] = s


@gpuc.kernel
def nearest_center(points, centers, labels, dists):
    """Each item scans a whole 1-D array with enumerate, keeping the best index."""
    i = gpuc.index()
    p = points[i]
    best, label = math.inf, -1
    for k, c in enumerate(centers):
        d = abs(p - c)
        if d < best:
            best, label = d, k
    labels[i] = label
    dists[i] = best


@gpuc.kernel
def mixed_scales(x, out, n):
    """A tuple of an int, floats of two widths and an argument: the loop is unrolled per element type."""
    i = gpuc.index()
    acc = x[i]
    for scale in (2, 0.5, np.float32(1.5), n):
        acc = acc * scale + 1
    out[i] = acc


@gpuc.kernel
def coefficient_table(x, out, shift):
    """A tuple indexed at run time, from the end too."""
    i = gpuc.index()
    coef = (1.0, -0.5, 0.25, 0.125)
    out[i] = x[i] * coef[(i + shift) % 4] + coef[-1 - i % 4]


@gpuc.kernel
def pairwise_in_order(a, b, out):
    """zip of two arrays of different lengths stops at the shorter, with break and continue."""
    i = gpuc.index()
    s = 0.0
    for x, y in zip(a, b):
        if x < 0:
            continue
        if x * y > 50 + i:
            break
        s = s * 0.5 + x * y
    out[i] = s


PROGRAMS += [
    Program("stencil_taps", stencil_taps, 30, lambda: (_f(np.float64, 30), np.zeros(30))),
    Program("nearest_center", nearest_center, 40,
            lambda: (_f(np.float64, 40), _f(np.float64, 7, seed=1), np.zeros(40, np.int64), np.zeros(40))),
    Program("mixed_scales", mixed_scales, 20, lambda: (_f(np.float64, 20), np.zeros(20), 3)),
    Program("coefficient_table", coefficient_table, 20, lambda: (_f(np.float64, 20), np.zeros(20), 5)),
    Program("pairwise_in_order", pairwise_in_order, 10,
            lambda: (_f(np.float64, 12), _f(np.float64, 9, seed=1, lo=-10, hi=10), np.zeros(10))),
]
