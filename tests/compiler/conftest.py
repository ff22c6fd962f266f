"""Fixtures for the compiler acceptance tests: an isolated plugin registry, FileCheck, external tools."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import gpuc
from compiler_support import SEED_IR, find_ptxas, find_spirv_val
from gpuc.compiler.plugins import REGISTRY


@pytest.fixture(autouse=True)
def isolated_plugins():
    """Snapshot the global plugin registry and restore it afterwards, so no test leaks plugins."""
    with REGISTRY._lock:
        saved = dict(REGISTRY._plugins)
    yield
    with REGISTRY._lock:
        REGISTRY._plugins.clear()
        REGISTRY._plugins.update(saved)


@pytest.fixture
def make_job():
    """`make_job(ir, entry="kernel", target=NativeTarget(), **config)` -> CompilerJob."""
    def make(ir: str | bytes = SEED_IR, entry: str = "kernel", target=None, filename: str = "<ir>", **config):
        source = gpuc.IRSource(ir, entry=entry, filename=filename)
        return gpuc.CompilerJob(source, gpuc.CompilerConfig(target or gpuc.NativeTarget(), **config))
    return make


# -- FileCheck -------------------------------------------------------------------------------

def _filecheck_command() -> list[str]:
    script = Path(sys.executable).parent / "filecheck"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "filecheck"]


@pytest.fixture
def filecheck(tmp_path):
    """`filecheck(text, checks)`: run FileCheck (PyPI `filecheck`) with `checks` against `text`."""
    pytest.importorskip("filecheck", reason="install the PyPI package filecheck==1.0.6")
    counter = iter(range(1_000_000))

    def check(text: str, checks: str, *args: str) -> None:
        check_file = tmp_path / f"checks{next(counter)}.txt"
        check_file.write_text(checks)
        proc = subprocess.run([*_filecheck_command(), *args, str(check_file)], input=text,
                              capture_output=True, text=True, timeout=60)
        if proc.returncode != 0:
            pytest.fail(f"FileCheck failed:\n{proc.stdout}{proc.stderr}\n--- checks ---\n{checks}"
                        f"\n--- input ---\n{text}", pytrace=False)
    return check


@pytest.fixture
def ptxas(tmp_path):
    """`ptxas(ptx_text, arch)`: assemble with `ptxas -arch=ARCH`; fails the test with its output."""
    exe = find_ptxas()
    if exe is None:
        pytest.skip("ptxas not found (PATH, nvidia-cuda-nvcc-cu12 wheel, /usr/local/bin)")

    def run(ptx: str, arch: str) -> None:
        path = tmp_path / f"{arch}.ptx"
        path.write_text(ptx)
        proc = subprocess.run([exe, f"-arch={arch}", str(path), "-o", os.devnull],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"ptxas -arch={arch} rejected the PTX:\n{proc.stderr}\n{ptx}"
    return run


@pytest.fixture
def spirv_val(tmp_path):
    """`spirv_val(binary)`: validate a SPIR-V binary; fails the test with the validator's output."""
    exe = find_spirv_val()
    if exe is None:
        pytest.skip("spirv-val not found (apt install spirv-tools)")

    def run(binary: bytes) -> None:
        path = tmp_path / "module.spv"
        path.write_bytes(binary)
        proc = subprocess.run([exe, str(path)], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, f"spirv-val rejected the module:\n{proc.stdout}{proc.stderr}"
    return run
