"""User-facing errors from the driver: located IR syntax errors, a missing entry, bad arguments."""

import pickle

import pytest

import gpuc
from gpuc.errors import SourceLocation

BROKEN_IR = """\
define void @kernel(ptr %p) {
  store i32 1, ptr %p
  %x = frobnicate i32 1, 2
  ret void
}
"""


def test_ir_syntax_error_is_located(make_job):
    with pytest.raises(gpuc.CompilationError) as info:
        gpuc.compile(make_job(BROKEN_IR, filename="kernel.ll"))
    err = info.value
    assert (err.location.file, err.location.line) == ("kernel.ll", 3)
    col = err.location.col
    assert col == 8  # under "frobnicate"
    lines = str(err).splitlines()
    assert lines[0].startswith(f"kernel.ll:3:{col}: invalid LLVM IR: ")
    # the source line, then a caret under the column LLVM reported
    assert lines[1] == "    " + "  %x = frobnicate i32 1, 2"
    assert lines[2] == "    " + " " * (col - 1) + "^"
    assert lines[2].index("^") == lines[1].index("frobnicate")
    assert any(line.startswith("hint: ") for line in lines)


def test_ir_syntax_error_on_the_first_column(make_job):
    with pytest.raises(gpuc.CompilationError) as info:
        gpuc.compile(make_job("define void @kernel() {\n  ret i32\n}\n"))
    err = info.value
    assert str(err.location) == "<ir>:3:1"
    assert str(err).splitlines()[1:3] == ["    }", "    ^"]


def test_ir_that_parses_but_does_not_verify(make_job):
    # Regression: the parser does not verify, and the first pass run reported this as an internal error.
    ir = "define i32 @kernel(i32 %x) {\n  %a = add i32 %b, 1\n  %b = add i32 %x, 1\n  ret i32 %a\n}\n"
    for optimize in (True, False):
        with pytest.raises(gpuc.CompilationError) as info:
            gpuc.compile(make_job(ir, filename="dom.ll", optimize=optimize))
        assert "dom.ll: the LLVM IR parses but is invalid" in str(info.value)
        assert "Instruction does not dominate all uses" in str(info.value)


def test_invalid_bitcode(make_job):
    with pytest.raises(gpuc.CompilationError, match="invalid LLVM IR"):
        gpuc.compile(make_job(b"BC\xc0\xde" + b"\0" * 16))


def test_bitcode_source_compiles(make_job):
    ir = "define i32 @kernel(i32 %x) {\n  %y = shl i32 %x, 1\n  ret i32 %y\n}\n"
    bitcode = gpuc.compile(make_job(ir), "bc").output
    assert bitcode[:4] == b"BC\xc0\xde"
    assert "shl i32 %x, 1" in gpuc.compile(make_job(bitcode)).output


def test_entry_not_defined_lists_defined_functions(make_job):
    ir = ("declare void @kernel()\n"
          "define void @first() {\n  ret void\n}\ndefine void @second() {\n  ret void\n}\n")
    with pytest.raises(gpuc.CompilationError) as info:
        gpuc.compile(make_job(ir, filename="two.ll"))
    message = str(info.value)
    assert "the entry function @kernel is not defined in two.ll" in message
    assert "first, second" in message


def test_entry_missing_from_module_without_definitions(make_job):
    with pytest.raises(gpuc.CompilationError, match=r"defined functions: \(none\)"):
        gpuc.compile(make_job("declare void @f()\n"))


@pytest.mark.parametrize("output", ["ptx", "exe", "", None])
def test_bad_output_kind(output, make_job):
    with pytest.raises(ValueError, match="output must be one of llvm, bc, asm, obj"):
        gpuc.compile(make_job("define void @kernel() {\n  ret void\n}\n"), output)


def test_ptx_has_no_object_output(make_job):
    # Regression: output="obj" for PTX reached the NVPTX emitter and became an internal compiler error.
    job = make_job("define void @kernel() {\n  ret void\n}\n", target=gpuc.PTXTarget())
    with pytest.raises(ValueError, match="PTXTarget\\(cap='sm_90'\\) cannot emit 'obj'; it emits asm"):
        gpuc.compile(job, "obj")
    assert ".visible .func kernel" in gpuc.compile(job, "asm").output


def test_compile_rejects_non_jobs():
    with pytest.raises(TypeError, match="CompilerJob"):
        gpuc.compile("define void @kernel() { ret void }")


def test_job_and_source_validation():
    config = gpuc.CompilerConfig(gpuc.NativeTarget())
    with pytest.raises(TypeError, match="IRSource text"):
        gpuc.IRSource(42, entry="kernel")
    with pytest.raises(TypeError, match="entry"):
        gpuc.IRSource("", entry="")
    # Regression: a str has .lower(), and used to pass as a source, then fail as an internal error.
    with pytest.raises(TypeError, match=r"cannot compile a str; pass an IRSource\(text, entry=name\)"):
        gpuc.CompilerJob("define void @kernel() { ret void }", config)
    with pytest.raises(TypeError, match="cannot compile a bytes"):
        gpuc.CompilerJob(b"BC", config)
    with pytest.raises(TypeError, match="CompilerConfig"):
        gpuc.CompilerJob(gpuc.IRSource("", entry="kernel"), gpuc.NativeTarget())


def test_error_hierarchy():
    for cls in (gpuc.CompilationError, gpuc.PluginError, gpuc.ValidationError, gpuc.InternalCompilerError):
        assert issubclass(cls, gpuc.CompilerError)


def test_errors_survive_pickling(make_job):
    # Worker processes (a Dask cluster's) raise these in the client: PluginError could not be unpickled at all.
    located = gpuc.CompilationError("bad", SourceLocation("/u/k.py", 7, 5, "    x = y"), hint="define y")
    located.with_note("asked for here", SourceLocation("/u/m.py", 2, 1, "k()"))
    errors = [located,
              gpuc.PluginError("boom", plugin="p", marker="m", point="early", job=make_job("")),
              gpuc.ValidationError([gpuc.IRIssue("invalid-kernel", "returns i32")]),
              gpuc.InternalCompilerError("a bug")]
    for error in errors:
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error) and str(copy) == str(error)
        assert {k: v for k, v in vars(copy).items() if k != "job"} == \
            {k: v for k, v in vars(error).items() if k != "job"}
    copy = pickle.loads(pickle.dumps(located))
    assert copy.location == located.location and copy.hint == "define y" and copy.notes == located.notes
    assert str(copy.with_note("again")).endswith("note: again")


def test_entry_name_collision_is_a_compilation_error(make_job):
    ir = "define void @kernel() {\n  call void @other()\n  ret void\n}\ndefine void @other() {\n  ret void\n}\n"
    with pytest.raises(gpuc.CompilationError, match="cannot name the entry point 'other'"):
        gpuc.compile(make_job(ir, name="other", optimize=False))


def test_entry_can_be_renamed(make_job):
    ir = "define void @kernel() {\n  ret void\n}\n"
    result = gpuc.compile(make_job(ir, name="renamed"))
    assert result.entry == "renamed" and "define void @renamed()" in result.output


def test_internal_compiler_error_names_versions_and_job(make_job, monkeypatch):
    def broken(self, job, module, tm):
        raise AttributeError("a bug in a target hook")

    monkeypatch.setattr(gpuc.NativeTarget, "finish_module", broken)
    with pytest.raises(gpuc.InternalCompilerError) as info:
        gpuc.compile(make_job("define void @kernel() {\n  ret void\n}\n"))
    message = str(info.value)
    assert "AttributeError: a bug in a target hook" in message
    assert "gpuc 0.1.0" in message and "LLVM 22." in message and "Python 3." in message
    assert "entry=@kernel" in message
    assert isinstance(info.value.__cause__, AttributeError)
