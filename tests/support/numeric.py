"""The numeric rules of docs/frontend.md, written independently of gpuc: types, NumPy 2 promotion with
weak Python literals (NEP 50), wrapping integers, float32 rounding and conversions.

Values are plain Python: bool for bool, int (already wrapped to its width) for integers,
np.float32 / np.float64 for floats. Weak literals keep their Python value (int, float, bool).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

INTS = ("int32", "uint32", "int64", "uint64")
FLOATS = ("float32", "float64")
SCALARS = ("bool",) + INTS + FLOATS
#: The small dtypes: element types of arrays and scalar arguments (the generator draws them there).
SMALL_INTS_T = ("int8", "uint8", "int16", "uint16")
SMALL = SMALL_INTS_T + ("float16",)
ALL_SCALARS = SCALARS + SMALL
#: Complex numbers (support.complexes): pairs of float32 / float64 parts.
COMPLEX_T = ("complex64", "complex128")
BITS = {"bool": 1, "int8": 8, "uint8": 8, "int16": 16, "uint16": 16, "int32": 32, "uint32": 32, "int64": 64,
        "uint64": 64, "float16": 16, "float32": 32, "float64": 64}
NUMPY = {t: np.dtype(t).type for t in ALL_SCALARS + COMPLEX_T}


class Weak(int):
    """An integer literal's value while it is evaluated (it converts to float32 through float64)."""


class Expected(Exception):
    """The program is one the docs define as a compile error (its `kind` says which rule)."""

    def __init__(self, kind: str, message: str = "") -> None:
        super().__init__(f"{kind}: {message}" if message else kind)
        self.kind = kind


class Undefined(Exception):
    """The program's behaviour is undefined or outside what the reference models: it is discarded."""


@dataclass(frozen=True)
class Arr:
    dtype: str
    ndim: int

    def __str__(self) -> str:
        return f"Array[{self.dtype}, {self.ndim}]"


@dataclass(frozen=True)
class Tup:
    elts: tuple

    def __str__(self) -> str:
        return "(" + ", ".join(map(str, self.elts)) + ")"


@dataclass(frozen=True)
class FnPtr:
    """The type of a function pointer (`gpuc.deferred`): parameter types and return type."""
    params: tuple
    ret: object

    def __str__(self) -> str:
        return f"FnPtr[({', '.join(map(str, self.params))}) -> {self.ret}]"


def is_int(t) -> bool:
    return t in INTS or t in SMALL_INTS_T


def is_float(t) -> bool:
    return t in FLOATS or t == "float16"


def is_complex(t) -> bool:
    return t in COMPLEX_T


def part_type(t) -> str:
    """The type of a complex type's parts."""
    return "float32" if t == "complex64" else "float64"


def is_scalar(t) -> bool:
    return isinstance(t, str) and (t in ALL_SCALARS or t in COMPLEX_T)


def signed(t) -> bool:
    return t in ("int8", "int16", "int32", "int64")


def int_range(t) -> tuple[int, int]:
    b = BITS[t]
    return (-(1 << (b - 1)), (1 << (b - 1)) - 1) if signed(t) else (0, (1 << b) - 1)


def wrap(x: int, t: str) -> int:
    b = BITS[t]
    x &= (1 << b) - 1
    if signed(t) and x >> (b - 1):
        x -= 1 << b
    return x


def fits(value, t: str) -> bool:
    """Whether a weak literal `value` can take type `t` without an out-of-range error."""
    if isinstance(value, bool) or is_float(t) or is_complex(t):
        return True
    if isinstance(value, float):
        return not is_int(t)
    lo, hi = int_range(t if t != "bool" else "int64")
    return lo <= value <= hi


def stores(value, t: str) -> bool:
    """Whether a weak literal `value` can be stored into an array of dtype `t`, as NumPy's setitem stores a
    Python number: a float into an integer dtype is truncated toward zero and must then fit (`o[0] = -0.7`
    stores 0 into a uint8 array, `-1.5` is out of its range; NaN and the infinities never fit); anything else
    as `fits`."""
    if isinstance(value, float) and is_int(t):
        return math.isfinite(value) and fits(math.trunc(value), t)
    return fits(value, t)


# -- promotion ------------------------------------------------------------------------------

def _weak_kind(value) -> str:
    return "bool" if isinstance(value, (bool, np.bool_)) else "int" if isinstance(value, int) else "float"


def default_type(value) -> str:
    """The strong type of a weak literal: int -> int64, float -> float64, bool -> bool."""
    return {"bool": "bool", "int": "int64", "float": "float64"}[_weak_kind(value)]


def promote(a: str, b: str) -> str:
    """The common type of two strong scalar types (NumPy 2, docs/frontend.md 'Promotion'): NumPy's own
    answer, so the reference cannot share a mistake with gpuc's table."""
    return np.promote_types(a, b).name


def promote_all(types) -> str:
    """The common type of several strong types: NumPy's result_type, which is not pairwise promotion
    where small dtypes meet (int8, uint8 and float16 give float16)."""
    return np.result_type(*types).name


def promote_weak(value, strong: str) -> str:
    """The type a weak literal `value` and a strong type meet in (NEP 50)."""
    kind = _weak_kind(value)
    if kind == "bool":
        return strong
    if kind == "int":
        return "int64" if strong == "bool" else strong
    return strong if is_float(strong) or is_complex(strong) else "float64"


def common(operands, check: bool = True) -> str | None:
    """The common type of `operands`, a list of (type, weak, value); None when all are weak.
    With `check`, a weak integer that does not fit the result is an Expected('literal') error."""
    strong = [t for t, weak, _ in operands if not weak]
    if not strong:
        return None
    result = promote_all(strong)
    for t, weak, value in operands:
        if weak:
            result = promote_weak(value, result)
    if check:
        for t, weak, value in operands:
            if weak and not fits(value, result):
                raise Expected("literal", f"{value!r} does not fit {result}")
    return result


# -- conversions ----------------------------------------------------------------------------

def convert(value, t: str):
    """`value` (a typed or weak value) converted to scalar type `t`: NumPy's casts, and where NumPy's
    result is platform-defined (a float that is NaN or out of the integer type's range) saturation:
    NaN gives 0, values beyond the range the type's minimum or maximum (docs/frontend.md)."""
    if t == "bool":
        return bool(value)
    if is_complex(t):  # NumPy's conversion: each part rounded to the part type, a real value's imag +0.0
        p = part_type(t)
        if isinstance(value, (complex, np.complexfloating)):
            return NUMPY[t](complex(convert(np.float64(value.real), p), convert(np.float64(value.imag), p)))
        return NUMPY[t](complex(convert(value, p), 0.0))
    if is_int(t):
        if isinstance(value, (float, np.floating)):
            if math.isnan(value):
                return 0
            lo, hi = int_range(t)
            if math.isinf(value):
                return lo if value < 0 else hi
            return min(max(int(value), lo), hi)
        return wrap(int(value), t)
    if isinstance(value, (bool, np.bool_)):
        value = int(value)
    if t == "float64":
        return np.float64(value)
    if t == "float16":  # rounded once from the value (an integer or a float64 exactly as it is)
        with np.errstate(over="ignore"):
            if isinstance(value, int) and not isinstance(value, Weak):
                return np.float16(np.int64(value) if value < (1 << 63) else np.uint64(value))
            return np.float16(value if isinstance(value, np.floating) else float(value))
    if isinstance(value, Weak):  # a literal becomes float32 through float64 (as in NumPy)
        return np.float32(float(value))
    if isinstance(value, int):  # a typed integer -> float32 rounds once
        if -(1 << 63) <= value < (1 << 63):
            return np.float32(np.int64(value))
        if 0 <= value < (1 << 64):
            return np.float32(np.uint64(value))
        return np.float32(float(value))
    return np.float32(value)


def bit_count(name: str, x: int, t: str) -> int:
    """CUDA's popc / clz / ffs of the integer `x` of type `t` (docs/frontend.md, Bit counts): the bits set,
    the leading zero bits (the width for 0), the 1-based position of the lowest bit set (0 for 0)."""
    bits = BITS[t]
    u = int(x) & ((1 << bits) - 1)
    if name == "popc":
        return bin(u).count("1")
    if name == "clz":
        return bits - u.bit_length()
    return (u & -u).bit_length()


def zero(t):
    if isinstance(t, Tup):
        return tuple(zero(e) for e in t.elts)
    return convert(0, t)


def truth(value) -> bool:
    return bool(value)  # NaN is true, as in Python


def from_numpy(x, t: str):
    """An array element read from NumPy, as a reference value of type `t`."""
    if t == "bool":
        return bool(x)
    if is_int(t):
        return int(x)
    return NUMPY[t](x)  # floats and complex numbers keep their NumPy type
