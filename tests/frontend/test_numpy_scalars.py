"""NumPy scalar types called in kernels convert like NumPy: np.int32(x), np.float32(x), np.bool_(x), ..."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gpuc

SUPPORTED = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.int64, np.uint32, np.uint64, np.float16,
             np.float32, np.float64]
INTEGERS = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.int64, np.uint32, np.uint64]


def converter(np_type):
    @gpuc.kernel
    def convert(out, x):
        i = gpuc.index()
        out[i] = np_type(x[i])
    return convert


# In range for every target type: NumPy's result is defined, and gpuc must give exactly it.
FLOATS = [0.0, -0.0, 0.5, 0.99, 1.0, 2.5, 7.9, 100.25, 2.0**31 - 1.0, 65535.75, 3e9, 1e-300]
SIGNED_FLOATS = FLOATS + [-0.5, -0.99, -1.0, -7.9, -2.0**31, -1e9]
INTS = [0, 1, -1, 7, -7, 2**31 - 1, -2**31, 2**31, 2**32 - 1, 2**32 + 5, 2**62 + 3, -2**63, 2**63 - 1]
# The tests that launch kernels run natively and through OpenCL.
ON_DEVICES = pytest.mark.devices("cpu", "opencl")


def numpy_result(np_type, value, source):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.array([source(value)]).astype(np_type)[0] if np_type is not np.bool_ else np.bool_(source(value))


@ON_DEVICES
@pytest.mark.parametrize("source", [np.float64, np.float32, np.int64, np.int32, np.uint32, np.uint64, np.bool_])
@pytest.mark.parametrize("np_type", SUPPORTED)
def test_conversion_matches_numpy(np_type, source):
    if source in (np.float64, np.float32):
        values = SIGNED_FLOATS if np.dtype(np_type).kind in "ifb" else FLOATS
        if np_type in INTEGERS:  # only values NumPy converts with a defined result
            info = np.iinfo(np_type)
            values = [v for v in values if info.min <= int(source(v)) <= info.max]  # exact
    elif source is np.bool_:
        values = [True, False]
    else:
        info = np.iinfo(source)
        values = [v for v in INTS if info.min <= v <= info.max]
    x = np.array(values, dtype=source)
    out = np.zeros(x.size, dtype=np_type)
    converter(np_type)[x.size](out, x)
    want = [numpy_result(np_type, v, source) for v in x]
    for v, got, w in zip(x, out, want):
        same_zero = np_type not in (np.float32, np.float64) or np.signbit(got) == np.signbit(w)
        assert got == w and same_zero, f"{np_type.__name__}({source.__name__}({v})) gave {got!r}, NumPy {w!r}"


@ON_DEVICES
@pytest.mark.parametrize("np_type", INTEGERS)
def test_out_of_range_floats_saturate(np_type):
    # NumPy's result is platform-defined here; gpuc documents saturation (NaN -> 0), never an undefined value
    info = np.iinfo(np_type)
    x = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30, float(info.max) * 2, -1.5])
    out = np.zeros(x.size, dtype=np_type)
    converter(np_type)[x.size](out, x)
    low = 0 if info.min == 0 else info.min
    assert out.tolist() == [0, info.max, low, info.max, low, info.max, max(-1, low)]


@ON_DEVICES
def test_same_as_gpuc_types_and_int():
    @gpuc.kernel
    def both(out, x):
        out[0] = np.int32(x) - gpuc.int32(x)
        out[1] = np.uint64(x) - gpuc.uint64(x)
        out[2] = np.int64(x) - int(x)

    out = np.ones(3, dtype=np.int64)
    both[1](out, 1e300)
    assert out.tolist() == [0, 0, 0]


@gpuc.kernel
def typed(out, x):
    a = np.float32(x) / np.float32(3)    # float32 arithmetic, as in NumPy
    b = np.uint32(x) + 1                  # a weak literal keeps uint32
    c = np.bool_(x)
    out[0] = a
    out[1] = b
    out[2] = c
    out[3] = np.int32(7) * 2


@ON_DEVICES
def test_result_types_follow_numpy():
    out = np.zeros(4)
    typed[1](out, 10.0)
    assert out[0] == float(np.float32(10.0) / np.float32(3))
    assert out.tolist()[1:] == [11.0, 1.0, 14.0]


@pytest.mark.parametrize("np_type", [np.longdouble])
def test_numpy_types_without_a_gpuc_type_are_located_errors(np_type):
    @gpuc.func
    def f(x):
        return np_type(x)

    with pytest.raises(gpuc.CompilationError) as info:
        gpuc.compile(gpuc.CompilerJob((f, (gpuc.int64,)), gpuc.CompilerConfig(gpuc.NativeTarget())))
    text = str(info.value)
    assert f"numpy.{np_type.__name__} has no gpuc type" in text and "numpy.int32" in text
    assert info.value.location is not None


@pytest.mark.parametrize("target", [gpuc.PTXTarget(), gpuc.GCNTarget(), gpuc.SPIRVTarget()])
def test_saturating_conversion_compiles_for_gpus(target, request):
    job = gpuc.CompilerJob((converter(np.uint32), (gpuc.Array[gpuc.uint32, 1], gpuc.Array[gpuc.float64, 1])),
                           gpuc.CompilerConfig(target))
    output = gpuc.compile(job, "obj" if isinstance(target, gpuc.SPIRVTarget) else "asm").output
    if isinstance(target, gpuc.PTXTarget):
        request.getfixturevalue("ptxas")(output)
    elif isinstance(target, gpuc.SPIRVTarget):
        request.getfixturevalue("spirv_val")(output)
