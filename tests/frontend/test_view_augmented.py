"""Augmented assignment on views (`a[1:] += x`, `out[i, :] *= a[i, :]`): NumPy's
`np.<op>(view, x, out=view)`, with broadcasting, NumPy 2's dtype of the operation, the 'same_kind'
cast back into the view, and an operand that overlaps the view read as if through a temporary."""

from __future__ import annotations

import numpy as np
import pytest

import gpuc
from gpuc import Array, float64

from support.located_errors import module_from_source
# The tests that launch kernels run natively and through OpenCL.
ON_DEVICES = pytest.mark.devices("cpu", "opencl")


@gpuc.kernel
def scalar_ops(a, s):
    a[1:] += s
    a[::2] *= 2.0
    a[:-1] -= 1
    a[::-3] /= 4.0


@gpuc.kernel
def array_ops(out, a):
    i = gpuc.index()
    out[i, :] *= a[i, :]
    out[i, 1:] += a[i, :-1]
    out[i, ::-1] -= a[i, :]
    out[i, :] += a[0, 1:2]  # a length-1 source broadcasts


@gpuc.kernel
def self_overlap(x, y):
    x[1:] += x[:-1]        # NumPy reads the operand as it was before the statement
    y[::-1] *= y[:]
    x[:3] -= x[2:5]


@gpuc.kernel
def small(u, v):
    u[:] += 200            # uint8 wraps, as in NumPy
    u[1:] //= 3
    v[:, 1] %= 7


@gpuc.kernel
def rows(m, r):
    for row in range(m.shape[0]):
        m[row] += r        # a row of a 2-D array, a 1-D source
    m[1:, :] -= m[:-1, :]


def numpy_scalar_ops(a, s):
    a[1:] += s
    a[::2] *= 2.0
    a[:-1] -= 1
    a[::-3] /= 4.0


@ON_DEVICES
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n", [0, 1, 2, 7])
def test_scalar_operands_equal_numpy(dtype, n):
    a = np.arange(n, dtype=dtype) * 1.25 - 2
    want = a.copy()
    numpy_scalar_ops(want, dtype(0.5))
    scalar_ops[1](a, dtype(0.5))
    np.testing.assert_array_equal(a, want)


@ON_DEVICES
def test_array_operands_per_row_equal_numpy():
    rng = np.random.default_rng(1)
    out, a = rng.random((4, 5)), rng.random((4, 5))
    want = out.copy()
    for i in range(4):
        want[i, :] *= a[i, :]
        want[i, 1:] += a[i, :-1]
        want[i, ::-1] -= a[i, :]
        want[i, :] += a[0, 1:2]
    array_ops[4](out, a)
    np.testing.assert_array_equal(out, want)


@ON_DEVICES
@pytest.mark.parametrize("n", [1, 2, 5, 9])
def test_an_operand_that_overlaps_the_view_is_read_as_numpy_reads_it(n):
    x = np.arange(max(n, 5), dtype=np.float64) + 1
    y = np.arange(n, dtype=np.float64) - 1.5
    wx, wy = x.copy(), y.copy()
    wx[1:] += wx[:-1]
    wy[::-1] *= wy[:]
    wx[:3] -= wx[2:5]
    self_overlap[1](x, y)
    np.testing.assert_array_equal(x, wx)
    np.testing.assert_array_equal(y, wy)


@ON_DEVICES
def test_small_integer_views_wrap_and_divide_as_numpy():
    u = np.array([5, 60, 100, 255], np.uint8)
    v = np.arange(-6, 6, dtype=np.int64).reshape(4, 3)
    wu, wv = u.copy(), v.copy()
    wu[:] += 200
    wu[1:] //= 3
    wv[:, 1] %= 7
    small[1](u, v)
    assert u.tolist() == wu.tolist() and v.tolist() == wv.tolist()


@ON_DEVICES
def test_rows_and_overlapping_2d_views_equal_numpy():
    m = np.arange(12.0).reshape(3, 4)
    r = np.array([0.5, -1.0, 2.0, 3.0])
    want = m.copy()
    for row in range(3):
        want[row] += r
    want[1:, :] -= want[:-1, :]
    rows[1](m, r)
    np.testing.assert_array_equal(m, want)


@ON_DEVICES
def test_a_float32_view_keeps_float32_with_a_float64_operand():
    @gpuc.kernel
    def k(a, b):
        a[:] += b[:]

    a, b = np.full(3, 0.1, np.float32), np.full(3, 0.2, np.float64)
    want = a.copy()
    want += b
    k[1](a, b)
    assert a.dtype == np.float32 and a.tolist() == want.tolist()


@pytest.mark.parametrize("dest, value", [(np.int64, 1.5), (np.uint8, 0.5), (np.float64, 1j)])
def test_what_numpy_refuses_in_place_is_a_located_error(dest, value):
    with pytest.raises(Exception):  # NumPy: UFuncTypeError, casting='same_kind'
        a = np.zeros(3, dest)
        a[1:] += value

    @gpuc.kernel
    def k(a, v):
        a[1:] += v

    vt = gpuc.complex128 if isinstance(value, complex) else float64
    with pytest.raises(gpuc.CompilationError, match=r"test_view_augmented\.py:\d+:\d+: .*in place"):
        gpuc.compile(gpuc.CompilerJob((k, (Array[np.dtype(dest).type, 1], vt)),
                                      gpuc.CompilerConfig(gpuc.NativeTarget(), kernel=True)), "llvm")


def test_augmented_views_compile_for_every_target(spirv_val):
    types = (Array[float64, 2], Array[float64, 2])
    for target, kind in ((gpuc.PTXTarget(), "asm"), (gpuc.GCNTarget(), "asm"), (gpuc.SPIRVTarget(), "obj")):
        output = gpuc.compile(gpuc.CompilerJob((array_ops, types), gpuc.CompilerConfig(target, kernel=True)),
                              kind).output
        assert len(output) > 0
        if target.name == "spirv":
            spirv_val(output)


@ON_DEVICES
@pytest.mark.not_on("opencl", "the adjoint keeps loop values on a tape in memory allocated at run time, and SPIR-V has no allocator "
                              "(a located error there)")
def test_forward_and_reverse_derivatives_through_an_augmented_view():
    @gpuc.kernel
    def k(x, y):
        i = gpuc.index()
        y[i, :] += x[i, :]
        y[i, 1:] *= x[i, :-1]

    x = np.arange(1.0, 7.0).reshape(2, 3)
    y = np.full((2, 3), 0.5)
    dx, dy = np.zeros_like(x), np.ones_like(y)
    gpuc.adjoint(k)[2](x, dx, y.copy(), dy)
    # y0 = y + x; y1[1:] = y0[1:] * x[:-1]; d/dx of sum(y1): x[j] gets 1 (j = 0) or x[j-1] (j >= 1)
    # from the += and, for j < 2, y0[j+1] = y[j+1] + x[j+1] from the *=
    want = np.zeros_like(x)
    for i in range(2):
        for j in range(3):
            want[i, j] = (1.0 if j == 0 else x[i, j - 1]) + ((0.5 + x[i, j + 1]) if j < 2 else 0.0)
    np.testing.assert_allclose(dx, want)


@gpuc.kernel
def bool_views(m, f):
    m[1:] += f[:-1]      # NumPy's bool add is `or`
    m[::2] *= f[::2]     # and multiply is `and`
    m[:2] |= True
    m[2:] ^= f[2:]
    m[-1:] *= False


@ON_DEVICES
def test_bool_views_add_as_or_and_multiply_as_and_like_numpy():
    rng = np.random.default_rng(5)
    for _ in range(20):
        m, f = rng.random(7) > 0.5, rng.random(7) > 0.5
        want = m.copy()
        want[1:] += f[:-1]
        want[::2] *= f[::2]
        want[:2] |= True
        want[2:] ^= f[2:]
        want[-1:] *= False
        bool_views[1](m, f)
        assert m.tolist() == want.tolist()


@ON_DEVICES
@pytest.mark.parametrize("statement", ["a[1:] -= b[1:]", "a[1:] += 1", "a[:] //= b", "a[:] /= b"])
def test_bool_view_operations_numpy_refuses_are_located_errors(tmp_path, statement):
    a, b = np.zeros(3, bool), np.ones(3, bool)
    with pytest.raises(Exception):
        exec(statement)
    module = module_from_source(tmp_path, "bool_view", f"import gpuc\n\n@gpuc.kernel\ndef k(a, b):\n    {statement}\n")
    with pytest.raises(gpuc.CompilationError, match=r"bool_view\.py:5:\d+: "):
        module.k[1](a, b)
