"""The ORC LLJIT: add modules (ownership transfers) and look up symbol addresses."""

from __future__ import annotations

import ctypes

from . import capi
from ._base import Owner
from .capi import lib
from .context import errors_in
from .errors import LLVMError
from .module import Module
from .target import initialize_all


def _check(err, what: str) -> None:
    message = capi.consume_error(err)
    if message is not None:
        raise LLVMError(f"{what}: {message}")


class LLJIT(Owner):
    """An in-process JIT for the host. Symbols of the host process (libc, libm) are visible."""

    __slots__ = ("_dylib", "_contexts")

    def __init__(self) -> None:
        initialize_all()  # the host's backend among them, whichever it is
        out = capi.LLVMOrcLLJITRef()
        _check(lib.LLVMOrcCreateLLJIT(ctypes.byref(out), None), "creating the JIT")
        super().__init__(out)
        self._dylib = lib.LLVMOrcLLJITGetMainJITDylib(self)
        # (diagnostic callback, diagnostics) of each context the JIT owns: the callbacks must outlive it.
        self._contexts: list[tuple[object, list[str]]] = []

    def _dispose(self) -> None:
        _check(lib.LLVMOrcDisposeLLJIT(self._ref), "disposing the JIT")

    @property
    def triple(self) -> str:
        return lib.LLVMOrcLLJITGetTripleString(self).decode()

    @property
    def data_layout(self) -> str:
        return lib.LLVMOrcLLJITGetDataLayoutStr(self).decode()

    def add_module(self, module: Module) -> None:
        """Hand `module` (and its context) to the JIT. Both are consumed: do not use them again.

        An invalid module raises LLVMError and is not consumed.
        """
        if not module.context._owned:
            raise ValueError("the JIT takes a module's context with it; the module must own its context")
        module.verify()
        if not module.triple:
            module.triple = self.triple
        if not module.data_layout:
            module.data_layout = self.data_layout
        module_ref = module._release()
        context = module.context
        tsctx = lib.LLVMOrcCreateNewThreadSafeContextFromLLVMContext(context._release())
        self._contexts.append((context._handler, context._diagnostics))
        tsm = lib.LLVMOrcCreateNewThreadSafeModule(module_ref, tsctx)
        lib.LLVMOrcDisposeThreadSafeContext(tsctx)  # the module keeps its own reference
        # The JIT takes `tsm` even when adding fails (e.g. a duplicate symbol): never dispose it here.
        _check(lib.LLVMOrcLLJITAddLLVMIRModule(self, self._dylib, tsm), "adding a module to the JIT")

    def add_object(self, data: bytes, name: str = "gpuc.object") -> None:
        """Link an object file (as `TargetMachine.emit(..., "obj")` gives it, relocatable: PIC) into
        the JIT; its external symbols become available to `lookup`."""
        buffer = lib.LLVMCreateMemoryBufferWithMemoryRangeCopy(bytes(data), len(data), name.encode())
        _check(lib.LLVMOrcLLJITAddObjectFile(self, self._dylib, buffer), "adding an object file to the JIT")

    def lookup(self, name: str) -> int:
        """The address of a JIT-compiled symbol (compiling it on first lookup)."""
        address = ctypes.c_uint64()
        _check(lib.LLVMOrcLLJITLookup(self, ctypes.byref(address), name.encode()), f"looking up {name!r}")
        # Compilation can also fail through error diagnostics only (e.g. invalid inline assembly).
        errors = [e for _, diagnostics in self._contexts for e in errors_in(diagnostics)]
        for _, diagnostics in self._contexts:
            diagnostics.clear()
        if errors:
            raise LLVMError(f"compiling {name!r} failed: " + "; ".join(errors))
        return address.value
