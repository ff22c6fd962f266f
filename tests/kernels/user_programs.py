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


# -- the programs, with their inputs -------------------------------------------------------------

GCN_NO_LIBM = "not available on the gcn target"
SPIRV_NO_FLOAT_ATOMICS = "SPV_EXT_shader_atomic_float_add"


def _f(dtype, *shape, seed=0, lo=-4.0, hi=4.0):
    return rng(seed).uniform(lo, hi, shape).astype(dtype)


def _u(dtype, *shape, seed=0):
    info = np.iinfo(dtype)
    return rng(seed).integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


def matmul_f32_reference(a, b, c):
    """`acc = 0.0` is float64 in kernels (docs), so float32 products are summed in float64; NumPy would sum in float32."""
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
            rtol=1e-12, gcn_error=GCN_NO_LIBM),
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
