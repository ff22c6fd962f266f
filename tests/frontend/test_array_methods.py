"""Array methods `a.sum()`, `a.prod()`, `a.max()`, `a.min()`, `a.mean()` against NumPy: result types,
values (floats within the documented tolerance of NumPy's pairwise sums), NaN, empty arrays, views."""

from __future__ import annotations

import numpy as np
import pytest

import gpuc
from gpuc import Array, boolean, float32, float64, int32, int64, uint32, uint64
from gpuc.frontend.passes.inference import Typing

from support.located_errors import check
from support.native import native

# The tests that launch kernels or run funcs (support.native) run natively and through OpenCL.
ON_DEVICES = pytest.mark.devices("cpu", "opencl")

DTYPES = [boolean, int32, int64, uint32, uint64, float32, float64]


@gpuc.func
def a_sum(a):
    return a.sum()


@gpuc.func
def a_prod(a):
    return a.prod()


@gpuc.func
def a_max(a):
    return a.max()


@gpuc.func
def a_min(a):
    return a.min()


@gpuc.func
def a_mean(a):
    return a.mean()


METHODS = {"sum": a_sum, "prod": a_prod, "max": a_max, "min": a_min, "mean": a_mean}


def _data(t, shape, seed):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(t.name)
    if t is boolean:
        return rng.random(shape) < 0.5
    if dtype.kind == "f":
        return (rng.standard_normal(shape) * 100).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -50), min(info.max, 50), shape, endpoint=True).astype(dtype)


def _close(got, want, v, method):
    """Exact for integers, max and min; floats within n * eps of the sum of magnitudes (docs/frontend.md)."""
    if np.asarray(want).dtype.kind != "f" or method in ("max", "min"):
        assert got == want or np.isnan(want) and np.isnan(got), (got, want)
        return
    eps, n = np.finfo(np.asarray(want).dtype).eps, max(v.size, 1)
    scale = {"sum": np.abs(v.astype(np.float64)).sum(), "mean": np.abs(v.astype(np.float64)).mean(),
             "prod": abs(float(want))}[method]
    assert abs(float(got) - float(want)) <= 2 * n * eps * scale, (got, want)


@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("t", DTYPES, ids=str)
def test_result_types_are_numpys(method, t):
    fn = METHODS[method]
    typed = Typing(gpuc.NativeTarget()).function(fn, (Array[t, 2],))
    want = getattr(np.ones((2, 2), np.dtype(t.name)), method)().dtype
    assert typed.return_type.name == want.name, (method, t, want)


@ON_DEVICES
@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("t", DTYPES, ids=str)
@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_values_are_numpys(method, t, ndim):
    fn = METHODS[method]
    compiled = native(fn, (Array[t, ndim],))
    shape = {1: (37,), 2: (5, 7), 3: (3, 4, 5)}[ndim]
    for seed in range(3):
        a = _data(t, shape, seed)
        if method == "prod" and t.is_float:
            a = (a / 100 + 1).astype(a.dtype)
        views = [a, a[::-1], a[..., ::2]] + ([a[1:, ::-1]] if ndim > 1 else [a[3:-2:3]])
        for v in views:
            want = getattr(v, method)()
            _close(compiled(v), want, v, method)


@ON_DEVICES
@pytest.mark.filterwarnings("ignore:invalid value encountered")
@pytest.mark.parametrize("method", ["max", "min", "sum", "mean", "prod"])
@pytest.mark.parametrize("t", [float32, float64], ids=str)
def test_nan_propagates(method, t):
    compiled = native(METHODS[method], (Array[t, 1],))
    dtype = np.dtype(t.name)
    for where in (0, 3, 6):
        a = np.arange(7, dtype=dtype)
        a[where] = np.nan
        assert np.isnan(compiled(a))
    a = np.array([-np.inf, 1, np.inf], dtype)
    want = getattr(a, method)()
    got = compiled(a)
    assert (np.isnan(got) and np.isnan(want)) or got == want


@ON_DEVICES
@pytest.mark.filterwarnings("ignore:Mean of empty slice", "ignore:invalid value encountered")
@pytest.mark.parametrize("t", DTYPES, ids=str)
def test_empty_arrays(t):
    # NumPy: sum 0, prod 1, mean NaN (with a warning); max/min raise ValueError, gpuc gives the identity
    a = np.zeros(0, np.dtype(t.name))
    assert native(a_sum, (Array[t, 1],))(a) == 0
    assert native(a_prod, (Array[t, 1],))(a) == 1
    assert np.isnan(native(a_mean, (Array[t, 1],))(a))
    with pytest.raises(ValueError):
        a.max()
    big, small = (1, 0) if t is boolean else ((np.inf, -np.inf) if t.is_float else
                                              (np.iinfo(t.name).max, np.iinfo(t.name).min))
    assert native(a_max, (Array[t, 1],))(a) == small
    assert native(a_min, (Array[t, 1],))(a) == big


@ON_DEVICES
def test_integer_sums_wrap_like_numpy():
    a = np.array([2**62, 2**62, 2**62], np.int64)
    assert native(a_sum, (Array[int64, 1],))(a) == a.sum()
    u = np.array([2**32 - 1] * 5, np.uint32)
    assert native(a_sum, (Array[uint32, 1],))(u) == u.sum() == 5 * (2**32 - 1)
    i = np.array([2**31 - 1] * 3, np.int32)
    assert native(a_prod, (Array[int32, 1],))(i) == i.prod()


@ON_DEVICES
def test_float32_sum_is_close_to_numpys_pairwise_sum():
    a = (np.random.default_rng(1).random(100_000) * 1000).astype(np.float32)
    got, want = native(a_sum, (Array[float32, 1],))(a), a.sum()
    exact = a.astype(np.float64).sum()
    assert abs(got - exact) <= abs(want - exact) + np.finfo(np.float32).eps * exact


@ON_DEVICES
def test_methods_in_kernels_on_shared_and_local_arrays():
    @gpuc.kernel
    def k(a, out):
        i = gpuc.index()
        loc = gpuc.local.array((2, 3), gpuc.int32)
        loc[1, :] = i
        loc[0, 1:] = a[i, :2]
        out[i, 0] = loc.sum()
        out[i, 1] = loc.max() + loc[0].min()
        out[i, 2] = a[i].prod() + a.mean()

    a = np.arange(12, dtype=np.int32).reshape(4, 3) - 3
    out = np.zeros((4, 3))
    k[4](a, out)
    for i in range(4):
        loc = np.zeros((2, 3), np.int32)
        loc[1, :] = i
        loc[0, 1:] = a[i, :2]
        assert out[i].tolist() == [loc.sum(), loc.max() + loc[0].min(), a[i].prod() + a.mean()]

    @gpuc.kernel
    def blocks(a, out):
        t = gpuc.thread_index()
        tile = gpuc.shared.array(8, gpuc.float32)
        tile[t] = a[gpuc.index()]
        gpuc.barrier()
        if t == 0:
            out[gpuc.block_index()] = tile.sum() + tile[::2].max()

    a = np.arange(16, dtype=np.float32)
    out = np.zeros(2, np.float32)
    blocks[16](a, out, block=8)
    assert out.tolist() == [a[:8].sum() + a[:8:2].max(), a[8:].sum() + a[8::2].max()]
    for target in (gpuc.PTXTarget(), gpuc.GCNTarget(), gpuc.SPIRVTarget()):
        job = gpuc.CompilerJob((k, (Array[int32, 2], Array[float64, 2])), gpuc.CompilerConfig(target))
        assert gpuc.compile(job, "asm" if target.name != "spirv" else "obj").output


@gpuc.func
def with_axis(a):
    return a.sum(0)


@gpuc.func
def unknown_method(a):
    return a.argmax()


def test_method_errors_are_located():
    check(with_axis, (Array[float64, 2],), "a.sum() takes no arguments", "return |a.sum(0)")
    check(unknown_method, (Array[float64, 2],), "arrays have no attribute 'argmax'", "return |a.argmax")
