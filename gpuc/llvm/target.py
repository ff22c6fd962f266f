"""Targets and target machines: host description, data layouts, emitting assembly and objects."""

from __future__ import annotations

import ctypes
import os
import select
import signal
import threading
import time
import warnings

from . import capi
from ._base import Owner
from .capi import lib
from .context import errors_in
from .module import LLVMError, MemoryBuffer, Module

# LLVM target name -> the component initializers that exist for it in libLLVM.
_TARGETS = {
    "X86": ("TargetInfo", "Target", "TargetMC", "AsmPrinter", "AsmParser"),
    "AArch64": ("TargetInfo", "Target", "TargetMC", "AsmPrinter", "AsmParser"),
    "NVPTX": ("TargetInfo", "Target", "TargetMC", "AsmPrinter"),
    "AMDGPU": ("TargetInfo", "Target", "TargetMC", "AsmPrinter", "AsmParser"),
    "SPIRV": ("TargetInfo", "Target", "TargetMC", "AsmPrinter"),
}
_initialized: set[str] = set()
_init_lock = threading.Lock()

CODEGEN_LEVELS = {0: capi.LLVMCodeGenLevelNone, 1: capi.LLVMCodeGenLevelLess,
                  2: capi.LLVMCodeGenLevelDefault, 3: capi.LLVMCodeGenLevelAggressive}
FILE_TYPES = {"asm": capi.LLVMAssemblyFile, "obj": capi.LLVMObjectFile}


def initialize(name: str) -> None:
    """Register one LLVM target (e.g. "X86", "NVPTX"); idempotent and thread-safe."""
    with _init_lock:
        if name in _initialized:
            return
        components = _TARGETS.get(name)
        if components is None:
            raise ValueError(f"gpuc does not support LLVM target {name!r}; known: {sorted(_TARGETS)}")
        for component in components:
            try:
                getattr(lib, f"LLVMInitialize{name}{component}")()
            except AttributeError as exc:
                raise LLVMError(f"this libLLVM was built without the {name} target") from exc
        _initialized.add(name)


def host_triple() -> str:
    return capi.take_message(ctypes.c_void_p(lib.LLVMGetDefaultTargetTriple()))


def host_cpu() -> str:
    return capi.take_message(ctypes.c_void_p(lib.LLVMGetHostCPUName()))


def host_features() -> str:
    return capi.take_message(ctypes.c_void_p(lib.LLVMGetHostCPUFeatures()))


class Target:
    """A registered LLVM target, looked up by triple."""

    __slots__ = ("_ref", "triple")

    def __init__(self, ref, triple: str) -> None:
        self._ref, self.triple = ref, triple

    @classmethod
    def from_triple(cls, triple: str) -> "Target":
        out = capi.LLVMTargetRef()
        msg = capi.ErrorMessage()
        if lib.LLVMGetTargetFromTriple(triple.encode(), ctypes.byref(out), msg.ref):
            raise LLVMError(f"no LLVM target for triple {triple!r}: {msg.take()} (registered with "
                            f"initialize(): {sorted(_initialized) or 'none'})")
        msg.take()
        return cls(out, triple)

    @property
    def name(self) -> str:
        return lib.LLVMGetTargetName(self._ref).decode()

    def machine(self, cpu: str = "", features: str = "", *, opt_level: int = 2,
                reloc: int = capi.LLVMRelocDefault, code_model: int = capi.LLVMCodeModelDefault) -> "TargetMachine":
        ref = lib.LLVMCreateTargetMachine(self._ref, self.triple.encode(), cpu.encode(), features.encode(),
                                          CODEGEN_LEVELS[opt_level], reloc, code_model)
        if not ref:
            raise LLVMError(f"could not create a target machine for {self.triple} cpu={cpu!r}")
        remake = lambda: self.machine(cpu, features, opt_level=opt_level, reloc=reloc, code_model=code_model)  # noqa: E731
        return TargetMachine(ref, self.triple, cpu, features, remake=remake)


class TargetData(Owner):
    __slots__ = ()

    def _dispose(self) -> None:
        lib.LLVMDisposeTargetData(self._ref)

    def __str__(self) -> str:
        return capi.take_message(ctypes.c_void_p(lib.LLVMCopyStringRepOfTargetData(self)))

    def size_of(self, ty) -> int:
        return lib.LLVMABISizeOfType(self, ty)

    def abi_alignment(self, ty) -> int:
        return lib.LLVMABIAlignmentOfType(self, ty)

    @property
    def pointer_size(self) -> int:
        return lib.LLVMPointerSize(self)


# LLVM 22's SPIR-V backend keeps state between emissions: in the target machine (a second
# emission with one machine can crash the process, llvm/llvm-project#223774) and in process-wide
# caches keyed by IR addresses (a later module whose objects reuse freed addresses gets duplicate
# ids, i.e. invalid SPIR-V, llvm/llvm-project#160613).  Emitting in a forked child leaves the
# parent's state untouched, so every emission starts clean.  Without fork, machines of these
# triples at least emit through a fresh copy after their first use.
_ISOLATED_TRIPLES = ("spirv",)
_CHILD_TIMEOUT_S = 600


def _emit_in_child(tm: "TargetMachine", module: Module, kind: str) -> bytes:
    read_fd, write_fd = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12+ warns about fork in threaded processes; the child only runs LLVM codegen
        # on memory no other thread touches, then leaves with os._exit.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # child: never return into the caller's Python code
        status = 1
        try:
            os.close(read_fd)
            try:
                payload = b"\0" + tm._emit_raw(module, kind)
            except BaseException as exc:  # noqa: BLE001 - reported to the parent
                payload = b"\1" + f"{exc}".encode()
            with os.fdopen(write_fd, "wb") as out:
                out.write(payload)
            status = 0
        finally:
            os._exit(status)
    os.close(write_fd)
    chunks, deadline = [], time.monotonic() + _CHILD_TIMEOUT_S
    with os.fdopen(read_fd, "rb", buffering=0) as pipe:
        while True:
            ready, _, _ = select.select([pipe], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                raise LLVMError(f"code generation for {tm.triple} did not finish in {_CHILD_TIMEOUT_S} s")
            chunk = pipe.read(1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    payload = b"".join(chunks)
    if not payload:
        raise LLVMError(f"code generation for {tm.triple} crashed (child status {status})")
    if payload[:1] == b"\1":
        raise LLVMError(payload[1:].decode("utf-8", "replace"))
    return payload[1:]


class TargetMachine(Owner):
    """A configured code generator for one triple, CPU and feature set."""

    __slots__ = ("triple", "cpu", "features", "_remake", "_emitted", "_data_layout")

    def __init__(self, ref, triple: str, cpu: str, features: str, *, remake=None) -> None:
        super().__init__(ref)
        self.triple, self.cpu, self.features = triple, cpu, features
        self._remake = remake  # builds an identical machine (see _ISOLATED_TRIPLES)
        self._emitted = False
        self._data_layout: str | None = None

    def _dispose(self) -> None:
        lib.LLVMDisposeTargetMachine(self._ref)

    @property
    def data_layout(self) -> str:
        if self._data_layout is None:
            with TargetData(lib.LLVMCreateTargetDataLayout(self)) as td:
                self._data_layout = str(td)
        return self._data_layout

    def target_data(self) -> TargetData:
        return TargetData(lib.LLVMCreateTargetDataLayout(self))

    def emit(self, module: Module, kind: str = "obj", *, verify: bool = True, preserve: bool = True) -> bytes:
        """Generate assembly ("asm") or an object file ("obj") for `module`.

        The module is verified first unless `verify=False` (code generation does not verify, and
        may crash the process on invalid IR).  Code generation rewrites the IR it is given (the
        SPIR-V backend inserts intrinsics, CodeGenPrepare sinks addresses), so it works on a copy
        unless `preserve=False` says the module may be changed.
        """
        if kind not in FILE_TYPES:
            raise ValueError(f"emit kind must be one of {sorted(FILE_TYPES)}, not {kind!r}")
        if verify:
            module.verify()
        if self.triple.startswith(_ISOLATED_TRIPLES):
            if hasattr(os, "fork"):
                return _emit_in_child(self, module, kind)  # the child's changes never reach us
            if self._emitted and self._remake is not None:
                with self._remake() as fresh:
                    return fresh.emit(module, kind, verify=False, preserve=preserve)
        self._emitted = True
        if not preserve:
            return self._emit_raw(module, kind)
        with module.clone() as work:
            return self._emit_raw(work, kind)

    def _emit_raw(self, module: Module, kind: str) -> bytes:
        out = capi.LLVMMemoryBufferRef()
        msg = capi.ErrorMessage()
        failed = lib.LLVMTargetMachineEmitToMemoryBuffer(self, module, FILE_TYPES[kind], msg.ref, ctypes.byref(out))
        text = msg.take()
        # Some failures (e.g. invalid inline assembly) are only reported as error diagnostics.
        errors = errors_in(module.context.take_diagnostics())
        if failed or errors:
            if out:
                lib.LLVMDisposeMemoryBuffer(out)
            raise LLVMError(f"code generation for {self.triple} failed: {text or '; '.join(errors)}")
        with MemoryBuffer(out) as buf:
            return buf.to_bytes()
