"""The small dtypes: a 3x3 box blur of a uint8 RGB image (examples/blur.py) on one CPU thread, gpuc against Numba.

    .venv/bin/python benchmarks/bench_blur.py [--quick] [--reps N] [--json OUT]

A 1080 x 1920 x 3 uint8 image blurred by the gpuc kernel launched with threads=1, and by the same loop
body under `numba.njit` (serial loops over rows, columns and channels). The best of --reps runs after
a warm-up run (compile time excluded), as wall time and as the CPU time of the calling thread (both
run there: threads=1 and Numba's serial loops), which other processes on the machine disturb less.
The two alternate, round by round. Ratios, gpuc / Numba of the CPU times (target <= 1.0; above 1: gpuc
is slower): best against best, and the median of the rounds' ratios.
Without numba the Numba column is skipped. Both results are checked against the NumPy reference.
"""

from __future__ import annotations

import argparse

import numpy as np

import _common  # noqa: F401 - puts the repository on sys.path
from _common import against_numba, banner, machine_facts, paired_rounds, write_json

from examples.blur import box_blur, reference


def numba_blur():
    """The kernel's body in serial loops, @njit (Numba widens the uint8 sum to int64 by its own rules)."""
    import numba

    @numba.njit
    def blur(src, dst, gain):
        height, width = src.shape[0], src.shape[1]
        for y in range(height):
            for x in range(width):
                for c in range(3):
                    total = np.int32(0)
                    for dy in range(-1, 2):
                        row = min(max(y + dy, 0), height - 1)
                        for dx in range(-1, 2):
                            column = min(max(x + dx, 0), width - 1)
                            total += src[row, column, c]
                    dst[y, x, c] = min(max((total * gain + 4) // 9, 0), 255)
        return dst
    return blur


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 540 x 960 image, 15 rounds")
    parser.add_argument("--reps", type=int, default=31)
    parser.add_argument("--json", help="write the samples and the machine facts here")
    args = parser.parse_args()
    shape = (540, 960, 3) if args.quick else (1080, 1920, 3)
    reps = 15 if args.quick else args.reps
    facts = machine_facts()
    print(banner(facts))

    image = np.random.default_rng(0).integers(0, 256, size=shape, dtype=np.uint8)
    want = reference(image, 2)
    gpuc_out, numba_out = np.empty_like(image), np.empty_like(image)
    fns = [lambda: box_blur(image, 2, gpuc_out, threads=1)]
    try:
        blur = numba_blur()
        fns.append(lambda: blur(image, numba_out, np.int32(2)))
    except ImportError:
        pass
    cpu = paired_rounds(fns, reps, clock=1)
    if not np.array_equal(gpuc_out, want):
        raise SystemExit("the gpuc blur differs from NumPy's")
    if len(cpu) == 2 and not np.array_equal(numba_out, want):
        raise SystemExit("the Numba blur differs from NumPy's")
    results = {"shape": shape, "rounds": reps}
    print(against_numba("3x3 box blur " + "x".join(map(str, shape)) + f" uint8, {reps} rounds", cpu, results))
    if args.json:
        write_json(args.json, {"results": results, "machine": facts})


if __name__ == "__main__":
    main()
