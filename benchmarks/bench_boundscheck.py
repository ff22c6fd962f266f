"""What bounds checks cost at run time: the same kernels compiled with and without
`CompilerConfig(boundscheck=True)`, run side by side on one thread (docs/debugging.md, "Bounds checks").

    .venv/bin/python benchmarks/bench_boundscheck.py [--quick] [--json OUT]

Kernels: saxpy over 4M float32 and the 2-D 5-point stencil over 2048² float64 (the run-time targets
of the issue: checked ≤ 1.5× unchecked), and the complex Mandelbrot example (a loop per pixel: the
loop polls the record of failed checks at every iteration). Each row is the median of the per-round
ratios checked / unchecked; the two variants alternate within every round. Where Numba is installed, the
same loops as serial `@numba.njit(boundscheck=...)` functions give Numba's own ratio in the same run.
"""

from __future__ import annotations

import argparse
import json
import sys

from _common import ROOT, median, table, timed

import numpy as np

import gpuc
from gpuc.abi import KernelSignature
from gpuc.runtime import cpu
from gpuc.runtime.dispatch import launch_job, signature_spec, typeof

sys.path.insert(0, str(ROOT / "examples"))
from mandelbrot import fractal  # noqa: E402  (the example's kernel and func)
from bench_kernels import saxpy, stencil  # noqa: E402  (the kernels bench_kernels.py times)


def launcher(kernel, args, checked: bool):
    types = tuple(typeof(a, i) for i, a in enumerate(args))
    job = launch_job(kernel, types, "cpu")
    job = gpuc.CompilerJob(job.source, job.config.replace(boundscheck=checked))
    return cpu.JITModule(job, signature=KernelSignature(signature_spec(types))).launcher()


def cases(quick: bool):
    n = 1 << (20 if quick else 22)
    rng = np.random.default_rng(0)
    x, y = rng.random(n, np.float32), rng.random(n, np.float32)
    side = 1024 if quick else 2048
    u = rng.random((side, side))
    yield "saxpy, 4M float32" if not quick else "saxpy, 1M float32", saxpy, n, (np.float32(2.0), x, y, np.zeros(n, np.float32))
    yield f"stencil, {side}² float64", stencil, (side - 2, side - 2), (u, np.zeros_like(u))
    image = np.zeros((256, 384) if quick else (512, 768), np.uint8)
    yield f"mandelbrot {image.shape[0]}x{image.shape[1]}, 20 iterations", fractal, image.shape[::-1], \
        (-2.0, -1.0, 3.0 / image.shape[1], 2.0 / image.shape[0], image, 20)


def numba_pairs():
    """{kernel name: (unchecked, checked)} serial @numba.njit loops of saxpy and the stencil, or {}."""
    try:
        import numba
    except ImportError:
        return {}

    def build(checked):
        @numba.njit(boundscheck=checked)
        def saxpy_nb(a, x, y, out):
            for i in range(out.size):
                out[i] = a * x[i] + y[i]

        @numba.njit(boundscheck=checked)
        def stencil_nb(u, v):
            m, n = u.shape
            for i in range(1, m - 1):
                for j in range(1, n - 1):
                    v[i, j] = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]) - u[i, j]
        return {"saxpy": saxpy_nb, "stencil": stencil_nb}

    plain, checked = build(False), build(True)
    return {k: (plain[k], checked[k]) for k in plain}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json")
    ns = parser.parse_args()
    rounds = 5 if ns.quick else 11
    rows, results = [], {}
    anchors = numba_pairs()
    for name, kernel, n, args in cases(ns.quick):
        plain, checked = launcher(kernel, args, False), launcher(kernel, args, True)
        plain(n, args, threads=1), checked(n, args, threads=1)  # warm
        ratios, times = [], {"unchecked": [], "checked": []}
        for _ in range(rounds):
            t0, _ = timed(plain, n, args, threads=1)
            t1, _ = timed(checked, n, args, threads=1)
            times["unchecked"].append(t0), times["checked"].append(t1)
            ratios.append(t1 / t0)
        pair, numba_ratios = anchors.get(name.split(",")[0]), []
        if pair is not None:
            for fn in pair:
                fn(*args)  # compiled before timing
            for _ in range(rounds):
                t0, _ = timed(pair[0], *args)
                t1, _ = timed(pair[1], *args)
                numba_ratios.append(t1 / t0)
        results[name] = {"unchecked_s": median(times["unchecked"]), "checked_s": median(times["checked"]),
                         "ratio": median(ratios), "numba_ratio": median(numba_ratios) if numba_ratios else None}
        rows.append([name, f"{median(times['unchecked']) * 1e3:.2f}", f"{median(times['checked']) * 1e3:.2f}",
                     f"{median(ratios):.2f}x", f"{median(numba_ratios):.2f}x" if numba_ratios else "-"])
    print(table(["kernel (one thread)", "unchecked ms", "checked ms", "checked / unchecked", "numba's checked / unchecked"],
                rows, title="bounds checks: run time, side by side"))
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
