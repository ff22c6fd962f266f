"""A func's parameters annotated with number types convert what they are passed, as Numba converts the arguments
of a function with a declared signature (docs/frontend.md "Annotations"): `float64` to a `gpuc.float32`
parameter rounds to float32, an integer to a float parameter converts, a float to an integer parameter
converts as `int(...)` does. The reference is NumPy's cast of each argument to the declared type (and,
where Numba is installed, Numba running the same functions with the declared signature)."""

from __future__ import annotations

import numpy as np
import pytest

import gpuc
from gpuc import float32, float64, int32, int64, uint32, uint64

from support.native import native

# The tests that launch kernels or run funcs (support.native) run natively and through OpenCL.
ON_DEVICES = pytest.mark.devices("cpu", "opencl")

try:
    import numba
except ImportError:  # pragma: no cover - numba is an optional anchor
    numba = None


@gpuc.func
def scaled(x: gpuc.float32, n: gpuc.int32):
    return x * n


@gpuc.func
def call_scaled(a, b):
    return scaled(a, b)


@gpuc.func
def widened(x: gpuc.float64, u: gpuc.uint64):
    return x + u


@gpuc.func
def call_widened(a, b):
    return widened(a, b)


def numpy_scaled(a, b):
    return np.float32(a) * np.int32(b)


def numpy_widened(a, b):
    return np.float64(a) + np.uint64(b)


CASES = [
    (call_scaled, numpy_scaled, (float64, int64), [(0.1, 3), (1e-3, -7), (3.4e38, 2), (-2.5, 0)]),
    (call_scaled, numpy_scaled, (int64, int32), [(16777217, 3), (-5, 4)]),
    (call_scaled, numpy_scaled, (float32, uint32), [(2.5, 3)]),
    (call_widened, numpy_widened, (int32, uint32), [(-3, 7), (2**31 - 1, 2**32 - 1)]),
    (call_widened, numpy_widened, (float32, int32), [(0.1, 5)]),
]
NUMPY = {float32: np.float32, float64: np.float64, int32: np.int32, int64: np.int64, uint32: np.uint32,
         uint64: np.uint64}


@ON_DEVICES
@pytest.mark.parametrize("fn, reference, argtypes, values", CASES,
                         ids=lambda v: getattr(getattr(v, "py_func", None), "__name__", None))
def test_arguments_convert_to_the_annotated_types(fn, reference, argtypes, values):
    run = native(fn, argtypes)
    for a, b in values:
        a, b = NUMPY[argtypes[0]](a), NUMPY[argtypes[1]](b)
        with np.errstate(all="ignore"):
            want = reference(a, b)
        got = run(a, b)
        assert np.asarray(got).astype(want.dtype).tobytes() == np.asarray(want).tobytes(), (a, b, got, want)


@ON_DEVICES
@pytest.mark.skipif(numba is None, reason="numba is an optional anchor")
def test_numba_converts_to_a_declared_signature_the_same_way():
    declared = numba.njit("float64(float32, int32)")(scaled.py_func)

    @numba.njit
    def call(a, b):
        return declared(a, b)

    for a, b in [(0.1, 3), (1e-3, -7), (-2.5, 0)]:
        assert call(a, b) == native(call_scaled, (float64, int64))(a, b)


@gpuc.func
def literal_args():
    return scaled(0.1, 2) + widened(1, 7)


@ON_DEVICES
def test_literals_take_the_annotated_types():
    assert native(literal_args, ())() == np.float32(0.1) * np.int32(2) + 8.0


@gpuc.func
def small(n: gpuc.int32):
    return n


@gpuc.func
def too_big():
    return small(2**40)


def test_a_literal_that_does_not_fit_the_annotation_is_a_located_error():
    with pytest.raises(gpuc.CompilationError, match="does not fit") as info:
        gpuc.code_llvm(too_big, ())
    assert "test_annotated_params.py:" in str(info.value)


@gpuc.func
def takes_array(xs: gpuc.Array[gpuc.float32, 1]):
    return xs[0]


@gpuc.func
def passes_wrong_array(xs):
    return takes_array(xs)


def test_arrays_are_still_checked_not_converted():
    with pytest.raises(gpuc.CompilationError, match="parameter xs is annotated"):
        gpuc.code_llvm(passes_wrong_array, (gpuc.Array[float64, 1],))


@gpuc.func
def narrowed(x, c) -> gpuc.float32:
    if c > 0:
        return x * 3
    return 0.1


@gpuc.func
def widened_return(x: gpuc.int32) -> gpuc.float64:
    return x // 2


@ON_DEVICES
def test_a_number_return_annotation_converts_the_value_returned():
    from gpuc.frontend.passes.inference import Typing
    assert Typing(gpuc.NativeTarget()).function(narrowed, (float64, int64)).return_type == float32
    run = native(narrowed, (float64, int64))
    assert run(0.1, 1) == np.float32(0.1 * 3) and run(0.1, 0) == np.float32(0.1)
    assert native(widened_return, (int32,))(np.int32(-7)) == -4.0
