"""Random block kernels (support.blockgen) on the CPU against a reference that runs each block's work
items in lock-step: random block sizes (non-multiple launch sizes, partial warps), shared-memory
exchanges between barriers, barrier counts, shuffles and votes, local arrays across barriers, grid
barriers, barriers in loops and in funcs, warp operations in loops (every shuffle kind, ballots, votes,
syncwarp; loop-carried lanes and masks; uniform, warp-uniform and per-lane trip counts), 1-D and 2-D
blocks, 1 and 2 threads.

CI runs a fixed sample; `pytest tests/fuzz --soak N` runs N // 4 more (`python -m support.blockgen`
runs a soak on its own).
"""

from __future__ import annotations

import pytest

from support import blockgen

CI_SEED, CI_COUNT = 2027, 24
CI_WARP_SEED, CI_WARP_COUNT = 2028, 16


@pytest.mark.parametrize("case_seed, stream", blockgen.cases(CI_COUNT, CI_SEED))
def test_random_block_kernels(case_seed, stream, tmp_path):
    message = blockgen.check(case_seed, stream, tmp_path)
    if message:
        pytest.fail(message, pytrace=False)


# Warp operations in loops, where a shuffle read values the lanes before it had already updated on the CPU.
@pytest.mark.parametrize("case_seed, stream", blockgen.cases(CI_WARP_COUNT, CI_WARP_SEED))
def test_random_warp_loops(case_seed, stream, tmp_path):
    message = blockgen.check(case_seed, stream, tmp_path, blockgen.WARP_KINDS)
    if message:
        pytest.fail(message, pytrace=False)


def test_soak_random_block_kernels(request, tmp_path):
    count = request.config.getoption("--soak", default=None)
    if not count:
        pytest.skip("soak mode only (--soak N)")
    seed = request.config.getoption("--soak-seed", default=None) or 1
    for case_seed, stream in blockgen.cases(max(1, count // 4), seed):
        message = blockgen.check(case_seed, stream, tmp_path)
        if message:
            pytest.fail(message, pytrace=False)
