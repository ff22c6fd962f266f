"""The warm launch path on the CPU (gpuc/runtime/plans.py): launch plans per argument-type signature, small
launches on the calling thread, and prepared launches (`kernel.prepare`, docs/launching.md)."""

from __future__ import annotations

import gc
import pickle

import numpy as np
import pytest

import gpuc
from gpuc.runtime import cpu, dispatch, pool


@gpuc.kernel
def axpy(a, x, y):
    i = gpuc.index(0)
    y[i] = a * x[i] + y[i]


@gpuc.kernel
def to_close(a, x, y):
    i = gpuc.index(0)
    y[i] = a * x[i]


@gpuc.kernel
def grid_2d(out):
    out[gpuc.index(1), gpuc.index(0)] = gpuc.index(0) + 100 * gpuc.index(1)


@gpuc.kernel
def pair(t, out):
    out[gpuc.index(0)] = t[0] + t[1]


@gpuc.kernel
def block_ids(out):
    i = gpuc.index(0)
    if i < len(out):
        out[i] = gpuc.block_index(0) * 1000 + gpuc.thread_index(0)


def _plans(kernel) -> tuple:
    launchers = kernel.__dict__.get("_gpuc_launchers")
    return launchers.plans if launchers is not None else ()


def _outcome(kernel, n, args, **keywords):
    """What a launch did: ("ok", copies of the arrays after it) or (exception type, message)."""
    copies = [a.copy() if isinstance(a, np.ndarray) and a.flags.writeable else a for a in args]
    try:
        kernel[n](*copies, **keywords)
    except Exception as exc:  # noqa: BLE001 - compared with the full path's
        return type(exc), str(exc)
    return "ok", [a.tolist() if isinstance(a, np.ndarray) else a for a in copies]


def test_a_warm_launch_takes_its_signatures_plan():
    x, y = np.arange(8.0), np.ones(8)
    axpy[8](2.0, x, y)
    (plan, *_), blocks = _plans(axpy)
    calls = []
    original = plan.launch
    plan.launch = lambda *a: calls.append(1) or original(*a)
    try:
        axpy[8](2.0, x, y)
    finally:
        plan.launch = original
    assert calls == [1] and blocks == ()
    np.testing.assert_array_equal(y, 1 + 4 * x)


def _variants():
    """Arguments for axpy(a, x, y) of every kind the full path types or refuses differently."""
    base = np.arange(6.0)
    readonly = base.copy()
    readonly.flags.writeable = False
    raw = np.zeros(7 * 8, np.uint8)
    misaligned = np.ndarray((6,), np.float64, buffer=raw, offset=1)  # an unaligned address: still runs
    odd_strides = np.lib.stride_tricks.as_strided(raw.view(np.float64)[:6], (3,), (12,))  # 12: not whole items
    scalars = [2.0, 2, True, np.float32(2), np.int32(-3), np.uint64(2**63), 2**63, -2**63, 2**64, 1j, "2", None]
    arrays = [base.copy(), base[::2].copy(), base[::-1], base.astype(np.float32), base.astype(np.int64),
              base.reshape(2, 3), readonly, np.zeros((1, 2, 1, 3)), misaligned, odd_strides,
              base.view(type("Subclass", (np.ndarray,), {})), base.astype(">f8")]
    for a in scalars:
        yield (a, base, np.zeros(6))
    for x in arrays:
        yield (2.0, x, np.zeros(6))
        yield (2.0, base, x)  # written
    yield (2.0, base)  # too few
    yield (2.0, base, np.zeros(6), 1)  # too many


VARIANTS = list(_variants())


@pytest.mark.parametrize("args", VARIANTS, ids=[f"variant{i}" for i in range(len(VARIANTS))])
def test_a_plan_accepts_and_refuses_exactly_what_the_full_path_does(args):
    # Each variant launched after every plan was made (warm) and with no plan (the full path's typing
    # and checks): the same results, or the same error.
    warm = [(2.0, np.arange(6.0), np.zeros(6)), (2, np.arange(6.0), np.zeros(6)),
            (2.0, np.arange(6.0).astype(np.float32), np.zeros(6))]
    for w in warm:
        axpy[6](*w)
    assert _plans(axpy)[0]
    hot = _outcome(axpy, 3, args)
    launchers = axpy.__dict__["_gpuc_launchers"]
    saved, launchers.plans = launchers.plans, ()
    try:
        cold = _outcome(axpy, 3, args)
    finally:
        launchers.plans = saved
    assert hot == cold


def test_tuples_and_2d_arrays_take_plans_too():
    out = np.zeros(4)
    for t in ((1.0, 2.0), (1, 2), (1.0, 2.0)):
        pair[4](t, out)
        np.testing.assert_array_equal(out, 3.0)
    assert len(_plans(pair)[0]) == 2
    pair[4]((1.5, 2), out)  # another tuple type: its own specialization
    np.testing.assert_array_equal(out, 3.5)
    grid = np.zeros((3, 5), np.int64)
    for _ in range(2):
        grid_2d[(5, 3)](grid)
    np.testing.assert_array_equal(grid, np.add.outer(100 * np.arange(3), np.arange(5)))
    sub = np.zeros((3, 10), np.int64)[:, ::2]  # strided: the "A" specialization
    grid_2d[(5, 3)](sub)
    np.testing.assert_array_equal(sub, grid)


def test_a_small_launch_runs_on_the_calling_thread(monkeypatch):
    x, y = np.arange(4096.0), np.zeros(4096)
    axpy[4096](1.0, x, y)

    def no_pool(*args):
        raise AssertionError("a small launch handed work to the pool")
    monkeypatch.setattr(pool._POOL, "submit", no_pool)
    for _ in range(3):
        axpy[4096](1.0, x, y)
        axpy.launch(100, 1.0, x, y, threads=1)
    np.testing.assert_array_equal(y[:100], 7 * x[:100])  # one launch, then three of each
    with pytest.raises(AssertionError, match="handed work to the pool"):  # an explicit threads= is honoured
        axpy.launch(4096, 1.0, x, y, threads=2)


def test_threads_keeps_its_meaning_on_the_warm_path(monkeypatch):
    n = 1 << 15
    x, y = np.ones(n), np.zeros(n)
    axpy[n](1.0, x, y)
    seen = []
    monkeypatch.setattr(cpu, "run_chunks", lambda fn, argv, bounds, sizes, helpers: seen.append(helpers)
                        or [fn(argv, b, e, sizes) for b, e in zip(bounds, bounds[1:])])
    axpy.launch(n, 1.0, x, y, threads=2)
    monkeypatch.setenv("GPUC_NUM_THREADS", "2")
    axpy[n](1.0, x, y)
    assert seen == [1, 1]
    np.testing.assert_array_equal(y, 3.0)


# -- prepared launches -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n, threads, helpers", [(10, 3, 2), (3, 3, 2), (2, 3, 1), (1, 2, 0), (5000, 2, 1)])
def test_an_explicit_thread_count_gets_as_many_threads_warm_and_cold(monkeypatch, n, threads, helpers):
    # the plan's shortcut to launch_marshalled, and launch_marshalled's own for an int n, change no count
    x, y = np.ones(n), np.zeros(n)
    seen = []

    def chunks(fn, argv, bounds, sizes, helpers):
        seen.append((bounds[0], bounds[-1], helpers))
        fn(argv, bounds[0], bounds[-1], sizes)
    monkeypatch.setattr(cpu, "run_chunks", chunks)
    for _ in range(2):  # the full path, then the plan
        axpy.launch(n, 1.0, x, y, threads=threads)
    np.testing.assert_array_equal(y, 2.0)
    assert seen == ([(0, n, helpers)] * 2 if helpers else [])


def test_a_prepared_launch_reads_the_arrays_anew_each_run():
    x, y = np.arange(8.0), np.zeros(8)
    launch = axpy.prepare(8, 2.0, x, y)
    assert isinstance(launch, gpuc.PreparedLaunch) and gpuc.PreparedLaunch is gpuc.runtime.PreparedLaunch
    assert (launch.kernel, launch.n, launch.args) == (axpy, 8, (2.0, x, y))
    assert (launch.device, launch.threads, launch.block, launch.shared) == (None, None, None, 0)
    with pytest.raises(AttributeError):
        launch.n = 4  # what it was prepared with, not a setting
    assert not y.any()  # preparing runs nothing
    assert launch() is None
    np.testing.assert_array_equal(y, 2 * x)
    x[:] = 1.0
    launch.launch()
    np.testing.assert_array_equal(y, 2 * np.arange(8.0) + 2)
    assert "axpy[8]" in repr(launch)


def test_a_prepared_launch_keeps_its_arrays_alive():
    y = np.zeros(5)
    launch = axpy.prepare(5, 1.0, np.ones(5), y)
    gc.collect()
    launch()
    launch()
    np.testing.assert_array_equal(y, 2.0)


@pytest.mark.parametrize("n, threads, block", [(0, None, None), (1 << 16, None, None), (1 << 16, 2, None),
                                               ((16, 8), None, None), (128, 1, 32)])
def test_prepared_launches_run_as_the_launch_would(n, threads, block):
    total = int(np.prod(n))
    x = np.arange(max(total, 1), dtype=np.float64)
    y1, y2 = np.zeros_like(x), np.zeros_like(x)
    kernel = grid_2d if isinstance(n, tuple) else axpy
    args1 = (np.zeros((n[1], n[0]), np.int64),) if kernel is grid_2d else (3.0, x, y1)
    args2 = (np.zeros((n[1], n[0]), np.int64),) if kernel is grid_2d else (3.0, x, y2)
    prepared = kernel.prepare(n, *args1, threads=threads, block=block)
    prepared()
    kernel[n](*args2, threads=threads, block=block)
    np.testing.assert_array_equal(args1[-1], args2[-1])


def test_a_prepared_block_launch():
    out = np.zeros(100, np.int64)
    launch = block_ids.prepare(100, out, block=32)
    launch()
    i = np.arange(100)
    np.testing.assert_array_equal(out, i // 32 * 1000 + i % 32)


def test_preparing_checks_what_the_launch_checks():
    x = np.arange(4.0)
    readonly = np.zeros(4)
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        axpy.prepare(4, 1.0, x, readonly)
    with pytest.raises(TypeError, match="must hold float64"):
        dispatch.launcher_for(axpy, (1.0, x, np.zeros(4)))(4, (1.0, x, np.zeros(4, np.float32)), None)
    with pytest.raises(ValueError, match="negative"):
        axpy.prepare(-1, 1.0, x, np.zeros(4))
    with pytest.raises(ValueError, match="block="):
        block_ids.prepare(4, np.zeros(4, np.int64))
    with pytest.raises(ValueError, match="block sizes must be positive"):
        block_ids.prepare(4, np.zeros(4, np.int64), block=0)


def test_a_prepared_launch_is_not_pickled_and_refuses_a_closed_module():
    y = np.zeros(4)
    launch = to_close.prepare(4, 1.0, np.ones(4), y)
    with pytest.raises(TypeError, match="prepare the launch again"):
        pickle.dumps(launch)
    # its module closed under it: an error, never a call into unmapped code
    launcher = dispatch.launcher_for(to_close, launch.args)
    launcher.module.close()
    try:
        with pytest.raises(ValueError, match="was closed"):
            launch()
        with pytest.raises(ValueError, match="was closed"):
            to_close[4](1.0, np.ones(4), y)  # the warm path too
    finally:
        del to_close.__dict__["_gpuc_launchers"]  # the next launch compiles again
    to_close[4](1.0, np.ones(4), y)
    np.testing.assert_array_equal(y, 1.0)


def test_a_tape_records_prepared_launches():
    x, y = np.arange(4.0), np.zeros(4)
    launch = axpy.prepare(4, 2.0, x, y)
    with gpuc.Tape() as tape:
        launch()
    assert len(tape.launches) == 1
    np.testing.assert_array_equal(y, 2 * x)


def test_a_signature_makes_one_plan_however_often_it_takes_the_full_path():
    out, x = np.zeros(4), np.arange(4.0)
    for a in (2**63 + 1, 2**63 + 2, 3):  # beyond int64: the plan converts (wraps) as the full path does
        axpy_int[4](a, x, out)
    plans = [p for p in _plans(axpy_int)[0] if p.launcher is dispatch.launcher_for(axpy_int, (1, x, out))]
    assert len(plans) == 1
    readonly = np.zeros(4)
    readonly.flags.writeable = False
    for _ in range(3):
        with pytest.raises(ValueError, match="read-only"):
            axpy_int[4](1, x, readonly)
    assert len(_plans(axpy_int)[0]) == 1


@gpuc.kernel
def axpy_int(a, x, y):
    i = gpuc.index(0)
    y[i] = a * x[i] + y[i]
