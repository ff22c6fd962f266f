"""The `gpuc` command: compile with targets, emit kinds, plugins and trace; targets; version; errors."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from gpuc.cli import main

KERNEL = textwrap.dedent("""\
    declare void @gpucompiler.mark(i64)

    define void @kernel(ptr addrspace(1) %out, i64 %x) {
      call void @gpucompiler.mark(i64 %x)
      store i64 %x, ptr addrspace(1) %out
      ret void
    }
""")

PLUGIN = textwrap.dedent("""\
    import gpuc

    def erase(job, marker, module):
        calls = [u.user for u in marker.uses]
        for call in calls:
            call.erase()
        return bool(calls)

    def make():
        return gpuc.make_plugin("gpucompiler.mark", pipeline_callback=erase)

    plugin_object = make()
    not_a_plugin = 42
""")


@pytest.fixture
def files(tmp_path, monkeypatch):
    (tmp_path / "kernel.ll").write_text(KERNEL)
    (tmp_path / "cliplugins.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("spec", ["cliplugins:make", "cliplugins:plugin_object", "cliplugins.py:make"])
def test_plugin_resolves_marker(files, capsys, spec):
    code, out, err = run(capsys, "compile", "kernel.ll", "--entry", "kernel", "--plugin", spec)
    assert code == 0, err
    assert "define void @kernel" in out
    assert "gpucompiler.mark" not in out


def test_unresolved_marker_is_a_validation_error(files, capsys):
    code, out, err = run(capsys, "compile", "kernel.ll", "--entry", "kernel")
    assert code == 1
    assert "ValidationError" in err and "@gpucompiler.mark" in err and "@kernel" in err


def test_no_opt_keeps_marker(files, capsys):
    code, out, _ = run(capsys, "compile", "kernel.ll", "--entry", "kernel", "--no-opt")
    assert code == 0
    assert "call void @gpucompiler.mark" in out


def test_ptx_kernel_with_trace_to_file(files, capsys):
    code, out, err = run(capsys, "compile", "kernel.ll", "--entry", "kernel", "--target", "ptx", "--cap", "sm_80",
                         "--emit", "asm", "--kernel", "--plugin", "cliplugins:make", "--trace", "-o", "k.ptx")
    assert code == 0, err
    ptx = (files / "k.ptx").read_text()
    assert ".target sm_80" in ptx and ".visible .entry kernel" in ptx
    assert "optimized" in err and "changed" in err  # the trace names the point and the change
    for stage in ("irgen", "link", "finalize_module", "optimize", "validate", "finish", "codegen"):
        assert stage in err


@pytest.mark.parametrize("target,magic", [("spirv", b"\x03\x02\x23\x07"), ("native", b"\x7fELF"), ("gcn", b"\x7fELF")])
def test_binary_output(files, capsys, target, magic):
    code, _, err = run(capsys, "compile", "kernel.ll", "--entry", "kernel", "--target", target, "--emit", "obj",
                       "--kernel", "--plugin", "cliplugins:make", "-o", "k.bin")
    assert code == 0, err
    assert (files / "k.bin").read_bytes()[:4] == magic


@pytest.mark.parametrize("argv,needle", [
    (["compile", "missing.ll", "--entry", "kernel"], "cannot read missing.ll"),
    (["compile", "kernel.ll", "--entry", "kernel", "--plugin", "nocolon"], "expected MODULE:CALLABLE"),
    (["compile", "kernel.ll", "--entry", "kernel", "--plugin", "no_such_module_xyz:f"], "cannot import"),
    (["compile", "kernel.ll", "--entry", "kernel", "--plugin", "cliplugins:nothing"], "has no attribute"),
    (["compile", "kernel.ll", "--entry", "kernel", "--plugin", "cliplugins:not_a_plugin"], "Plugin objects"),
])
def test_usage_errors(files, capsys, argv, needle):
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert needle in err


def test_bad_ir_reports_location(files, capsys):
    (files / "bad.ll").write_text("define void @f() {\n  bogus\n  ret void\n}\n")
    code, _, err = run(capsys, "compile", "bad.ll", "--entry", "f")
    assert code == 1
    assert "bad.ll:2:3:" in err and "CompilationError" in err and "^" in err


def test_targets_and_version(capsys):
    code, out, _ = run(capsys, "targets")
    assert code == 0
    for name in ("native", "ptx", "gcn", "spirv"):
        assert name in out
    code, out, _ = run(capsys, "version")
    assert code == 0
    assert "gpuc " in out and "LLVM 22." in out and "Python 3." in out


def test_module_entry_point_runs(files):
    proc = subprocess.run([sys.executable, "-m", "gpuc.cli", "compile", "kernel.ll", "--entry", "kernel",
                           "--target", "ptx", "--emit", "asm", "--plugin", "cliplugins:make"],
                          capture_output=True, text=True, cwd=files, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert ".func kernel" in proc.stdout or ".entry kernel" in proc.stdout
