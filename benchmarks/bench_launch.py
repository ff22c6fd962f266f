"""Launch overhead on the CPU: warm launches of small kernels, gpuc against a numba.njit call and Warp's CPU launch.

    .venv/bin/python benchmarks/bench_launch.py [--quick] [--reps N] [--json OUT]

Side by side in one process, alternating round by round (each round times a batch of calls of each
contender, wall clock, after warm-up calls that compile): an empty kernel `empty[1](x)` (one float64
array), the same as a prepared launch (`empty.prepare(1, x)`, then calling it), saxpy over 1000 float64
`saxpy[1000](a, x, y)` and prepared, against `numba.njit` functions doing the same (an empty function
taking the array; the saxpy loop) and, when `warp-lang` is installed (the `anchors` extra), Warp's CPU
launches of the same kernels (`wp.launch(..., device="cpu")` and a prepared `record_cmd=True` launch).
The targets (issue 28): `kernel[1](x)` <= 3 us, a prepared launch <= 1 us, `saxpy[1000]` <= 5 us in all.
On a shared machine the ratios to the anchors measured in the same rounds are the figures to compare.
"""

import argparse
import time

import numpy as np

import _common  # noqa: F401 - puts the repository on sys.path
from _common import banner, machine_facts, median, table, write_json

import gpuc

N = 1000
TARGETS_US = {"empty[1](x)": 3.0, "empty prepared": 1.0, "saxpy[1000](a, x, y)": 5.0}
#: Each contender's anchors: (the numba.njit call, Warp's launch of the same kind), measured in the same rounds.
ANCHORS = {"empty[1](x)": ("numba empty(x)", "warp empty"),
           "empty prepared": ("numba empty(x)", "warp empty prepared"),
           "saxpy[1000](a, x, y)": ("numba saxpy(a, x, y)", "warp saxpy"),
           "saxpy prepared": ("numba saxpy(a, x, y)", "warp saxpy prepared"),
           "warp empty": ("numba empty(x)", ""), "warp empty prepared": ("numba empty(x)", ""),
           "warp saxpy": ("numba saxpy(a, x, y)", ""), "warp saxpy prepared": ("numba saxpy(a, x, y)", "")}


@gpuc.kernel
def empty(x):
    pass


@gpuc.kernel
def saxpy(a, x, y):
    i = gpuc.index(0)
    y[i] = a * x[i] + y[i]


def gpuc_contenders(x, y) -> dict:
    prepared_empty, prepared_saxpy = empty.prepare(1, x), saxpy.prepare(N, 2.0, x, y)
    return {"empty[1](x)": lambda: empty[1](x), "empty prepared": prepared_empty,
            "saxpy[1000](a, x, y)": lambda: saxpy[N](2.0, x, y), "saxpy prepared": prepared_saxpy}


def numba_contenders(x, y) -> dict:
    try:
        import numba
    except ImportError:
        return {}

    @numba.njit
    def nothing(x):
        pass

    @numba.njit
    def axpy(a, x, y):
        for i in range(x.size):
            y[i] = a * x[i] + y[i]
    return {"numba empty(x)": lambda: nothing(x), "numba saxpy(a, x, y)": lambda: axpy(2.0, x, y)}


def warp_contenders(x, y) -> dict:
    try:
        import warp as wp
    except ImportError:
        return {}
    wp.config.quiet = True
    wp.init()

    @wp.kernel
    def wempty(x: wp.array(dtype=wp.float64)):
        pass

    @wp.kernel
    def wsaxpy(a: wp.float64, x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64)):
        i = wp.tid()
        y[i] = a * x[i] + y[i]

    wx = wp.array(x, dtype=wp.float64, device="cpu")
    wy = wp.array(y, dtype=wp.float64, device="cpu")
    a = wp.float64(2.0)
    empty_cmd = wp.launch(wempty, dim=1, inputs=[wx], device="cpu", record_cmd=True)
    saxpy_cmd = wp.launch(wsaxpy, dim=N, inputs=[a, wx, wy], device="cpu", record_cmd=True)
    return {"warp empty": lambda: wp.launch(wempty, dim=1, inputs=[wx], device="cpu"),
            "warp empty prepared": empty_cmd.launch,
            "warp saxpy": lambda: wp.launch(wsaxpy, dim=N, inputs=[a, wx, wy], device="cpu"),
            "warp saxpy prepared": saxpy_cmd.launch}


def per_call(fn, calls: int) -> float:
    """Seconds per call of `fn` over a batch of `calls` calls."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and calls")
    parser.add_argument("--reps", type=int, default=21, help="rounds")
    parser.add_argument("--calls", type=int, default=5000, help="calls per batch")
    parser.add_argument("--json", help="write the samples and the machine facts here")
    args = parser.parse_args()
    reps, calls = (7, 1000) if args.quick else (args.reps, args.calls)
    facts = machine_facts()
    print(banner(facts))

    x, y = np.random.default_rng(0).random(N), np.zeros(N)
    contenders = {**gpuc_contenders(x, y), **numba_contenders(x, y), **warp_contenders(x, y)}
    for fn in contenders.values():
        for _ in range(3):
            fn()  # compiles, fills caches
    samples = {name: [] for name in contenders}
    for _ in range(reps):
        for name, fn in contenders.items():
            samples[name].append(per_call(fn, calls))

    rows, results = [], {"rounds": reps, "calls": calls, "samples_s": samples}
    for name, times in samples.items():
        best = min(times)
        row = [name, f"{best * 1e6:.2f}", f"{median(times) * 1e6:.2f}"]
        for anchor in ANCHORS.get(name, ("", "")):
            if anchor in samples:
                ratio = median([a / b for a, b in zip(times, samples[anchor])])
                row.append(f"{ratio:.2f}x")
                results[f"{name} / {anchor}"] = ratio
            else:
                row.append("")
        target = TARGETS_US.get(name)
        row.append(f"<= {target:g} us: {'met' if best * 1e6 <= target else 'MISSED'}" if target else "")
        rows.append(row)
    print(table(["launch", "best us", "median us", "/ numba (median of rounds)", "/ warp (median of rounds)",
                 "target"], rows, title=f"warm launches, {reps} rounds of {calls} calls each"))
    if args.json:
        write_json(args.json, {"results": results, "machine": facts})


if __name__ == "__main__":
    main()
