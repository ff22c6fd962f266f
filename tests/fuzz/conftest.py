"""Options for the random-program tests: `pytest tests/fuzz --soak N [--soak-seed S]` runs N programs
(also GPUC_SOAK=N, GPUC_SOAK_SEED=S in the environment, which works from any directory)."""

from __future__ import annotations

import os
import random

import pytest


def pytest_addoption(parser):
    parser.addoption("--soak", type=int, default=None, help="run N random programs through gpuc (a soak)")
    parser.addoption("--soak-seed", type=int, default=None, help="the stream of random programs to soak")


@pytest.fixture
def soak(request):
    """(count, seed) of the soak asked for (printing the seed), or a skip when none was."""
    count = request.config.getoption("--soak", default=None) or int(os.environ.get("GPUC_SOAK", "0"))
    if not count:
        pytest.skip("a soak runs with --soak N or GPUC_SOAK=N")
    seed = (request.config.getoption("--soak-seed", default=None) or int(os.environ.get("GPUC_SOAK_SEED", "0"))
            or random.randrange(1, 1 << 30))
    print(f"soak seed {seed}")
    return count, seed
