"""SPIR-V and aggregates: a nested tuple kernel argument gives valid SPIR-V, and a recursive function
returning a tuple compiles (valid SPIR-V) and computes through OpenCL as on the CPU."""

from __future__ import annotations

import numpy as np
import pytest

import gpuc
from gpuc.frontend import as_type

F64 = gpuc.Array[gpuc.float64, 1]


@gpuc.kernel
def nested(a, t):
    a[gpuc.index()] = t[1][0] * t[0] - t[1][1] + t[2][1][0]


@gpuc.func
def fib_pair(n: int) -> (float, float):
    if n <= 1:
        return (1.0, 1.0)
    a, b = fib_pair(n - 1)
    return (b, a + b)


@gpuc.kernel
def recursive(a):
    i = gpuc.index()
    x, y = fib_pair(i)
    a[i] = x + y


def test_nested_tuple_arguments_give_valid_spirv(spirv_val):
    t = as_type((gpuc.float64, (gpuc.float64, gpuc.float64), (gpuc.int32, (gpuc.float64, gpuc.int64))))
    job = gpuc.CompilerJob((nested, (F64, t)), gpuc.CompilerConfig(gpuc.SPIRVTarget(), kernel=True))
    spirv_val(gpuc.compile(job, "obj").output)


# The backend crashed on the phi of the tuple the two returns make (a clear error named the function);
# SPIRVTarget.finish_module gives it one phi per element instead.
@pytest.mark.devices("cpu", "opencl")
def test_recursion_returning_a_tuple_compiles_everywhere(spirv_val):
    job = gpuc.CompilerJob((recursive, (F64,)), gpuc.CompilerConfig(gpuc.SPIRVTarget(), kernel=True))
    spirv_val(gpuc.compile(job, "obj").output)
    for target in (gpuc.PTXTarget(), gpuc.NativeTarget()):
        gpuc.compile(gpuc.CompilerJob((recursive, (F64,)), gpuc.CompilerConfig(target, kernel=True)), "asm")
    a = np.zeros(12)
    recursive[12](a)
    assert a.tolist() == [2, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233]
