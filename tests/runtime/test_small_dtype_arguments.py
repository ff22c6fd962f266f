"""Arguments of the small dtypes (int8, uint8, int16, uint16, float16): launches on the CPU and through OpenCL,
the CPU launcher's checks and argv slots, and CUDA's kernelParams (marshalling only: no GPU needed), against the
PTX parameters gpuc declares."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest

import gpuc
from gpuc.runtime import KernelSignature, launch, load
from gpuc.runtime.cuda import marshal

SMALL = ["int8", "uint8", "int16", "uint16", "float16"]


@gpuc.kernel
def _store(out, a, b, c, d, h):
    i = gpuc.index()
    out[i] = float(a) + float(b) * 10.0 + float(c) * 100.0 + float(d) * 1000.0 + float(h) * 0.5


TYPES = (gpuc.Array[gpuc.float64, 1], gpuc.int8, gpuc.uint8, gpuc.int16, gpuc.uint16, gpuc.float16)


def _module():
    return load(gpuc.CompilerJob((_store, TYPES), gpuc.CompilerConfig(gpuc.NativeTarget(), kernel=True)))


SPEC = [("array", np.float64, 1), ("scalar", np.int8), ("scalar", np.uint8), ("scalar", np.int16),
        ("scalar", np.uint16), ("scalar", np.float16)]


@pytest.mark.devices("cpu", "opencl")
def test_scalars_of_every_small_dtype_reach_the_kernel():
    out = np.zeros(3)
    _store[3](out, np.int8(-5), np.uint8(250), np.int16(-300), np.uint16(60000), np.float16(1.5))
    assert (out == -5 + 2500 - 30000 + 60_000_000 + 0.75).all()
    _store[3](out, np.int8(-128), np.uint8(255), np.int16(32767), np.uint16(0), np.float16(65504.0))
    assert (out == -128 + 2550 + 3276700 + 32752.0).all()


@pytest.mark.devices("cpu", "opencl")
@pytest.mark.parametrize("t", SMALL)
def test_arrays_of_a_small_dtype_reach_the_kernel(t):
    @gpuc.kernel
    def shift(dst, src):
        i = gpuc.index()
        dst[i] = src[i] + src[(i + 1) % len(src)]

    src = np.arange(-3, 9).astype(t)
    dst = np.zeros_like(src)
    shift[len(src)](dst, src)
    np.testing.assert_array_equal(dst, src + np.roll(src, -1))


def test_scalars_through_the_cpu_launcher():
    out = np.zeros(3)
    module = _module()
    launch(module, 3, (out, -128, 255, 32767, 0, 65504.0), signature=KernelSignature.from_spec(SPEC))
    assert (out == -128 + 2550 + 3276700 + 32752.0).all()


@pytest.mark.parametrize("args, error, message", [
    ((np.zeros(3), 128, 0, 0, 0, 0.0), OverflowError, "128 does not fit in int8"),
    ((np.zeros(3), 0, -1, 0, 0, 0.0), OverflowError, "-1 does not fit in uint8"),
    ((np.zeros(3), 0, 0, 1 << 15, 0, 0.0), OverflowError, "32768 does not fit in int16"),
    ((np.zeros(3), 0, 0, 0, 1 << 16, 0.0), OverflowError, "65536 does not fit in uint16"),
    ((np.zeros(3), 0, 0, 0, 0, "1"), TypeError, "must be a number"),
    ((np.zeros(3, np.float16), 0, 0, 0, 0, 0.0), TypeError, "must hold float64, not '<f2' \\(float16\\)"),
])
def test_launch_checks(args, error, message):
    with pytest.raises(error, match=message):
        launch(_module(), 3, args, signature=KernelSignature.from_spec(SPEC))


def test_float16_scalars_round_as_numpy_does():
    out = np.zeros(1)
    for value in (0.1, 1e6, -1e6, 2.0 ** -30, 65519.0, 65520.0):
        launch(_module(), 1, (out, 0, 0, 0, 0, value), signature=KernelSignature.from_spec(SPEC))
        with np.errstate(over="ignore"):
            assert out[0] == float(np.float16(value)) * 0.5, value


@pytest.mark.parametrize("t", SMALL)
def test_arrays_of_a_small_dtype_are_checked(t):
    @gpuc.kernel
    def copy(dst, src):
        i = gpuc.index()
        dst[i] = src[i]

    module = load(gpuc.CompilerJob((copy, (gpuc.Array[gpuc.frontend.as_type(t), 1],) * 2),
                                   gpuc.CompilerConfig(gpuc.NativeTarget(), kernel=True)))
    signature = KernelSignature.from_spec([("array", t, 1), ("array", t, 1)])
    src, dst = np.arange(5).astype(t), np.zeros(5, t)
    launch(module, 5, (dst, src), signature=signature)
    assert (dst == src).all()
    other = "int32" if t != "int32" else "int64"
    with pytest.raises(TypeError, match=f"must hold {t}, not '{np.dtype(other).str}'"):
        launch(module, 5, (dst, src.astype(other)), signature=signature)


# -- CUDA: kernelParams ----------------------------------------------------------------------------------------


class FakeGPUArray:
    def __init__(self, shape, typestr, ptr=0x7000_0000):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False),
                                         "strides": None, "version": 3}


def test_cuda_params_of_small_dtypes():
    sig = KernelSignature.from_spec([("array", np.uint8, 3)] + SPEC[1:], launch="none")
    packed = marshal(sig, (FakeGPUArray((4, 5, 3), "|u1", 0x1000), -5, 250, -300, 60000, 1.5))
    assert [ctypes.sizeof(v) for v in packed.values] == [8] * 7 + [1, 1, 2, 2, 2]
    assert [v.value for v in packed.values[:7]] == [0x1000, 4, 5, 3, 15, 3, 1]
    assert [v.value for v in packed.values[7:]] == [-5, 250, -300, 60000, int(np.float16(1.5).view(np.uint16))]
    with pytest.raises(TypeError, match="must hold uint8, not '<i2'"):
        marshal(sig, (FakeGPUArray((4, 5, 3), "<i2"), 0, 0, 0, 0, 0.0))


def test_cuda_params_match_the_ptx_parameters():
    # cuLaunchKernel copies as many bytes from each kernelParams pointer as the PTX .param declares
    ptx = gpuc.compile(gpuc.CompilerJob((_store, TYPES), gpuc.CompilerConfig(gpuc.PTXTarget(), kernel=True)),
                       "asm").output
    # `.param .u16 name`, or a half as bytes: `.param .align 2 .b8 name[2]`
    lines = re.findall(r"^\s*\.param [^\n]*", ptx, re.M)
    declared = [int(re.search(r"\[(\d+)\]", line)[1]) if "[" in line else int(re.search(r"\.[usb](\d+)", line)[1]) // 8
                for line in lines]
    sig = KernelSignature.from_spec(SPEC, launch="sizes")
    packed = marshal(sig, (FakeGPUArray((3,), "<f8"), 1, 2, 3, 4, 0.5))
    assert [ctypes.sizeof(v) for v in packed.values] == declared
