"""Module.function_names: every function's name in one cheap walk."""

import pytest

import gpuc.llvm as llvm

SRC = """
declare double @sqrt(double)
declare void @"gpuc.marker.é"()

define i32 @inc(i32 %x) {
  ret i32 %x
}
@g = global i32 0
"""


def test_function_names_lists_definitions_and_declarations(ctx):
    m = llvm.Module.parse(SRC, ctx)
    assert m.function_names() == {"sqrt", "gpuc.marker.é", "inc"}
    m.functions["sqrt"].erase()
    assert m.function_names() == {"gpuc.marker.é", "inc"}


def test_function_names_of_empty_module(module):
    assert module.function_names() == set()


def test_function_names_after_close_raises(ctx):
    m = llvm.Module.parse(SRC, ctx)
    m.close()
    with pytest.raises(ValueError):
        m.function_names()
