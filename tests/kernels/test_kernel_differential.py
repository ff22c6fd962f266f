"""Differential tests: the kernels of support.kernel_cases run emulated and through gpuc on the CPU and through
OpenCL; results agree."""

from __future__ import annotations

import numpy as np
import pytest

import gpuc

from support.emulate import emulate
from support.kernel_cases import CASES, KernelCase, saxpy

pytestmark = pytest.mark.devices("cpu", "opencl")

PARAMS = [pytest.param(c, id=c.id) for c in CASES]


@pytest.mark.devices("cpu")  # launches nothing
def test_enough_kernels():
    assert len(CASES) >= 25
    assert len({c.id for c in CASES}) == len(CASES)
    assert {len(c.n) if isinstance(c.n, tuple) else 1 for c in CASES} == {1, 2, 3}


def assert_same(got, want, rtol: float, how: str | None, path: str) -> None:
    if how == "sum":        # atomics accumulate in launch order: only the total is defined
        np.testing.assert_allclose(got.sum(dtype=np.float64), want.sum(dtype=np.float64), rtol=rtol, err_msg=path)
    elif how == "sorted":   # values returned by atomics: the same multiset in some order
        np.testing.assert_array_equal(np.sort(got, axis=None), np.sort(want, axis=None), err_msg=path)
    elif want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=rtol, atol=0, err_msg=path)
    else:
        np.testing.assert_array_equal(got, want, err_msg=path)


def run_both(c: KernelCase, **launch) -> None:
    want, got = c.make(), c.make()
    emulate(c.kernel, c.n, *want)
    c.kernel.launch(c.n, *got, **launch)
    checked = 0
    for k, (g, w) in enumerate(zip(got, want)):
        if isinstance(w, np.ndarray):
            assert_same(g, w, c.rtol, c.compare.get(k), f"argument {k}")
            if w.base is not None:  # a view: nothing outside it may change
                assert_same(g.base, w.base, c.rtol, c.compare.get(k), f"the array under argument {k}")
            checked += 1
    assert checked, "a kernel case must write to an array"


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("c", PARAMS)
def test_same_results(c, threads):
    run_both(c, threads=threads)


@pytest.mark.devices("cpu")  # launches nothing
def test_emulation_writes_what_the_kernel_writes():
    # guards the emulation itself: saxpy done by hand
    a, x, y = saxpy_args = CASES[0].make()
    assert CASES[0].kernel is saxpy
    want = a * x + y
    emulate(saxpy, len(y), *saxpy_args)
    np.testing.assert_allclose(y, want, rtol=1e-6)


@pytest.mark.not_on("opencl", "checks the CPU runtime's thread count (GPUC_NUM_THREADS)")
@pytest.mark.parametrize("name", ["saxpy", "atomic_sum", "atomic_tickets"])
def test_default_threads_from_environment(name, monkeypatch):
    # Without threads=, small launches run on one thread: 3 x 4096 items make GPUC_NUM_THREADS=3 split them.
    monkeypatch.setenv("GPUC_NUM_THREADS", "3")
    base = next(c for c in CASES if c.id == name)
    n = 3 * 4096 + 5
    grow = {"saxpy": lambda: (np.float32(0.5), np.arange(n, dtype=np.float32), np.ones(n, np.float32)),
            "atomic_sum": lambda: (np.linspace(-1.0, 1.0, n), np.zeros(1)),
            "atomic_tickets": lambda: (np.zeros(1, np.uint32), np.zeros(n, np.uint32))}
    run_both(KernelCase(base.kernel, n, grow[name], base.rtol, base.compare))


def test_closures_and_local_funcs():
    # kernels defined in a function reach their helpers through closure cells, which the emulation rebinds too
    offset = 3

    @gpuc.func
    def shifted():
        return gpuc.index() + offset

    @gpuc.kernel
    def fill(out):
        out[gpuc.index()] = shifted() * gpuc.ndrange()

    c = KernelCase(fill, 10, lambda: (np.zeros(10, np.int64),))
    run_both(c, threads=2)
    got = c.make()[0]
    emulate(fill, 10, got)
    assert got.tolist() == [(i + 3) * 10 for i in range(10)]
