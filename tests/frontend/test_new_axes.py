"""New axes in views (`a[None]`, `a[:, np.newaxis]`, `m[..., None]`): a dimension of length 1 and
stride 0, as NumPy makes it, usable wherever a view is (copies, broadcasting sources, reductions,
len/shape, iteration, funcs, atomics, derivatives)."""

from __future__ import annotations

import numpy as np
import pytest

import gpuc
from gpuc import Array, float64

NEW = None  # a global bound to None works like np.newaxis
# The tests that launch kernels run natively and through OpenCL.
ON_DEVICES = pytest.mark.devices("cpu", "opencl")


@gpuc.func
def fold(v):
    """A view's shape and values, folded into one number (sum of (k+1) * element in row-major order)."""
    total = 0.0
    k = 0
    for r in range(v.shape[0]):
        for c in range(v.shape[1]):
            total += (k + 1) * v[r, c]
            k += 1
    return total + 1000 * v.shape[0] + 100000 * v.shape[1]


def numpy_fold(v):
    return float(sum((k + 1) * x for k, x in enumerate(v.ravel()))) + 1000 * v.shape[0] + 100000 * v.shape[1]


@gpuc.kernel
def views_1d(a, out):
    out[0] = fold(a[None])
    out[1] = fold(a[:, None])
    out[2] = fold(a[np.newaxis, ::-1])
    out[3] = fold(a[1:, NEW])
    out[4] = fold(a[..., None])
    out[5] = fold(a[None, ...])


@gpuc.kernel
def views_2d(m, out):
    out[0] = fold(m[None, 1])
    out[1] = fold(m[:, 0, None])
    out[2] = fold(m[1, :, None])
    out[3] = fold(m[None, -1, ::2])
    out[4] = fold(m[None, 0][:, 1:])
    out[5] = m[None, :, None].sum() + m[:, None, :].shape[1] * 7 + len(m[None])


@ON_DEVICES
def test_new_axes_of_a_1d_array_equal_numpy():
    a = np.arange(1.0, 6.0)
    out = np.zeros(6)
    views_1d[1](a, out)
    want = [numpy_fold(v) for v in (a[None], a[:, None], a[np.newaxis, ::-1], a[1:, None], a[..., None],
                                    a[None, ...])]
    assert out.tolist() == want


@ON_DEVICES
def test_new_axes_of_a_2d_array_equal_numpy():
    m = np.arange(12.0).reshape(3, 4) - 2.5
    out = np.zeros(6)
    views_2d[1](m, out)
    want = [numpy_fold(v) for v in (m[None, 1], m[:, 0, None], m[1, :, None], m[None, -1, ::2], m[None, 0][:, 1:])]
    want.append(m[None, :, None].sum() + m[:, None, :].shape[1] * 7 + len(m[None]))
    assert out.tolist() == want


@gpuc.kernel
def broadcasts(a, b, out, out3):
    out[:, :] = a[:, None]           # a column broadcast along rows
    out[1:, :] += b[None, :]         # a row broadcast along columns
    out3[...] = out[None, :, :]
    out3[0, 0, :] *= b[None, None, :][0, 0]


@ON_DEVICES
def test_new_axes_broadcast_in_copies_as_numpy():
    a, b = np.arange(3.0), np.array([0.5, -2.0])
    out, out3 = np.zeros((3, 2)), np.zeros((1, 3, 2))
    broadcasts[1](a, b, out, out3)
    wo, w3 = np.zeros((3, 2)), np.zeros((1, 3, 2))
    wo[:, :] = a[:, None]
    wo[1:, :] += b[None, :]
    w3[...] = wo[None, :, :]
    w3[0, 0, :] *= b[None, None, :][0, 0]
    assert np.array_equal(out, wo) and np.array_equal(out3, w3)


@gpuc.func
def column(a):
    return a[:, None]


@gpuc.kernel
def through_funcs(a, counts, out):
    c = column(a)
    for row in c:                    # rows of length 1
        out[0] += row[0] * 2.0
    gpuc.atomic_add(counts[None, :], (0, 1), 5)
    out[1] = c.shape[0] * 10 + c.shape[1]


@ON_DEVICES
def test_new_axes_through_funcs_iteration_and_atomics():
    a = np.array([1.0, 2.0, 4.0])
    counts, out = np.zeros(3, np.int64), np.zeros(2)
    through_funcs[1](a, counts, out)
    assert out.tolist() == [14.0, 31.0] and counts.tolist() == [0, 5, 0]


@ON_DEVICES
@pytest.mark.not_on("opencl", "the adjoint keeps the sum's loop values on a tape in memory allocated at run time, "
                              "and SPIR-V has no allocator (a located error there)")
def test_reverse_derivatives_through_a_new_axis_view():
    @gpuc.kernel
    def k(x, y):
        i = gpuc.index()
        v = x[i, None, :]
        y[i] = v[0, 0] * v[0, 1] + v.sum()

    x = np.arange(1.0, 7.0).reshape(2, 3)
    dx, y, dy = np.zeros_like(x), np.zeros(2), np.ones(2)
    gpuc.adjoint(k)[2](x, dx, y, dy)
    want = np.ones_like(x)
    want[:, 0] += x[:, 1]
    want[:, 1] += x[:, 0]
    np.testing.assert_allclose(dx, want)


def test_new_axes_compile_for_every_target(spirv_val):
    types = (Array[float64, 1], Array[float64, 1], Array[float64, 2], Array[float64, 3])
    for target, kind in ((gpuc.PTXTarget(), "asm"), (gpuc.GCNTarget(), "asm"), (gpuc.SPIRVTarget(), "obj")):
        output = gpuc.compile(gpuc.CompilerJob((broadcasts, types), gpuc.CompilerConfig(target, kernel=True)),
                              kind).output
        assert len(output) > 0
        if target.name == "spirv":
            spirv_val(output)


@gpuc.func
def too_many(a):
    return fold(a[None, 1, 2])


def test_new_axes_do_not_count_as_indices_of_the_array():
    with pytest.raises(gpuc.CompilationError, match=r"test_new_axes\.py:\d+:\d+: too many indices for a "
                                                     r"1-dimensional array: 2"):
        gpuc.compile(gpuc.CompilerJob((too_many, (Array[float64, 1],)), gpuc.CompilerConfig(gpuc.NativeTarget())),
                     "llvm")
