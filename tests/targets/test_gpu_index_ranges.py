"""Indices GPU targets read from registers or built-ins lie in [0, 2**62), as on the CPU (gpuc/plugins/context.py):
LLVM then drops Python's negative-index wraparound from `a[gpuc.index()]` and `a[gpuc.index() + 1]`, which kept
Intel's OpenCL compiler from vectorizing gpuc's SPIR-V (saxpy ran 4-5x slower than the same OpenCL C), and keeps
it where an index may be negative (`a[gpuc.index() - 1]`)."""

from __future__ import annotations

import numpy as np
import pytest

import gpuc

F32 = gpuc.Array[gpuc.float32, 1, "C"]
F64x2 = gpuc.Array[gpuc.float64, 2, "C"]
TARGETS = [pytest.param(gpuc.SPIRVTarget(), id="spirv"), pytest.param(gpuc.PTXTarget(cap="sm_90"), id="ptx"),
           pytest.param(gpuc.GCNTarget(arch="gfx90a"), id="gcn")]


@gpuc.kernel
def saxpy(a, x, y, out):
    i = gpuc.index()
    out[i] = a * x[i] + y[i]


@gpuc.kernel
def neighbours(u, v):
    j = gpuc.index(0) + 1
    i = gpuc.index(1) + 1
    v[i, j] = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]


@gpuc.kernel
def tile_transpose(a, out):
    s = gpuc.shared.array((8, 8), gpuc.float32)
    tx, ty = gpuc.thread_index(0), gpuc.thread_index(1)
    s[ty, tx] = a[gpuc.index(1), gpuc.index(0)]
    gpuc.barrier()
    out[gpuc.index(1), gpuc.index(0)] = s[tx, ty]


@gpuc.kernel
def previous(x, out):
    i = gpuc.index()
    out[i] = x[i - 1]


def optimized_ir(kernel, types, target, whole_blocks=False) -> str:
    job = gpuc.CompilerJob((kernel, types), gpuc.CompilerConfig(target, kernel=True, whole_blocks=whole_blocks))
    return gpuc.compile(job, "llvm").output


@pytest.mark.parametrize("target", TARGETS)
def test_no_wraparound_left_at_work_item_indices(target, filecheck):
    # a select (or a compare with 0) per access was the wraparound: gathers instead of vector loads
    for kernel, types, blocks in ((saxpy, (gpuc.float32, F32, F32, F32), False), (neighbours, (F64x2, F64x2), False),
                                  (tile_transpose, (gpuc.Array[gpuc.float32, 2, "C"],) * 2, True)):
        filecheck(optimized_ir(kernel, types, target, blocks), """\
CHECK: define {{.*}}kernel void
CHECK-NOT: select
CHECK-NOT: icmp {{s[lg][te]}} i64
CHECK: ret void
""")


@pytest.mark.devices("cpu", "opencl")
def test_a_negative_index_still_wraps_around():
    x = np.arange(16, dtype=np.float32)
    out = np.zeros_like(x)
    previous[16](x, out)
    np.testing.assert_array_equal(out, np.roll(x, 1))
