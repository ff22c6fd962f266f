"""The operand-type rules the Builder checks before LLVM sees an instruction.

LLVM leaves them to asserts and the verifier; a release libLLVM folds a mistyped operation on
constants into garbage (`sitofp i64 5 to i32` becomes a ppc_fp128) or crashes (`icmp` of two
doubles), so the Builder raises TypeError first.  The checks read type kinds only: they are cheap.
"""

from __future__ import annotations

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


def scalar_kind(value) -> int:
    """The type kind of `value`, or of its elements for a vector."""
    ty = lib.LLVMTypeOf(value)
    kind = lib.LLVMGetTypeKind(ty)
    if kind in VECTORS:
        return lib.LLVMGetTypeKind(lib.LLVMGetElementType(ty))
    return kind


def _kind_name(kind: int) -> str:
    return "floating-point" if kind in FP_BITS else _NAMES.get(kind, "other")


def require(what: str, value, kinds, wanted: str) -> None:
    """TypeError unless `value` is of one of `kinds` (or a vector of them)."""
    if scalar_kind(value) not in kinds:
        raise TypeError(f"{what} takes {wanted} operands, not {value.type}")


def require_pointer(what: str, ptr) -> None:
    if lib.LLVMGetTypeKind(lib.LLVMTypeOf(ptr)) != PTR:
        raise TypeError(f"{what}: the address must be a pointer, not a value of type {ptr.type}")


def _shape(ty: Type):
    """(scalar kind, scalar type ref, vector shape or None) of `ty`."""
    kind = lib.LLVMGetTypeKind(ty)
    if kind in VECTORS:
        elem = lib.LLVMGetElementType(ty)
        return lib.LLVMGetTypeKind(elem), elem, (kind, lib.LLVMGetVectorSize(ty))
    return kind, ty.ref, None


def _bits(kind: int, ref) -> int | None:
    if kind == INT:
        return lib.LLVMGetIntTypeWidth(ref)
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


def check_cast(op: str, src: Type, dst: Type) -> None:
    """TypeError unless `op` converts a value of type `src` to `dst` (LLVM's castIsValid)."""
    skind, sref, sshape = _shape(src)
    dkind, dref, dshape = _shape(dst)
    if op == "bitcast":
        _check_bitcast(src, dst, skind, sref, sshape, dkind, dref, dshape)
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
    elif op == "addrspacecast" and lib.LLVMGetPointerAddressSpace(sref) == lib.LLVMGetPointerAddressSpace(dref):
        problem = "both are in the same address space (a no-op needs no cast)"
    if problem:
        raise TypeError(f"{op} cannot convert {src} to {dst}: {problem}")


def _check_bitcast(src, dst, skind, sref, sshape, dkind, dref, dshape) -> None:
    if skind == PTR or dkind == PTR:
        ok = (skind == dkind and sshape == dshape
              and lib.LLVMGetPointerAddressSpace(sref) == lib.LLVMGetPointerAddressSpace(dref))
        why = "pointers convert only to pointers of the same address space (use addrspacecast)"
    else:
        sbits, dbits = _bits(skind, sref), _bits(dkind, dref)
        scalable = capi.LLVMScalableVectorTypeKind
        ok = (sbits is not None and dbits is not None
              and (sshape is not None and sshape[0] == scalable) == (dshape is not None and dshape[0] == scalable)
              and sbits * (sshape[1] if sshape else 1) == dbits * (dshape[1] if dshape else 1))
        why = "the sizes differ, or a type is not an integer, floating-point or fixed vector type"
    if not ok:
        raise TypeError(f"bitcast cannot convert {src} to {dst}: {why}")


def require_condition(what: str, cond) -> None:
    ty = lib.LLVMTypeOf(cond)
    if lib.LLVMGetTypeKind(ty) in VECTORS:
        ty = lib.LLVMGetElementType(ty)
    if lib.LLVMGetTypeKind(ty) != INT or lib.LLVMGetIntTypeWidth(ty) != 1:
        raise TypeError(f"{what}: the condition must be an i1 (or a vector of i1), not {cond.type}")
