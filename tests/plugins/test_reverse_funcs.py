"""Reverse mode on funcs: gpuc.grad, gpuc.value_and_grad and gpuc.vjp against hand-derived gradients,
from Python and inside kernels, nested with forward mode, and the errors where it cannot differentiate."""

from __future__ import annotations

import math

import numpy as np
import pytest
from reverse_cases import CASES, calls_helper, escape, poly, product, transcendental
from support.reverse_kernels import horner, horner_slope

import gpuc


def _close(got, want, rtol):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), (got, want)
        for g, w in zip(got, want):
            _close(g, w, rtol)
        return
    assert got == pytest.approx(want, rel=rtol, abs=rtol * 1e-3), (got, want)


@pytest.mark.parametrize("name, f, args, gradient", CASES, ids=[c[0] for c in CASES])
def test_grad_float64(name, f, args, gradient):
    _close(gpuc.grad(f, *args), tuple(gradient(*args)), 1e-12)


F32_CASES = ["product", "quotient", "poly", "transcendental", "trig", "branch_taken", "early_return_second",
             "horner_runtime_trip_count", "in_place_updates", "recursion", "calls_helper", "select_chain",
             "three_arguments", "data_dependent_while"]


def _f32(value):
    if isinstance(value, tuple):
        return tuple(_f32(v) for v in value)
    return np.float32(value) if isinstance(value, float) else value


@pytest.mark.parametrize("name", F32_CASES)
def test_grad_float32(name):
    (_, f, args, gradient), = [c for c in CASES if c[0] == name]
    args32 = _f32(args)
    got = gpuc.grad(f, *args32)
    want = gradient(*[float(a) if isinstance(a, np.float32) else a for a in args32])
    _close(got, tuple(want), 1e-5)
    assert all(isinstance(g, float) for g in got)


def test_case_count():
    assert len(CASES) >= 30


def test_value_and_grad():
    value, grads = gpuc.value_and_grad(transcendental, 0.4, 0.9)
    assert value == pytest.approx(math.exp(-0.16) * math.sin(2.7) + math.log(1.16) + math.sqrt(1.81), rel=1e-14)
    assert grads == gpuc.grad(transcendental, 0.4, 0.9)


@gpuc.func
def pair(x, y):
    return (x * y, x + math.sin(y))


def test_vjp_tuple_result():
    value, cotangents = gpuc.vjp(pair, (2.0, 3.0), (1.0, 10.0))
    assert value == pytest.approx((6.0, 2.0 + math.sin(3.0)))
    assert cotangents == pytest.approx((3.0 + 10.0, 2.0 + 10.0 * math.cos(3.0)))


def test_vjp_equals_grad_for_one_float():
    assert gpuc.vjp(product, (2.0, 3.0), 1.0)[1] == gpuc.grad(product, 2.0, 3.0)
    assert gpuc.vjp(product, (2.0, 3.0), 0.5)[1] == (1.5, 1.0)


def test_grad_equals_jvps_with_unit_tangents():
    for f, args in ((transcendental, (0.4, 0.9)), (calls_helper, (0.3, 0.6))):
        grads = gpuc.grad(f, *args)
        for k in range(len(args)):
            unit = tuple(1.0 if j == k else 0.0 for j in range(len(args)))
            assert grads[k] == pytest.approx(gpuc.jvp(f, args, unit)[1], rel=1e-13)


# -- inside kernels ------------------------------------------------------------------------------------

@gpuc.kernel
def grad_kernel(x, n, out):
    i = gpuc.index()
    out[i] = gpuc.grad(horner, x[i], n)[0]


@gpuc.kernel
def value_and_grad_kernel(x, y, value, dx, dy):
    i = gpuc.index()
    v, g = gpuc.value_and_grad(transcendental, x[i], y[i])
    value[i] = v
    dx[i] = g[0]
    dy[i] = g[1]


@gpuc.kernel
def vjp_kernel(x, y, out):
    i = gpuc.index()
    v, c = gpuc.vjp(pair, (x[i], y[i]), (1.0, 2.0))
    out[i, 0] = v[0]
    out[i, 1] = c[0]
    out[i, 2] = c[1]


@pytest.mark.devices("cpu", "opencl")
def test_grad_in_kernel_over_array():
    x = np.linspace(-1.0, 1.0, 101)
    out = np.empty_like(x)
    grad_kernel[x.size](x, 7, out)
    np.testing.assert_allclose(out, [horner_slope(v, 7) for v in x], rtol=1e-12, atol=1e-14)


@pytest.mark.devices("cpu", "opencl")
def test_value_and_grad_in_kernel_two_threads():
    rng = np.random.default_rng(1)
    x, y = rng.uniform(-1, 1, 1000), rng.uniform(-1, 1, 1000)
    value, dx, dy = (np.empty_like(x) for _ in range(3))
    value_and_grad_kernel.launch(x.size, x, y, value, dx, dy, threads=2)
    np.testing.assert_allclose(value, np.exp(-x * x) * np.sin(3 * y) + np.log1p(x * x) + np.sqrt(1 + y * y),
                               rtol=1e-13)
    np.testing.assert_allclose(dx, -2 * x * np.exp(-x * x) * np.sin(3 * y) + 2 * x / (1 + x * x), rtol=1e-12,
                               atol=1e-15)
    np.testing.assert_allclose(dy, 3 * np.exp(-x * x) * np.cos(3 * y) + y / np.sqrt(1 + y * y), rtol=1e-12)


@pytest.mark.devices("cpu", "opencl")
def test_vjp_in_kernel():
    x, y = np.array([2.0, -1.0]), np.array([3.0, 0.5])
    out = np.empty((2, 3))
    vjp_kernel[2](x, y, out)
    np.testing.assert_allclose(out[:, 0], x * y)
    np.testing.assert_allclose(out[:, 1], y + 2.0)
    np.testing.assert_allclose(out[:, 2], x + 2.0 * np.cos(y))


# -- nesting -------------------------------------------------------------------------------------------

@gpuc.func
def f2(x, y):
    return math.sin(x) * y * y + math.exp(x * y)


@gpuc.func
def df2_dx(x, y):
    return gpuc.derivative(f2, x, y)


@gpuc.func
def grad_f2_x(x, y):
    return gpuc.grad(f2, x, y)[0]


@gpuc.func
def grad_f2_y(x, y):
    return gpuc.grad(f2, x, y)[1]


def _hessian(x, y):
    e = math.exp(x * y)
    fxx = -math.sin(x) * y * y + y * y * e
    fxy = 2 * math.cos(x) * y + e + x * y * e
    fyy = 2 * math.sin(x) + x * x * e
    return fxx, fxy, fyy


def test_reverse_over_forward():
    fxx, fxy, _ = _hessian(0.3, 0.7)
    assert gpuc.grad(df2_dx, 0.3, 0.7) == pytest.approx((fxx, fxy), rel=1e-12)


def test_forward_over_reverse_hessian_vector_product():
    fxx, fxy, fyy = _hessian(0.3, 0.7)
    v = (0.25, -2.0)
    assert gpuc.jvp(grad_f2_x, (0.3, 0.7), v)[1] == pytest.approx(fxx * v[0] + fxy * v[1], rel=1e-12)
    assert gpuc.jvp(grad_f2_y, (0.3, 0.7), v)[1] == pytest.approx(fxy * v[0] + fyy * v[1], rel=1e-12)


def test_reverse_over_reverse():
    fxx, fxy, fyy = _hessian(0.3, 0.7)
    assert gpuc.grad(grad_f2_x, 0.3, 0.7) == pytest.approx((fxx, fxy), rel=1e-12)
    assert gpuc.grad(grad_f2_y, 0.3, 0.7) == pytest.approx((fxy, fyy), rel=1e-12)


@gpuc.func
def third(x):
    return gpuc.grad(grad_of_poly, x)[0]


@gpuc.func
def grad_of_poly(x):
    return gpuc.grad(poly, x)[0]


def test_third_order_by_nesting():
    assert gpuc.grad(third, 0.8) == pytest.approx((30 * 0.8 ** 2 - 30 * 0.8 + 12,), rel=1e-12)  # p'''


# -- what cannot be differentiated, and bad calls ------------------------------------------------------

@gpuc.func
def writes_argument(x, a):
    a[0] = x * x
    return x


@gpuc.func
def chosen_at_run_time(x, c):
    p = gpuc.deferred(poly, x) if c else gpuc.deferred(escape, x)
    return p(x)


@gpuc.func
def returns_int(x):
    return int(x)


@pytest.mark.parametrize("call, message", [
    (lambda: gpuc.grad(writes_argument, 2.0, np.zeros(1)), "a float stored outside the function's own stack"),
    (lambda: gpuc.grad(chosen_at_run_time, 2.0, True), "an indirect call cannot be differentiated"),
    (lambda: gpuc.grad(returns_int, 2.0), "returns an int64"),
    (lambda: gpuc.grad(pair, 2.0, 3.0), "returning one float"),
    (lambda: gpuc.grad(horner, 2, 3), "none was given"),
    (lambda: gpuc.grad(grad_kernel, 2.0), "differentiates @gpuc.func functions"),
    (lambda: gpuc.vjp(pair, (2.0, 3.0), 1.0), "does not have the structure"),
], ids=["store-to-constant-array", "run-time-pointer", "int-result", "tuple-result", "no-float", "kernel",
        "cotangent-structure"])
def test_errors_are_located(call, message):
    with pytest.raises(gpuc.CompilationError) as info:
        call()
    assert message in str(info.value)
    assert info.value.location is not None and info.value.location.file.endswith(".py")


@gpuc.kernel
def grad_of_tuple_result_in_kernel(out):
    out[0] = gpuc.grad(pair, 1.0, 2.0)[0]


@pytest.mark.devices("cpu", "opencl")
def test_error_inside_kernel_is_located_at_the_call():
    with pytest.raises(gpuc.CompilationError) as info:
        grad_of_tuple_result_in_kernel[1](np.zeros(1))
    assert "gpuc.vjp" in str(info.value)
    assert info.value.location.line > 0 and "test_reverse_funcs.py" in info.value.location.file


def test_next_compile_works_after_an_error():
    with pytest.raises(gpuc.CompilationError):
        gpuc.grad(writes_argument, 2.0, np.zeros(1))
    assert gpuc.grad(product, 2.0, 5.0) == (5.0, 2.0)
