"""Loading libLLVM 22 and binding its C API lazily, with helpers for LLVM's C conventions."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import subprocess
import threading

from . import _decls
from ._decls import *  # noqa: F403  (handle types and enum constants)

REQUIRED_MAJOR = 22

INSTALL_HINT = (
    "gpuc needs the shared library of LLVM 22 (libLLVM.so.22). Install it with\n"
    "    apt-get install libllvm22        (Debian/Ubuntu; the README's set-up does this)\n"
    "or point GPUC_LIBLLVM at the library file (e.g. from conda-forge's libllvm22)."
)


class LLVMNotFoundError(ImportError):
    """No usable libLLVM 22 could be found."""


def _candidates() -> list[str]:
    env = os.environ.get("GPUC_LIBLLVM")
    if env:
        return [env]
    found: list[str] = []
    for tool in (f"llvm-config-{REQUIRED_MAJOR}", "llvm-config"):
        exe = shutil.which(tool)
        if exe is None:
            continue
        try:
            libdir = subprocess.run([exe, "--libdir"], capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            continue
        for name in (f"libLLVM.so.{REQUIRED_MAJOR}.1", f"libLLVM-{REQUIRED_MAJOR}.so", "libLLVM.so"):
            path = os.path.join(libdir, name)
            if os.path.exists(path):
                found.append(path)
                break
    found += [f"/usr/lib/llvm-{REQUIRED_MAJOR}/lib/libLLVM.so.{REQUIRED_MAJOR}.1",
              f"libLLVM.so.{REQUIRED_MAJOR}.1", f"libLLVM-{REQUIRED_MAJOR}.so"]
    util = ctypes.util.find_library(f"LLVM-{REQUIRED_MAJOR}")
    if util:
        found.append(util)
    return found


def _load() -> ctypes.CDLL:
    tried = []
    for path in _candidates():
        try:
            dll = ctypes.CDLL(path)
        except OSError as exc:
            tried.append(f"  {path}: {exc}")
            continue
        major, minor, patch = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint()
        dll.LLVMGetVersion(ctypes.byref(major), ctypes.byref(minor), ctypes.byref(patch))
        if major.value != REQUIRED_MAJOR:
            tried.append(f"  {path}: LLVM {major.value}.{minor.value}, not {REQUIRED_MAJOR}")
            continue
        return dll
    raise LLVMNotFoundError(INSTALL_HINT + "\nTried:\n" + ("\n".join(tried) or "  (nothing found)"))


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
                    self._dll = _load()
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
