"""CUDA kernel parameters without a GPU: `__cuda_array_interface__` parsing, the kernelParams
array for cuLaunchKernel from an abi.KernelSignature, and grid/block sizing (docs/kernel-abi.md)."""

from __future__ import annotations

import ctypes
import operator
from dataclasses import dataclass

import numpy as np

from ..abi import (LAUNCH_SIZES, ArrayParam, KernelSignature, ScalarParam, TupleParam,  # noqa: F401 (re-exported)
                   c_strides, is_c_contiguous)

# -- argument marshalling (pure: no GPU needed) ------------------------------------------------


def converters(signature: KernelSignature, names=(), entry: str = "") -> list:
    """The signature's argument converters for GPU arrays (`parse_cuda_array`)."""
    return signature.converters(parse_cuda_array, names, entry)


def marshal(signature: KernelSignature, args, launch_size=(1, 1, 1), convert=None, entry: str = "") -> PackedParams:
    """The kernelParams for `args`: one ctypes value per LLVM parameter (a tuple is one C struct,
    an array its data pointer, shapes and strides), then the launch size when the signature's
    launch form is LAUNCH_SIZES. `convert`: precomputed `converters(signature)`."""
    if signature.launch is None:
        raise TypeError("the signature does not say whether the kernel takes the launch size: pass "
                        "launch=\"sizes\" (it takes %gpuc.n0..n2, as kernels using gpuc.index() do) or "
                        "launch=\"none\"")
    convert = converters(signature) if convert is None else convert
    if len(args) != len(convert):
        raise signature.arity_error(args, entry)
    values, streams = [], []
    for param, to_value, arg in zip(signature.params, convert, args):
        value = to_value(arg)
        if isinstance(param, ArrayParam):
            values += [ctypes.c_void_p(value.ptr), *map(ctypes.c_int64, value.shape + value.strides)]
            if value.stream is not None:
                streams.append(value.stream)
        elif isinstance(param, TupleParam):
            values.append(_struct(param, value))
        else:
            values.append(param.ctype(value))
    if signature.launch == LAUNCH_SIZES:
        values += map(ctypes.c_int64, launch_size)
    return PackedParams(values, streams, args)


def _struct(param: TupleParam, value: tuple):
    out = param.ctype()
    for i, (element, v) in enumerate(zip(param.elements, value)):
        setattr(out, f"f{i}", _struct(element, v) if isinstance(element, TupleParam) else v)
    return out


class PackedParams:
    """ctypes storage for one launch; `address` is the void** that cuLaunchKernel takes as kernelParams."""

    def __init__(self, values: list, streams: list, keepalive=()) -> None:
        self.values = values
        self.pointers = (ctypes.c_void_p * max(len(values), 1))(*(ctypes.addressof(v) for v in values))
        self.streams = streams  # foreign streams the arrays were produced on
        self._keepalive = keepalive  # the argument objects, so their memory outlives the launch

    @property
    def address(self) -> int:
        return ctypes.addressof(self.pointers)

    def __len__(self) -> int:
        return len(self.values)


@dataclass(frozen=True)
class CudaArray:
    """What a `__cuda_array_interface__` describes, with strides in elements."""

    ptr: int
    shape: tuple
    strides: tuple  # elements
    dtype: np.dtype
    readonly: bool = False
    stream: int | None = None

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    @property
    def c_contiguous(self) -> bool:
        return is_c_contiguous(self.shape, self.strides)


def parse_cuda_array(obj, what: str = "the array") -> CudaArray:
    """Validate `obj.__cuda_array_interface__` (versions 0-3) and convert byte strides to elements."""
    iface = getattr(obj, "__cuda_array_interface__", None)
    if iface is None:
        hint = "; copy it to the GPU with gpuc.cuda.to_device()" if hasattr(obj, "__array_interface__") else ""
        raise TypeError(f"{what} must be a GPU array (an object with __cuda_array_interface__), "
                        f"not {type(obj).__name__}{hint}")
    try:
        shape = tuple(operator.index(x) for x in iface["shape"])
        dtype = np.dtype(iface["typestr"])
        ptr, readonly = iface["data"]
        ptr = operator.index(ptr or 0)
        byte_strides = iface.get("strides")
    except (KeyError, TypeError, ValueError) as exc:
        raise TypeError(f"{what} has a malformed __cuda_array_interface__ ({exc!r})") from None
    if iface.get("mask") is not None:
        raise ValueError(f"{what} is a masked array; kernels take plain arrays")
    if any(x < 0 for x in shape):
        raise ValueError(f"{what} has a negative extent in its shape {shape}")
    if byte_strides is None:
        strides = c_strides(shape)
    else:
        if len(byte_strides) != len(shape):
            raise TypeError(f"{what} has {len(byte_strides)} strides for {len(shape)} dimensions")
        bad = [s for s in byte_strides if s % dtype.itemsize]
        if bad:
            raise ValueError(f"{what} has byte stride {bad[0]}, not a multiple of its item size "
                             f"{dtype.itemsize}; kernels index in whole elements (make a copy)")
        strides = tuple(s // dtype.itemsize for s in byte_strides)
    stream = iface.get("stream") if iface.get("version", 0) >= 3 else None
    return CudaArray(ptr, shape, strides, dtype, bool(readonly), stream)


# -- grid and block sizes ---------------------------------------------------------------------

DEFAULT_BLOCK = {1: (256,), 2: (16, 16), 3: (8, 8, 4)}
_MAX_GRID = (2**31 - 1, 65535, 65535)
_MAX_BLOCK = (1024, 1024, 64)
_MAX_THREADS = 1024


@dataclass(frozen=True)
class LaunchConfig:
    grid: tuple  # 3 ints
    block: tuple  # 3 ints
    launch_size: tuple  # padded with 1s: the kernel's %gpuc.n0..n2

    @property
    def empty(self) -> bool:
        return 0 in self.launch_size


def _dims(value, what: str) -> tuple:
    dims = (value,) if not isinstance(value, (tuple, list)) else tuple(value)
    try:
        dims = tuple(operator.index(d) for d in dims)
    except TypeError:
        raise TypeError(f"{what} must be an int or a tuple of 1 to 3 ints, not {value!r}") from None
    if not 1 <= len(dims) <= 3 or any(d < 0 for d in dims):
        raise ValueError(f"{what} must be an int or a tuple of 1 to 3 non-negative ints, not {value!r}")
    return dims


def _exact_block(n: tuple) -> tuple:
    """Per dimension, the largest divisor of the extent within the default block: grid * block == n."""
    return tuple(next(b for b in range(min(limit, extent), 0, -1) if extent % b == 0) if extent else limit
                 for extent, limit in zip(n, DEFAULT_BLOCK[len(n)]))


def launch_config(n, block=None, exact: bool = False) -> LaunchConfig:
    """Blocks covering the launch size `n` (int or tuple of up to 3); grid = ceil(n / block) per dimension.

    With `exact` (a kernel without the %gpuc.n bound check, which would run the surplus threads of a
    rounded-up grid), the threads number exactly `n`: blocks divide the launch size.
    """
    n = _dims(n, "the launch size")
    if exact and block is None:
        block = _exact_block(n)
    block = DEFAULT_BLOCK[len(n)] if block is None else _dims(block, "the block size")
    # a block of another rank than the launch: both padded with 1s (numba-cuda's rule), as every runtime does
    pad = (1,) * (3 - max(len(n), len(block)))
    given, n, block = n, n + (1,) * (3 - len(n)), block + (1,) * (3 - len(block))
    if exact and any(b and extent % b for extent, b in zip(n, block)):
        raise ValueError(f"block {block[:3 - len(pad)]} does not divide the launch size {given}, and this kernel has "
                         "no launch-size check (it takes no %gpuc.n parameters), so the surplus threads would run it "
                         "too")
    if 0 in block or any(b > m for b, m in zip(block, _MAX_BLOCK)) or np.prod(block) > _MAX_THREADS:
        raise ValueError(f"block {block[:3 - len(pad)]} is not a valid CUDA block: each extent 1..{_MAX_BLOCK}, "
                         f"at most {_MAX_THREADS} threads in all")
    grid = tuple(-(-extent // b) for extent, b in zip(n, block))
    if any(g > m for g, m in zip(grid, _MAX_GRID)):
        raise ValueError(f"launch size {n} needs grid {grid}, beyond CUDA's limit {_MAX_GRID}; use bigger blocks")
    return LaunchConfig(grid, block, n)
