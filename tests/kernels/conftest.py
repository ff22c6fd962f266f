"""Fixtures for the Python-kernel tests: an isolated plugin registry, ptxas and spirv-val (found as tests/compiler does)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "compiler"))

from compiler_support import find_ptxas, find_spirv_val  # noqa: E402
from gpuc.compiler.plugins import REGISTRY  # noqa: E402


@pytest.fixture
def isolated_plugins():
    """Snapshot the global plugin registry and restore it afterwards, so no test leaks plugins."""
    with REGISTRY._lock:
        saved = dict(REGISTRY._plugins)
    yield
    with REGISTRY._lock:
        REGISTRY._plugins.clear()
        REGISTRY._plugins.update(saved)


@pytest.fixture
def ptxas(tmp_path):
    """`ptxas(ptx_text)`: assemble with `ptxas -arch=sm_90`; skips when ptxas is not installed."""
    exe = find_ptxas()
    if exe is None:
        pytest.skip("ptxas not found (PATH, nvidia-cuda-nvcc-cu12 wheel, /usr/local/bin)")

    def run(ptx: str, arch: str = "sm_90") -> None:
        path = tmp_path / f"{arch}.ptx"
        path.write_text(ptx)
        proc = subprocess.run([exe, f"-arch={arch}", str(path), "-o", os.devnull],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"ptxas -arch={arch} rejected the PTX:\n{proc.stderr}\n{ptx}"
    return run


@pytest.fixture
def spirv_val(tmp_path):
    """`spirv_val(binary)`: validate a SPIR-V binary; skips when spirv-val is not installed."""
    exe = find_spirv_val()
    if exe is None:
        pytest.skip("spirv-val not found (apt install spirv-tools)")

    def run(binary: bytes) -> None:
        path = tmp_path / "module.spv"
        path.write_bytes(binary)
        proc = subprocess.run([exe, str(path)], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, f"spirv-val rejected the module:\n{proc.stdout}{proc.stderr}"
    return run
