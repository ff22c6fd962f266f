"""Differentiating a simulation over many launches with gpuc.Tape: heat flowing along a rod.

A rod of 64 cells starts with a hot bump and conducts heat for 100 explicit time steps with a
diffusivity kappa; a loss sums the squared misses of the final temperatures against a measured
profile. Each step is one launch of `heat_step`, which writes its own row of the history array `u`
(one array per step: the tape refuses a launch that overwrites memory an earlier launch used). The
tape records the 100 step launches and the loss launch; `tape.backward(loss)` runs their adjoints
in reverse and gives d loss / d kappa and d loss / d u[0], the initial temperatures. The example
checks both against central finite differences of the simulation, then fits kappa by gradient
descent.

    python examples/heat_tape.py          # prints the check and the fit; exits 0 when both are right
"""

from __future__ import annotations

import sys

import numpy as np

import gpuc

CELLS, STEPS, DT = 64, 100, 1.0


@gpuc.kernel
def heat_step(u, u_next, kappa, dt):
    i = gpuc.index()
    n = u.shape[0]
    left = u[max(i - 1, 0)]  # insulated ends: no heat flows out
    right = u[min(i + 1, n - 1)]
    u_next[i] = u[i] + dt * kappa[0] * (left - 2.0 * u[i] + right)


@gpuc.kernel
def squared_miss(u, target, loss):
    i = gpuc.index()
    miss = u[i] - target[i]
    gpuc.atomic_add(loss, 0, miss * miss)


def simulate(kappa, u0, target, steps=STEPS, dt=DT, threads=None):
    """(the history u, one row per step, and the loss as a one-element array)."""
    u = np.zeros((steps + 1, u0.size))
    u[0] = u0
    loss = np.zeros(1)
    for t in range(steps):
        heat_step.launch(u0.size, u[t], u[t + 1], kappa, dt, threads=threads)
    squared_miss.launch(u0.size, u[steps], target, loss, threads=threads)
    return u, loss


def gradients(kappa, u0, target, steps=STEPS, dt=DT, threads=None):
    """(loss, d loss / d kappa, d loss / d u0) through every step."""
    with gpuc.Tape() as tape:
        u, loss = simulate(kappa, u0, target, steps, dt, threads)
    tape.backward(loss)
    return loss[0], tape.gradients[kappa].copy(), tape.gradients[u[0]].copy()


def finite_differences(kappa, u0, target, cells, h=1e-6, steps=STEPS, dt=DT):
    """Central differences of the loss in kappa and in the initial temperature of each of `cells`."""
    def loss_at(k, start):
        return simulate(k, start, target, steps, dt)[1][0]

    dkappa = (loss_at(kappa + h, u0) - loss_at(kappa - h, u0)) / (2 * h)
    du0 = []
    for c in cells:
        bump = np.zeros_like(u0)
        bump[c] = h
        du0.append((loss_at(kappa, u0 + bump) - loss_at(kappa, u0 - bump)) / (2 * h))
    return dkappa, np.array(du0)


def initial_profile(cells=CELLS):
    x = np.linspace(0.0, 1.0, cells)
    return np.exp(-((x - 0.3) / 0.08) ** 2) + 0.5 * np.exp(-((x - 0.7) / 0.05) ** 2)


def fit(u0, target, guess, iterations=30, rate=0.05):
    """Plain gradient descent on kappa."""
    kappa = np.array([guess])
    for it in range(iterations):
        loss, dkappa, _ = gradients(kappa, u0, target)
        kappa -= rate * dkappa
        if it % 5 == 0 or it == iterations - 1:
            print(f"  step {it:2d}: loss {loss:.3e}  kappa = {kappa[0]:.6f}")
    return kappa[0]


def main() -> int:
    u0 = initial_profile()
    truth = np.array([0.3])
    target = simulate(truth, u0, np.zeros(CELLS))[0][STEPS]  # what a measurement would have found
    kappa = np.array([0.2])
    loss, dkappa, du0 = gradients(kappa, u0, target)
    cells = [5, 19, 32, 45, 60]
    fd_kappa, fd_u0 = finite_differences(kappa, u0, target, cells)
    error = max(abs(dkappa[0] - fd_kappa) / abs(fd_kappa), np.max(np.abs(du0[cells] - fd_u0)) / np.max(np.abs(fd_u0)))
    print(f"{CELLS} cells, {STEPS} steps, kappa = {kappa[0]}: loss {loss:.6e}")
    print(f"  d loss / d kappa: tape {dkappa[0]:+.10e}, central differences {fd_kappa:+.10e}")
    for c, got, want in zip(cells, du0[cells], fd_u0):
        print(f"  d loss / d u0[{c:2d}]: tape {got:+.10e}, central differences {want:+.10e}")
    print(f"  largest relative difference: {error:.1e}")
    print("fitting kappa from 0.2 by gradient descent:")
    found = fit(u0, target, guess=0.2)
    ok = error < 1e-6 and abs(found - truth[0]) < 1e-5
    print(f"found kappa = {found:.6f} (true {truth[0]}): {'ok' if ok else 'WRONG'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
