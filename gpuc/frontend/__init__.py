"""The Python frontend: @gpuc.func / @gpuc.kernel functions, typed per signature and lowered to LLVM IR."""

from .autodiff import derivative, jvp
from .reverse import grad, value_and_grad, vjp
from .atomics import (atomic_add, atomic_and, atomic_cas, atomic_dec, atomic_exch, atomic_inc, atomic_max, atomic_min,
                      atomic_or, atomic_sub, atomic_xor)
from .bitops import clz, ffs, popc
from .blocks import (ballot, barrier, barrier_all, barrier_any, barrier_count, block_dim, block_index, fence,
                     fence_block, grid_barrier, grid_dim, lane_index, local, shared, shfl_down, shfl_idx, shfl_up,
                     shfl_xor, syncwarp, thread_index, vote_all, vote_any, warp_size)
from .intrinsics import Marker, deferred, fma, index, marker, ndrange
from .source import Func, FunctionSource, GpucFunction, Kernel, func, kernel
from .types import (SCALARS, Array, ArrayType, FunctionPointerType, GType, ScalarType, TupleType, as_type, boolean, float32, float64,
                    int32, int64, promote, uint32, uint64)

from .types import ComplexType, complex64, complex128  # complex numbers: gpuc/frontend/complex.py
from .types import float16, int8, int16, uint8, uint16  # the small dtypes: gpuc/frontend/small_dtypes.py

bool_ = boolean

__all__ = [
    "Array", "ArrayType", "Func", "FunctionPointerType", "FunctionSource", "GType", "GpucFunction", "Kernel", "Marker", "SCALARS",
    "ScalarType", "TupleType", "as_type", "atomic_add", "atomic_and", "atomic_cas", "atomic_dec", "atomic_exch",
    "atomic_inc", "atomic_max", "atomic_min", "atomic_or", "atomic_sub", "atomic_xor", "bool_", "clz", "deferred",
    "derivative", "boolean", "ffs", "float32", "float64", "fma", "func", "grad", "index", "int32", "int64", "jvp", "kernel",
    "marker", "ndrange", "popc", "promote", "uint32", "uint64", "value_and_grad", "vjp",
    # the block model
    "ballot", "barrier", "barrier_all", "barrier_any", "barrier_count", "block_dim", "block_index", "fence",
    "fence_block", "grid_barrier", "grid_dim", "lane_index", "local", "shared", "shfl_down", "shfl_idx", "shfl_up",
    "shfl_xor", "syncwarp", "thread_index", "vote_all", "vote_any", "warp_size",
]
__all__ += ["ComplexType", "complex64", "complex128"]
__all__ += ["float16", "int8", "int16", "uint8", "uint16"]
