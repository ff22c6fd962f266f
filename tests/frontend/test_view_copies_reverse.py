"""Reverse mode through copies into views (docs/frontend.md, Views): every branch of the copy (disjoint,
shift, one element, stack buffer, ordered 1-D, heap temporary) gives the adjoint that central finite
differences of a NumPy reference give."""

from __future__ import annotations

import numpy as np
import pytest

import gpuc
from gpuc import Array, float32, float64, int64

# Every test launches kernels, natively and through OpenCL.
pytestmark = [pytest.mark.devices("cpu", "opencl"),
              pytest.mark.not_on("opencl", "the adjoints keep loop values on a tape in memory allocated at run time, "
                                           "and SPIR-V has no allocator (a located error there)")]

A2, A2f = Array[float64, 2], Array[float32, 2]


@gpuc.kernel
def copies(x, y, kind):
    i = gpuc.index()
    y[i, :] = x[i, :]
    if kind == 0:
        y[i, :] = x[i, ::-1]            # disjoint
    elif kind == 1:
        y[i, 1:] = y[i, :-1]            # a shift within y
    elif kind == 2:
        y[i, :] = y[i, ::-1]            # overlap: a temporary (stack or heap by length)
    elif kind == 3:
        y[i, :(len(y[i]) + 1) // 2] = y[i, ::2]   # different strides: ordered
    elif kind == 4:
        y[i, 2:] = y[i, 1:2]            # a broadcast element of y itself
    elif kind == 5:
        x[i, 1:] = x[i, :-1]            # a shift inside the differentiated array
        y[i, :] = x[i, ::-1]
    elif kind == 6:
        for r in range(3):              # copies in a loop
            y[i, 1:] = y[i, :-1]
            y[i, 0] = y[i, 1] * 0.5 + x[i, r]
    y[i, 0] += y[i, 1] * y[i, -1]       # a nonlinear use, so that adjoints depend on values


def reference(x, kind):
    x, y = x.copy(), np.zeros_like(x)
    for i in range(x.shape[0]):
        y[i, :] = x[i, :]
        if kind == 0:
            y[i, :] = x[i, ::-1]
        elif kind == 1:
            y[i, 1:] = y[i, :-1]
        elif kind == 2:
            y[i, :] = y[i, ::-1]
        elif kind == 3:
            y[i, :(y.shape[1] + 1) // 2] = y[i, ::2]
        elif kind == 4:
            y[i, 2:] = y[i, 1:2]
        elif kind == 5:
            x[i, 1:] = x[i, :-1]
            y[i, :] = x[i, ::-1]
        elif kind == 6:
            for r in range(3):
                y[i, 1:] = y[i, :-1]
                y[i, 0] = y[i, 1] * 0.5 + x[i, r]
        y[i, 0] += y[i, 1] * y[i, -1]
    return x, y


def numeric_gradient(x, kind, wx, wy):
    """d/dx of sum(wx * x_after) + sum(wy * y_after), by central differences."""
    def f(a):
        xa, ya = reference(a, kind)
        return (wx * xa).sum() + (wy * ya).sum()
    g, eps = np.zeros_like(x), 1e-6
    for idx in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[idx] += eps
        down[idx] -= eps
        g[idx] = (f(up) - f(down)) / (2 * eps)
    return g


@pytest.mark.parametrize("n", [5, 40], ids=["stack", "heap"])  # 40 float64 exceed the stack buffer
@pytest.mark.parametrize("kind", range(7))
def test_adjoint_of_copies_into_views(kind, n):
    rng = np.random.default_rng(kind * 100 + n)
    x = rng.random((3, n)) + 0.5
    wx, wy = rng.random((3, n)), rng.random((3, n))
    want_x, want_y = reference(x, kind)
    gx, y, gy = np.array(wx), np.zeros_like(x), np.array(wy)
    got_x = x.copy()
    gpuc.adjoint(copies)[3](got_x, gx, y, gy, kind)
    np.testing.assert_allclose(y, want_y, rtol=1e-14)
    np.testing.assert_allclose(got_x, want_x, rtol=1e-14)
    np.testing.assert_allclose(gx, numeric_gradient(x, kind, wx, wy), rtol=1e-6, atol=1e-7)


@gpuc.kernel
def converting(x, y):
    i = gpuc.index()
    y[i, :] = x[i, ::-1]      # float32 into float64
    y[i, 1:] = y[i, :-1]


@gpuc.kernel
def columns(m, out):
    i = gpuc.index()
    if i == 0:
        m[:, 0] = m[0, :3]    # a row into a column of the same array: 1-D, ordered backwards
        m[1:, :] = m[:-1, :]  # 2-D rows shifted
        m[:, :] = m[::-1, ::-1]  # 2-D, through a temporary
        out[:, :] = m
        out[0, 0] *= m[1, 1]


def test_adjoint_of_a_converting_copy():
    x = np.arange(1.0, 9.0, dtype=np.float32).reshape(2, 4)
    gx, y, gy = np.zeros_like(x), np.zeros((2, 4)), np.arange(8.0).reshape(2, 4)
    want = np.zeros((2, 4))
    for i in range(2):  # y[i, k] = x[i, 3 - k], then shifted: y[i, k] = x[i, 3 - max(k - 1, 0)]
        for k in range(4):
            want[i, 3 - max(k - 1, 0)] += gy[i, k]
    gpuc.adjoint(converting)[2](x, gx, y, gy)
    assert gx.dtype == np.float32
    np.testing.assert_allclose(gx, want)


def test_adjoint_of_2d_row_and_column_copies():
    rng = np.random.default_rng(7)
    m0 = rng.random((3, 3)) + 0.5
    w = rng.random((3, 3))

    def f(m):
        m = m.copy()
        m[:, 0] = m[0, :3]
        m[1:, :] = m[:-1, :].copy()
        m[:, :] = m[::-1, ::-1].copy()
        out = m.copy()
        out[0, 0] *= m[1, 1]
        return (w * out).sum(), m, out

    m, gm = m0.copy(), np.zeros((3, 3))
    out, gout = np.zeros((3, 3)), w.copy()
    gpuc.adjoint(columns)[1](m, gm, out, gout)
    _, want_m, want_out = f(m0)
    np.testing.assert_allclose(out, want_out, rtol=1e-14)
    g, eps = np.zeros((3, 3)), 1e-6
    for idx in np.ndindex(3, 3):
        up, down = m0.copy(), m0.copy()
        up[idx] += eps
        down[idx] -= eps
        g[idx] = (f(up)[0] - f(down)[0]) / (2 * eps)
    np.testing.assert_allclose(gm, g, rtol=1e-6, atol=1e-7)


@gpuc.func
def local_copies(x):
    t = gpuc.local.array(40, gpuc.float64)
    for k in range(40):
        t[k] = x * (k + 1) + k * k * 0.25
    t[1:] = t[:-1]                 # a shift
    t[:20] = t[::2]                # ordered
    t[:] = t[::-1]                 # a heap temporary (320 bytes)
    t[:5] = t[3:8][::-1]           # the stack buffer
    return t[0] * t[1] + t[39] * t[2] + t[10] * x


def local_copies_reference(x):
    t = np.array([x * (k + 1) + k * k * 0.25 for k in range(40)])
    t[1:] = t[:-1].copy()
    t[:20] = t[::2].copy()
    t[:] = t[::-1].copy()
    t[:5] = t[3:8][::-1].copy()
    return t[0] * t[1] + t[39] * t[2] + t[10] * x


def test_grad_of_a_func_with_copies_into_local_views():
    @gpuc.kernel
    def k(xs, out):
        i = gpuc.index()
        out[i] = gpuc.grad(local_copies, xs[i])[0]

    xs = np.array([0.5, -1.25, 2.0])
    out = np.zeros(3)
    k[3](xs, out)
    eps = 1e-6
    want = [(local_copies_reference(x + eps) - local_copies_reference(x - eps)) / (2 * eps) for x in xs]
    np.testing.assert_allclose(out, want, rtol=1e-6)
