"""`//`, `%`, `<<`, `>>` at their edges (zero divisors, MIN // -1, counts outside the width, infinities and
NaN) give NumPy's defined results on every path, constant or run time, instead of a trap or LLVM's poison."""

from __future__ import annotations

import numpy as np
import pytest

import gpuc

TYPES = [np.int32, np.int64, np.uint32, np.uint64]
# The tests that launch kernels run natively and through OpenCL.
ON_DEVICES = pytest.mark.devices("cpu", "opencl")


@gpuc.kernel
def _ops(out, a, b):
    out[0] = a // b
    out[1] = a % b
    out[2] = a << b
    out[3] = a >> b


def _edges(dt):
    info = np.iinfo(dt)
    return [dt(v) for v in sorted({info.min, info.max, 0, 1, -1, 7, -7, 31, 32, 33, 63, 64, 65, -64})
            if info.min <= v <= info.max]


def _numpy(a, b):
    with np.errstate(all="ignore"):
        return [a // b, a % b, a << b, a >> b]


@ON_DEVICES
@pytest.mark.parametrize("dt", TYPES, ids=lambda d: d.__name__)
def test_edges_at_run_time_match_numpy(dt):
    for a in _edges(dt):
        for b in _edges(dt):
            out = np.zeros(4, dt)
            _ops[1](out, a, b)
            assert list(out) == [dt(w) for w in _numpy(a, b)], (a, b)


@ON_DEVICES
@pytest.mark.parametrize("dt", [np.int32, np.int64], ids=lambda d: d.__name__)
def test_min_divided_by_minus_one_with_a_constant_divisor(dt):
    @gpuc.kernel
    def k(out, a):
        out[0] = a // -1
        out[1] = a % -1
        out[2] = a // 0
        out[3] = a % 0

    out = np.ones(4, dt)
    k[1](out, dt(np.iinfo(dt).min))
    assert list(out) == [np.iinfo(dt).min, 0, 0, 0]


# MIN // -1 once killed the process with SIGFPE (x86's idiv traps), found by the random-program generator.
@ON_DEVICES
@pytest.mark.not_on("opencl", "checks that x86's trapping division (SIGFPE) does not stop the CPU runtime's "
                              "process")
def test_trapping_divisions_do_not_kill_the_process(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "case.py"
    script.write_text(
        "import numpy as np, gpuc\n"
        "@gpuc.kernel\n"
        "def k(out, a, b):\n"
        "    out[gpuc.index()] = a // b + a % b\n"
        "out = np.zeros(4, np.int64)\n"
        "k[4](out, np.int64(-2**63), np.int64(-1)); k[4](out, np.int64(5), np.int64(0))\n"
        "print('alive', out.tolist())\n")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "alive [0, 0, 0, 0]" in proc.stdout


@gpuc.kernel
def _float_divmod(out, a, b):
    out[0] = a // b
    out[1] = a % b


@ON_DEVICES
@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=lambda d: d.__name__)
def test_float_floor_division_and_remainder_at_the_edges_match_numpy(dt):
    tiny = np.finfo(dt).smallest_subnormal
    values = [dt(v) for v in (0.0, -0.0, 1.0, -1.0, 2.5, -7.25, np.inf, -np.inf, np.nan, np.finfo(dt).max, tiny)]
    for a in values:
        for b in values:
            out = np.zeros(2, dt)
            _float_divmod[1](out, a, b)
            with np.errstate(all="ignore"):
                want = np.array([np.floor_divide(a, b), np.remainder(a, b)], dt)
            assert out.tobytes() == want.tobytes() or (np.isnan(out) == np.isnan(want)).all() and \
                (out[~np.isnan(out)].tobytes() == want[~np.isnan(want)].tobytes()), (a, b, out, want)
