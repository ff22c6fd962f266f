"""Kernels the inspection tests compile (kernels are compiled from real files)."""

import math

import gpuc


@gpuc.kernel(opt_level=3, vector_math=False)
def sine_scalar_math(x, y):
    i = gpuc.index()
    y[i] = math.sin(x[i])


@gpuc.kernel
def sine(x, y):
    i = gpuc.index()
    y[i] = math.sin(x[i])


@gpuc.kernel
def block_ids(out):
    i = gpuc.index(0)
    if i < len(out):
        out[i] = gpuc.block_index(0)
