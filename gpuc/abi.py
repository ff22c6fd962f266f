"""The kernel ABI, written once (docs/kernel-abi.md): what the frontend emits, what the context
plugin rewrites, and what every runtime passes.

This module sits just above the LLVM layer: the frontend, the targets, the plugins and both
runtimes import it, and it imports nothing of theirs.
"""

from __future__ import annotations

from .llvm import ArrayType, Function, Module, StructType

# -- the launch context: markers, parameters and the context struct ----------------------------

#: The markers `gpuc.index(d)` and `gpuc.ndrange(d)` lower to: `declare i64 @<marker>(i32 d)`.
INDEX_MARKER, NDRANGE_MARKER = "gpuc.ctx.index", "gpuc.ctx.ndrange"
CONTEXT_MARKERS = (INDEX_MARKER, NDRANGE_MARKER)
#: The CPU's trailing context parameter: `ptr %gpuc.ctx`, pointing to a %gpuc.Context.
CONTEXT_PARAM = "gpuc.ctx"
#: The GPUs' trailing launch-size parameters: `i64 %gpuc.n0, i64 %gpuc.n1, i64 %gpuc.n2`.
LAUNCH_SIZE_PARAMS = ("gpuc.n0", "gpuc.n1", "gpuc.n2")
CONTEXT_TYPE = "gpuc.Context"
#: The field of %gpuc.Context each marker reads: { [3 x i64] index, [3 x i64] ndrange }.
CONTEXT_FIELDS = {INDEX_MARKER: 0, NDRANGE_MARKER: 1}
#: Index spaces are smaller than this along every dimension, and in all (the launchers check it).
MAX_EXTENT = 1 << 62


def context_type(module: Module) -> StructType:
    """`%gpuc.Context = type { [3 x i64], [3 x i64] }` (index, ndrange) in `module`'s context."""
    existing = module.get_type(CONTEXT_TYPE)
    if existing is not None:
        return existing
    dims = ArrayType.get(module.context.i64, 3)
    return StructType.create(module.context, [dims, dims], name=CONTEXT_TYPE)


def has_context_param(fn: Function) -> bool:
    """Whether the CPU's context propagation gave `fn` the trailing context parameter."""
    args = fn.args
    return bool(args) and args[-1].name == CONTEXT_PARAM and str(args[-1].type) == "ptr"


__all__ = ["CONTEXT_FIELDS", "CONTEXT_MARKERS", "CONTEXT_PARAM", "CONTEXT_TYPE", "INDEX_MARKER",
           "LAUNCH_SIZE_PARAMS", "MAX_EXTENT", "NDRANGE_MARKER", "context_type", "has_context_param"]
