"""Float sums in loops on the CPU: gpuc's in-order vector sums against Numba, which keeps them in order too.

    .venv/bin/python benchmarks/bench_sums.py [--quick] [--reps N] [--json OUT]

A kernel adding into float accumulators in a loop, `s += x[i, j] * w[k, j]`, must add in order to give
the same bits on every CPU, at every vector width and thread count. Numba (without fastmath) keeps such
a loop scalar; gpuc's LLVM vectorizes it with in-order lane sums (`-force-ordered-reductions`) and, where
a loop keeps several accumulators, adds them by a transpose and vector adds
(gpuc/targets/ordered_sums.py). Kernels, float32 and float64, each work item one row of x (4096 x 512,
1024 x 512 with --quick):
- project8: eight sums per row (x's row against eight rows of w),
- stats4: four (the row's sum and the sums of its squares, cubes and fourth powers),
- dot1: one (the row against one vector),
on one thread, paired rounds of CPU time, best of --reps; the results are checked bit for bit against
Numba's. Also Numba with fastmath=True, which reassociates (different bits), for scale.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import _common  # noqa: F401 - puts the repository on sys.path
from _common import banner, machine_facts, ms, paired_rounds, ratios, table, write_json

import gpuc


@gpuc.kernel
def project8(x, w, out):
    i = gpuc.index()
    s0, s1, s2, s3 = out[i, 0], out[i, 1], out[i, 2], out[i, 3]
    s4, s5, s6, s7 = out[i, 4], out[i, 5], out[i, 6], out[i, 7]
    for j in range(x.shape[1]):
        v = x[i, j]
        s0 += v * w[0, j]
        s1 += v * w[1, j]
        s2 += v * w[2, j]
        s3 += v * w[3, j]
        s4 += v * w[4, j]
        s5 += v * w[5, j]
        s6 += v * w[6, j]
        s7 += v * w[7, j]
    out[i, 0], out[i, 1], out[i, 2], out[i, 3] = s0, s1, s2, s3
    out[i, 4], out[i, 5], out[i, 6], out[i, 7] = s4, s5, s6, s7


@gpuc.kernel
def stats4(x, w, out):
    i = gpuc.index()
    s1, s2, s3, s4 = out[i, 0], out[i, 1], out[i, 2], out[i, 3]
    for j in range(x.shape[1]):
        v = x[i, j]
        v2 = v * v
        s1 += v
        s2 += v2
        s3 += v2 * v
        s4 += v2 * v2
    out[i, 0], out[i, 1], out[i, 2], out[i, 3] = s1, s2, s3, s4


@gpuc.kernel
def dot1(x, w, out):
    i = gpuc.index()
    s = out[i, 0]
    for j in range(x.shape[1]):
        s += x[i, j] * w[0, j]
    out[i, 0] = s


def numba_kernels(fastmath: bool):
    import numba

    jit = numba.njit(fastmath=fastmath)

    @jit
    def project8_nb(x, w, out):
        for i in range(x.shape[0]):
            s0, s1, s2, s3 = out[i, 0], out[i, 1], out[i, 2], out[i, 3]
            s4, s5, s6, s7 = out[i, 4], out[i, 5], out[i, 6], out[i, 7]
            for j in range(x.shape[1]):
                v = x[i, j]
                s0 += v * w[0, j]
                s1 += v * w[1, j]
                s2 += v * w[2, j]
                s3 += v * w[3, j]
                s4 += v * w[4, j]
                s5 += v * w[5, j]
                s6 += v * w[6, j]
                s7 += v * w[7, j]
            out[i, 0], out[i, 1], out[i, 2], out[i, 3] = s0, s1, s2, s3
            out[i, 4], out[i, 5], out[i, 6], out[i, 7] = s4, s5, s6, s7

    @jit
    def stats4_nb(x, w, out):
        for i in range(x.shape[0]):
            s1, s2, s3, s4 = out[i, 0], out[i, 1], out[i, 2], out[i, 3]
            for j in range(x.shape[1]):
                v = x[i, j]
                v2 = v * v
                s1 += v
                s2 += v2
                s3 += v2 * v
                s4 += v2 * v2
            out[i, 0], out[i, 1], out[i, 2], out[i, 3] = s1, s2, s3, s4

    @jit
    def dot1_nb(x, w, out):
        for i in range(x.shape[0]):
            s = out[i, 0]
            for j in range(x.shape[1]):
                s += x[i, j] * w[0, j]
            out[i, 0] = s

    return {"project8": project8_nb, "stats4": stats4_nb, "dot1": dot1_nb}


def run(rows: int, cols: int, reps: int) -> list[dict]:
    exact, fast = numba_kernels(False), numba_kernels(True)
    kernels = {"project8": project8, "stats4": stats4, "dot1": dot1}
    rng = np.random.default_rng(0)
    results = []
    for dtype in (np.float32, np.float64):
        x = rng.standard_normal((rows, cols)).astype(dtype)
        w = rng.standard_normal((8, cols)).astype(dtype)
        for name, kernel in kernels.items():
            outs = [np.zeros((rows, 8), dtype) for _ in range(3)]
            fns = [lambda: kernel.launch(rows, x, w, outs[0], threads=1),
                   lambda: exact[name](x, w, outs[1]),
                   lambda: fast[name](x, w, outs[2])]
            for fn, out in zip(fns, outs):  # one call each from zero: the results to compare
                out[:] = 0
                fn()
            same = outs[0].tobytes() == outs[1].tobytes()
            cpu = paired_rounds(fns, reps, clock=1)
            best, median_ratio = ratios(cpu[0], cpu[1])
            results.append({"kernel": name, "dtype": np.dtype(dtype).name, "gpuc_s": cpu[0], "numba_s": cpu[1],
                            "numba_fastmath_s": cpu[2], "ratio": best, "median_ratio": median_ratio,
                            "fastmath_ratio": ratios(cpu[0], cpu[2])[0], "bitwise_equal": same})
    return results


def report(results: list[dict]) -> None:
    rows = [[r["kernel"], r["dtype"], ms(min(r["gpuc_s"])), ms(min(r["numba_s"])), f"{r['ratio']:.2f}x",
             f"{r['median_ratio']:.2f}x", "yes" if r["bitwise_equal"] else "NO", ms(min(r["numba_fastmath_s"])),
             f"{r['fastmath_ratio']:.2f}x"] for r in results]
    print(table(["kernel", "dtype", "gpuc ms", "numba ms", "gpuc / numba", "(median)", "same bits",
                 "numba fastmath ms", "gpuc / fastmath"], rows))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1024 rows, 3 runs")
    ap.add_argument("--reps", type=int, help="timed rounds (default 9, 3 with --quick)")
    ap.add_argument("--json", help="write the results to this file")
    args = ap.parse_args()
    reps = args.reps or (3 if args.quick else 9)
    facts = machine_facts()
    print(banner(facts))
    print()
    results = run(1024 if args.quick else 4096, 512, reps)
    report(results)
    if args.json:
        write_json(args.json, {"facts": facts, "results": results, "reps": reps})
    return 0 if all(r["bitwise_equal"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
