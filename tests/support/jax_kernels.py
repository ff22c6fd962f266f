"""Kernels the JAX tests share (tests/jax)."""

from __future__ import annotations

import gpuc


@gpuc.kernel
def heat_fixed_ends(u, rate, out):
    """One explicit heat step with fixed ends: each item reads its neighbours, and is linear in `u`."""
    i = gpuc.index()
    n = u.shape[0]
    if i == 0 or i == n - 1:
        out[i] = u[i]
    else:
        out[i] = u[i] + rate * (u[i - 1] - 2.0 * u[i] + u[i + 1])
