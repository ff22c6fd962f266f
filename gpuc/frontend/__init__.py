"""The Python frontend: @gpuc.func / @gpuc.kernel functions, typed per signature and lowered to LLVM IR."""

from .autodiff import derivative, jvp
from .reverse import grad, value_and_grad, vjp
from .intrinsics import Marker, atomic_add, deferred, fma, index, marker, ndrange
from .source import Func, FunctionSource, GpucFunction, Kernel, func, kernel
from .types import (SCALARS, Array, ArrayType, FunctionPointerType, GType, ScalarType, TupleType, as_type, boolean, float32, float64,
                    int32, int64, promote, uint32, uint64)

bool_ = boolean

__all__ = [
    "Array", "ArrayType", "Func", "FunctionPointerType", "FunctionSource", "GType", "GpucFunction", "Kernel", "Marker", "SCALARS",
    "ScalarType", "TupleType", "as_type", "atomic_add", "bool_", "deferred", "derivative", "boolean", "float32", "float64",
    "fma", "func", "grad", "index", "int32", "int64", "jvp", "kernel", "marker", "ndrange", "promote", "uint32", "uint64",
    "value_and_grad", "vjp",
]
