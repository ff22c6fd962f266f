"""LLVM contexts: the owner of types and constants, one per compilation."""

from __future__ import annotations

import ctypes

from . import capi
from ._base import Owner, Scope, register_scope, scope_of
from .capi import address_of, lib


_SEVERITY = {capi.LLVMDSError: "error", capi.LLVMDSWarning: "warning", capi.LLVMDSRemark: "remark",
             capi.LLVMDSNote: "note"}


def errors_in(diagnostics: list[str]) -> list[str]:
    """The error-severity entries of a list from `Context.take_diagnostics()`."""
    return [d for d in diagnostics if d.startswith("error: ")]


def _on_diagnostic(diagnostics: list[str], info) -> None:
    """LLVM reports a diagnostic (`info`, valid during the call): keep it as "severity: text"."""
    severity = lib.LLVMGetDiagInfoSeverity(info)
    text = capi.take_message(ctypes.c_void_p(lib.LLVMGetDiagInfoDescription(info)))
    diagnostics.append(f"{_SEVERITY.get(severity, 'note')}: {text}")


class Context(Owner):
    """An LLVMContext. Modules created in it keep it alive; dispose it after them.

    Closing it frees its modules too: every view of them, and of its types and constants,
    raises from then on.  A borrowed Context (`owned=False`, e.g. `some_type.context`) shares
    the owner's liveness and never frees anything.
    """

    __slots__ = ("_diagnostics", "_handler")

    def __init__(self, ref=None, *, owned: bool = True) -> None:
        super().__init__(ref if ref is not None else lib.LLVMContextCreate(), owned=owned)
        address = address_of(self._ref)
        scope = None if owned else scope_of(address)
        if scope is None:
            scope = Scope(address)
            if owned:
                register_scope(scope)
        self._scope = scope
        self._diagnostics: list[str] = []
        self._handler = None
        if owned:
            self._install_diagnostic_handler()

    @property
    def _as_parameter_(self):
        if self._closed or self._scope.gen is None:
            raise ValueError("the Context was disposed or transferred; it can no longer be used")
        return self._ref

    @property
    def closed(self) -> bool:
        return self._closed or self._scope.gen is None

    def close(self) -> None:
        """Free the context and its modules. Safe from any thread: calls in flight on anything
        in it end first (`Scope.shut`)."""
        self._close("was closed")

    def _collect(self) -> None:
        self._close("was garbage-collected (keep a reference to it while you use its values)")

    def _close(self, reason: str) -> None:
        if self._owned and not self._closed:
            self._scope.check_closable("the LLVM context")
            self._scope.shut(reason, self._dispose)
        self._closed = True

    def _release(self):
        if not self._owned:
            raise ValueError("a borrowed Context cannot be given away")
        ref = self._as_parameter_
        self._scope.check_closable("the LLVM context")
        self._scope.shut("was given away (to the JIT)")
        self._closed = True
        return ref

    def _install_diagnostic_handler(self) -> None:
        # Without a handler LLVM prints errors and exits the process; collect them instead.  The
        # callback holds the list, not the Context, so that dropping the Context frees it.
        # Whatever the handler raises (KeyboardInterrupt too) the interrupted C call raises.
        diagnostics = self._diagnostics
        self._handler = capi.callback(capi.LLVMDiagnosticHandler,
                                      lambda info, _opaque: _on_diagnostic(diagnostics, info))
        lib.LLVMContextSetDiagnosticHandler(self, self._handler, None)

    def take_diagnostics(self) -> list[str]:
        """Diagnostics LLVM reported since the last call (linker, bitcode reader, backends).

        Each is a string starting with its severity: "error: ", "warning: ", "remark: ", "note: ".
        """
        out = list(self._diagnostics)
        self._diagnostics.clear()
        return out

    def _dispose(self) -> None:
        lib.LLVMContextDispose(self._ref)

    # -- types ---------------------------------------------------------------------------
    def int_type(self, bits: int):
        from .types import Type
        if not 1 <= bits <= (1 << 23):
            raise ValueError(f"integer types have 1 to 2**23 bits, not {bits}")
        return Type.from_ref(lib.LLVMIntTypeInContext(self, bits), self._scope)

    @property
    def i1(self):
        return self.int_type(1)

    @property
    def i8(self):
        return self.int_type(8)

    @property
    def i32(self):
        return self.int_type(32)

    @property
    def i64(self):
        return self.int_type(64)

    @property
    def half(self):
        from .types import Type
        return Type.from_ref(lib.LLVMHalfTypeInContext(self), self._scope)

    @property
    def float(self):
        from .types import Type
        return Type.from_ref(lib.LLVMFloatTypeInContext(self), self._scope)

    @property
    def double(self):
        from .types import Type
        return Type.from_ref(lib.LLVMDoubleTypeInContext(self), self._scope)

    @property
    def void(self):
        from .types import Type
        return Type.from_ref(lib.LLVMVoidTypeInContext(self), self._scope)

    @property
    def metadata(self):
        """The type of a metadata argument (`llvm.experimental.noalias.scope.decl(metadata)`)."""
        from .types import Type
        return Type.from_ref(lib.LLVMMetadataTypeInContext(self), self._scope)

    def ptr(self, address_space: int = 0):
        from .types import Type, check_address_space
        return Type.from_ref(lib.LLVMPointerTypeInContext(self, check_address_space(address_space)), self._scope)

    def struct_type(self, elements, *, packed: bool = False, name: str | None = None):
        from .types import StructType
        return StructType.create(self, elements, packed=packed, name=name)

    def md_kind_id(self, name: str) -> int:
        data = name.encode()
        return lib.LLVMGetMDKindIDInContext(self, data, len(data))
