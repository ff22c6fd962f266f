"""Options for the random-program tests: `pytest tests/fuzz --soak N [--soak-seed S]` runs N programs
(also GPUC_SOAK=N, GPUC_SOAK_SEED=S in the environment, which works from any directory)."""

from __future__ import annotations


def pytest_addoption(parser):
    parser.addoption("--soak", type=int, default=None, help="run N random programs through gpuc (a soak)")
    parser.addoption("--soak-seed", type=int, default=None, help="the stream of random programs to soak")
