"""Complex numbers: Numba's Mandelbrot example (examples/mandelbrot.py) on one CPU thread, gpuc against Numba.

    .venv/bin/python benchmarks/bench_mandelbrot.py [--quick] [--reps N] [--json OUT]

The image of Numba's example (1000 x 1500 pixels, 20 iterations, the plane [-2, 1] x [-1, 1]) filled by
the gpuc kernel launched with threads=1, and by the same `mandel` and `create_fractal` under
`numba.njit` (serial loops), alternating for --reps rounds after a warm-up run (compile time excluded),
timed as the calling thread's CPU time. Ratios, gpuc / Numba (target <= 1.0; above 1: gpuc is slower):
best against best, and the median of the rounds' ratios. Without numba the Numba column is
skipped. Both images are checked equal.
"""

from __future__ import annotations

import argparse

import numpy as np

import _common  # noqa: F401 - puts the repository on sys.path
from _common import against_numba, banner, machine_facts, paired_rounds, write_json

from examples.mandelbrot import create_fractal, mandel

ARGS = (-2.0, 1.0, -1.0, 1.0)


def numba_fractal():
    """Numba's example: the same `mandel` source and a serial create_fractal, both @njit."""
    import numba

    jitted = numba.njit(mandel.py_func)

    @numba.njit
    def create(min_x, max_x, min_y, max_y, image, iters):
        height, width = image.shape
        pixel_size_x = (max_x - min_x) / width
        pixel_size_y = (max_y - min_y) / height
        for x in range(width):
            real = min_x + x * pixel_size_x
            for y in range(height):
                imag = min_y + y * pixel_size_y
                image[y, x] = jitted(real, imag, iters)
        return image
    return create


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 500 x 750 image, 15 rounds")
    parser.add_argument("--reps", type=int, default=31)
    parser.add_argument("--json", help="write the samples and the machine facts here")
    args = parser.parse_args()
    shape = (500, 750) if args.quick else (1000, 1500)
    reps = 15 if args.quick else args.reps
    iters = 20
    facts = machine_facts()
    print(banner(facts))

    gpuc_image, numba_image = np.zeros(shape, dtype=np.uint8), np.zeros(shape, dtype=np.uint8)
    fns = [lambda: create_fractal(*ARGS, gpuc_image, iters, threads=1)]
    try:
        create = numba_fractal()
        fns.append(lambda: create(*ARGS, numba_image, iters))
    except ImportError:
        pass
    cpu = paired_rounds(fns, reps, clock=1)
    if len(cpu) == 2 and not np.array_equal(gpuc_image, numba_image):
        raise SystemExit("the gpuc and Numba images differ")
    results = {"shape": shape, "iters": iters, "rounds": reps}
    print(against_numba("Mandelbrot " + "x".join(map(str, shape)) + f", {iters} iterations, {reps} rounds", cpu,
                        results))
    if args.json:
        write_json(args.json, {"results": results, "machine": facts})


if __name__ == "__main__":
    main()
