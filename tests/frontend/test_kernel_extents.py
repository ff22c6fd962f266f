"""A kernel's array shapes are known not to be negative (lowering.py: _assume_extents): clamped
neighbour indices lose Python's negative-index wraparound, while negative indices still count from
the end, against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import gpuc
from gpuc import Array, int64, uint8

# The tests that launch kernels run natively and through OpenCL.
ON_DEVICES = pytest.mark.devices("cpu", "opencl")


@gpuc.kernel
def clamped_neighbours(src, dst):
    i = gpuc.index()
    n = src.shape[0]
    total = 0
    for d in range(-1, 2):
        total += src[min(max(i + d, 0), n - 1)]
    dst[i] = total


@gpuc.kernel
def from_the_end(src, dst, k):
    i = gpuc.index()
    dst[i] = src[k - i]  # negative for i > k: counts from the end


@gpuc.func
def clamped_read(src, j):
    return src[min(max(j, 0), src.shape[0] - 1)]


def test_clamped_indices_need_no_wraparound(filecheck):
    # The wrap `select(index < 0, n, 0)` of min(max(i + d, 0), n - 1) is 0: negative only when n is 0.
    ir = gpuc.code_llvm(clamped_neighbours, (Array[int64, 1], Array[int64, 1]))
    filecheck(ir, """\
CHECK-LABEL: define void @clamped_neighbours.
CHECK: call void @llvm.assume(
CHECK-NOT: select
CHECK: ret void
""")


def test_funcs_do_not_assume():
    # A func may be handed any array value; only a kernel's parameters come from a launcher.
    ir = gpuc.code_llvm(clamped_read, (Array[uint8, 1], int64), optimize=False)
    assert "llvm.assume" not in ir


@ON_DEVICES
@pytest.mark.parametrize("n", [1, 2, 5, 33])
def test_clamped_neighbours_equal_numpy(n):
    src = np.random.default_rng(n).integers(-50, 50, size=n).astype(np.int64)
    dst = np.zeros(n, np.int64)
    clamped_neighbours[n](src, dst, threads=2)
    padded = np.pad(src, 1, mode="edge")
    assert np.array_equal(dst, padded[:-2] + padded[1:-1] + padded[2:])


@ON_DEVICES
@pytest.mark.parametrize("k", [0, 3, 7])
def test_negative_indices_still_count_from_the_end(k):
    src = np.arange(10, 20, dtype=np.int64)
    dst = np.zeros(8, np.int64)
    from_the_end[8](src, dst, k, threads=2)
    assert np.array_equal(dst, np.array([src[k - i] for i in range(8)]))
