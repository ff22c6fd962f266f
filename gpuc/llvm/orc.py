"""The ORC LLJIT: add modules (ownership transfers) and look up symbol addresses."""

from __future__ import annotations

import ctypes

from . import capi
from ._base import Owner
from .capi import lib
from .module import LLVMError, Module
from .target import initialize


def _check(err, what: str) -> None:
    message = capi.consume_error(err)
    if message is not None:
        raise LLVMError(f"{what}: {message}")


class LLJIT(Owner):
    """An in-process JIT for the host. Symbols of the host process (libc, libm) are visible."""

    __slots__ = ("_dylib",)

    def __init__(self) -> None:
        initialize("X86")
        out = capi.LLVMOrcLLJITRef()
        _check(lib.LLVMOrcCreateLLJIT(ctypes.byref(out), None), "creating the JIT")
        super().__init__(out)
        self._dylib = lib.LLVMOrcLLJITGetMainJITDylib(self)

    def _dispose(self) -> None:
        _check(lib.LLVMOrcDisposeLLJIT(self._ref), "disposing the JIT")

    @property
    def triple(self) -> str:
        return lib.LLVMOrcLLJITGetTripleString(self).decode()

    @property
    def data_layout(self) -> str:
        return lib.LLVMOrcLLJITGetDataLayoutStr(self).decode()

    def add_module(self, module: Module) -> None:
        """Hand `module` (and its context) to the JIT. Both are consumed: do not use them again."""
        if not module.context._owned:
            raise ValueError("the JIT takes a module's context with it; the module must own its context")
        if not module.triple:
            module.triple = self.triple
        if not module.data_layout:
            module.data_layout = self.data_layout
        tsctx = lib.LLVMOrcCreateNewThreadSafeContextFromLLVMContext(module.context._release())
        tsm = lib.LLVMOrcCreateNewThreadSafeModule(module._release(), tsctx)
        lib.LLVMOrcDisposeThreadSafeContext(tsctx)  # the module keeps its own reference
        err = lib.LLVMOrcLLJITAddLLVMIRModule(self, self._dylib, tsm)
        if err:
            lib.LLVMOrcDisposeThreadSafeModule(tsm)
            _check(err, "adding a module to the JIT")

    def lookup(self, name: str) -> int:
        """The address of a JIT-compiled symbol (compiling it on first lookup)."""
        address = ctypes.c_uint64()
        _check(lib.LLVMOrcLLJITLookup(self, ctypes.byref(address), name.encode()), f"looking up {name!r}")
        return address.value
