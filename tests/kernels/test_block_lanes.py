"""Block kernels on the CPU: the loops over a block's work items between barriers run in vector lanes
(LLVM's loop vectorizer takes them: values kept per item lie side by side, and the sites the items
arrived at are checked after the loop), with results equal to one item at a time."""

from __future__ import annotations

import numpy as np
import pytest
from support import block_adjoints

import gpuc

TPB = 128


@pytest.mark.parametrize("threads", (1, 2))
def test_tree_reduction_runs_its_item_loops_in_lanes(threads):
    tpb = block_adjoints.TPB
    a = np.random.default_rng(3).random(tpb * 37 - 5)
    out = np.zeros(37)
    block_adjoints.block_sums.launch(tpb * 37, a, out, block=tpb, threads=threads)
    want = np.concatenate([a * a, np.zeros(5)]).reshape(37, tpb)
    stride = tpb // 2
    while stride:  # the same tree, in the same order
        want[:, :stride] += want[:, stride:2 * stride]
        stride //= 2
    np.testing.assert_array_equal(out, want[:, 0])
    ir = block_adjoints.block_sums.inspect(a, out, block=tpb).llvm
    assert "x double>" in ir, "the item loops stay scalar"


@gpuc.kernel
def take_under_branch(a, c, out):
    s = gpuc.shared.array(TPB, gpuc.float64)
    t, i = gpuc.thread_index(0), gpuc.index(0)
    s[t] = 0.0
    gpuc.barrier()
    v = 1.0
    if c[i] > 0.0:
        v = a[i]
        a[i] = 0.0
    s[t] = v
    gpuc.barrier()
    out[i] = s[(t + 1) % TPB]


@pytest.mark.parametrize("threads", (1, 2))
def test_a_read_before_a_write_under_a_branch_survives_the_item_loops_vectorizer(threads):
    # A region's loop goes to LLVM's loop vectorizer, which makes `v = a[i]` a masked load and `a[i] = 0.0`
    # a masked store: the pattern LLVM 22's instcombine folds wrongly in launch loops (tests/plugins/
    # test_vectorize.py), so the region's reads are frozen first, as the launch loop's are.
    n = 4 * TPB
    a0, c = np.arange(1.0, n + 1), np.where(np.arange(n) % 3 == 0, 1.0, -1.0)
    a, out = a0.copy(), np.zeros(n)
    take_under_branch.launch(n, a, c, out, block=TPB, threads=threads)
    v = np.where(c > 0, a0, 1.0).reshape(-1, TPB)
    np.testing.assert_array_equal(out, np.roll(v, -1, axis=1).ravel())
    np.testing.assert_array_equal(a, np.where(c > 0, 0.0, a0))
    ir = take_under_branch.inspect(a, c, out, block=TPB).llvm
    assert "llvm.masked.load" in ir and "freeze" in ir
