"""Handle base classes: borrowed views and disposable owners of LLVM objects."""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time
import traceback
import weakref

from . import capi
from .capi import address_of, lib


class Scope:
    """The liveness of one module or context, shared by every view of what it owns.

    Views (values, blocks, uses, types) hold their owner's scope and check it on every C call
    (`Handle._as_parameter_`).  The check is one comparison: a view remembers the scope's
    generation when it was made; closing the owner sets the generation to None, and erasing
    IR through the object model bumps it and records the erased addresses, so only views older
    than an erase take the slow path (which then looks their address up).  An address LLVM
    reuses for a new object is not mistaken for the erased one: views made after the erase are
    newer than its record.

    Another thread may close the owner while views are in use: `shut` refuses new calls, waits
    for the calls in flight (capi's per-thread lists) and only then frees.  Object-model code
    that works on raw refs between calls holds the scope (`with scope:`) meanwhile.
    """

    __slots__ = ("gen", "erased", "context", "modules", "address", "name", "reason", "pins", "freed", "lock")

    def __init__(self, address: int, *, context: "Scope | None" = None, name: str = "") -> None:
        self.gen: int | None = 0
        self.erased: dict[int, int] = {}      # address -> generation of its erasure
        self.context = context if context is not None else self
        self.modules: set[Scope] = set()      # a context's module scopes, killed with it
        self.address, self.name = address, name
        self.reason: str | None = None        # why it died
        self.pins: list[str] = []             # why it must not be closed now (innermost last)
        self.freed = False                    # the LLVM object is freed or given away
        # Serializes closing a context and its modules (never taken around ordinary calls).
        self.lock = context.lock if context is not None else threading.Lock()
        if context is not None:
            context.modules.add(self)
            if context.gen is None:  # checked after joining: a context dying meanwhile kills it
                self.kill("was freed with its LLVM context")

    @property
    def is_context(self) -> bool:
        return self.context is self

    def describe(self) -> str:
        return "the LLVM context" if self.is_context else f"the module {self.name!r}"

    def kill(self, reason: str) -> None:
        """The owner is gone (`reason`: "was closed", ...): every view of it raises from now on."""
        if self.gen is None:
            return
        self.gen, self.reason, self.erased = None, reason, {}
        if _scopes.get(self.address) is self:
            del _scopes[self.address]
        for module in list(self.modules):
            module.kill("was freed with its LLVM context")
        self.modules.clear()
        self.context.modules.discard(self)

    def erase(self, addresses) -> None:
        """Objects at `addresses` were deleted: views of them made before now become dead."""
        if self.gen is None:
            return  # closed meanwhile (by another thread): every view is dead already
        gen = self.gen + 1
        self.gen = gen
        for address in addresses:
            self.erased[address] = gen

    def revalidate(self, view: "Handle") -> None:
        """The slow path of `_as_parameter_`: raise for a dead view, else bring it up to date."""
        if self.gen is None:
            raise self.gone(type(view).__name__)
        erased_at = self.erased.get(address_of(view._ref))
        if erased_at is not None and erased_at > view._gen:
            raise ValueError(f"this {type(view).__name__} was erased (or deleted with its block or "
                             f"function) in {self.describe()}; it can no longer be used")
        view._gen = self.gen

    def check_closable(self, what: str) -> None:
        pins = self.pins or next((m.pins for m in self.modules if m.pins), None)
        if pins:
            raise ValueError(f"{what} cannot be closed or given away while {pins[-1]}")

    def shut(self, reason: str, free=None) -> None:
        """Retire the owner: its views raise from now on (`reason` says why, e.g. "was closed"),
        calls other threads have in flight on it (for a context: on anything in it) end first, and
        then `free()` frees the LLVM object (None when it was given away, not freed).

        Raises ValueError, changing nothing, on a thread that is itself inside a call on its
        context (an LLVM callback): LLVM would return into freed or changing memory.
        """
        if any(self.context._touched_by(entry) for entry in capi.in_flight.calls):
            raise ValueError(f"{self.describe()} cannot be closed or given away from inside an LLVM call on "
                             "its context (an LLVM callback); do it once that call has returned")
        with self.lock:
            if self.freed or self.context.freed:
                return  # freed already, e.g. with its context
            self.kill(reason)
            delay = 1e-5
            while any(self._touched_by(entry) for calls in capi.calls_elsewhere() for entry in calls):
                time.sleep(delay)
                delay = min(2 * delay, 1e-3)
            if free is not None:
                free()
            self.freed = True

    def _touched_by(self, entry) -> bool:
        """Whether a call in flight (its argument tuple, or a Scope held) works on this scope's
        objects: a module's calls and its context's (types, constants, whose uses reach into
        the module), or, for a context, anything in it."""
        for item in (entry,) if isinstance(entry, Scope) else entry:
            scope = item if isinstance(item, Scope) else getattr(item, "_scope", None)
            if scope is not None and (scope is self or scope is self.context or scope.context is self):
                return True
        return False

    def __enter__(self) -> "Scope":
        """`with scope:` around C calls on raw refs of its objects: meanwhile no other thread
        frees them, and it raises ValueError if they are gone already."""
        calls = capi.in_flight.calls
        calls.append(self)
        if self.gen is None:
            calls.pop()
            raise self.gone()
        return self

    def __exit__(self, *exc) -> None:
        capi.in_flight.calls.pop()

    def gone(self, what: str | None = None) -> ValueError:
        """The error for using `what` (a view's class name; None: anything in it) after the owner died."""
        if what is None:
            return ValueError(f"{self.describe()} {self.reason}; its values can no longer be used")
        return ValueError(f"{self.describe()} {self.reason}; this {what} (a view of it) can no longer be used")


# Live owned modules and contexts by address, so a view or borrowed owner found through LLVM
# (a global's parent module, a type's context) shares the owner's scope.
_scopes: dict[int, Scope] = {}


def scope_of(address: int) -> Scope | None:
    return _scopes.get(address)


def register_scope(scope: Scope) -> None:
    if scope.gen is not None:
        _scopes[scope.address] = scope


class Handle:
    """A borrowed view of one LLVM object: one pointer, checked non-NULL, passed via `_as_parameter_`.

    Every view knows the Scope of its owner (the Module, or the Context for types and
    constants); `_as_parameter_`, the one conversion to C, raises ValueError once that owner is
    gone or the object was erased, instead of handing LLVM a dangling pointer.
    """

    __slots__ = ("_ref", "_scope", "_gen", "__weakref__")

    def __init__(self, ref, scope: Scope) -> None:
        if not ref:
            raise ValueError(f"{type(self).__name__}: NULL LLVM handle")
        gen = scope.gen
        if gen is None:
            scope.revalidate(self)
        self._ref, self._scope, self._gen = ref, scope, gen

    @property
    def _as_parameter_(self):
        if self._gen != self._scope.gen:
            self._scope.revalidate(self)
        return self._ref

    @property
    def ref(self):
        return self._as_parameter_

    @property
    def address(self) -> int:
        return address_of(self._ref)

    @property
    def alive(self) -> bool:
        """False once the owner was closed or the object erased (any use would raise)."""
        try:
            self._as_parameter_
        except ValueError:
            return False
        return True

    def __eq__(self, other) -> bool:
        return isinstance(other, Handle) and self.address == other.address

    def __hash__(self) -> int:
        return hash(self.address)


# -- what views refer to ------------------------------------------------------------------------

#: Value kinds LLVM uniques per context and that cannot name a global: their views live as long
#: as the context.  Every other value (globals, instructions, arguments, blocks, and aggregates or
#: expressions that may name a global) lives with its module.
CONTEXT_KINDS = frozenset((
    capi.LLVMConstantIntValueKind, capi.LLVMConstantFPValueKind, capi.LLVMConstantPointerNullValueKind,
    capi.LLVMConstantAggregateZeroValueKind, capi.LLVMConstantDataArrayValueKind,
    capi.LLVMConstantDataVectorValueKind, capi.LLVMUndefValueValueKind, capi.LLVMPoisonValueValueKind,
    capi.LLVMConstantTokenNoneValueKind, capi.LLVMConstantTargetNoneValueKind, capi.LLVMInlineAsmValueKind))
_GLOBAL_KINDS = frozenset((capi.LLVMFunctionValueKind, capi.LLVMGlobalVariableValueKind,
                           capi.LLVMGlobalAliasValueKind, capi.LLVMGlobalIFuncValueKind))
_CONSTANT_USER_KINDS = frozenset((capi.LLVMConstantExprValueKind, capi.LLVMConstantArrayValueKind,
                                  capi.LLVMConstantStructValueKind, capi.LLVMConstantVectorValueKind,
                                  capi.LLVMBlockAddressValueKind))


def _function_of(ref, kind: int):
    """The function holding an instruction, argument or block (NULL when detached), or the
    global itself; None for other kinds."""
    if kind == capi.LLVMInstructionValueKind:
        block = lib.LLVMGetInstructionParent(ref)
        return lib.LLVMGetBasicBlockParent(block) if block else None
    if kind == capi.LLVMBasicBlockValueKind:
        return lib.LLVMGetBasicBlockParent(lib.LLVMValueAsBasicBlock(ref))
    if kind == capi.LLVMArgumentValueKind:
        return lib.LLVMGetParamParent(ref)
    return ref if kind in _GLOBAL_KINDS else None


def module_scope(ref, kind: int, fallback: Scope) -> Scope:
    """The scope of the module holding the value `ref` (of value kind `kind`), found through
    LLVM; `fallback` when it is detached or in no module gpuc owns."""
    fn = _function_of(ref, kind)
    module = lib.LLVMGetGlobalParent(fn) if fn else None
    scope = _scopes.get(address_of(module)) if module else None
    return scope if scope is not None else fallback


def _global_name(ref) -> str:
    size = ctypes.c_size_t()
    return "@" + (lib.LLVMGetValueName2(ref, ctypes.byref(size)) or b"").decode("utf-8", "replace")


def _foreign_value(ref, module_address: int, seen: set, depth: int = 0) -> str | None:
    """What module-level value outside the module at `module_address` the value `ref` is or
    refers to (through constant operands), if any."""
    kind = lib.LLVMGetValueKind(ref)
    if kind in _GLOBAL_KINDS:
        return None if address_of(lib.LLVMGetGlobalParent(ref)) == module_address else _global_name(ref)
    if kind in CONTEXT_KINDS or address_of(ref) in seen:
        return None
    if kind not in _CONSTANT_USER_KINDS:
        return "a value"  # an instruction, argument or block: they always live in one module
    if depth > 64:
        return "a constant nested too deeply to check"
    seen.add(address_of(ref))
    for i in range(lib.LLVMGetNumOperands(ref)):
        found = _foreign_value(lib.LLVMGetOperand(ref, i), module_address, seen, depth + 1)
        if found:
            return found
    return None


def _describe(view) -> str:
    ref = view._ref
    if isinstance(ref, capi.LLVMValueRef):
        with view._scope:
            if lib.LLVMGetValueKind(ref) in _GLOBAL_KINDS:
                return _global_name(ref)
    text = str(view).strip()
    first = text.splitlines()[0] if text else type(view).__name__
    return repr(first if len(first) <= 80 else first[:77] + "...")


def check_link(scope: Scope, view: Handle, what: str) -> None:
    """Refuse to make IR of `scope` (a module, or a context for constants) refer to `view` when
    it belongs to another module or context: once that one is freed the IR would dangle."""
    other = view._scope
    if other is scope or other is scope.context:
        return
    view._as_parameter_  # a dead view raises here, with its own message
    if other.context is not scope.context:
        raise ValueError(f"{what}: {_describe(view)} belongs to another LLVM context than {scope.describe()}; "
                         "IR cannot refer to values of another context")
    if scope.is_context:
        return  # a constant may name the globals of any module of its context
    with other:
        ref = view._as_parameter_
        ref = lib.LLVMBasicBlockAsValue(ref) if isinstance(ref, capi.LLVMBasicBlockRef) else ref
        foreign = _foreign_value(ref, scope.address, set())
    if foreign:
        if foreign == "a value":
            foreign = _describe(view)
        raise ValueError(f"{what}: {foreign} belongs to {other.describe()}, not {scope.describe()}; IR cannot "
                         "refer to another module's values (declare the function or global in this module, "
                         "or link the modules)")


def erase_addresses(view: Handle) -> list[int]:
    """The addresses that die when the instruction, block, function or global `view` is deleted:
    itself, its operand uses, and (for blocks and functions) everything inside."""
    with view._scope:
        return _addresses_within(view._as_parameter_)


def _addresses_within(ref) -> list[int]:
    if isinstance(ref, capi.LLVMBasicBlockRef):
        out = [address_of(ref), address_of(lib.LLVMBasicBlockAsValue(ref))]
        inst = lib.LLVMGetFirstInstruction(ref)
        while inst:
            out += _addresses_within(inst)
            inst = lib.LLVMGetNextInstruction(inst)
        return out
    out = [address_of(ref)]
    out += [address_of(lib.LLVMGetOperandUse(ref, i)) for i in range(max(lib.LLVMGetNumOperands(ref), 0))]
    if lib.LLVMGetValueKind(ref) == capi.LLVMFunctionValueKind:
        out += [address_of(lib.LLVMGetParam(ref, i)) for i in range(lib.LLVMCountParams(ref))]
        block = lib.LLVMGetFirstBasicBlock(ref)
        while block:
            out += _addresses_within(block)
            block = lib.LLVMGetNextBasicBlock(block)
    return out


# Set GPUC_TRACK_LEAKS=1 to record where every owner was created; `live_owners()` reports
# those never disposed.
_TRACK = os.environ.get("GPUC_TRACK_LEAKS") == "1"
_live: "weakref.WeakValueDictionary[int, Owner]" = weakref.WeakValueDictionary()
_live_lock = threading.Lock()


class Owner(Handle):
    """An LLVM object this Python object owns: disposed by close(), `with`, or garbage collection.

    A borrowed Owner (`owned=False`) is a view of an object someone else disposes.  Once
    closed or transferred, any use raises instead of handing LLVM a dangling pointer.
    """

    __slots__ = ("_closed", "_owned", "_origin")

    def __init__(self, ref, *, owned: bool = True) -> None:
        if not ref:
            raise ValueError(f"{type(self).__name__}: NULL LLVM handle")
        self._ref = ref
        self._closed = False
        self._owned = owned
        self._origin = "".join(traceback.format_stack(limit=8)[:-1]) if _TRACK else None
        if _TRACK:
            with _live_lock:
                _live[id(self)] = self

    @property
    def _as_parameter_(self):
        if self._closed:
            raise ValueError(f"{type(self).__name__} was disposed or transferred; it can no longer be used")
        return self._ref

    @property
    def address(self) -> int:
        return address_of(self._ref)

    def _dispose(self) -> None:
        raise NotImplementedError

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        if not self._closed:
            if self._owned:
                self._dispose()
            self._closed = True

    def _release(self):
        """Give up ownership (the object now belongs to someone else); returns the raw ref."""
        if not self._owned:
            raise ValueError(f"a borrowed {type(self).__name__} cannot be given away")
        ref = self._as_parameter_
        self._closed = True
        return ref

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _collect(self) -> None:
        """Called when the owner is garbage-collected."""
        self.close()

    def __del__(self) -> None:
        if sys.is_finalizing():
            return  # libLLVM may already be unloaded; the OS reclaims the memory
        try:
            self._collect()
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass


def process_lifetime(owner: Owner) -> Owner:
    """Mark `owner` as meant to live as long as the process (a per-thread cache's target machine):
    `live_owners()` does not report it. Returns it."""
    with _live_lock:
        _live.pop(id(owner), None)
    return owner


def live_owners() -> list[tuple[str, str | None]]:
    """Owners still alive (only recorded when GPUC_TRACK_LEAKS=1): (type name, creation stack)."""
    with _live_lock:
        return [(type(o).__name__, o._origin) for o in _live.values() if not o.closed and o._owned]
