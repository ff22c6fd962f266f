"""Modules: parsing text and bitcode, printing, verification, cloning, linking, symbol tables."""

import re

import pytest

import gpuc.llvm as llvm

from support.llvm_testing import define, filecheck

SRC = """
@counter = global i32 7
@msg = private constant [3 x i8] c"hi\\00"

declare double @sqrt(double)

define i32 @inc(i32 %x) {
entry:
  %y = add i32 %x, 1
  ret i32 %y
}
"""


def test_parse_and_print(ctx):
    m = llvm.Module.parse(SRC, ctx, name="demo.ll")
    assert m.context == ctx
    assert m.name == "demo.ll"
    filecheck(str(m), """
; CHECK: @counter = global i32 7
; CHECK: @msg = private constant [3 x i8] c"hi\\00"
; CHECK: declare double @sqrt(double)
; CHECK-LABEL: define i32 @inc(i32 %x)
; CHECK-NEXT: entry:
; CHECK-NEXT:   %y = add i32 %x, 1
; CHECK-NEXT:   ret i32 %y
""")


def test_parse_creates_its_own_context():
    m = llvm.Module.parse(SRC)
    assert "inc" in m.functions
    assert not m.context.closed


def test_bitcode_round_trip(ctx):
    m = llvm.Module.parse(SRC, ctx)
    bc = m.to_bitcode()
    assert bc[:4] == b"BC\xc0\xde"
    again = llvm.Module.parse(bc, ctx)
    # The module identifier differs (it is the buffer name); the IR itself must not.
    body = lambda mod: str(mod).split("\n", 2)[2]  # noqa: E731
    assert body(again) == body(m)
    assert again.to_bitcode() == llvm.Module.parse(again.to_bitcode(), ctx).to_bitcode()


def test_text_round_trip(ctx):
    m = llvm.Module.parse(SRC, ctx)
    assert str(llvm.Module.parse(str(m), ctx)) == str(m)


@pytest.mark.parametrize("source, line, col, message", [
    ("define i32 @f( {", 1, 17, "expected type"),
    ("define void @f() {\n  ret i32 0\n}\n", 2, 7, "value doesn't match function result type"),
    ("@x = global i32 0\n@x = global i32 1\n", 2, 1, "redefinition of global '@x'"),
    ("define i32 @f() {\n  %a = add i32 %nope, 1\n  ret i32 %a\n}\n", 2, 16, "use of undefined value '%nope'"),
])
def test_parse_error_has_line_and_column(ctx, source, line, col, message):
    with pytest.raises(llvm.LLVMError) as info:
        llvm.Module.parse(source, ctx, name="bad.ll")
    text = str(info.value)
    assert re.match(rf"bad\.ll:{line}:{col}: error: ", text), text
    assert message in text
    assert text.count("bad.ll") == 1  # the file name is not repeated


def test_filecheck_helper_reports_mismatch():
    with pytest.raises(AssertionError, match="FileCheck failed"):
        filecheck("define i32 @f()\n", "; CHECK: define i64 @f")
    with pytest.raises(AssertionError):
        filecheck("a\nb\n", "; CHECK: a\n; CHECK-NOT: b")


def test_parse_error_caret_line(ctx):
    with pytest.raises(llvm.LLVMError) as info:
        llvm.Module.parse("define void @f() {\n  ret i32 0\n}\n", ctx)
    filecheck(str(info.value), """
; CHECK: <string>:2:7: error: value doesn't match function result type 'void'
; CHECK-NEXT: ret i32 0
; CHECK-NEXT: {{^ +\\^$}}
""")


@pytest.mark.parametrize("data", [b"BC\xc0\xde" + b"\x00" * 20, b"\x00\x01garbage"])
def test_bad_bitcode_raises(ctx, data):
    with pytest.raises(llvm.LLVMError):
        llvm.Module.parse(data, ctx)


def test_truncated_bitcode_raises(ctx):
    bc = llvm.Module.parse(SRC, ctx).to_bitcode()
    with pytest.raises(llvm.LLVMError):
        llvm.Module.parse(bc[: len(bc) // 2], ctx)


def test_verify_reports_the_verifier_message(module, builder, ctx):
    fn, entry = define(module, "noterm", ctx.i32, [ctx.i32])
    builder.position_at_end(entry)
    builder.add(fn.args[0], fn.args[0])
    assert not module.is_valid()
    assert not fn.verify()
    with pytest.raises(llvm.LLVMError, match=r"Basic Block in function 'noterm' does not have terminator!"):
        module.verify()
    builder.ret(fn.args[0])
    module.verify()
    assert fn.verify()


def test_verify_wrong_return_type(module, builder, ctx):
    fn, entry = define(module, "f", ctx.i32, [ctx.i64])
    builder.position_at_end(entry).ret(fn.args[0])
    with pytest.raises(llvm.LLVMError, match="Function return type does not match operand type"):
        module.verify()


def test_verify_use_before_def(module, builder, ctx):
    fn, entry = define(module, "f", ctx.i32, [ctx.i32])
    builder.position_at_end(entry)
    a = builder.add(fn.args[0], fn.args[0], "a")
    b = builder.mul(a, a, "b")
    builder.ret(b)
    a.operands[1] = b  # %a now uses %b, defined after it
    with pytest.raises(llvm.LLVMError, match="Instruction does not dominate all uses"):
        module.verify()


def test_clone_is_independent(ctx):
    m = llvm.Module.parse(SRC, ctx)
    c = m.clone()
    assert c.context == ctx and c != m
    c.functions["inc"].name = "renamed"
    c.globals["counter"].initializer = llvm.ConstantInt.get(ctx.i32, 99)
    assert "inc" in m.functions and "renamed" not in m.functions
    assert m.globals["counter"].initializer.value == 7
    m.close()
    assert c.functions["renamed"].verify()  # the clone outlives the original
    c.verify()


def test_link_transfers_ownership(ctx):
    main = llvm.Module.parse("declare i32 @helper()\ndefine i32 @f() {\n %r = call i32 @helper()\n ret i32 %r\n}", ctx)
    lib = llvm.Module.parse("define i32 @helper() {\n ret i32 42\n}", ctx)
    main.link(lib)
    assert lib.closed
    assert not main.functions["helper"].is_declaration
    main.verify()
    for use in (lambda: str(lib), lambda: len(lib.functions), lambda: lib.triple, lambda: lib.clone(),
                lambda: main.link(lib)):
        with pytest.raises(ValueError, match="disposed or transferred"):
            use()


def test_link_conflict_raises_instead_of_exiting(ctx):
    main = llvm.Module.parse("define i32 @a() {\n ret i32 1\n}", ctx)
    other = llvm.Module.parse("define i32 @a() {\n ret i32 2\n}", ctx)
    with pytest.raises(llvm.LLVMError, match="symbol multiply defined"):
        main.link(other)
    assert other.closed  # consumed even on failure
    main.verify()
    assert ctx.take_diagnostics() == []


@pytest.mark.parametrize("error", [KeyboardInterrupt, SystemExit, MemoryError, RuntimeError])
def test_exception_in_the_diagnostic_handler_reaches_the_caller(monkeypatch, host_machine, error):
    # Regression: ctypes printed and dropped what LLVM's diagnostic callback raised, Ctrl-C included.
    from gpuc.llvm import context as context_module

    real = context_module._on_diagnostic

    def interrupted_once(diagnostics, info):
        monkeypatch.setattr(context_module, "_on_diagnostic", real)
        raise error("raised inside the callback")

    monkeypatch.setattr(context_module, "_on_diagnostic", interrupted_once)
    ctx = llvm.Context()
    main = llvm.Module.parse("define i32 @a() {\n ret i32 1\n}", ctx)
    with pytest.raises(error, match="raised inside the callback"):
        main.link(llvm.Module.parse("define i32 @a() {\n ret i32 2\n}", ctx))  # reports a conflict
    with pytest.raises(llvm.LLVMError, match="symbol multiply defined"):  # the handler works again
        main.link(llvm.Module.parse("define i32 @a() {\n ret i32 3\n}", ctx))
    main.triple, main.data_layout = host_machine.triple, host_machine.data_layout
    llvm.run_passes(main, "default<O2>", host_machine)
    assert host_machine.emit(main, "obj")[:4] == b"\x7fELF"
    assert ctx.take_diagnostics() == []
    ctx.close()


def test_link_rejects_foreign_context_and_self(ctx):
    main = llvm.Module.parse(SRC, ctx)
    with pytest.raises(ValueError, match="different contexts"):
        main.link(llvm.Module.parse("define void @g() {\n ret void\n}"))
    with pytest.raises(ValueError, match="into itself"):
        main.link(main)
    assert not main.closed


def test_function_and_global_views(ctx):
    m = llvm.Module.parse(SRC, ctx)
    assert [f.name for f in m.functions] == ["sqrt", "inc"]
    assert len(m.functions) == 2
    assert "inc" in m.functions and "nope" not in m.functions
    assert isinstance(m.functions["inc"], llvm.Function)
    assert m.functions.get("nope") is None
    with pytest.raises(KeyError):
        m.functions["nope"]
    assert [g.name for g in m.globals] == ["counter", "msg"]
    assert len(m.globals) == 2 and "msg" in m.globals and "inc" not in m.globals
    assert all(isinstance(g, llvm.GlobalVariable) for g in m.globals)
    with pytest.raises(KeyError):
        m.globals["inc"]
    assert m.globals.get("nope") is None


def test_add_function(module, ctx):
    fnty = llvm.FunctionType.get(ctx.void, [ctx.ptr(), ctx.i64])
    fn = module.add_function("kernel", fnty)
    assert fn.is_declaration and fn.function_type == fnty
    assert module.functions["kernel"] == fn
    assert fn.parent == module
    with pytest.raises(ValueError, match="already exists"):
        module.add_function("kernel", fnty)
    assert module.get_or_insert_function("kernel", fnty) == fn
    with pytest.raises(TypeError):
        module.get_or_insert_function("kernel", llvm.FunctionType.get(ctx.void))
    other = module.get_or_insert_function("other", fnty)
    assert len(module.functions) == 2 and other.name == "other"


def test_add_global_and_named_types(module, ctx):
    g = module.add_global(ctx.i64, "shared", address_space=3)
    assert g.type == ctx.ptr(3) and g.value_type == ctx.i64
    assert module.globals["shared"] == g
    ty = ctx.struct_type([ctx.i32], name="pair")
    assert module.get_type("pair") == ty
    assert module.get_type("missing") is None


def test_triple_and_data_layout(module):
    assert module.triple == "" and module.data_layout == ""
    module.triple = "nvptx64-nvidia-cuda"
    module.data_layout = "e-i64:64-n16:32:64"
    filecheck(str(module), """
; CHECK: target datalayout = "e-i64:64-n16:32:64"
; CHECK: target triple = "nvptx64-nvidia-cuda"
""")
    assert module.triple == "nvptx64-nvidia-cuda"


def test_module_flag(module):
    module.add_flag("gpuc-version", 3)
    filecheck(str(module), """
; CHECK: !llvm.module.flags = !{![[N:[0-9]+]]}
; CHECK: ![[N]] = !{i32 2, !"gpuc-version", i32 3}
""")
