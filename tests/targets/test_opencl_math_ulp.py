"""Math through OpenCL: every math function of the language (docs/frontend.md, `math`), in float32 and float64,
computed on the OpenCL device (the OpenCL extended instruction set of gpuc's SPIR-V) against the CPU's libm (the
same kernel compiled by NativeTarget(vector_math=False), as tests/targets/test_vector_math.py measures libmvec),
within the bounds docs/targets.md ("OpenCL runtime") gives.

Arguments, a few thousand per function: random values over every binade of both signs (subnormals included),
uniform values in [-10, 10] and [-1, 1], the function's edge regions (overflow and underflow thresholds, poles,
the ends of its domain, arguments where its result is near zero) and the special values; functions of two or
three arguments also get every pair of special values."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

import gpuc
from gpuc.runtime import cpu, opencl
from gpuc.runtime.dispatch import KernelSignature, signature_spec, typeof

from support.ulp import same_specials, samples, specials, ulp_distance

pytestmark = pytest.mark.skipif(not opencl.available() and os.environ.get("CI", "").lower() not in ("1", "true"),
                                reason=str(opencl.unavailable_reason()))

LIBM = gpuc.NativeTarget(vector_math=False)

#: The bound in ulp on the distance from the CPU's libm (docs/targets.md, "OpenCL runtime").
ULP_BOUND = {"float32": 4, "float64": 4}
#: Wider bounds: near gamma's poles libm's tgamma is 5 ulp from the device's (whose float32 result there is
#: libm's float64 result rounded, and whose float64 result is CPython's math.gamma's).
WIDER = {"gamma": 8}
#: Functions whose results are exact (correctly rounded, or exact by definition) on every target: 0 ulp.
EXACT = {"sqrt", "fabs", "copysign", "fmod", "fma", "radians", "degrees"}
#: Functions with integer or bool results: equal.
EQUAL = {"floor", "ceil", "trunc", "isnan", "isinf", "isfinite"}


def _unary(fn):
    @gpuc.kernel
    def k(a, out):
        i = gpuc.index()
        out[i] = fn(a[i])
    return k


def _binary(fn):
    @gpuc.kernel
    def k(a, b, out):
        i = gpuc.index()
        out[i] = fn(a[i], b[i])
    return k


@gpuc.kernel
def fma_kernel(a, b, c, out):
    i = gpuc.index()
    out[i] = gpuc.fma(a[i], b[i], c[i])


BINARY = ("pow", "atan2", "hypot", "copysign", "fmod")
UNARY = ("sqrt", "cbrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin", "acos",
         "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "radians", "degrees", "erf", "erfc", "gamma",
         "lgamma", "fabs", "floor", "ceil", "trunc", "isnan", "isinf", "isfinite")
KERNELS = {name: _unary(getattr(math, name)) for name in UNARY} | {name: _binary(getattr(math, name)) for name in BINARY}
KERNELS["fma"] = fma_kernel
ARITY = {name: 2 for name in BINARY} | {"fma": 3}


def test_every_math_function_is_measured():
    from gpuc.frontend.numeric.mathlib import MATH

    assert set(KERNELS) == set(MATH)


def _edges(name: str, dtype) -> list:
    """(low, high) intervals where `name` has an edge in `dtype`: overflow and underflow, poles, domain ends."""
    single = dtype == np.float32
    overflow = (80.0, 89.0) if single else (700.0, 710.0)  # exp, sinh, cosh, expm1 overflow
    underflow = (-104.0, -87.0) if single else (-746.0, -708.0)
    tiny = (-1e-6, 1e-6)
    near_one, below_one = (1.0 - 1e-3, 1.0 + 1e-3), (0.999, 1.0)
    poles = [(-k - 1e-3, -k + 1e-3) for k in range(0, 40, 3)]
    table = {
        "exp": [overflow, underflow, tiny], "expm1": [overflow, underflow, tiny],
        "exp2": [(120.0, 129.0), (-151.0, -125.0)] if single else [(1015.0, 1025.0), (-1076.0, -1020.0)],
        "sinh": [overflow, (-89.0, -80.0) if single else (-710.0, -700.0), tiny], "cosh": [overflow, tiny],
        "tanh": [(-10.0, -7.0), (7.0, 10.0), tiny],
        "log": [near_one, (0.0, 1e-3)], "log2": [near_one, (0.0, 1e-3)], "log10": [near_one, (0.0, 1e-3)],
        "log1p": [(-1.0, -0.999), tiny], "asin": [below_one, (-1.0, -0.999)], "acos": [below_one, (-1.0, -0.999)],
        "atanh": [below_one, (-1.0, -0.999)], "acosh": [(1.0, 1.001)], "asinh": [tiny, (1e3, 1e6)],
        "sin": [(3.1, 3.2), (1e4, 1e6)], "cos": [(1.5, 1.6), (1e4, 1e6)], "tan": [(1.5, 1.6), (1e4, 1e6)],
        "erf": [(-6.0, 6.0)], "erfc": [(-6.0, 11.0) if single else (-6.0, 27.5)],
        "gamma": poles + [(0.0, 1e-3), (33.0, 36.0) if single else (169.0, 172.0)],
        "lgamma": poles + [(0.99, 1.01), (1.99, 2.01), (1e30, 1e32)],
        "pow": [(0.999, 1.001), (1.0, 2.0)], "hypot": [(1e18, 1e20), (1e-20, 1e-18)], "atan2": [tiny],
        "cbrt": [tiny],
    }
    return table.get(name, [])


def arguments(name: str, dtype) -> tuple:
    """The arguments of `name` in `dtype` (see the module doc)."""
    x = samples(dtype, 1500, seed=len(name))
    rng = np.random.default_rng(7 + len(name))
    edges = [rng.uniform(low, high, 400) for low, high in _edges(name, dtype)]
    x = np.concatenate([x, *edges]).astype(dtype)
    arity = ARITY.get(name, 1)
    if arity == 1:
        return (x,)
    if name == "pow":  # bases near 1 with large exponents, and integral exponents of negative bases
        rest = [np.concatenate([rng.permutation(x)[:-600], rng.uniform(-300.0, 300.0, 300),
                                np.round(rng.uniform(-40.0, 40.0, 300))]).astype(dtype)]
    else:
        rest = [rng.permutation(x) for _ in range(arity - 1)]
    s = specials(dtype)
    grid = np.meshgrid(*([s] * arity), indexing="ij")  # every pair (triple) of special values
    return tuple(np.concatenate([a, g.ravel().astype(dtype)]) for a, g in zip([x, *rest], grid))


def on_cpu(kernel, args, out):
    """The kernel compiled by NativeTarget(vector_math=False): libm's scalar functions, one thread."""
    args = (*args, out)
    types = tuple(typeof(a, i) for i, a in enumerate(args))
    job = gpuc.CompilerJob((kernel, types), gpuc.CompilerConfig(LIBM, kernel=True))
    cpu.JITModule(job, signature=KernelSignature(signature_spec(types))).launcher()(out.size, args, threads=1)
    return out


def measure(name: str, dtype) -> tuple:
    """(arguments, the OpenCL device's results, libm's results)."""
    args = arguments(name, dtype)
    kind = np.bool_ if name.startswith("is") else np.int64 if name in ("floor", "ceil", "trunc") else dtype
    with np.errstate(all="ignore"):
        want = on_cpu(KERNELS[name], args, np.empty(args[0].size, kind))
        got = np.empty_like(want)
        KERNELS[name].launch(got.size, *args, got, device="opencl")
    return args, got, want


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_opencl_math_against_libm(name, dtype):
    if dtype == np.float64 and not opencl.device_info().fp64:
        pytest.skip(f"{opencl.device_info().name} has no float64 (cl_khr_fp64)")
    args, got, want = measure(name, dtype)
    if name in EQUAL:
        bad = np.flatnonzero(got != want)
        assert not bad.size, f"{name}{tuple(a[bad[0]] for a in args)}: OpenCL {got[bad[0]]!r}, libm {want[bad[0]]!r}"
        return
    distance = ulp_distance(got, want)
    worst = int(np.argmax(distance))
    bound = 0 if name in EXACT else WIDER.get(name, ULP_BOUND[np.dtype(dtype).name])
    assert distance[worst] <= bound, (
        f"{name}{tuple(a[worst] for a in args)}: OpenCL {got[worst]!r}, libm {want[worst]!r} "
        f"({distance[worst]} ulp; bound {bound})")
    # exactly libm's where the result is special: NaN, infinities, zeros of the same sign
    same = same_specials(got, want)
    first = int(np.argmin(same))
    assert same.all(), f"{name}{tuple(a[first] for a in args)}: OpenCL {got[first]!r}, libm {want[first]!r}"


@gpuc.kernel
def fmod_kernel(x, y, out):
    i = gpuc.index()
    out[i] = np.fmod(x[i], y[i])


def test_fmod_of_a_multiple_of_a_subnormal_is_zero():
    # Intel's runtime gave y for fmod(k * y, y) with a float32 subnormal y on hosts with AVX-512 (a quarter
    # of such pairs); SPIR-V takes a result as large as |y| back by |y| (gpuc/targets/spirv.py)
    rng = np.random.default_rng(11)
    y = rng.integers(1, 2**23, 20000).astype(np.uint32).view(np.float32) * rng.choice([-1, 1], 20000).astype(np.float32)
    x = (y * rng.integers(1, 40, 20000).astype(np.float32)).astype(np.float32)
    x[:100] = y[:100]
    for a, b in ((x, y), (-x, y), (y * np.float32(2.5), y), (x.astype(np.float64), y.astype(np.float64))):
        out = np.zeros(a.size, a.dtype)
        fmod_kernel[a.size](a, b, out, device="opencl")
        np.testing.assert_array_equal(out, np.fmod(a, b), strict=True)
