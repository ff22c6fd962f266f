"""Vectorization across work items on the CPU (gpuc/plugins/vectorize): one thread, side by side with
gpuc without it and with numba.njit.

    .venv/bin/python benchmarks/bench_vectorize.py [--quick] [--reps N] [--json OUT]

Kernels, each launched with threads=1 by gpuc as it compiles by default (vectorized), by the same kernel
compiled with CompilerConfig(vectorize=False) (item by item, as before), and by the same loops under
`numba.njit` (serial), alternating for --reps rounds after a warm-up (compile time excluded), timed as the
calling thread's CPU time; the ratios are best against best:
- the complex Mandelbrot example (examples/mandelbrot.py, Numba's `mandel`, 1000 x 1500, 20 and 256
  iterations): target vectorized <= 0.25x Numba;
- a divergent per-item Newton iteration in float64 (cube roots, a `while` with a per-item exit, 1M
  items): target <= 0.3x Numba;
- saxpy (10M float32), the 2-D 5-point stencil (2048^2 float64) and the uint8 box blur (examples/blur.py,
  1080 x 1920 x 3): not slower than item by item (their bodies have no loop of their own, so the plugin
  leaves them to LLVM's loop vectorizer; the column shows they cost nothing).
Every output is checked equal between the three. JAX is not an anchor here (not installed in the venv).
"""

from __future__ import annotations

import argparse

import numpy as np

import _common  # noqa: F401 - puts the repository on sys.path
from _common import banner, machine_facts, paired_rounds, table, write_json

import gpuc
from examples.blur import blur as blur_kernel
from examples.mandelbrot import fractal, mandel
from bench_blur import numba_blur
from bench_kernels import saxpy, stencil


@gpuc.kernel
def newton(a, out, tol):
    i = gpuc.index()
    c = a[i]
    x = c if c > 1.0 else 1.0
    k = 0
    while abs(x * x * x - c) > tol * c and k < 100:
        x = x - (x * x * x - c) / (3.0 * x * x)
        k += 1
    out[i] = x


def item_by_item(kernel):
    """`kernel` as @gpuc.kernel(vectorize=False) makes it."""
    return type(kernel)(kernel.py_func, {**kernel.options, "vectorize": False})


def numba_loops():
    import numba

    mandel_nb = numba.njit(mandel.py_func)

    @numba.njit
    def fractal_nb(min_x, min_y, px, py, image, iters):
        height, width = image.shape
        for y in range(height):
            imag = min_y + y * py
            for x in range(width):
                image[y, x] = mandel_nb(min_x + x * px, imag, iters)

    @numba.njit
    def newton_nb(a, out, tol):
        for i in range(a.shape[0]):
            c = a[i]
            x = c if c > 1.0 else 1.0
            k = 0
            while abs(x * x * x - c) > tol * c and k < 100:
                x = x - (x * x * x - c) / (3.0 * x * x)
                k += 1
            out[i] = x

    @numba.njit
    def saxpy_nb(a, x, y, out):
        for i in range(x.shape[0]):
            out[i] = a * x[i] + y[i]

    @numba.njit
    def stencil_nb(u, v):
        n, m = u.shape
        for i in range(1, n - 1):
            for j in range(1, m - 1):
                v[i, j] = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]) - u[i, j]

    blur_nb = numba_blur()

    return {"mandelbrot": fractal_nb, "newton": newton_nb, "saxpy": saxpy_nb, "stencil": stencil_nb, "blur": blur_nb}


def cases(quick: bool):
    """(name, kernel, grid, make_args, numba name, numba args from the gpuc args) per benchmark."""
    rng = np.random.default_rng(0)
    shape = (500, 750) if quick else (1000, 1500)
    h, w = shape
    px, py = 3.0 / w, 2.0 / h
    n = 250_000 if quick else 1_000_000
    roots = rng.uniform(0.0, 1000.0, n)
    side = 1024 if quick else 2048
    u = rng.standard_normal((side, side))
    big = 2_500_000 if quick else 10_000_000
    x32, y32 = rng.standard_normal(big).astype(np.float32), rng.standard_normal(big).astype(np.float32)
    image = rng.integers(0, 256, size=(540, 960, 3) if quick else (1080, 1920, 3), dtype=np.uint8)
    out = []
    for iters in (20, 256):
        out.append((f"Mandelbrot {h}x{w}, {iters} iterations", fractal, (w, h),
                    lambda iters=iters: (-2.0, -1.0, px, py, np.zeros(shape, np.uint8), iters), "mandelbrot"))
    out.append((f"Newton cube roots, {n} float64", newton, n, lambda: (roots, np.zeros(n), 1e-12), "newton"))
    out.append((f"saxpy {big} float32", saxpy, big, lambda: (np.float32(2.5), x32, y32, np.zeros(big, np.float32)),
                "saxpy"))
    out.append((f"stencil {side}^2 float64", stencil, (side - 2, side - 2), lambda: (u, np.zeros_like(u)), "stencil"))
    out.append((f"blur {image.shape[0]}x{image.shape[1]}x3 uint8", blur_kernel, (image.shape[1], image.shape[0]),
                lambda: (image, np.zeros_like(image), np.int32(2)), "blur"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller inputs, 5 rounds")
    parser.add_argument("--reps", type=int, default=11)
    parser.add_argument("--json", help="write the samples and the machine facts here")
    args = parser.parse_args()
    reps = 5 if args.quick else args.reps
    facts = machine_facts()
    print(banner(facts))
    try:
        anchors = numba_loops()
    except ImportError:
        anchors = {}
    rows, results = [], {}
    for title, kernel, grid, make, nb in cases(args.quick):
        scalar = item_by_item(kernel)
        a_vec, a_scalar, a_nb = make(), make(), make()
        fns = [lambda: kernel.launch(grid, *a_vec, threads=1), lambda: scalar.launch(grid, *a_scalar, threads=1)]
        if nb in anchors:
            fns.append(lambda: anchors[nb](*a_nb))
        cpu = paired_rounds(fns, reps, clock=1)
        outs = [[a for a in group if isinstance(a, np.ndarray)][-1] for group in (a_vec, a_scalar, a_nb)[:len(fns)]]
        if not all(np.array_equal(outs[0], o) for o in outs[1:]):
            raise SystemExit(f"{title}: the outputs differ")
        line = [l.strip() for l in str(kernel.inspect(*make()).trace).splitlines() if "vectorized at" in l]
        best = [min(t) for t in cpu]
        row = [title, f"{best[0] * 1e3:.2f}", f"{best[0] / best[1]:.2f}x"]
        row.append(f"{best[0] / best[2]:.3f}x" if len(best) > 2 else "-")
        row.append(f"{best[1] / best[2]:.2f}x" if len(best) > 2 else "-")
        row.append("yes" if line and line[0].startswith("vectorized") else "no (LLVM's loop vectorizer)")
        rows.append(row)
        results[title] = {"cpu_s": cpu, "vectorized": line[0] if line else None}
    print(table(["kernel (threads=1)", "vectorized ms", "/ item by item", "/ numba.njit", "item by item / numba",
                 "plugin vectorized"], rows))
    if args.json:
        write_json(args.json, {"results": results, "machine": facts})


if __name__ == "__main__":
    main()
