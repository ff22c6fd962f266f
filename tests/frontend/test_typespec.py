"""Argument types written as text (`--types`): every scalar by both names, arrays and their layouts,
the written form read back, and the offsets of mistakes (what the command line puts a caret under)."""

from __future__ import annotations

import pytest

from gpuc.frontend.core.types import SCALARS, ArrayType
from gpuc.frontend.core.typespec import TypeSpecError, format_type, parse_types


@pytest.mark.parametrize("scalar", SCALARS, ids=str)
def test_every_scalar_by_both_names_and_as_arrays(scalar):
    short = format_type(scalar)
    assert parse_types(scalar.name) == parse_types(short) == [scalar]
    text = f"{short}[:], {scalar.name}[:, ::1], {short}[:, :, :]"
    assert parse_types(text) == [ArrayType(scalar, 1), ArrayType(scalar, 2, "C"), ArrayType(scalar, 3)]
    assert ", ".join(map(format_type, parse_types(text))) == f"{short}[:], {short}[:, ::1], {short}[:, :, :]"


def test_spacing_and_emptiness():
    assert parse_types("") == parse_types("   ") == []
    assert parse_types(" f32 [ : , ::1 ] ,i64") == parse_types("f32[:, ::1], i64")


@pytest.mark.parametrize("text,start,end,message", [
    ("f32, f33", 5, 8, "unknown type 'f33'"),
    ("f32[:, :", 8, 9, "expected ',' or ']' after a dimension"),
    ("f32[]", 4, 5, "expected ':' or '::1' for a dimension"),
    ("f32[::1, :]", 4, 7, "only the last dimension"),
    ("f32, ", 3, 4, "expected a type after ','"),
    (", f32", 0, 1, "expected a type name, not ','"),
    ("f32 i64", 4, 7, "expected ',' between types"),
    ("f64[:, :, :, :]", 3, 15, "arrays have 1 to 3 dimensions, not 4"),
    ("f32 ; i64", 4, 5, "expected ',' between types, not ';'"),
])
def test_mistakes_carry_their_offsets(text, start, end, message):
    with pytest.raises(TypeSpecError, match=message) as info:
        parse_types(text)
    assert (info.value.start, info.value.end) == (start, end)
