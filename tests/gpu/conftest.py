"""The GPU tests: skipped, with the reason, unless gpuc can use a CUDA device."""

from __future__ import annotations

from pathlib import Path

import pytest

import gpuc.cuda

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
