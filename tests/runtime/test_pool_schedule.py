"""The CPU launcher's schedule (gpuc/runtime/pool.py): threads claim chunks of a launch, large first and small
last; every item runs exactly once, whichever threads come, and an error stops the launch."""

from __future__ import annotations

import contextlib
import ctypes
import threading
import time

import numpy as np
import pytest

import gpuc
from gpuc.runtime import pool

pytestmark = pytest.mark.devices("cpu")


def _recorder(item_seconds: float = 0.0, slow_thread=None):
    """A chunk runner recording (thread, begin, end) of every chunk; each item takes `item_seconds`, ten times
    as long on `slow_thread`."""
    seen: list = []
    lock = threading.Lock()

    def run(argv, begin, end, sizes):
        me = threading.get_ident()
        if item_seconds:
            time.sleep((end - begin) * item_seconds * (10 if me == slow_thread else 1))
        with lock:
            seen.append((me, begin, end))
    return run, seen


@contextlib.contextmanager
def _busy_pool():
    """Every pool thread, however many earlier launches asked for, held up until the block ends: helpers a
    launch asks for are queued behind that work and never come."""
    release = threading.Event()
    pool._POOL.ensure(2)
    for _ in range(pool._POOL._size):
        pool._POOL.submit(release.wait)
    try:
        yield
    finally:
        release.set()


def _items(seen, total: int) -> np.ndarray:
    counts = np.zeros(total, np.int64)
    for _, begin, end in seen:
        assert 0 <= begin < end <= total
        counts[begin:end] += 1
    return counts


@pytest.mark.parametrize("total, threads", [(1, 1), (2, 2), (3, 2), (1001, 2), (1001, 3), (97, 4), (10_007, 5)])
def test_every_item_runs_exactly_once(total, threads):
    run, seen = _recorder()
    pool.run_chunks(run, b"", [0, total], b"", helpers=threads - 1)
    assert (_items(seen, total) == 1).all()


def test_the_calling_thread_runs_what_helpers_that_never_come_would_have():
    # Helpers queued behind another launch's work: the launch must not wait for them.
    with _busy_pool():
        run, seen = _recorder()
        pool.run_chunks(run, b"", [0, 1200], b"", helpers=2)
        assert (_items(seen, 1200) == 1).all()
        assert {me for me, _, _ in seen} == {threading.get_ident()}


@pytest.mark.parametrize("items", [2, 3])
def test_slow_items_run_at_once(items):
    # Each item waits until another runs beside it: two long items on two threads must not run one by one.
    beside = threading.Barrier(2, timeout=10)

    def run(argv, begin, end, sizes):
        for _ in range(begin, end):
            if begin < 2:
                beside.wait()
    pool.run_chunks(run, b"", [0, items], b"", helpers=1)


def test_a_slow_thread_takes_less():
    caller = threading.get_ident()
    run, seen = _recorder(item_seconds=1e-5, slow_thread=caller)
    pool.run_chunks(run, b"", [0, 8192], b"", helpers=1)
    assert (_items(seen, 8192) == 1).all()
    mine = sum(end - begin for me, begin, end in seen if me == caller)
    assert 0 < mine < 8192 // 4, "the calling thread's chunks were not sized by its speed"


def test_a_long_launch_runs_in_chunks_of_a_few_milliseconds():
    # Ctrl-C stops a launch between chunks: after the first, a chunk lasts about pool.CHUNK_SECONDS.
    seen = []

    def run(argv, begin, end, sizes):
        time.sleep((end - begin) * 1e-5)  # 10 us an item
        seen.append(end - begin)
    pool.run_chunks(run, b"", [0, 20_000], b"", helpers=0)
    assert sum(seen) == 20_000
    assert seen[0] == 20_000 // pool.FIRST_CHUNK_PARTS
    assert max(seen[1:]) * 1e-5 < 4 * pool.CHUNK_SECONDS


def test_an_error_in_a_chunk_stops_the_launch():
    started = []

    def run(argv, begin, end, sizes):
        started.append(begin)
        if len(started) == 3:
            raise ValueError("chunk failed")
        time.sleep(0.001)
    with pytest.raises(ValueError, match="chunk failed"):
        pool.run_chunks(run, b"", [0, 1 << 21], b"", helpers=1)
    count = len(started)
    time.sleep(0.05)
    assert len(started) == count, "chunks started after the launch raised"
    assert count < 100


@pytest.mark.parametrize("error", [ValueError, KeyboardInterrupt])
def test_a_launch_raises_only_after_the_pool_threads_chunks_end(error):
    # The calling thread's chunk raises while a pool thread's chunk runs: the launch waits for it.
    caller = threading.get_ident()
    helping, ended = threading.Event(), []

    def run(argv, begin, end, sizes):
        if threading.get_ident() == caller:
            if helping.wait(10):
                raise error("stop")
            return
        helping.set()
        time.sleep(0.05)
        ended.append(begin)
    with pytest.raises(error, match="stop"):
        pool.run_chunks(run, b"", [0, 1000], b"", helpers=1)
    assert ended, "the launch raised before the pool thread's chunk ended"


def test_launches_that_end_at_once_leave_no_thread_waiting():
    # Many short launches on two threads, one after another: each returns (no wake-up is lost).
    out = np.zeros(64, np.int64)

    def run(argv, begin, end, sizes):
        out[begin:end] += 1
    for _ in range(2000):
        pool.run_chunks(run, b"", [0, 64], b"", helpers=1)
    assert (out == 2000).all()


_RANGE_WRAPPER = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_char_p)


def _compiled(run):
    """`run` as a foreign function pointer, as a kernel's range wrapper is: such launches take the pool's
    compiled scheduler (a pool thread claims and runs its chunks without taking the GIL in between)."""
    return _RANGE_WRAPPER(run)


def _no_python_schedule(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the launch took the Python schedule")
    monkeypatch.setattr(pool, "ChunkedLaunch", refuse)


@pytest.mark.parametrize("total, threads", [(1, 2), (2, 2), (3, 2), (1001, 2), (1001, 3), (97, 4), (100_003, 2)])
def test_the_compiled_schedule_runs_every_item_exactly_once(monkeypatch, total, threads):
    _no_python_schedule(monkeypatch)
    run, seen = _recorder()
    fn = _compiled(run)
    pool.run_chunks(fn, b"argv", [0, total], b"sizes", helpers=threads - 1)
    assert (_items(seen, total) == 1).all()


def test_the_compiled_schedule_passes_the_launch_buffers():
    got = set()

    def run(argv, begin, end, sizes):
        got.add((argv, sizes))
    pool.run_chunks(_compiled(run), b"the argv", [0, 1000], b"the sizes", helpers=1)
    assert got == {(b"the argv", b"the sizes")}


def test_pool_threads_take_part_in_compiled_launches():
    run, seen = _recorder(item_seconds=2e-5)
    pool.run_chunks(_compiled(run), b"", [0, 4000], b"", helpers=1)
    assert (_items(seen, 4000) == 1).all()
    assert len({me for me, _, _ in seen}) == 2, "the pool thread ran no chunk"
    caller = threading.get_ident()
    # after its first, a pool thread's chunk lasts about CHUNK_SECONDS (it times its own)
    theirs = [end - begin for me, begin, end in seen if me != caller]
    assert max(theirs[1:] or [0]) * 2e-5 < 4 * pool.CHUNK_SECONDS


def test_a_compiled_launch_does_not_wait_for_helpers_that_never_come(monkeypatch):
    _no_python_schedule(monkeypatch)
    with _busy_pool():
        run, seen = _recorder()
        pool.run_chunks(_compiled(run), b"", [0, 1200], b"", helpers=2)
        assert (_items(seen, 1200) == 1).all()
        assert {me for me, _, _ in seen} == {threading.get_ident()}


def test_ranges_are_never_split():
    ranges = [(0, 10), (20, 30), (40, 41), (50, 90)]
    run, seen = _recorder()
    pool.run_ranges(run, b"", ranges, b"", helpers=2)
    assert sorted((begin, end) for _, begin, end in seen) == ranges


def _timed_recorder(item_seconds: float):
    """A chunk runner recording (thread, begin, end, started, ended) of every chunk."""
    seen: list = []
    lock = threading.Lock()

    def run(argv, begin, end, sizes):
        started = time.perf_counter()
        time.sleep((end - begin) * item_seconds)
        with lock:
            seen.append((threading.get_ident(), begin, end, started, time.perf_counter()))
    return run, seen


def _phases(runs: int, size: int):
    bounds = [k * size for k in range(runs + 1)]
    return [[(bounds[k], bounds[k + 1]) for k in range(phase, runs, 2)] for phase in (0, 1)]


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("runs, threads", [(2, 2), (8, 2), (16, 3), (32, 2)])
def test_a_phase_starts_once_the_phase_before_it_has_ended(monkeypatch, compiled, runs, threads):
    # launch_in_two_phases: the odd runs of a stencil's adjoint touch what the even ones touch, never at once
    if compiled:
        _no_python_schedule(monkeypatch)
    run, seen = _timed_recorder(item_seconds=2e-5)
    phases = _phases(runs, 40)
    pool.run_phases(_compiled(run) if compiled else run, b"", phases, b"", helpers=threads - 1)
    assert sorted((b, e) for _, b, e, _, _ in seen) == sorted(phases[0] + phases[1])
    first = {r for r in phases[0]}
    last_end = max(ended for _, b, e, _, ended in seen if (b, e) in first)
    assert all(started >= last_end for _, b, e, started, _ in seen if (b, e) not in first)


@pytest.mark.parametrize("threads", [2, 3])
def test_a_run_follows_only_the_runs_it_is_after(monkeypatch, threads):
    """run_phases' `after` (block adjoints: cpu.block_order): a run waits for the runs listed for it alone, so
    that one whose predecessor ended early starts while a slow run of the phase before still runs, and
    never before its own predecessors end."""
    _no_python_schedule(monkeypatch)
    run, seen = _timed_recorder(item_seconds=1e-3)
    phases = [[(0, 1), (10, 40)], [(1, 2), (40, 41)], [(2, 3)]]  # (10, 40) is slow; (1, 2) needs (0, 1) alone
    after = [[], [], [0], [1], [2]]
    pool.run_phases(_compiled(run), b"", phases, b"", helpers=threads - 1, after=after)
    spans = {(b, e): (started, ended) for _, b, e, started, ended in seen}
    assert sorted(spans) == sorted(r for phase in phases for r in phase)
    order = [r for phase in phases for r in phase]
    for k, before in enumerate(after):
        for j in before:
            assert spans[order[k]][0] >= spans[order[j]][1]
    slow = next(me for me, b, *_ in seen if b == 10)
    others = [started for me, _, _, started, _ in seen if me != slow]
    if others and min(others) < spans[(10, 40)][1]:  # another thread came while the slow run ran
        assert spans[(1, 2)][0] < spans[(10, 40)][1]
    # (40, 41) follows (10, 40): the phases' order where the runs are listed so
    assert spans[(40, 41)][0] >= spans[(10, 40)][1]


def test_block_runs_follow_the_runs_alike_along_a_dimension_apart():
    """cpu.block_order: each run of a block adjoint's phases follows, per dimension apart and coordinate, the last
    earlier run with a block there, and nothing else."""
    from gpuc.runtime.cpu import block_order

    grid, apart = (6, 4, 1), (0, 1)
    phases, after = block_order(grid, apart, 2)
    order = [r for phase in phases for r in phase]
    coords = lambda b: {(0, b % grid[0]), (1, b // grid[0] % grid[1])}  # noqa: E731
    for k, (begin, end) in enumerate(order):
        mine = set().union(*(coords(b) for b in range(begin, end)))
        want = set()
        for key in mine:
            earlier = [j for j in range(k) if key in set().union(*(coords(b) for b in range(*order[j])))]
            if earlier:
                want.add(earlier[-1])
        assert set(after[k]) == want


def test_each_thread_owns_the_same_share_of_every_phase():
    """pool._runs_table: a phase's runs go to the threads in order, a share each; within a phase a thread's runs
    that wait for another thread's come after those that wait only for its own."""
    from gpuc.runtime.cpu import block_order

    phases, after = block_order((8, 8, 1), (0, 1), 2)
    *_, owners, order, runs = pool._runs_table(phases, after, 2)
    assert runs == 64 and list(owners) == [0, 32, 32, 32]
    owner = {r: t for t in range(2) for r in order[owners[2 * t]:owners[2 * t] + owners[2 * t + 1]]}
    assert sorted(order) == list(range(64))
    k = 0
    for phase in phases:
        assert [owner[k + j] for j in range(len(phase))] == [0] * 4 + [1] * 4
        k += len(phase)
    for t in range(2):
        mine = list(order[owners[2 * t]:owners[2 * t] + owners[2 * t + 1]])
        phase_of = [r // 8 for r in mine]
        assert phase_of == sorted(phase_of)  # the phases' order kept
        for p in range(8):
            crossing = [any(owner[d] != t for d in after[r]) for r in mine if r // 8 == p]
            assert crossing == sorted(crossing)


def test_a_thread_runs_the_same_blocks_of_every_phase(monkeypatch):
    """The blocks of a row of an adjoint's grid stay on one thread (their rows of a shadow in its cache): the
    calling thread runs the first half of every phase, the pool thread the second, but for runs one takes
    from the other when none of its own may start."""
    from gpuc.runtime.cpu import block_order

    _no_python_schedule(monkeypatch)
    phases, after = block_order((8, 8, 1), (0, 1), 2)
    run, seen = _timed_recorder(item_seconds=2e-3)
    pool.run_phases(_compiled(run), b"", phases, b"", helpers=1, after=after)
    spans = {b: (me, started, ended) for me, b, e, started, ended in seen}
    order = [r for phase in phases for r in phase]
    assert sorted(spans) == [b for b, _ in sorted(order)]
    for k, before in enumerate(after):
        assert all(spans[order[k][0]][1] >= spans[order[j][0]][2] for j in before)
    caller = threading.get_ident()
    if len({me for me, *_ in seen}) < 2:
        pytest.skip("the pool thread did not come")
    first_half = {b for phase in phases for b, _ in phase[:len(phase) // 2]}
    kept = sum((me == caller) == (b in first_half) for b, (me, *_) in spans.items())
    assert kept >= 0.75 * len(spans), f"only {kept} of {len(spans)} runs on their own thread"


@pytest.mark.parametrize("threads", [3, 4])
def test_runs_claimed_while_waiting_for_a_phase_still_run(monkeypatch, threads):
    """Three threads or more: a pool thread that claimed a run of the last phase and waits for a slow run of
    the phase before still runs it after the calling thread has found nothing left to claim (the launch's
    stop must not make it give its run up)."""
    _no_python_schedule(monkeypatch)
    for _ in range(5):
        run, seen = _timed_recorder(item_seconds=1e-3)
        phases = [[(0, 20), (20, 21)], [(21, 22), (22, 23)][:threads - 2]]
        pool.run_phases(_compiled(run), b"", phases, b"", helpers=threads - 1)
        assert sorted((b, e) for _, b, e, _, _ in seen) == sorted(phases[0] + phases[1])


def test_pool_threads_take_part_in_both_phases():
    run, seen = _timed_recorder(item_seconds=1e-4)  # 64 ms in all: time for a pool thread to come
    phases = _phases(16, 40)
    pool.run_phases(_compiled(run), b"", phases, b"", helpers=1)
    assert len({me for me, *_ in seen}) == 2, "the pool thread ran no run"


def test_phases_do_not_wait_for_helpers_that_never_come(monkeypatch):
    _no_python_schedule(monkeypatch)
    with _busy_pool():
        run, seen = _timed_recorder(item_seconds=0.0)
        phases = _phases(12, 10)
        pool.run_phases(_compiled(run), b"", phases, b"", helpers=2)
        assert sorted((b, e) for _, b, e, _, _ in seen) == sorted(phases[0] + phases[1])
        assert {me for me, *_ in seen} == {threading.get_ident()}


@gpuc.kernel
def count_items(out):
    i = gpuc.index()
    out[i] += 1


@gpuc.kernel
def count_items_2d(out):
    x, y = gpuc.index(0), gpuc.index(1)
    out[y, x] += 1


@pytest.mark.parametrize("n", [1, 2, 3, 4095, 4097, 12_345, 100_003, 1_000_003])
@pytest.mark.parametrize("threads", [2, 3])
def test_a_launch_on_threads_runs_every_item_once(n, threads):
    out = np.zeros(n, np.int64)
    count_items.launch(n, out, threads=threads)
    assert (out == 1).all()


@pytest.mark.parametrize("shape", [(3, 5), (1001, 7), (513, 2049)])
def test_a_2d_launch_on_two_threads_runs_every_item_once(shape):
    out = np.zeros(shape, np.int64)
    count_items_2d.launch((shape[1], shape[0]), out, threads=2)
    assert (out == 1).all()


@gpuc.kernel
def count_items_in_blocks(out):
    i = gpuc.index(0)
    gpuc.barrier()  # a block kernel: the CPU runs it block by block
    out[i] += 1


@pytest.mark.parametrize("blocks", [1, 2, 3, 101])
def test_a_block_launch_on_two_threads_runs_every_block_once(blocks):
    out = np.zeros(64 * blocks, np.int64)
    count_items_in_blocks.launch(out.size, out, threads=2, block=64)
    assert (out == 1).all()


@pytest.mark.parametrize("total, runs", [(1000, 2), (1000, 8), (12345, 32)])
def test_an_odd_run_of_two_phases_follows_its_two_neighbours_alone(total, runs):
    # launch_in_two_phases: an odd run can meet only the even runs beside it, so it waits for those alone
    # (not for the whole first phase); the lists are kept per launch shape, so the scheduler's tables are too
    from gpuc.runtime.cpu import _alternate_runs
    phases, after = _alternate_runs(total, runs)
    flat = phases[0] + phases[1]
    assert sorted(flat)[0][0] == 0 and sorted(flat)[-1][1] == total
    assert all(a[1] == b[0] for a, b in zip(sorted(flat), sorted(flat)[1:]))
    for k, before in enumerate(after):
        begin, end = flat[k]
        beside = {j for j, (b, e) in enumerate(flat) if b == end or e == begin}
        assert set(before) == (set() if k < runs // 2 else beside), (k, before, beside)
    assert _alternate_runs(total, runs)[1] is after
