"""np.sum(a), np.prod(a), np.max(a) / np.amax(a), np.min(a) / np.amin(a) and np.mean(a) in gpuc functions
against NumPy: the same values (bit for bit) and types as NumPy's and as the array methods; axis= and
other arguments are located errors."""

from __future__ import annotations

import numpy as np
import pytest

import gpuc
from gpuc import Array, boolean, float16, float32, float64, int8, int32, int64, uint32, uint64

from gpuc.frontend.passes.inference import Typing

from support.located_errors import check

FUNCTIONS = {"sum": np.sum, "prod": np.prod, "max": np.max, "amax": np.amax, "min": np.min, "amin": np.amin,
             "mean": np.mean}
# The tests that launch kernels run natively and through OpenCL.
ON_DEVICES = pytest.mark.devices("cpu", "opencl")


@gpuc.kernel
def functions(a, out):
    out[0] = np.sum(a)
    out[1] = np.prod(a)
    out[2] = np.max(a)
    out[3] = np.amax(a)
    out[4] = np.min(a)
    out[5] = np.amin(a)
    out[6] = np.mean(a)


@gpuc.kernel
def methods(a, out):
    out[0] = a.sum()
    out[1] = a.prod()
    out[2] = a.max()
    out[3] = a.max()
    out[4] = a.min()
    out[5] = a.min()
    out[6] = a.mean()


def _same(got, want) -> bool:
    got, want = np.asarray(got), np.asarray(want)
    return got.tobytes() == want.tobytes() or bool(np.isnan(got) and np.isnan(want))


def _data(dtype, shape, rng):
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if np.dtype(dtype).kind == "f":
        return (1 + rng.standard_normal(shape) / 16).astype(dtype)
    return rng.integers(0, 5, shape).astype(dtype)


@ON_DEVICES
@pytest.mark.parametrize("t", [boolean, int8, int32, int64, uint32, uint64, float16, float32, float64], ids=str)
@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_functions_are_numpys_and_the_methods(t, ndim):
    rng = np.random.default_rng(ndim)
    shape = {1: (300,), 2: (17, 23), 3: (5, 6, 7)}[ndim]
    out_dtype = "float64" if not t.is_float else t.name  # holds every result exactly
    for seed in range(2):
        a = _data(t.name, shape, rng)
        for v in (a, a[::-1], a[..., 1::2], a.T):
            got, by_method = np.zeros(7, out_dtype), np.zeros(7, out_dtype)
            functions[1](v, got)
            methods[1](v, by_method)
            for k, (name, f) in enumerate(FUNCTIONS.items()):
                want = f(v)
                assert _same(got[k], np.asarray(want).astype(out_dtype)), (name, v.dtype, v.shape, got[k], want)
            assert _same(got, by_method)


@gpuc.func
def np_sum(a):
    return np.sum(a)


@gpuc.func
def np_prod(a):
    return np.prod(a)


@gpuc.func
def np_amax(a):
    return np.amax(a)


@gpuc.func
def np_min(a):
    return np.min(a)


@gpuc.func
def np_mean(a):
    return np.mean(a)


@pytest.mark.parametrize("fn, f", [(np_sum, np.sum), (np_prod, np.prod), (np_amax, np.amax), (np_min, np.min),
                                   (np_mean, np.mean)], ids=lambda x: getattr(x, "__name__", ""))
@pytest.mark.parametrize("t", [boolean, int8, int32, uint64, float16, float32, float64], ids=str)
def test_result_types_are_numpys(fn, f, t):
    typed = Typing(gpuc.NativeTarget()).function(fn, (Array[t, 2],))
    assert typed.return_type.name == f(np.ones((2, 2), t.name)).dtype.name


@ON_DEVICES
def test_functions_of_views_and_rows_in_kernels():
    @gpuc.kernel
    def rows(m, out):
        i = gpuc.index()
        out[i] = np.sum(m[i, :]) + np.max(m[i, ::2]) - np.mean(m[:, i])

    m = _data("float32", (6, 6), np.random.default_rng(7))
    out = np.zeros(6, np.float32)
    rows[6](m, out)
    want = [np.float32(np.sum(m[i, :]) + np.max(m[i, ::2])) - np.mean(m[:, i]) for i in range(6)]
    assert _same(out, np.array(want, np.float32))


@gpuc.func
def sum_axis(a):
    return np.sum(a, axis=0)


@gpuc.func
def mean_positional_axis(a):
    return np.mean(a, 1)


@gpuc.func
def max_keepdims(a):
    return np.amax(a, keepdims=True)


@gpuc.func
def prod_of_number(x):
    return np.prod(x)


@gpuc.func
def min_of_nothing(a):
    return np.min()


@gpuc.func
def cumsum(a):
    return np.cumsum(a)


def test_other_arguments_are_located_errors():
    check(sum_axis, (Array[float64, 2],), "np.sum() takes no keyword arguments", "np.sum(a, axis=|0)",
          hint="a[i, :].sum()")
    check(mean_positional_axis, (Array[float64, 2],), "np.mean() takes one array", "np.mean(a, |1)",
          hint="np.mean(a[i, :])")
    check(max_keepdims, (Array[float64, 2],), "keepdims= is not supported", "keepdims=|True")
    check(prod_of_number, (float64,), "np.prod() takes an array", "np.prod(|x)")
    check(min_of_nothing, (Array[float64, 1],), "np.min() takes one array", "return |np.min()")
    check(cumsum, (Array[float64, 1],), "numpy.cumsum is not supported", "return |np.cumsum")
