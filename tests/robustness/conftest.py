"""Fixtures for the robustness tests: each hostile case runs in a subprocess that must survive it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Appended to every case: the same process must still compile and run a kernel correctly.
_NEXT_JOB = """
import numpy as _np, gpuc as _gpuc
@_gpuc.kernel
def _next_job(out):
    out[_gpuc.index()] = 2 * _gpuc.index() + 1
_out = _np.zeros(8, dtype=_np.int64)
_next_job[8](_out)
assert (_out == 2 * _np.arange(8) + 1).all(), _out
print("NEXT-JOB-OK")
"""


@dataclass
class Survived:
    returncode: int
    stdout: str
    stderr: str


# Prepended where the test runs on another device (tests/conftest.py, the devices mark): the case's launches
# without device= go there, as the test's own do.
_ON_DEVICE = """
from gpuc.runtime.dispatch import default_device as _default_device
_default_device.set({device!r})
"""


@pytest.fixture
def survive(tmp_path, gpuc_device):
    """`survive(code, timeout=120, env=None, next_job=True)` runs `code` in a fresh interpreter and
    fails the test on a signal, a hang, or (with `next_job`) a process that cannot compile afterwards.
    Its launches without `device=` run on the test's device."""

    def run(code: str, *, timeout: float = 120, env: dict | None = None, next_job: bool = True,
            args: tuple[str, ...] = ()) -> Survived:
        script = tmp_path / "case.py"
        prefix = "" if gpuc_device == "cpu" else _ON_DEVICE.format(device=gpuc_device)
        script.write_text(prefix + textwrap.dedent(code) + (_NEXT_JOB if next_job else ""))
        full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
        try:
            proc = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                                  timeout=timeout, env=full_env, cwd=tmp_path)
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"the case hung for {timeout} s:\n{exc.stdout or ''}{exc.stderr or ''}", pytrace=False)
        if proc.returncode < 0:
            name = signal.Signals(-proc.returncode).name
            pytest.fail(f"the process died of {name}:\n{proc.stdout}\n{proc.stderr}", pytrace=False)
        if next_job and "NEXT-JOB-OK" not in proc.stdout:
            pytest.fail(f"the process did not compile the next job (exit {proc.returncode}):\n"
                        f"{proc.stdout}\n{proc.stderr}", pytrace=False)
        return Survived(proc.returncode, proc.stdout, proc.stderr)

    return run
