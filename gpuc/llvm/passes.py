"""Running textual new-pass-manager pipelines (`LLVMRunPasses`)."""

from __future__ import annotations

import ctypes
import threading

from . import capi
from .capi import address_of, lib
from .errors import LLVMError
from .module import Module


#: LLVM's process-wide options, set once before the first pipeline runs. `-force-ordered-reductions`:
#: the loop vectorizer vectorizes a loop that adds into a float accumulator with the adds kept in order
#: (`llvm.vector.reduce.fadd` without `reassoc`), which is exact; without it such loops stay scalar.
#: No per-module or per-loop form of it exists. gpuc/targets/ordered_sums.py makes several such sums
#: in one loop cheap on the CPU.
OPTIONS = ("-force-ordered-reductions",)
_options_lock = threading.Lock()
_options_set = False


def set_options() -> None:
    """Give LLVM the OPTIONS, once per process (LLVM's C API reports no error: an option it does not
    know is ignored)."""
    global _options_set
    if _options_set:
        return
    with _options_lock:
        if not _options_set:
            args = [b"gpuc", *(option.encode() for option in OPTIONS)]
            argv = (ctypes.c_char_p * len(args))(*args)
            lib.LLVMParseCommandLineOptions(len(args), ctypes.cast(argv, ctypes.POINTER(ctypes.c_void_p)), None)
            _options_set = True


def run_passes(module: Module, pipeline: str, target_machine=None, *, verify: bool = True,
               verify_each: bool = False, debug_logging: bool = False) -> None:
    """Run a pipeline string such as "default<O2>" or "function(sroa,instcombine)" on `module`.

    A malformed pipeline raises LLVMError with LLVM's message; the module is then unchanged.
    The module is verified first (passes may crash the process on invalid IR); pass
    `verify=False` only when it was just verified.

    Views of functions and globals the passes delete are dead afterwards; views of instructions
    and blocks may dangle after any pass that changed their function (take them anew).
    """
    set_options()
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
