"""Targets and target machines: host description, data layouts, emitting assembly and objects."""

from __future__ import annotations

import ctypes
import os
import threading

from . import capi
from ._base import Owner
from .capi import lib
from .context import errors_in
from .errors import LLVMError
from .module import MemoryBuffer, Module

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


def initialize_all() -> None:
    """Register every LLVM target gpuc knows that this libLLVM was built with (each costs well
    under a millisecond after the first)."""
    for name in _TARGETS:
        try:
            initialize(name)
        except LLVMError:
            pass  # not built into this libLLVM: triples for it fail in Target.from_triple


def host_triple() -> str:
    return capi.take_message(ctypes.c_void_p(lib.LLVMGetDefaultTargetTriple()))


def host_cpu() -> str:
    return capi.take_message(ctypes.c_void_p(lib.LLVMGetHostCPUName()))


def host_features() -> str:
    return capi.take_message(ctypes.c_void_p(lib.LLVMGetHostCPUFeatures()))


# LLVM backends (by their registered names) whose state from one emission breaks the next: LLVM
# 22's SPIR-V backend crashes on a machine's second emission (llvm/llvm-project#223774) and keeps
# process-wide caches (llvm/llvm-project#160613).
_STATEFUL_BACKENDS = frozenset({"spirv", "spirv32", "spirv64"})


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
                reloc: int = capi.LLVMRelocDefault, code_model: int = capi.LLVMCodeModelDefault,
                stateful: bool | None = None) -> "TargetMachine":
        """A target machine. `stateful`: the backend keeps state between emissions that breaks the
        next one, so each emission after the first runs in a fresh process or machine; None
        decides by the LLVM backends known to do so (gpuc's targets say it themselves)."""
        if stateful is None:
            stateful = self.name in _STATEFUL_BACKENDS
        ref = lib.LLVMCreateTargetMachine(self._ref, self.triple.encode(), cpu.encode(), features.encode(),
                                          CODEGEN_LEVELS[opt_level], reloc, code_model)
        if not ref:
            raise LLVMError(f"could not create a target machine for {self.triple} cpu={cpu!r}")
        remake = lambda: self.machine(cpu, features, opt_level=opt_level, reloc=reloc, code_model=code_model,  # noqa: E731
                                      stateful=stateful)
        return TargetMachine(ref, self.triple, cpu, features, opt_level=opt_level, remake=remake, stateful=stateful)


class TargetData(Owner):
    __slots__ = ()

    def _dispose(self) -> None:
        lib.LLVMDisposeTargetData(self._ref)

    def __str__(self) -> str:
        return capi.take_message(ctypes.c_void_p(lib.LLVMCopyStringRepOfTargetData(self)))

    @classmethod
    def from_layout(cls, layout: str) -> "TargetData":
        """The data layout a module's `data_layout` string describes (sizes and alignments of types)."""
        return cls(lib.LLVMCreateTargetData(layout.encode()))

    def size_of(self, ty) -> int:
        return lib.LLVMABISizeOfType(self, ty)

    def abi_alignment(self, ty) -> int:
        return lib.LLVMABIAlignmentOfType(self, ty)

    def element_offset(self, struct_type, index: int) -> int:
        """The byte offset of element `index` of a struct type."""
        return lib.LLVMOffsetOfElement(self, struct_type, index)

    @property
    def pointer_size(self) -> int:
        return lib.LLVMPointerSize(self)


class TargetMachine(Owner):
    """A configured code generator for one triple, CPU and feature set."""

    __slots__ = ("triple", "cpu", "features", "opt_level", "stateful", "_remake", "_emitted", "_data_layout")

    def __init__(self, ref, triple: str, cpu: str, features: str, *, opt_level: int = 2, remake=None,
                 stateful: bool = False) -> None:
        super().__init__(ref)
        self.triple, self.cpu, self.features, self.opt_level = triple, cpu, features, opt_level
        # A stateful backend's machines emit in a helper process (gpuc/llvm/isolated.py); without
        # os.fork, through a fresh copy after their first use (`_remake` builds it), which avoids
        # the crash but not the process-wide caches.
        self.stateful = stateful
        self._remake = remake
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

    def emit(self, module: Module, kind: str = "obj", *, verify: bool = True, preserve: bool = True,
             isolate: bool = False) -> bytes:
        """Generate assembly ("asm") or an object file ("obj") for `module`.

        The module is verified first unless `verify=False` (code generation does not verify, and
        may crash the process on invalid IR).  Code generation rewrites the IR it is given (the
        SPIR-V backend inserts intrinsics, CodeGenPrepare sinks addresses), so it works on a copy
        unless `preserve=False` says the module may be changed.  `isolate=True` generates the
        code in a helper process (gpuc/llvm/isolated.py), so that a fatal error in the backend
        raises LLVMError with LLVM's message instead of aborting this process.
        """
        if kind not in FILE_TYPES:
            raise ValueError(f"emit kind must be one of {sorted(FILE_TYPES)}, not {kind!r}")
        if verify:
            module.verify()
        stateful = self.stateful
        if isolate or (stateful and hasattr(os, "fork")):
            from .isolated import isolated_emit

            fresh = stateful and hasattr(os, "fork")
            return isolated_emit(module.to_bitcode(), self.triple, self.cpu, self.features, self.opt_level, kind,
                                 fresh=fresh)
        if stateful and self._emitted and self._remake is not None:
            with self._remake() as fresh_machine:
                return fresh_machine.emit(module, kind, verify=False, preserve=preserve)
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
