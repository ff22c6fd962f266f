"""SPIR-V emission in the helper process: results, errors, and recovery when the helper dies."""

from __future__ import annotations


import pytest

from gpuc import llvm
from gpuc.llvm import isolated

KERNEL = """\
target triple = "spirv64-unknown-unknown"

define spir_kernel void @k(ptr addrspace(1) %p, i32 %x) {
  store i32 %x, ptr addrspace(1) %p
  ret void
}
"""


@pytest.fixture
def spirv_machine():
    llvm.initialize("SPIRV")
    with llvm.Target.from_triple("spirv64-unknown-unknown").machine() as tm:
        yield tm


def test_emits_spirv_binary_and_assembly(spirv_machine, ctx):
    module = llvm.Module.parse(KERNEL, ctx)
    assert spirv_machine.emit(module, "obj")[:4] == b"\x03\x02\x23\x07"
    assert "OpEntryPoint Kernel" in spirv_machine.emit(module, "asm").decode()


def test_helper_that_died_is_restarted(spirv_machine, ctx):
    module = llvm.Module.parse(KERNEL, ctx)
    spirv_machine.emit(module, "obj")
    for helper in isolated._client._idle:
        helper.proc.kill()
        helper.proc.wait()
    assert spirv_machine.emit(module, "obj")[:4] == b"\x03\x02\x23\x07"


def test_server_reports_errors_without_dying():
    # Drive the helper's loop (it forks a child per request) in a fresh interpreter: this test process may have
    # threads of its own (JAX's, once tests/jax ran), and a fork of a threaded process can deadlock its child.
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(f"""
        import io
        from gpuc import llvm
        from gpuc.llvm import isolated
        KERNEL = {KERNEL!r}
        good = llvm.Module.parse(KERNEL, llvm.Context()).to_bitcode()
        stdin = io.BytesIO()
        for bitcode in (b"not bitcode", good):
            isolated._write(stdin, {{"triple": "spirv64-unknown-unknown", "cpu": "", "features": "", "opt_level": 2,
                                     "kind": "obj", "size": len(bitcode)}}, bitcode)
        stdin.seek(0)
        stdout = io.BytesIO()
        isolated.serve(stdin, stdout)
        stdout.seek(0)
        first, _ = isolated._read(stdout)
        second, payload = isolated._read(stdout)
        print(first["ok"], bool(first["error"]), second["ok"], payload[:4] == b"\\x03\\x02\\x23\\x07")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "True", "True", "True"], proc.stdout + proc.stderr