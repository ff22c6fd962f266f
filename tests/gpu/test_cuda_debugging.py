"""print() through vprintf and bounds checks on a CUDA device (docs/debugging.md), compared with the CPU: what the
kernels of tests/support/device_debug_kernels.py print and raise."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import gpuc
import gpuc.cuda as cuda

from support import device_debug_kernels as K

TESTS = Path(__file__).resolve().parents[1]


def test_cuda_prints_what_the_cpu_prints(capsys):
    # vprintf writes to the process's C stdout when the kernel finishes: a fresh process prints for all cases
    code = """
        import numpy as np, gpuc, gpuc.cuda as cuda
        from support import device_debug_kernels as K
        for k, (name, kernel, args) in enumerate(K.print_cases()):
            K.marker[1](k, device="cuda")
            kernel[1](*(cuda.to_device(a) for a in args), device="cuda")
            cuda.synchronize()
    """
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), str(TESTS.parent), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    parts = re.split(r"^=== case (\d+)\n", done.stdout, flags=re.M)
    got = {int(k): text for k, text in zip(parts[1::2], parts[2::2])}
    for k, (name, kernel, args) in enumerate(K.print_cases()):
        capsys.readouterr()
        kernel[1](*args, device="cpu", threads=1)
        assert got[k] == capsys.readouterr().out, name


@pytest.mark.parametrize("launch", [
    lambda d, put: K.shift[10](put(np.arange(10.0)), put(np.zeros(10)), device=d),
    lambda d, put: K.diagonal_plus[4](put(np.zeros((4, 4))), put(np.zeros(4)), 1, device=d),
    lambda d, put: K.local_window[4](put(np.arange(4.0)), put(np.zeros(4)), 5, device=d),
])
def test_cuda_raises_the_cpu_s_index_error(launch):
    messages = []
    for device, put in (("cpu", lambda a: a), ("cuda", cuda.to_device)):
        with pytest.raises(IndexError) as info:
            launch(device, put)
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    a, out = cuda.to_device(np.arange(10.0)), cuda.to_device(np.zeros(9))
    K.shift[9](a, out)  # the record was cleared
    np.testing.assert_array_equal(cuda.copy_to_host(out), np.arange(1.0, 10.0))


def test_shared_memory_checks_on_cuda():
    with pytest.raises(IndexError, match=r"is out of bounds for axis 0 with size 8 in buf\[7 - t \+ skew\]"):
        K.shared_reverse[16](cuda.to_device(np.arange(16.0)), cuda.to_device(np.zeros(16)), 1, block=8)
    assert gpuc.cuda.available()
