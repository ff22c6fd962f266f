"""CUDA from Python: device arrays, PTX modules and kernel launches on the first NVIDIA GPU.

    import gpuc.cuda as cuda
    if cuda.available():
        x = cuda.to_device(np.arange(10, dtype=np.float32))
        ...
        print(x.copy_to_host())
    else:
        print(cuda.unavailable_reason())

Kernels accept any GPU array with `__cuda_array_interface__` (CuPy, PyTorch, DeviceArray).
"""

from __future__ import annotations

import os
import weakref

import numpy as np

from .abi import c_strides
from .runtime import cuda as _rt
from .runtime.cuda import (
    CUDALauncher, CudaArray, CudaError, CudaModule, CudaUnavailableError, DeviceInfo, KernelSignature, LaunchConfig,
    available, device_info, launch, launch_config, marshal, parse_cuda_array, synchronize, unavailable_reason)

__all__ = [
    "CUDALauncher", "CudaArray", "CudaError", "CudaModule", "CudaUnavailableError", "DeviceArray", "DeviceInfo",
    "KernelSignature", "LaunchConfig", "available", "copy_to_host", "device_array", "device_info", "launch",
    "launch_config", "marshal", "parse_cuda_array", "synchronize", "to_device", "unavailable_reason",
]


class DeviceArray:
    """A C-contiguous array in device memory, freed by free() or when garbage collected."""

    def __init__(self, shape, dtype=np.float32) -> None:
        shape = (shape,) if np.isscalar(shape) else tuple(shape)
        self.shape = tuple(int(x) for x in shape)
        self.dtype = np.dtype(dtype)
        if self.dtype.hasobject or any(x < 0 for x in self.shape):
            raise ValueError(f"cannot allocate a device array of shape {self.shape} and dtype {self.dtype}")
        self.ptr = _rt.mem_alloc(self.nbytes)
        self._finalizer = weakref.finalize(self, _rt._quietly, _rt.mem_free, self.ptr, os.getpid())
        self._finalizer.atexit = False  # the driver releases everything with the process

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def strides(self) -> tuple:
        """Byte strides, as NumPy reports them."""
        if self.size == 0:  # NumPy's own choice for empty arrays (all zeros in NumPy 2); costs no memory
            return np.empty(self.shape, self.dtype).strides
        return c_strides(self.shape, self.dtype.itemsize)

    @property
    def __cuda_array_interface__(self) -> dict:
        self._check_alive()
        # stream 1: the legacy default stream, where gpuc copies and launches
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False), "strides": None,
                "version": 3, "stream": 1 if self.ptr else None}

    def copy_to_host(self, out: np.ndarray | None = None) -> np.ndarray:
        return copy_to_host(self, out)

    def copy_from_host(self, array) -> None:
        host = _host_c_contiguous(array)
        if host.shape != self.shape or host.dtype != self.dtype:
            raise ValueError(f"cannot copy a {host.dtype}{list(host.shape)} array into a "
                             f"{self.dtype}{list(self.shape)} device array")
        self._check_alive()
        _rt.memcpy_htod(self.ptr, host.ctypes.data, self.nbytes)

    def free(self) -> None:
        """Release the device memory now; the array cannot be used afterwards."""
        if self._finalizer.alive:
            self._finalizer.detach()
            _rt.mem_free(self.ptr)
        self.ptr = None

    def _check_alive(self) -> None:
        if self.ptr is None:
            raise ValueError("this device array has been freed")

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d device array")
        return self.shape[0]

    def __repr__(self) -> str:
        where = "freed" if self.ptr is None else f"0x{self.ptr:x}"
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype.name}, ptr={where})"


def _host_c_contiguous(array) -> np.ndarray:
    host = np.asarray(array)
    if host.dtype.hasobject:
        raise TypeError("arrays of Python objects cannot be copied to the device")
    return host if host.flags.c_contiguous else host.copy(order="C")


def to_device(array) -> DeviceArray:
    """Copy a host array (anything np.asarray accepts) to a new C-contiguous DeviceArray."""
    host = _host_c_contiguous(array)
    device = DeviceArray(host.shape, host.dtype)
    device.copy_from_host(host)
    return device


def device_array(shape, dtype=np.float32) -> DeviceArray:
    """An uninitialized DeviceArray."""
    return DeviceArray(shape, dtype)


def copy_to_host(array, out: np.ndarray | None = None) -> np.ndarray:
    """Copy a C-contiguous GPU array (a DeviceArray or any `__cuda_array_interface__` object) to NumPy."""
    view = parse_cuda_array(array, "the array")
    if not view.c_contiguous:
        raise ValueError("copy_to_host needs a C-contiguous device array; this one is strided")
    if out is None:
        out = np.empty(view.shape, view.dtype)
    elif out.shape != view.shape or out.dtype != view.dtype or not out.flags.c_contiguous or \
            not out.flags.writeable:
        raise ValueError(f"out must be a writeable C-contiguous {view.dtype}{list(view.shape)} array")
    _rt.wait_for_streams([view.stream])
    _rt.memcpy_dtoh(out.ctypes.data, view.ptr, view.nbytes)
    return out
