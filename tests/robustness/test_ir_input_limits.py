"""IR input that used to crash gpuc or LLVM: lone surrogates, non-UTF-8 names, nesting past LLVM's stack."""

from __future__ import annotations

import pytest

import gpuc
from gpuc.llvm import LLVMError
from gpuc.llvm.irtext import MAX_NESTING, check_nesting

GOOD = "define void @f(ptr %p) {\n  store i32 1, ptr %p\n  ret void\n}\n"

COMPILE = """
import gpuc
try:
    source = {source}
    gpuc.compile(gpuc.CompilerJob(source, gpuc.CompilerConfig(gpuc.NativeTarget())), "obj")
except gpuc.CompilationError as exc:
    print("COMPILATION-ERROR")
    print(exc)
else:
    print("COMPILED")
"""


def compile_in_subprocess(survive, source: str) -> str:
    result = survive(COMPILE.format(source=source))
    return result.stdout


def test_lone_surrogate_in_ir_text(survive):
    # IRSource("...\\ud800...") raised a bare UnicodeEncodeError while hashing the text.
    out = compile_in_subprocess(survive, f"gpuc.IRSource({GOOD!r} + '; \\ud800\\n', entry='f', filename='s.ll')")
    assert "COMPILATION-ERROR" in out and "s.ll:5:3: the LLVM IR text is not valid Unicode" in out, out
    assert "lone surrogate '\\ud800'" in out, out


def test_lone_surrogate_in_entry_name(survive):
    # entry="\\udcff" (an undecodable byte from argv) was an InternalCompilerError.
    out = compile_in_subprocess(survive, f"gpuc.IRSource({GOOD!r}, entry='\\udcff')")
    assert "COMPILATION-ERROR" in out, out
    assert "the entry name is not valid Unicode: it holds the lone surrogate '\\udcff'" in out, out


def test_undecodable_file_name_still_compiles(survive):
    out = compile_in_subprocess(survive, f"gpuc.IRSource({GOOD!r}, entry='f', filename='\\udcff.ll')")
    assert "COMPILED" in out, out


def test_undecodable_file_name_in_errors_is_printable(survive):
    out = compile_in_subprocess(survive, "gpuc.IRSource('define void @f( {', entry='f', filename='\\udcff.ll')")
    assert "COMPILATION-ERROR" in out and "\\udcff.ll:1:" in out, out


def test_cli_entry_with_undecodable_bytes(survive, tmp_path):
    (tmp_path / "good.ll").write_text(GOOD)
    result = survive("""
        import sys
        from gpuc.cli import main
        print("STATUS", main(["compile", "good.ll", "--entry", sys.argv[1]]))
        """, args=("\udcff",))
    assert "STATUS 0" not in result.stdout and "STATUS" in result.stdout, result.stdout + result.stderr
    assert "not valid Unicode" in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_function_names_with_non_utf8_bytes_compile(survive):
    # Names are bytes to LLVM: @"\\FF" is valid IR even though it is not UTF-8.
    ir = ('define void @"\\\\FF"() {\\n  ret void\\n}\\n\\n'
          'define void @f() {\\n  call void @"\\\\FF"()\\n  ret void\\n}\\n')
    out = compile_in_subprocess(survive, f"gpuc.IRSource('{ir}', entry='f')")
    assert "COMPILED" in out, out


DEEP = {
    "struct": "'@g = global ' + '{' * 50000 + ' i32 ' + '}' * 50000 + ' zeroinitializer\\n'",
    "constant-expression": "'@x = global i8 0\\n@g = global ptr ' + 'getelementptr (i8, ptr ' * 20000 + '@x' "
                           "+ ', i64 1)' * 20000 + '\\n'",
    "metadata": "'!0 = ' + '!{' * 50000 + '!\"x\"' + '}' * 50000 + '\\n'",
}


@pytest.mark.parametrize("kind", sorted(DEEP))
def test_nesting_beyond_the_limit_is_refused(survive, kind):
    # 50,000 nested braces overflowed the stack of LLVM's parser (SIGSEGV).
    out = compile_in_subprocess(survive, f"gpuc.IRSource({DEEP[kind]}, entry='f', filename='deep.ll')")
    assert "COMPILATION-ERROR" in out, out
    assert f"deep.ll:" in out and f"brackets nest more than {MAX_NESTING} levels deep" in out, out


def test_nesting_at_the_limit_compiles():
    depth = MAX_NESTING
    ir = ("@g = global " + "{" * depth + " i32 " + "}" * depth + " zeroinitializer\n"
          "define void @f(ptr %p) {\n  store ptr @g, ptr %p\n  ret void\n}\n")
    for target, output in ((gpuc.NativeTarget(), "obj"), (gpuc.PTXTarget(), "asm")):
        assert gpuc.compile(gpuc.CompilerJob(gpuc.IRSource(ir, entry="f"), gpuc.CompilerConfig(target)), output)


def test_brackets_in_strings_and_comments_do_not_nest():
    inert = '@s = global [3 x i8] c"((("\n' + "; " + "(" * (3 * MAX_NESTING) + "\n"
    check_nesting((inert + '@t = global [5 x i8] c"{{{{{"\n' * MAX_NESTING).encode(), "x.ll")


def test_refusal_names_the_line_and_column():
    text = "; header\n@a = global i32 0\n@g = global " + "[1 x " * (MAX_NESTING + 5) + "i32" + "]" * (MAX_NESTING + 5)
    with pytest.raises(LLVMError, match=rf"^x\.ll:3:{len('@g = global ') + 1 + 5 * MAX_NESTING}: error: "):
        check_nesting(text.encode(), "x.ll")


def test_bitcode_is_not_scanned():
    check_nesting(b"BC\xc0\xde" + b"{" * (2 * MAX_NESTING), "x.bc")
