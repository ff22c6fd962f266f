"""LLVM modules: parsing, printing, verification, cloning, linking and symbol tables."""

from __future__ import annotations

import contextlib
import ctypes
from typing import Iterator

from . import capi
from ._base import Owner, Scope, register_scope, scope_of
from .capi import address_of, lib
from .context import Context
from .globals import Function, GlobalVariable
from .types import FunctionType, Type, _same_context, check_address_space
from .errors import LLVMError
from .irtext import check_nesting
from .values import Value


class MemoryBuffer(Owner):
    __slots__ = ()

    @classmethod
    def from_bytes(cls, data: bytes, name: str = "<buffer>") -> "MemoryBuffer":
        return cls(lib.LLVMCreateMemoryBufferWithMemoryRangeCopy(data, len(data), name.encode()))

    def to_bytes(self) -> bytes:
        return ctypes.string_at(lib.LLVMGetBufferStart(self), lib.LLVMGetBufferSize(self))

    def _dispose(self) -> None:
        lib.LLVMDisposeMemoryBuffer(self)


_FREED_WITH_CONTEXT = "was freed with its LLVM context"


class Module(Owner):
    """An LLVM module. It keeps its Context alive; `close()` (or `with`) frees it.

    Views of its functions, globals, blocks, instructions and uses raise ValueError once it is
    closed, linked into another module or given to the JIT.
    """

    __slots__ = ("context",)

    def __init__(self, name_or_ref: "str | object" = "gpuc", context: Context | None = None, *,
                 owned: bool = True) -> None:
        if context is None:
            context = Context()
        if isinstance(name_or_ref, str):
            ref = lib.LLVMModuleCreateWithNameInContext(name_or_ref.encode(), context)
        else:
            ref = name_or_ref
        super().__init__(ref, owned=owned)
        self.context = context
        address = address_of(self._ref)
        scope = None if owned else scope_of(address)
        if scope is None:
            with context._scope:  # another thread may close the context (and free `ref`) meanwhile
                size = ctypes.c_size_t()
                name = (lib.LLVMGetModuleIdentifier(ref, ctypes.byref(size)) or b"").decode("utf-8", "replace")
                scope = Scope(address, context=context._scope, name=name)
            if owned:
                register_scope(scope)
        self._scope = scope

    @classmethod
    def _borrowed(cls, ref) -> "Module":
        return cls(ref, Context(lib.LLVMGetModuleContext(ref), owned=False), owned=False)

    @property
    def _as_parameter_(self):
        scope = self._scope
        if scope.gen is None or self._closed:
            if self._closed:
                raise ValueError(f"Module {scope.name!r} was disposed or transferred; it can no longer be used")
            if scope.reason != _FREED_WITH_CONTEXT:
                raise ValueError(f"the module {scope.name!r} {scope.reason}; this view of it can no longer be used")
            raise ValueError("the Module's Context was disposed (or given to the JIT), which freed the module")
        return self._ref

    @property
    def closed(self) -> bool:
        return self._closed or self._scope.gen is None

    def _dispose(self) -> None:
        lib.LLVMDisposeModule(self._ref)

    def close(self) -> None:
        """Free the module. Safe from any thread: calls in flight on it end first (`Scope.shut`)."""
        self._close("was closed")

    def _collect(self) -> None:
        self._close("was garbage-collected (keep a reference to it while you use its values)")

    def _close(self, reason: str) -> None:
        if self._owned and not self._closed:
            self._scope.check_closable(f"the module {self._scope.name!r}")
            self._scope.shut(reason, self._dispose)  # nothing to free once its context freed it
        self._closed = True

    def _release(self):
        if not self._owned:
            raise ValueError("a borrowed Module cannot be given away")
        ref = self._as_parameter_
        self._scope.check_closable(f"the module {self._scope.name!r}")
        self._scope.shut("was linked into another module or given to the JIT")
        self._closed = True
        return ref

    @contextlib.contextmanager
    def keep_open(self, reason: str):
        """While inside, closing this module or its context, or giving either away, raises
        ValueError naming `reason` (e.g. "it is being compiled")."""
        self._as_parameter_
        self._scope.pins.append(reason)
        try:
            yield self
        finally:
            self._scope.pins.pop()

    # -- I/O -----------------------------------------------------------------------------
    @classmethod
    def parse(cls, source: "str | bytes", context: Context | None = None, *, name: str = "<string>") -> "Module":
        """Parse LLVM IR text or bitcode. Raises LLVMError with the parser's message, or for text
        nested deeper than LLVM's parser can take (gpuc/llvm/irtext.py)."""

        data = source.encode() if isinstance(source, str) else bytes(source)
        check_nesting(data, name)
        context = context if context is not None else Context()
        buf = lib.LLVMCreateMemoryBufferWithMemoryRangeCopy(data, len(data), name.encode())
        out = capi.LLVMModuleRef()
        msg = capi.ErrorMessage()
        failed = lib.LLVMParseIRInContext(context, buf, ctypes.byref(out), msg.ref)  # takes `buf`
        text = msg.take()
        diags = context.take_diagnostics()
        if failed:
            text = text.strip() or "; ".join(diags) or "invalid IR"
            raise LLVMError(text if text.startswith(name) else f"{name}: {text}")
        return cls(out, context)

    def __str__(self) -> str:
        return capi.take_message(ctypes.c_void_p(lib.LLVMPrintModuleToString(self)))

    def new_access_group(self) -> "AccessGroup":
        """A new access group, `distinct !{}` in this module's context: mark memory accesses with it
        (`Instruction.set_access_group`) and declare them free of dependences between a loop's
        iterations (`set_loop_hints(parallel_accesses=...)`). LLVM-C makes only uniqued nodes, so the
        distinct one comes from parsing it."""
        name = b"gpuc.access_group"
        holder = Module.parse(f"!{name.decode()} = !{{!0}}\n!0 = distinct !{{}}\n", self.context)
        try:
            out = (capi.LLVMValueRef * 1)()
            lib.LLVMGetNamedMetadataOperands(holder, name, out)
            return AccessGroup(lib.LLVMValueAsMetadata(out[0]), self.context)
        finally:
            holder.close()

    def new_alias_scopes(self, domain: str, names) -> list["AliasScope"]:
        """Scopes of LLVM's scoped alias analysis, one per name, in the domain `domain`: nodes
        `!{!"name", !{!"domain"}}`, uniqued in the context by their names (so give names unique in it).
        Mark memory accesses with them (`Instruction.set_alias_scopes`) and declare where each scope
        begins (`AliasScope.declaration`)."""
        ctx = self.context
        data = domain.encode()
        domain_node = lib.LLVMMDNodeInContext2(ctx, (capi.LLVMMetadataRef * 1)(
            lib.LLVMMDStringInContext2(ctx, data, len(data))), 1)
        scopes = []
        for name in names:
            data = name.encode()
            text = lib.LLVMMDStringInContext2(ctx, data, len(data))
            node = lib.LLVMMDNodeInContext2(ctx, (capi.LLVMMetadataRef * 2)(text, domain_node), 2)
            scopes.append(AliasScope(node, ctx))
        return scopes

    def to_bitcode(self) -> bytes:
        buf = MemoryBuffer(lib.LLVMWriteBitcodeToMemoryBuffer(self))
        with buf:
            return buf.to_bytes()

    # -- properties ----------------------------------------------------------------------
    @property
    def name(self) -> str:
        size = ctypes.c_size_t()
        raw = lib.LLVMGetModuleIdentifier(self, ctypes.byref(size))
        return raw.decode() if raw else ""

    @property
    def triple(self) -> str:
        raw = lib.LLVMGetTarget(self)
        return raw.decode() if raw else ""

    @triple.setter
    def triple(self, value: str) -> None:
        lib.LLVMSetTarget(self, value.encode())

    @property
    def data_layout(self) -> str:
        raw = lib.LLVMGetDataLayoutStr(self)
        return raw.decode() if raw else ""

    @data_layout.setter
    def data_layout(self, value: str) -> None:
        lib.LLVMSetDataLayout(self, value.encode())

    # -- operations ----------------------------------------------------------------------
    def verify(self) -> None:
        """Raise LLVMError with the verifier's full message when the module is invalid."""
        msg = capi.ErrorMessage()
        failed = lib.LLVMVerifyModule(self, capi.LLVMReturnStatusAction, msg.ref)
        text = msg.take()
        if failed:
            raise LLVMError(text.strip() or "module failed verification")

    def is_valid(self) -> bool:
        try:
            self.verify()
        except LLVMError:
            return False
        return True

    def clone(self) -> "Module":
        """A deep copy in the same context."""
        return Module(lib.LLVMCloneModule(self), self.context)

    def link(self, other: "Module") -> None:
        """Link `other` into this module. Ownership of `other` transfers: it is consumed."""
        if other is self:
            raise ValueError("cannot link a module into itself")
        if other.context != self.context:
            raise ValueError("cannot link modules from different contexts")
        ref = other._release()
        failed = lib.LLVMLinkModules2(self, ref)
        diags = self.context.take_diagnostics()
        if failed:
            raise LLVMError("linking failed: " + ("; ".join(diags) or "unknown error"))

    @property
    def functions(self) -> "FunctionList":
        return FunctionList(self)

    def function_names(self) -> set[str]:
        """The names of every function (definitions and declarations) in the module, in one
        walk that wraps no value: cheap enough to run at every plugin callback point."""
        size = ctypes.c_size_t()
        out = ctypes.byref(size)
        first, nxt, name_of = lib.LLVMGetFirstFunction, lib.LLVMGetNextFunction, lib.LLVMGetValueName2
        names = set()
        ref = first(self)
        with self._scope:  # the refs are raw: no other thread may free them meanwhile
            while ref:
                names.add(name_of(ref, out).decode("utf-8", "surrogateescape"))
                ref = nxt(ref)
        return names

    @property
    def globals(self) -> "GlobalList":
        return GlobalList(self)

    def add_function(self, name: str, fnty: FunctionType) -> Function:
        if lib.LLVMGetNamedFunction(self, name.encode()):
            raise ValueError(f"function @{name} already exists in the module")
        _same_context(self, fnty, "Module.add_function")
        return Function(lib.LLVMAddFunction(self, name.encode(), fnty), self._scope)

    def get_or_insert_function(self, name: str, fnty: FunctionType) -> Function:
        ref = lib.LLVMGetNamedFunction(self, name.encode())
        if ref:
            fn = Function(ref, self._scope)
            if fn.function_type != fnty:
                raise TypeError(f"@{name} exists with type {fn.function_type}, not {fnty}")
            return fn
        return self.add_function(name, fnty)

    def declare_intrinsic(self, name: str, fnty: FunctionType) -> Function:
        """The declaration of the intrinsic `name` with type `fnty`, added if missing. Spell an
        overloaded intrinsic with its overload suffixes ("llvm.fmuladd.f64"); the verifier checks
        that they match `fnty`."""
        from .instructions import intrinsic_id, intrinsic_name

        iid = intrinsic_id(name)
        if not iid:
            raise ValueError(f"{name!r} is not an LLVM intrinsic")
        if not lib.LLVMIntrinsicIsOverloaded(iid):
            exact = Type.from_ref(lib.LLVMIntrinsicGetType(self.context, iid, None, 0), self.context._scope)
            if name != intrinsic_name(iid) or exact != fnty:
                raise TypeError(f"the intrinsic {intrinsic_name(iid)} has type {exact}, not {name} of type {fnty}")
        elif name == intrinsic_name(iid):
            raise ValueError(f"{name} is overloaded: name the overload, e.g. {name}.f64 (its type suffixes)")
        return self.get_or_insert_function(name, fnty)

    def add_global(self, ty: Type, name: str, address_space: int = 0) -> GlobalVariable:
        _same_context(self, ty, "Module.add_global")
        check_address_space(address_space)
        return GlobalVariable(lib.LLVMAddGlobalInAddressSpace(self, ty, name.encode(), address_space), self._scope)

    def get_type(self, name: str) -> Type | None:
        ref = lib.LLVMGetTypeByName2(self.context, name.encode())
        return Type.from_ref(ref, self._scope) if ref else None

    def add_flag(self, key: str, value: int, behavior: int = capi.LLVMModuleFlagBehaviorWarning) -> None:
        i32 = self.context.i32
        md = lib.LLVMValueAsMetadata(lib.LLVMConstInt(i32, value, 0))
        data = key.encode()
        lib.LLVMAddModuleFlag(self, behavior, data, len(data), md)


class SymbolList:
    """A module's functions or global variables: iteration, `len`, `name in`, lookup by name.

    Iterating while erasing the current item is not allowed; iterate over `list(...)` instead.
    """

    __slots__ = ("_module",)
    _walkers = ("", "", "")  # the LLVM-C first / next / named lookups, per subclass
    _wrap = staticmethod(Value.from_ref)

    def __init__(self, module: Module) -> None:
        self._module = module

    def __iter__(self):
        first, nxt, _ = (getattr(lib, name) for name in self._walkers)
        scope = self._module._scope
        ref = first(self._module)
        while ref:
            item = self._wrap(ref, scope)
            yield item
            ref = nxt(item)  # checked: raises if the loop body erased it or closed the module

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def _lookup(self, name: str):
        return getattr(lib, self._walkers[2])(self._module, name.encode())

    def get(self, name: str):
        ref = self._lookup(name)
        return self._wrap(ref, self._module._scope) if ref else None

    def __getitem__(self, name: str):
        ref = self._lookup(name)
        if not ref:
            raise KeyError(name)
        return self._wrap(ref, self._module._scope)

    def __contains__(self, name: str) -> bool:
        return bool(self._lookup(name))


class FunctionList(SymbolList):
    """The functions of a module (see SymbolList)."""

    __slots__ = ()
    _walkers = ("LLVMGetFirstFunction", "LLVMGetNextFunction", "LLVMGetNamedFunction")
    _wrap = staticmethod(Function)

    def __iter__(self) -> Iterator[Function]:
        return super().__iter__()

    def get(self, name: str) -> Function | None:
        return super().get(name)


class GlobalList(SymbolList):
    """The global variables of a module (see SymbolList)."""

    __slots__ = ()
    _walkers = ("LLVMGetFirstGlobal", "LLVMGetNextGlobal", "LLVMGetNamedGlobal")

    def __iter__(self) -> Iterator[GlobalVariable]:
        return super().__iter__()

    def get(self, name: str) -> GlobalVariable | None:
        return super().get(name)


class AliasScope:
    """A scope of scoped alias analysis (`Module.new_alias_scopes`): it belongs to its context, which
    it keeps alive."""

    __slots__ = ("ref", "context")

    def __init__(self, ref, context: Context) -> None:
        self.ref, self.context = ref, context

    def as_list(self):
        """The metadata value `!{scope}`: the argument of `llvm.experimental.noalias.scope.decl`, which
        says the scope begins anew where it is called (each iteration of a loop around it, each copy a
        transformation makes of it), so that accesses of two executions are not taken to be disjoint."""
        node = lib.LLVMMDNodeInContext2(self.context, (capi.LLVMMetadataRef * 1)(self.ref), 1)
        return Value.from_ref(lib.LLVMMetadataAsValue(self.context, node), self.context._scope)


class AccessGroup:
    """A distinct, empty metadata node (`Module.new_access_group`): it belongs to its context, which
    it keeps alive."""

    __slots__ = ("ref", "context")

    def __init__(self, ref, context: Context) -> None:
        self.ref, self.context = ref, context
