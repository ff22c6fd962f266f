"""Nested derivatives inside kernels: every form, several in one kernel next to loops that need a tape,
gives what the same call gives from Python, on one and two threads."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gpuc


@gpuc.func
def fixed_point(x):
    t1 = math.cos(x)
    t2 = t1
    t3 = 1.0
    it = 0
    while abs(t3) > 1e-13 and it < 80:
        t4 = 0.5 * math.cos(t2)
        t3 = t4 - t2
        t2 = t4
        it = it + 1
    return t2


@gpuc.func
def damped(x, y):
    a = x
    k = 0
    while k < 3 + int(abs(y) * 4.0):
        a = 0.7 * a + 0.3 * math.sin(a * y)
        k += 1
    return a * y + math.exp(-x * x)


@gpuc.func
def d_fixed_point(x):
    return gpuc.derivative(fixed_point, x)


@gpuc.func
def d_damped(x, y):
    return gpuc.derivative(damped, x, y)


@gpuc.func
def g_damped(x, y):
    return gpuc.grad(damped, x, y)[1]


@gpuc.func
def vg_damped(x, y):
    v, g = gpuc.value_and_grad(damped, x, y)
    return v + 2.0 * g[0]


@gpuc.func
def jvp_damped(x, y):
    return gpuc.jvp(damped, (x, y), (0.5, -1.25))[1]


@gpuc.func
def vjp_damped(x, y):
    return gpuc.vjp(damped, (x, y), 1.5)[1][0]


#: name -> (the call as Python makes it, the kernel making it with one or two loop gradients beside it)
def _forms():
    forms = {}

    @gpuc.kernel
    def grad_of_derivative(out, xs, ys):
        i = gpuc.index()
        g = gpuc.grad(fixed_point, xs[i])
        out[i] = gpuc.grad(d_fixed_point, xs[i])[0] + 0.0 * g[0]

    forms["grad_of_derivative"] = (lambda x, y: gpuc.grad(d_fixed_point, x)[0], grad_of_derivative)

    @gpuc.kernel
    def grad_two_args_of_derivative(out, xs, ys):
        i = gpuc.index()
        h = gpuc.grad(damped, xs[i], ys[i])
        out[i] = gpuc.grad(d_damped, xs[i], ys[i])[1] + 0.0 * h[1]

    forms["grad_two_args_of_derivative"] = (lambda x, y: gpuc.grad(d_damped, x, y)[1], grad_two_args_of_derivative)

    @gpuc.kernel
    def derivative_of_grad(out, xs, ys):
        i = gpuc.index()
        out[i] = gpuc.derivative(g_damped, xs[i], ys[i]) + 0.0 * gpuc.grad(fixed_point, ys[i])[0]

    forms["derivative_of_grad"] = (lambda x, y: gpuc.derivative(g_damped, x, y), derivative_of_grad)

    @gpuc.kernel
    def jvp_of_value_and_grad(out, xs, ys):
        i = gpuc.index()
        out[i] = gpuc.jvp(vg_damped, (xs[i], ys[i]), (1.0, 0.25))[1]

    forms["jvp_of_value_and_grad"] = (lambda x, y: gpuc.jvp(vg_damped, (x, y), (1.0, 0.25))[1],
                                      jvp_of_value_and_grad)

    @gpuc.kernel
    def vjp_of_jvp(out, xs, ys):
        i = gpuc.index()
        out[i] = gpuc.vjp(jvp_damped, (xs[i], ys[i]), 0.75)[1][1] + 0.0 * gpuc.grad(damped, ys[i], xs[i])[0]

    forms["vjp_of_jvp"] = (lambda x, y: gpuc.vjp(jvp_damped, (x, y), 0.75)[1][1], vjp_of_jvp)

    @gpuc.kernel
    def grad_of_vjp_twice(out, xs, ys):
        i = gpuc.index()
        a = gpuc.grad(vjp_damped, xs[i], ys[i])
        b = gpuc.value_and_grad(d_damped, ys[i], xs[i])
        out[i] = a[0] + 3.0 * b[1][0] + b[0]

    forms["grad_of_vjp_twice"] = (
        lambda x, y: gpuc.grad(vjp_damped, x, y)[0] + 3.0 * gpuc.grad(d_damped, y, x)[0] + gpuc.derivative(damped, y, x),
        grad_of_vjp_twice)
    return forms


FORMS = _forms()


@pytest.mark.devices("cpu", "opencl")
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", sorted(FORMS))
def test_kernel_gives_what_python_gives(name, threads):
    python, kernel = FORMS[name]
    xs = np.linspace(-2.0, 2.0, 16)
    ys = np.linspace(0.3, 1.7, 16)[::-1].copy()
    out = np.zeros(16)
    kernel.launch(16, out, xs, ys, threads=threads)
    want = np.array([python(float(x), float(y)) for x, y in zip(xs, ys)])
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-14)


@gpuc.func
def pair(x, y):
    a, b = x, y
    for _ in range(2 + int(abs(x) * 3.0)):
        a, b = 0.8 * a + 0.1 * math.cos(b), 0.6 * b + 0.2 * math.sin(a * y)
    return a * b, a - b


@gpuc.func
def vjp_pair(x, y):
    return gpuc.vjp(pair, (x, y), (0.5, -2.0))[1][1]


@gpuc.func
def hvp(x, y):
    return gpuc.jvp(g_damped, (x, y), (0.3, 1.1))[1]


def _difference(fn, x, y, axis, h=1e-5):
    """Central difference of fn(x, y) along x (axis 0) or y (axis 1)."""
    if axis == 0:
        return (fn(x + h, y) - fn(x - h, y)) / (2 * h)
    return (fn(x, y + h) - fn(x, y - h)) / (2 * h)


POINTS = [(-1.3, 0.45), (0.2, 0.9), (0.75, 1.6), (1.9, 0.35)]


# Derivatives over gradients that keep a tape (their loops run a value-dependent number of times)
# were refused ("a pointer to a stack slot escapes into memory"): checked against differences of
# the inner gradient, which reverse mode computes on its own.
@pytest.mark.parametrize("x, y", POINTS)
def test_derivatives_of_taped_gradients_against_differences(x, y):
    inner = lambda a, b: gpuc.grad(damped, a, b)[1]  # noqa: E731
    assert gpuc.derivative(g_damped, x, y) == pytest.approx(_difference(inner, x, y, 0), rel=1e-6, abs=1e-8)
    want = 0.3 * _difference(inner, x, y, 0) + 1.1 * _difference(inner, x, y, 1)
    assert gpuc.derivative(hvp, x, y) == pytest.approx(  # third order: the derivative of a Hessian-vector product
        _difference(lambda a, b: 0.3 * _difference(inner, a, b, 0, 1e-4) + 1.1 * _difference(inner, a, b, 1, 1e-4),
                    x, y, 0, 1e-4), rel=1e-4, abs=1e-6)
    assert gpuc.jvp(g_damped, (x, y), (0.3, 1.1))[1] == pytest.approx(want, rel=1e-6, abs=1e-8)
    by_vjp = lambda a, b: gpuc.vjp(pair, (a, b), (0.5, -2.0))[1][1]  # noqa: E731
    got = gpuc.grad(vjp_pair, x, y)
    assert got[0] == pytest.approx(_difference(by_vjp, x, y, 0), rel=1e-6, abs=1e-8)
    assert got[1] == pytest.approx(_difference(by_vjp, x, y, 1), rel=1e-6, abs=1e-8)
    value, grads = gpuc.value_and_grad(vg_damped, x, y)
    assert value == pytest.approx(vg_damped_python(x, y), rel=1e-13)
    assert grads[1] == pytest.approx(_difference(vg_damped_python, x, y, 1), rel=1e-6, abs=1e-8)


def vg_damped_python(x, y):
    v, g = gpuc.value_and_grad(damped, x, y)
    return v + 2.0 * g[0]


@gpuc.kernel
def loss_of_slopes(xs, ys, loss):
    i = gpuc.index()
    gpuc.atomic_add(loss, 0, gpuc.grad(damped, xs[i], ys[i])[1] ** 2 + gpuc.grad(pair_sum, xs[i], ys[i])[0])


@gpuc.func
def pair_sum(x, y):
    p = pair(x, y)
    return p[0] + p[1]


# The adjoint of a kernel whose items take gradients with tapes: reverse over reverse, in place.
@pytest.mark.devices("cpu", "opencl")
@pytest.mark.parametrize("threads", [1, 2])
def test_adjoint_of_kernel_taking_taped_gradients(threads):
    xs, ys = np.array([p[0] for p in POINTS]), np.array([p[1] for p in POINTS])
    dxs, dys = np.zeros(4), np.zeros(4)
    loss, seed = np.zeros(1), np.ones(1)
    gpuc.adjoint(loss_of_slopes).launch(4, xs, dxs, ys, dys, loss, seed, threads=threads)

    def total(a, b):
        out = np.zeros(1)
        loss_of_slopes[4](a, b, out)
        return out[0]

    h = 1e-5
    for i in range(4):
        e = np.zeros(4)
        e[i] = h
        assert dxs[i] == pytest.approx((total(xs + e, ys) - total(xs - e, ys)) / (2 * h), rel=1e-6, abs=1e-8)
        assert dys[i] == pytest.approx((total(xs, ys + e) - total(xs, ys - e)) / (2 * h), rel=1e-6, abs=1e-8)


@gpuc.func
def two_results(x, y):
    t = y * 2.0 - math.cos(x)
    if x > y:
        return t * t, math.sin(y - t)
    u = math.tanh(x * y / (x * x + 0.5))
    return y * -1.25 * x / (u * u + 2.0), u * y + math.exp(math.sin(u * 0.5))


@gpuc.func
def vjp_swapped(x, y):
    return gpuc.vjp(two_results, (y, x), (0.25, 1.0))[1][0]


@gpuc.func
def jvp_and_vjp(x, y):
    t = gpuc.jvp(two_results, (x, math.sin(y)), (-2.0, -2.0))[1]
    c = gpuc.vjp(two_results, (x, y), (1.0, 1.0))[1]
    return (t[1] * t[1] - c[0]) * y * y


@gpuc.kernel
def three_requests(out, xs, ys, ws):
    i = gpuc.index()
    out[i, 0] = gpuc.derivative(vjp_swapped, xs[i], ys[i])
    out[i, 1] = gpuc.vjp(two_results, (xs[i], ys[i]), (ws[0], ws[1]))[1][0]
    out[i, 2] = gpuc.value_and_grad(jvp_and_vjp, xs[i], ys[i])[1][0]


# Several requests on one func in a kernel: a derived function optimized for its first callers (an
# unused result dropped, an argument folded) was found again by name by the next request: a
# PluginError or a crash. Optimizing what a plugin made keeps every function's interface.
@pytest.mark.devices("cpu", "opencl")
def test_several_requests_on_one_func_in_a_kernel():
    xs, ys, ws = np.array([-0.95, -1.86, 0.4]), np.array([0.21, 0.97, 1.3]), np.array([0.25, -1.5])
    out = np.zeros((3, 3))
    three_requests.launch(3, out, xs, ys, ws, threads=1)
    want = [[gpuc.derivative(vjp_swapped, x, y), gpuc.vjp(two_results, (x, y), (0.25, -1.5))[1][0],
             gpuc.value_and_grad(jvp_and_vjp, x, y)[1][0]] for x, y in zip(xs, ys)]
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-14)


# An inner derivative in a function that is differentiated itself is inlined whatever its size: out of line,
# a gradient writing memory (the shadows of an array argument, a tape) is refused by the outer gradient
# ("writes memory and is not inlined"). A gradient of helpers called three deep and an array constant:
@gpuc.func
def _g0(p0):
    t0 = math.exp(math.sin((p0 * -1.25) / (p0 * p0 + 2.0)))
    t1 = ((t0 * 1.5 + t0) / (p0 * p0 + 2.0)) * math.sin(t0 * 2.0)
    return p0 + 1e-3 * t1 / (math.tanh(p0) * math.tanh(p0) + 2.0)


@gpuc.func
def _large(p0, n, p1, p2, arr):
    t1 = _g0(_g0(_g0(p2 * -1.25)))
    a0 = math.sin(math.tanh(arr[1]))
    a1 = math.sin(p1 * p2)
    a0 /= (arr[1] + math.tanh(float(n))) * (arr[1] + math.tanh(float(n))) + 1.0
    if p1 > p2:
        return ((_g0(t1) - (t1 - arr[1] * arr[1])) - a1) * a0
    return ((arr[1] * 2.0) * p0 - arr[1] / (arr[0] * arr[0] + 1.0) - a0) + a1


@gpuc.func
def _h(p0, n, p1, p2, arr):
    vf, gf = gpuc.value_and_grad(_large, math.sin(p0), n, p1, p0 * 1.5, arr)
    gg = gpuc.grad(_large, math.tanh(p1), n, p0, _g0(arr[1]), arr)
    return (gf[2] * math.tanh(gg[2]) + gg[0] * gf[2]) * (p2 * p0 - _g0(arr[0])) + vf


@gpuc.kernel
def _grad_of_h(out, xs, cs, n):
    i = gpuc.index()
    g = gpuc.grad(_h, xs[i, 0], n, xs[i, 1], xs[i, 2], cs)
    out[i, 0], out[i, 1], out[i, 2] = g[0], g[1], g[2]


@pytest.mark.parametrize("threads", [1, 2])
def test_gradient_of_a_func_calling_large_taped_gradients(threads):
    xs = np.array([[1.93, 0.34, 0.60], [-0.51, -1.99, -1.59]])
    cs = np.array([-0.336, 0.572])
    out = np.zeros((2, 3))
    _grad_of_h.launch(2, out, xs, cs, 4, threads=threads)
    h = 1e-6
    for i in range(2):
        for k in range(3):
            up, down = xs[i].copy(), xs[i].copy()
            up[k] += h
            down[k] -= h
            want = (_h(up[0], 4, up[1], up[2], cs) - _h(down[0], 4, down[1], down[2], cs)) / (2 * h)
            assert abs(out[i, k] - want) <= 1e-6 * max(1.0, abs(want)), (i, k, out[i, k], want)


@gpuc.func
def _large_looped(p0, n, p1, p2, arr):
    a0 = _large(p0, n, p1, p2, arr)
    for k in range(n):
        a0 /= (arr[1] + math.tanh(float(k))) * (arr[1] + math.tanh(float(k))) + 1.0
    return a0


@gpuc.func
def _h_looped(p0, n, p1, p2, arr):
    vf, gf = gpuc.value_and_grad(_large_looped, math.sin(p0), n, p1, p0 * 1.5, arr)
    gg = gpuc.grad(_large_looped, math.tanh(p1), n, p0, _g0(arr[1]), arr)
    return (gf[2] * math.tanh(gg[2]) + gg[0] * gf[2]) * (p2 * p0 - _g0(arr[0])) + vf


@gpuc.kernel
def _grad_of_h_looped(out, xs, cs, n):
    i = gpuc.index()
    g = gpuc.grad(_h_looped, xs[i, 0], n, xs[i, 1], xs[i, 2], cs)
    out[i, 0], out[i, 1], out[i, 2] = g[0], g[1], g[2]
    out[i, 3] = gpuc.derivative(_h_looped, xs[i, 0], n, xs[i, 1], xs[i, 2], cs)


# The gradient (and the derivative) of a func taking gradients that keep a tape of a func looping over an array
# (a Hessian of a loss over data): the gradients are differentiated by rule (gradients of f's tangent function,
# gpuc/plugins/autodiff/nested.py), the array read as the constant it is, with no derivative of their tapes.
# The same in a kernel on one and two threads as from Python, and both as central differences of _h_looped.
@pytest.mark.parametrize("threads", [1, 2])
def test_the_gradient_of_taped_gradients_of_an_array_taking_func(threads):
    xs = np.array([[0.4, -0.3, 0.8], [-0.6, 0.5, 1.1], [0.9, 0.2, -0.7]])
    cs, n = np.array([0.3, 0.8, -0.4, 0.6]), 4
    out = np.zeros((3, 4))
    _grad_of_h_looped.launch(3, out, xs, cs, n, threads=threads)
    e = 1e-6
    for row, (p0, p1, p2) in enumerate(xs):
        python = gpuc.grad(_h_looped, p0, n, p1, p2, cs)
        np.testing.assert_allclose(out[row, :3], python, rtol=1e-12, atol=1e-14)
        assert out[row, 3] == pytest.approx(gpuc.derivative(_h_looped, p0, n, p1, p2, cs), rel=1e-12)
        def at(j, step):
            v = [p0, p1, p2]
            v[j] += step
            return _h_looped(v[0], n, v[1], v[2], cs)

        central = [(at(j, e) - at(j, -e)) / (2 * e) for j in range(3)]
        np.testing.assert_allclose(out[row, :3], central, rtol=1e-6, atol=1e-8)
        assert out[row, 3] == pytest.approx(central[0], rel=1e-6, abs=1e-8)


@gpuc.func
def _h_local(p, n, arr):
    loc = gpuc.local.array(4, gpuc.float64)
    for k in range(4):
        loc[k] = p * arr[k]
    return gpuc.grad(_large_looped, p, n, 0.5, 0.25, loc)[0]


@gpuc.func
def _h_writes(p, n, arr):
    g = gpuc.grad(_large_looped, p, n, 0.5, 0.25, arr)[0]
    arr[0] = 2.0
    return g


# Not by rule: an array whose values depend on the primal (a local array filled from p: its derivative would be
# lost if it were read as a constant) or one the func writes after the gradient (the rule reruns the gradient's
# tangent where the reverse sweep reaches it): these gradients are differentiated with their tapes, which is
# refused where the tape's memory meets the shadowed memory, a located error at the function.
@pytest.mark.parametrize("h", [_h_local, _h_writes])
def test_gradients_of_taped_gradients_of_arrays_that_vary_are_refused(h):
    with pytest.raises(gpuc.CompilationError, match="a phi of memory that has a shadow and other memory") as caught:
        gpuc.grad(h, 0.3, 3, np.array([0.3, 0.8, -0.4, 0.6]))
    assert "test_nested_in_kernels.py:" in str(caught.value) and "not inlined" not in str(caught.value)


@gpuc.func
def _data_loss(w, n, data):
    acc = 0.0
    for k in range(n):
        r = math.sin(w * data[k]) * data[k] + w
        acc += r * r
    return acc


@gpuc.func
def _data_slope(w, n, data):
    return gpuc.grad(_data_loss, w, n, data)[0]


@gpuc.kernel
def _curvatures(xs, data, out):
    i = gpuc.index()
    out[i] = gpuc.grad(_data_slope, xs[i], 3, data)[0]


# The adjoint of a kernel taking second derivatives by rule (the data array constant to them) still gets the
# derivative with respect to the data: it differentiates the code the rule made, the array with a shadow.
def test_the_adjoint_of_a_kernel_of_second_derivatives_reaches_the_data():
    xs, data = np.array([-0.9, -0.2, 0.4, 1.1]), np.array([0.5, 1.5, -0.7])
    weights = np.array([1.0, 2.0, 3.0, 4.0])
    out, dxs, ddata = np.zeros(4), np.zeros(4), np.zeros(3)
    gpuc.adjoint(_curvatures).launch(4, xs, dxs, data, ddata, out, weights.copy())

    def weighted(d):
        o = np.zeros(4)
        _curvatures.launch(4, xs, d, o)
        return float(weights @ o)

    e = 1e-6
    for j in range(3):
        up, down = data.copy(), data.copy()
        up[j] += e
        down[j] -= e
        assert ddata[j] == pytest.approx((weighted(up) - weighted(down)) / (2 * e), rel=1e-6, abs=1e-7)
    for j in range(4):
        central = (weights[j] * (gpuc.grad(_data_slope, xs[j] + e, 3, data)[0]
                                 - gpuc.grad(_data_slope, xs[j] - e, 3, data)[0]) / (2 * e))
        assert dxs[j] == pytest.approx(central, rel=1e-6, abs=1e-7)
