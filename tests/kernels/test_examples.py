"""The example kernels (examples/kernels.py) run correctly on the CPU and through OpenCL, and their PTX passes
ptxas."""

from __future__ import annotations

import pytest

import gpuc
from support.examples import load_example

pytestmark = pytest.mark.devices("cpu", "opencl")


@pytest.fixture(scope="module")
def examples():
    module = load_example("kernels", "gpuc_example_kernels")
    return module


def test_example_kernels_run(examples, isolated_plugins, capsys):
    assert examples.main() == 0
    assert "WRONG" not in capsys.readouterr().out


@pytest.mark.devices("cpu")  # launches nothing
@pytest.mark.parametrize("name, argtypes", [
    ("saxpy", (gpuc.float32,) + (gpuc.Array[gpuc.float32, 1],) * 3),
    ("total", (gpuc.Array[gpuc.float64, 1],) * 2),
    ("stencil", (gpuc.Array[gpuc.float64, 2],) * 2),
    ("traced_copy", (gpuc.Array[gpuc.int64, 1],) * 2),
])
def test_example_kernels_ptx(examples, name, argtypes, ptxas, isolated_plugins):
    gpuc.register_plugin("demo.trace", pipeline_callback=examples.drop_trace)
    ptx = gpuc.code_native(getattr(examples, name), argtypes, target=gpuc.PTXTarget(cap="sm_90"))
    assert ".visible .entry" in ptx and "%tid.x" in ptx
    ptxas(ptx)


@pytest.mark.not_on("opencl", "the adjoint's 400 steps outgrow the 4096-byte tape a work item has on SPIR-V (100 "
                               "steps fit): the MemoryError of docs/autodiff.md, \"Tapes on targets without an "
                               "allocator\"")
def test_fit_oscillator_recovers_parameters(capsys):
    # The reverse-mode worked example of docs/autodiff.md: gradient descent through an adjoint kernel.
    module = load_example("fit_oscillator", "gpuc_example_fit")
    assert module.main() == 0
    assert "WRONG" not in capsys.readouterr().out


@pytest.mark.devices("cpu")  # the example runs its kernels natively and through OpenCL itself
def test_blocks_example_runs_and_compiles_for_every_gpu(capsys, ptxas):
    # examples/blocks.py (part four of the demo): tiled matmul and a warp-shuffle block sum on the CPU
    # against NumPy, the divergent-barrier error, and the same kernels for PTX, GCN and SPIR-V.
    module = load_example("blocks", "gpuc_example_blocks")
    assert module.main() == 0
    out = capsys.readouterr().out
    assert "WRONG" not in out and "arrived at different barriers" in out
    assert "block_sum for ptx" in out and "shfl.sync" in out and "ds_bpermute" in out
    types = (gpuc.Array[gpuc.float64, 1],) * 2
    job = gpuc.CompilerJob((module.block_sum, types), gpuc.CompilerConfig(gpuc.PTXTarget(cap="sm_90"), kernel=True,
                                                                          whole_blocks=True))
    ptxas(gpuc.compile(job, "asm").output)


def test_language_example_runs(example, capsys):
    """Demo part five (examples/language.py): complex numbers, uint8 images, views, an AOT library."""
    assert example("language").main() == 0
    out = capsys.readouterr().out
    assert "WRONG" not in out and out.count(": ok") >= 3
