"""The autodiff plugin through gpuc.derivative: a table of functions against analytic derivatives
(float64 and float32), orders 1-4 nested, every case compiled for PTX, GCN and SPIR-V, kernels."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from autodiff_table import NESTED, TABLE, derivative_of, x_sin_x

import gpuc
from gpuc import Array, float32, float64, int64

IDS = [row[0] for row in TABLE]


def close(got: float, want: float, rel: float) -> bool:
    return abs(got - want) <= rel * max(abs(want), 1e-3)


def arg_types(consts, ftype=float64):
    return (ftype, *(int64 if isinstance(c, int) else float64 for c in consts))


@pytest.mark.parametrize("name, f, df, xs, consts", TABLE, ids=IDS)
def test_float64_matches_analytic(name, f, df, xs, consts):
    for x in xs:
        got = gpuc.derivative(f, x, *consts)
        assert close(got, df(x, *consts), 1e-12), (name, x, got, df(x, *consts))


@pytest.mark.parametrize("name, f, df, xs, consts", TABLE, ids=IDS)
def test_float32_matches_analytic(name, f, df, xs, consts):
    for x in xs:
        x32 = float(np.float32(x))
        got = gpuc.derivative(f, float32(x32), *consts)
        assert close(got, df(x32, *consts), 1e-5), (name, x32, got, df(x32, *consts))


def test_the_table_is_large_enough():
    assert len(TABLE) >= 40


@pytest.mark.parametrize("name, f, consts, dn, xs", NESTED, ids=[row[0] for row in NESTED])
def test_nested_orders_one_to_four(name, f, consts, dn, xs):
    current = f
    for order in range(1, 5):
        for x in xs:
            got = gpuc.derivative(current, x, *consts)
            assert close(got, dn(order, x, *consts), 1e-12), (name, order, x, got)
        current = derivative_of(current, len(consts))


@pytest.mark.parametrize("name, f, df, xs, consts", TABLE, ids=IDS)
def test_ptx(name, f, df, xs, consts, ptxas):
    d = derivative_of(f, len(consts))
    for ftype in (float64, float32):
        ptxas(gpuc.code_native(d, arg_types(consts, ftype), target=gpuc.PTXTarget()))


@pytest.mark.parametrize("name, f, df, xs, consts", TABLE, ids=IDS)
def test_spirv(name, f, df, xs, consts, spirv_val):
    d = derivative_of(f, len(consts))
    for ftype in (float64, float32):
        job = gpuc.CompilerJob((d, arg_types(consts, ftype)), gpuc.CompilerConfig(gpuc.SPIRVTarget()))
        spirv_val(gpuc.compile(job, "obj").output)


@pytest.mark.parametrize("name, f, df, xs, consts", TABLE, ids=IDS)
def test_gcn(name, f, df, xs, consts):
    # GCN has no device math library for float64 transcendentals: where the function itself does not
    # compile, its derivative is the same located error; everywhere else it compiles.
    d = derivative_of(f, len(consts))
    for ftype in (float64, float32):
        types = arg_types(consts, ftype)
        try:
            gpuc.code_native(f, types, target=gpuc.GCNTarget())
        except gpuc.CompilationError as exc:
            with pytest.raises(gpuc.CompilationError, match=str(exc).splitlines()[0].split(": ", 1)[1][:40]):
                gpuc.code_native(d, types, target=gpuc.GCNTarget())
            continue
        assert ".text" in gpuc.code_native(d, types, target=gpuc.GCNTarget())


@gpuc.kernel
def slopes(xs, out):
    i = gpuc.index()
    out[i] = gpuc.derivative(x_sin_x, xs[i])


@pytest.mark.devices("cpu", "opencl")
def test_kernel_over_an_array_matches_elementwise():
    xs = np.linspace(-3.0, 3.0, 1001)
    out = np.zeros_like(xs)
    slopes[xs.size](xs, out)
    np.testing.assert_allclose(out, np.sin(xs) + xs * np.cos(xs), rtol=1e-12, atol=1e-14)


def test_optimized_ir_has_no_marker_calls():
    text = gpuc.code_llvm(slopes, (Array[float64, 1], Array[float64, 1]))
    assert "gpuc.autodiff" not in text and "gpuc.lookup" not in text
    # the derivative's code is there, inlined (cos through libmvec on an x86-64 Linux host, docs/targets.md)
    assert "@llvm.cos.f64" in text or re.search(r"@_ZGV[bde]N\d+v_cos\(", text)


@gpuc.kernel
def five_places(xs, out):
    i = gpuc.index()
    x = xs[i]
    out[i] = (gpuc.derivative(x_sin_x, x) + gpuc.derivative(x_sin_x, x + 1.0) + gpuc.derivative(x_sin_x, 2.0 * x)
              + gpuc.derivative(x_sin_x, x * x) + gpuc.derivative(x_sin_x, 0.5))


@pytest.mark.devices("cpu", "opencl")
def test_five_requests_build_one_tangent():
    job = gpuc.CompilerJob((five_places, (Array[float64, 1], Array[float64, 1])),
                           gpuc.CompilerConfig(gpuc.NativeTarget()))
    # the autodiff plugin's records (the vectorizer records its own work on the launch loop too)
    records = [r for r in gpuc.compile(job).trace.transformations if r.requested_by != "gpuc.cpu.vectorize"]
    # (on the CPU the kernel is also inlined into its launcher: five requests in each, one tangent)
    assert len(records) in (5, 10) and len({r.symbol for r in records}) == 1
    assert [r.reused for r in records] == [False] + [True] * (len(records) - 1)
    xs = np.linspace(0.1, 1.0, 10)
    out = np.zeros_like(xs)
    five_places[xs.size](xs, out)
    d = lambda x: np.sin(x) + x * np.cos(x)  # noqa: E731
    np.testing.assert_allclose(out, d(xs) + d(xs + 1) + d(2 * xs) + d(xs * xs) + d(0.5), rtol=1e-12)


@gpuc.func
def stores_into(x, out):
    out[0] = x * x  # a float stored through an argument: not differentiable
    return x * 3.0


@gpuc.func
def d_stores_into(x, out):
    return gpuc.derivative(stores_into, x, out)


def test_what_cannot_be_differentiated_is_located():
    with pytest.raises(gpuc.CompilationError) as info:
        gpuc.code_llvm(d_stores_into, (float64, Array[float64, 1]))
    assert not isinstance(info.value, gpuc.PluginError)
    assert "cannot differentiate" in str(info.value) and "store" in str(info.value)


def test_compile_time_stays_linear_in_the_order():
    # Order n's function is its own size plus order n-1's optimized code, not 2^n.
    sizes, current = [], x_sin_x
    for _ in range(4):
        current = derivative_of(current)
        text = gpuc.code_llvm(current, (float64,))
        sizes.append(sum(1 for line in text.splitlines() if line.startswith("  ") and "=" in line))
    assert sizes[3] <= 4 * sizes[0] + 8, sizes
    assert math.isfinite(gpuc.derivative(current, 0.3))
