"""Fixtures for the frontend tests: a plugin registry restored after each test (the rest is in tests/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _isolate_plugins(isolated_plugins):
    """Every frontend test runs with a registry restored afterwards."""
    yield
