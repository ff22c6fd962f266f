"""Running textual new-pass-manager pipelines (`LLVMRunPasses`)."""

from __future__ import annotations

from . import capi
from .capi import address_of, lib
from .errors import LLVMError
from .module import Module


def run_passes(module: Module, pipeline: str, target_machine=None, *, verify: bool = True,
               verify_each: bool = False, debug_logging: bool = False) -> None:
    """Run a pipeline string such as "default<O2>" or "function(sroa,instcombine)" on `module`.

    A malformed pipeline raises LLVMError with LLVM's message; the module is then unchanged.
    The module is verified first (passes may crash the process on invalid IR); pass
    `verify=False` only when it was just verified.

    Views of functions and globals the passes delete are dead afterwards; views of instructions
    and blocks may dangle after any pass that changed their function (take them anew).
    """
    if verify:
        module.verify()
    before = _global_addresses(module)
    options = lib.LLVMCreatePassBuilderOptions()
    try:
        lib.LLVMPassBuilderOptionsSetVerifyEach(options, int(verify_each))
        lib.LLVMPassBuilderOptionsSetDebugLogging(options, int(debug_logging))
        err = lib.LLVMRunPasses(module, pipeline.encode(), target_machine, options)
    finally:
        lib.LLVMDisposePassBuilderOptions(options)
    deleted = before - _global_addresses(module)
    if deleted:
        module._scope.erase(deleted)
    message = capi.consume_error(err)
    if message is not None:
        raise LLVMError(f"pipeline {pipeline!r}: {message}")


def _global_addresses(module: Module) -> set[int]:
    out = set()
    for first, nxt in ((lib.LLVMGetFirstFunction, lib.LLVMGetNextFunction),
                       (lib.LLVMGetFirstGlobal, lib.LLVMGetNextGlobal)):
        ref = first(module)
        while ref:
            out.add(address_of(ref))
            ref = nxt(ref)
    return out
