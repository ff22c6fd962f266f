"""CUDA launch marshalling without a GPU: signatures, __cuda_array_interface__, kernelParams, grid/block."""

from __future__ import annotations

import ctypes
import enum
import os
import re
from types import SimpleNamespace

import numpy as np
import pytest

import gpuc.cuda
from gpuc.runtime import cuda as rt
from gpuc.runtime.cuda import KernelSignature, launch_config, marshal, parse_cuda_array

from support import cuda_kernels


class FakeGPUArray:
    """Anything exposing __cuda_array_interface__, as CuPy and PyTorch tensors do."""

    def __init__(self, shape, typestr="<f4", ptr=0x7000_0000, strides=None, **extra):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False),
                                         "strides": strides, "version": 3, **extra}


def read_params(packed, ctypes_types):
    """Read each kernel parameter back through the void** array, as cuLaunchKernel would."""
    assert len(packed) == len(ctypes_types)
    return [t.from_address(packed.pointers[i]).value for i, t in enumerate(ctypes_types)]


# -- signatures -------------------------------------------------------------------------------

def test_signature_accepts_names_numpy_dtypes_and_ctypes():
    sig = KernelSignature.from_spec([("scalar", "float32"), ("scalar", np.int64), ("scalar", ctypes.c_double),
                                     ("array", np.dtype("int32"), 2)])
    assert [str(p) for p in sig.params] == ["float32", "int64", "float64", "array int32[2d]"]
    assert sig.llvm_types() == ("float", "i64", "double", "ptr", "i64", "i64", "i64", "i64")
    assert KernelSignature(sig.params, launch="sizes").entry_types() == sig.llvm_types() + ("i64",) * 3
    assert KernelSignature.from_spec([("scalar", "bool")], launch="none").entry_types() == ("i1",)


@pytest.mark.parametrize("spec, message", [
    ([("array", "float32", 4)], "ndim 1-3"),
    ([("vector", "float32")], "bad kernel parameter 0"),
    ([("scalar", "clongdouble")], "not '<c32'"),
    ([("scalar", ">f4")], "not '>f4'"),
    ([("scalar", "nonsense")], "not a scalar type"),
])
def test_bad_signatures_are_rejected(spec, message):
    with pytest.raises((TypeError, ValueError), match=message):
        KernelSignature.from_spec(spec)


# -- __cuda_array_interface__ -----------------------------------------------------------------

def test_c_contiguous_arrays_get_element_strides():
    view = parse_cuda_array(FakeGPUArray((4, 5, 6), "<f8", ptr=0x1000))
    assert (view.ptr, view.shape, view.strides, view.dtype) == (0x1000, (4, 5, 6), (30, 6, 1), np.float64)
    assert view.c_contiguous and view.nbytes == 4 * 5 * 6 * 8


def test_byte_strides_become_element_strides():
    # a transposed 3x4 float32 array, and a reversed view with a negative stride
    assert parse_cuda_array(FakeGPUArray((4, 3), strides=(4, 16))).strides == (1, 4)
    assert parse_cuda_array(FakeGPUArray((8,), "<i8", strides=(-8,))).strides == (-1,)
    assert not parse_cuda_array(FakeGPUArray((4, 3), strides=(4, 16))).c_contiguous


def test_strides_that_split_elements_are_rejected():
    with pytest.raises(ValueError, match="byte stride 6, not a multiple of its item size 4"):
        parse_cuda_array(FakeGPUArray((3,), strides=(6,)))


@pytest.mark.parametrize("obj, error, message", [
    (np.zeros(3), TypeError, "to_device"),
    ([1, 2], TypeError, "not list"),
    (FakeGPUArray((3,), mask=object()), ValueError, "masked"),
    (FakeGPUArray((-1,)), ValueError, "negative extent"),
    (FakeGPUArray((3, 3), strides=(4,)), TypeError, "1 strides for 2 dimensions"),
    (SimpleNamespace(__cuda_array_interface__={"shape": (3,)}), TypeError, "malformed"),
])
def test_malformed_arrays_are_rejected(obj, error, message):
    with pytest.raises(error, match=message):
        parse_cuda_array(obj)


def test_stream_is_read_from_version_3_only():
    assert parse_cuda_array(FakeGPUArray((3,), stream=42)).stream == 42
    old = FakeGPUArray((3,))
    old.__cuda_array_interface__.update(version=2, stream=42)
    assert parse_cuda_array(old).stream is None


# -- kernelParams -----------------------------------------------------------------------------

def test_saxpy_params_round_trip_through_the_pointer_array():
    sig = KernelSignature.from_spec(cuda_kernels.SAXPY_SIGNATURE, launch="sizes")
    x = FakeGPUArray((100,), ptr=0x10000)
    y = FakeGPUArray((50,), ptr=0x20000, strides=(8,))
    packed = marshal(sig, (2.5, x, y), (100, 1, 1))
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    assert read_params(packed, [ctypes.c_float, ptr, i64, i64, ptr, i64, i64, i64, i64, i64]) == \
        [2.5, 0x10000, 100, 1, 0x20000, 50, 2, 100, 1, 1]
    assert packed.address == ctypes.addressof(packed.pointers)


def test_every_scalar_width_is_packed_at_its_size():
    sig = KernelSignature.from_spec(cuda_kernels.SCALARS_SIGNATURE, launch="none")
    packed = marshal(sig, (FakeGPUArray((5,), "<f8"), -7, 2**40 + 3, 1.25, True, np.float32(0.5)))
    assert [ctypes.sizeof(v) for v in packed.values] == [8, 8, 8, 4, 8, 8, 1, 4]
    assert [v.value for v in packed.values[3:]] == [-7, 2**40 + 3, 1.25, True, 0.5]


@pytest.mark.parametrize("ir, entry, spec", [
    (cuda_kernels.SAXPY, "saxpy", cuda_kernels.SAXPY_SIGNATURE),
    (cuda_kernels.ADD2D, "add2d", cuda_kernels.ADD2D_SIGNATURE),
    (cuda_kernels.SCALARS, "scalars", cuda_kernels.SCALARS_SIGNATURE),
])
def test_packed_sizes_match_the_ptx_parameters(ir, entry, spec):
    # cuLaunchKernel copies as many bytes from each kernelParams pointer as the PTX .param declares
    sizes = {"8": 1, "16": 2, "32": 4, "64": 8}
    ptx = cuda_kernels.ptx_for(ir, entry, "sm_90")
    declared = [sizes[bits] for bits in re.findall(r"\.param \.[usbf](\d+) ", ptx)]
    sig = KernelSignature.from_spec(spec, launch="sizes")
    args = [FakeGPUArray((2,) * p.ndim, p.dtype.str) if isinstance(p, rt.ArrayParam) else p.dtype.type(1)
            for p in sig.params]
    assert [ctypes.sizeof(v) for v in marshal(sig, args).values] == declared


@pytest.mark.parametrize("args, error, message", [
    ((1.0, FakeGPUArray((3,))), TypeError, r"takes 3 argument\(s\) \(float32, array float32\[1d\], .*\), got 2"),
    ((1.0, FakeGPUArray((3,), "<f8"), FakeGPUArray((3,))), TypeError, "argument 1 must hold float32, not '<f8'"),
    ((1.0, FakeGPUArray((3,), ">f4"), FakeGPUArray((3,))), TypeError, "not '>f4'"),
    ((1.0, FakeGPUArray((3, 3)), FakeGPUArray((3,))), TypeError, "argument 1 must have 1 dimension"),
    (("2", FakeGPUArray((3,)), FakeGPUArray((3,))), TypeError, "argument 0 .* must be a number"),
    ((1.0, np.ones(3, np.float32), FakeGPUArray((3,))), TypeError, "gpuc.cuda.to_device"),
])
def test_bad_arguments_are_reported_before_launch(args, error, message):
    with pytest.raises(error, match=message):
        marshal(KernelSignature.from_spec(cuda_kernels.SAXPY_SIGNATURE, launch="sizes"), args)


def test_integer_scalars_are_range_checked():
    sig = KernelSignature.from_spec([("scalar", "int32"), ("scalar", "uint32"), ("scalar", "bool")], launch="none")
    with pytest.raises(OverflowError, match="argument 0 .* 2147483648 does not fit in int32"):
        marshal(sig, (2**31, 0, False))
    with pytest.raises(OverflowError, match="-1 does not fit in uint32"):
        marshal(sig, (0, -1, False))
    with pytest.raises(TypeError, match="must be an integer, not float"):
        marshal(sig, (1.5, 0, False))
    with pytest.raises(TypeError, match="must be a bool"):
        marshal(sig, (0, 0, 1))


def test_foreign_streams_are_collected_for_synchronization():
    sig = KernelSignature.from_spec([("array", "float32", 1)] * 2, launch="sizes")
    assert marshal(sig, (FakeGPUArray((3,), stream=99), FakeGPUArray((3,)))).streams == [99]


# -- grid and block ---------------------------------------------------------------------------

@pytest.mark.parametrize("n, block, grid, threads, launch_size", [
    (1000, None, (4, 1, 1), (256, 1, 1), (1000, 1, 1)),
    (256, None, (1, 1, 1), (256, 1, 1), (256, 1, 1)),
    ((100, 33), None, (7, 3, 1), (16, 16, 1), (100, 33, 1)),
    ((9, 9, 9), None, (2, 2, 3), (8, 8, 4), (9, 9, 9)),
    (1000, 128, (8, 1, 1), (128, 1, 1), (1000, 1, 1)),
    ([10, 10], (32, 4), (1, 3, 1), (32, 4, 1), (10, 10, 1)),
])
def test_launch_config(n, block, grid, threads, launch_size):
    config = launch_config(n, block)
    assert (config.grid, config.block, config.launch_size, config.empty) == (grid, threads, launch_size, False)


def test_empty_launch():
    assert launch_config((0, 5)).empty


@pytest.mark.parametrize("n, block, error, message", [
    ((1, 2, 3, 4), None, ValueError, "1 to 3"),
    (-1, None, ValueError, "non-negative"),
    (1.5, None, TypeError, "an int or a tuple"),
    (100, 2048, ValueError, "not a valid CUDA block"),
    ((100, 100), (64, 64), ValueError, "at most 1024 threads"),
    ((10, 2**20), None, ValueError, "beyond CUDA's limit"),
])
def test_bad_launch_sizes(n, block, error, message):
    with pytest.raises(error, match=message):
        launch_config(n, block)


def test_a_block_of_another_rank_is_padded_with_ones():
    assert launch_config((100, 100), 64).block == (64, 1, 1)
    assert launch_config((100, 100), 64).grid == (2, 100, 1)
    assert launch_config(8, (4, 2)).grid == (2, 1, 1)


# -- no device --------------------------------------------------------------------------------

class _CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_NO_DEVICE = 100


def test_a_driver_without_devices_is_reported():
    def no_device(*args):
        return (_CUresult.CUDA_ERROR_NO_DEVICE,)
    driver = SimpleNamespace(CUresult=_CUresult, cuInit=no_device,
                             cuGetErrorName=lambda e: (_CUresult.CUDA_SUCCESS, e.name.encode()),
                             cuGetErrorString=lambda e: (_CUresult.CUDA_SUCCESS, b"no CUDA-capable device is detected"))
    with pytest.raises(rt.CudaUnavailableError) as info:
        rt._open_session(driver)
    assert str(info.value) == ("no CUDA device: cuInit failed: CUDA_ERROR_NO_DEVICE "
                               "(no CUDA-capable device is detected)")
    assert isinstance(info.value, RuntimeError) and info.value.code == _CUresult.CUDA_ERROR_NO_DEVICE


def test_a_missing_driver_library_is_reported():
    def missing(*args):
        raise RuntimeError('"cuda" is an NVIDIA driver library and can only be found via system search')
    with pytest.raises(rt.CudaUnavailableError, match=r"libcuda\.so\) could not be loaded: \"cuda\" is"):
        rt._open_session(SimpleNamespace(CUresult=_CUresult, cuInit=missing))


@pytest.mark.skipif(gpuc.cuda.available(), reason="a CUDA device is present")
def test_without_a_device_everything_says_why():
    reason = gpuc.cuda.unavailable_reason()
    assert reason.startswith("no CUDA device: ")
    for call in (gpuc.cuda.device_info, gpuc.cuda.synchronize, lambda: gpuc.cuda.to_device(np.ones(3)),
                 lambda: gpuc.cuda.device_array(3), lambda: gpuc.cuda.CudaModule.from_ptx("", "k")):
        with pytest.raises(gpuc.cuda.CudaUnavailableError, match="^no CUDA device: "):
            call()


# -- the driver glue, against a recording fake driver ----------------------------------------

class FakeDriver:
    """Records driver calls; returns CUDA_SUCCESS unless a call is listed in `fail`."""

    CUresult = _CUresult
    CUjit_option = enum.IntEnum("CUjit_option", {"CU_JIT_ERROR_LOG_BUFFER": 5,
                                                 "CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES": 6,
                                                 "CU_JIT_INFO_LOG_BUFFER": 3,
                                                 "CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES": 4})

    def __init__(self, fail=()):
        self.calls, self.fail = [], set(fail)

    def CUstream(self, handle):
        return ("stream", handle)

    def cuGetErrorName(self, err):
        return _CUresult.CUDA_SUCCESS, b"CUDA_ERROR_INVALID_PTX"

    def cuGetErrorString(self, err):
        return _CUresult.CUDA_SUCCESS, b"a PTX JIT compilation failed"

    def __getattr__(self, name):
        def call(*args):
            self.calls.append((name, args))
            if name in self.fail:
                if name == "cuModuleLoadDataEx":
                    args[3][0][:9] = b"line 5: x"  # the driver writes the JIT's error log
                return (_CUresult.CUDA_ERROR_NO_DEVICE,)
            return {"cuModuleLoadDataEx": (_CUresult.CUDA_SUCCESS, "module"),
                    "cuModuleGetFunction": (_CUresult.CUDA_SUCCESS, "function"),
                    "cuMemAlloc": (_CUresult.CUDA_SUCCESS, 0xD000)}.get(name, (_CUresult.CUDA_SUCCESS,))
        return call


@pytest.fixture
def fake_driver(monkeypatch):
    def install(fail=()):
        driver = FakeDriver(fail)
        info = rt.DeviceInfo(0, "Fake", "sm_90", 1 << 30, 1, "13.0")
        monkeypatch.setattr(rt, "_session", rt._Session(driver, "device", "context", info, os.getpid()))
        return driver
    return install


def test_a_launch_makes_these_driver_calls(fake_driver):
    driver = fake_driver()
    module = rt.CudaModule.from_ptx("PTX", "saxpy")
    launcher = module.launcher(KernelSignature.from_spec(cuda_kernels.SAXPY_SIGNATURE, launch="sizes"))
    launcher[1000](2.0, FakeGPUArray((1000,), stream=7), FakeGPUArray((1000,)))
    names = [name for name, _ in driver.calls if name != "cuCtxSetCurrent"]
    assert names == ["cuModuleLoadDataEx", "cuModuleGetFunction", "cuStreamSynchronize", "cuLaunchKernel",
                     "cuCtxSynchronize"]
    load = dict(driver.calls)["cuModuleLoadDataEx"]
    assert load[0] == b"PTX\0" and load[1] == 4 and load[2][0] == driver.CUjit_option.CU_JIT_ERROR_LOG_BUFFER
    f, *dims, shared, stream, params, extra = dict(driver.calls)["cuLaunchKernel"]
    assert (f, dims, shared, stream, extra) == ("function", [4, 1, 1, 256, 1, 1], 0, ("stream", 0), 0)
    assert isinstance(params, int) and params != 0
    assert dict(driver.calls)["cuStreamSynchronize"] == (("stream", 7),)
    module.close()
    assert driver.calls[-1] == ("cuModuleUnload", ("module",))


def test_a_jit_failure_carries_the_log(fake_driver):
    fake_driver(fail={"cuModuleLoadDataEx"})
    with pytest.raises(rt.CudaError, match="could not load the PTX for 'k': cuModuleLoadDataEx failed: "
                                           "CUDA_ERROR_INVALID_PTX .*\nJIT error log:\nline 5: x") as info:
        rt.CudaModule.from_ptx(b"PTX", "k")
    assert info.value.log == "line 5: x"


def test_a_failing_kernel_is_reported_at_the_launch(fake_driver):
    fake_driver(fail={"cuCtxSynchronize"})
    with pytest.raises(rt.CudaError, match="the kernel failed: cuCtxSynchronize failed"):
        rt.launch("function", (1, 1, 1), (1, 1, 1), None)


def test_device_arrays_through_the_driver(fake_driver):
    driver = fake_driver()
    host = np.arange(6, dtype=np.int32).reshape(2, 3)
    device = gpuc.cuda.to_device(host)
    assert device.__cuda_array_interface__["shape"] == (2, 3)
    device.copy_to_host()
    device.free()
    names = [(name, args[-1] if name != "cuMemFree" else None) for name, args in driver.calls
             if name != "cuCtxSetCurrent"]
    assert names == [("cuMemAlloc", 24), ("cuMemcpyHtoD", 24), ("cuMemcpyDtoH", 24), ("cuMemFree", None)]


def test_llvm_spelled_scalars_are_signless():
    # the CPU runtime spells scalars as LLVM types; "float" there is 32 bits, not NumPy's float64
    sig = KernelSignature.from_spec([("scalar", "float"), ("scalar", "i32"), ("scalar", "i1"), ("scalar", "ptr")],
                                    launch="none")
    assert sig.entry_types() == ("float", "i32", "i1", "ptr")
    packed = marshal(sig, (0.5, 2**32 - 1, True, FakeGPUArray((3,), ptr=0xBEEF)))
    assert [ctypes.sizeof(v) for v in packed.values] == [4, 4, 1, 8]
    assert [v.value for v in packed.values] == [0.5, -1, True, 0xBEEF]
    with pytest.raises(OverflowError, match="4294967296 does not fit in i32"):
        marshal(sig, (0.5, 2**32, True, 0))


# -- launches without a bound check, and Python kernels through gpuc.runtime.dispatch ------------

@pytest.mark.parametrize("n, grid, block", [(1000, (4, 1, 1), (250, 1, 1)), (1009, (1009, 1, 1), (1, 1, 1)),
                                            ((100, 33), (10, 3, 1), (10, 11, 1)), ((9, 9, 9), (3, 3, 3), (3, 3, 3))])
def test_exact_launches_have_no_surplus_threads(n, grid, block):
    config = launch_config(n, exact=True)
    assert (config.grid, config.block) == (grid, block)
    assert all(g * b == e for g, b, e in zip(config.grid, config.block, config.launch_size))


def test_exact_launches_refuse_a_block_that_does_not_divide():
    assert launch_config(12, 4, exact=True).grid == (3, 1, 1)
    with pytest.raises(ValueError, match="does not divide the launch size"):
        launch_config(10, 4, exact=True)


class ParamReadingDriver(FakeDriver):
    """Also reads each kernel parameter at cuLaunchKernel, with the sizes of the loaded PTX's .params."""

    SIZES = {"8": 1, "16": 2, "32": 4, "64": 8}

    def __init__(self):
        super().__init__()
        self.sizes, self.launches = None, []

    def __getattr__(self, name):
        call = super().__getattr__(name)
        if name == "cuModuleLoadDataEx":
            def load(image, *rest):
                params = image.decode().split(".entry", 1)[1].split(")", 1)[0]
                self.sizes = [self.SIZES[b] for b in re.findall(r"\.param \.[usbf](\d+) ", params)]
                return call(image, *rest)
            return load
        if name == "cuLaunchKernel":
            def launch(f, *args):
                address = args[-2]
                pointers = (ctypes.c_void_p * len(self.sizes)).from_address(address)
                self.launches.append((args[:6], [ctypes.string_at(p, s) for p, s in zip(pointers, self.sizes)]))
                return call(f, *args)
            return launch
        return call


def test_python_kernels_launch_through_the_driver(monkeypatch):
    import gpuc

    driver = ParamReadingDriver()
    info = rt.DeviceInfo(0, "Fake", "sm_90", 1 << 30, 1, "13.0")
    monkeypatch.setattr(rt, "_session", rt._Session(driver, "device", "context", info, os.getpid()))

    @gpuc.kernel
    def fill(out, value):
        out[gpuc.index()] = value

    @gpuc.kernel
    def count(total):  # no index: the PTX has no launch-size parameters and no bound check
        gpuc.atomic_add(total, 0, 1)

    out = FakeGPUArray((1000,), "<f8", ptr=0xA000, stream=1)
    fill[1000](out, 2.5)
    dims, params = driver.launches[-1]
    i64 = [int.to_bytes(x, 8, "little", signed=True) for x in (1000, 1, 1000, 1, 1)]
    assert dims == (4, 1, 1, 256, 1, 1)
    assert params == [int.to_bytes(0xA000, 8, "little"), i64[0], i64[1], bytes(ctypes.c_double(2.5)), *i64[2:]]
    count[1009](FakeGPUArray((1,), "<i8", ptr=0xB000))
    dims, params = driver.launches[-1]
    assert dims == (1009, 1, 1, 1, 1, 1) and len(params) == 3  # exactly 1009 threads, as on the CPU
    lookups = [args for name, args in driver.calls if name == "cuModuleGetFunction"]
    assert len(lookups) == 2  # one per module: the launcher does not look its entry up twice
