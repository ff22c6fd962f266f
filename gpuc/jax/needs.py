"""What a kernel's compiled code reads: the outputs it may read, the inputs whose values its derivative kernels need.

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

import math

import jax.numpy as jnp
import numpy as np

from ..compiler import compile_module
from ..frontend.constructs.reverse import PARITY, SERIAL
from ..frontend.core.types import ArrayType
from ..llvm.instructions import (AggregateInst, BinaryOperator, CallInst, CastInst, CompareInst,
                                 FreezeInst, GetElementPtrInst, LoadInst, PHINode, SelectInst, ShuffleVectorInst,
                                 StoreInst, UnaryOperator)
from ..runtime import adjoint as _adjoint
from ..runtime import cpu, dispatch
from ..runtime import tangent as _tangent

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


# -- the questions gpuc.jax asks of compiled kernels ------------------------------------------------------

def derivative_needs(kernel, args, n, dims, dtypes) -> tuple:
    """(the positions of the float input arrays whose loads reach only the primal outputs in both derivative
    kernels of `kernel` compiled for `args`, each float array followed by its shadow, and outputs of `dims`,
    `dtypes`; the outputs the adjoint never reads, its parameter `writeonly`)."""
    probes = []
    for a in args:
        probes.append(probe(a.shape, a.dtype))
        if shadowed(a.shape, a.dtype):
            probes.append(np.empty(a.shape, a.dtype))
    for d, t in zip(dims, dtypes):
        probes.append(np.empty(d, t))
        if shadowed(d, t):
            probes.append(np.empty(d, t))
    types = tuple(dispatch.typeof(p, k) for k, p in enumerate(probes))
    adjoint, tangent = _adjoint.adjoint(kernel), _tangent.tangent(kernel)
    # the adjoint's variant a launch runs (adjoint.cpu_launcher): work items in order, or in two phases
    space = cpu.index_space(n)
    serial = cpu.launch_threads(math.prod(space)) == 1
    derived = (adjoint._kernel(adjoint._layout(types), SERIAL) if serial else
               adjoint._kernel(adjoint._layout(types), PARITY, _adjoint.spans_of(space)),
               tangent._kernel(tangent._layout(types)))
    inputs = [k for k, a in enumerate(args) if shadowed(a.shape, a.dtype)]
    position, slot = {}, 0  # each input's position among the derivative kernels' arguments
    for k, a in enumerate(args):
        position[k] = slot
        slot += 2 if shadowed(a.shape, a.dtype) else 1
    outputs = [slot + i for i in _primal_outputs(dims, dtypes)]
    free, scratch = set(inputs), ()
    for generated in derived:
        with compile_module(dispatch.launch_job(generated, types, "cpu")) as built:
            fn = built.module.functions[built.entry]
            flat = _flat_positions(types)
            data = [fn.args[i] for i in flat]
            free -= {k for k in inputs if values_needed(fn, data[position[k]], [data[p] for p in outputs])}
            if generated is derived[0]:
                scratch = tuple(j for j, p in enumerate(outputs) if "writeonly" in fn.param_attributes(flat[p]))
    return tuple(sorted(free)), scratch


def _primal_outputs(dims, dtypes) -> list:
    """Where the primal outputs are among the outputs and their shadows (each float output followed by its own)."""
    found, index = [], 0
    for d, t in zip(dims, dtypes):
        found.append(index)
        index += 2 if shadowed(d, t) else 1
    return found


def may_read(kernel, probes, positions) -> tuple:
    """Which of the array arguments at `positions` the kernel compiled for `probes` may read: those whose
    data pointer LLVM's function-attrs does not mark `writeonly` in the optimized kernel."""
    types = tuple(dispatch.typeof(p, k) for k, p in enumerate(probes))
    with compile_module(dispatch.launch_job(kernel, types, "cpu")) as built:
        fn = built.module.functions[built.entry]
        flat = _flat_positions(types)
        return tuple(k for k in positions if "writeonly" not in fn.param_attributes(flat[k]))


def _flat_positions(types) -> list:
    """Where each argument of these types begins among the kernel function's flattened parameters (gpuc/abi.py:
    an array is its data pointer, then its shape and strides)."""
    flat, index = [], 0
    for t in types:
        flat.append(index)
        index += 1 + 2 * t.ndim if isinstance(t, ArrayType) else 1
    return flat


def shadowed(shape, dtype) -> bool:
    """Whether gpuc.adjoint gives an argument of this shape and dtype a shadow: float arrays do."""
    return len(shape) > 0 and jnp.issubdtype(dtype, jnp.floating)


def probe(shape, dtype):
    """A NumPy value of `shape` and `dtype` standing for a JAX operand when a launch is typed and marshalled."""
    dtype = np.dtype(dtype)
    return dtype.type(0) if shape == () else np.empty(shape, dtype)


__all__ = ["derivative_needs", "may_read", "probe", "shadowed", "values_needed"]
