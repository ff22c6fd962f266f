"""Kernels compiled to PTX by gpuc, loaded and launched through the CUDA driver on real arrays."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import gpuc.cuda as cuda

from support.cuda_kernels import (ADD2D, ADD2D_SIGNATURE, SAXPY, SAXPY_SIGNATURE, SCALARS, SCALARS_SIGNATURE, ptx_for)


def load(ir, entry, spec, cap):
    module = cuda.CudaModule.from_ptx(ptx_for(ir, entry, cap), entry)
    return module.launcher(cuda.KernelSignature(spec, launch="sizes"))  # the kernels take %gpuc.n0..n2


class StridedView:
    """A strided view of a DeviceArray, exported like a CuPy or PyTorch view would be."""

    def __init__(self, base, shape, byte_strides, offset=0):
        self.base = base
        iface = dict(base.__cuda_array_interface__)
        iface.update(shape=shape, strides=byte_strides, data=(base.ptr + offset, False))
        self.__cuda_array_interface__ = iface


def test_device_info(cap):
    info = cuda.device_info()
    assert cap.startswith("sm_") and info.total_memory > 0 and info.multiprocessors > 0 and info.name


@pytest.mark.parametrize("n", [1, 255, 256, 1000, 1 << 20])
def test_saxpy(cap, n):
    rng = np.random.default_rng(n)
    x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    load(SAXPY, "saxpy", SAXPY_SIGNATURE, cap)[n](np.float32(2.5), dx, dy)
    np.testing.assert_allclose(dy.copy_to_host(), np.float32(2.5) * x + y, rtol=1e-6)


def test_saxpy_on_part_of_the_arrays_leaves_the_rest(cap):
    # launch size below the array length: work items past n must return early
    x, y = np.ones(1000, np.float32), np.zeros(1000, np.float32)
    dy = cuda.to_device(y)
    load(SAXPY, "saxpy", SAXPY_SIGNATURE, cap)[300](1.0, cuda.to_device(x), dy)
    assert dy.copy_to_host().tolist() == [1.0] * 300 + [0.0] * 700


def test_add2d_with_strided_views(cap):
    # a transposed and a every-other-row view exercise element strides in both dimensions
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    b = np.arange(48, dtype=np.float64).reshape(8, 6)
    out = cuda.device_array((4, 3), np.float64)
    da, db = cuda.to_device(a), cuda.to_device(b)
    a_t = StridedView(da, (4, 3), (8, 32))  # a.T
    b_view = StridedView(db, (4, 3), (2 * 6 * 8, 8), offset=8)  # b[::2, 1:4]
    load(ADD2D, "add2d", ADD2D_SIGNATURE, cap)[4, 3](out, a_t, b_view)
    np.testing.assert_array_equal(out.copy_to_host(), a.T + b[::2, 1:4])


def test_add2d_with_a_custom_block_and_an_odd_size(cap):
    a = np.random.default_rng(0).standard_normal((37, 101))
    out = cuda.device_array(a.shape, np.float64)
    da = cuda.to_device(a)
    load(ADD2D, "add2d", ADD2D_SIGNATURE, cap).launch(out, da, da, n=a.shape, block=(8, 32))
    np.testing.assert_array_equal(out.copy_to_host(), 2 * a)


def test_every_scalar_width(cap):
    out = cuda.to_device(np.zeros(5))
    load(SCALARS, "scalars", SCALARS_SIGNATURE, cap)[1](out, -7, 2**40 + 3, 1.25, True, 0.5)
    assert out.copy_to_host().tolist() == [-7.0, 2.0**40 + 3, 1.25, 1.0, 0.5]


def test_launch_from_another_thread(cap):
    # the primary context must be made current on whichever thread launches
    kernel = load(SAXPY, "saxpy", SAXPY_SIGNATURE, cap)
    dy = cuda.to_device(np.zeros(64, np.float32))
    dx = cuda.to_device(np.ones(64, np.float32))
    errors = []

    def work():
        try:
            kernel[64](3.0, dx, dy)
        except BaseException as exc:
            errors.append(exc)
    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert not errors and dy.copy_to_host().tolist() == [3.0] * 64


def test_empty_launch_is_a_no_op(cap):
    dy = cuda.to_device(np.zeros(4, np.float32))
    load(SAXPY, "saxpy", SAXPY_SIGNATURE, cap)[0](1.0, dy, dy)
    assert dy.copy_to_host().tolist() == [0.0] * 4


def test_bad_ptx_reports_the_jit_log():
    ptx = ".version 8.0\n.target sm_52\n.address_size 64\n.visible .entry broken() {\n  frobnicate;\n}\n"
    with pytest.raises(cuda.CudaError, match="could not load the PTX for 'broken'") as info:
        cuda.CudaModule.from_ptx(ptx, "broken")
    assert info.value.log and info.value.log in str(info.value)


def test_missing_entry_is_reported(cap):
    with pytest.raises(cuda.CudaError, match="no kernel 'nope'.*CUDA_ERROR_NOT_FOUND"):
        cuda.CudaModule.from_ptx(ptx_for(SAXPY, "saxpy", cap), "nope")


def test_module_close_unloads():
    module = cuda.CudaModule.from_ptx(ptx_for(SAXPY, "saxpy", cuda.device_info().cap), "saxpy")
    module.close()
    module.close()  # idempotent


@pytest.mark.parametrize("shape, dtype", [((7,), np.float32), ((3, 4), np.int64), ((2, 3, 4), np.bool_),
                                          ((0,), np.float64), ((), np.int32)])
def test_device_array_round_trip(shape, dtype):
    host = (np.arange(int(np.prod(shape))) % 3).astype(dtype).reshape(shape)
    device = cuda.to_device(host)
    iface = device.__cuda_array_interface__
    assert (iface["shape"], iface["typestr"], iface["strides"], iface["version"]) == \
        (shape, np.dtype(dtype).str, None, 3)
    assert device.strides == host.strides and device.nbytes == host.nbytes
    np.testing.assert_array_equal(cuda.copy_to_host(device), host)
    device.free()
    device.free()
    with pytest.raises(ValueError, match="freed"):
        device.copy_to_host()


def test_to_device_of_a_strided_host_array_copies_it_contiguously():
    host = np.arange(20, dtype=np.float32).reshape(4, 5)[:, ::2]
    np.testing.assert_array_equal(cuda.to_device(host).copy_to_host(), host)


def test_device_arrays_are_freed_when_collected():
    quarter = cuda.device_info().total_memory // 4
    for _ in range(8):  # twice the device's memory: only works if collected arrays are freed
        cuda.device_array(quarter, np.uint8)


def test_copy_to_host_refuses_strided_views():
    base = cuda.to_device(np.zeros((4, 4)))
    with pytest.raises(ValueError, match="C-contiguous"):
        cuda.copy_to_host(StridedView(base, (4, 4), (8, 32)))


@pytest.mark.parametrize("library", ["cupy", "torch"])
def test_foreign_gpu_arrays(cap, library):
    lib = pytest.importorskip(library)
    if library == "torch" and not lib.cuda.is_available():
        pytest.skip("torch without CUDA")
    where = {"device": "cuda"} if library == "torch" else {}
    x = lib.arange(1000, dtype=lib.float32, **where)
    y = lib.ones(1000, dtype=lib.float32, **where)
    load(SAXPY, "saxpy", SAXPY_SIGNATURE, cap)[1000](2.0, x, y)
    got = y.cpu().numpy() if library == "torch" else lib.asnumpy(y)
    np.testing.assert_array_equal(got, 2.0 * np.arange(1000, dtype=np.float32) + 1)
