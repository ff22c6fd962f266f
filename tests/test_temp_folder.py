"""The run's own temporary folder (tests/conftest.py): a test that leaves a file there fails the run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent

CASES = '''
import os, subprocess, sys, tempfile

def test_cleans_up():
    with tempfile.TemporaryDirectory(prefix="gpuc_clean_"):
        pass

def test_leaks():
    if os.environ.get("LEAK") == "here":
        tempfile.mkdtemp(prefix="gpuc_leak_")
    if os.environ.get("LEAK") == "child":  # a subprocess inherits the folder through TMPDIR
        subprocess.run([sys.executable, "-c", "import tempfile; tempfile.mkstemp(prefix='gpuc_child_')"], check=True)
'''


def run_pytest(folder: Path, leak: str) -> subprocess.CompletedProcess:
    shutil.copy(TESTS / "conftest.py", folder / "conftest.py")
    (folder / "test_cases.py").write_text(CASES)
    env = {**os.environ, "LEAK": leak, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)])}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(folder),
                           "--basetemp", str(folder / "base"), str(folder / "test_cases.py")],
                          capture_output=True, text=True, timeout=300, env=env, cwd=folder)


def test_a_clean_run_passes(tmp_path):
    proc = run_pytest(tmp_path, leak="")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed" in proc.stdout, proc.stdout


def test_a_leak_fails_the_run_and_names_the_file(tmp_path):
    proc = run_pytest(tmp_path, leak="here")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "left these in the temporary folder" in proc.stdout and "gpuc_leak_" in proc.stdout, proc.stdout
    assert "2 passed, 1 error" in proc.stdout, proc.stdout


def test_a_subprocess_leak_is_caught_too(tmp_path):
    proc = run_pytest(tmp_path, leak="child")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "gpuc_child_" in proc.stdout, proc.stdout
