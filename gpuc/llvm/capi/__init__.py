"""Loading libLLVM 22 and binding its C API lazily, with helpers for LLVM's C conventions."""

from __future__ import annotations

import ctypes
import threading

from . import _decls
from ._decls import *  # noqa: F403  (handle types and enum constants)
from .discovery import INSTALL_HINT, REQUIRED_MAJOR, LLVMNotFoundError, load as _load


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
            try:
                return fn(*args)
            except ctypes.ArgumentError:
                # ctypes reports a handle's own refusal (a disposed or transferred owner raises
                # ValueError from `_as_parameter_`) as ArgumentError; raise the original instead.
                for arg in args:
                    getattr(arg, "_as_parameter_", None)
                raise

        call.__name__ = name
        setattr(self, name, call)
        return call


lib = _Library()


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
    return ctypes.cast(ref, ctypes.c_void_p).value or 0
