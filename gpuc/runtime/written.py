"""Which pointer parameters of a compiled kernel it may write through, so launchers can refuse
read-only arrays there (and accept them where the kernel only reads)."""

from __future__ import annotations

from ..llvm import Function, Module, run_passes

_READ_ONLY = ("readonly", "readnone")


def written_params(module: Module, kernel: Function) -> frozenset[int]:
    """The indices of `kernel`'s pointer parameters that it may write through.

    LLVM's function-attrs pass infers `readonly`/`readnone` for a pointer parameter only when no
    store, atomic, call that may write, or escape of the pointer (stored, cast to an integer,
    passed to an unknown function) can reach it: a parameter without them may be written. The
    kernel's own attributes are inferred afresh, so none left stale by a plugin is trusted; its
    callees' attributes are their compiles' contract, as for every LLVM optimization. Where
    inference cannot see through the code (unoptimized IR keeps arrays in stack slots), the
    answer is "may write": a refusal, never a missed write.
    """
    pointers = [i for i, ty in enumerate(kernel.function_type.params) if str(ty).startswith("ptr")]
    for i in pointers:
        for name in _READ_ONLY:
            kernel.param_attributes(i).remove(name)
    run_passes(module, "function-attrs")
    return frozenset(i for i in pointers if not any(name in kernel.param_attributes(i) for name in _READ_ONLY))
