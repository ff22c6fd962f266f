"""Types: integers, floats, pointers, functions, structs, arrays and vectors."""

import pytest

import gpuc.llvm as llvm
from gpuc.llvm import capi


@pytest.mark.parametrize("bits", [1, 8, 16, 17, 32, 64, 128, 1024])
def test_int_widths(ctx, bits):
    ty = ctx.int_type(bits)
    assert isinstance(ty, llvm.IntegerType)
    assert ty.width == bits and str(ty) == f"i{bits}"
    assert ty.kind == capi.LLVMIntegerTypeKind
    assert ty == ctx.int_type(bits)  # types are uniqued per context
    assert hash(ty) == hash(ctx.int_type(bits))


def test_named_int_shortcuts(ctx):
    assert [t.width for t in (ctx.i1, ctx.i8, ctx.i32, ctx.i64)] == [1, 8, 32, 64]


def test_types_are_per_context(ctx):
    with llvm.Context() as other:
        assert other.i32 != ctx.i32
        assert ctx.i32.context == ctx and other.i32.context == other


@pytest.mark.parametrize("attr, text, kind", [
    ("half", "half", capi.LLVMHalfTypeKind),
    ("float", "float", capi.LLVMFloatTypeKind),
    ("double", "double", capi.LLVMDoubleTypeKind),
])
def test_float_kinds(ctx, attr, text, kind):
    ty = getattr(ctx, attr)
    assert isinstance(ty, llvm.FloatingType)
    assert str(ty) == text and ty.kind == kind and ty.is_sized


def test_void_and_label(ctx):
    assert isinstance(ctx.void, llvm.VoidType)
    assert not ctx.void.is_sized
    m = llvm.Module("m", ctx)  # kept: a collected module takes its functions with it
    fn = m.add_function("f", llvm.FunctionType.get(ctx.void))
    assert isinstance(fn.append_block("b").as_value().type, llvm.LabelType)


def test_pointer_types(ctx):
    p0, p3 = ctx.ptr(), ctx.ptr(3)
    assert isinstance(p0, llvm.PointerType)
    assert (p0.address_space, p3.address_space) == (0, 3)
    assert str(p0) == "ptr" and str(p3) == "ptr addrspace(3)"
    assert p0 == ctx.ptr(0) and p0 != p3


def test_function_types(ctx):
    ft = llvm.FunctionType.get(ctx.i32, [ctx.i64, ctx.ptr(), ctx.double])
    assert isinstance(ft, llvm.FunctionType)
    assert ft.return_type == ctx.i32
    assert ft.params == [ctx.i64, ctx.ptr(), ctx.double]
    assert not ft.is_vararg
    assert str(ft) == "i32 (i64, ptr, double)"
    va = llvm.FunctionType.get(ctx.void, [ctx.ptr()], vararg=True)
    assert va.is_vararg and str(va) == "void (ptr, ...)"
    empty = llvm.FunctionType.get(ctx.void)
    assert empty.params == [] and str(empty) == "void ()"
    assert ft == llvm.FunctionType.get(ctx.i32, [ctx.i64, ctx.ptr(), ctx.double])


def test_literal_struct(ctx):
    st = ctx.struct_type([ctx.i32, ctx.double])
    assert isinstance(st, llvm.StructType)
    assert st.name is None and not st.is_packed
    assert st.elements == [ctx.i32, ctx.double]
    assert str(st) == "{ i32, double }"
    assert st == ctx.struct_type([ctx.i32, ctx.double])  # literal structs are structural
    packed = ctx.struct_type([ctx.i8, ctx.i32], packed=True)
    assert packed.is_packed and str(packed) == "<{ i8, i32 }>"


def test_named_struct(ctx):
    a = ctx.struct_type([ctx.i32, ctx.ptr()], name="node")
    b = ctx.struct_type([ctx.i32, ctx.ptr()], name="node")
    assert a.name == "node" and a != b  # named structs are nominal; LLVM renames the second
    assert b.name.startswith("node.")
    assert a.elements == [ctx.i32, ctx.ptr()]
    m = llvm.Module("m", ctx)
    m.add_global(a, "head")
    assert "%node = type { i32, ptr }" in str(m)


def test_array_and_vector_types(ctx):
    arr = llvm.ArrayType.get(ctx.i8, 16)
    assert isinstance(arr, llvm.ArrayType)
    assert (arr.count, arr.element_type, str(arr)) == (16, ctx.i8, "[16 x i8]")
    nested = llvm.ArrayType.get(arr, 4)
    assert nested.element_type == arr and str(nested) == "[4 x [16 x i8]]"
    vec = llvm.VectorType.get(ctx.float, 4)
    assert isinstance(vec, llvm.VectorType)
    assert (vec.count, vec.element_type, str(vec)) == (4, ctx.float, "<4 x float>")


def test_type_sizes_on_host(ctx, host_machine):
    with host_machine.target_data() as td:
        assert td.pointer_size == 8
        assert td.size_of(ctx.i32) == 4 and td.size_of(ctx.double) == 8
        assert td.size_of(ctx.struct_type([ctx.i8, ctx.i64])) == 16
        assert td.size_of(ctx.struct_type([ctx.i8, ctx.i64], packed=True)) == 9
        assert td.size_of(llvm.ArrayType.get(ctx.int_type(16), 5)) == 10
        assert td.abi_alignment(ctx.i64) == 8


def test_repr(ctx):
    assert repr(ctx.i32) == "<IntegerType i32>"
    assert repr(ctx.ptr(1)) == "<PointerType ptr addrspace(1)>"


@pytest.mark.parametrize("make, error", [
    (lambda c: llvm.FunctionType.get(c.i32, [c.void]), "cannot be a function parameter type"),
    (lambda c: llvm.FunctionType.get(llvm.FunctionType.get(c.void), []), "cannot be a function's return type"),
    (lambda c: llvm.ArrayType.get(c.void, 3), "cannot be an array element type"),
    (lambda c: llvm.VectorType.get(c.struct_type([c.i32]), 4), "cannot be a vector element type"),
    (lambda c: c.struct_type([c.void]), "cannot be a struct element type"),
])
def test_invalid_types_are_refused(ctx, make, error):
    # A release libLLVM skips the asserts that guard these and builds types no IR can use.
    with pytest.raises(TypeError, match=error):
        make(ctx)


@pytest.mark.parametrize("make", [lambda c: c.int_type(0), lambda c: c.int_type(1 << 24),
                                  lambda c: llvm.VectorType.get(c.i32, 0), lambda c: llvm.ArrayType.get(c.i8, -1)])
def test_invalid_sizes_are_refused(ctx, make):
    with pytest.raises(ValueError):
        make(ctx)
