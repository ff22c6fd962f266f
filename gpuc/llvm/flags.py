"""The names of LLVM's instruction flags and enums (fast-math flags, atomic orderings, atomicrmw
operations, compare predicates, GEP no-wrap flags), spelled as in the IR, and their codes."""

from __future__ import annotations

from . import capi

FAST_MATH_FLAGS = {
    "reassoc": capi.LLVMFastMathAllowReassoc, "nnan": capi.LLVMFastMathNoNaNs, "ninf": capi.LLVMFastMathNoInfs,
    "nsz": capi.LLVMFastMathNoSignedZeros, "arcp": capi.LLVMFastMathAllowReciprocal,
    "contract": capi.LLVMFastMathAllowContract, "afn": capi.LLVMFastMathApproxFunc,
}
ATOMIC_ORDERINGS = {
    "unordered": capi.LLVMAtomicOrderingUnordered, "monotonic": capi.LLVMAtomicOrderingMonotonic,
    "acquire": capi.LLVMAtomicOrderingAcquire, "release": capi.LLVMAtomicOrderingRelease,
    "acq_rel": capi.LLVMAtomicOrderingAcquireRelease, "seq_cst": capi.LLVMAtomicOrderingSequentiallyConsistent,
}
ATOMIC_RMW_OPERATIONS = {
    "xchg": capi.LLVMAtomicRMWBinOpXchg, "add": capi.LLVMAtomicRMWBinOpAdd, "sub": capi.LLVMAtomicRMWBinOpSub,
    "and": capi.LLVMAtomicRMWBinOpAnd, "nand": capi.LLVMAtomicRMWBinOpNand, "or": capi.LLVMAtomicRMWBinOpOr,
    "xor": capi.LLVMAtomicRMWBinOpXor, "max": capi.LLVMAtomicRMWBinOpMax, "min": capi.LLVMAtomicRMWBinOpMin,
    "umax": capi.LLVMAtomicRMWBinOpUMax, "umin": capi.LLVMAtomicRMWBinOpUMin,
    "fadd": capi.LLVMAtomicRMWBinOpFAdd, "fsub": capi.LLVMAtomicRMWBinOpFSub,
    "fmax": capi.LLVMAtomicRMWBinOpFMax, "fmin": capi.LLVMAtomicRMWBinOpFMin,
    "uinc_wrap": capi.LLVMAtomicRMWBinOpUIncWrap, "udec_wrap": capi.LLVMAtomicRMWBinOpUDecWrap,
    "usub_cond": capi.LLVMAtomicRMWBinOpUSubCond, "usub_sat": capi.LLVMAtomicRMWBinOpUSubSat,
    "fmaximum": capi.LLVMAtomicRMWBinOpFMaximum, "fminimum": capi.LLVMAtomicRMWBinOpFMinimum,
}
ICMP_PREDICATES = {
    "eq": capi.LLVMIntEQ, "ne": capi.LLVMIntNE,
    "ugt": capi.LLVMIntUGT, "uge": capi.LLVMIntUGE, "ult": capi.LLVMIntULT, "ule": capi.LLVMIntULE,
    "sgt": capi.LLVMIntSGT, "sge": capi.LLVMIntSGE, "slt": capi.LLVMIntSLT, "sle": capi.LLVMIntSLE,
}
FCMP_PREDICATES = {
    "false": capi.LLVMRealPredicateFalse, "true": capi.LLVMRealPredicateTrue,
    "oeq": capi.LLVMRealOEQ, "ogt": capi.LLVMRealOGT, "oge": capi.LLVMRealOGE, "olt": capi.LLVMRealOLT,
    "ole": capi.LLVMRealOLE, "one": capi.LLVMRealONE, "ord": capi.LLVMRealORD, "uno": capi.LLVMRealUNO,
    "ueq": capi.LLVMRealUEQ, "ugt": capi.LLVMRealUGT, "uge": capi.LLVMRealUGE, "ult": capi.LLVMRealULT,
    "ule": capi.LLVMRealULE, "une": capi.LLVMRealUNE,
}
GEP_NO_WRAP_FLAGS = {"inbounds": capi.LLVMGEPFlagInBounds, "nusw": capi.LLVMGEPFlagNUSW, "nuw": capi.LLVMGEPFlagNUW}

_ALL_FAST_MATH = capi.LLVMFastMathAll
_ORDERING_NAMES = {code: name for name, code in ATOMIC_ORDERINGS.items()}
_RMW_NAMES = {code: name for name, code in ATOMIC_RMW_OPERATIONS.items()}
_ICMP_NAMES = {code: name for name, code in ICMP_PREDICATES.items()}
_FCMP_NAMES = {code: name for name, code in FCMP_PREDICATES.items()}


def _names(flags) -> tuple:
    return (flags,) if isinstance(flags, str) else tuple(flags)


def fast_math_bits(flags) -> int:
    """The LLVMFastMathFlags of `flags`: a name or an iterable of names ("fast" means all)."""
    bits = 0
    for name in _names(flags):
        if name == "fast":
            bits |= _ALL_FAST_MATH
        elif name in FAST_MATH_FLAGS:
            bits |= FAST_MATH_FLAGS[name]
        else:
            raise ValueError(f"unknown fast-math flag {name!r}; use {', '.join(FAST_MATH_FLAGS)} or 'fast'")
    return bits


def fast_math_names(bits: int) -> frozenset[str]:
    """The names of the fast-math flags set in `bits` (all seven when the instruction is `fast`)."""
    return frozenset(name for name, bit in FAST_MATH_FLAGS.items() if bits & bit)


def gep_no_wrap_bits(flags) -> int:
    bits = 0
    for name in _names(flags):
        if name not in GEP_NO_WRAP_FLAGS:
            raise ValueError(f"unknown getelementptr flag {name!r}; use {', '.join(GEP_NO_WRAP_FLAGS)}")
        bits |= GEP_NO_WRAP_FLAGS[name]
    return bits


def gep_no_wrap_names(bits: int) -> frozenset[str]:
    return frozenset(name for name, bit in GEP_NO_WRAP_FLAGS.items() if bits & bit)


def ordering_code(ordering: "str | int | None") -> int:
    """The LLVMAtomicOrdering of an ordering name (codes pass through); None means not atomic."""
    if ordering is None:
        return capi.LLVMAtomicOrderingNotAtomic
    if isinstance(ordering, int) and ordering in _ORDERING_NAMES:
        return ordering
    code = ATOMIC_ORDERINGS.get(ordering)
    if code is None:
        raise ValueError(f"unknown atomic ordering {ordering!r}; use one of {', '.join(ATOMIC_ORDERINGS)} "
                         "(or None: not atomic)")
    return code


def ordering_name(code: int) -> str | None:
    return _ORDERING_NAMES.get(code)


def rmw_code(operation: "str | int") -> int:
    """The LLVMAtomicRMWBinOp of an operation name ("add", "fadd", ...); codes pass through."""
    if isinstance(operation, int) and operation in _RMW_NAMES:
        return operation
    code = ATOMIC_RMW_OPERATIONS.get(operation)
    if code is None:
        raise ValueError(f"unknown atomicrmw operation {operation!r}; use one of {', '.join(ATOMIC_RMW_OPERATIONS)}")
    return code


def rmw_name(code: int) -> str:
    return _RMW_NAMES.get(code, f"op{code}")


def predicate_name(code: int, is_float: bool) -> str:
    return (_FCMP_NAMES if is_float else _ICMP_NAMES).get(code, f"predicate{code}")
