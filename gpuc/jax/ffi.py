"""The XLA FFI handler of gpuc launches: one registered custom-call target per prepared launch shape.

XLA calls a handler with an `XLA_FFI_CallFrame` (jaxlib's xla/ffi/api/c_api.h): its argument and
result buffers are `XLA_FFI_Buffer`s (dtype, data pointer, rank, dims). A target here is made for one
compiled launcher and one set of shapes, so everything in the launch's argv but the data pointers
(and the values of scalars, passed as rank-0 buffers) is packed once, when the target is made; a
call copies that template, writes the buffers' addresses (and scalars' bytes) into it and runs the
launch entry, on one thread or split into chunks for several (gpuc/runtime/cpu.py's threads). A
handler in machine code (gpuc/jax/handlers.py) does that without Python, its chunks on the calling thread
and on XLA's own thread pool; a launch checked after each call (bounds checks, interrupts) or of a block
kernel goes through the Python handler here, on gpuc's CPU threads. Arrays are XLA's own buffers: nothing
is copied.
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
from .handlers import (API_ERROR_CREATE, API_MAJOR, API_MINOR, BUFFER_DATA, EXECUTE, FRAME_ARGS, FRAME_API,
                       FRAME_EXTENSION, FRAME_RETS, FRAME_STAGE, LIST_ITEMS, LIST_SIZE, METADATA, METADATA_SIZE,
                       VERSION_SIZE, ApiVersion, Metadata, compiled_handler)

_ERROR_INVALID_ARGUMENT, _ERROR_INTERNAL = 3, 13

_HANDLER = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
_ERROR_CREATE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)


class _ErrorCreateArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p),
                ("message", ctypes.c_char_p), ("errc", ctypes.c_int)]


_ERROR_ARGS_SIZE = _ErrorCreateArgs.errc.offset + ctypes.sizeof(ctypes.c_int)

_read_pointer = ctypes.c_void_p.from_address
_read_int64 = ctypes.c_int64.from_address
_read_int32 = ctypes.c_int32.from_address


def _error(frame: int, message: str, code: int = _ERROR_INTERNAL) -> int:
    """An XLA_FFI_Error made by the frame's API (XLA takes it over and raises it in the caller)."""
    api = _read_pointer(frame + FRAME_API).value
    create = _ERROR_CREATE(_read_pointer(api + API_ERROR_CREATE).value)
    args = _ErrorCreateArgs(_ERROR_ARGS_SIZE, None, message.encode("utf-8", "replace"), code)
    return create(ctypes.addressof(args)) or 0


def _answer_metadata(extension: int) -> bool:
    """Fill in the metadata XLA asks a handler for when it is registered; whether that was the question."""
    if _read_int32(extension + 8).value != METADATA:
        return False
    metadata = Metadata.from_address(_read_pointer(extension + 24).value)
    metadata.struct_size = METADATA_SIZE
    metadata.api_version = ApiVersion(VERSION_SIZE, None, API_MAJOR, API_MINOR)
    metadata.traits = 0
    return True


class FFILaunch:
    """One launch of a compiled CPU launcher (gpuc/runtime/cpu.py: CPULauncher) over `n`, its arguments
    XLA's buffers: `args` are the launcher's arguments as NumPy probes of the right dtypes and shapes
    (their values do not matter), `sources[k]` says where argument k comes from at each call:
    ("arg", i) or ("ret", i), XLA's i-th operand or result, or ("fixed", None), `args[k]` itself (an array
    read in the place of an input whose values do not matter); `zeroed` the results set to zero before
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
                write = (side, index, slot * 8, 0)
                slot += 1 + 2 * param.ndim
            elif isinstance(param, ScalarParam):
                write = (side, index, slot * 8, np.dtype(arg.dtype).itemsize)
                slot += 1
            else:
                raise TypeError(f"{what}: a {param} parameter cannot be passed from JAX")
            if side != "fixed":
                writes.append(write)
        self._writes = tuple(writes)
        #: The arguments whose own addresses stay in the template (source "fixed"): kept alive with it.
        self._fixed = tuple(arg for arg, (side, _) in zip(args, sources) if side == "fixed")
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

    def _chunks(self) -> tuple:
        """(the phases of the launch, each a tuple of (begin, end) chunks run after the phase before, the threads it
        runs on: GPUC_NUM_THREADS as it is now). Up to CHUNKS_PER_THREAD chunks a thread of at least
        MIN_ITEMS_PER_CHUNK items, fixed when the target is made (gpuc/runtime/cpu.py's constants); a launch
        with `apart` in the two phases of alternate runs launch_in_two_phases makes."""
        total = self._total
        threads = cpu.launch_threads(total, self.threads)
        if threads == 1:
            return (((0, total),),), 1
        if self.apart is None:
            count = max(threads, min(threads * cpu.CHUNKS_PER_THREAD, total // cpu.MIN_ITEMS_PER_CHUNK))
            bounds = [total * k // count for k in range(count + 1)]
            return (tuple(zip(bounds, bounds[1:])),), threads
        n0, n1, _ = cpu.index_space(self.n)
        a = self.apart
        span = 2 * (a[0] + n0 * a[1] + n0 * n1 * a[2]) + 1  # runs at least this long never meet
        runs = min(2 * threads * cpu.CHUNKS_PER_THREAD, total // span)
        runs -= runs % 2
        if runs < 2:
            return (((0, total),),), 1
        bounds = [total * k // runs for k in range(runs + 1)]
        return tuple(tuple((bounds[k], bounds[k + 1]) for k in range(phase, runs, 2)) for phase in (0, 1)), threads

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
        """The address of a handler compiled for this launch by LLVM (gpuc/jax/handlers.py), or None where each
        call must be checked after it runs (bounds checks, interrupts: the launch entry is wrapped) or the
        kernel runs in blocks: then the Python handler runs it, as a NumPy launch would."""
        fn = self.launcher._fn
        if self.launcher.blocks or not isinstance(fn, ctypes._CFuncPtr) or not self._total:
            return None
        phases, threads = self._chunks()
        entry = ctypes.cast(fn, ctypes.c_void_p).value
        return compiled_handler(name, self._template, self._writes, self._zeroed, entry, self._sizes,
                                keep=self.launcher, phases=phases, helpers=threads - 1)

    def _handle(self, frame: int) -> int:
        try:
            extension = _read_pointer(frame + FRAME_EXTENSION).value
            if extension and _answer_metadata(extension):
                return 0
            if _read_int32(frame + FRAME_STAGE).value != EXECUTE:
                return 0
            counts = (_read_int64(frame + FRAME_ARGS + LIST_SIZE).value,
                      _read_int64(frame + FRAME_RETS + LIST_SIZE).value)
            if counts[0] < self._counts[0] or counts[1] < self._counts[1]:
                raise TypeError(f"called with {counts[0]} operand(s) and {counts[1]} result(s), made for "
                                f"{self._counts[0]} and {self._counts[1]}")
            self.run(_read_pointer(frame + FRAME_ARGS + LIST_ITEMS).value,
                     _read_pointer(frame + FRAME_RETS + LIST_ITEMS).value)
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
            data = _read_pointer(buffer + BUFFER_DATA).value
            if size:
                argv[offset:offset + size] = ctypes.string_at(data, size)
            else:
                struct.pack_into("<Q", argv, offset, data or 0)
        for index, nbytes in self._zeroed:
            buffer = _read_pointer(results + 8 * index).value
            ctypes.memset(_read_pointer(buffer + BUFFER_DATA).value, 0, nbytes)
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
