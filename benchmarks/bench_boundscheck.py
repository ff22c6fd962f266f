"""What bounds checks cost at run time: the same kernels compiled with and without
`CompilerConfig(boundscheck=True)`, run side by side on one thread (docs/debugging.md, "Bounds checks").

    .venv/bin/python benchmarks/bench_boundscheck.py [--quick] [--json OUT]

Kernels: saxpy over 4M float32 and the 2-D 5-point stencil over 2048² float64 (the run-time targets
of the issue: checked ≤ 1.5× unchecked), and the complex Mandelbrot example (a loop per pixel: the
loop polls the record of failed checks at every iteration). Each row is the median of the per-round
ratios checked / unchecked; the two variants alternate within every round.
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json")
    ns = parser.parse_args()
    rounds = 5 if ns.quick else 11
    rows, results = [], {}
    for name, kernel, n, args in cases(ns.quick):
        plain, checked = launcher(kernel, args, False), launcher(kernel, args, True)
        plain(n, args, threads=1), checked(n, args, threads=1)  # warm
        ratios, times = [], {"unchecked": [], "checked": []}
        for _ in range(rounds):
            t0, _ = timed(plain, n, args, threads=1)
            t1, _ = timed(checked, n, args, threads=1)
            times["unchecked"].append(t0), times["checked"].append(t1)
            ratios.append(t1 / t0)
        results[name] = {"unchecked_s": median(times["unchecked"]), "checked_s": median(times["checked"]),
                         "ratio": median(ratios)}
        rows.append([name, f"{median(times['unchecked']) * 1e3:.2f}", f"{median(times['checked']) * 1e3:.2f}",
                     f"{median(ratios):.2f}x"])
    print(table(["kernel (one thread)", "unchecked ms", "checked ms", "checked / unchecked"], rows,
                title="bounds checks: run time, side by side"))
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
