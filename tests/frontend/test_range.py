"""`for v in range(...)` over every integer type, counting up and down, with literal and run-time steps, up to the
edges of each type: the loop runs exactly as in Python (a runaway loop is capped, so it fails instead of hanging)."""

from __future__ import annotations

import numpy as np
import pytest

import gpuc
from gpuc import boolean, int32, int64, uint32, uint64

from support.native import NUMPY, native

# The tests that launch kernels or run funcs (support.native) run natively and through OpenCL.
ON_DEVICES = pytest.mark.devices("cpu", "opencl")

INTEGERS = [int32, int64, uint32, uint64]
RANGES = {int32: (-2**31, 2**31 - 1), int64: (-2**63, 2**63 - 1), uint32: (0, 2**32 - 1), uint64: (0, 2**64 - 1)}
CAP = 200  # more iterations than any case below has


def typed(t, value):
    return NUMPY[t.name](value)


def python_walk(start, stop, step):
    values = list(range(start, stop, step)[:CAP + 1])
    return len(values), sum(values[:CAP]), values[-1] if values else None


def bounds(t):
    """Start/stop values near the edges of t and around zero."""
    lo, hi = RANGES[t]
    return sorted({v for v in (lo, lo + 1, lo + 6, -7, -1, 0, 1, 7, hi - 6, hi - 1, hi) if lo <= v <= hi})


@gpuc.func
def walk(a, b, s):
    n = 0
    total = 0
    last = a
    for j in range(a, b, s):
        n += 1
        if n > CAP:
            break
        total += int(j)
        last = j
    return n, total, last


@ON_DEVICES
@pytest.mark.parametrize("t", INTEGERS, ids=str)
def test_run_time_steps(t):
    lo, hi = RANGES[t]
    steps = [1, 2, 3, 7, hi // 3, hi] + ([-1, -2, -3, -7, lo // 3, lo] if lo < 0 else [])
    fn = native(walk, (t, t, t))
    for a in bounds(t):
        for b in bounds(t):
            for s in steps:
                want_n, want_total, want_last = python_walk(a, b, s)
                if want_n > CAP:
                    continue
                n, total, last = fn(typed(t, a), typed(t, b), typed(t, s))
                assert (n, total) == (want_n, want_total % 2**64 - (2**64 if want_total % 2**64 >= 2**63 else 0)), \
                    (t, a, b, s)
                assert last == (a if want_last is None else want_last), (t, a, b, s)


def walk_with_step(step):
    @gpuc.func
    def f(a, b):
        n = 0
        last = a
        for j in range(a, b, step):
            n += 1
            if n > CAP:
                break
            last = j
        return n, last
    return f


@ON_DEVICES
@pytest.mark.parametrize("t", INTEGERS, ids=str)
@pytest.mark.parametrize("step", [1, 2, 7, -1, -2, -7])
def test_literal_steps_count_down_unsigned_types(t, step):
    # range(u, 0, -1) with u = np.uint32(3) ran 0 times: the step -1 had become the unsigned 4294967295
    lo, hi = RANGES[t]
    fn = native(walk_with_step(step), (t, t))
    for a in bounds(t):
        for b in bounds(t):
            values = list(range(a, b, step)[:CAP + 1])
            if len(values) > CAP:
                continue
            assert fn(typed(t, a), typed(t, b)) == (len(values), values[-1] if values else a), (t, a, b, step)


def walk_to(stop, step):
    @gpuc.func
    def f(a):
        n = 0
        last = a
        for j in range(a, stop, step):
            n += 1
            if n > CAP:
                break
            last = j
        return n, last
    return f


@ON_DEVICES
@pytest.mark.parametrize("t", INTEGERS, ids=str)
@pytest.mark.parametrize("step", [1, 3, -1, -3])
def test_a_literal_stop_just_past_the_types_range(t, step):
    # range(np.uint64(4), -1, -2) never ended: the stop -1 wrapped to the largest uint64
    lo, hi = RANGES[t]
    stop = lo - 1 if step < 0 else hi + 1
    if not -2**63 <= stop < 2**64:
        pytest.skip("literals are 64-bit integers")
    fn = native(walk_to(stop, step), (t,))
    for a in bounds(t):
        values = list(range(a, stop, step)[:CAP + 1])
        if len(values) <= CAP:
            assert fn(typed(t, a)) == (len(values), values[-1] if values else a), (t, a, stop, step)


@ON_DEVICES
def test_a_literal_stop_behind_the_start_makes_the_loop_empty():
    # with an unsigned run-time step the loop counts up: a stop below the type's range only means no values
    @gpuc.func
    def f(u, s):
        n = 0
        for j in range(u, -2, s):
            n += 1
        for j in range(u, -2**40):
            n += 1
        return n

    @gpuc.func
    def g(i):
        n = 0
        for j in range(i, 2**40, -1):
            n += 1
        return n

    assert native(f, (uint32, uint32))(np.uint32(5), np.uint32(2)) == 0
    assert native(g, (int32,))(np.int32(7)) == 0


@ON_DEVICES
def test_the_reproducers():
    @gpuc.func
    def down(u):
        t = 0
        for j in range(u, 0, -1):
            t = t * 10 + int(j)
        return t

    @gpuc.func
    def down_to_zero(u):
        t = 0
        for j in range(u, -1, -2):
            t = t * 10 + int(j)
        return t

    assert native(down, (uint32,))(np.uint32(3)) == 321
    assert native(down_to_zero, (uint64,))(np.uint64(4)) == 420


@gpuc.func
def one_and_two_arguments(n, m):
    t = 0
    for i in range(n):
        t += int(i)
    for i in range(m, n):
        t += 100 * int(i)
    return t


@ON_DEVICES
@pytest.mark.parametrize("t", INTEGERS + [boolean], ids=str)
def test_one_and_two_arguments(t):
    fn = native(one_and_two_arguments, (t, t))
    for n, m in [(0, 0), (5, 2), (2, 5), (7, 7)] if t is not boolean else [(0, 1), (1, 0), (1, 1)]:
        want = sum(range(n)) + 100 * sum(range(m, n))
        assert fn(typed(t, n) if t is not boolean else bool(n), typed(t, m) if t is not boolean else bool(m)) == want


@ON_DEVICES
def test_the_loop_variable_keeps_its_value_when_the_loop_does_not_run():
    @gpuc.func
    def f(n):
        j = 5
        for j in range(n):
            pass
        return j

    fn = native(f, (int64,))
    assert [fn(n) for n in (0, 1, 4)] == [f(n) for n in (0, 1, 4)] == [5, 0, 3]


@ON_DEVICES
def test_a_zero_step_at_run_time_runs_nothing():
    # Python raises ValueError; gpuc documents that the loop does not run
    fn = native(walk, (int64, int64, int64))
    assert fn(0, 10, 0) == (0, 0, 0)


@ON_DEVICES
def test_mixed_types_without_a_common_integer_type_are_an_error():
    # range(a, b) with a int64 and b uint64 was an InternalCompilerError (the common type is float64)
    @gpuc.func
    def f(a, b):
        t = 0
        for j in range(a, b):
            t += 1
        return t

    with pytest.raises(gpuc.CompilationError, match="int64 and uint64 have no common integer type"):
        gpuc.code_llvm(f, (int64, uint64))
    assert native(f, (int32, uint32))(np.int32(-2), np.uint32(3)) == 5


@pytest.mark.parametrize("source, message", [
    ("range(-1, u)", "range start -1 does not fit the loop variable's type uint32"),
    ("range(u, -2, -1)", "range stop -2 does not fit"),
    ("range(u, 10, 0)", "step must not be zero"),
    ("range(u, 2**33)", "range stop 8589934592 does not fit"),
])
def test_literal_bounds_outside_the_loop_type_are_errors(tmp_path, monkeypatch, source, message):
    path = tmp_path / "ranges.py"
    path.write_text(f"import gpuc\n\n@gpuc.func\ndef f(u):\n    t = 0\n    for j in {source}:\n        t += 1\n"
                    "    return t\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib
    module = importlib.import_module("ranges")
    try:
        with pytest.raises(gpuc.CompilationError, match=message):
            gpuc.code_llvm(module.f, (uint32,))
    finally:
        import sys
        sys.modules.pop("ranges", None)
