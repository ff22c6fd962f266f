"""CUDA kernel parameters without a GPU: signatures, `__cuda_array_interface__` parsing, the
kernelParams array for cuLaunchKernel, and grid/block sizing (docs/kernel-abi.md)."""

from __future__ import annotations

import ctypes
import functools
import operator
from dataclasses import dataclass

import numpy as np

# -- signatures and argument marshalling (pure: no GPU needed) ---------------------------------

_CTYPES = {"bool": ctypes.c_bool, "int8": ctypes.c_int8, "uint8": ctypes.c_uint8, "int16": ctypes.c_int16,
           "uint16": ctypes.c_uint16, "int32": ctypes.c_int32, "uint32": ctypes.c_uint32,
           "int64": ctypes.c_int64, "uint64": ctypes.c_uint64, "float32": ctypes.c_float,
           "float64": ctypes.c_double}
_LLVM_TYPES = {"bool": "i1", "int8": "i8", "uint8": "i8", "int16": "i16", "uint16": "i16", "int32": "i32",
               "uint32": "i32", "int64": "i64", "uint64": "i64", "float32": "float", "float64": "double"}
# Scalars spelled as LLVM types (as gpuc.runtime.cpu spells them) are signless: integers of either
# sign's range are accepted, and "ptr" takes an address or a GPU array's data pointer.
_LLVM_SCALARS = {"i1": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "float": "float32",
                 "double": "float64", "ptr": "uint64"}


def _dtype(spec) -> np.dtype:
    """A native-endian NumPy dtype from a name ("float32"), a NumPy dtype or a ctypes type."""
    try:
        dtype = np.dtype(spec)
    except TypeError:
        raise TypeError(f"{spec!r} is not a scalar type; use a name like 'float32', a NumPy dtype or a "
                        "ctypes type") from None
    if dtype.name not in _CTYPES or not dtype.isnative:
        raise TypeError(f"kernels take {', '.join(_CTYPES)} scalars and arrays, not {dtype.str!r}")
    return dtype


@dataclass(frozen=True)
class ScalarParam:
    dtype: np.dtype
    llvm_type: str
    signless: bool = False

    @classmethod
    def from_spec(cls, spec) -> ScalarParam:
        if isinstance(spec, str) and spec in _LLVM_SCALARS:  # first: NumPy reads "float" as float64
            return cls(np.dtype(_LLVM_SCALARS[spec]), spec, signless=True)
        dtype = _dtype(spec)
        return cls(dtype, _LLVM_TYPES[dtype.name])

    def __str__(self) -> str:
        return self.llvm_type if self.signless else self.dtype.name


@dataclass(frozen=True)
class ArrayParam:
    dtype: np.dtype
    ndim: int
    written: bool = True  # whether the kernel may write through it (read-only arrays are refused)

    def __str__(self) -> str:
        return f"array {self.dtype.name}[{self.ndim}d]"


@dataclass(frozen=True)
class TupleParam:
    """A tuple of scalars (or tuples): an LLVM literal struct, passed by value with C's layout."""

    elements: tuple

    @property
    def llvm_type(self) -> str:
        types = [e.llvm_type for e in self.elements]
        return "{ " + ", ".join(types) + " }" if types else "{}"

    @functools.cached_property
    def ctype(self) -> type:
        """A ctypes Structure with the struct's layout (natural alignment, as on NVPTX)."""
        fields = [(f"f{i}", e.ctype if isinstance(e, TupleParam) else _CTYPES[e.dtype.name])
                  for i, e in enumerate(self.elements)]
        return type("TupleArgument", (ctypes.Structure,), {"_fields_": fields})

    def value(self, value, what: str):
        if not isinstance(value, tuple) or len(value) != len(self.elements):
            got = f"a tuple of {len(value)}" if isinstance(value, tuple) else type(value).__name__
            raise TypeError(f"{what} must be a tuple of {len(self.elements)} element(s), not {got}")
        out = self.ctype()
        for i, (param, element) in enumerate(zip(self.elements, value)):
            inner = f"{what}[{i}]"
            converted = param.value(element, inner) if isinstance(param, TupleParam) else \
                _scalar_value(param, element, inner)
            setattr(out, f"f{i}", converted if isinstance(param, TupleParam) else converted.value)
        return out

    def __str__(self) -> str:
        return "tuple[" + ", ".join(map(str, self.elements)) + "]"


def _tuple_param(elements, what: str) -> TupleParam:
    out = []
    for item in elements:
        kind, *rest = item if isinstance(item, (tuple, list)) and item else (None,)
        if kind == "scalar" and len(rest) == 1:
            out.append(ScalarParam.from_spec(rest[0]))
        elif kind == "tuple" and len(rest) == 1:
            out.append(_tuple_param(rest[0], what))
        else:
            raise ValueError(f"{what}: a tuple holds ('scalar', type) or ('tuple', (...)) elements, not {item!r}")
    return TupleParam(tuple(out))


@dataclass(frozen=True)
class KernelSignature:
    """A kernel's parameters: ScalarParam / ArrayParam / TupleParam, plus the trailing ndrange i64s
    when `ndrange`."""

    params: tuple
    ndrange: bool = True

    @classmethod
    def from_spec(cls, spec, ndrange: bool = True) -> KernelSignature:
        """From [("scalar", type), ("array", dtype, ndim), ("tuple", (("scalar", type), ...)), ...].

        Types are NumPy names ("float32"), dtypes, ctypes types, or LLVM scalar types ("i32",
        "float", "ptr"; see _LLVM_SCALARS).
        """
        params = []
        for i, item in enumerate(spec):
            kind, *rest = item
            if kind == "scalar" and len(rest) == 1:
                params.append(ScalarParam.from_spec(rest[0]))
            elif kind == "array" and len(rest) == 2 and rest[1] in (1, 2, 3):
                params.append(ArrayParam(_dtype(rest[0]), rest[1]))
            elif kind == "tuple" and len(rest) == 1 and isinstance(rest[0], (tuple, list)):
                params.append(_tuple_param(rest[0], f"parameter {i}"))
            else:
                raise ValueError(f"parameter {i}: expected ('scalar', type), ('array', dtype, ndim 1-3) or "
                                 f"('tuple', (...)), not {item!r}")
        return cls(tuple(params), ndrange)

    def with_written(self, written) -> KernelSignature:
        """This signature with each array marked by whether its data pointer, an LLVM parameter
        index, is in `written` (gpuc.runtime.written.written_params)."""
        params, index = [], 0
        for p in self.params:
            if isinstance(p, ArrayParam):
                p = ArrayParam(p.dtype, p.ndim, index in written)
                index += 2 * p.ndim
            params.append(p)
            index += 1
        return KernelSignature(tuple(params), self.ndrange)

    def llvm_param_types(self) -> list[str]:
        """The kernel's LLVM parameter types, flattened per docs/kernel-abi.md."""
        types = []
        for p in self.params:
            if isinstance(p, ArrayParam):
                types += ["ptr"] + ["i64"] * (2 * p.ndim)
            else:
                types.append(p.llvm_type)
        return types + ["i64"] * 3 * self.ndrange

    def marshal(self, args, ndrange=(1, 1, 1)) -> PackedParams:
        """The kernelParams for `args`: one ctypes value per flattened parameter, and the void* array."""
        if len(args) != len(self.params):
            raise TypeError(f"the kernel takes {len(self.params)} arguments ({', '.join(map(str, self.params))}), "
                            f"got {len(args)}")
        values, streams = [], []
        for i, (param, arg) in enumerate(zip(self.params, args)):
            if isinstance(param, ArrayParam):
                array = parse_cuda_array(arg, f"argument {i}")
                array.check(param, f"argument {i}")
                if array.readonly and param.written:
                    raise ValueError(f"argument {i} is read-only (its __cuda_array_interface__ says so) but the "
                                     "kernel may write to it; pass a writable copy")
                values += [ctypes.c_void_p(array.ptr), *map(ctypes.c_int64, array.shape + array.strides)]
                if array.stream is not None:
                    streams.append(array.stream)
            elif isinstance(param, TupleParam):
                values.append(param.value(arg, f"argument {i} ({param})"))
            else:
                values.append(_scalar_value(param, arg, f"argument {i} ({param})"))
        if self.ndrange:
            values += map(ctypes.c_int64, ndrange)
        return PackedParams(values, streams, args)


def _scalar_value(param: ScalarParam, value, what: str):
    dtype = param.dtype
    ctype = _CTYPES[dtype.name]
    if param.llvm_type == "ptr" and hasattr(value, "__cuda_array_interface__"):
        value = parse_cuda_array(value, what).ptr
    if dtype.kind in "iu":
        try:
            value = operator.index(value)
        except TypeError:
            raise TypeError(f"{what} must be an integer, not {type(value).__name__}") from None
        low, high = np.iinfo(dtype).min, np.iinfo(dtype).max
        if param.signless:  # the bits are what matter: ctypes wraps unsigned values into the signed type
            bits = 8 * dtype.itemsize
            low, high = -(1 << (bits - 1)), (1 << bits) - 1
        if not low <= value <= high:
            raise OverflowError(f"{what}: {value} does not fit in {param}")
    elif dtype.kind == "b":
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{what} must be a bool, not {type(value).__name__}")
    elif not isinstance(value, (int, float, np.integer, np.floating)) or isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{what} must be a number, not {type(value).__name__}")
    return ctype(value)


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
        return self.strides == _c_strides(self.shape) or 0 in self.shape

    def check(self, param: ArrayParam, what: str) -> None:
        if self.dtype != param.dtype:
            raise TypeError(f"{what} must hold {param.dtype.name}, not {self.dtype.str!r} ({self.dtype.name}); "
                            "convert it before copying it to the device")
        if len(self.shape) != param.ndim:
            raise TypeError(f"{what} must have {param.ndim} dimension(s), not {len(self.shape)}")


def _c_strides(shape) -> tuple:
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= extent
    return tuple(reversed(strides))


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
        strides = _c_strides(shape)
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
    ndrange: tuple  # the launch size, padded with 1s: the kernel's %gpuc.n0..n2

    @property
    def empty(self) -> bool:
        return 0 in self.ndrange


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
    if exact and len(block) == len(n) and any(b and extent % b for extent, b in zip(n, block)):
        raise ValueError(f"block {block} does not divide the launch size {n}, and this kernel has no launch-size "
                         "check (it takes no %gpuc.n parameters), so the surplus threads would run it too")
    if len(block) != len(n):
        raise ValueError(f"the block {block} has {len(block)} dimension(s) but the launch size {n} has {len(n)}")
    pad = (1,) * (3 - len(n))
    n, block = n + pad, block + pad
    if 0 in block or any(b > m for b, m in zip(block, _MAX_BLOCK)) or np.prod(block) > _MAX_THREADS:
        raise ValueError(f"block {block[:3 - len(pad)]} is not a valid CUDA block: each extent 1..{_MAX_BLOCK}, "
                         f"at most {_MAX_THREADS} threads in all")
    grid = tuple(-(-extent // b) for extent, b in zip(n, block))
    if any(g > m for g, m in zip(grid, _MAX_GRID)):
        raise ValueError(f"launch size {n} needs grid {grid}, beyond CUDA's limit {_MAX_GRID}; use bigger blocks")
    return LaunchConfig(grid, block, n)
