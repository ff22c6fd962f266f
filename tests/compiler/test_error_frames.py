"""Errors in the user's code show the user's frames and the located message, not gpuc's internal frames
(gpuc.errors.user_facing on the entry points; GPUC_FULL_TRACEBACK=1 keeps them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def test_a_mistake_in_user_code_shows_the_user_s_frames_not_gpuc_s():
    script = Path(__file__).with_name("page_kernels.py")
    code = (f"import sys; sys.path.insert(0, {str(script.parent)!r})\n"
            "import numpy as np, page_kernels\n"
            "page_kernels.mistake[4](np.zeros(4))\n")
    for env, frames in (({}, (0, 1)), ({"GPUC_FULL_TRACEBACK": "1"}, (10, 60))):
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "GPUC_CACHE": "0", **env})
        assert "page_kernels.py:" in proc.stderr and "name 'undefined_name' is not defined" in proc.stderr
        inside = [line for line in proc.stderr.splitlines() if line.strip().startswith('File "')
                  and "/gpuc/" in line]
        assert frames[0] <= len(inside) <= frames[1], proc.stderr


@pytest.mark.parametrize("call", ["page_kernels.mistake.launch(4, np.zeros(4))",
                                  "gpuc.code_llvm(page_kernels.mistake, (np.zeros(4),))",
                                  "page_kernels.mistake.inspect(np.zeros(4))"])
def test_every_entry_point_trims(call):
    folder = Path(__file__).parent
    code = f"import sys; sys.path.insert(0, {str(folder)!r})\nimport numpy as np, gpuc, page_kernels\n{call}\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "GPUC_CACHE": "0"})
    inside = [line for line in proc.stderr.splitlines() if line.strip().startswith('File "') and "/gpuc/" in line]
    assert "CompilationError" in proc.stderr and len(inside) == 1, proc.stderr
