"""Random block kernels (support.blockgen) on the CPU against a reference that runs each block's work
items in lock-step: random block sizes (non-multiple launch sizes, partial warps), shared-memory
exchanges between barriers, barrier counts, shuffles and votes, local arrays across barriers, grid
barriers, barriers in loops and in funcs, warp operations in loops (every shuffle kind, ballots, votes,
syncwarp; loop-carried lanes and masks; uniform, warp-uniform and per-lane trip counts), 1-D and 2-D
blocks, 1 and 2 threads. The same programs run through OpenCL, with the device's sub-group size as the
warp; there a program with grid barriers must be their located refusal, and 2-D blocks whose rows are
not whole sub-groups leave warp operations unchecked (the device maps items to sub-groups its own way).

CI runs a fixed sample; `pytest tests/fuzz --soak N` runs N // 4 more (`python -m support.blockgen`
runs a soak on its own, `--device opencl` through OpenCL).
"""

from __future__ import annotations

import pytest

from support import blockgen

CI_SEED, CI_COUNT = 2027, 24
CI_WARP_SEED, CI_WARP_COUNT = 2028, 16


@pytest.mark.devices("cpu", "opencl")
@pytest.mark.parametrize("case_seed, stream", blockgen.cases(CI_COUNT, CI_SEED))
def test_random_block_kernels(case_seed, stream, tmp_path, gpuc_device):
    message = blockgen.check(case_seed, stream, tmp_path, device=gpuc_device)
    if message:
        pytest.fail(message, pytrace=False)


# Warp operations in loops, where a shuffle read values the lanes before it had already updated on the CPU.
@pytest.mark.devices("cpu", "opencl")
@pytest.mark.parametrize("case_seed, stream", blockgen.cases(CI_WARP_COUNT, CI_WARP_SEED))
def test_random_warp_loops(case_seed, stream, tmp_path, gpuc_device):
    message = blockgen.check(case_seed, stream, tmp_path, blockgen.WARP_KINDS, device=gpuc_device)
    if message:
        pytest.fail(message, pytrace=False)


@pytest.mark.devices("cpu", "opencl")
def test_soak_random_block_kernels(soak, tmp_path, gpuc_device):
    count, seed = soak
    for case_seed, stream in blockgen.cases(max(1, count // 4), seed):
        message = blockgen.check(case_seed, stream, tmp_path, device=gpuc_device)
        if message:
            pytest.fail(message, pytrace=False)
