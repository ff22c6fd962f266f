"""Indices that are sums, `a[i + k]`: negative ones still count from the end, as in Python, also where a range
counter or a tile's start is one term (the lowering tests the sum's sign without the sum where both terms may be
non-negative, and assumes a range counter between its start and its stop in the loop body)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import gpuc

from support.block_adjoints import TILE, matmul as tiled_matmul

ON_DEVICES = pytest.mark.devices("cpu", "opencl")
N = 24


@gpuc.kernel
def shifted(src, dst, off):
    i = gpuc.index()
    dst[i] = src[i + off]


@gpuc.kernel
def counted_terms(src, dst, start):
    i = gpuc.index()
    acc = 0
    for k in range(start, start + 6, 2):  # counting up from a start that may be negative
        acc = acc * 3 + src[k + i]
    for k in range(start + 5, start - 1, -2):  # and down past it
        acc = acc * 3 + src[i + k]
    for k in range(3):  # from 0: both terms non-negative where start is
        acc = acc * 3 + src[(k + start) + i]
    dst[i] = acc


@gpuc.kernel
def rows_and_tiles(a, out, row_off, col_off):
    col, row = gpuc.index(0), gpuc.index(1)
    acc = 0
    for k0 in range(0, 8, 4):
        acc = acc * 5 + a[row + row_off, k0 + col + col_off]
    out[row, col] = acc


@gpuc.kernel
def tile_loads(src, dst, base):
    t = gpuc.thread_index(0)
    s = gpuc.shared.array(8, gpuc.int64)
    acc = 0
    for k0 in range(0, 16, 8):
        s[t] = src[base + k0 + t]
        gpuc.barrier()
        acc = acc * 7 + s[(t + 1) % 8]
        gpuc.barrier()
    dst[gpuc.index(0)] = acc


def _python_counted(src, start, n):
    out = []
    for i in range(n):
        acc = 0
        for k in range(start, start + 6, 2):
            acc = acc * 3 + int(src[k + i])
        for k in range(start + 5, start - 1, -2):
            acc = acc * 3 + int(src[i + k])
        for k in range(3):
            acc = acc * 3 + int(src[(k + start) + i])
        out.append(acc)
    return np.array(out, np.int64)


@ON_DEVICES
@pytest.mark.parametrize("off", [-N, -13, -1, 0, 5])
@pytest.mark.parametrize("threads", [1, 2])
def test_shifted_indices_count_from_the_end_as_in_python(off, threads):
    src = np.arange(100, 100 + 2 * N, dtype=np.int64)
    n = min(N, 2 * N - off) if off >= 0 else N
    dst = np.zeros(n, np.int64)
    shifted[n](src, dst, off, threads=threads)
    assert dst.tolist() == [int(src[i + off]) for i in range(n)]


@ON_DEVICES
@pytest.mark.parametrize("start", [-20, -9, -3, 0, 4])
def test_range_counters_in_index_sums(start):
    src = np.random.default_rng(start + 50).integers(-9, 9, 2 * N).astype(np.int64)
    n = 12
    dst = np.zeros(n, np.int64)
    counted_terms[n](src, dst, start, threads=2)
    assert dst.tolist() == _python_counted(src, start, n).tolist()


@ON_DEVICES
@pytest.mark.parametrize("row_off, col_off", [(0, 0), (-3, 0), (0, -12), (-8, -5), (2, 1)])
def test_two_dimensional_sums(row_off, col_off):
    a = np.random.default_rng(abs(row_off * 31 + col_off)).integers(-9, 9, (8, 16)).astype(np.int64)
    out = np.zeros((6, 8), np.int64)
    rows_and_tiles[(8, 6)](a, out, row_off, col_off, threads=2)
    want = np.zeros_like(out)
    for row in range(6):
        for col in range(8):
            acc = 0
            for k0 in range(0, 8, 4):
                acc = acc * 5 + int(a[row + row_off, k0 + col + col_off])
            want[row, col] = acc
    assert out.tolist() == want.tolist()


@ON_DEVICES
@pytest.mark.parametrize("base", [-40, -17, -8, 0, 3])
@pytest.mark.parametrize("threads", [1, 2])
def test_tile_starts_in_block_kernels(base, threads):
    src = np.arange(1000, 1040, dtype=np.int64)
    dst = np.zeros(16, np.int64)
    tile_loads.launch(16, src, dst, base, block=8, threads=threads)
    want = []
    for item in range(16):
        acc = 0
        for k0 in range(0, 16, 8):
            acc = acc * 7 + int(src[base + k0 + (item % 8 + 1) % 8])
        want.append(acc)
    assert dst.tolist() == want



def test_tile_loads_of_consecutive_items_are_no_gathers():
    """`a[row, k0 + tx]`: the tile's start and the item's index are both non-negative, so the load never counts
    from the end and the items' loads are one vector load, in the kernel and in its adjoint (whose adds into
    the shadow of `a` are one vector load and store), not a gather (and a scatter)."""
    m = 64
    a, b, c = (np.zeros((m, m)) for _ in range(3))
    primal = tiled_matmul.inspect(a, b, c, block=(TILE, TILE), threads=1).llvm
    adjoint = gpuc.adjoint(tiled_matmul).inspect(a, a.copy(), b, b.copy(), c, c.copy(), block=(TILE, TILE),
                                                  threads=1).llvm
    # a gather or scatter through other addresses than one broadcast (a uniform load under a mask)
    spread = re.compile(r"call (?:<\d+ x double>|void) @llvm\.masked\.(?:gather|scatter)\.v\d+f64\.v\d+p0\("
                        r"(?:<\d+ x double> %[\w.]+, )?<\d+ x ptr> align \d+ %(?!broadcast\.splat)")
    for ir in (primal, adjoint):
        assert "load <" in ir  # the loops are vectorized
        assert not spread.findall(ir), spread.findall(ir)
    grads = [np.zeros((m, m)) for _ in range(2)]
    rng = np.random.default_rng(3)
    a[:], b[:] = rng.uniform(-1, 1, (m, m)), rng.uniform(-1, 1, (m, m))
    seed = rng.uniform(-1, 1, (m, m))
    gpuc.adjoint(tiled_matmul).launch((m, m), a, grads[0], b, grads[1], c, seed.copy(), block=(TILE, TILE),
                                      threads=2)
    np.testing.assert_allclose(grads[0], seed @ b.T, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grads[1], a.T @ seed, rtol=1e-12, atol=1e-12)
