"""What gpuc.jax keeps for a backward pass: an input whose values no derivative kernel reads (the kernel is linear in
it) is no residual of JAX's and is read as zeros by the derivative launches; outputs the adjoint only writes go
to memory of the launch's own. Gradients and JVPs stay those of pure JAX and of finite differences."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

import gpuc  # noqa: E402
from gpuc.jax import jax_kernel  # noqa: E402
from support.jax_kernels import heat_fixed_ends as stencil  # noqa: E402

N = 256
RNG = np.random.default_rng(2930)
X = RNG.uniform(0.5, 1.5, N)
Y = RNG.uniform(-1.0, 1.0, N)
INTERIOR = (np.arange(N) > 0) & (np.arange(N) < N - 1)


@pytest.fixture(autouse=True)
def float64():
    with jax.enable_x64(True):
        yield


@gpuc.kernel
def saxpy(a, x, y, out):
    i = gpuc.index()
    out[i] = a * x[i] + y[i]


@gpuc.kernel
def product(x, y, out):
    i = gpuc.index()
    out[i] = x[i] * y[i]


@gpuc.kernel
def relu(x, out):
    # piecewise linear: the branch on x's value makes its derivative read x
    i = gpuc.index()
    if x[i] > 1.0:
        out[i] = x[i]
    else:
        out[i] = 0.5 * x[i]


@gpuc.kernel
def gather(x, index, out):
    # linear in x; the integer index decides where its gradient goes
    i = gpuc.index()
    out[i] = 3.0 * x[index[i]]


@gpuc.kernel
def accumulate(x, out):
    i = gpuc.index()
    out[i] += x[i] * 2.0


def needs(kernel, *args, **options):
    f = jax_kernel(kernel, **options)
    args = tuple(jnp.asarray(a) for a in args)
    n, dims, dtypes = f._spec(args)
    return f._needs(args, n, dims, dtypes)


def test_which_inputs_the_derivatives_read():
    assert needs(saxpy, np.float64(2.0), X, Y) == ((1, 2), (0,))
    assert needs(stencil, X, np.float64(0.2)) == ((0,), (0,))
    assert needs(product, X, Y)[0] == ()
    assert needs(relu, X)[0] == ()
    assert needs(gather, X, np.arange(N)[::-1].copy())[0] == (0,)
    # an output the kernel reads is rewritten where XLA gives it, zeroed, not in the launch's own memory
    assert needs(accumulate, X) == ((0,), ())


def test_a_linear_step_in_scan_leaves_no_residuals():
    # the state at every step is what jax.grad stacked for the backward pass before: 100 x N values
    step = jax_kernel(stencil)

    def loss(u):
        u, _ = jax.lax.scan(lambda u, _: (step(u, np.float64(0.2)), None), u, None, length=100)
        return jnp.sum(u ** 3)

    def pure(u):
        def advance(u, _):
            return jnp.where(INTERIOR, u + 0.2 * (jnp.roll(u, 1) - 2.0 * u + jnp.roll(u, -1)), u), None
        return jnp.sum(jax.lax.scan(advance, u, None, length=100)[0] ** 3)

    text = str(jax.make_jaxpr(jax.grad(loss))(X))
    assert f"[100,{N}]" not in text
    np.testing.assert_allclose(np.asarray(jax.jit(jax.grad(loss))(X)), np.asarray(jax.grad(pure)(X)),
                               rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kernel, pure, args", [
    (saxpy, lambda a, x, y: a * x + y, (np.float64(2.5), X, Y)),
    (gather, lambda x, index: 3.0 * x[index], (X, RNG.permutation(N))),
    (accumulate, lambda x: 2.0 * x, (X,)),
    (relu, lambda x: jnp.where(x > 1.0, x, 0.5 * x), (X,)),
])
def test_gradients_and_jvps_of_linear_and_other_kernels(kernel, pure, args):
    f = jax_kernel(kernel)
    arrays = [k for k, a in enumerate(args) if np.ndim(a) and np.issubdtype(np.asarray(a).dtype, np.floating)]
    weights = RNG.standard_normal(N)

    def loss(g):
        return lambda *xs: jnp.sum(weights * g(*(xs[arrays.index(k)] if k in arrays else a
                                                 for k, a in enumerate(args))))

    inputs = tuple(jnp.asarray(args[k]) for k in arrays)
    got = jax.jit(jax.grad(loss(f), argnums=tuple(range(len(arrays)))))(*inputs)
    want = jax.grad(loss(pure), argnums=tuple(range(len(arrays))))(*inputs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-13, atol=1e-15)
    directions = tuple(jnp.asarray(RNG.standard_normal(N)) for _ in arrays)
    _, tangent = jax.jvp(loss(f), inputs, directions)
    _, expected = jax.jvp(loss(pure), inputs, directions)
    np.testing.assert_allclose(float(tangent), float(expected), rtol=1e-12)


def test_free_inputs_under_vmap_jacfwd_and_jacrev():
    f = jax_kernel(stencil)
    u = jnp.asarray(X[:16])
    forward = np.asarray(jax.jacfwd(lambda v: f(v, np.float64(0.2)))(u))
    reverse = np.asarray(jax.jacrev(lambda v: f(v, np.float64(0.2)))(u))
    interior = INTERIOR[:16].copy()
    interior[-1] = False
    expected = np.asarray(jax.jacfwd(
        lambda v: jnp.where(interior, v + 0.2 * (jnp.roll(v, 1) - 2.0 * v + jnp.roll(v, -1)), v))(u))
    np.testing.assert_allclose(forward, expected, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(reverse, expected, rtol=1e-14, atol=1e-15)
    xs = np.stack([X, 2 * X])
    got = jax.vmap(jax.grad(lambda x: jnp.sum(jax_kernel(saxpy)(np.float64(3.0), x, jnp.asarray(Y)) ** 2)))(xs)
    for row, x in zip(np.asarray(got), xs):
        np.testing.assert_allclose(row, 2 * (3.0 * x + Y) * 3.0, rtol=1e-13)


@gpuc.kernel
def accumulate_and_square(x, total, square):
    i = gpuc.index()
    total[i] += 2.0 * x[i]
    square[i] = x[i] * x[i]


def test_an_output_read_beside_one_only_written():
    # `total` is read (zeroed, XLA's buffer), `square` only written (the launch's own memory in the adjoint)
    assert needs(accumulate_and_square, X, num_outputs=2) == ((), (1,))
    f = jax_kernel(accumulate_and_square, num_outputs=2)
    weights = RNG.standard_normal((2, N))

    def loss(g):
        return lambda x: jnp.sum(weights[0] * g(x)[0] + weights[1] * g(x)[1])

    got = jax.jit(jax.grad(loss(f)))(jnp.asarray(X))
    want = jax.grad(loss(lambda x: (2.0 * x, x * x)))(jnp.asarray(X))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-13)
