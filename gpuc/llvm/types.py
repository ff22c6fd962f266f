"""LLVM types, as borrowed views; concrete classes are chosen by type kind."""

from __future__ import annotations

import ctypes

from . import capi
from ._base import Handle
from .capi import bare, in_flight, lib


class Type(Handle):
    """An LLVM type. `Type.from_ref` picks the subclass registered for the type's kind."""

    __slots__ = ()
    _by_kind: dict[int, type["Type"]] = {}
    kinds: tuple[int, ...] = ()

    def __init_subclass__(cls, **kw) -> None:
        super().__init_subclass__(**kw)
        for kind in cls.__dict__.get("kinds", ()):
            Type._by_kind[kind] = cls

    @staticmethod
    def from_ref(ref, scope) -> "Type":
        """The view of `ref`, reached from a view whose Scope is `scope`: types live with the context."""
        scope = scope.context
        calls = in_flight.calls  # `with scope:` inlined, as in Value.from_ref
        calls.append(scope)
        try:
            if scope.gen is None:
                raise scope.gone()
            return Type._by_kind.get(bare.LLVMGetTypeKind(ref), Type)(ref, scope)
        finally:
            calls.pop()

    @property
    def kind(self) -> int:
        return lib.LLVMGetTypeKind(self)

    @property
    def context(self):
        from .context import Context
        return Context(lib.LLVMGetTypeContext(self), owned=False)

    @property
    def is_sized(self) -> bool:
        return bool(lib.LLVMTypeIsSized(self))

    def __str__(self) -> str:
        return capi.take_message(ctypes.c_void_p(lib.LLVMPrintTypeToString(self)))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self}>"


# What LLVM accepts where (its asserts, which a release libLLVM skips: the IR would be invalid).
_NOT_RETURNABLE = {capi.LLVMFunctionTypeKind, capi.LLVMLabelTypeKind, capi.LLVMMetadataTypeKind}
_NOT_PARAM = {capi.LLVMVoidTypeKind, capi.LLVMFunctionTypeKind}
_NOT_ELEMENT = {capi.LLVMVoidTypeKind, capi.LLVMLabelTypeKind, capi.LLVMMetadataTypeKind, capi.LLVMFunctionTypeKind,
                capi.LLVMTokenTypeKind, capi.LLVMX86_AMXTypeKind}
_VECTOR_ELEMENT = {capi.LLVMIntegerTypeKind, capi.LLVMPointerTypeKind, capi.LLVMHalfTypeKind, capi.LLVMBFloatTypeKind,
                   capi.LLVMFloatTypeKind, capi.LLVMDoubleTypeKind, capi.LLVMX86_FP80TypeKind, capi.LLVMFP128TypeKind,
                   capi.LLVMPPC_FP128TypeKind}


def _same_context(anchor, ty: Type, what: str) -> None:
    if ty._scope is not anchor._scope.context:
        raise ValueError(f"{what}: {ty} belongs to another LLVM context; types cannot cross contexts")


def check_address_space(address_space: int) -> int:
    """`address_space` if LLVM can represent it (24 bits); C would silently truncate it."""
    if not 0 <= address_space < 1 << 24:
        raise ValueError(f"address spaces are 0 to 2**24 - 1, not {address_space}")
    return address_space


def _check_kind(ty: Type, rejected=None, allowed=None, *, what: str) -> None:
    kind = ty.kind
    if (rejected is not None and kind in rejected) or (allowed is not None and kind not in allowed):
        raise TypeError(f"{ty} cannot be {what}")


class VoidType(Type):
    __slots__ = ()
    kinds = (capi.LLVMVoidTypeKind,)


class IntegerType(Type):
    __slots__ = ()
    kinds = (capi.LLVMIntegerTypeKind,)

    @property
    def width(self) -> int:
        return lib.LLVMGetIntTypeWidth(self)


class FloatingType(Type):
    __slots__ = ()
    kinds = (capi.LLVMHalfTypeKind, capi.LLVMBFloatTypeKind, capi.LLVMFloatTypeKind,
             capi.LLVMDoubleTypeKind, capi.LLVMX86_FP80TypeKind, capi.LLVMFP128TypeKind)


class PointerType(Type):
    __slots__ = ()
    kinds = (capi.LLVMPointerTypeKind,)

    @property
    def address_space(self) -> int:
        return lib.LLVMGetPointerAddressSpace(self)


class FunctionType(Type):
    __slots__ = ()
    kinds = (capi.LLVMFunctionTypeKind,)

    @staticmethod
    def get(return_type: Type, params=(), *, vararg: bool = False) -> "FunctionType":
        params = list(params)
        _check_kind(return_type, _NOT_RETURNABLE, what="a function's return type")
        for p in params:
            _check_kind(p, _NOT_PARAM, what="a function parameter type")
            _same_context(return_type, p, "FunctionType.get")
        arr = (capi.LLVMTypeRef * len(params))(*[p.ref for p in params])
        return FunctionType(lib.LLVMFunctionType(return_type, arr, len(params), int(vararg)), return_type._scope)

    @property
    def return_type(self) -> Type:
        return Type.from_ref(lib.LLVMGetReturnType(self), self._scope)

    @property
    def params(self) -> list[Type]:
        n = lib.LLVMCountParamTypes(self)
        arr = (capi.LLVMTypeRef * n)()
        lib.LLVMGetParamTypes(self, arr)
        return [Type.from_ref(arr[i], self._scope) for i in range(n)]

    @property
    def is_vararg(self) -> bool:
        return bool(lib.LLVMIsFunctionVarArg(self))


class _Sequential(Type):
    __slots__ = ()

    @property
    def element_type(self) -> Type:
        return Type.from_ref(lib.LLVMGetElementType(self), self._scope)


class ArrayType(_Sequential):
    __slots__ = ()
    kinds = (capi.LLVMArrayTypeKind,)

    @staticmethod
    def get(element: Type, count: int) -> "ArrayType":
        _check_kind(element, _NOT_ELEMENT | {capi.LLVMScalableVectorTypeKind}, what="an array element type")
        if not 0 <= count < 1 << 64:
            raise ValueError(f"array length must be in [0, 2**64), got {count}")
        return ArrayType(lib.LLVMArrayType2(element, count), element._scope)

    @property
    def count(self) -> int:
        return lib.LLVMGetArrayLength2(self)


class VectorType(_Sequential):
    __slots__ = ()
    kinds = (capi.LLVMVectorTypeKind, capi.LLVMScalableVectorTypeKind)

    @staticmethod
    def get(element: Type, count: int) -> "VectorType":
        _check_kind(element, allowed=_VECTOR_ELEMENT, what="a vector element type")
        if not 1 <= count < 1 << 32:
            raise ValueError(f"a vector has 1 to 2**32 - 1 elements, got {count}")
        return VectorType(lib.LLVMVectorType(element, count), element._scope)

    @property
    def count(self) -> int:
        return lib.LLVMGetVectorSize(self)


class StructType(Type):
    __slots__ = ()
    kinds = (capi.LLVMStructTypeKind,)

    @staticmethod
    def create(context, elements, *, packed: bool = False, name: str | None = None) -> "StructType":
        elements = list(elements)
        for e in elements:
            _check_kind(e, _NOT_ELEMENT | {capi.LLVMScalableVectorTypeKind}, what="a struct element type")
            _same_context(context, e, "StructType.create")
        arr = (capi.LLVMTypeRef * len(elements))(*[e.ref for e in elements])
        if name is None:
            return StructType(lib.LLVMStructTypeInContext(context, arr, len(elements), int(packed)), context._scope)
        ty = StructType(lib.LLVMStructCreateNamed(context, name.encode()), context._scope)
        lib.LLVMStructSetBody(ty, arr, len(elements), int(packed))
        return ty

    @property
    def name(self) -> str | None:
        raw = lib.LLVMGetStructName(self)
        return raw.decode() if raw else None

    @property
    def elements(self) -> list[Type]:
        n = lib.LLVMCountStructElementTypes(self)
        return [Type.from_ref(lib.LLVMStructGetTypeAtIndex(self, i), self._scope) for i in range(n)]

    @property
    def is_packed(self) -> bool:
        return bool(lib.LLVMIsPackedStruct(self))


class LabelType(Type):
    __slots__ = ()
    kinds = (capi.LLVMLabelTypeKind,)


class MetadataType(Type):
    __slots__ = ()
    kinds = (capi.LLVMMetadataTypeKind,)
