"""Fixtures for the plugin tests: FileCheck and external tools (shared helpers live in tests/compiler)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "compiler"))

from compiler_support import find_ptxas, find_spirv_val  # noqa: E402


@pytest.fixture
def filecheck(tmp_path):
    """`filecheck(text, checks)`: run FileCheck (PyPI `filecheck`) with `checks` against `text`."""
    pytest.importorskip("filecheck", reason="install the PyPI package filecheck==1.0.6")
    script = Path(sys.executable).parent / "filecheck"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "filecheck"]
    counter = iter(range(1_000_000))

    def check(text: str, checks: str) -> None:
        check_file = tmp_path / f"checks{next(counter)}.txt"
        check_file.write_text(checks)
        proc = subprocess.run([*command, str(check_file)], input=text, capture_output=True, text=True, timeout=60)
        if proc.returncode != 0:
            pytest.fail(f"FileCheck failed:\n{proc.stdout}{proc.stderr}\n--- input ---\n{text}", pytrace=False)
    return check


@pytest.fixture
def ptxas(tmp_path):
    exe = find_ptxas()
    if exe is None:
        pytest.skip("ptxas not found (PATH, nvidia-cuda-nvcc-cu12 wheel, /usr/local/bin)")

    def run(ptx: str, arch: str = "sm_90") -> None:
        path = tmp_path / "kernel.ptx"
        path.write_text(ptx)
        proc = subprocess.run([exe, f"-arch={arch}", str(path), "-o", os.devnull],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"ptxas -arch={arch} rejected the PTX:\n{proc.stderr}\n{ptx}"
    return run


@pytest.fixture
def spirv_val(tmp_path):
    exe = find_spirv_val()
    if exe is None:
        pytest.skip("spirv-val not found (apt install spirv-tools)")

    def run(binary: bytes) -> None:
        path = tmp_path / "module.spv"
        path.write_bytes(binary)
        proc = subprocess.run([exe, str(path)], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, f"spirv-val rejected the module:\n{proc.stdout}{proc.stderr}"
    return run
