"""Loading libLLVM 22 and binding its C API lazily, through one wrapper that records each thread's
calls in flight and raises what Python callbacks raised; helpers for LLVM's C conventions."""

from __future__ import annotations

import ctypes
import sys
import threading
import weakref

from . import _decls
from ._decls import *  # noqa: F403  (handle types and enum constants)
from .discovery import INSTALL_HINT, REQUIRED_MAJOR, LLVMNotFoundError, load as _load


# -- calls in flight --------------------------------------------------------------------------
# Each thread keeps the argument tuples of its C calls in flight, innermost last (more than one
# when LLVM calls back into Python, which calls LLVM again).  The object model adds a Scope
# while it works on raw refs between calls.  Freeing an LLVM object waits until no other
# thread's list names it (gpuc/llvm/_base.py, `Scope.shut`).  Each thread writes only its own
# list, so the common path takes no lock.

class _Calls(list):
    __slots__ = ("__weakref__",)


class _ThreadCalls(threading.local):
    def __init__(self) -> None:
        self.calls = calls = _Calls()
        key = id(calls)
        _threads[key] = weakref.ref(calls, lambda _, key=key: _threads.pop(key, None))


_threads: dict[int, weakref.ref] = {}  # id -> each live thread's list
#: `in_flight.calls`: this thread's calls in flight (its own list: append and pop in pairs).
in_flight = _ThreadCalls()


def calls_elsewhere() -> list[list]:
    """A snapshot of every other thread's calls in flight."""
    mine = in_flight.calls
    out = []
    for ref in _threads.copy().values():
        calls = ref()
        if calls is not None and calls is not mine:
            out.append(calls.copy())
    return out


class _Failed(tuple):
    """The arguments of a C call during which a Python callback raised `error`."""

    error: BaseException


def callback(prototype, fn):
    """`prototype(fn)` for a C callback, except that whatever `fn` raises (KeyboardInterrupt,
    SystemExit, MemoryError included) is raised by the C call it ran under once that returns;
    ctypes alone would print it and go on.  `fn` returns None then (0 to C)."""

    def trampoline(*args):
        try:
            return fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, not dropped
            _record_failure(exc)

    trampoline.hands_over = True
    return prototype(trampoline)


def _record_failure(exc: BaseException) -> None:
    calls = in_flight.calls
    top = calls[-1] if calls else None
    if not isinstance(top, tuple):
        raise exc  # no call of ours on this thread to hand it to: ctypes reports it
    if isinstance(top, _Failed) and exc.__context__ is None:
        exc.__context__ = top.error
    failed = _Failed(top)
    failed.error = exc
    calls[-1] = failed


def _hand_over_unraisable(previous):
    # A Ctrl-C during a long LLVM call is handled on the first instruction of the next callback,
    # before the trampoline's `try` can catch it; ctypes then reports the KeyboardInterrupt as
    # unraisable.  Hand that one to the C call too; anything else goes to the previous hook.
    def hook(unraisable) -> None:
        calls = in_flight.calls
        if getattr(unraisable.object, "hands_over", False) and calls and isinstance(calls[-1], tuple):
            _record_failure(unraisable.exc_value)
        else:
            previous(unraisable)

    return hook


sys.unraisablehook = _hand_over_unraisable(sys.unraisablehook)


class _Library:
    """The loaded libLLVM; attributes are C functions, bound with their prototypes on first use."""

    def __init__(self) -> None:
        self._dll: ctypes.CDLL | None = None
        self._lock = threading.Lock()

    @property
    def dll(self) -> ctypes.CDLL:
        if self._dll is None:
            with self._lock:
                if self._dll is None:
                    try:
                        self._dll = _load()
                    except AttributeError as exc:  # inside a property it would reach __getattr__
                        raise LLVMNotFoundError(f"{INSTALL_HINT}\n{exc}") from exc
        return self._dll

    def __getattr__(self, name: str):
        proto = _decls.FUNCTIONS.get(name)
        if proto is None:
            if name.startswith("LLVMInitialize"):
                proto = (None, [])  # target initializers are macro-declared in the headers
            else:
                raise AttributeError(f"{name} is not an LLVM-C function known to gpuc")
        fn = getattr(self.dll, name)
        fn.restype, fn.argtypes = proto[0], proto[1]

        def call(*args):
            # Registered before the handles are checked (`_as_parameter_`), so whoever frees an
            # LLVM object either sees this call in flight or makes its check fail.
            calls = in_flight.calls
            calls.append(args)
            try:
                return fn(*args)
            except ctypes.ArgumentError:
                # ctypes reports a handle's own refusal (a disposed or transferred owner raises
                # ValueError from `_as_parameter_`) as ArgumentError; raise the original instead.
                for arg in args:
                    getattr(arg, "_as_parameter_", None)
                raise
            finally:
                done = calls.pop()
                if done is not args:  # a callback failed during the call (see `callback`)
                    raise done.error

        call.__name__ = name
        call.bare = fn
        setattr(self, name, call)
        return call


class _Bare:
    """The same C functions without the wrapper: not recorded as calls in flight, and what a
    callback raises is not raised.  Only for raw refs inside `with scope:` (which records them
    instead), where the object model's hot paths save the wrapper's cost."""

    def __getattr__(self, name: str):
        fn = getattr(lib, name).bare
        setattr(self, name, fn)
        return fn


lib = _Library()
bare = _Bare()


def version() -> tuple[int, int, int]:
    major, minor, patch = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint()
    lib.LLVMGetVersion(ctypes.byref(major), ctypes.byref(minor), ctypes.byref(patch))
    return (major.value, minor.value, patch.value)


def take_message(ptr) -> str:
    """Read and free a `char *` that LLVM allocated and the caller owns."""
    if not ptr:
        return ""
    address = ptr.value if isinstance(ptr, ctypes.c_void_p) else ptr
    try:
        return ctypes.string_at(address).decode("utf-8", "replace")
    finally:
        lib.LLVMDisposeMessage(ctypes.c_void_p(address))


class ErrorMessage:
    """A `char **OutMessage` out-parameter; `str(msg)` reads and frees it."""

    def __init__(self) -> None:
        self.slot = ctypes.c_void_p()

    @property
    def ref(self):
        return ctypes.byref(self.slot)

    def take(self) -> str:
        text = take_message(self.slot) if self.slot.value else ""
        self.slot = ctypes.c_void_p()
        return text


def consume_error(err) -> str | None:
    """Turn an LLVMErrorRef into its message (freeing it), or None for success."""
    if not err:
        return None
    return take_message(ctypes.c_void_p(lib.LLVMGetErrorMessage(err)))


def address_of(ref) -> int:
    """The integer address held by an opaque handle (0 for NULL)."""
    try:  # the pointer's own bytes, read in place: a third of what ctypes.cast costs (hashing views calls this)
        return _void_p_at(ref).value or 0
    except TypeError:  # not a ctypes object (an int)
        return ctypes.cast(ref, ctypes.c_void_p).value or 0


_void_p_at = ctypes.c_void_p.from_buffer
