"""Running textual new-pass-manager pipelines (`LLVMRunPasses`)."""

from __future__ import annotations

from . import capi
from .capi import lib
from .module import LLVMError, Module


def run_passes(module: Module, pipeline: str, target_machine=None, *, verify: bool = True,
               verify_each: bool = False, debug_logging: bool = False) -> None:
    """Run a pipeline string such as "default<O2>" or "function(sroa,instcombine)" on `module`.

    A malformed pipeline raises LLVMError with LLVM's message; the module is then unchanged.
    The module is verified first (passes may crash the process on invalid IR); pass
    `verify=False` only when it was just verified.
    """
    if verify:
        module.verify()
    options = lib.LLVMCreatePassBuilderOptions()
    try:
        lib.LLVMPassBuilderOptionsSetVerifyEach(options, int(verify_each))
        lib.LLVMPassBuilderOptionsSetDebugLogging(options, int(debug_logging))
        err = lib.LLVMRunPasses(module, pipeline.encode(), target_machine, options)
    finally:
        lib.LLVMDisposePassBuilderOptions(options)
    message = capi.consume_error(err)
    if message is not None:
        raise LLVMError(f"pipeline {pipeline!r}: {message}")
