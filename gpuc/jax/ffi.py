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
from ..llvm import LLJIT, Context, Module
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
        launcher.geometry.check(n, None)  # what a launch would refuse, refused when traced
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
        #: How many operands and results the call must have (at least): what `sources` names.
        self._counts = tuple(1 + max((i for side, i in sources if side == want), default=-1) for want in ("arg", "ret"))
        self._zeroed = tuple((index, args[k].nbytes) for k, (side, index) in enumerate(sources)
                             if side == "ret" and index in zeroed)
        dims = cpu.index_space(n)
        if isinstance(n, tuple) and len(n) == 1:
            n = n[0]  # launch_marshalled's shortest path takes an int
        self.n, self._total = n, math.prod(dims)
        self._sizes = struct.pack("<3q", *dims)
        #: On one thread (GPUC_NUM_THREADS as it is now, or `threads`): one call into the kernel over the
        #: whole space, where a NumPy launch makes a few in a row only so that Ctrl-C can stop it between
        #: two (inside XLA's call there is no Python to stop).
        self._one_call = (not launcher.blocks and apart is None and threads in (None, 1)
                          and cpu.launch_threads(self._total, threads) == 1)
        self._callback = _HANDLER(self._handle)
        self.target, self.compiled = None, False

    def register(self, jax) -> str:
        """Register the handler with XLA's CPU platform under a fresh name, returned."""
        with _REGISTER_LOCK:
            if self.target is None:
                name = f"gpuc_{next(self._counter)}_{_identifier(self.what)}"
                address = self._compiled(name)
                #: Whether XLA calls machine code made for this launch (else the Python handler, `_handle`).
                self.compiled = address is not None
                address = address or ctypes.cast(self._callback, ctypes.c_void_p).value
                jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(address), platform="cpu")
                _KEPT.append(self)  # XLA holds the bare pointer: the callback lives as long as the process
                self.target = name
        return self.target

    def _compiled(self, name: str) -> int | None:
        """The address of a handler compiled for this launch by LLVM (compiled_handler), or None where the launch
        needs Python at run time: the work is split into chunks for gpuc's threads, or each call is checked
        after it runs (bounds checks, interrupts: the launch entry is wrapped)."""
        fn = self.launcher._fn
        if not self._one_call or not isinstance(fn, ctypes._CFuncPtr) or not self._total:
            return None
        entry = ctypes.cast(fn, ctypes.c_void_p).value
        return compiled_handler(name, self._template, self._writes, self._zeroed, entry, self._total, self._sizes,
                                keep=self.launcher)

    def _handle(self, frame: int) -> int:
        try:
            extension = _read_pointer(frame + _FRAME_EXTENSION).value
            if extension and _answer_metadata(extension):
                return 0
            if _read_int32(frame + _FRAME_STAGE).value != _EXECUTE:
                return 0
            counts = (_read_int64(frame + _FRAME_ARGS + _LIST_SIZE).value,
                      _read_int64(frame + _FRAME_RETS + _LIST_SIZE).value)
            if counts[0] < self._counts[0] or counts[1] < self._counts[1]:
                raise TypeError(f"called with {counts[0]} operand(s) and {counts[1]} result(s), made for "
                                f"{self._counts[0]} and {self._counts[1]}")
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


def compiled_handler(name: str, template: bytes, writes: tuple, zeroed: tuple, entry: int, total: int,
                     sizes: bytes, keep) -> int:
    """An XLA FFI handler in machine code (LLVM IR below, compiled by gpuc's JIT) that does what FFILaunch._handle
    does for a launch of one call: answer the metadata query, copy the argv template, write the buffers'
    addresses (and scalars' bytes) into it, zero `zeroed` results and call the launch entry at `entry` over
    `[0, total)`. `keep` (the launcher) lives as long as the handler: its code is what the handler calls."""
    lines = [f"@tmpl = private unnamed_addr constant [{len(template)} x i8] c\"{_ir_bytes(template)}\", align 8",
             f"@sizes = private unnamed_addr constant [{len(sizes)} x i8] c\"{_ir_bytes(sizes)}\", align 8",
             "declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)",
             "declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)",
             f"define ptr @{name}(ptr %frame) {{",
             "entry:",
             f"  %ext.p = getelementptr i8, ptr %frame, i64 {_FRAME_EXTENSION}",
             "  %ext = load ptr, ptr %ext.p",
             "  %has.ext = icmp ne ptr %ext, null",
             "  br i1 %has.ext, label %ext.kind, label %stage",
             "ext.kind:",
             "  %kind.p = getelementptr i8, ptr %ext, i64 8",
             "  %kind = load i32, ptr %kind.p",
             f"  %is.meta = icmp eq i32 %kind, {_METADATA}",
             "  br i1 %is.meta, label %meta, label %stage",
             "meta:",
             "  %meta.p = getelementptr i8, ptr %ext, i64 24",
             "  %m = load ptr, ptr %meta.p",
             f"  store i64 {_METADATA_SIZE}, ptr %m",
             f"  %m.version = getelementptr i8, ptr %m, i64 {_Metadata.api_version.offset}",
             f"  store i64 {_VERSION_SIZE}, ptr %m.version",
             "  %m.ext = getelementptr i8, ptr %m.version, i64 8",
             "  store ptr null, ptr %m.ext",
             f"  %m.major = getelementptr i8, ptr %m.version, i64 {_ApiVersion.major_version.offset}",
             f"  store i32 {_API_MAJOR}, ptr %m.major",
             f"  %m.minor = getelementptr i8, ptr %m.version, i64 {_ApiVersion.minor_version.offset}",
             f"  store i32 {_API_MINOR}, ptr %m.minor",
             f"  %m.traits = getelementptr i8, ptr %m, i64 {_Metadata.traits.offset}",
             "  store i32 0, ptr %m.traits",
             "  ret ptr null",
             "stage:",
             f"  %stage.p = getelementptr i8, ptr %frame, i64 {_FRAME_STAGE}",
             "  %stage.v = load i32, ptr %stage.p",
             f"  %is.exec = icmp eq i32 %stage.v, {_EXECUTE}",
             "  br i1 %is.exec, label %run, label %done",
             "done:",
             "  ret ptr null",
             "run:",
             f"  %argv = alloca [{len(template)} x i8], align 8",
             f"  call void @llvm.memcpy.p0.p0.i64(ptr %argv, ptr @tmpl, i64 {len(template)}, i1 false)",
             f"  %args.p = getelementptr i8, ptr %frame, i64 {_FRAME_ARGS + _LIST_ITEMS}",
             "  %args = load ptr, ptr %args.p",
             f"  %rets.p = getelementptr i8, ptr %frame, i64 {_FRAME_RETS + _LIST_ITEMS}",
             "  %rets = load ptr, ptr %rets.p"]
    for k, (side, index, offset, size) in enumerate(writes):
        lines += [f"  %b{k}.p = getelementptr ptr, ptr %{'rets' if side == 'ret' else 'args'}, i64 {index}",
                  f"  %b{k} = load ptr, ptr %b{k}.p",
                  f"  %d{k}.p = getelementptr i8, ptr %b{k}, i64 {_BUFFER_DATA}",
                  f"  %d{k} = load ptr, ptr %d{k}.p",
                  f"  %slot{k} = getelementptr i8, ptr %argv, i64 {offset}"]
        lines.append(f"  call void @llvm.memcpy.p0.p0.i64(ptr %slot{k}, ptr %d{k}, i64 {size}, i1 false)" if size
                     else f"  store ptr %d{k}, ptr %slot{k}")
    for k, (index, nbytes) in enumerate(zeroed):
        lines += [f"  %z{k}.p = getelementptr ptr, ptr %rets, i64 {index}",
                  f"  %z{k} = load ptr, ptr %z{k}.p",
                  f"  %zd{k}.p = getelementptr i8, ptr %z{k}, i64 {_BUFFER_DATA}",
                  f"  %zd{k} = load ptr, ptr %zd{k}.p",
                  f"  call void @llvm.memset.p0.i64(ptr %zd{k}, i8 0, i64 {nbytes}, i1 false)"]
    lines += [f"  call void inttoptr (i64 {entry} to ptr)(ptr %argv, i64 0, i64 {total}, ptr @sizes)",
              "  ret ptr null",
              "}"]
    module = Module.parse("\n".join(lines) + "\n", Context(), name=name)
    with _JIT_LOCK:
        global _JIT
        if _JIT is None:
            _JIT = LLJIT()
        _JIT.add_module(module)
        address = _JIT.lookup(name)
    _KEPT.append(keep)
    return address


def _ir_bytes(data: bytes) -> str:
    return "".join(f"\\{b:02X}" for b in data)


_JIT = None  # one JIT for every compiled handler of the process; handlers are never removed
_JIT_LOCK = threading.Lock()
_KEPT: list = []
_REGISTER_LOCK = threading.Lock()


def _identifier(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text)[:48]


__all__ = ["FFILaunch"]
