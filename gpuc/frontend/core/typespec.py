"""Argument types written as text (`gpuc compile --types "f32, f32[:], f64[:, ::1]"`), parsed with
the position of every token, so that a mistake can be shown with a caret under it (docs/aot.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .types import COMPLEX, SCALARS, ArrayType, ComplexType, GType, ScalarType, TupleType, as_type


def _short(t: ScalarType | ComplexType) -> str:
    """The short name of a number type: bool, i32, u64, f32, c64, ..."""
    return "bool" if t == SCALARS[0] else t.mangled


NUMBERS = SCALARS + COMPLEX
#: Every spelling of a number type kernels take: the short names (f32) and NumPy's names (float32).
SCALAR_NAMES: dict[str, ScalarType | ComplexType] = {**{s.name: s for s in NUMBERS}, **{_short(s): s for s in NUMBERS},
                                                     **{"bool_": s for s in SCALARS if s.kind == "b"}}
#: Spellings of NumPy types that kernels do not take: say so rather than "unknown type".
_NUMPY_TYPES = {"i8": "int8", "i16": "int16", "u8": "uint8", "u16": "uint16", "f16": "float16", "half": "float16",
                "f128": "float128", "c64": "complex64", "c128": "complex128"}
UNSUPPORTED = {spelling: name for short, name in _NUMPY_TYPES.items() for spelling in (short, name)
               if spelling not in SCALAR_NAMES and name not in SCALAR_NAMES}
ACCEPTED = (f"scalars {', '.join(_short(s) for s in NUMBERS)} "
            f"(or {', '.join(s.name for s in NUMBERS if s != SCALARS[0])}); "
            "arrays of 1 to 3 dimensions T[:], T[:, :], T[:, :, :], C-contiguous T[::1], T[:, ::1], T[:, :, ::1]; "
            "separated by commas")

_TOKEN = re.compile(r"\s*(?:(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<dims>::1|:)|(?P<punct>[\[\],])|(?P<other>\S))")


class TypeSpecError(ValueError):
    """A mistake in a type list: `start`/`end` are the offsets of the text at fault."""

    def __init__(self, message: str, start: int, end: int) -> None:
        super().__init__(message)
        self.message, self.start, self.end = message, start, max(end, start + 1)


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    start: int

    @property
    def end(self) -> int:
        return self.start + len(self.text)


def _tokens(text: str) -> list[_Token]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:  # only white space is left
            break
        kind = m.lastgroup
        out.append(_Token(kind, m.group(kind), m.start(kind)))
        pos = m.end()
    return out


def parse_types(text: str) -> list[GType]:
    """The gpuc types of a comma-separated list (see ACCEPTED); an empty text is no types.
    A mistake raises TypeSpecError with the offsets of the token at fault."""
    tokens = _tokens(text)
    types: list[GType] = []
    i = 0
    while i < len(tokens):
        t, i = _one_type(tokens, i, len(text))
        types.append(t)
        if i < len(tokens):
            if tokens[i].text != ",":
                raise TypeSpecError(f"expected ',' between types, not {tokens[i].text!r}", tokens[i].start,
                                    tokens[i].end)
            i += 1
            if i == len(tokens):
                raise TypeSpecError("expected a type after ','", tokens[i - 1].start, tokens[i - 1].end)
    return types


def _one_type(tokens: list[_Token], i: int, length: int) -> tuple[GType, int]:
    tok = tokens[i]
    if tok.kind != "name":
        raise TypeSpecError(f"expected a type name, not {tok.text!r}", tok.start, tok.end)
    scalar = SCALAR_NAMES.get(tok.text)
    if scalar is None:
        if tok.text in UNSUPPORTED:
            raise TypeSpecError(f"{UNSUPPORTED[tok.text]} is not a type gpuc kernels take", tok.start, tok.end)
        raise TypeSpecError(f"unknown type {tok.text!r}", tok.start, tok.end)
    i += 1
    if i == len(tokens) or tokens[i].text != "[":
        return scalar, i
    return _array(tokens, i, scalar, length)


def _array(tokens: list[_Token], i: int, dtype: ScalarType, length: int) -> tuple[ArrayType, int]:
    """`[` at tokens[i]: dimensions `:` (any stride) or a last `::1` (C-contiguous), then `]`."""
    open_ = tokens[i]
    dims: list[_Token] = []
    i += 1
    while True:
        if i == len(tokens):
            raise TypeSpecError("unclosed '[': expected ':' dimensions and ']'", open_.start, length)
        tok = tokens[i]
        if tok.kind != "dims":
            what = "']'" if not dims else "']' or ','"
            raise TypeSpecError(f"expected ':' or '::1' for a dimension{'' if not dims else ', or ' + what}, "
                                f"not {tok.text!r}", tok.start, tok.end)
        dims.append(tok)
        i += 1
        if i < len(tokens) and tokens[i].text == ",":
            i += 1
            continue
        if i < len(tokens) and tokens[i].text == "]":
            break
        bad = tokens[i] if i < len(tokens) else None
        raise TypeSpecError(f"expected ',' or ']' after a dimension{', not ' + repr(bad.text) if bad else ''}",
                            bad.start if bad else length, bad.end if bad else length + 1)
    close = tokens[i]
    if len(dims) > 3:
        raise TypeSpecError(f"arrays have 1 to 3 dimensions, not {len(dims)}", open_.start, close.end)
    for d in dims[:-1]:
        if d.text == "::1":
            raise TypeSpecError("only the last dimension can be '::1' (C-contiguous: the others are ':')",
                                d.start, d.end)
    return ArrayType(dtype, len(dims), "C" if dims[-1].text == "::1" else "A"), i + 1


def format_type(t: GType) -> str:
    """`t` in the syntax parse_types reads (the short names)."""
    if isinstance(t, ArrayType):
        dims = [":"] * t.ndim
        if t.layout == "C":
            dims[-1] = "::1"
        return f"{format_type(t.dtype)}[{', '.join(dims)}]"
    return _short(t) if isinstance(t, (ScalarType, ComplexType)) else str(t)


def signature_type(item) -> GType:
    """One type of a signature given to `code_llvm(fn, ...)`, a CompilerJob or `compile_into`: a gpuc type or
    what `as_type` takes, a type as text ("f64[::1]"), or an example argument as a launch would pass it (a
    NumPy array: its dtype, rank and, as a launch decides, "C" when it is C-contiguous; a number; a NumPy
    scalar; a tuple of these)."""
    if isinstance(item, str):
        types = parse_text(item)
        if len(types) != 1:
            raise TypeError(f"{item!r} names {len(types)} types where one was expected")
        return types[0]
    if isinstance(item, GType) or isinstance(item, type):
        return as_type(item)
    import numpy as np

    if isinstance(item, np.ndarray):
        if not 1 <= item.ndim <= 3:
            raise TypeError(f"kernels take arrays of 1 to 3 dimensions, not {item.ndim}")
        element = as_type(item.dtype)
        return ArrayType(element, item.ndim, "C" if item.flags.c_contiguous else "A")
    if isinstance(item, np.generic):
        return as_type(item.dtype)
    if isinstance(item, (bool, int, float, complex)):
        return as_type(type(item))
    if isinstance(item, tuple):
        try:
            return as_type(item)  # a tuple of types
        except TypeError:
            return TupleType(tuple(signature_type(e) for e in item))
    return as_type(item)


def parse_text(text: str) -> list[GType]:
    """`parse_types` for a signature given in Python: a mistake is a TypeError saying what is accepted."""
    try:
        return parse_types(text)
    except TypeSpecError as exc:
        raise TypeError(f"{text!r} is not a gpuc type: {exc.message} (at offset {exc.start}); write {ACCEPTED}") \
            from None
