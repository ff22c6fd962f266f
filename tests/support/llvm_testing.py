"""Helpers for the gpuc.llvm tests: FileCheck, small IR builders, and running code in the JIT."""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
import tempfile

from filecheck.matcher import Matcher
from filecheck.options import Options

import gpuc.llvm as llvm


def filecheck(text: str, checks: str) -> None:
    """Assert that `text` matches the FileCheck directives in `checks` (CHECK, CHECK-NEXT, ...)."""
    with tempfile.TemporaryDirectory() as tmp:
        check_file, input_file = os.path.join(tmp, "checks"), os.path.join(tmp, "input")
        with open(check_file, "w") as f:
            f.write(checks)
        with open(input_file, "w") as f:
            f.write(str(text))
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            status = Matcher.from_opts(Options(match_filename=check_file, input_file=input_file)).run()
    if status != 0:
        raise AssertionError(f"FileCheck failed:\n{err.getvalue()}\n--- input ---\n{text}")


class Jitted:
    """A module compiled by a private LLJIT; `get(name, restype, *argtypes)` gives a ctypes callable."""

    def __init__(self, module: llvm.Module) -> None:
        module.verify()
        self.jit = llvm.LLJIT()
        self.jit.add_module(module)

    def get(self, name: str, restype, *argtypes):
        return ctypes.CFUNCTYPE(restype, *argtypes)(self.jit.lookup(name))

    def close(self) -> None:
        self.jit.close()


def define(module: llvm.Module, name: str, ret, params=(), block: str = "entry"):
    """Add a function to `module` and return it with its (named) entry block."""
    fn = module.add_function(name, llvm.FunctionType.get(ret, list(params)))
    return fn, fn.append_block(block)


def const(ty, value):
    """An integer or floating-point constant of type `ty`."""
    if isinstance(ty, llvm.IntegerType):
        return llvm.ConstantInt.get(ty, value)
    return llvm.ConstantFP.get(ty, value)
