"""Random block kernels (support.blockgen) on the CPU against a reference that runs each block's work
items in lock-step: random block sizes (non-multiple launch sizes, partial warps), shared-memory
exchanges between barriers, barrier counts, shuffles and votes, local arrays across barriers, grid
barriers, barriers in loops and in funcs, 1-D and 2-D blocks, 1 and 2 threads.

CI runs a fixed sample; `pytest tests/fuzz --soak N` runs N // 4 more.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from support import blockgen

CI_SEED, CI_COUNT = 2027, 24
BLOCKS = ((1, 1), (3, 1), (8, 1), (32, 1), (40, 1), (64, 1), (4, 4), (8, 5), (2, 16), (1, 7))


def _cases(count: int, seed: int):
    rng = random.Random(seed)
    return [(seed * 100003 + k, rng.getrandbits(32)) for k in range(count)]


def _check(case_seed: int, stream: int, tmp_path) -> None:
    rng = random.Random(stream)
    p = blockgen.program(rng, case_seed)
    kernel = blockgen.load(p, tmp_path)
    for _ in range(2):
        block = rng.choice(BLOCKS)
        nx, ny = rng.randint(1, 2 * block[0] + 5), rng.randint(1, 2 * block[1] + 2)
        a = np.array([[rng.randint(-1000, 1000) for _ in range(nx)] for _ in range(ny)], dtype=np.int64)
        want = p.reference(a, block)
        grid = -(-nx // block[0]) * -(-ny // block[1]) * block[0] * block[1]
        for threads in (1, 2):
            out = np.zeros((ny, nx), np.int64)
            kernel[nx, ny](a, out, np.zeros(grid, np.int64), block=block, threads=threads)
            if not np.array_equal(out, want):
                bad = np.argwhere(out != want)[0]
                raise AssertionError(f"block={block} n={(nx, ny)} threads={threads}: out[{tuple(bad)}] = "
                                     f"{out[tuple(bad)]}, the lock-step reference says {want[tuple(bad)]}"
                                     f"\n--- program (seed {case_seed}) ---\n{p.source}")


@pytest.mark.parametrize("case_seed, stream", _cases(CI_COUNT, CI_SEED))
def test_random_block_kernels(case_seed, stream, tmp_path):
    _check(case_seed, stream, tmp_path)


def test_soak_random_block_kernels(request, tmp_path):
    count = request.config.getoption("--soak", default=None)
    if not count:
        pytest.skip("soak mode only (--soak N)")
    seed = request.config.getoption("--soak-seed", default=None) or 1
    for case_seed, stream in _cases(max(1, count // 4), seed):
        _check(case_seed, stream, tmp_path)
