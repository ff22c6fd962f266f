"""A second hostile pass: IR-building calls given another context's types or numbers C would
truncate, IR naming a garbage collector LLVM does not know, and integer or vector types too wide for
the code generators. Each once crashed the process or
built a silently different type; each now raises a clear error in a process that lives on."""

from __future__ import annotations

import pytest

CROSS_CONTEXT = """
from gpuc.llvm import Context, Module
from gpuc.llvm.types import FunctionType
home, other = Context(), Context()
module = Module.parse("define void @f() {{\\n  ret void\\n}}\\n", home)
try:
    {call}
except ValueError as exc:
    print("REFUSED:", exc)
other.close()
print(str(module))
"""


@pytest.mark.parametrize("call, what", [
    ('module.add_global(other.i64, "g")', "Module.add_global"),
    ('module.add_function("h", FunctionType.get(other.i64, [other.i64]))', "Module.add_function"),
])
def test_a_type_of_another_context_is_refused(survive, call, what):
    # The module kept a type owned by the other context and printing it after that closed segfaulted.
    result = survive(CROSS_CONTEXT.format(call=call))
    assert f"REFUSED: {what}:" in result.stdout and "another LLVM context" in result.stdout, result.stdout


TRUNCATED = """
from gpuc.llvm import Context
from gpuc.llvm.types import ArrayType, VectorType
context = Context()
try:
    print("BUILT", {make})
except ValueError as exc:
    print("REFUSED:", exc)
"""


@pytest.mark.parametrize("make, fragment", [
    ("VectorType.get(context.i64, 2**32 + 3)", "a vector has 1 to 2**32 - 1 elements"),
    ("VectorType.get(context.i64, 2**32)", "a vector has 1 to 2**32 - 1 elements"),
    ("ArrayType.get(context.i64, 2**64 + 2)", "array length must be in [0, 2**64)"),
    ("context.ptr(2**32 + 1)", "address spaces are 0 to 2**24 - 1"),
    ("context.ptr(2**24)", "address spaces are 0 to 2**24 - 1"),
    ("context.ptr(-1)", "address spaces are 0 to 2**24 - 1"),
])
def test_numbers_c_would_truncate_are_refused(survive, make, fragment):
    # <2**32 + 3 x i64> was built as <3 x i64>, ptr(2**24) as addrspace(0): a silently different type.
    result = survive(TRUNCATED.format(make=make))
    assert "REFUSED: " + fragment in result.stdout, result.stdout


UNKNOWN_GC = """
import gpuc
IR = 'define void @f(ptr %p) gc "{gc}" {{\\n  store i32 1, ptr %p\\n  ret void\\n}}\\n'
for optimize in (True, False):
    try:
        gpuc.compile(gpuc.CompilerJob(gpuc.IRSource(IR, entry="f"),
                                      gpuc.CompilerConfig(gpuc.{target}, optimize=optimize)), {output!r})
    except gpuc.ValidationError as exc:
        print("REFUSED:", exc)
    else:
        print("COMPILED")
"""


@pytest.mark.parametrize("target, output", [("NativeTarget()", "obj"), ("PTXTarget()", "asm")])
def test_an_unknown_garbage_collector_is_refused(survive, target, output):
    # LLVM ERROR: unsupported GC: ... aborted a CPU compile, with or without optimization.
    result = survive(UNKNOWN_GC.format(gc="no-such-gc", target=target, output=output))
    assert result.stdout.count("REFUSED:") == 2, result.stdout
    assert "@f names the garbage collector 'no-such-gc'" in result.stdout, result.stdout


def test_a_known_garbage_collector_compiles(survive):
    result = survive(UNKNOWN_GC.format(gc="shadow-stack", target="NativeTarget()", output="obj"))
    assert result.stdout.count("COMPILED") == 2, result.stdout


WIDE_TYPE = """
import gpuc
IR = {ir!r}
for optimize in (True, False):
    try:
        gpuc.compile(gpuc.CompilerJob(gpuc.IRSource(IR, entry="f"),
                                      gpuc.CompilerConfig(gpuc.NativeTarget(), kernel=False, optimize=optimize)), "obj")
    except gpuc.ValidationError as exc:
        print("REFUSED:", exc)
    else:
        print("COMPILED")
"""


@pytest.mark.parametrize("ir, wide", [
    # SIGSEGV in the x86 code generator
    ("define void @f(ptr %p) {\n %v = load <1000000 x i64>, ptr %p\n %w = add <1000000 x i64> %v, %v\n"
     " store <1000000 x i64> %w, ptr %p\n ret void\n}", "<1000000 x ...>"),
    # SIGABRT: SmallVector unable to grow
    ("define <100000 x i1> @f(<100000 x i1> %a, <100000 x i1> %b) {\n %c = xor <100000 x i1> %a, %b\n"
     " ret <100000 x i1> %c\n}", "<100000 x ...>"),
    # code generation ran for minutes
    ("define i1000000 @f(i1000000 %a) {\n %c = mul i1000000 %a, %a\n ret i1000000 %c\n}", "i1000000"),
])
def test_types_too_wide_for_the_code_generators_are_refused(survive, ir, wide):
    result = survive(WIDE_TYPE.format(ir=ir), timeout=180)
    assert result.stdout.count("REFUSED:") == 2, result.stdout
    assert f"@f uses the type {wide}, wider than gpuc's limit of 4096" in result.stdout, result.stdout


def test_types_at_the_width_limit_and_names_that_look_wide_compile(survive):
    ir = ("define i4096 @f(i4096 %a, <4096 x i8> %i10000) {\n %c = add i4096 %a, %a\n ret i4096 %c\n}")
    result = survive(WIDE_TYPE.format(ir=ir))
    assert result.stdout.count("COMPILED") == 2, result.stdout
