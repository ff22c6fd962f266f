"""Float sums, means and products of arrays and views against NumPy 2, bit for bit: NumPy's pairwise
summation in the order its iterator walks the array (gpuc/frontend/arrays/pairwise.py), float16 rounded after
each chunk, the float64 mean of integers. A small model of that order is checked against NumPy too."""

from __future__ import annotations

import numpy as np
import pytest

import gpuc
from gpuc import Array
from gpuc.runtime.dispatch import default_device

FLOATS = ["float16", "float32", "float64"]
# The tests that launch kernels run natively and through OpenCL.
ON_DEVICES = pytest.mark.devices("cpu", "opencl")


@gpuc.kernel
def reduce_all(a, out):
    out[0] = a.sum()
    out[1] = a.mean()
    out[2] = a.prod()


@gpuc.kernel
def mean_of(a, out):
    out[0] = a.mean()


def _same(got, want) -> bool:
    """The same bits, or both NaN (whose sign and payload NumPy does not promise)."""
    got, want = np.asarray(got), np.asarray(want)
    return got.tobytes() == want.tobytes() or bool(np.isnan(got) and np.isnan(want))


def _run(a):
    """(sum, mean, prod) of `a` computed by gpuc, in a's dtype."""
    out = np.zeros(3, a.dtype)
    reduce_all[1](a, out)
    return out


def as_passed(v):
    """The array a kernel gets for the argument `v`, whose strides decide NumPy's order: `v` itself, except that
    an OpenCL launch copies a reversed view (or one of wide gaps) C-contiguous (docs/targets.md, OpenCL runtime)."""
    if default_device.get() == "opencl":
        from gpuc.runtime.opencl import _host_view
        if _host_view(v).strides != tuple(s // v.itemsize for s in v.strides):
            return np.ascontiguousarray(v)
    return v


def _check(v):
    got = _run(v)
    with np.errstate(all="ignore"):
        for k, name in enumerate(("sum", "mean", "prod")):
            want = getattr(as_passed(v), name)()
            assert want.dtype == v.dtype
            assert _same(got[k], want), (name, v.dtype, v.shape, v.strides, got[k], want)


def _data(dtype, shape, rng, near_one=False):
    if near_one:  # products that neither overflow nor vanish
        return (1 + rng.standard_normal(shape) / 64).astype(dtype)
    return (rng.standard_normal(shape) * 10.0 ** rng.uniform(-2, 2, shape)).astype(dtype)


@ON_DEVICES
@pytest.mark.filterwarnings("ignore:invalid value encountered", "ignore:Mean of empty slice")
@pytest.mark.parametrize("dtype", FLOATS)
def test_every_length_up_to_300(dtype):
    rng = np.random.default_rng(1)
    for n in range(301):
        a = _data(dtype, n, rng, near_one=n % 2 == 1)
        for v in (a, a[::-1], a[1::3], a[::-2]):
            _check(v)


@ON_DEVICES
@pytest.mark.parametrize("dtype", FLOATS)
def test_large_arrays(dtype):
    rng = np.random.default_rng(2)
    for n in (8191, 8192, 8193, 100_000, 123_457):
        a = _data(dtype, n, rng, near_one=True)
        for v in (a, a[::-1], a[5::7]):
            _check(v)


def _views(a, rng):
    nd = a.ndim
    yield a
    yield a[tuple(slice(None, None, int(rng.choice([1, 2, -1, -2, 3]))) for _ in range(nd))]
    yield a[(1,) + (slice(None),) * (nd - 1)] if a.shape[0] > 1 and nd > 1 else a[1:]
    yield a[..., 0] if nd > 1 else a[:1]
    yield a[(slice(1, -1),) * nd]
    yield a.transpose(rng.permutation(nd))
    yield a.transpose(rng.permutation(nd))[(slice(None, None, -1),) * nd]


@ON_DEVICES
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("ndim", [2, 3])
def test_views_of_2d_and_3d_arrays(dtype, ndim):
    rng = np.random.default_rng(3 + ndim)
    for trial in range(40):
        high = 40 if ndim == 2 else 14
        shape = tuple(int(x) for x in rng.integers(1, high, ndim))
        a = _data(dtype, shape, rng, near_one=trial % 2 == 0)
        for v in _views(a, rng):
            _check(v)


@ON_DEVICES
@pytest.mark.parametrize("dtype", FLOATS)
def test_views_where_numpy_buffers_in_chunks(dtype):
    # over 8192 elements in axes that do not coalesce, NumPy sums buffers of up to 8192 elements
    rng = np.random.default_rng(4)
    for shape, index in [((3, 9000), np.s_[:, ::2]), ((5000, 4), np.s_[::-1, :3]), ((4100, 3), np.s_[:, :2]),
                         ((4096, 3), np.s_[:, :2]), ((40, 30, 20), np.s_[::-1, :, ::2]),
                         ((100, 100, 3), np.s_[:, ::2, :]), ((7, 13, 900), np.s_[:, ::2, 1:]),
                         ((3, 9000, 2), np.s_[:, :, :1])]:
        a = _data(dtype, shape, rng, near_one=True)
        _check(a[index])
        _check(a.T[index[::-1]])


@ON_DEVICES
@pytest.mark.filterwarnings("ignore:invalid value encountered", "ignore:Mean of empty slice")
@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int32", "int64", "uint64"])
def test_means_of_integers_are_numpys_float64_pairwise_means(dtype):
    rng = np.random.default_rng(5)
    for shape in [(0,), (7,), (300,), (9000,), (20_000,), (30, 17), (5, 9000), (6, 7, 8)]:
        a = (rng.integers(0, 2, shape) if dtype == "bool" else
             rng.integers(0, min(np.iinfo(dtype).max, 10**12), shape, dtype=dtype, endpoint=True)).astype(dtype)
        for v in (a, a[::-1], a[..., ::3]):
            out = np.zeros(1)
            mean_of[1](v, out)
            with np.errstate(all="ignore"):
                want = as_passed(v).mean()
            assert _same(out[0], want), (v.dtype, v.shape, v.strides, out[0], want)


@ON_DEVICES
@pytest.mark.filterwarnings("ignore:invalid value encountered", "ignore:Mean of empty slice")
def test_signed_zeros_infinities_and_nan():
    for dtype in FLOATS:
        for values in ([-0.0], [-0.0] * 9, [0.0, -0.0], [np.inf, 1], [np.inf, -np.inf], [1, np.nan, 2], []):
            _check(np.array(values, dtype))


def test_reductions_compile_for_every_target():
    for target in (gpuc.PTXTarget(), gpuc.GCNTarget(), gpuc.SPIRVTarget()):
        for dtype in (gpuc.float16, gpuc.float32, gpuc.float64):
            job = gpuc.CompilerJob((reduce_all, (Array[dtype, 2], Array[dtype, 1])), gpuc.CompilerConfig(target))
            assert gpuc.compile(job, "asm" if target.name != "spirv" else "obj").output


# -- a model of NumPy's order, checked against NumPy itself ------------------------------------

def _pairwise(x, dt):
    """NumPy's pairwise_sum (loops_utils.h.src) of the sequence x in the type dt."""
    n = len(x)
    if n < 8:
        res = dt(-0.0)
        for v in x:
            res = dt(res + v)
        return res
    if n <= 128:
        r = list(x[:8])
        i = 8
        while i < n - n % 8:
            r = [dt(r[j] + x[i + j]) for j in range(8)]
            i += 8
        res = dt(dt(dt(r[0] + r[1]) + dt(r[2] + r[3])) + dt(dt(r[4] + r[5]) + dt(r[6] + r[7])))
        return _rest(res, x[i:], dt)
    n2 = n // 2 - (n // 2) % 8
    return dt(_pairwise(x[:n2], dt) + _pairwise(x[n2:], dt))


def _rest(res, xs, dt):
    for v in xs:
        res = dt(res + v)
    return res


def _chunks(shape, strides):
    """The element offsets of each inner-loop call of NumPy 2's full reduction of an array (no cast)."""
    axes = [(n, s if n != 1 else 0) for n, s in zip(reversed(shape), reversed(strides))]
    for i0 in range(1, len(axes)):  # stable insertion sort by |stride|; zero strides compare with nothing
        ipos, s0 = i0, axes[i0][1]
        for i1 in range(i0 - 1, -1, -1):
            s1 = axes[i1][1]
            if s0 and s1:
                if abs(s1) <= abs(s0):
                    break
                ipos = i1
        axes.insert(ipos, axes.pop(i0))
    dims = [axes[0]]
    for n, s in axes[1:]:  # coalescing
        n0, s0 = dims[-1]
        if (n0 == 1 and s0 == 0) or (n == 1 and s == 0) or s0 * n0 == s:
            dims[-1] = (n0 * n, s0 or s)
        else:
            dims.append((n, s))
    cost, size = 1, dims[0][0]
    best = (1, size, 1, 0)  # cost, size, core, dim
    for idim in range(1, len(dims)):
        if size >= 8192 and cost > 1:
            break
        cost, core, size = 2, size, size * dims[idim][0]
        if cost * best[1] <= best[0] * min(size, 8192):
            best = (cost, size, core, idim)
    _, span, core, dim = best
    chunk = core * (8192 // core) if dim and span > 8192 else span

    def offsets(ds):
        offs = [0]
        for n, s in ds:
            offs = [o + k * s for k in range(n) for o in offs]
        return offs
    inner = offsets(dims[:dim + 1])
    return [[base + o for o in inner[i:i + chunk]] for base in offsets(dims[dim + 1:])
            for i in range(0, len(inner), chunk)]


def _model_sum(v):
    dt = v.dtype.type
    flat = {sum(i * s // v.itemsize for i, s in zip(idx, v.strides)): v[idx] for idx in np.ndindex(*v.shape)}
    res = dt(0)
    for chunk in ([] if v.size == 0 else _chunks(v.shape, [s // v.itemsize for s in v.strides])):
        res = dt(res + _pairwise([flat[o] for o in chunk], dt))
    return res


def test_the_model_of_numpys_order_is_numpys():
    rng = np.random.default_rng(6)
    for trial in range(150):
        dtype = ["float32", "float64"][trial % 2]
        nd = int(rng.integers(1, 4))
        shape = tuple(int(x) for x in rng.integers(1, 300 if nd == 1 else (30 if nd == 2 else 12), nd))
        a = _data(dtype, shape, rng)
        for v in _views(a, rng):
            assert _same(_model_sum(v), v.sum()), (v.shape, v.strides)
