"""Seeing what a launch compiles: kernel.inspect(*args, ...), code_llvm/code_native with example arguments
or type strings, and decorator options (@gpuc.kernel(opt_level=..., vector_math=...)) that launches use."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import gpuc
from gpuc.runtime import dispatch

from inspect_kernels import block_ids, sine, sine_scalar_math


def test_inspect_is_what_the_launch_compiles():
    x, y = np.linspace(0, 1, 64), np.zeros(64)
    result = sine.inspect(x, y)
    assert isinstance(result, gpuc.CompileResult)
    assert result.job == dispatch.launch_job(sine, (dispatch.typeof(x), dispatch.typeof(y)), "cpu")
    assert result.entry.startswith("sine.") and ".text" in result.output  # x86 assembly
    assert result.llvm.startswith("; ModuleID") and "define" in result.llvm
    assert [s.name for s in result.trace.stages][0] == "irgen"
    assert result.job.source.signature[0].layout == "C"  # the contiguous variant, as the launch picks


def test_inspect_follows_the_arguments_layout_and_blocks():
    x = np.linspace(0, 1, 128)[::2]
    y = np.zeros(64)
    assert sine.inspect(x, y).job.source.signature[0].layout == "A"
    blocked = block_ids.inspect(np.zeros(8, np.int64), block=4)
    assert blocked.job.config.whole_blocks and not block_ids.inspect(np.zeros(8, np.int64)).job.config.whole_blocks


def test_code_llvm_takes_example_arguments_and_type_strings():
    x, y = np.linspace(0, 1, 8), np.zeros(8)
    launched = sine.inspect(x, y).llvm
    assert gpuc.code_llvm(sine, (x, y)) == launched
    assert gpuc.code_llvm(sine, "f64[::1], f64[::1]") == launched
    assert gpuc.code_llvm(sine, ("f64[::1]", "f64[::1]")) == launched
    strided = gpuc.code_llvm(sine, (x[::2], y[::2]))
    assert strided == gpuc.code_llvm(sine, "f64[:], f64[:]") != launched
    with pytest.raises(TypeError, match="'f64\\[::1\\], f65' is not a gpuc type: unknown type 'f65'"):
        gpuc.code_llvm(sine, "f64[::1], f65")


def test_decorator_options_reach_every_launch():
    x, y = np.linspace(0, 1, 1000), np.zeros(1000)
    types = (dispatch.typeof(x), dispatch.typeof(y))
    job = dispatch.launch_job(sine_scalar_math, types, "cpu")
    assert job.config.opt_level == 3 and job.config.target.vector_math is False
    assert dispatch.launch_job(sine, types, "cpu").config.target.vector_math is True
    sine_scalar_math[1000](x, y)
    np.testing.assert_allclose(y, np.sin(x), rtol=1e-15)
    inspected = sine_scalar_math.inspect(x, y)
    assert "_ZGV" not in inspected.llvm  # libm's scalar sin, no libmvec variant
    assert "_ZGV" in sine.inspect(x, y).llvm
    adjoint = gpuc.adjoint(sine_scalar_math)
    assert adjoint.options == sine_scalar_math.options


def test_options_survive_pickling_by_value():
    @gpuc.kernel(opt_level=1)
    def local(x):  # a local function: pickled by value
        x[gpuc.index()] = 1.0

    copy = pickle.loads(pickle.dumps(local))
    assert copy is not local and copy.options == {"opt_level": 1}


@pytest.mark.parametrize("bad, error, message", [
    ({"opt_levle": 3}, TypeError, "has no option 'opt_levle': it takes opt_level"),
    ({"opt_level": 4}, ValueError, "is 0, 1, 2 or 3, not 4"),
    ({"vector_math": "off"}, ValueError, "is True or False, not 'off'"),
])
def test_bad_options_are_named(bad, error, message):
    with pytest.raises(error, match=message):
        gpuc.kernel(**bad)


def test_inspect_for_opencl():
    from gpuc.runtime import opencl
    if not opencl.available():
        pytest.skip(opencl.unavailable_reason())
    result = sine.inspect(np.ones(4), np.ones(4), device="opencl")
    assert "OpCapability Kernel" in result.output and result.job.config.target.name == "spirv"
