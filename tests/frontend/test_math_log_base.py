"""math.log(x, base): CPython's log(x) / log(base), for literals (folded with Python's value) and
run-time values, on every target."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gpuc
from gpuc import Array, float32, float64

from support.located_errors import module_from_source
from support.native import native

# The tests that launch kernels or run funcs (support.native) run natively and through OpenCL.
ON_DEVICES = pytest.mark.devices("cpu", "opencl")


@gpuc.kernel
def logs(out, x, base):
    i = gpuc.index()
    out[i, 0] = math.log(x[i], base[i])
    out[i, 1] = math.log(x[i], 10)
    out[i, 2] = math.log(0.5, 2.5)     # literals: Python's value
    out[i, 3] = math.log(x[i], 2.0) - math.log2(x[i])


@gpuc.func
def log_f32(x, b):
    return math.log(x, b)


def scalar_libm_launch(kernel, n, *args):
    """One CPU thread, compiled without libmvec: its log is libm's, as CPython's."""
    from gpuc.runtime import cpu, dispatch
    types = tuple(dispatch.typeof(a) for a in args)
    job = gpuc.CompilerJob((kernel, types), gpuc.CompilerConfig(gpuc.NativeTarget(vector_math=False), kernel=True))
    module = cpu.JITModule(job, signature=gpuc.abi.KernelSignature(dispatch.signature_spec(types)))
    cpu.launch(module, n, list(args), 1)


CASES = [(3.7, 2.5), (100.0, 10.0), (0.3, 7.0), (1e-300, 3.0), (2.0 ** 60, 2.0), (5.0, 0.5), (0.7, 0.9)]


@ON_DEVICES
@pytest.mark.not_on("opencl", "checks the CPU's scalar libm bit for bit (a CPU launch without libmvec)")
def test_log_with_a_base_is_cpythons_bit_for_bit_on_libm():
    x, base = np.array([c[0] for c in CASES]), np.array([c[1] for c in CASES])
    out = np.zeros((len(CASES), 4))
    scalar_libm_launch(logs, len(CASES), out, x, base)
    for row, (xv, bv) in zip(out, CASES):
        assert row[0] == math.log(xv, bv)
        assert row[1] == math.log(xv, 10)
        assert row[2] == math.log(0.5, 2.5)


@ON_DEVICES
def test_log_with_a_base_within_the_vector_math_bounds_by_default():
    x, base = np.array([c[0] for c in CASES]), np.array([c[1] for c in CASES])
    out = np.zeros((len(CASES), 4))
    logs[len(CASES)](out, x, base)
    want = np.array([math.log(a, b) for a, b in CASES])
    np.testing.assert_allclose(out[:, 0], want, rtol=8 * np.finfo(np.float64).eps)
    assert (out[:, 2] == math.log(0.5, 2.5)).all()


@ON_DEVICES
def test_float32_arguments_compute_in_float32():
    f = native(log_f32, (float32, float32))
    got = f(np.float32(8.0), np.float32(2.0))
    assert abs(got - 3.0) < 4e-7


@pytest.mark.parametrize("bad", ["math.log()", "math.log(x, 2.0, 3.0)"])
def test_other_argument_counts_are_located_errors(tmp_path, bad):
    module = module_from_source(tmp_path, "bad_log", f"import math\nimport gpuc\n\n@gpuc.func\ndef f(x):\n    return {bad}\n")
    with pytest.raises(gpuc.CompilationError, match=r"bad_log\.py:6:\d+: .*log\(\) takes"):
        gpuc.compile(gpuc.CompilerJob((module.f, (float64,)), gpuc.CompilerConfig(gpuc.NativeTarget())), "llvm")


def test_log_with_a_base_compiles_for_every_target(ptxas, spirv_val):
    types = (Array[float64, 2], Array[float64, 1], Array[float64, 1])
    for target, kind in ((gpuc.PTXTarget(), "asm"), (gpuc.GCNTarget(), "asm"), (gpuc.SPIRVTarget(), "obj")):
        output = gpuc.compile(gpuc.CompilerJob((logs, types), gpuc.CompilerConfig(target, kernel=True)), kind).output
        if target.name == "ptx":
            ptxas(output)
        elif target.name == "spirv":
            spirv_val(output)
        else:
            assert len(output) > 0
