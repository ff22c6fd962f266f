"""The GPU tests: skipped, with the reason, unless gpuc can use a CUDA device."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # for cuda_kernels, whatever pytest's import mode

import gpuc.cuda  # noqa: E402

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    # pytest hands every conftest all collected items: skip only this directory's
    if gpuc.cuda.available():
        return
    skip = pytest.mark.skip(reason=gpuc.cuda.unavailable_reason())
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def cap() -> str:
    """The device's compute capability, as PTXTarget takes it."""
    return gpuc.cuda.device_info().cap
