"""The operand-type rules the Builder checks before LLVM sees an instruction.

LLVM leaves them to asserts and the verifier; a release libLLVM folds a mistyped operation on
constants into garbage (`sitofp i64 5 to i32` becomes a ppc_fp128) or crashes (`icmp` of two
doubles), so the Builder raises TypeError first.  The checks read type kinds only: they are cheap.
"""

from __future__ import annotations

import ctypes

from . import capi
from .capi import lib
from .types import Type

INT = capi.LLVMIntegerTypeKind
PTR = capi.LLVMPointerTypeKind
FP_BITS = {capi.LLVMHalfTypeKind: 16, capi.LLVMBFloatTypeKind: 16, capi.LLVMFloatTypeKind: 32,
           capi.LLVMDoubleTypeKind: 64, capi.LLVMX86_FP80TypeKind: 80, capi.LLVMFP128TypeKind: 128,
           capi.LLVMPPC_FP128TypeKind: 128}
VECTORS = frozenset((capi.LLVMVectorTypeKind, capi.LLVMScalableVectorTypeKind))
_NAMES = {INT: "integer", PTR: "pointer"}


class _Raw:
    """C functions on types that take and return plain addresses (no view objects made): the
    checks run for every instruction built, so they avoid wrapping types."""

    _PROTOTYPES = {"LLVMTypeOf": ctypes.c_void_p, "LLVMGetTypeKind": ctypes.c_int,
                   "LLVMGetElementType": ctypes.c_void_p, "LLVMGetIntTypeWidth": ctypes.c_uint,
                   "LLVMGetVectorSize": ctypes.c_uint, "LLVMGetPointerAddressSpace": ctypes.c_uint}

    def __getattr__(self, name: str):
        fn = lib.dll[name]  # a fresh function object: lib's own binding keeps its prototype
        fn.restype, fn.argtypes = self._PROTOTYPES[name], [ctypes.c_void_p]
        setattr(self, name, fn)
        return fn


raw = _Raw()


def type_of(value) -> int:
    """The address of `value`'s type; a dead view raises its ValueError."""
    try:
        return raw.LLVMTypeOf(value)
    except ctypes.ArgumentError:
        value._as_parameter_  # raises the view's own error
        raise


def same_type(what: str, lhs, rhs) -> int:
    """The address of the common type of `lhs` and `rhs`; TypeError if they differ."""
    ty = type_of(lhs)
    if ty != type_of(rhs):
        raise TypeError(f"{what}: operand types differ ({lhs.type} vs {rhs.type})")
    return ty


def kind_of(ty: int) -> int:
    """The kind of type `ty` (an address), or of its elements for a vector."""
    kind = raw.LLVMGetTypeKind(ty)
    if kind in VECTORS:
        return raw.LLVMGetTypeKind(raw.LLVMGetElementType(ty))
    return kind


def scalar_kind(value) -> int:
    """The type kind of `value`, or of its elements for a vector."""
    return kind_of(type_of(value))


def _kind_name(kind: int) -> str:
    return "floating-point" if kind in FP_BITS else _NAMES.get(kind, "other")


def require(what: str, value, kinds, wanted: str) -> None:
    """TypeError unless `value` is of one of `kinds` (or a vector of them)."""
    if scalar_kind(value) not in kinds:
        raise TypeError(f"{what} takes {wanted} operands, not {value.type}")


def require_pointer(what: str, ptr, *, vector: bool = False) -> None:
    """TypeError unless `ptr` is a pointer (or, with `vector`, a vector of pointers)."""
    if (scalar_kind(ptr) if vector else raw.LLVMGetTypeKind(type_of(ptr))) != PTR:
        raise TypeError(f"{what}: the address must be a pointer, not a value of type {ptr.type}")


def _shape(ty):
    """(scalar kind, scalar type, vector shape or None) of `ty` (a Type or an address)."""
    kind = raw.LLVMGetTypeKind(ty)
    if kind in VECTORS:
        elem = raw.LLVMGetElementType(ty)
        return raw.LLVMGetTypeKind(elem), elem, (kind, raw.LLVMGetVectorSize(ty))
    return kind, ty, None


def _bits(kind: int, ty) -> int | None:
    if kind == INT:
        return raw.LLVMGetIntTypeWidth(ty)
    return FP_BITS.get(kind)


# cast -> (source kinds, destination kinds, how the scalar widths must compare)
_CASTS = {
    "trunc": ({INT}, {INT}, "narrower"), "zext": ({INT}, {INT}, "wider"), "sext": ({INT}, {INT}, "wider"),
    "fptrunc": (set(FP_BITS), set(FP_BITS), "narrower"), "fpext": (set(FP_BITS), set(FP_BITS), "wider"),
    "fptoui": (set(FP_BITS), {INT}, None), "fptosi": (set(FP_BITS), {INT}, None),
    "uitofp": ({INT}, set(FP_BITS), None), "sitofp": ({INT}, set(FP_BITS), None),
    "ptrtoint": ({PTR}, {INT}, None), "ptrtoaddr": ({PTR}, {INT}, None), "inttoptr": ({INT}, {PTR}, None),
    "addrspacecast": ({PTR}, {PTR}, None),
}


def check_cast(op: str, value, dst: Type) -> None:
    """TypeError unless `op` converts `value` to type `dst` (LLVM's castIsValid)."""
    skind, sref, sshape = _shape(type_of(value))
    dkind, dref, dshape = _shape(dst)
    if op == "bitcast":
        _check_bitcast(value, dst, skind, sref, sshape, dkind, dref, dshape)
        return
    kinds_in, kinds_out, size = _CASTS[op]
    problem = None
    if skind not in kinds_in or dkind not in kinds_out:
        problem = f"it converts {_kind_name(next(iter(kinds_in)))} to {_kind_name(next(iter(kinds_out)))} values"
    elif sshape != dshape:
        problem = "the element counts differ"
    elif size is not None:
        sbits, dbits = _bits(skind, sref), _bits(dkind, dref)
        if (sbits <= dbits) if size == "narrower" else (sbits >= dbits):
            problem = f"the result must be {size} than the operand"
    elif op == "addrspacecast" and raw.LLVMGetPointerAddressSpace(sref) == raw.LLVMGetPointerAddressSpace(dref):
        problem = "both are in the same address space (a no-op needs no cast)"
    if problem:
        raise TypeError(f"{op} cannot convert {value.type} to {dst}: {problem}")


def _check_bitcast(value, dst, skind, sref, sshape, dkind, dref, dshape) -> None:
    if skind == PTR or dkind == PTR:
        ok = (skind == dkind and sshape == dshape
              and raw.LLVMGetPointerAddressSpace(sref) == raw.LLVMGetPointerAddressSpace(dref))
        why = "pointers convert only to pointers of the same address space (use addrspacecast)"
    else:
        sbits, dbits = _bits(skind, sref), _bits(dkind, dref)
        scalable = capi.LLVMScalableVectorTypeKind
        ok = (sbits is not None and dbits is not None
              and (sshape is not None and sshape[0] == scalable) == (dshape is not None and dshape[0] == scalable)
              and sbits * (sshape[1] if sshape else 1) == dbits * (dshape[1] if dshape else 1))
        why = "the sizes differ, or a type is not an integer, floating-point or fixed vector type"
    if not ok:
        raise TypeError(f"bitcast cannot convert {value.type} to {dst}: {why}")


def require_condition(what: str, cond) -> None:
    ty = type_of(cond)
    if raw.LLVMGetTypeKind(ty) in VECTORS:
        ty = raw.LLVMGetElementType(ty)
    if raw.LLVMGetTypeKind(ty) != INT or raw.LLVMGetIntTypeWidth(ty) != 1:
        raise TypeError(f"{what}: the condition must be an i1 (or a vector of i1), not {cond.type}")
