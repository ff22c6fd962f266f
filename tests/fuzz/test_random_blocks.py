"""Random block kernels (support.blockgen) on the CPU against a reference that runs each block's work
items in lock-step: random block sizes (non-multiple launch sizes, partial warps), shared-memory
exchanges between barriers, barrier counts, shuffles, barriers in loops and in funcs, 1 and 2 threads.

CI runs a fixed sample; `pytest tests/fuzz --soak N` runs N // 4 more.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from support import blockgen

CI_SEED, CI_COUNT = 2027, 24
BLOCKS = (1, 3, 8, 32, 40, 64)


def _cases(count: int, seed: int):
    rng = random.Random(seed)
    return [(seed * 100003 + k, rng.getrandbits(32)) for k in range(count)]


def _check(case_seed: int, stream: int, tmp_path) -> None:
    rng = random.Random(stream)
    p = blockgen.program(rng, case_seed)
    kernel = blockgen.load(p, tmp_path)
    for _ in range(2):
        block = rng.choice(BLOCKS)
        n = rng.randint(1, 3 * block + 5)
        a = np.array([rng.randint(-1000, 1000) for _ in range(n)], dtype=np.int64)
        want = p.reference(a, n, block)
        for threads in (1, 2):
            out = np.zeros(n, np.int64)
            kernel[n](a, out, block=block, threads=threads)
            if not np.array_equal(out, want):
                bad = int(np.argmax(out != want))
                raise AssertionError(f"block={block} n={n} threads={threads}: out[{bad}] = {out[bad]}, the lock-step "
                                     f"reference says {want[bad]}\n--- program (seed {case_seed}) ---\n{p.source}")


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
