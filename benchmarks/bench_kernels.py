"""Python kernels on the CPU, side by side with Numba: compile latency, run time, launch overhead.

    .venv/bin/python benchmarks/bench_kernels.py [--quick] [--json OUT]

Measured in one run:
- compile latency: the first compile of saxpy in a warm process (gpuc: compile of the kernel for
  the CPU, launcher included; Numba: the first call of an `njit` loop minus a warm call), and
  cold, process start to first result, for both (target: warm ≤ 0.5× Numba);
- run time: saxpy on 10M float32, a 2-D 5-point stencil on 2048², mandelbrot 1024²; gpuc on one
  thread vs `numba.njit` (target: within 1.1×), and gpuc on 2 threads vs 1 (target ≥ 1.7×);
- warm launch overhead of an empty kernel (target ≤ 10 µs).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from _common import ROOT, median, table, timed

import numpy as np

import gpuc

# -- the kernels, twice: gpuc (one work item per index) and Numba (the equivalent loop) -----------


@gpuc.kernel
def saxpy(a, x, y, out):
    i = gpuc.index()
    out[i] = a * x[i] + y[i]


@gpuc.kernel
def stencil(u, v):
    # launched over the interior, (m - 2, n - 2); dimension 0 varies fastest: it walks the columns
    j = gpuc.index(0) + 1
    i = gpuc.index(1) + 1
    v[i, j] = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]) - u[i, j]


@gpuc.kernel
def mandelbrot(out, max_iter):
    j = gpuc.index(0)
    i = gpuc.index(1)
    cr = -2.0 + 3.0 * j / gpuc.ndrange(0)
    ci = -1.5 + 3.0 * i / gpuc.ndrange(1)
    zr = 0.0
    zi = 0.0
    k = 0
    while k < max_iter and zr * zr + zi * zi <= 4.0:
        zr, zi = zr * zr - zi * zi + cr, 2.0 * zr * zi + ci
        k += 1
    out[i, j] = k


@gpuc.kernel
def empty(x):
    pass


def numba_kernels(parallel: bool = False):
    """The equivalent loops for Numba. The outer loops use `prange`, which is a plain `range` in a
    serial `njit` and a parallel loop with `parallel=True` (Numba's own multi-thread figure, the
    anchor for gpuc's thread scaling)."""
    import numba
    from numba import prange

    jit = numba.njit(parallel=parallel)

    @jit
    def saxpy_nb(a, x, y, out):
        for i in prange(x.shape[0]):
            out[i] = a * x[i] + y[i]

    @jit
    def stencil_nb(u, v):
        n, m = u.shape
        for i in prange(1, n - 1):
            for j in range(1, m - 1):
                v[i, j] = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]) - u[i, j]

    @jit
    def mandelbrot_nb(out, max_iter):
        h, w = out.shape
        for i in prange(h):
            for j in range(w):
                cr = -2.0 + 3.0 * j / w
                ci = -1.5 + 3.0 * i / h
                zr = 0.0
                zi = 0.0
                k = 0
                while k < max_iter and zr * zr + zi * zi <= 4.0:
                    zr, zi = zr * zr - zi * zi + cr, 2.0 * zr * zi + ci
                    k += 1
                out[i, j] = k

    return saxpy_nb, stencil_nb, mandelbrot_nb


# -- measurements --------------------------------------------------------------------------------

COLD_GPUC = """
import time, numpy as np, gpuc
t0 = time.perf_counter()
@gpuc.kernel
def saxpy(a, x, y, out):
    i = gpuc.index()
    out[i] = a * x[i] + y[i]
x = np.ones(1000, np.float32); out = np.empty_like(x)
saxpy.launch(x.size, np.float32(2.0), x, x, out, device="cpu", threads=1)
assert out[0] == 3.0
"""
COLD_NUMBA = """
import numpy as np, numba
@numba.njit
def saxpy(a, x, y, out):
    for i in range(x.shape[0]):
        out[i] = a * x[i] + y[i]
x = np.ones(1000, np.float32); out = np.empty_like(x)
saxpy(np.float32(2.0), x, x, out)
assert out[0] == 3.0
"""


_SCRATCH = []


def scratch() -> Path:
    """A folder for generated scripts (gpuc reads a kernel's source from its file), removed at exit."""
    import tempfile

    if not _SCRATCH:
        _SCRATCH.append(tempfile.TemporaryDirectory(prefix="gpuc-bench-"))
    return Path(_SCRATCH[0].name)


def cold(code: str, reps: int) -> float:
    script = scratch() / "cold.py"  # a file: gpuc reads kernels' source
    script.write_text(code)
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        subprocess.run([sys.executable, str(script)], check=True, cwd=ROOT, capture_output=True)
        times.append(time.perf_counter() - start)
    return median(times)


GPUC_SAXPY = """import gpuc

@gpuc.kernel
def k(a, x, y, out):
    i = gpuc.index()
    out[i] = a * x[i] + y[i]
"""
NUMBA_SAXPY = """def k(a, x, y, out):
    for i in range(x.shape[0]):
        out[i] = a * x[i] + y[i]
"""


def _fresh(source: str, tag: str):
    """A new module (a new function object: nothing cached) from `source`, written to a file so that
    gpuc can read the function's source."""
    import importlib.util

    path = scratch() / f"bench_{tag}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.k


def compile_latency(reps: int) -> list[list]:
    import numba

    x = np.ones(1000, np.float32)
    out = np.empty_like(x)
    # a warm process has compiled before: the first compile of each (loading LLVM, creating the target
    # machine, Numba's first-use set-up) is not timed
    _fresh(GPUC_SAXPY, "gpuc_warmup").launch(x.size, np.float32(2.0), x, x, out, device="cpu", threads=1)
    numba.njit(_fresh(NUMBA_SAXPY, "numba_warmup"))(np.float32(2.0), x, x, out)
    gp, nb = [], []
    for r in range(reps):
        kern = _fresh(GPUC_SAXPY, f"gpuc{r}")
        t_first, _ = timed(kern.launch, x.size, np.float32(2.0), x, x, out, device="cpu", threads=1)
        t_warm, _ = timed(kern.launch, x.size, np.float32(2.0), x, x, out, device="cpu", threads=1)
        gp.append(t_first - t_warm)
        fn = numba.njit(_fresh(NUMBA_SAXPY, f"numba{r}"))
        t_first, _ = timed(fn, np.float32(2.0), x, x, out)
        t_warm, _ = timed(fn, np.float32(2.0), x, x, out)
        nb.append(t_first - t_warm)
    warm_g, warm_n = median(gp), median(nb)
    cold_g, cold_n = cold(COLD_GPUC, 3), cold(COLD_NUMBA, 3)
    return [["compile, warm process (ms)", f"{warm_g * 1e3:.1f}", f"{warm_n * 1e3:.1f}", f"{warm_g / warm_n:.2f}x", "<= 0.5x"],
            ["start to first result (ms)", f"{cold_g * 1e3:.0f}", f"{cold_n * 1e3:.0f}", f"{cold_g / cold_n:.2f}x", ""]]


def run_times(reps: int, quick: bool) -> list[list]:
    import numba

    saxpy_nb, stencil_nb, mandelbrot_nb = numba_kernels()
    saxpy_par, stencil_par, mandelbrot_par = numba_kernels(parallel=True)
    numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
    n = 2_000_000 if quick else 10_000_000
    x = np.random.default_rng(0).random(n, dtype=np.float32)
    y = np.random.default_rng(1).random(n, dtype=np.float32)
    side = 1024 if quick else 2048
    u = np.random.default_rng(2).random((side, side))
    v_g, v_n = np.zeros_like(u), np.zeros_like(u)
    mside, max_iter = (512 if quick else 1024), 100
    m_g, m_n = np.zeros((mside, mside), np.int64), np.zeros((mside, mside), np.int64)
    out_g, out_n = np.empty_like(x), np.empty_like(x)
    a = np.float32(2.5)
    cases = [
        ("saxpy 10M float32" if not quick else "saxpy 2M float32", n,
         lambda t: saxpy.launch(n, a, x, y, out_g, device="cpu", threads=t), lambda: saxpy_nb(a, x, y, out_n),
         lambda: saxpy_par(a, x, y, out_n), lambda: np.testing.assert_allclose(out_g, out_n, rtol=1e-6)),
        (f"stencil {side}^2 float64", (side, side),
         lambda t: stencil.launch((side - 2, side - 2), u, v_g, device="cpu", threads=t), lambda: stencil_nb(u, v_n),
         lambda: stencil_par(u, v_n), lambda: np.testing.assert_allclose(v_g, v_n, rtol=1e-12)),
        (f"mandelbrot {mside}^2", (mside, mside),
         lambda t: mandelbrot.launch((mside, mside), m_g, max_iter, device="cpu", threads=t),
         lambda: mandelbrot_nb(m_n, max_iter), lambda: mandelbrot_par(m_n, max_iter),
         lambda: np.testing.assert_array_equal(m_g, m_n)),
    ]
    rows = []
    for name, _, run_g, run_n, run_p, check in cases:
        run_g(1), run_g(2), run_p(), run_n()  # compile and warm up
        check()
        g1, g2, nb, np2 = [], [], [], []
        for _ in range(reps):
            g1.append(timed(run_g, 1)[0])
            g2.append(timed(run_g, 2)[0])
            nb.append(timed(run_n)[0])
            np2.append(timed(run_p)[0])
        t1, t2, tn, tp = median(g1), median(g2), median(nb), median(np2)
        rows.append([name, f"{t1 * 1e3:.2f}", f"{t2 * 1e3:.2f}", f"{tn * 1e3:.2f}", f"{tp * 1e3:.2f}",
                     f"{t1 / tn:.2f}x", f"{t1 / t2:.2f}x", f"{tn / tp:.2f}x"])
    return rows


def launch_overhead(reps: int) -> float:
    x = np.zeros(1, np.float32)
    empty.launch(1, x, device="cpu", threads=1)
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(1000):
            empty.launch(1, x, device="cpu", threads=1)
        samples.append((time.perf_counter() - start) / 1000)
    return median(samples)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller inputs, fewer repetitions")
    ap.add_argument("--json", help="write the results to this file")
    args = ap.parse_args()
    reps = 3 if args.quick else 7
    results = {"compile": compile_latency(reps), "run": run_times(reps, args.quick),
               "launch_us": launch_overhead(reps) * 1e6}
    print(table(["", "gpuc", "numba", "gpuc/numba", "target"], results["compile"], title="== compile latency =="))
    print()
    print(table(["kernel", "gpuc 1T (ms)", "gpuc 2T (ms)", "numba (ms)", "numba par 2T (ms)", "1T/numba",
                 "gpuc 1T/2T", "numba 1T/2T"], results["run"],
                title="== CPU run time (median; targets 1T/numba <= 1.1x, gpuc 1T/2T >= 1.7x) =="))
    print()
    print(f"== warm launch of an empty kernel: {results['launch_us']:.2f} us (target <= 10 us) ==")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
