"""Differential tests: every function in support.diff_funcs runs in the interpreter and through gpuc on the CPU."""

from __future__ import annotations

import numpy as np
import pytest

from support.diff_funcs import CASES
from support.native import assert_same, native, python_args

PARAMS = [pytest.param(fn, types, args, rtol, id=f"{fn.__name__}-{k}")
          for fn, types, cases, rtol in CASES for k, args in enumerate(cases)]


def test_enough_functions():
    assert len({fn for fn, *_ in CASES}) >= 40


@pytest.mark.devices("cpu", "opencl")
@pytest.mark.parametrize("fn, argtypes, args, rtol", PARAMS)
def test_same_results(fn, argtypes, args, rtol):
    py_args = python_args(argtypes, args)
    with np.errstate(all="ignore"):
        want = fn(*py_args)
    gpu_args = python_args(argtypes, args)
    got = native(fn, argtypes)(*gpu_args)
    if want is None:
        assert got is None
    else:
        assert_same(got, want, rtol)
    for k, (p, g) in enumerate(zip(py_args, gpu_args)):  # arrays the function wrote to
        if isinstance(p, np.ndarray):
            assert_same(g, p, rtol, path=f"argument {k}")
