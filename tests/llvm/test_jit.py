"""The ORC LLJIT: ownership transfer of modules, symbol lookup, calling into libm and libc."""

import ctypes
import gc
import math

import pytest

import gpuc.llvm as llvm

ADD = "define i64 @add(i64 %a, i64 %b) {\n  %s = add i64 %a, %b\n  ret i64 %s\n}\n"


@pytest.fixture
def jit():
    with llvm.LLJIT() as j:
        yield j


def fn(jit, name, restype, *argtypes):
    return ctypes.CFUNCTYPE(restype, *argtypes)(jit.lookup(name))


def test_add_module_and_call(jit):
    assert jit.triple.startswith(("x86_64", "aarch64"))
    assert jit.data_layout.startswith("e")
    jit.add_module(llvm.Module.parse(ADD))
    add = fn(jit, "add", ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)
    assert add(40, 2) == 42 and add(-1, -2**62) == -1 - 2**62
    assert jit.lookup("add") == jit.lookup("add")


def test_add_module_sets_triple_and_layout(jit):
    m = llvm.Module.parse(ADD)
    jit.add_module(m)
    assert fn(jit, "add", ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)(1, 2) == 3


def test_add_module_consumes_module_and_context(jit):
    m = llvm.Module.parse(ADD)
    ctx = m.context
    jit.add_module(m)
    assert m.closed and ctx.closed
    for use in (lambda: str(m), lambda: len(m.functions), lambda: m.to_bitcode(), lambda: m.clone(),
                lambda: ctx.i32, lambda: jit.add_module(m)):
        with pytest.raises(ValueError):
            use()


def test_add_module_leaves_other_modules_of_the_context_unusable(jit, ctx):
    # The JIT takes the whole context, which frees every module still in it.
    a = llvm.Module.parse(ADD, ctx)
    b = llvm.Module.parse("define void @g() {\n ret void\n}", ctx)
    jit.add_module(a)
    assert b.closed
    with pytest.raises(ValueError, match="Context was disposed"):
        str(b)


def test_add_module_refuses_borrowed_context_and_invalid_ir(jit, ctx):
    m = llvm.Module.parse(ADD, ctx)
    borrowed = m.functions["add"].parent
    with pytest.raises(ValueError, match="must own its context"):
        jit.add_module(borrowed)
    m.functions["add"].entry_block.terminator.erase()
    with pytest.raises(llvm.LLVMError, match="does not have terminator"):
        jit.add_module(m)
    assert not m.closed  # an invalid module is not consumed


def test_lookup_missing_symbol(jit):
    jit.add_module(llvm.Module.parse(ADD))
    with pytest.raises(llvm.LLVMError, match="Symbols not found.*nope"):
        jit.lookup("nope")
    assert fn(jit, "add", ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)(2, 2) == 4


def test_duplicate_definition_raises(jit):
    # Regression: the module handed over was disposed twice when adding failed.
    jit.add_module(llvm.Module.parse(ADD))
    with pytest.raises(llvm.LLVMError, match="duplicate definition of symbol 'add'"):
        jit.add_module(llvm.Module.parse(ADD))
    assert fn(jit, "add", ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)(2, 3) == 5


def test_calls_into_libm_and_libc(jit):
    src = """
declare double @cos(double)
declare double @llvm.sqrt.f64(double)
declare i64 @strlen(ptr)

define double @f(double %x) {
  %c = call double @cos(double %x)
  %s = call double @llvm.sqrt.f64(double %x)
  %r = fadd double %c, %s
  ret double %r
}

define i64 @len(ptr %s) {
  %n = call i64 @strlen(ptr %s)
  ret i64 %n
}
"""
    jit.add_module(llvm.Module.parse(src))
    f = fn(jit, "f", ctypes.c_double, ctypes.c_double)
    for x in (0.0, 1.0, 4.0):
        assert f(x) == pytest.approx(math.cos(x) + math.sqrt(x))
    assert fn(jit, "len", ctypes.c_int64, ctypes.c_char_p)(b"gpuc") == 4


def test_modules_can_call_each_other(jit):
    jit.add_module(llvm.Module.parse(ADD))
    jit.add_module(llvm.Module.parse(
        "declare i64 @add(i64, i64)\ndefine i64 @triple(i64 %x) {\n"
        "  %a = call i64 @add(i64 %x, i64 %x)\n  %b = call i64 @add(i64 %a, i64 %x)\n  ret i64 %b\n}\n"))
    assert fn(jit, "triple", ctypes.c_int64, ctypes.c_int64)(7) == 21


def test_unresolved_external_is_an_error_not_a_crash(jit):
    jit.add_module(llvm.Module.parse(
        "declare void @gpuc_no_such_function()\ndefine void @f() {\n  call void @gpuc_no_such_function()\n  ret void\n}\n"))
    with pytest.raises(llvm.LLVMError):
        jit.lookup("f")


def test_close_is_idempotent():
    j = llvm.LLJIT()
    j.add_module(llvm.Module.parse(ADD))
    j.close()
    j.close()
    assert j.closed
    with pytest.raises(ValueError):
        j.lookup("add")


def test_codegen_error_diagnostic_raises_after_context_is_gone(jit):
    # Regression: the context's diagnostic callback was freed with the Python Context, and the
    # JIT's code generator then called it (a segfault); the error itself was also swallowed.
    m = llvm.Module.parse('define i32 @f() {\n  call void asm sideeffect "bogus_mnemonic", ""()\n  ret i32 3\n}\n')
    jit.add_module(m)
    del m
    gc.collect()
    with pytest.raises(llvm.LLVMError, match="invalid instruction mnemonic 'bogus_mnemonic'"):
        jit.lookup("f")
