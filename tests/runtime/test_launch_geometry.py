"""Launch geometry mistakes (docs/debugging.md, "Launch geometry"): a kernel of the block model launched
without block= is an error on every device, and a multi-dimensional launch of a kernel that never reads
its position along a dimension warns once, both from what the compile found (gpuc/abi.py: EntryABI)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gpuc
from gpuc import LaunchWarning
from gpuc.runtime import dispatch

TPB = 256


@gpuc.kernel
def block_sums(a, out):  # the README's example
    s = gpuc.shared.array(TPB, gpuc.float32)
    t, i = gpuc.thread_index(0), gpuc.index(0)
    s[t] = a[i] if i < len(a) else 0.0
    gpuc.barrier()
    stride = TPB // 2
    while stride > 0:
        if t < stride:
            s[t] += s[t + stride]
        gpuc.barrier()
        stride //= 2
    if t == 0:
        out[gpuc.block_index(0)] = s[0]


@gpuc.kernel
def sync_only(out):
    i = gpuc.index(0)
    out[i] = 1
    gpuc.barrier()


@gpuc.kernel
def rows(out):
    out[gpuc.index(0)] += 1


@gpuc.kernel
def grid(out):
    out[gpuc.index(1), gpuc.index(0)] += 1


@gpuc.kernel
def tiles(out):
    out[gpuc.block_index(1), gpuc.thread_index(0)] += 1


def _device(device: str) -> str:
    if device == "opencl":
        from gpuc.runtime import opencl
        if not opencl.available():
            pytest.skip(opencl.unavailable_reason())
    return device


@pytest.mark.parametrize("device", ["cpu", "opencl"])
def test_a_block_kernel_without_block_is_an_error_saying_what_to_add(device):
    # The README's block_sums[256](np.ones(256), sums) gave wrong sums, then SIGSEGV, on the CPU.
    device = _device(device)
    x, sums = np.ones(256, np.float32), np.zeros(1, np.float32)
    for _ in range(2):  # the full path, then the warm one
        with pytest.raises(ValueError, match=r"block_sums uses the block model \(gpuc\.\w+.*\) and was launched "
                                             r"without block=.*block_sums\[256\]\(\.\.\., block=256\)"):
            block_sums[256](x, sums, device=device)
    with pytest.raises(ValueError, match=r"gpuc\.barrier at .*test_launch_geometry\.py:\d+:\d+"):
        sync_only[4](np.zeros(4), device=device)
    with pytest.raises(ValueError, match="without block="):
        block_sums.prepare(256, x, sums, device=device)
    block_sums[256](x, sums, block=TPB, device=device)
    assert sums[0] == 256


@pytest.mark.parametrize("device", ["cpu", "opencl"])
def test_a_launch_along_a_dimension_the_kernel_never_reads_warns_once(device):
    device = _device(device)
    out = np.zeros(8)
    with pytest.warns(LaunchWarning, match=r"rows was launched over \(8, 4\) but never reads gpuc\.index\(1\).*"
                                           r"k\[blocks \* threads\]\(\.\.\., block=threads\)") as caught:
        rows[(8, 4)](out, device=device)
    assert caught[0].filename == __file__  # the user's line
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rows[(8, 4)](out, device=device)  # once
        rows[8](out, device=device)
        rows[(8, 1)](out, device=device)
        grid[(4, 2)](np.zeros((2, 4)), device=device)
        tiles[(4, 6)](np.zeros((3, 2)), block=(2, 2), device=device)  # block_index(1) reads it
    np.testing.assert_array_equal(out, 10)


def test_what_the_kernel_reads_comes_from_the_compile_and_the_disk_cache():
    out = np.zeros(4)
    abi = dispatch.launcher_for(rows, (out,), n=4).module.abi
    assert (abi.dims, abi.block_model) == ((0,), "")
    abi = dispatch.launcher_for(tiles, (np.zeros((2, 2)),), whole_blocks=True).module.abi
    assert abi.dims == (0, 1) and abi.block_model.startswith("gpuc.")
    assert '"gpuc-position-dims"="0"' in rows.inspect(out).llvm
    launchers = rows.__dict__.pop("_gpuc_launchers", None)
    try:
        launcher = dispatch.launcher_for(rows, (out,), n=4)  # the launch's own variant (too small to stream)
        assert launcher.module.trace.cache == "hit" and launcher.module.abi.dims == (0,)
        with pytest.warns(LaunchWarning):
            rows[(4, 2)](out)
    finally:
        if launchers is not None:
            rows.__dict__["_gpuc_launchers"] = launchers


def test_a_kernel_whose_blocks_do_not_matter_runs_without_block():
    out = np.zeros(5)
    rows[5](out)  # no block model: exactly n work items, as before
    np.testing.assert_array_equal(out, 1)
