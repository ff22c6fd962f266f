"""Fixtures for the gpuc.llvm tests: a context, a module and a builder per test, the host target."""

from __future__ import annotations

import pytest

import gpuc.llvm as llvm

from support.llvm_testing import Jitted


@pytest.fixture
def ctx():
    with llvm.Context() as context:
        yield context


@pytest.fixture
def module(ctx):
    with llvm.Module("test", ctx) as m:
        yield m


@pytest.fixture
def builder(ctx):
    with llvm.Builder(ctx) as b:
        yield b


@pytest.fixture
def jit_module():
    """Call with a verified module (which owns its context); the JIT is closed after the test."""
    made: list[Jitted] = []

    def make(module: llvm.Module) -> Jitted:
        made.append(Jitted(module))
        return made[-1]

    yield make
    for j in made:
        j.close()


@pytest.fixture(scope="session")
def host_machine():
    llvm.initialize("X86")
    with llvm.Target.from_triple(llvm.host_triple()).machine() as tm:
        yield tm
