"""SPIR-V and aggregates: a nested tuple kernel argument gives valid SPIR-V, and a recursive function
returning a tuple that the SPIR-V backend cannot compile is a clear error, not an internal one."""

from __future__ import annotations

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


def test_recursion_is_a_clear_error_on_spirv_and_compiles_elsewhere():
    job = gpuc.CompilerJob((recursive, (F64,)), gpuc.CompilerConfig(gpuc.SPIRVTarget(), kernel=True))
    with pytest.raises(gpuc.CompilationError, match=r"@fib_pair.* calls itself.*returns a tuple, which the SPIR-V"):
        gpuc.compile(job, "obj")
    for target in (gpuc.PTXTarget(), gpuc.NativeTarget()):
        gpuc.compile(gpuc.CompilerJob((recursive, (F64,)), gpuc.CompilerConfig(target, kernel=True)), "asm")
