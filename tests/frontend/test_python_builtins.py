"""Python's round, divmod, pow and sum in kernels (docs/frontend.md, "Expressions"): the values Python
computes, with the operators' promotion; located errors for the forms kernels do not take."""

from __future__ import annotations

import numpy as np
import pytest

import gpuc

pytestmark = pytest.mark.devices("cpu", "opencl")


@gpuc.kernel
def float_builtins(a, b, out, rounded):
    i = gpuc.index()
    x = a[i]
    y = b[i]
    d, m = divmod(x, y)
    out[i, 0] = d
    out[i, 1] = m
    out[i, 2] = pow(x, 2)
    out[i, 3] = pow(y, x)
    out[i, 4] = sum((x, y, 1.5))
    out[i, 5] = sum((x, y), 10)
    out[i, 6] = sum((x,))
    rounded[i] = round(x)


@gpuc.kernel
def int_builtins(a, b, out):
    i = gpuc.index()
    x = a[i]
    y = b[i]
    out[i, 0], out[i, 1] = divmod(x, y)
    out[i, 2] = pow(x, 3)
    out[i, 3] = sum((x, y, i))
    out[i, 4] = round(x)
    out[i, 5] = sum(())


def python_float_builtins(a, b):
    out, rounded = np.zeros((a.size, 7)), np.zeros(a.size, np.int64)
    for i, (x, y) in enumerate(zip(a.tolist(), b.tolist())):
        with np.errstate(all="ignore"):
            try:
                d, m = divmod(x, y)
            except ZeroDivisionError:  # NumPy's answers by zero, as the // and % operators give them
                d, m = np.divmod(np.float64(x), np.float64(y))
            try:
                p = pow(y, x)
            except (OverflowError, ZeroDivisionError):
                p = np.power(np.float64(y), np.float64(x))
            if isinstance(p, complex):  # a negative base to a fractional power: NaN, as ** gives it (NumPy's)
                p = np.power(np.float64(y), np.float64(x))
            try:
                x2 = pow(x, 2)
            except OverflowError:
                x2 = np.inf
        out[i] = [d, m, x2, p, sum((x, y, 1.5)), sum((x, y), 10), sum((x,))]
        rounded[i] = round(x) if abs(x) < 2**62 else 0
    return out, rounded


def test_float_values_are_pythons():
    rng = np.random.default_rng(3)
    a = np.concatenate([[2.5, 3.5, -2.5, 0.5, -0.5, -0.0, 7.25, 1e15 + 0.5], rng.normal(0, 10, 56)])
    b = np.concatenate([[2.0, -1.5, 0.75, 3.0, 1.0, 7.0, -0.25, 3.0], rng.normal(0, 3, 56)])
    out, rounded = np.zeros((a.size, 7)), np.zeros(a.size, np.int64)
    float_builtins[a.size](a, b, out, rounded)
    want, want_rounded = python_float_builtins(a, b)
    exact = [0, 1, 4, 5, 6]  # pow calls the target's pow (an ulp from libm's on vector and OpenCL paths)
    np.testing.assert_array_equal(out[:, exact], want[:, exact])
    np.testing.assert_allclose(out[:, 2:4], want[:, 2:4], rtol=1e-15, atol=0)
    np.testing.assert_array_equal(rounded, want_rounded)
    assert out[5, 6] == 0.0 and np.signbit(out[5, 6]) == np.signbit(0 + -0.0)  # sum((-0.0,)) is 0.0


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, np.int16, np.uint64])
def test_integer_values_are_pythons_where_they_fit(dtype):
    a = np.array([7, 0, 9, 100, 3], dtype)
    b = np.array([3, 5, 2, 7, 3], dtype)
    out = np.zeros((a.size, 6), np.int64)
    int_builtins[a.size](a, b, out)
    for i, (x, y) in enumerate(zip(a, b)):
        with np.errstate(over="ignore"):
            want = [*divmod(x, y), x ** 3, x + y + i, round(int(x)), 0]
        assert out[i].tolist() == [int(np.int64(w)) if not isinstance(w, int) else w for w in want], (i, x, y)


@gpuc.kernel
def round_digits(a, out):
    out[0] = round(a[0], 2)


@gpuc.kernel
def modular_pow(a, out):
    out[0] = pow(a[0], 2, 5)


@gpuc.kernel
def sum_of_array(a, out):
    out[0] = sum(a)


@pytest.mark.parametrize("kernel, message", [
    (round_digits, r"round\(x, ndigits\) is not supported in kernels"),
    (modular_pow, r"pow\(base, exp, mod\) is not supported in kernels"),
    (sum_of_array, r"sum\(\) in kernels takes a tuple of numbers, not a"),
])
def test_forms_kernels_do_not_take_are_located_errors(kernel, message):
    with pytest.raises(gpuc.CompilationError, match=message) as info:
        kernel[1](np.ones(2), np.zeros(1))
    assert "test_python_builtins.py:" in str(info.value)


@gpuc.kernel
def literal_pow(x, out, counts):
    out[0] = x + pow(2, 3)
    out[1] = x + 2 ** 3
    counts[1:] *= pow(-2, 2)


def test_pow_of_literals_is_the_literal_power():
    # pow(2, 3) was a strong int64 (x + pow(2, 3) computed in float64; `uint32_view *= pow(-2, 2)` refused)
    out, counts = np.zeros(2), np.arange(3, dtype=np.uint32)
    literal_pow[1](np.float32(0.1), out, counts)
    assert out[0] == out[1] == np.float64(np.float32(0.1) + np.float32(8))
    assert counts.tolist() == [0, 4, 8]
