"""jax.grad, jax.vjp, jax.value_and_grad and jax.jvp through gpuc.jax.jax_kernel (a custom_jvp whose tangents are
gpuc.tangent's launch, transposed into gpuc.adjoint's): against central finite differences and the same
computation in pure JAX; what does not differentiate is a located error raised when JAX asks for the
derivative, and the process goes on."""

from __future__ import annotations

import math

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

import gpuc  # noqa: E402
from gpuc.jax import jax_kernel  # noqa: E402
from support.jax_kernels import heat_fixed_ends  # noqa: E402

N = 64
RNG = np.random.default_rng(2929)
X = RNG.uniform(0.5, 1.5, N)
Y = RNG.uniform(-1.0, 1.0, N)


@pytest.fixture(autouse=True)
def float64():
    with jax.enable_x64(True):
        yield


@gpuc.kernel
def wave(x, y, out):
    i = gpuc.index()
    out[i] = math.sin(x[i]) * y[i] + x[i] * x[i]


@gpuc.kernel
def heat_step(u, k, out):
    # one explicit step of the periodic 1-D heat equation, the diffusivity per cell
    i = gpuc.index()
    n = u.shape[0]
    left = u[(i + n - 1) % n]
    right = u[(i + 1) % n]
    out[i] = u[i] + k[i] * (left - 2.0 * u[i] + right)


@gpuc.kernel
def split(x, scale, total, product):
    i = gpuc.index()
    total[i] = x[i] + scale
    product[i] = x[i] * x[i] * scale


@gpuc.kernel
def no_rule(x, out):
    i = gpuc.index()
    out[i] = math.lgamma(x[i])


@gpuc.kernel
def counted(x, steps, out):
    # a loop whose trip count is a run-time value
    i = gpuc.index()
    acc = x[i]
    for _ in range(steps):
        acc = acc * 0.5 + math.sin(acc)
    out[i] = acc


def central_differences(f, x, h=1e-6):
    grad = np.empty_like(x)
    for k in range(x.size):
        e = np.zeros_like(x)
        e[k] = h
        grad[k] = (f(x + e) - f(x - e)) / (2 * h)
    return grad


def test_grad_against_pure_jax_and_finite_differences():
    f = jax_kernel(wave)

    def loss(x, y):
        return jnp.sum(f(x, y) ** 2)

    def pure(x, y):
        return jnp.sum((jnp.sin(x) * y + x * x) ** 2)

    gx, gy = jax.jit(jax.grad(loss, argnums=(0, 1)))(X, Y)
    px, py = jax.grad(pure, argnums=(0, 1))(X, Y)
    np.testing.assert_allclose(np.asarray(gx), np.asarray(px), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(gy), np.asarray(py), rtol=1e-12)
    fd = central_differences(lambda x: float(loss(x, Y)), X)
    np.testing.assert_allclose(np.asarray(gx), fd, rtol=1e-6, atol=1e-8)


def test_heat_loss_over_steps_in_scan_against_jnp_roll():
    f = jax_kernel(heat_step)
    u0 = np.exp(-((np.arange(N) - N / 2) ** 2) / 20.0)
    k = RNG.uniform(0.05, 0.2, N)

    def loss(k, step):
        u, _ = jax.lax.scan(lambda u, _: (step(u, k), None), jnp.asarray(u0), None, length=20)
        return jnp.sum((u - 0.5) ** 2)

    def pure_step(u, k):
        return u + k * (jnp.roll(u, 1) - 2.0 * u + jnp.roll(u, -1))

    value, grad = jax.jit(jax.value_and_grad(lambda k: loss(k, f)))(k)
    want_value, want = jax.value_and_grad(lambda k: loss(k, pure_step))(k)
    np.testing.assert_allclose(float(value), float(want_value), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(grad), np.asarray(want), rtol=1e-10, atol=1e-14)
    fd = central_differences(lambda k: float(loss(k, f)), k)
    np.testing.assert_allclose(np.asarray(grad), fd, rtol=1e-5, atol=1e-8)


def test_vjp_of_several_outputs_with_a_constant_scalar():
    f = jax_kernel(split, num_outputs=2)
    (total, product), pullback = jax.vjp(lambda x: f(x, 3.0), X)
    np.testing.assert_allclose(np.asarray(total), X + 3.0)
    np.testing.assert_allclose(np.asarray(product), X * X * 3.0)
    ct_total, ct_product = RNG.standard_normal(N), RNG.standard_normal(N)
    (gx,) = pullback((jnp.asarray(ct_total), jnp.asarray(ct_product)))
    np.testing.assert_allclose(np.asarray(gx), ct_total + ct_product * 6.0 * X, rtol=1e-12)
    # only one output used: the other's cotangent is zero
    g = jax.grad(lambda x: jnp.sum(f(x, 3.0)[1]))(X)
    np.testing.assert_allclose(np.asarray(g), 6.0 * X, rtol=1e-12)


def test_dynamic_loop_against_pure_jax_and_finite_differences():
    f = jax_kernel(counted)
    loss = jax.jit(lambda x, steps: jnp.sum(f(x, steps)))
    g = jax.grad(loss)(X, 4)

    def pure(x):
        return jnp.sum(jax.lax.fori_loop(0, 4, lambda _, acc: acc * 0.5 + jnp.sin(acc), x))

    np.testing.assert_allclose(np.asarray(g), np.asarray(jax.grad(pure)(X)), rtol=1e-12)
    fd = central_differences(lambda x: float(loss(x, 4)), X)
    np.testing.assert_allclose(np.asarray(g), fd, rtol=1e-6, atol=1e-8)


def test_grad_of_a_float_scalar_is_a_located_error():
    f = jax_kernel(split, num_outputs=2)
    with pytest.raises(TypeError, match=r"argument 1 \(scale\) of split .*test_jax_grad.py:\d+.*one-element array"):
        jax.grad(lambda s: jnp.sum(f(jnp.asarray(X), s)[0]))(2.0)


def test_non_differentiable_kernel_fails_when_jax_asks_for_the_derivative():
    f = jax_kernel(no_rule)
    x = jnp.asarray(X)
    values = f(x)  # the forward launch is fine
    np.testing.assert_allclose(np.asarray(values), [math.lgamma(v) for v in X], rtol=1e-12)
    with pytest.raises(gpuc.CompilationError) as info:
        jax.grad(lambda x: jnp.sum(f(x)))(x)
    assert "lgamma" in str(info.value) and "no derivative rule" in str(info.value)
    assert info.value.location is not None
    np.testing.assert_allclose(np.asarray(f(x)), np.asarray(values))  # the process goes on


def test_jvp_runs_the_tangent_kernel():
    # jax.jvp: gpuc.tangent(kernel) along the given directions, against pure JAX's jvp and central differences
    f = jax_kernel(wave)
    dx, dy = RNG.standard_normal(N), RNG.standard_normal(N)
    value, tangent = jax.jvp(f, (jnp.asarray(X), jnp.asarray(Y)), (jnp.asarray(dx), jnp.asarray(dy)))
    pure = jax.jvp(lambda x, y: jnp.sin(x) * y + x * x, (jnp.asarray(X), jnp.asarray(Y)),
                   (jnp.asarray(dx), jnp.asarray(dy)))
    np.testing.assert_allclose(np.asarray(value), np.asarray(pure[0]), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(np.asarray(tangent), np.asarray(pure[1]), rtol=1e-13, atol=1e-15)
    h = 1e-6
    fd = (np.asarray(f(X + h * dx, Y + h * dy)) - np.asarray(f(X - h * dx, Y - h * dy))) / (2 * h)
    np.testing.assert_allclose(np.asarray(tangent), fd, rtol=1e-7, atol=1e-8)


def test_jvp_under_jit_with_several_outputs_and_a_scalar():
    f = jax_kernel(split, num_outputs=2)
    dx = RNG.standard_normal(N)
    run = jax.jit(lambda x, d: jax.jvp(lambda u: f(u, 0.75), (x,), (d,)))
    (total, product), (dtotal, dproduct) = run(jnp.asarray(X), jnp.asarray(dx))
    np.testing.assert_allclose(np.asarray(dtotal), dx, rtol=1e-15)
    np.testing.assert_allclose(np.asarray(dproduct), 2 * X * 0.75 * dx, rtol=1e-14)


def test_jacfwd_and_jacrev_agree():
    # jacfwd is jvp under vmap (one tangent launch per basis direction), jacrev the adjoint under vmap
    f = jax_kernel(heat_step)
    u, k = jnp.asarray(X[:12]), jnp.asarray(0.1 + 0.05 * Y[:12])
    forward = np.asarray(jax.jacfwd(f)(u, k))
    reverse = np.asarray(jax.jacrev(f)(u, k))
    np.testing.assert_allclose(forward, reverse, rtol=1e-14, atol=1e-15)
    expected = np.asarray(jax.jacfwd(lambda v: v + k * (jnp.roll(v, 1) - 2.0 * v + jnp.roll(v, -1)))(u))
    np.testing.assert_allclose(forward, expected, rtol=1e-14, atol=1e-15)


def test_jvp_with_respect_to_a_float_scalar_is_refused():
    f = jax_kernel(split, num_outputs=2)
    with pytest.raises(TypeError, match="float scalar parameters as constants"):
        jax.jvp(lambda s: f(jnp.asarray(X), s), (0.75,), (1.0,))


def test_grad_under_vmap():
    f = jax_kernel(wave)
    xs = np.stack([X, X + 0.25])
    got = jax.vmap(jax.grad(lambda x: jnp.sum(f(x, jnp.asarray(Y)))))(xs)
    for row, x in zip(np.asarray(got), xs):
        np.testing.assert_allclose(row, np.cos(x) * Y + 2 * x, rtol=1e-12)


@pytest.mark.parametrize("threads", ["1", "2"])
def test_large_stencils_on_gpuc_threads_against_pure_jax(monkeypatch, threads):
    # 50,000 cells: the launches run in chunks on gpuc's threads, the adjoint for several threads where there
    # are two (work items two apart at once for fixed ends; atomic adds for periodic ones, whose item 0 reads
    # item n - 1), the in-order adjoint on one thread even when more are allowed when it runs
    monkeypatch.setenv("GPUC_NUM_THREADS", threads)
    n = 50_000
    u0 = np.sin(np.linspace(0.0, 6.0, n)) ** 2
    rate = RNG.uniform(0.05, 0.2, n)
    interior = (np.arange(n) > 0) & (np.arange(n) < n - 1)

    def pure_periodic(u, k):
        return u + k * (jnp.roll(u, 1) - 2.0 * u + jnp.roll(u, -1))

    def pure_fixed(u, k):
        return jnp.where(interior, u + k * (jnp.roll(u, 1) - 2.0 * u + jnp.roll(u, -1)), u)

    for kernel, pure, scalar in ((heat_step, pure_periodic, False), (heat_fixed_ends, pure_fixed, True)):
        step = jax_kernel(kernel)
        k = 0.15 if scalar else rate

        def loss(u, advance):
            u, _ = jax.lax.scan(lambda u, _: (advance(u, k), None), u, None, length=10)
            return jnp.sum(u ** 3)

        got = jax.jit(jax.grad(lambda u: loss(u, step)))(u0)
        monkeypatch.setenv("GPUC_NUM_THREADS", "2")  # after tracing: the schedule was fixed then
        again = jax.jit(jax.grad(lambda u: loss(u, step)))(u0)
        monkeypatch.setenv("GPUC_NUM_THREADS", threads)
        want = jax.grad(lambda u: loss(u, pure))(u0)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-10, atol=1e-12)
        np.testing.assert_array_equal(np.asarray(again), np.asarray(got))


@gpuc.kernel
def rotate(z, w, out):
    i = gpuc.index()
    out[i] = z[i] * w[i]


def test_complex_arrays_are_not_differentiated_silently():
    f = jax_kernel(rotate)
    z = jnp.asarray(X + 1j * Y)
    w = jnp.asarray(Y + 0.5j)
    np.testing.assert_allclose(np.asarray(f(z, w)), np.asarray(z * w), rtol=1e-12)
    with pytest.raises(TypeError, match=r"argument 0 \(z\) of rotate .* not complex128"):
        jax.grad(lambda z: jnp.sum(jnp.abs(f(z, w)) ** 2), holomorphic=False)(z)


def test_second_derivatives_are_refused_and_jacrev_works():
    f = jax_kernel(wave)
    y = jnp.asarray(Y)
    with pytest.raises(ValueError, match=r"FFI call to `gpuc_\d+_jax_kernel_wave_` cannot be differentiated"):
        jax.grad(lambda x: jnp.sum(jax.grad(lambda v: jnp.sum(f(v, y)))(x)))(jnp.asarray(X))
    jacobian = jax.jacrev(lambda x: f(x, y))(jnp.asarray(X[:5]))
    np.testing.assert_allclose(np.asarray(jacobian), np.diag(np.cos(X[:5]) * Y[:5] + 2 * X[:5]), rtol=1e-12, atol=0)
