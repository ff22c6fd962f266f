"""Which inputs' values a derivative kernel needs: those whose loads reach its derivatives, not only the outputs it rewrites.

An adjoint (or tangent) kernel reruns its primal, so it reads every input; but for a kernel linear in an
input (a stencil, a saxpy's `x`), what it reads there goes only into the primal outputs it writes again,
which JAX throws away. Such an input need not be kept for the backward pass (JAX saves no residual for it,
and the launch may read any buffer of its shape in its place). The question is answered on the optimized
kernel function, one work item's code, by following the values loaded through the input's data pointer:
they may flow through arithmetic, comparisons, selects and phis, and into stores to the primal outputs'
memory; anything else (a branch on them, a store elsewhere, a call, an address computed from them) and the
input is needed. Whatever the analysis does not recognise counts as needed.
"""

from __future__ import annotations

from ..llvm.instructions import (AggregateInst, BinaryOperator, CallInst, CastInst, CompareInst,
                                 FreezeInst, GetElementPtrInst, LoadInst, PHINode, SelectInst, ShuffleVectorInst,
                                 StoreInst, UnaryOperator)

#: Instructions whose result depends only on their operands' values.
_ARITHMETIC = (BinaryOperator, UnaryOperator, CastInst, CompareInst, SelectInst, PHINode, FreezeInst,
               AggregateInst, ShuffleVectorInst)
#: Intrinsics that touch memory or say something about control: a value reaching them is needed.
_MEMORY_INTRINSICS = ("llvm.mem", "llvm.masked", "llvm.lifetime", "llvm.prefetch", "llvm.vp", "llvm.experimental")


def values_needed(fn, source, discarded) -> bool:
    """Whether values loaded through `source` (an array's data-pointer argument of `fn`) may reach anything
    but stores into the memory of `discarded` (the data-pointer arguments of the outputs thrown away)."""
    sources, escaped = _derived([source])
    if escaped:
        return True
    outputs, outputs_escaped = _derived(discarded)
    loads = [u for p in sources for u in _users(p) if isinstance(u, LoadInst) and u.pointer == p]
    tainted: set = set()
    outputs_read = False
    while loads:
        result = _follow(loads, tainted, outputs)
        if result is None:
            return True
        if not result or outputs_read:
            return False
        # A value of the input was stored into an output the kernel may read back: what it reads there is
        # the input's too.
        if outputs_escaped:
            return True
        outputs_read = True
        loads = [u for p in outputs for u in _users(p) if isinstance(u, LoadInst) and u.pointer == p]
    return False


def _follow(work: list, tainted: set, outputs: set) -> bool | None:
    """Taint `work` and what its values flow into; None where they reach something other than arithmetic
    and stores into `outputs`, else whether one was stored into an output."""
    stored = False
    while work:
        value = work.pop()
        if value in tainted:
            continue
        tainted.add(value)
        for user in _users(value):
            if isinstance(user, StoreInst):
                if user.pointer == value or user.value != value or user.pointer not in outputs:
                    return None
                stored = True
            elif isinstance(user, (LoadInst, GetElementPtrInst) + _ARITHMETIC):
                work.append(user)  # a load through a tainted address reads a tainted value
            elif isinstance(user, CallInst):
                name = user.intrinsic_name
                if name == "llvm.assume":
                    continue
                if not name or name.startswith(_MEMORY_INTRINSICS):
                    return None
                work.append(user)
            else:  # a branch, a switch, a return, an atomic, anything not recognised
                return None
    return stored


def _derived(arguments) -> tuple[set, bool]:
    """The pointers computed from `arguments` by address arithmetic (GEPs off them, selects and phis of
    them), and whether one of them is used otherwise than as an address (passed on, compared, stored)."""
    found, work, escaped = set(), list(arguments), False
    while work:
        pointer = work.pop()
        if pointer in found:
            continue
        found.add(pointer)
        for user in _users(pointer):
            if isinstance(user, GetElementPtrInst) and user.pointer == pointer:
                work.append(user)
            elif isinstance(user, (SelectInst, PHINode)):
                work.append(user)
            elif isinstance(user, LoadInst) or isinstance(user, StoreInst) and user.value != pointer:
                continue
            elif isinstance(user, CallInst) and user.intrinsic_name == "llvm.assume":
                continue
            else:
                escaped = True
    return found, escaped


def _users(value) -> list:
    return [use.user for use in value.uses]


__all__ = ["values_needed"]
