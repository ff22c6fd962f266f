"""Finding libLLVM 22 on machines that also have other LLVMs: fake libraries and a fake llvm-config."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpuc.llvm.capi import discovery

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build fake libraries")


def _fake_llvm(tmp_path: Path, soname: str | None, filename: str = "libLLVM.so") -> Path:
    """A shared library that looks like an LLVM without LLVMGetVersion (as LLVM 14 and 15 are)."""
    lib = tmp_path / "fake-llvm" / "lib"
    lib.mkdir(parents=True, exist_ok=True)
    (tmp_path / "fake.c").write_text("int LLVMFakeMarker(void) { return 14; }\n")
    flags = [f"-Wl,-soname,{soname}"] if soname else []
    subprocess.run(["gcc", "-shared", "-fPIC", *flags, "-o", str(lib / filename), str(tmp_path / "fake.c")],
                   check=True, capture_output=True)
    return lib / filename


def _fake_llvm_config(tmp_path: Path, libdir: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "llvm-config"
    script.write_text(f"#!/bin/sh\ncase \"$1\" in --libdir) echo {libdir};; --version) echo 14.0.6;; esac\n")
    script.chmod(0o755)
    return bin_dir


def _run(code: str, env: dict) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k != "GPUC_LIBLLVM"}
    full_env.update(env, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=60, env=full_env)


def test_soname_names_the_major_version(tmp_path):
    assert discovery.soname_major(str(_fake_llvm(tmp_path, "libLLVM-14.so.1"))) == 14
    assert discovery.soname_major(str(_fake_llvm(tmp_path, "libLLVM.so.22.1", "x.so"))) == 22
    assert discovery.soname_major(str(_fake_llvm(tmp_path, None, "plain.so"))) is None


def test_another_llvm_config_first_on_path_is_refused_unloaded(tmp_path):
    # Debian 12 with `llvm` installed: llvm-config is LLVM 14, whose libLLVM lacks LLVMGetVersion.
    fake = _fake_llvm(tmp_path, "libLLVM-14.so.1")
    bin_dir = _fake_llvm_config(tmp_path, fake.parent)
    proc = _run(f"""
        from gpuc.llvm.capi import discovery
        discovery._LIBDIRS = ()          # only llvm-config and the loader: the fake comes first
        assert next(discovery.candidates()) == {str(fake)!r}, list(discovery.candidates())
        import gpuc.llvm
        print("version", gpuc.llvm.version())
        print("maps", {str(fake)!r} in open("/proc/self/maps").read())
        """, {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    assert proc.returncode == 0, proc.stderr
    assert "version (22," in proc.stdout
    assert "maps False" in proc.stdout


def test_a_wrong_library_without_soname_is_loaded_checked_and_unloaded(tmp_path):
    fake = _fake_llvm(tmp_path, None)
    proc = _run("""
        import gpuc.llvm
        try:
            gpuc.llvm.version()
        except gpuc.llvm.LLVMNotFoundError as exc:
            print("refused:", exc)
        """, {"GPUC_LIBLLVM": str(fake)})
    assert proc.returncode == 0, proc.stderr
    assert f"{fake}: older than LLVM 16, not 22 (unloaded)" in proc.stdout
    assert "apt-get install libllvm22" in proc.stdout


def test_not_found_lists_every_candidate_tried(tmp_path):
    fake = _fake_llvm(tmp_path, "libLLVM-14.so.1")
    proc = _run(f"""
        from gpuc.llvm.capi import discovery
        discovery._LIBDIRS = ()
        discovery.candidates = lambda: iter([{str(fake)!r}, "/nonexistent/libLLVM.so.22.1"])
        import gpuc.llvm
        try:
            gpuc.llvm.version()
        except gpuc.llvm.LLVMNotFoundError as exc:
            print(exc)
        """, {})
    assert proc.returncode == 0, proc.stderr
    assert f"{fake}: LLVM 14, not 22 (not loaded)" in proc.stdout
    assert "/nonexistent/libLLVM.so.22.1:" in proc.stdout
    assert "AttributeError" not in proc.stdout + proc.stderr
