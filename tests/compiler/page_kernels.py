"""A kernel for the pipeline page tests: a derivative (the autodiff plugin fires) of a func."""

import math

import gpuc


@gpuc.func
def wave(x):
    return math.sin(x) * x


@gpuc.kernel
def scaled_derivative(x, y):
    i = gpuc.index()
    y[i] = 2.0 * gpuc.derivative(wave, x[i])


@gpuc.kernel
def mistake(x):
    i = gpuc.index()
    x[i] = undefined_name + 1  # noqa: F821 - the mistake the error-trimming test makes
