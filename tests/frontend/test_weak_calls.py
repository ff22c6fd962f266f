"""Python's math functions and number builtins of Python literals give Python numbers, which NumPy 2 treats as
weak (NEP 50): `x / math.exp(0.5)` keeps a float32 `x` float32. gpuc folds such calls into literals, so each
expression here has NumPy's result type and value (the reference: the same function run by Python on NumPy
scalars)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gpuc
from gpuc import float32, float64, int32, int64, uint32
from gpuc.frontend.passes.inference import Typing

from support.native import native

# The tests that launch kernels or run funcs (support.native) run natively and through OpenCL.
ON_DEVICES = pytest.mark.devices("cpu", "opencl")


@gpuc.func
def scaled_exp(x):
    return x / math.exp(0.5)


@gpuc.func
def constants(x):
    return x * math.sqrt(2.0) + math.log(10) - math.floor(2.5)


@gpuc.func
def builtins(x):
    return x + abs(-3) * min(2, 7) - max(1.5, 0.5) + int(2.9) + float(1)


@gpuc.func
def integer_math(x):
    return x + math.floor(7.5) + math.trunc(3.7)


@gpuc.func
def strong_numpy(x):
    return x * np.sqrt(2.0)   # NumPy's functions give NumPy scalars: strong float64


@gpuc.func
def domain_error(x):
    return x + math.sqrt(-1.0) * 0.0   # Python raises here; gpuc computes it (not folded): NaN


NUMPY = {float32: np.float32, float64: np.float64, int32: np.int32, int64: np.int64, uint32: np.uint32}


@ON_DEVICES
@pytest.mark.parametrize("fn", [scaled_exp, constants, builtins, integer_math, strong_numpy],
                         ids=lambda f: f.py_func.__name__)
@pytest.mark.parametrize("t", [float32, float64, int32, uint32], ids=str)
def test_math_of_literals_is_weak_as_in_numpy(fn, t):
    x = NUMPY[t](3)
    with np.errstate(all="ignore"):
        want = fn.py_func(x)
    got_type = Typing(gpuc.NativeTarget()).function(fn, (t,)).return_type
    assert np.dtype(NUMPY.get(got_type, np.float64)) == np.asarray(want).dtype, (got_type, type(want))
    got = native(fn, (t,))(x)
    assert np.asarray(got, want.dtype).tobytes() == np.asarray(want).tobytes(), (got, want)


@ON_DEVICES
def test_a_call_python_refuses_is_not_folded():
    assert Typing(gpuc.NativeTarget()).function(domain_error, (float32,)).return_type == float64
    assert math.isnan(native(domain_error, (float32,))(np.float32(1)))


@gpuc.func
def negative_to_unsigned(x):
    return x + math.trunc(-3.7)


def test_a_folded_call_that_does_not_fit_is_an_error_as_in_numpy():
    with pytest.raises(OverflowError):
        negative_to_unsigned.py_func(np.uint32(3))   # NumPy: -3 is out of bounds for uint32
    with pytest.raises(gpuc.CompilationError, match="does not fit|out of") as info:
        gpuc.code_llvm(negative_to_unsigned, (uint32,))
    assert "test_weak_calls.py:" in str(info.value)


@gpuc.func
def literal_max_index(i):
    return (max(0.5, 3), 2)[i]   # max(0.5, 3) is Python's int 3: both elements are int64


@ON_DEVICES
def test_a_folded_call_has_the_type_of_pythons_value():
    assert Typing(gpuc.NativeTarget()).function(literal_max_index, (int64,)).return_type == int64
    assert [native(literal_max_index, (int64,))(i) for i in (0, 1)] == [3, 2]
