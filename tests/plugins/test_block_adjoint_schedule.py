"""The CPU's blockwise schedule of block adjoints on several threads (gpuc.adjoint, cpu.block_phases): blocks
that may add into one element of a shadow never run at once, so the adds of a tiled kernel into the rows of
one array and the columns of another need no atomics, and the gradient is the same bits on any thread count."""

from __future__ import annotations

import math

import numpy as np
import pytest
from support.block_adjoints import TILE, matmul

import gpuc
from gpuc.frontend.constructs.reverse import BLOCKWISE
from gpuc.runtime import cpu
from gpuc.runtime.dispatch import launcher_for, typeof

pytestmark = pytest.mark.devices("cpu")

RNG = np.random.default_rng(7)


@pytest.mark.parametrize("grid", [(1, 1, 1), (5, 1, 1), (4, 4, 1), (3, 7, 1), (7, 3, 2), (2, 3, 4)])
@pytest.mark.parametrize("apart", [(0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2)])
@pytest.mark.parametrize("threads", [2, 3])
def test_blocks_of_a_phase_differ_along_every_dimension_apart(grid, apart, threads):
    phases = cpu.block_phases(grid, apart, threads)
    seen = []
    for phase in phases:
        members = [b for begin, end in phase for b in range(begin, end)]
        seen += members
        coords = [(b % grid[0], b // grid[0] % grid[1], b // (grid[0] * grid[1])) for b in members]
        for d in apart:
            assert len({c[d] for c in coords}) == len(coords), (phase, d)
    assert sorted(seen) == list(range(math.prod(grid)))


def _launch_matmul(a, b, seed, threads):
    m, n = a.shape[0], b.shape[1]
    da, db, c = np.zeros_like(a), np.zeros_like(b), np.zeros((m, n))
    launch = (-(-n // TILE) * TILE, -(-m // TILE) * TILE)
    gpuc.adjoint(matmul).launch(launch, a, da, b, db, c, seed.copy(), block=(TILE, TILE), threads=threads)
    np.testing.assert_allclose(c, a @ b, rtol=1e-11, atol=1e-12)
    return da, db


@pytest.mark.parametrize("shape", [(128, 128, 128), (96, 64, 160)])
def test_tiled_matmul_adjoint_on_threads_is_exact_and_the_same_bits(shape):
    m, k, n = shape
    a, b, seed = RNG.uniform(-1, 1, (m, k)), RNG.uniform(-1, 1, (k, n)), RNG.uniform(-1, 1, (m, n))
    runs = {}
    for threads in (1, 2, 3, 2, 3):
        da, db = _launch_matmul(a, b, seed, threads)
        np.testing.assert_allclose(da, seed @ b.T, rtol=1e-11, atol=1e-12)
        np.testing.assert_allclose(db, a.T @ seed, rtol=1e-11, atol=1e-12)
        runs.setdefault(threads, []).append((da, db))
    # every element's adds run in one order, phase after phase, whatever the threads and however they meet
    first = runs[2][0]
    for got in runs[2][1:] + runs[3]:
        np.testing.assert_array_equal(got[0], first[0])
        np.testing.assert_array_equal(got[1], first[1])


def test_the_blockwise_matmul_adjoint_has_no_atomics():
    a, b = np.zeros((64, 64)), np.zeros((64, 64))
    args = (a, a.copy(), b, b.copy(), np.zeros((64, 64)), np.zeros((64, 64)))
    adj = gpuc.adjoint(matmul)
    kernel = adj._kernel(adj._layout([typeof(x, k) for k, x in enumerate(args)]), BLOCKWISE, (0, 1))
    launcher = launcher_for(kernel, args, "cpu", whole_blocks=True)
    details = [dict(r.details) for r in launcher.module.trace.transformations if "blocks apart" in dict(r.details)]
    assert details and tuple(details[-1]["blocks apart"]) == (0, 1)  # a's rows, b's columns
    assert "atomicrmw" not in str(kernel.inspect(*args, block=(TILE, TILE)).llvm)


@gpuc.kernel
def rows_and_columns_of_one_array(a, out):
    col, row = gpuc.index(0), gpuc.index(1)
    acc = 0.0
    for k in range(a.shape[1]):
        acc += a[row, k] * a[k, col]  # a's shadow: rows of one block, columns of another
    gpuc.barrier()
    out[row, col] = acc


@gpuc.kernel
def rows_times_a_vector(a, w, out):
    col, row = gpuc.index(0), gpuc.index(1)
    acc = 0.0
    for k in range(a.shape[1]):
        acc += a[row, k] * w[k]  # a's shadow by rows, w's by every block
    gpuc.barrier()
    out[row, col] = acc * col


@pytest.mark.parametrize("threads", [2, 3])
def test_an_array_read_along_rows_and_columns_keeps_its_atomics(threads):
    a, seed = RNG.uniform(-1, 1, (64, 64)), RNG.uniform(-1, 1, (64, 64))
    da, out = np.zeros_like(a), np.zeros_like(a)
    gpuc.adjoint(rows_and_columns_of_one_array).launch((64, 64), a, da, out, seed.copy(), block=(8, 8),
                                                       threads=threads)
    np.testing.assert_allclose(da, seed @ a.T + a.T @ seed, rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("threads", [2, 3])
def test_rows_apart_and_a_vector_every_block_reads(threads):
    a, w, seed = RNG.uniform(-1, 1, (64, 48)), RNG.uniform(-1, 1, 48), RNG.uniform(-1, 1, (64, 64))
    da, dw, out = np.zeros_like(a), np.zeros_like(w), np.zeros((64, 64))
    gpuc.adjoint(rows_times_a_vector).launch((64, 64), a, da, w, dw, out, seed.copy(), block=(8, 4),
                                             threads=threads)
    weights = (seed * np.arange(64.0)).sum(axis=1)  # d loss / d (a @ w) per row
    np.testing.assert_allclose(da, np.outer(weights, w), rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(dw, a.T @ weights, rtol=1e-11, atol=1e-12)


@gpuc.kernel
def own_and_row(a, out):
    col, row = gpuc.index(0), gpuc.index(1)
    acc = a[row, col]
    for k in range(a.shape[1]):
        acc += a[row, k] * a[row, col]  # a[row, col] is in the item's row too: a's shadow by rows
    gpuc.barrier()
    out[row, col] = acc


@pytest.mark.parametrize("threads", [2, 3])
def test_an_own_element_is_in_its_row(threads):
    a, seed = RNG.uniform(-1, 1, (48, 48)), RNG.uniform(-1, 1, (48, 48))
    args = (a, np.zeros_like(a), np.zeros_like(a), np.zeros_like(a))
    adj = gpuc.adjoint(own_and_row)
    kernel = adj._kernel(adj._layout([typeof(x, k) for k, x in enumerate(args)]), BLOCKWISE, (0, 1))
    launcher = launcher_for(kernel, args, "cpu", whole_blocks=True)
    assert [tuple(dict(r.details)["blocks apart"]) for r in launcher.module.trace.transformations
            if "blocks apart" in dict(r.details)][-1] == (1,)
    da, out = np.zeros_like(a), np.zeros_like(a)
    adj.launch((48, 48), a, da, out, seed.copy(), block=(4, 4), threads=threads)
    rows = a.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(da, seed * (1.0 + rows) + (seed * a).sum(axis=1, keepdims=True), rtol=1e-11,
                               atol=1e-12)
