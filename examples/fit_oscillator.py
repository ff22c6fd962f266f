"""Fitting a simulation by gradient descent: the adjoint of a gpuc kernel gives the gradient of a loss.

Each work item simulates one damped oscillator x'' = -k x - c x' from its own starting point for a
fixed time with a run-time number of steps, and adds its squared miss of a measured end position to
a loss. `gpuc.adjoint(simulate)` runs the simulation and its reverse sweep in one launch: the
shadow of `params` receives dloss/dk and dloss/dc, summed over every work item (with atomic adds,
since all of them read the same two parameters), through every time step.

    python examples/fit_oscillator.py          # prints the fit; exits 0 when it recovers k and c
"""

from __future__ import annotations

import sys

import numpy as np

import gpuc


@gpuc.kernel
def simulate(params, x0, v0, target, steps, loss):
    i = gpuc.index()
    k, c = params[0], params[1]
    dt = 2.0 / steps
    x, v = x0[i], v0[i]
    for _ in range(steps):
        a = -k * x - c * v
        v += dt * a
        x += dt * v
    miss = x - target[i]
    gpuc.atomic_add(loss, 0, miss * miss)


def measure(params, x0, v0, steps):
    """The end positions the true parameters give (what an experiment would have measured), by the
    same scheme in NumPy."""
    k, c = params
    x, v, dt = x0.copy(), v0.copy(), 2.0 / steps
    for _ in range(steps):
        v += dt * (-k * x - c * v)
        x += dt * v
    return x


def fit(x0, v0, target, steps, guess, iterations=300, rate=0.5):
    params = np.array(guess, dtype=np.float64)
    adjoint = gpuc.adjoint(simulate)
    for it in range(iterations):
        grad = np.zeros(2)
        loss, seed = np.zeros(1), np.ones(1)
        # simulate(params, x0, v0, target, steps, loss) with a shadow after each float array; the
        # loss's shadow is the seed dloss/dloss = 1; params' shadow receives the gradient.
        unused = [np.zeros_like(x0) for _ in range(3)]
        adjoint[x0.size](params, grad, x0, unused[0], v0, unused[1], target, unused[2], steps, loss, seed)
        params -= rate * grad / x0.size
        if it % 50 == 0 or it == iterations - 1:
            print(f"  step {it:3d}: loss {loss[0]:.3e}  k = {params[0]:.5f}  c = {params[1]:.5f}")
    return params


def main() -> int:
    rng = np.random.default_rng(0)
    truth = np.array([2.0, 0.3])
    x0, v0 = rng.uniform(-1.0, 1.0, 256), rng.uniform(-1.0, 1.0, 256)
    steps = 400
    target = measure(truth, x0, v0, steps)
    print(f"fitting k and c of {x0.size} damped oscillators ({steps} steps each) from k = 1, c = 0.8:")
    found = fit(x0, v0, target, steps, guess=(1.0, 0.8))
    ok = np.allclose(found, truth, rtol=1e-3)
    print(f"found k = {found[0]:.5f}, c = {found[1]:.5f} (true {truth[0]}, {truth[1]}): {'ok' if ok else 'WRONG'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
