"""Typing that needs a second look: a loop's first round may see a variable with its entry's type only (an
error there is not final until the header settles), and recursive calls may assume a return type the
returns then widen (the function is typed again, as Numba does). Compared against Python."""

from __future__ import annotations

import numpy as np
import pytest

import gpuc

from retyping_kernels import (even, halves_until, power, run_even, run_halves, run_power, run_still_wrong, run_wraps,
                              wraps_in_loop)

pytestmark = pytest.mark.devices("cpu", "opencl")


@pytest.mark.parametrize("u, n", [(7, 0), (7, 1), (7, 3), (4_000_000_000, 5)])
def test_a_loop_header_widens_what_its_first_round_saw(u, n):
    out = np.zeros(1)
    run_wraps[1](out, np.uint32(u), n)
    assert out[0] == wraps_in_loop(np.uint32(u), n) or (n == 0 and out[0] == u)


@pytest.mark.parametrize("u, limit", [(1000, 1), (50, 3), (7, 100)])
def test_a_while_loop_widens_too(u, limit):
    out = np.zeros(1)
    run_halves[1](out, u, float(limit))
    assert out[0] == halves_until(u, float(limit))


@pytest.mark.parametrize("n, x", [(0, 1.5), (3, 1.5), (6, -0.5)])
def test_recursion_whose_returns_widen_is_typed_again(n, x):
    out = np.zeros(1)
    run_power[1](out, n, x)
    assert out[0] == power(n, x)


@pytest.mark.parametrize("n", [0, 1, 4, 7])
def test_mutual_recursion_is_typed_again_as_a_whole(n):
    out = np.zeros(1)
    run_even[1](out, n, 1.5)
    assert out[0] == even(n, 1.5)


def test_an_error_that_stays_one_is_still_located():
    with pytest.raises(gpuc.CompilationError, match=r"retyping_kernels.py:\d+:\d+: the literal -4 does not fit in "
                                                    r"uint32"):
        run_still_wrong[1](np.zeros(1), np.uint32(7), 3)
