"""Kernels from many threads at once: first compiles of one fresh kernel (on the CPU and through OpenCL),
launches that resize the worker pool, and JITs released as soon as their kernel is dropped."""

from __future__ import annotations

import gc
import threading
import weakref

import numpy as np
import pytest

import gpuc
from gpuc.compiler import CompilerConfig, CompilerJob
from gpuc.runtime import cpu
from gpuc.targets import NativeTarget

pytestmark = pytest.mark.devices("cpu", "opencl")

THREADS = 8


def _on_threads(work, count: int = THREADS) -> list:
    """Run `work(t)` on `count` threads released together; their results, or the exceptions raised."""
    barrier = threading.Barrier(count)
    results: list = [None] * count

    def run(t: int) -> None:
        barrier.wait()
        try:
            results[t] = work(t)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            results[t] = exc

    threads = [threading.Thread(target=run, args=(t,)) for t in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def _fresh_kernel():
    @gpuc.kernel
    def affine(out, x, a):
        i = gpuc.index()
        if i < x.shape[0]:
            out[i] = x[i] * a + 1.0
    return affine


def test_first_launches_of_a_fresh_kernel_from_eight_threads(gpuc_device):
    # Racing first compiles typed one parse of the source and lowered another: a `ret void` kernel.
    x = np.arange(64, dtype=np.float64)
    for _ in range(25 if gpuc_device == "cpu" else 5):  # an OpenCL compile also builds the driver's program
        kernel = _fresh_kernel()

        def launch(t: int):
            out = np.full(64, -1.0)
            kernel[64](out, x, float(t), device=gpuc_device)  # new threads do not inherit using_device
            return out

        for t, got in enumerate(_on_threads(launch)):
            assert not isinstance(got, BaseException), got
            np.testing.assert_array_equal(got, x * t + 1.0)
        assert len(kernel.__dict__["_gpuc_launchers"]) == 1  # one compile for the one specialization


@pytest.mark.devices("cpu")  # compiles only
def test_first_compiles_of_a_fresh_kernel_from_eight_threads_agree():
    array = gpuc.Array[gpuc.float64, 1]
    for _ in range(20):
        kernel = _fresh_kernel()
        job = CompilerJob((kernel, (array, array, gpuc.float64)), CompilerConfig(NativeTarget(), kernel=True))
        texts = _on_threads(lambda t: gpuc.compile(job, "llvm").output)
        assert not any(isinstance(t, BaseException) for t in texts), texts
        assert len(set(texts)) == 1
        assert "fmul" in texts[0]  # not an empty body


@pytest.mark.not_on("opencl", "checks the CPU runtime's worker pool (threads=)")
def test_launches_with_different_thread_counts_from_eight_threads():
    # The pool used to be replaced (and shut down) when a launch asked for more threads.
    kernel = _fresh_kernel()
    x = np.arange(20_000, dtype=np.float64)

    def launch(t: int):
        out = np.zeros_like(x)
        for k in range(1, 13):
            out[:] = 0
            kernel.launch(len(x), out, x, 2.0, threads=(t + k) % 11 + 1)
            if not (out == x * 2.0 + 1.0).all():
                return f"wrong result with threads={(t + k) % 11 + 1}"
        return "ok"

    assert _on_threads(launch) == ["ok"] * THREADS


@pytest.mark.not_on("opencl", "checks the CPU runtime's JIT modules")
def test_a_dropped_kernel_frees_its_jit_at_once(monkeypatch):
    # A reference cycle (module -> job -> kernel -> launchers -> module) kept every dropped kernel's
    # JIT alive until a full collection: ~14-23 KiB of RSS per kernel.
    modules = []
    original = cpu.JITModule.__init__

    def record(self, *args, **kwargs):
        original(self, *args, **kwargs)
        modules.append(weakref.ref(self))

    monkeypatch.setattr(cpu.JITModule, "__init__", record)
    kernel = _fresh_kernel()
    kernel[4](np.zeros(4), np.ones(4), 1.0)
    gc.collect()  # the compile's own garbage; the kernel is still referenced here
    gc.disable()
    try:
        assert len(modules) == 1 and modules[0]() is not None
        del kernel
        assert modules[0]() is None
    finally:
        gc.enable()
