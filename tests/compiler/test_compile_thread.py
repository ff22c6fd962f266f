"""The compile thread (gpuc/compiler/depth.py): irgen and the plugin stages run on one thread with a
large stack, handed over once per compile; a forked child gets threads of its own."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np

import gpuc
from gpuc import Array, float64
from gpuc.compiler import depth

F64 = Array[float64, 1]


@gpuc.func
def _square(x):
    return x * x


@gpuc.func
def _through_pointer(x):
    return gpuc.deferred(_square, x)(x) + 1.0


@gpuc.kernel
def _kernel(a, b):
    i = gpuc.index()
    b[i] = gpuc.deferred(_through_pointer, a[i])(a[i])


def test_frontend_and_plugins_run_on_one_handed_over_thread(monkeypatch):
    threads, handed = set(), []
    original = depth._worker

    def counting_worker():
        handed.append(1)
        return original()

    def early_thread(state, marker, module):
        threads.add(threading.get_ident())
        return False

    monkeypatch.setattr(depth, "_worker", counting_worker)
    with gpuc.plugin_scope():
        gpuc.register_plugin("test.thread", early_callback=early_thread, markers=["gpuc.lookup"], priority=200)
        config = gpuc.CompilerConfig(gpuc.NativeTarget(), kernel=True)
        gpuc.compile(gpuc.CompilerJob((_kernel, (F64, F64)), config), "llvm")
    # One hand-over for the entry's irgen, the two deferred functions compiled at the early point
    # and every callback, all on the frontend thread (not the caller's).
    assert handed == [1]
    assert threads and threading.get_ident() not in threads


FORK = """
import os, numpy as np, gpuc
from gpuc import Array, float64

@gpuc.func
def twice(x):
    return 2.0 * x

@gpuc.kernel
def k(a, b):
    i = gpuc.index()
    b[i] = gpuc.deferred(twice, a[i])(a[i])

a = np.arange(4.0)
b = np.zeros(4)
k[4](a, b)  # the parent keeps idle compile threads
pid = os.fork()
if pid == 0:
    @gpuc.kernel
    def k2(a, b):
        i = gpuc.index()
        b[i] = twice(a[i]) + 1.0
    c = np.zeros(4)
    k2[4](a, c)
    os._exit(0 if c.tolist() == [1.0, 3.0, 5.0, 7.0] else 1)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, "the forked process failed"
print("FORK-OK", b.tolist())
"""


def test_forked_child_compiles_with_threads_of_its_own(tmp_path):
    # The parent's idle compile threads do not exist in a forked child: handing it a job waited
    # forever. (In a fresh interpreter: forking this multi-threaded test process could deadlock.)
    root = Path(__file__).resolve().parents[2]
    script = tmp_path / "fork_after_compile.py"  # gpuc reads kernels' source from their file
    script.write_text(FORK)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(root), "GPUC_CACHE": "0"})
    assert "FORK-OK [0.0, 2.0, 4.0, 6.0]" in done.stdout, done.stdout + done.stderr


def test_values_unchanged():
    a = np.linspace(-2.0, 2.0, 9)
    b = np.zeros_like(a)
    _kernel[a.size](a, b)
    np.testing.assert_array_equal(b, a * a + 1.0)
