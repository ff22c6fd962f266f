"""Fixtures for the frontend tests: FileCheck, ptxas, spirv-val, an isolated plugin registry."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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


def _first_executable(candidates) -> str | None:
    for c in candidates:
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return str(c)
    return None


def find_ptxas() -> str | None:
    candidates = [shutil.which("ptxas"), Path(sys.executable).parent / "ptxas"]
    try:
        import nvidia.cuda_nvcc as wheel  # type: ignore[import-not-found]
        candidates += [Path(p) / "bin/ptxas" for p in wheel.__path__]
    except ImportError:
        pass
    return _first_executable(candidates + ["/usr/local/bin/ptxas", "/usr/local/cuda/bin/ptxas"])


@pytest.fixture
def filecheck(tmp_path):
    """`filecheck(text, checks)`: run FileCheck (PyPI `filecheck`) with `checks` against `text`."""
    pytest.importorskip("filecheck", reason="install the PyPI package filecheck==1.0.6")
    counter = iter(range(1_000_000))
    script = Path(sys.executable).parent / "filecheck"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "filecheck"]

    def check(text: str, checks: str, *args: str) -> None:
        check_file = tmp_path / f"checks{next(counter)}.txt"
        check_file.write_text(checks)
        proc = subprocess.run([*command, *args, str(check_file)], input=text, capture_output=True, text=True,
                              timeout=60)
        if proc.returncode != 0:
            pytest.fail(f"FileCheck failed:\n{proc.stdout}{proc.stderr}\n--- checks ---\n{checks}"
                        f"\n--- input ---\n{text}", pytrace=False)
    return check


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
    exe = _first_executable([shutil.which("spirv-val"), "/usr/bin/spirv-val", "/usr/local/bin/spirv-val"])
    if exe is None:
        pytest.skip("spirv-val not found (apt install spirv-tools)")

    def run(binary: bytes) -> None:
        path = tmp_path / "module.spv"
        path.write_bytes(binary)
        proc = subprocess.run([exe, str(path)], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, f"spirv-val rejected the module:\n{proc.stdout}{proc.stderr}"
    return run
