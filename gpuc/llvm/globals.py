"""Global values: functions, global variables and aliases, with linkage and attributes."""

from __future__ import annotations

import ctypes
from typing import Iterator

from . import capi
from ._base import check_link, erase_addresses
from .capi import lib
from .types import FunctionType, Type
from .values import Argument, BasicBlock, Constant, Value

LINKAGES = {
    "external": capi.LLVMExternalLinkage,
    "available_externally": capi.LLVMAvailableExternallyLinkage,
    "linkonce": capi.LLVMLinkOnceAnyLinkage,
    "linkonce_odr": capi.LLVMLinkOnceODRLinkage,
    "weak": capi.LLVMWeakAnyLinkage,
    "weak_odr": capi.LLVMWeakODRLinkage,
    "appending": capi.LLVMAppendingLinkage,
    "internal": capi.LLVMInternalLinkage,
    "private": capi.LLVMPrivateLinkage,
    "extern_weak": capi.LLVMExternalWeakLinkage,
    "common": capi.LLVMCommonLinkage,
}
_LINKAGE_NAMES = {v: k for k, v in LINKAGES.items()}

CALLING_CONVENTIONS = {
    "c": capi.LLVMCCallConv,
    "fast": capi.LLVMFastCallConv,
    "cold": capi.LLVMColdCallConv,
    "ptx_kernel": capi.LLVMPTXKernelCallConv,
    "ptx_device": capi.LLVMPTXDeviceCallConv,
    "amdgpu_kernel": capi.LLVMAMDGPUKERNELCallConv,
    "spir_kernel": capi.LLVMSPIRKERNELCallConv,
    "spir_func": capi.LLVMSPIRFUNCCallConv,
}
_CC_NAMES = {v: k for k, v in CALLING_CONVENTIONS.items()}

# Attributes whose value is a type (`byval(%T)`), created with LLVMCreateTypeAttribute.
TYPE_ATTRIBUTES = frozenset({"byval", "byref", "sret", "inalloca", "preallocated", "elementtype"})

FUNCTION_INDEX = 0xFFFFFFFF  # LLVMAttributeFunctionIndex
RETURN_INDEX = 0


class GlobalValue(Constant):
    __slots__ = ()

    @property
    def linkage(self) -> str:
        return _LINKAGE_NAMES.get(lib.LLVMGetLinkage(self), "external")

    @linkage.setter
    def linkage(self, name: str) -> None:
        try:
            lib.LLVMSetLinkage(self, LINKAGES[name])
        except KeyError:
            raise ValueError(f"unknown linkage {name!r}; use one of {sorted(LINKAGES)}") from None

    @property
    def is_declaration(self) -> bool:
        return bool(lib.LLVMIsDeclaration(self))

    @property
    def value_type(self) -> Type:
        return Type.from_ref(lib.LLVMGlobalGetValueType(self), self._scope)

    @property
    def parent(self):
        from .module import Module
        ref = lib.LLVMGetGlobalParent(self)
        with self._scope:
            return Module._borrowed(ref)

    @property
    def section(self) -> str:
        raw = lib.LLVMGetSection(self)
        return raw.decode() if raw else ""

    @section.setter
    def section(self, name: str) -> None:
        lib.LLVMSetSection(self, name.encode())

    @property
    def alignment(self) -> int:
        return lib.LLVMGetAlignment(self)

    @alignment.setter
    def alignment(self, value: int) -> None:
        lib.LLVMSetAlignment(self, value)


class Attributes:
    """The attributes at one index of a function (the function itself, its return, a parameter).

    Enum attributes are given by name (`"noinline"`, `"alwaysinline"`), optionally with an
    integer value (`"align", 16`) or, for type attributes, a type (`"byval", struct_ty`); string
    attributes are `("key", "value")` pairs.
    """

    __slots__ = ("_fn", "_index")

    def __init__(self, fn: "Function", index: int) -> None:
        self._fn, self._index = fn, index

    @staticmethod
    def _kind(name: str) -> int:
        data = name.encode()
        kind = lib.LLVMGetEnumAttributeKindForName(data, len(data))
        if kind == 0:
            raise ValueError(f"unknown LLVM attribute {name!r}")
        return kind

    def add(self, name: str, value: "int | str | Type" = 0) -> None:
        ctx = self._fn.type.context
        if isinstance(value, str):
            k, v = name.encode(), value.encode()
            attr = lib.LLVMCreateStringAttribute(ctx, k, len(k), v, len(v))
        elif isinstance(value, Type):
            check_link(self._fn._scope, value, f"attribute {name!r}")
            if name not in TYPE_ATTRIBUTES:
                raise ValueError(f"{name!r} does not take a type; type attributes: {sorted(TYPE_ATTRIBUTES)}")
            attr = lib.LLVMCreateTypeAttribute(ctx, self._kind(name), value)
        elif name in TYPE_ATTRIBUTES:
            # An enum attribute of a type kind prints as IR that LLVM cannot parse back.
            raise ValueError(f"attribute {name!r} needs a type: add({name!r}, some_type)")
        else:
            attr = lib.LLVMCreateEnumAttribute(ctx, self._kind(name), value)
        lib.LLVMAddAttributeAtIndex(self._fn, self._index, attr)

    def remove(self, name: str) -> None:
        data = name.encode()
        kind = lib.LLVMGetEnumAttributeKindForName(data, len(data))
        if kind:
            lib.LLVMRemoveEnumAttributeAtIndex(self._fn, self._index, kind)
        else:
            lib.LLVMRemoveStringAttributeAtIndex(self._fn, self._index, data, len(data))

    def __contains__(self, name: str) -> bool:
        data = name.encode()
        kind = lib.LLVMGetEnumAttributeKindForName(data, len(data))
        if kind:
            return bool(lib.LLVMGetEnumAttributeAtIndex(self._fn, self._index, kind))
        return bool(lib.LLVMGetStringAttributeAtIndex(self._fn, self._index, data, len(data)))

    def __len__(self) -> int:
        return lib.LLVMGetAttributeCountAtIndex(self._fn, self._index)

    def number(self, name: str) -> int | None:
        """The integer of the enum attribute `name` (`align 16`: 16), or None when there is none."""
        attr = self._enum(self._kind(name))
        return lib.LLVMGetEnumAttributeValue(attr) if attr else None

    def _enum(self, kind: int):
        return lib.LLVMGetEnumAttributeAtIndex(self._fn, self._index, kind)

    def get(self, name: str) -> str | None:
        """The value of the string attribute `name`, or None when there is none."""
        data = name.encode()
        attr = lib.LLVMGetStringAttributeAtIndex(self._fn, self._index, data, len(data))
        if not attr:
            return None
        length = ctypes.c_uint()
        value = lib.LLVMGetStringAttributeValue(attr, ctypes.byref(length))
        return (value or b"")[:length.value].decode()

    def copy_from(self, other: "Attributes") -> None:
        """Add every attribute `other` holds (e.g. when rebuilding a function with a new type)."""
        if other._fn._scope.context is not self._fn._scope.context:
            raise ValueError("copy_from: attributes belong to their LLVM context; the functions are in two")
        n = lib.LLVMGetAttributeCountAtIndex(other._fn, other._index)
        attrs = (capi.LLVMAttributeRef * n)()
        lib.LLVMGetAttributesAtIndex(other._fn, other._index, attrs)
        for attr in attrs:
            lib.LLVMAddAttributeAtIndex(self._fn, self._index, attr)


class CallSiteAttributes(Attributes):
    """The attributes at one index of a call instruction (the call, its return, an argument): what
    the call site promises on top of the callee's (e.g. `zeroext` on a bool argument of an indirect
    call, whose callee is not known). The same interface as Attributes."""

    __slots__ = ()

    def add(self, name: str, value: "int | str | Type" = 0) -> None:
        ctx = self._fn.type.context
        if isinstance(value, str):
            k, v = name.encode(), value.encode()
            attr = lib.LLVMCreateStringAttribute(ctx, k, len(k), v, len(v))
        elif isinstance(value, Type) or name in TYPE_ATTRIBUTES:
            raise ValueError(f"type attribute {name!r}: not supported on call sites by gpuc.llvm")
        else:
            attr = lib.LLVMCreateEnumAttribute(ctx, self._kind(name), value)
        lib.LLVMAddCallSiteAttribute(self._fn, self._index, attr)

    def remove(self, name: str) -> None:
        data = name.encode()
        kind = lib.LLVMGetEnumAttributeKindForName(data, len(data))
        if kind:
            lib.LLVMRemoveCallSiteEnumAttribute(self._fn, self._index, kind)
        else:
            lib.LLVMRemoveCallSiteStringAttribute(self._fn, self._index, data, len(data))

    def __contains__(self, name: str) -> bool:
        data = name.encode()
        kind = lib.LLVMGetEnumAttributeKindForName(data, len(data))
        if kind:
            return bool(lib.LLVMGetCallSiteEnumAttribute(self._fn, self._index, kind))
        return bool(lib.LLVMGetCallSiteStringAttribute(self._fn, self._index, data, len(data)))

    def __len__(self) -> int:
        return lib.LLVMGetCallSiteAttributeCount(self._fn, self._index)

    def _enum(self, kind: int):
        return lib.LLVMGetCallSiteEnumAttribute(self._fn, self._index, kind)

    def copy_from(self, other: "CallSiteAttributes") -> None:
        """Add every attribute the call-site index `other` holds (e.g. when rebuilding a call
        with further arguments)."""
        if not isinstance(other, CallSiteAttributes):
            raise TypeError("copy_from: a call site copies the attributes of another call site")
        if other._fn._scope.context is not self._fn._scope.context:
            raise ValueError("copy_from: attributes belong to their LLVM context; the calls are in two")
        n = lib.LLVMGetCallSiteAttributeCount(other._fn, other._index)
        attrs = (capi.LLVMAttributeRef * n)()
        if n:
            lib.LLVMGetCallSiteAttributes(other._fn, other._index, attrs)
        for attr in attrs:
            lib.LLVMAddCallSiteAttribute(self._fn, self._index, attr)


class Function(GlobalValue):
    __slots__ = ()
    kinds = (capi.LLVMFunctionValueKind,)

    @property
    def function_type(self) -> FunctionType:
        return FunctionType(lib.LLVMGlobalGetValueType(self), self._scope.context)

    @property
    def return_type(self) -> Type:
        return self.function_type.return_type

    @property
    def args(self) -> list[Argument]:
        return [Argument(lib.LLVMGetParam(self, i), self._scope) for i in range(lib.LLVMCountParams(self))]

    @property
    def blocks(self) -> "BlockList":
        return BlockList(self)

    @property
    def entry_block(self) -> BasicBlock | None:
        ref = lib.LLVMGetFirstBasicBlock(self) if lib.LLVMCountBasicBlocks(self) else None
        return BasicBlock(ref, self._scope) if ref else None

    def append_block(self, name: str = "") -> BasicBlock:
        return BasicBlock(lib.LLVMAppendBasicBlockInContext(self.type.context, self, name.encode()), self._scope)

    def append_existing_block(self, block: BasicBlock) -> BasicBlock:
        """Move `block` (from any function, or unlinked by `remove()`) to the end of this function.

        Its instructions move with it, uses and all: moving every block of `f` into `g` moves
        `f`'s body (replace `f`'s arguments with `g`'s first).  The block must be of this module.
        """
        check_link(self._scope, block, "append_existing_block")
        if lib.LLVMGetBasicBlockParent(block):
            lib.LLVMRemoveBasicBlockFromParent(block)
        lib.LLVMAppendExistingBasicBlock(self, block)
        return block

    def instructions(self) -> Iterator:
        """All instructions, block by block (take `list(...)` before erasing any)."""
        for block in self.blocks:
            yield from block.instructions

    @property
    def calling_convention(self) -> str:
        cc = lib.LLVMGetFunctionCallConv(self)
        return _CC_NAMES.get(cc, f"cc{cc}")

    @calling_convention.setter
    def calling_convention(self, cc: str | int) -> None:
        if isinstance(cc, str):
            if cc not in CALLING_CONVENTIONS:
                raise ValueError(f"unknown calling convention {cc!r}; use one of {sorted(CALLING_CONVENTIONS)}")
            cc = CALLING_CONVENTIONS[cc]
        lib.LLVMSetFunctionCallConv(self, cc)

    @property
    def gc(self) -> str | None:
        """The garbage-collection strategy the function names (`gc "..."`), or None."""
        name = lib.LLVMGetGC(self)
        return name.decode(errors="replace") if name else None

    @property
    def attributes(self) -> Attributes:
        return Attributes(self, FUNCTION_INDEX)

    @property
    def return_attributes(self) -> Attributes:
        return Attributes(self, RETURN_INDEX)

    def param_attributes(self, i: int) -> Attributes:
        return Attributes(self, i + 1)

    @property
    def intrinsic_id(self) -> int:
        return lib.LLVMGetIntrinsicID(self)

    def erase(self) -> None:
        """Delete the function. It must have no uses left.

        Views of it, its arguments, blocks and instructions are dead afterwards.
        """
        if self.uses:
            raise ValueError(f"cannot erase function @{self.name}: it still has {len(self.uses)} use(s)")
        gone = erase_addresses(self)
        lib.LLVMDeleteFunction(self)
        self._scope.erase(gone)

    def delete_body(self) -> None:
        """Turn a definition into a declaration."""
        blocks = list(self.blocks)
        for block in blocks:
            for inst in block.instructions:
                if inst.uses:
                    inst.replace_all_uses_with(Constant.poison(inst.type))
        # Empty every block before deleting any, so no branch is left naming a deleted block.
        for block in blocks:
            for inst in reversed(list(block.instructions)):
                inst.erase()
        for block in blocks:
            block.erase()

    def verify(self) -> bool:
        return not lib.LLVMVerifyFunction(self, capi.LLVMReturnStatusAction)


class BlockList:
    __slots__ = ("_fn",)

    def __init__(self, fn: Function) -> None:
        self._fn = fn

    def __iter__(self) -> Iterator[BasicBlock]:
        scope = self._fn._scope
        ref = lib.LLVMGetFirstBasicBlock(self._fn)
        while ref:
            block = BasicBlock(ref, scope)
            yield block
            ref = lib.LLVMGetNextBasicBlock(block)  # checked: raises if the body erased it

    def __len__(self) -> int:
        return lib.LLVMCountBasicBlocks(self._fn)

    def __getitem__(self, i: int) -> BasicBlock:
        blocks = list(self)
        return blocks[i]


class GlobalVariable(GlobalValue):
    __slots__ = ()
    kinds = (capi.LLVMGlobalVariableValueKind,)

    @property
    def initializer(self) -> Value | None:
        ref = lib.LLVMGetInitializer(self)
        return Value.from_ref(ref, self._scope) if ref else None

    @initializer.setter
    def initializer(self, value: Value | None) -> None:
        if value is not None:
            check_link(self._scope, value, "initializer")
        lib.LLVMSetInitializer(self, value.ref if value is not None else None)

    @property
    def is_global_constant(self) -> bool:
        return bool(lib.LLVMIsGlobalConstant(self))

    @is_global_constant.setter
    def is_global_constant(self, flag: bool) -> None:
        lib.LLVMSetGlobalConstant(self, int(flag))

    @property
    def thread_local(self) -> bool:
        return bool(lib.LLVMIsThreadLocal(self))

    def erase(self) -> None:
        if self.uses:
            raise ValueError(f"cannot erase global @{self.name}: it still has {len(self.uses)} use(s)")
        gone = erase_addresses(self)
        lib.LLVMDeleteGlobal(self)
        self._scope.erase(gone)


class GlobalAlias(GlobalValue):
    __slots__ = ()
    kinds = (capi.LLVMGlobalAliasValueKind, capi.LLVMGlobalIFuncValueKind)
