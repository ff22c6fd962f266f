"""Ctrl-C in the debug mode: with bounds checks on, every loop polls the process's interrupt flag, so a work
item that never leaves its loop stops too (gpuc/runtime/interrupts.py, docs/debugging.md)."""

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("runaway_kernels.py")


def run_case(*argv):
    proc = subprocess.run([sys.executable, str(SCRIPT), *argv], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.splitlines()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the SIGINT handler is Linux's")
@pytest.mark.parametrize("case, threads, where", [
    ("items", 1, "main"), ("items", 2, "main"), ("func", 1, "main"), ("for", 2, "main"),
    ("blocks", 1, "main"), ("blocks", 2, "main"), ("items", 2, "thread"), ("items", 1, "custom"),
])
def test_ctrl_c_stops_a_loop_that_never_ends(case, threads, where):
    """The runaway launch raises KeyboardInterrupt about when SIGINT came (1 s in), on the launching thread
    (also when that is not the main thread, and when the program installed a handler of its own after
    gpuc's), and the next launch runs normally: the flag was cleared."""
    first, second = run_case(case, str(threads), where)
    assert first.startswith("interrupted after"), first
    assert float(first.split()[2].rstrip(",")) < 30
    if where == "custom":
        assert first.endswith("handler ran")
    assert second == "next launch True"


def test_only_checked_kernels_poll():
    """Off by default at no cost: the same loop without bounds checks neither polls nor declares the flag."""
    import numpy as np

    import gpuc
    from gpuc.abi import INTERRUPT_FLAG
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        from runaway_kernels import runaway
    finally:
        sys.path.pop(0)
    unchecked = gpuc.kernel(runaway.py_func)
    out = np.zeros(4)
    assert INTERRUPT_FLAG in runaway.inspect(out, 1).llvm
    assert INTERRUPT_FLAG not in unchecked.inspect(out, 1).llvm
