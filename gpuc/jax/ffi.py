"""The XLA FFI handler of gpuc launches: one registered custom-call target per prepared launch shape.

XLA calls a handler with an `XLA_FFI_CallFrame` (jaxlib's xla/ffi/api/c_api.h): its argument and
result buffers are `XLA_FFI_Buffer`s (dtype, data pointer, rank, dims). A target here is made for one
compiled launcher and one set of shapes, so everything in the launch's argv but the data pointers
(and the values of scalars, passed as rank-0 buffers) is packed once, when the target is made; a
call copies that template, writes the buffers' addresses (and scalars' bytes) into it and runs the
launch entry on the calling thread, or in chunks on gpuc's CPU threads (gpuc/runtime/cpu.py), as a
NumPy launch of the same size would. Arrays are XLA's own buffers: nothing is copied.
"""

from __future__ import annotations

import ctypes
import itertools
import math
import struct
import threading

import numpy as np

from ..abi import ArrayParam, ScalarParam
from ..runtime import cpu

# -- the C API's layouts (x86-64 / AArch64: 8-byte pointers and size_t) -----------------------------

_FRAME_EXTENSION, _FRAME_API, _FRAME_STAGE = 8, 16, 32
_FRAME_ARGS, _FRAME_RETS = 40, 80  # XLA_FFI_Args / XLA_FFI_Rets: size_t, ext*, int64 size, types*, void** items
_LIST_SIZE, _LIST_ITEMS = 16, 32
_BUFFER_DATA = 24  # XLA_FFI_Buffer: size_t, ext*, int32 dtype (padded), void* data, int64 rank, int64* dims
_EXECUTE = 3  # XLA_FFI_ExecutionStage_EXECUTE
_METADATA = 1  # XLA_FFI_Extension_Metadata
_API_MAJOR, _API_MINOR = 0, 1  # the oldest minor version whose frame this module reads (args, rets, stage)
_API_ERROR_CREATE = 48  # XLA_FFI_Api: size_t, ext*, XLA_FFI_Api_Version (24 bytes), internal*, Error_Create
_ERROR_INVALID_ARGUMENT, _ERROR_INTERNAL = 3, 13

_HANDLER = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
_ERROR_CREATE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)


class _ErrorCreateArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p),
                ("message", ctypes.c_char_p), ("errc", ctypes.c_int)]


class _ApiVersion(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p),
                ("major_version", ctypes.c_int), ("minor_version", ctypes.c_int)]


class _Metadata(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("api_version", _ApiVersion), ("traits", ctypes.c_uint32)]


_ERROR_ARGS_SIZE = _ErrorCreateArgs.errc.offset + ctypes.sizeof(ctypes.c_int)
_VERSION_SIZE = _ApiVersion.minor_version.offset + ctypes.sizeof(ctypes.c_int)
_METADATA_SIZE = _Metadata.traits.offset + ctypes.sizeof(ctypes.c_uint32)

_read_pointer = ctypes.c_void_p.from_address
_read_int64 = ctypes.c_int64.from_address
_read_int32 = ctypes.c_int32.from_address


def _error(frame: int, message: str, code: int = _ERROR_INTERNAL) -> int:
    """An XLA_FFI_Error made by the frame's API (XLA takes it over and raises it in the caller)."""
    api = _read_pointer(frame + _FRAME_API).value
    create = _ERROR_CREATE(_read_pointer(api + _API_ERROR_CREATE).value)
    args = _ErrorCreateArgs(_ERROR_ARGS_SIZE, None, message.encode("utf-8", "replace"), code)
    return create(ctypes.addressof(args)) or 0


def _answer_metadata(extension: int) -> bool:
    """Fill in the metadata XLA asks a handler for when it is registered; whether that was the question."""
    if _read_int32(extension + 8).value != _METADATA:
        return False
    metadata = _Metadata.from_address(_read_pointer(extension + 24).value)
    metadata.struct_size = _METADATA_SIZE
    metadata.api_version = _ApiVersion(_VERSION_SIZE, None, _API_MAJOR, _API_MINOR)
    metadata.traits = 0
    return True


class FFILaunch:
    """One launch of a compiled CPU launcher (gpuc/runtime/cpu.py: CPULauncher) over `n`, its arguments
    XLA's buffers: `args` are the launcher's arguments as NumPy probes of the right dtypes and shapes
    (their values do not matter), `sources[k]` says where argument k comes from at each call:
    ("arg", i) or ("ret", i), XLA's i-th operand or result; `zeroed` the results set to zero before
    the launch. `target` is the custom-call target's name once registered (`register`)."""

    _counter = itertools.count()

    def __init__(self, launcher, n, args: tuple, sources: tuple, zeroed: tuple = (), threads=None,
                 apart: tuple | None = None, what: str = "") -> None:
        self.launcher, self.what, self.threads, self.apart = launcher, what, threads, apart
        self._template = launcher.marshal(args)
        writes, slot = [], 0
        for param, arg, (side, index) in zip(launcher.signature.params, args, sources):
            if isinstance(param, ArrayParam):
                writes.append((side, index, slot * 8, 0))
                slot += 1 + 2 * param.ndim
            elif isinstance(param, ScalarParam):
                writes.append((side, index, slot * 8, np.dtype(arg.dtype).itemsize))
                slot += 1
            else:
                raise TypeError(f"{what}: a {param} parameter cannot be passed from JAX")
        self._writes = tuple(writes)
        self._zeroed = tuple((index, args[k].nbytes) for k, (side, index) in enumerate(sources)
                             if side == "ret" and index in zeroed)
        dims = cpu.index_space(n)
        self.n, self._total = n, math.prod(dims)
        self._sizes = struct.pack("<3q", *dims)
        self._one_call = (not launcher.blocks and apart is None and threads is None
                          and cpu.launch_threads(self._total, threads) == 1
                          and min(cpu.SERIAL_CHUNKS, self._total // cpu.MIN_ITEMS_PER_CHUNK) <= 1)
        self._callback = _HANDLER(self._handle)
        self.target = None

    def register(self, jax) -> str:
        """Register the handler with XLA's CPU platform under a fresh name, returned."""
        with _REGISTER_LOCK:
            if self.target is None:
                name = f"gpuc_{next(self._counter)}_{_identifier(self.what)}"
                address = ctypes.cast(self._callback, ctypes.c_void_p).value
                jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(address), platform="cpu")
                _KEPT.append(self)  # XLA holds the bare pointer: the callback lives as long as the process
                self.target = name
        return self.target

    def _handle(self, frame: int) -> int:
        try:
            extension = _read_pointer(frame + _FRAME_EXTENSION).value
            if extension and _answer_metadata(extension):
                return 0
            if _read_int32(frame + _FRAME_STAGE).value != _EXECUTE:
                return 0
            self.run(_read_pointer(frame + _FRAME_ARGS + _LIST_ITEMS).value,
                     _read_pointer(frame + _FRAME_RETS + _LIST_ITEMS).value)
            return 0
        except BaseException as e:  # an exception must not unwind into XLA: it becomes XLA's error
            try:
                return _error(frame, f"{self.what}: {type(e).__name__}: {e}",
                              _ERROR_INVALID_ARGUMENT if isinstance(e, (TypeError, ValueError, IndexError))
                              else _ERROR_INTERNAL)
            except BaseException:  # pragma: no cover - nothing left to report it with
                return 0

    def run(self, operands: int, results: int) -> None:
        """The launch, with the buffers listed at `operands` and `results` (arrays of XLA_FFI_Buffer*)."""
        argv = bytearray(self._template)
        lists = (operands, results)
        for side, index, offset, size in self._writes:
            buffer = _read_pointer((lists[side == "ret"]) + 8 * index).value
            data = _read_pointer(buffer + _BUFFER_DATA).value
            if size:
                argv[offset:offset + size] = ctypes.string_at(data, size)
            else:
                struct.pack_into("<Q", argv, offset, data or 0)
        for index, nbytes in self._zeroed:
            buffer = _read_pointer(results + 8 * index).value
            ctypes.memset(_read_pointer(buffer + _BUFFER_DATA).value, 0, nbytes)
        argv = bytes(argv)
        launcher = self.launcher
        if self._one_call and not launcher.module.closed:
            if self._total:
                launcher._fn(argv, 0, self._total, self._sizes)
            return
        launcher.run(self.n, argv, self.threads, apart=self.apart)


_KEPT: list = []
_REGISTER_LOCK = threading.Lock()


def _identifier(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text)[:48]


__all__ = ["FFILaunch"]
