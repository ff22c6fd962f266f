"""The launch geometry checks and prepared launches on CUDA (docs/debugging.md, "Launch geometry";
docs/launching.md): the same errors and warnings as on the CPU and OpenCL, from what the PTX compile found."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gpuc
import gpuc.cuda as cuda
from gpuc.errors import LaunchWarning


@gpuc.kernel
def block_ids(out):
    i = gpuc.index(0)
    if i < len(out):
        out[i] = gpuc.block_index(0) * 1000 + gpuc.thread_index(0)


@gpuc.kernel
def rows(out):
    i = gpuc.index(0)
    if i < len(out):
        out[i] += 1


def test_a_block_kernel_without_block_is_an_error_on_cuda():
    # CUDA picked a block size of its own (up to 256) where the CPU ran blocks of one work item.
    out = cuda.to_device(np.zeros(100, np.int64))
    with pytest.raises(ValueError, match=r"block_ids uses the block model .* without block="):
        block_ids[100](out)
    block_ids[100](out, block=32)
    i = np.arange(100)
    np.testing.assert_array_equal(out.copy_to_host(), i // 32 * 1000 + i % 32)


def test_a_launch_along_a_dimension_the_kernel_never_reads_warns_once_on_cuda():
    out = cuda.to_device(np.zeros(8))
    with pytest.warns(LaunchWarning, match=r"k\[blocks \* threads\]\(\.\.\., block=threads\)"):
        rows[(8, 4)](out)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rows[(8, 4)](out)
    np.testing.assert_array_equal(out.copy_to_host(), 8)


def test_a_prepared_launch_on_cuda():
    out = cuda.to_device(np.zeros(64))
    launch = rows.prepare(64, out)
    for _ in range(3):
        launch()
    np.testing.assert_array_equal(out.copy_to_host(), 3)
    with pytest.raises(ValueError, match="without block="):
        block_ids.prepare(64, out)
