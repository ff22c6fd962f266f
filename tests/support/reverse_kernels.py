"""Kernels and funcs the reverse-mode tests share (CPU and GPU): an elementwise map, a stencil reading
neighbours, a per-element loop with a run-time trip count, and a Horner loop."""

from __future__ import annotations

import math

import gpuc


@gpuc.kernel
def elementwise(x, y):
    i = gpuc.index()
    y[i] = math.sin(x[i]) * x[i]


@gpuc.kernel
def stencil(x, y):
    i = gpuc.index()
    n = x.shape[0]
    if i > 0 and i < n - 1:
        y[i] = 0.25 * x[i - 1] + 0.5 * x[i] * x[i] + 0.25 * x[i + 1]


@gpuc.kernel
def dynamic_loop(x, steps, y):
    i = gpuc.index()
    acc = x[i]
    for _ in range(steps[i]):
        acc = acc * 0.5 + math.sin(acc)
    y[i] = acc


@gpuc.func
def horner(x, n):
    acc = 0.0
    for i in range(n):
        acc = acc * x + (i + 1.0)
    return acc


def horner_slope(x, n):
    """d/dx of horner(x, n), by hand."""
    return sum((i + 1.0) * (n - 1 - i) * x ** (n - 2 - i) for i in range(n - 1))
