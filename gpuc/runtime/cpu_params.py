"""CPU kernel parameters: signatures and the argv buffer of the range wrapper (docs/kernel-abi.md).

The wrapper reads one 8-byte slot per scalar: an array takes its data pointer, shapes and strides
(1 + 2 * ndim slots), a tuple one slot per element (nested tuples flattened in order), a scalar
one slot holding its value in the low bytes (`i1` as a byte 0/1).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import numpy as np

from ..llvm import StructType

# struct format of one 8-byte argv slot per LLVM scalar type
SLOT_FORMATS = {"i1": "?7x", "i32": "i4x", "i64": "q", "float": "f4x", "double": "d", "ptr": "Q"}
_INT_BITS = {"i32": 32, "i64": 64}


def struct_type_name(elements) -> str:
    """How LLVM prints a literal struct of these element types."""
    return "{ " + ", ".join(elements) + " }" if elements else "{}"


def slot_types(ty) -> list[str] | None:
    """The argv slots (LLVM scalar types) of an LLVM parameter type; None if it cannot be passed."""
    name = str(ty)
    if name in SLOT_FORMATS:
        return [name]
    if not isinstance(ty, StructType) or ty.is_packed or ty.name:
        return None
    out: list[str] = []
    for element in ty.elements:
        slots = slot_types(element)
        if slots is None:
            return None
        out += slots
    return out


@dataclass(frozen=True)
class KernelSignature:
    """What a kernel's parameters are, in order: `("scalar", llvm_type)` with llvm_type one of i1, i32,
    i64, float, double, ptr; `("array", dtype, ndim[, layout])` (ndim 1-3, layout "A" or "C"),
    flattened per docs/kernel-abi.md; or `("tuple", (element, ...))` with scalar or tuple elements,
    passed as an LLVM literal struct."""

    params: tuple

    def __init__(self, params) -> None:
        object.__setattr__(self, "params", tuple(_param(p) for p in params))

    def llvm_types(self) -> tuple[str, ...]:
        """The kernel's LLVM parameter types, as LLVM prints them."""
        out: list[str] = []
        for p in self.params:
            out += ["ptr"] + ["i64"] * (2 * p[2]) if p[0] == "array" else [_llvm_type(p)]
        return tuple(out)


def _llvm_type(p) -> str:
    return p[1] if p[0] == "scalar" else struct_type_name([_llvm_type(e) for e in p[1]])


def _param(p, in_tuple: bool = False) -> tuple:
    kind = p[0] if isinstance(p, tuple) and p else None
    if kind == "scalar" and len(p) == 2 and p[1] in SLOT_FORMATS:
        return p
    if kind == "tuple" and len(p) == 2 and isinstance(p[1], (tuple, list)):
        return ("tuple", tuple(_param(e, in_tuple=True) for e in p[1]))
    if kind == "array" and not in_tuple and len(p) in (3, 4) and p[2] in (1, 2, 3) \
            and (len(p) == 3 or p[3] in ("A", "C")):
        return ("array", np.dtype(p[1]), p[2], p[3] if len(p) == 4 else "A")
    raise ValueError(f"bad kernel parameter {p!r}: use ('scalar', T) with T in {', '.join(SLOT_FORMATS)}, "
                     "('array', dtype, ndim[, layout]) with ndim 1, 2 or 3 and layout 'A' or 'C', "
                     "or ('tuple', (scalar or tuple parameters, ...))")


def as_signature(sig) -> KernelSignature:
    return sig if isinstance(sig, KernelSignature) else KernelSignature(sig)


# -- marshalling: each parameter becomes a function from the argument to its slot values --------

def _scalar(ty: str):
    if ty in _INT_BITS:
        bits = _INT_BITS[ty]
        low, high, wrap = -(1 << (bits - 1)), 1 << bits, 1 << bits

        def to_int(x):  # signed or unsigned: the bits are the same (docs/kernel-abi.md)
            v = operator.index(x)
            if not low <= v < high:
                raise OverflowError(f"{v} does not fit in {ty}")
            return v - wrap if v >= high >> 1 else v
        return to_int
    return {"i1": bool, "float": float, "double": float, "ptr": operator.index}[ty]


def _tuple(elements, what: str):
    parts = [_tuple(e[1], what) if e[0] == "tuple" else _one(_scalar(e[1])) for e in elements]

    def slots(value) -> list:
        if not isinstance(value, tuple) or len(value) != len(parts):
            got = f"a tuple of {len(value)}" if isinstance(value, tuple) else type(value).__name__
            raise TypeError(f"{what} must be a tuple of {len(parts)} element(s), not {got}")
        out: list = []
        for part, element in zip(parts, value):
            out += part(element)
        return out
    return slots


def _one(convert):
    return lambda value: [convert(value)]


def _array(dtype: np.dtype, ndim: int, contiguous: bool, written: bool, what: str):
    size = dtype.itemsize

    def slots(arg) -> list:
        if not isinstance(arg, np.ndarray) or arg.dtype != dtype or arg.ndim != ndim:
            got = f"{arg.dtype}[{arg.ndim}-d]" if isinstance(arg, np.ndarray) else type(arg).__name__
            raise TypeError(f"{what} must be a {ndim}-d numpy array of {dtype}, not {got}")
        if written and not arg.flags.writeable:
            raise ValueError(f"{what} is read-only (flags.writeable is False: a broadcast view, a buffer of "
                             "bytes, a read-only mapping, ...) but the kernel may write to it; pass a writable "
                             "copy (np.array(a))")
        if contiguous and not arg.flags.c_contiguous:
            raise ValueError(f"{what} must be C-contiguous (the kernel was compiled for Array[..., \"C\"]); "
                             "pass np.ascontiguousarray(...)")
        strides = arg.strides
        if any(s % size for s in strides):
            raise ValueError(f"{what}: strides {strides} are not multiples of the item size {size}")
        return [arg.ctypes.data, *arg.shape, *(s // size for s in strides)]
    return slots


def marshallers(signature: KernelSignature, written: frozenset[int], names: list[str], entry: str) -> list:
    """One function per parameter from the argument to its slot values, checking it.

    `written` holds the LLVM parameter indices the kernel may write through, `names` the LLVM
    parameter names (for messages).
    """
    out, index = [], 0
    for i, p in enumerate(signature.params):
        name = names[index].removesuffix(".data") if index < len(names) and names[index] else ""
        what = f"argument {i}{f' ({name})' if name else ''} of @{entry}"
        if p[0] == "array":
            out.append(_array(p[1], p[2], p[3] == "C", index in written, what))
            index += 1 + 2 * p[2]
            continue
        out.append(_tuple(p[1], what) if p[0] == "tuple" else _one(_scalar(p[1])))
        index += 1
    return out
