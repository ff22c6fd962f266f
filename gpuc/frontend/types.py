"""The frontend's value types (scalars, arrays, tuples), NumPy 2 promotion, mangling and LLVM mapping."""

from __future__ import annotations

from dataclasses import dataclass

from ..abi import array_params, array_struct, storage_type
from .errors import UserError


class GType:
    """Base of gpuc value types. Instances are immutable, hashable and compare by value."""

    __slots__ = ()

    @property
    def is_scalar(self) -> bool:
        return False


@dataclass(frozen=True)
class ScalarType(GType):
    """bool, a signed or unsigned integer, or a float; `kind` is "b", "i", "u" or "f"."""

    name: str
    kind: str
    bits: int

    def __repr__(self) -> str:
        return f"gpuc.{self.name}"

    def __str__(self) -> str:
        return self.name

    @property
    def is_scalar(self) -> bool:
        return True

    @property
    def is_int(self) -> bool:
        return self.kind in "iu"

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_bool(self) -> bool:
        return self.kind == "b"

    @property
    def signed(self) -> bool:
        return self.kind == "i"

    @property
    def mangled(self) -> str:
        return {"b": "b", "i": f"i{self.bits}", "u": f"u{self.bits}", "f": f"f{self.bits}"}[self.kind]

    def __call__(self, value):
        """In Python: convert like NumPy would (used when a func runs in the interpreter)."""
        import numpy as np
        return np.dtype(_NUMPY_NAMES[self.name]).type(value)


boolean = ScalarType("bool", "b", 1)
int32 = ScalarType("int32", "i", 32)
int64 = ScalarType("int64", "i", 64)
uint32 = ScalarType("uint32", "u", 32)
uint64 = ScalarType("uint64", "u", 64)
float32 = ScalarType("float32", "f", 32)
float64 = ScalarType("float64", "f", 64)
SCALARS = (boolean, int32, int64, uint32, uint64, float32, float64)
_NUMPY_NAMES = {"bool": "bool", "int32": "int32", "int64": "int64", "uint32": "uint32", "uint64": "uint64",
                "float32": "float32", "float64": "float64"}


@dataclass(frozen=True)
class ArrayType(GType):
    """`Array[dtype, ndim]`: a strided view (data pointer, shapes, element strides).

    `layout` "C" (`Array[dtype, ndim, "C"]`) promises C-contiguity: the last dimension has stride
    1, which the compiler then uses as a constant (no stride versioning for the vectorizer). The
    launcher gives contiguous NumPy arrays this type; an "A" parameter accepts either layout.
    """

    dtype: ScalarType
    ndim: int
    layout: str = "A"
    #: Where the elements live: "global" (arguments), "shared" (gpuc.shared.array, per block) or
    #: "local" (gpuc.local.array, per work item); each is its own address space on GPUs.
    space: str = "global"

    def __repr__(self) -> str:
        extra = ', "C"' if self.layout == "C" else ""
        if self.space != "global":
            return f"gpuc.{self.space}.Array[{self.dtype!r}, {self.ndim}{extra}]"
        return f"gpuc.Array[{self.dtype!r}, {self.ndim}{extra}]"

    def __str__(self) -> str:
        extra = ", C" if self.layout == "C" else ""
        where = "" if self.space == "global" else f"{self.space} "
        return f"{where}Array[{self.dtype}, {self.ndim}{extra}]"

    @property
    def mangled(self) -> str:
        return (f"A{self.ndim}{self.dtype.mangled}" + ("C" if self.layout == "C" else "")
                + ("" if self.space == "global" else self.space[0].upper()))

    def accepts(self, other: GType) -> bool:
        """Can a value of type `other` be used where this type is declared?"""
        return other == self or (isinstance(other, ArrayType) and self.layout == "A"
                                 and (other.dtype, other.ndim, other.space) == (self.dtype, self.ndim, self.space))


@dataclass(frozen=True)
class TupleType(GType):
    elements: tuple

    def __repr__(self) -> str:
        return "(" + ", ".join(map(repr, self.elements)) + ("," if len(self.elements) == 1 else "") + ")"

    def __str__(self) -> str:
        return "tuple[" + ", ".join(map(str, self.elements)) + "]"

    @property
    def mangled(self) -> str:
        return f"T{len(self.elements)}" + "".join(e.mangled for e in self.elements) + "E"


@dataclass(frozen=True)
class NoneType(GType):
    """What a function without a return value returns."""

    def __str__(self) -> str:
        return "None"

    @property
    def mangled(self) -> str:
        return "v"


@dataclass(frozen=True)
class FunctionPointerType(GType):
    """A pointer to a gpuc function taking `params` and returning `result` (`gpuc.deferred`).

    Values of one pointer type are interchangeable: a func taking a pointer is specialized per
    pointer type, not per function pointed to. `kernel` marks a pointer to a kernel entry point
    (`deferred(k, ..., kernel=True)`), which is launched, never called. Its LLVM type is `ptr`.
    """

    params: tuple
    result: GType
    kernel: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", tuple(as_type(p) for p in self.params))
        object.__setattr__(self, "result", as_type(self.result))
        object.__setattr__(self, "kernel", bool(self.kernel))

    def __str__(self) -> str:
        kind = "kernel" if self.kernel else "func"
        return f"{kind}({', '.join(map(str, self.params))}) -> {self.result}"

    def __repr__(self) -> str:
        return f"gpuc.FunctionPointerType({self.params!r}, {self.result!r}, kernel={self.kernel})"

    @property
    def mangled(self) -> str:
        return ("K" if self.kernel else "P") + f"{len(self.params)}" + "".join(p.mangled for p in self.params) \
            + "R" + self.result.mangled + "E"


POINTER_USES = ("function pointers can be called, kept in variables and tuples, passed to and returned from "
                "@gpuc.func functions and chosen with if/else; they have no arithmetic, comparison or truth value")


def holds_pointer(t: GType) -> bool:
    """Whether a value of type `t` is or contains a function pointer."""
    return isinstance(t, FunctionPointerType) or isinstance(t, TupleType) and any(map(holds_pointer, t.elements))


none = NoneType()


class _ArrayFactory:
    """`gpuc.Array[dtype, ndim]` builds an ArrayType; `isinstance(t, gpuc.Array)` tests for one."""

    def __getitem__(self, key) -> ArrayType:
        if not isinstance(key, tuple) or len(key) not in (2, 3):
            raise TypeError("write Array[dtype, ndim] (or Array[dtype, ndim, \"C\"] for C-contiguous arrays), "
                            "for example gpuc.Array[gpuc.float32, 2]")
        dtype, ndim, layout = key if len(key) == 3 else (*key, "A")
        if layout not in ("A", "C"):
            raise TypeError(f"array layout must be \"A\" (any strides) or \"C\" (C-contiguous), not {layout!r}")
        dtype = as_type(dtype)
        if not isinstance(dtype, ScalarType):
            raise TypeError(f"array elements must be scalars (bool, int32, ..., float64), not {dtype}")
        if type(ndim) is not int or not 1 <= ndim <= 3:
            raise TypeError(f"arrays have 1 to 3 dimensions, not {ndim!r}")
        return ArrayType(dtype, ndim, layout)

    def __instancecheck__(self, obj) -> bool:
        return isinstance(obj, ArrayType)

    def __repr__(self) -> str:
        return "gpuc.Array"


Array = _ArrayFactory()


def as_type(obj) -> GType:
    """A gpuc type from what users write: gpuc types, Python's bool/int/float, tuples of these."""
    if isinstance(obj, GType):
        return obj
    if obj is bool:
        return boolean
    if obj is int:
        return int64
    if obj is float:
        return float64
    if obj is None:
        return none
    if isinstance(obj, tuple):
        elements = tuple(as_type(e) for e in obj)
        for e in elements:
            if not isinstance(e, (ScalarType, TupleType)):
                raise TypeError(f"tuple elements must be scalars or tuples, not {e}")
        return TupleType(elements)
    try:
        import numpy as np
        dt = np.dtype(obj)
        for s in SCALARS:
            if _NUMPY_NAMES[s.name] == dt.name:
                return s
    except Exception:  # noqa: BLE001 - not a NumPy dtype either: report below
        pass
    raise TypeError(f"{obj!r} is not a gpuc type; use gpuc.int32, gpuc.int64, gpuc.uint32, gpuc.uint64, "
                    "gpuc.float32, gpuc.float64, gpuc.boolean (or bool/int/float), gpuc.Array[dtype, ndim] "
                    "or a tuple of these")


def mangle(signature: tuple) -> str:
    return ".".join(t.mangled for t in signature)


# -- NumPy 2 promotion ----------------------------------------------------------------------

def _int_of(kind: str, bits: int) -> ScalarType:
    return {("i", 32): int32, ("i", 64): int64, ("u", 32): uint32, ("u", 64): uint64}[(kind, bits)]


def promote(a: ScalarType, b: ScalarType, weak_a: bool = False, weak_b: bool = False) -> ScalarType:
    """The common type of `a` and `b` under NumPy 2's rules; a weak side is a Python literal (NEP 50)."""
    if weak_a and not weak_b:
        return _promote_weak(a, b)
    if weak_b and not weak_a:
        return _promote_weak(b, a)
    if a == b:
        return a
    if a.is_bool:
        return b
    if b.is_bool:
        return a
    if a.is_float or b.is_float:
        if a.is_float and b.is_float:
            return float64 if 64 in (a.bits, b.bits) else float32
        return float64  # every int32/int64 with any float: float64 (NumPy: int32 + float32 -> float64)
    if a.kind == b.kind:
        return a if a.bits >= b.bits else b
    signed, unsigned = (a, b) if a.signed else (b, a)
    if signed.bits > unsigned.bits:
        return signed
    if unsigned.bits * 2 <= 64:
        return _int_of("i", unsigned.bits * 2)
    return float64  # int64 with uint64: no integer holds both


def _promote_weak(weak: ScalarType, strong: ScalarType) -> ScalarType:
    if weak.is_bool:
        return strong
    if weak.is_int:
        return int64 if strong.is_bool else strong
    return strong if strong.is_float else float64


def common_type(types, weak=None) -> ScalarType:
    """The common type of several operands, independent of their order: the strong types promote
    among themselves, then each weak literal meets the result (`b and -2 and u` for a bool b and a
    uint32 u is uint32, as NumPy's result_type would say). Literals only: their own promotion."""
    weak = list(weak) if weak is not None else [False] * len(types)
    strong = [t for t, w in zip(types, weak) if not w]
    if not strong:
        result = types[0]
        for t in types[1:]:
            result = promote(result, t)
        return result
    result = strong[0]
    for t in strong[1:]:
        result = promote(result, t)
    for t, w in zip(types, weak):
        if w:
            result = promote(result, t, False, True)
    return result


def join(a: GType, b: GType) -> GType | None:
    """The type a variable has where paths with types `a` and `b` meet, or None when they conflict.

    Arrays are typed by dtype and ndim: a C-contiguous and a strided array of one dtype and ndim join
    to the strided type (their values have one representation). Scalars never join implicitly: the
    docs make a variable with two scalar types an error where it is read.
    """
    if a == b:
        return a
    if isinstance(a, ArrayType) and isinstance(b, ArrayType) and (a.dtype, a.ndim, a.space) == (b.dtype, b.ndim, b.space):
        return ArrayType(a.dtype, a.ndim, space=a.space)
    if isinstance(a, TupleType) and isinstance(b, TupleType) and len(a.elements) == len(b.elements):
        elements = tuple(join(x, y) for x, y in zip(a.elements, b.elements))
        return None if None in elements else TupleType(elements)
    return None


def storage(t: GType) -> GType:
    """The type under which a value is stored: layouts do not change an array's representation."""
    if isinstance(t, ArrayType):
        return ArrayType(t.dtype, t.ndim, space=t.space)
    if isinstance(t, TupleType):
        return TupleType(tuple(storage(e) for e in t.elements))
    return t


def int_range(t: ScalarType) -> tuple[int, int]:
    """The smallest and largest value of an integer (or bool) type."""
    if t.is_bool:
        return 0, 1
    if t.signed:
        return -(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1
    return 0, (1 << t.bits) - 1


def check_scalar(t: GType, what: str) -> ScalarType:
    if isinstance(t, FunctionPointerType):
        raise UserError(f"{what} must be a number or bool, not the function pointer {t}", hint=POINTER_USES)
    if not isinstance(t, ScalarType):
        raise UserError(f"{what} must be a number or bool, not {t}",
                        hint="index arrays to get their elements; tuples must be unpacked")
    return t


# -- LLVM mapping ------------------------------------------------------------------------

def address_space(target) -> dict:
    """Where array data lives on `target` (docs/kernel-abi.md), by ArrayType.space: the target says it."""
    return {"global": target.array_address_space, "shared": target.shared_address_space,
            "local": target.local_address_space}


def _space(addrspace, t: "ArrayType") -> int:
    return addrspace.get(t.space, 0) if isinstance(addrspace, dict) else addrspace


def llvm_type(t: GType, context, addrspace: int | dict = 0):
    """The LLVM value type of `t`. Inside a function an array is a struct {ptr, i64 x ndim, i64 x ndim}."""
    if isinstance(t, ScalarType):
        if t.is_bool:
            return context.i1
        if t.is_int:
            return context.int_type(t.bits)
        return context.float if t.bits == 32 else context.double
    if isinstance(t, ArrayType):
        return array_struct(context, t.ndim, _space(addrspace, t))
    if isinstance(t, TupleType):
        return context.struct_type([llvm_type(e, context, addrspace) for e in t.elements])
    if isinstance(t, NoneType):
        return context.void
    if isinstance(t, FunctionPointerType):
        return context.ptr(0)
    raise TypeError(f"no LLVM type for {t!r}")


def memory_type(t: ScalarType, context):
    """How an array element is stored (gpuc/abi.py): bool is a byte (0 or 1), like NumPy's bool_."""
    return storage_type(llvm_type(t, context), context)


def abi_params(t: GType, context, addrspace: int | dict = 0) -> list:
    """The flattened parameters of an argument of type `t` (gpuc/abi.py; arrays: data, shapes, strides)."""
    if isinstance(t, ArrayType):
        return array_params(context, t.ndim, _space(addrspace, t))
    return [llvm_type(t, context, addrspace)]
