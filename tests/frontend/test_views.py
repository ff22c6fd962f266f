"""Array views (slicing, rows, copies into views): each function runs in the interpreter on NumPy arrays
and compiled on the CPU, and the results (returned values and the arrays written) must agree."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import gpuc
from gpuc import Array, boolean, float32, float64, int32, int64, uint32, uint64

from support.located_errors import check
from support.native import assert_same, native, python_args

A1, A2, A3 = Array[float64, 1], Array[float64, 2], Array[float64, 3]
A1i, A2i, A1f = Array[int32, 1], Array[int32, 2], Array[float32, 1]
X = np.arange(1.0, 11.0) * 1.5 - 4.0
M = np.arange(20.0).reshape(4, 5) - 7.5
T = np.arange(60.0).reshape(3, 4, 5) * 0.5
# The tests that launch kernels run natively and through OpenCL.
ON_DEVICES = pytest.mark.devices("cpu", "opencl")


def same(fn, argtypes, *args):
    """Run `fn` in the interpreter and compiled; compare the result and every array argument after."""
    py_args = python_args(argtypes, args)
    want = fn(*py_args)
    got_args = python_args(argtypes, args)
    got = native(fn, argtypes)(*got_args)
    if want is not None:
        assert_same(got, want)
    for p, g in zip(py_args, got_args):
        if isinstance(p, np.ndarray):
            assert_same(g, p)


@gpuc.func
def fold(v):
    s = 0.0
    for k in range(len(v)):
        s = s * 1.5 + v[k]
    return s + len(v) * 1000


@gpuc.func
def slice_full(a, lo, hi, step):
    return fold(a[lo:hi:step])


@gpuc.func
def slice_lo(a, lo):
    return fold(a[lo:])


@gpuc.func
def slice_hi(a, hi):
    return fold(a[:hi])


@gpuc.func
def slice_step(a, step):
    return fold(a[::step])


@gpuc.func
def slice_hi_step(a, hi, step):
    return fold(a[:hi:step])


BOUNDS = [-2**63, -100, -11, -10, -9, -3, -1, 0, 1, 2, 5, 9, 10, 11, 100, 2**63 - 1]
STEPS = [-2**63, -100, -3, -2, -1, 1, 2, 3, 9, 10, 11, 2**63 - 1]


@ON_DEVICES
def test_slices_follow_python_bounds_everywhere():
    # every combination of start/stop/step, far out of range included: Python's slice.indices clipping
    fn = native(slice_full, (A1, int64, int64, int64))
    for lo, hi, step in itertools.product(BOUNDS, BOUNDS, STEPS):
        assert_same(fn(X, lo, hi, step), slice_full(X, lo, hi, step))
    for f, args in ((slice_lo, [(b,) for b in BOUNDS]), (slice_hi, [(b,) for b in BOUNDS]),
                    (slice_step, [(s,) for s in STEPS]),
                    (slice_hi_step, list(itertools.product(BOUNDS, STEPS)))):
        compiled = native(f, (A1,) + (int64,) * len(args[0]))
        for a in args:
            assert_same(compiled(X, *a), f(X, *a))


@ON_DEVICES
@pytest.mark.parametrize("t", [int32, uint32, uint64, boolean], ids=str)
def test_slice_bounds_of_other_integer_types(t):
    fn = native(slice_full, (A1, t, t, int64))
    unsigned = [2**32 - 1] + ([2**64 - 1, 2**63] if t.bits == 64 else [])  # above int64: saturated, not wrapped
    values = [0, 1] if t is boolean else [0, 1, 3, 9, 10, 11, 2**31 - 1] + ([-1, -5, -2**31] if t.signed else unsigned)
    cast = (lambda v: bool(v)) if t is boolean else np.dtype(t.name).type
    for lo, hi, step in itertools.product(values, values, [1, -1, 2, -3]):
        want = fold(X[int(lo):int(hi):step])
        assert_same(fn(X, cast(lo), cast(hi), step), want)


@gpuc.func
def literal_slices(a):
    return (fold(a[2:]) + fold(a[:-3]) + fold(a[::-1]) + fold(a[-2:1:-2]) + fold(a[100:]) + fold(a[-100:3])
            + fold(a[None:4]) + fold(a[1:18446744073709551615]) + fold(a[::2][::-1][1:]))


@gpuc.func
def views_2d(m, i, j):
    s = fold(m[i]) + fold(m[i, :]) + fold(m[:, j]) + fold(m[1:, ::2][0]) + fold(m[::-1, 1][1:])
    s += fold(m[i, ::-2]) + fold(m[..., j]) + fold(m[-1, ...]) + m[1:3, 2:].shape[0] * 10 + m[1:3, 2:].shape[1]
    s += m[::2, ::3].size + m[1:, 1:][0, 0] + m[::-1, ::-1][0, 0] + len(m[2:])
    return s


@gpuc.func
def views_3d(t, i, j):
    u = t[i]
    return (fold(t[i, :, j]) + fold(t[:, j, i]) + fold(u[j]) + fold(t[..., 1:, j][1]) + fold(t[1:, 2, ::-1][0])
            + u.shape[0] * 100 + u.shape[1] + t[i:, j:, :2].size)


@ON_DEVICES
def test_literal_slices_and_views_of_every_rank():
    same(literal_slices, (A1,), X)
    same(literal_slices, (A1,), X[::-2].copy())
    for i, j in ((0, 0), (2, 3), (-1, -2), (3, 4)):
        same(views_2d, (A2, int64, int64), M, i, j)
    for i, j in ((0, 0), (2, 3), (-1, -2)):
        same(views_3d, (A3, int64, int64), T, i, j)


@ON_DEVICES
def test_views_of_strided_and_contiguous_arguments():
    # the launcher's "C" layout and a strided argument give the same views
    fn_c, fn_a = native(views_2d, (Array[float64, 2, "C"], int64, int64)), native(views_2d, (A2, int64, int64))
    strided = np.arange(80.0).reshape(8, 10)[::2, ::-2]
    assert_same(fn_a(strided, 1, 2), views_2d(strided, 1, 2))
    assert_same(fn_c(M, 1, 2), views_2d(M, 1, 2))


@gpuc.func
def tail(v, k):
    return v[k:]


@gpuc.func
def rows_and_returns(m):
    s = 0.0
    for r in m:
        s = s * 2 + fold(tail(r[::-1], 1))
    for r in m[1:, ::2]:
        for v in r:
            s += v
    return s + fold(tail(tail(m[:, 0], 1), 1))


@ON_DEVICES
def test_views_pass_to_funcs_return_and_iterate():
    same(rows_and_returns, (A2,), M)
    same(rows_and_returns, (A2,), np.zeros((0, 3)))


@gpuc.func
def copy_rows(out, a, i):
    out[i, :] = a[i, :]
    out[i, 1:] = 2.0
    out[0] = a[-1]
    out[1:3, ::2] = a[:2, ::2]
    out[-1, :] = 7


@gpuc.func
def copy_1d(out, x, lo, hi):
    out[lo:hi] = x[lo:hi]
    out[::-3] = -1


@gpuc.func
def copy_broadcast(out, row, col):
    out[:, :] = row
    out[1:, :2] = col[:1]
    out[0, ...] = row[::-1]


@gpuc.func
def copy_converts(out, x):
    out[:] = x        # float into int: NumPy casts (truncating)
    out[::2] = True


@ON_DEVICES
def test_copies_into_views():
    same(copy_rows, (A2, A2, int64), np.zeros((4, 5)), M, 2)
    same(copy_rows, (A2, A2, int64), np.zeros((4, 5)), M, -1)
    for lo, hi in ((0, 10), (2, 7), (-4, -1), (5, 100), (8, 3)):
        same(copy_1d, (A1, A1, int64, int64), np.zeros(10), X, lo, hi)
    same(copy_broadcast, (A2, A1, A1), np.zeros((4, 5)), np.arange(5.0), np.arange(3.0))
    same(copy_converts, (A1i, A1), np.zeros(10, np.int32), X)


@gpuc.func
def mismatched(out, x, n):
    out[:n] = x[:3]
    return out[0]


@ON_DEVICES
def test_a_copy_of_mismatched_shapes_writes_nothing():
    # NumPy raises ValueError before writing anything; gpuc's statement writes nothing (docs/frontend.md)
    fn = native(mismatched, (A1, A1, int64))
    out = np.full(6, 9.0)
    fn(out, X, 5)
    assert out.tolist() == [9.0] * 6
    with pytest.raises(ValueError):
        mismatched(np.full(6, 9.0), X, 5)
    fn(out, X, 3)
    assert out.tolist() == X[:3].tolist() + [9.0] * 3
    fn(out, X[:1], 4)  # length 1 broadcasts
    assert out.tolist() == [X[0]] * 4 + [9.0] * 2


@gpuc.func
def overlapping(a, kind):
    if kind == 0:
        a[1:] = a[:-1]
    elif kind == 1:
        a[:-1] = a[1:]
    elif kind == 2:
        a[:] = a[::-1]
    elif kind == 3:
        a[::2] = a[1::2]
    elif kind == 4:
        a[1::2] = a[::2]
    elif kind == 5:
        a[:5] = a[::2]
    elif kind == 6:
        a[::-1] = a[:]
    elif kind == 7:
        a[2:8] = a[6:0:-1]


@gpuc.func
def overlapping_2d(m, kind):
    if kind == 0:
        m[1:, :] = m[:-1, :]
    elif kind == 1:
        m[:, :] = m[::-1, ::-1]
    elif kind == 2:
        m[:, 1:] = m[:, :-1]
    elif kind == 3:
        m[1:3, :] = m[0]
    elif kind == 4:
        m[:, 0] = m[0, :4]


@ON_DEVICES
def test_overlapping_copies_read_as_if_through_a_temporary():
    for kind in range(8):
        same(overlapping, (A1, int64), X, kind)
    for kind in range(5):
        same(overlapping_2d, (A2, int64), M, kind)
    compiled, compiled_1d = native(overlapping_2d, (A2, int64)), native(overlapping, (A1, int64))
    for kind, view in itertools.product(range(5), [np.s_[::-2, 1::3], np.s_[1:, ::-2], np.s_[::2, ::-1]]):
        got, want = np.arange(60.0).reshape(6, 10), np.arange(60.0).reshape(6, 10)
        compiled(got[view], kind)  # strided arguments, passed as they are (no copy)
        try:
            overlapping_2d(want[view], kind)
        except ValueError:  # shapes that do not match: NumPy raises, gpuc writes nothing
            want = np.arange(60.0).reshape(6, 10)
        assert got.tolist() == want.tolist(), (kind, view)
    for kind in range(8):
        got, want = np.arange(30.0), np.arange(30.0)
        compiled_1d(got[::-3], kind)
        overlapping(want[::-3], kind)
        assert got.tolist() == want.tolist(), kind


@gpuc.func
def overlapping_without_heap(a, kind):
    overlapping(a, kind)


@gpuc.func
def overlapping_2d_without_heap(m, kind):
    overlapping_2d(m, kind)


@ON_DEVICES
def test_shifted_overlapping_copies_need_no_temporary(monkeypatch, no_disk_cache):
    # what GCN and SPIR-V (no allocator) do: a shift of one layout is copied in an order that reads each
    # element before overwriting it, exactly as NumPy's temporary would give
    monkeypatch.setattr(gpuc.NativeTarget, "heap_functions", None)
    for kind in (0, 1, 3, 4):
        same(overlapping_without_heap, (A1, int64), X, kind)
    for kind in (0, 2):
        same(overlapping_2d_without_heap, (A2, int64), M, kind)
    compiled = native(overlapping_2d_without_heap, (A2, int64))
    for kind in (0, 2):  # negative strides: row-major order visits the elements in falling address order
        got, want = np.arange(60.0).reshape(6, 10), np.arange(60.0).reshape(6, 10)
        compiled(got[::-2, ::-3], kind)
        overlapping_2d(want[::-2, ::-3], kind)
        assert got.tolist() == want.tolist()


@gpuc.func
def shape_of_views(a, lo, hi, step):
    v = a[lo:hi:step]
    return v.shape[0] * 1000 + v.size * 10 + v.ndim + len(v)


@ON_DEVICES
def test_shape_and_size_of_views():
    fn = native(shape_of_views, (A2, int64, int64, int64))
    for lo, hi, step in itertools.product([-5, 0, 1, 3], [-1, 2, 4, 9], [-2, -1, 1, 3]):
        assert fn(M, lo, hi, step) == shape_of_views(M, lo, hi, step)


@ON_DEVICES
def test_views_in_kernels_atomics_and_local_arrays():
    @gpuc.kernel
    def k(a, out, hist):
        i = gpuc.index()
        tmp = gpuc.local.array(8, gpuc.float64)
        tmp[2:6] = a[i, :]
        tmp[::-1][0] = 1.5
        out[i] = tmp.sum() + tmp[2:].max() + tmp[1:4].min()
        gpuc.atomic_add(hist[1:], i % 2, tmp[2:6].mean())

    a = np.arange(20.0).reshape(5, 4)
    out, hist = np.zeros(5), np.zeros(3)
    k[5](a, out, hist)
    want_out, want_hist = np.zeros(5), np.zeros(3)
    for i in range(5):
        tmp = np.zeros(8)
        tmp[2:6] = a[i, :]
        tmp[::-1][0] = 1.5
        want_out[i] = tmp.sum() + tmp[2:].max() + tmp[1:4].min()
        want_hist[1:][i % 2] += tmp[2:6].mean()
    np.testing.assert_allclose(out, want_out, rtol=1e-13)
    np.testing.assert_allclose(hist, want_hist, rtol=1e-13)


@ON_DEVICES
def test_views_compile_for_every_target(ptxas, spirv_val):
    @gpuc.kernel
    def k(a, out, x, c):
        i = gpuc.index()
        out[i, :] = a[i, ::-1]
        out[i, 1:] = 2.0
        x[1:] = x[:-1]
        out[i, 0] = a[:, 1:].sum() + a[i].max() + len(a[i, 2:])
        for r in a[1:]:
            out[i, 1] += r[0]
        gpuc.atomic_add(c[::2], 1, 1)

    types = (A2, A2, A1, Array[int64, 1])
    for target, kind in ((gpuc.PTXTarget(), "asm"), (gpuc.GCNTarget(), "asm"), (gpuc.SPIRVTarget(), "obj")):
        output = gpuc.compile(gpuc.CompilerJob((k, types), gpuc.CompilerConfig(target)), kind).output
        assert len(output) > 0
        if target.name == "ptx":
            ptxas(output)  # the overlapping copy calls the device heap's malloc/free
        elif target.name == "spirv":
            spirv_val(output)
    a = np.arange(12.0).reshape(3, 4)
    out, x, c = np.zeros((3, 4)), np.arange(6.0), np.zeros(4, np.int64)
    k[3](a, out, x, c)
    assert out[:, 2:].tolist() == [[2.0, 2.0]] * 3 and c.tolist() == [0, 0, 3, 0]


@ON_DEVICES
@pytest.mark.not_on("opencl", "the adjoint keeps loop values on a tape in memory allocated at run time, and SPIR-V has no allocator "
                              "(a located error there)")
def test_reverse_mode_through_views():
    # the shadow of a view is the same view of the shadow array
    @gpuc.kernel
    def k(x, y):
        i = gpuc.index()
        r = x[i, 1:]
        y[i] = r[0] * r[1] + x[i, ::-1][0] * 3.0 + r.sum()

    x = np.arange(1.0, 13.0).reshape(3, 4)
    dx, y, dy = np.zeros_like(x), np.zeros(3), np.ones(3)
    gpuc.adjoint(k)[3](x, dx, y, dy)
    want = np.zeros_like(x)
    for i in range(3):
        want[i, 1] += x[i, 2] + 1
        want[i, 2] += x[i, 1] + 1
        want[i, 3] += 3.0 + 1
    np.testing.assert_allclose(dx, want)


# Reverse mode through copies into views: tests/frontend/test_view_copies_reverse.py; copies on targets
# without an allocator: tests/frontend/test_view_copies_targets.py.


# -- errors -----------------------------------------------------------------------------------------

@gpuc.func
def augmented_view(a):
    a[1:] += 1.5


@gpuc.func
def zero_step(a):
    return fold(a[::0])


@gpuc.func
def float_bound(a):
    return fold(a[1.5:])


@gpuc.func
def too_many(a):
    return fold(a[1, :])


@gpuc.func
def wider_source(a, m):
    a[:] = m


@gpuc.func
def local_view():
    t = gpuc.local.array(4, gpuc.float64)
    return t[1:]


@pytest.mark.parametrize("fn, argtypes, message, fragment", [
    (augmented_view, (Array[int64, 1],), "NumPy does not cast back to int64 in place", "a[1:] +="),
    (zero_step, (A1,), "slice step cannot be zero", "a[::|0]"),
    (float_bound, (A1,), "slice bound must be an integer, not float64", "a[|1.5:]"),
    (too_many, (A1,), "too many indices for a 1-dimensional array", "fold(|a[1, :])"),
    (wider_source, (A1, A2), "cannot copy a 2-D array into a 1-D view", "a[:] ="),
    (local_view, (), "cannot return gpuc.local arrays", "return t[1:]"),
], ids=lambda v: getattr(v, "__name__", None))
def test_view_errors_are_located(fn, argtypes, message, fragment):
    check(fn, argtypes, message, fragment)


@gpuc.func
def weighted(x, w):
    return x * x * w[1:].sum() + w[::-1][0] * x + fold(w[::2]) * x


@ON_DEVICES
def test_forward_derivative_through_views():
    @gpuc.kernel
    def k(w, out):
        out[0] = gpuc.derivative(weighted, 1.5, w)

    w = np.array([0.5, 2.0, -1.0, 4.0])
    out = np.zeros(1)
    k[1](w, out)
    s = 0.0
    for v in w[::2]:
        s = s * 1.5 + v
    assert out[0] == pytest.approx(2 * 1.5 * w[1:].sum() + w[-1] + s + 2 * 1000)


@gpuc.func
def zero_step_views(a, m, lo, step):
    v = a[lo::step]
    w = m[::step, 1:]
    return len(v) * 1000 + v.sum() + w.size * 10 + len(m[1, ::step])


@ON_DEVICES
def test_a_run_time_step_of_zero_makes_an_empty_view():
    # The docs: a step that is 0 at run time gives an empty view (Python raises ValueError); the length
    # must not be computed by dividing by the step (a division by zero traps on the CPU).
    fn = native(zero_step_views, (A1, A2, int64, int64))
    for lo in (-3, 0, 4, 20):
        assert fn(X, M, lo, 0) == 0.0
        for step in (-2, 1, 3):
            assert fn(X, M, lo, step) == zero_step_views(X, M, lo, step)
