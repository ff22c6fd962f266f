"""Fixtures for the compiler acceptance tests: jobs from IR, and a plugin registry restored after each test."""

from __future__ import annotations

import pytest

import gpuc

from support.compiler_ir import SEED_IR


@pytest.fixture(autouse=True)
def _isolate_plugins(isolated_plugins):
    """Every compiler test runs with a registry restored afterwards (see tests/conftest.py)."""
    yield


@pytest.fixture
def make_job():
    """`make_job(ir, entry="kernel", target=NativeTarget(), **config)` -> CompilerJob."""
    def make(ir: str | bytes = SEED_IR, entry: str = "kernel", target=None, filename: str = "<ir>", **config):
        source = gpuc.IRSource(ir, entry=entry, filename=filename)
        return gpuc.CompilerJob(source, gpuc.CompilerConfig(target or gpuc.NativeTarget(), **config))
    return make
