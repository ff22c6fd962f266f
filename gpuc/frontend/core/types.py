"""The frontend's value types (scalars, arrays, tuples), NumPy 2 promotion, mangling and LLVM mapping."""

from __future__ import annotations

from dataclasses import dataclass

from ...abi import array_params, array_struct, storage_type
from .errors import UserError


class GType:
    """Base of gpuc value types. Instances are immutable, hashable and compare by value."""

    __slots__ = ()

    @property
    def is_scalar(self) -> bool:
        return False


class _Number(GType):
    """A number type named `name` (a scalar or a complex type): `gpuc.<name>` in Python."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"gpuc.{self.name}"

    def __str__(self) -> str:
        return self.name

    @property
    def is_scalar(self) -> bool:
        return True


@dataclass(frozen=True, repr=False)
class ScalarType(_Number):
    """bool, a signed or unsigned integer, or a float; `kind` is "b", "i", "u" or "f"."""

    name: str
    kind: str
    bits: int

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
int8 = ScalarType("int8", "i", 8)
uint8 = ScalarType("uint8", "u", 8)
int16 = ScalarType("int16", "i", 16)
uint16 = ScalarType("uint16", "u", 16)
float16 = ScalarType("float16", "f", 16)
int32 = ScalarType("int32", "i", 32)
int64 = ScalarType("int64", "i", 64)
uint32 = ScalarType("uint32", "u", 32)
uint64 = ScalarType("uint64", "u", 64)
float32 = ScalarType("float32", "f", 32)
float64 = ScalarType("float64", "f", 64)
SCALARS = (boolean, int32, int64, uint32, uint64, float32, float64)
#: The small dtypes (gpuc/frontend/numeric/small_dtypes.py): storage types for images and half-precision data.
SMALL_SCALARS = (int8, uint8, int16, uint16, float16)
SCALARS = SCALARS + SMALL_SCALARS
_NUMPY_NAMES = {"int8": "int8", "uint8": "uint8", "int16": "int16", "uint16": "uint16", "float16": "float16",
                "bool": "bool", "int32": "int32", "int64": "int64", "uint32": "uint32", "uint64": "uint64",
                "float32": "float32", "float64": "float64"}


@dataclass(frozen=True, repr=False)
class ComplexType(_Number):
    """complex64 / complex128: a (real, imaginary) pair of float32 / float64, as NumPy lays it out
    (gpuc/frontend/numeric/complex.py). Not a ScalarType: every operation on it is complex.py's."""

    name: str
    bits: int

    @property
    def part(self) -> ScalarType:
        """The type of the real and the imaginary part."""
        return float32 if self.bits == 64 else float64

    @property
    def mangled(self) -> str:
        return f"c{self.bits}"

    def __call__(self, value):
        """In Python: convert like NumPy would (used when a func runs in the interpreter)."""
        import numpy as np
        return np.dtype(self.name).type(value)


complex64 = ComplexType("complex64", 64)
complex128 = ComplexType("complex128", 128)
COMPLEX = (complex64, complex128)
#: What an array may hold, and what a kernel takes as a scalar argument.
NUMBERS = (ScalarType, ComplexType)


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
        if not isinstance(dtype, NUMBERS):
            raise TypeError(f"array elements must be scalars (bool, int32, ..., float64, complex128), not {dtype}")
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
    if obj is complex:
        return complex128
    if obj is None:
        return none
    if isinstance(obj, tuple):
        elements = tuple(as_type(e) for e in obj)
        for e in elements:
            if not isinstance(e, (ScalarType, ComplexType, TupleType)):
                raise TypeError(f"tuple elements must be scalars or tuples, not {e}")
        return TupleType(elements)
    try:
        import numpy as np
        dt = np.dtype(obj)
        for s in SCALARS:
            if _NUMPY_NAMES[s.name] == dt.name:
                return s
        for c in COMPLEX:
            if c.name == dt.name:
                return c
    except Exception:  # noqa: BLE001 - not a NumPy dtype either: report below
        pass
    raise TypeError(f"{obj!r} is not a gpuc type; use gpuc.int32, gpuc.int64, gpuc.uint32, gpuc.uint64, "
                    "gpuc.float32, gpuc.float64, gpuc.int8, gpuc.uint8, gpuc.int16, gpuc.uint16, gpuc.float16, "
                    "gpuc.boolean (or bool/int/float, or NumPy dtypes), gpuc.Array[dtype, ndim] or a tuple of these")


def mangle(signature: tuple) -> str:
    return ".".join(t.mangled for t in signature)


# -- NumPy 2 promotion ----------------------------------------------------------------------

def _int_of(kind: str, bits: int) -> ScalarType:
    return {("i", 8): int8, ("i", 16): int16, ("i", 32): int32, ("i", 64): int64, ("u", 8): uint8,
            ("u", 16): uint16, ("u", 32): uint32, ("u", 64): uint64}[(kind, bits)]


def promote(a: ScalarType, b: ScalarType, weak_a: bool = False, weak_b: bool = False) -> ScalarType:
    """The common type of `a` and `b` under NumPy 2's rules; a weak side is a Python literal (NEP 50)."""
    if isinstance(a, ComplexType) or isinstance(b, ComplexType):
        return complex_of(promote(_real_part(a), _real_part(b), weak_a, weak_b))
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
            return a if a.bits >= b.bits else b
        # an integer meets the smallest float holding all its values (NumPy: int32 + float32 -> float64,
        # int8 + float16 -> float16, int16 + float16 -> float32)
        f, i = (a, b) if a.is_float else (b, a)
        return promote(f, {8: float16, 16: float32}.get(i.bits, float64))
    if a.kind == b.kind:
        return a if a.bits >= b.bits else b
    signed, unsigned = (a, b) if a.signed else (b, a)
    if signed.bits > unsigned.bits:
        return signed
    if unsigned.bits * 2 <= 64:
        return _int_of("i", unsigned.bits * 2)
    return float64  # int64 with uint64: no integer holds both


def _real_part(t):
    """What a complex type's parts are (a real type is itself): NumPy promotes complex types through
    their parts (complex64 with int32 is complex128, as float32 with int32 is float64)."""
    return t.part if isinstance(t, ComplexType) else t


def complex_of(t: ScalarType) -> ComplexType:
    """The complex type whose parts hold `t` (float16 and float32 parts give complex64)."""
    return complex64 if t.is_float and t.bits <= 32 else complex128


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
    result = promote_sequence(strong)
    for t, w in zip(types, weak):
        if w:
            result = promote(result, t, False, True)
    return result


def promote_sequence(types) -> ScalarType:
    """The common type of several strong types as NumPy 2's result_type finds it, which is not always
    pairwise promotion: result_type(int8, uint8, float16) is float16 (pairwise: float32). NumPy's
    PyArray_PromoteDTypeSequence: a tournament finds the type that knows most (of a pair, the one with
    the larger type number answers), then each type promotes with that one, and the results among
    themselves."""
    types = list(types)
    if len(types) == 1:
        return types[0]
    if any(t.name not in _TYPE_NUMBERS for t in types):  # a type NumPy does not number: pairwise
        result = types[0]
        for t in types[1:]:
            result = promote(result, t)
        return result
    result = _reduce_to_most_knowledgeable(types, len(types))
    main, start = types[0], 1 if result is _UNKNOWN else 2
    result = None if result is _UNKNOWN else result
    for t in types[start:]:
        if t is not None:
            step = _common_dtype(main, t)
            result = step if result is None else promote(result, step)
    return result


# NumPy's type numbers (Linux: int64 is `long`); float16 comes after all the others.
_TYPE_NUMBERS = {"bool": 0, "int8": 1, "uint8": 2, "int16": 3, "uint16": 4, "int32": 5, "uint32": 6, "int64": 7,
                 "uint64": 8, "float32": 11, "float64": 12, "complex64": 14, "complex128": 15, "float16": 23}
_UNKNOWN = object()  # NumPy's NotImplemented: the other type knows more


def _common_dtype(a: ScalarType, b: ScalarType):
    if a != b and _TYPE_NUMBERS[b.name] > _TYPE_NUMBERS[a.name]:
        return _UNKNOWN
    return promote(a, b)


def _reduce_to_most_knowledgeable(types: list, length: int):
    half, result = length // 2, None
    for low in range(half):
        high = length - 1 - low
        result = types[low] if types[high] == types[low] else _common_dtype(types[low], types[high])
        if result is _UNKNOWN:
            types[low], types[high] = types[high], types[low]
        elif result == types[low]:
            types[high] = None
    return result if length == 2 else _reduce_to_most_knowledgeable(types, length - half)


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


def unify(a: GType, b: GType) -> GType | None:
    """The type a variable gets where paths with types `a` and `b` meet (Numba's unification), or None.

    Beyond `join`: two scalar types unify to their NumPy promotion (`int64` and `float64` give `float64`,
    `bool` and `int64` give `int64`, `int64` and `uint64` give `float64`), tuples element by element.
    The value of each path is converted to the unified type where the paths meet.
    """
    joined = join(a, b)
    if joined is not None:
        return joined
    if isinstance(a, NUMBERS) and isinstance(b, NUMBERS):
        return promote(a, b)
    if isinstance(a, TupleType) and isinstance(b, TupleType) and len(a.elements) == len(b.elements):
        elements = tuple(unify(x, y) for x, y in zip(a.elements, b.elements))
        return None if None in elements else TupleType(elements)
    return None


def widens(src: GType, dst: GType) -> bool:
    """Whether a value of type `src` converts to `dst` where paths meet (`unify(src, dst) == dst`)."""
    return src != dst and unify(src, dst) == dst


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
    if isinstance(t, ComplexType):
        raise UserError(f"{what} cannot be a complex number ({t})",
                        hint="use z.real, z.imag or abs(z) (docs/frontend.md, Complex numbers)")
    if not isinstance(t, ScalarType):
        raise UserError(f"{what} must be a number or bool, not {t}",
                        hint="index arrays to get their elements; tuples must be unpacked")
    return t


# -- LLVM mapping ------------------------------------------------------------------------

def address_space(target) -> dict:
    """Where array data lives on `target` (docs/kernel-abi.md), by ArrayType.space: the target says it."""
    return {"global": target.array_address_space, "shared": target.shared_address_space,
            "local": target.local_address_space, "readonly": target.array_address_space}


def _space(addrspace, t: "ArrayType") -> int:
    return addrspace.get(t.space, 0) if isinstance(addrspace, dict) else addrspace


def llvm_type(t: GType, context, addrspace: int | dict = 0):
    """The LLVM value type of `t`. Inside a function an array is a struct {ptr, i64 x ndim, i64 x ndim}."""
    if isinstance(t, ScalarType):
        if t.is_bool:
            return context.i1
        if t.is_int:
            return context.int_type(t.bits)
        return {16: context.half, 32: context.float}.get(t.bits, context.double)
    if isinstance(t, ArrayType):
        return array_struct(context, t.ndim, _space(addrspace, t))
    if isinstance(t, ComplexType):  # {real, imaginary}: NumPy's layout in arrays, a struct by value elsewhere
        part = llvm_type(t.part, context)
        return context.struct_type([part, part])
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


@dataclass(frozen=True, eq=False)
class PyObject(GType):
    """A compile-time Python object (a module, a function, a gpuc type, ...): no runtime value."""

    value: object

    def __str__(self) -> str:
        return f"the Python object {self.value!r}"


def an(thing) -> str:
    """`thing` (a type, or any text) with its indefinite article: "an int64", "a uint8", "an Array[...]"."""
    text = str(thing)
    vowel = text[:1].lower() in "aeio" or text[:1].lower() == "u" and not text.lower().startswith(("uint", "uni", "use"))
    return f"{'an' if vowel else 'a'} {text}"
