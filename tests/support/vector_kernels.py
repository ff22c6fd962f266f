"""Kernels for the vectorization tests (tests/plugins/test_vectorize.py): divergent loops, branches,
exits, division, math, gathers, atomics, aliasing and funcs, each with arguments."""

from __future__ import annotations

import math

import numpy as np

import gpuc


@gpuc.kernel
def newton(a, out, tol):
    i = gpuc.index()
    c = a[i]
    x = c if c > 1.0 else 1.0
    k = 0
    while abs(x * x * x - c) > tol * c and k < 100:
        x = x - (x * x * x - c) / (3.0 * x * x)
        k += 1
    out[i] = x + k


@gpuc.kernel
def branches(a, steps, out, counts):
    """break, continue, an early return, a nested uniform loop and a value of the loop used after it."""
    i = gpuc.index()
    if i >= out.shape[0]:
        return
    s = a[i]
    n = steps[i]
    k = 0
    for k in range(n):
        if s > 50.0:
            break
        if k % 3 == 1:
            continue
        for j in range(3):
            s = s * 1.25 + j
        if s < -20.0:
            return
    out[i] = s
    counts[i] = k


@gpuc.kernel
def divide(a, d, out):
    """Integer division under a per-item condition: lanes where d is 0 must not divide."""
    i = gpuc.index()
    x = a[i]
    t = 0
    for k in range(d[i] % 4 + 1):
        if d[i] != 0:
            t += x // d[i] + x % d[i]
        else:
            t -= 1
    out[i] = t


@gpuc.kernel
def math_loop(a, out):
    i = gpuc.index()
    x = a[i]
    k = 0
    while x > 0.1 and k < 40:
        x = math.sin(x) * 1.5 + math.exp(-x) * 0.25 - 0.05 * k
        k += 1
    out[i] = x + math.log1p(abs(a[i]))


@gpuc.kernel
def gather(table, idx, out):
    """A gather from another array in a loop: the memory test lets rows of one item through only."""
    i = gpuc.index()
    s = 0.0
    j = idx[i]
    while j > 0:
        s += table[j % table.shape[0]]
        j = j // 2
    out[i] = s


@gpuc.kernel
def shift(a, b):
    """b[i] = f(a[i]); launched with b a view of a one element further: items read what others wrote."""
    i = gpuc.index()
    x = a[i]
    k = 0
    while x < 100.0 and k < 5:
        x = x * 2.0 + 1.0
        k += 1
    b[i] = x


@gpuc.kernel
def histogram(a, hist):
    """Atomics in a divergent loop run lane by lane."""
    i = gpuc.index()
    x = a[i]
    while x > 1:
        gpuc.atomic_add(hist, x % hist.shape[0], 1)
        x = x // 3


@gpuc.kernel
def escape(image, iters):
    """A 2-D launch: rows of index 0 at each index 1, a uint8 store."""
    x = gpuc.index(0)
    y = gpuc.index(1)
    c = complex(-2.0 + x * 0.037, -1.0 + y * 0.041)
    z = 0j
    n = 0
    while n < iters and abs(z) <= 2.0:
        z = z * z + c
        n += 1
    image[y, x] = n


@gpuc.func
def relax(y, x):
    for _ in range(16):
        y = 0.75 * y + 0.25 * math.sin(y + x)
        if y > 10.0:
            y = y - 1.0
    return y


@gpuc.kernel
def big_func(a, out):
    i = gpuc.index()
    v = a[i]
    k = 0
    while v < 0.5 and k < 6:
        v = relax(v, a[i]) + 0.125 * k
        k += 1
    out[i] = v


@gpuc.func
def depth(n: gpuc.int64) -> gpuc.int64:
    if n <= 1:
        return 0
    return 1 + depth(n // 2) + depth(n // 3)


@gpuc.kernel
def recursive(a, out):
    i = gpuc.index()
    k = a[i]
    t = 0
    while k > 0:
        t += depth(k)
        k -= 3
    out[i] = t


@gpuc.kernel
def rows(m, out):
    """Each item sums its own row: LLVM vectorizes the loop over the row, this plugin leaves it."""
    i = gpuc.index()
    s = 0
    for k in range(m.shape[1]):
        s += m[i, k] * (k + 1)
    out[i] = s


def arguments(name: str, n: int, rng: np.random.Generator):
    """Fresh arguments of kernel `name` for n items (the same for the same generator state)."""
    if name == "newton":
        return (rng.uniform(0.0, 30.0, n), np.zeros(n), 1e-12)
    if name == "branches":
        return (rng.uniform(-30.0, 30.0, n), rng.integers(0, 12, n), np.zeros(n), np.zeros(n, np.int64))
    if name == "divide":
        return (rng.integers(-100, 100, n), rng.integers(-3, 4, n), np.zeros(n, np.int64))
    if name == "math_loop":
        return (rng.uniform(-1.0, 5.0, n), np.zeros(n))
    if name == "gather":
        return (rng.uniform(-1.0, 1.0, 37), rng.integers(0, 1000, n), np.zeros(n))
    if name == "histogram":
        return (rng.integers(0, 500, n), np.zeros(7, np.int64))
    if name == "big_func":
        return (rng.uniform(-1.0, 1.0, n), np.zeros(n))
    if name in ("derivative", "straight_derivative"):
        return (rng.uniform(-1.0, 3.0, n), np.zeros(n))
    if name == "rows":
        return (rng.integers(-9, 9, (n, 37)), np.zeros(n, np.int64))
    if name == "tapes":
        return (rng.uniform(-1.0, 1.0, n), np.zeros((n, 2)), 3)
    if name == "recursive":
        return (rng.integers(0, 40, n), np.zeros(n, np.int64))
    raise KeyError(name)


@gpuc.func
def settle(x):
    y = x
    k = 0
    while y > 0.1 and k < 20:
        y = math.sin(y) * 0.9 + 0.01 * y * y
        k += 1
    return y


@gpuc.kernel
def derivative(a, out):
    """A forward derivative of a func with a per-item `while`: vectorized at the optimized point."""
    i = gpuc.index()
    out[i] = gpuc.derivative(settle, a[i])


@gpuc.func
def smooth(x):
    return math.sin(x) * x + math.exp(-x * x) / (1.0 + x * x)


@gpuc.kernel
def straight_derivative(a, out):
    """A derivative without loops: LLVM's loop vectorizer has run before it is derived."""
    i = gpuc.index()
    out[i] = gpuc.derivative(smooth, a[i])


@gpuc.func
def clamped(x, n):
    """A loop whose clamp some items hit and others not: its gradient tapes which branch each took."""
    a = math.sin(5.0 * x) * 0.7
    for k in range(n - 1):
        a += 0.3
        a = min(a, 0.75)
    return a


@gpuc.func
def clamped_slope(x, n):
    return gpuc.derivative(clamped, x, n) + x


@gpuc.func
def two_gradients(x, n):
    """Two taped gradients whose results are dropped: their tapes are still kept."""
    g0 = gpuc.grad(clamped, x, n)
    g1 = gpuc.grad(clamped, x, n)
    return x


@gpuc.kernel
def tapes(a, out, n):
    """Five tapes in one body (each with a first buffer on the stack, a slot of each item's own): more
    than 64 KiB of copies for 32 lanes, so the lanes halve to give every item its own."""
    i = gpuc.index()
    out[i, 0] = gpuc.grad(two_gradients, a[i], n)[0]
    out[i, 1] = gpuc.grad(clamped_slope, a[i], n)[0]
