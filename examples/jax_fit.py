"""A gpuc kernel inside a JAX program: a spring-mass simulation stepped in a jitted loss, jax.grad through it.

Each work item advances one damped oscillator x'' = -k x - c x' by one time step. The loss runs the
kernel for 100 steps inside `lax.scan`, under `jax.jit`, and measures the miss of the end positions
against positions "measured" with the true parameters; `jax.grad` of the loss runs the kernel's adjoint
(gpuc.adjoint) backwards through the steps. Plain gradient descent, no optimizer library, then
recovers k and c. XLA's buffers go to the kernel by pointer: nothing is copied at the boundary.

    python examples/jax_fit.py          # prints the fit; exits 0 when it recovers k and c
"""

from __future__ import annotations

import sys

import numpy as np

import gpuc

STEPS = 100


@gpuc.kernel
def spring_step(params, x, v, x_next, v_next):
    i = gpuc.index()
    k, c = params[0], params[1]
    dt = 2.0 / 100
    a = -k * x[i] - c * v[i]
    v_next[i] = v[i] + dt * a
    x_next[i] = x[i] + dt * v_next[i]


def main() -> int:
    import jax
    import jax.numpy as jnp

    from gpuc.jax import jax_kernel

    step = jax_kernel(spring_step, num_outputs=2, launch_dims=lambda shapes: shapes[1],
                      output_dims=lambda shapes: shapes[1])

    def simulate(params, x0, v0, advance):
        (x, _), _ = jax.lax.scan(lambda state, _: (advance(params, *state), None), (x0, v0), None, length=STEPS)
        return x

    def pure_step(params, x, v):  # the same step in jax.numpy, to check the gradient against
        v = v + 2.0 / 100 * (-params[0] * x - params[1] * v)
        return x + 2.0 / 100 * v, v

    with jax.enable_x64(True):
        rng = np.random.default_rng(0)
        x0, v0 = jnp.asarray(rng.uniform(-1.0, 1.0, 256)), jnp.asarray(rng.uniform(-1.0, 1.0, 256))
        truth = jnp.asarray([2.0, 0.3])
        target = simulate(truth, x0, v0, step)

        @jax.jit
        def loss(params):
            return jnp.mean((simulate(params, x0, v0, step) - target) ** 2)

        grad = jax.jit(jax.grad(loss))
        params = jnp.asarray([1.0, 0.8])
        want = jax.grad(lambda p: jnp.mean((simulate(p, x0, v0, pure_step) - target) ** 2))(params)
        same = np.allclose(grad(params), want, rtol=1e-10)
        print(f"jax.grad through {STEPS} launches of spring_step at k = 1, c = 0.8: {np.asarray(grad(params))} "
              f"(pure JAX: {np.asarray(want)}): {'ok' if same else 'WRONG'}")
        print(f"fitting k and c of {x0.size} damped oscillators by gradient descent from k = 1, c = 0.8:")
        rate = 2.0
        for it in range(61):
            params = params - rate * grad(params)
            if it % 20 == 0:
                print(f"  step {it:3d}: loss {float(loss(params)):.3e}  k = {params[0]:.5f}  c = {params[1]:.5f}")
        found = np.asarray(params)
    ok = bool(np.allclose(found, np.asarray(truth), rtol=1e-3)) and same
    print(f"found k = {found[0]:.5f}, c = {found[1]:.5f} (true 2.0, 0.3): {'ok' if ok else 'WRONG'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
