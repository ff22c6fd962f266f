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


# -- values uniform across the block, and item loops free of dependences -------------------------------


@gpuc.kernel
def doubling_steps(a, out):
    # `k`, a barrier loop's counter, is the same in every item: kept once for the block. Each region reads
    # the copy the last one left (at its start) and, after redefining it, its own.
    s = gpuc.shared.array(TPB, gpuc.float64)
    t, i = gpuc.thread_index(0), gpuc.index(0)
    s[t] = a[i]
    gpuc.barrier()
    k = 1
    acc = 0.0
    while k < TPB:
        acc += s[(t + k) % TPB] * k
        gpuc.barrier()
        k = k * 2 + k % 3
        acc += k
        s[t] = acc
        gpuc.barrier()
    out[i] = acc + k


def _doubling_steps(a):
    s = a.reshape(-1, TPB).copy()
    acc, k = np.zeros_like(s), 1
    while k < TPB:
        acc += np.roll(s, -k, axis=1) * k
        k = k * 2 + k % 3
        acc += k
        s = acc.copy()
    return (acc + k).ravel()


@gpuc.kernel
def half_return(a, out):
    # the upper half of each block returns before the barriers: the uniform `k` and `m` are read by the
    # items still running
    s = gpuc.shared.array(TPB, gpuc.float64)
    t, i = gpuc.thread_index(0), gpuc.index(0)
    if t >= TPB // 2:
        out[i] = -1.0
        return
    m = gpuc.block_dim(0) // 4 + gpuc.block_index(0)
    k = 0
    acc = a[i]
    while k < m:
        s[t] = acc
        gpuc.barrier()
        acc = s[(t + 1) % (TPB // 2)] + k
        gpuc.barrier()
        k += 2
    out[i] = acc * m


def _half_return(a):
    blocks = a.reshape(-1, TPB)
    out = np.full_like(blocks, -1.0)
    for b, row in enumerate(blocks):
        acc, m = row[:TPB // 2].copy(), TPB // 4 + b
        for k in range(0, m, 2):
            acc = np.roll(acc, -1) + k
        out[b, :TPB // 2] = acc * m
    return out.ravel()


@gpuc.kernel
def barrier_on_even_rounds(a, out):
    # a barrier under a branch every item takes alike: `k` is read after it (from the region that
    # began there) and after the loop's head (which defines it): per item, as before
    s = gpuc.shared.array(TPB, gpuc.float64)
    t, i = gpuc.thread_index(0), gpuc.index(0)
    acc = a[i]
    k = 0
    while k < 6:
        if k % 2 == 0:
            s[t] = acc
            gpuc.barrier()
            acc += s[(t + 1) % TPB]
        acc += k * 1.0
        k += 1
        gpuc.barrier()
    out[i] = acc


def _barrier_on_even_rounds(a):
    acc = a.reshape(-1, TPB).copy()
    for k in range(6):
        if k % 2 == 0:
            acc = acc + np.roll(acc, -1, axis=1)
        acc += k
    return acc.ravel()


@gpuc.kernel
def counted_twice(a, out):
    # barrier_count's result is the same in every item: kept once across the next barrier
    s = gpuc.shared.array(TPB, gpuc.float64)
    t, i = gpuc.thread_index(0), gpuc.index(0)
    n = gpuc.barrier_count(a[i] > 0.5)
    s[t] = n * a[i]
    gpuc.barrier()
    out[i] = n + s[(t + 1) % TPB]


def _counted_twice(a):
    blocks = a.reshape(-1, TPB)
    n = (blocks > 0.5).sum(axis=1, keepdims=True)
    return (n + np.roll(n * blocks, -1, axis=1)).ravel()


@gpuc.kernel
def meet_then_choose(a, out):
    # a branch that differs between items whose sides meet again, then a uniform one choosing the barrier:
    # every item leaves the region at the same site
    s = gpuc.shared.array(TPB, gpuc.float64)
    t, i = gpuc.thread_index(0), gpuc.index(0)
    acc = a[i]
    k = 0
    while k < 5:
        if a[i] > 0.5:
            acc = acc * 0.5
        else:
            acc = acc + 1.0
        s[t] = acc
        if k % 2 == 0:
            gpuc.barrier()
            acc += s[(t + 1) % TPB]
        else:
            gpuc.barrier()
            acc -= s[(t + 3) % TPB]
        gpuc.barrier()
        k += 1
    out[i] = acc if t < TPB // 2 else -acc


def _meet_then_choose(a):
    blocks = a.reshape(-1, TPB)
    acc = blocks.copy()
    for k in range(5):
        acc = np.where(blocks > 0.5, acc * 0.5, acc + 1.0)
        acc = acc + np.roll(acc, -1, axis=1) if k % 2 == 0 else acc - np.roll(acc, -3, axis=1)
    return np.where(np.arange(TPB) < TPB // 2, acc, -acc).ravel()


@gpuc.kernel
def rounds_after_the_loop(a, out):
    # the loop's branch differs between items but its sides meet before the latch: every item leaves the
    # loop after the same round, so its counter is uniform where it is used after the loop (kept once)
    s = gpuc.shared.array(TPB, gpuc.float64)
    t, i = gpuc.thread_index(0), gpuc.index(0)
    acc = a[i]
    k = 0
    while k < 4 + (a[0] > 0.5):
        if acc > 0.5:
            acc = acc * 0.75
        else:
            acc = acc + 0.25
        k += 1
    s[t] = acc
    gpuc.barrier()
    out[i] = k * s[(t + 1) % TPB] + k


def _rounds_after_the_loop(a):
    blocks = a.reshape(-1, TPB)
    acc = blocks.copy()
    rounds = 4 + (a[0] > 0.5)
    for _ in range(rounds):
        acc = np.where(acc > 0.5, acc * 0.75, acc + 0.25)
    return (rounds * np.roll(acc, -1, axis=1) + rounds).ravel()


@gpuc.kernel
def leave_at_different_rounds(a, out):
    # a branch that leaves the loop: items leave after different rounds, their counters differ after it
    s = gpuc.shared.array(TPB, gpuc.float64)
    t, i = gpuc.thread_index(0), gpuc.index(0)
    acc = a[i]
    k = 0
    while k < 8:
        if acc > 2.0:
            break
        acc = acc * 1.5
        k += 1
    s[t] = k
    gpuc.barrier()
    out[i] = s[(t + 1) % TPB] + k


def _leave_at_different_rounds(a):
    rounds = np.zeros(a.shape)
    for j, v in enumerate(a):
        while rounds[j] < 8 and v <= 2.0:
            v *= 1.5
            rounds[j] += 1
    blocks = rounds.reshape(-1, TPB)
    return (np.roll(blocks, -1, axis=1) + blocks).ravel()


@pytest.mark.parametrize("threads", (1, 2))
@pytest.mark.parametrize("kernel, reference", [(doubling_steps, _doubling_steps), (half_return, _half_return),
                                               (barrier_on_even_rounds, _barrier_on_even_rounds),
                                               (counted_twice, _counted_twice), (meet_then_choose, _meet_then_choose),
                                               (rounds_after_the_loop, _rounds_after_the_loop),
                                               (leave_at_different_rounds, _leave_at_different_rounds)],
                         ids=lambda k: getattr(k, "__name__", ""))
def test_values_uniform_across_a_block_give_what_each_item_computes(kernel, reference, threads):
    a = np.random.default_rng(11).random(6 * TPB)
    out = np.zeros_like(a)
    kernel.launch(len(a), a, out, block=TPB, threads=threads)
    np.testing.assert_allclose(out, reference(a), rtol=1e-13)


def test_item_loops_are_declared_free_of_dependences_between_items():
    # A race-free kernel's items touch no memory another item touches between two barriers, so every
    # region's loop over items is parallel: LLVM vectorizes the tree's `s[t] += s[t + stride]` without a
    # run-time check of the distance, which would fail for every stride below the block size.
    tpb = block_adjoints.TPB
    a, out = np.zeros(tpb * 4), np.zeros(4)
    ir = block_adjoints.block_sums.inspect(a, out, block=tpb).llvm
    assert "llvm.loop.parallel_accesses" in ir
    assert "found.conflict" not in ir and "diff.check" not in ir


doubling_steps_unvectorized = gpuc.kernel(vectorize=False)(doubling_steps.py_func)


def test_vectorize_false_leaves_item_loops_to_llvm_alone():
    # no parallel declaration, no width asked for: LLVM's vectorizer checks what it must, with the same results
    a = np.random.default_rng(5).random(4 * TPB)
    out, out_lanes = np.zeros_like(a), np.zeros_like(a)
    doubling_steps_unvectorized.launch(len(a), a, out, block=TPB)
    doubling_steps.launch(len(a), a, out_lanes, block=TPB)
    np.testing.assert_array_equal(out, out_lanes)
    ir = doubling_steps_unvectorized.inspect(a, out, block=TPB).llvm
    assert "llvm.loop.parallel_accesses" not in ir and "llvm.loop.vectorize.width" not in ir
    assert "llvm.loop.parallel_accesses" in doubling_steps.inspect(a, out, block=TPB).llvm


# -- idle tails: the items past a uniform bound that would only leave a region are not run ------------


@gpuc.kernel
def tails(a, out):
    # Each guard compares the x thread index with a value uniform across the block, and the items on its
    # idle side go straight on to the next barrier: a region's loop over items stops at the bound (per
    # row: blocks of 16 x 4). The compares come in every form: swapped, inverted, signed and negative.
    s = gpuc.shared.array((4, 16), gpuc.int64)
    t, u = gpuc.thread_index(0), gpuc.thread_index(1)
    i, j = gpuc.index(0), gpuc.index(1)
    s[u, t] = a[j, i]
    gpuc.barrier()
    k = 8
    while k > 0:
        if t < k:
            s[u, t] += s[u, t + k]
        gpuc.barrier()
        if k > t:
            s[u, t] += 1
        gpuc.barrier()
        if t >= k // 2:
            pass
        else:
            s[u, t] *= 2
        gpuc.barrier()
        if t <= k - 9:
            s[u, t] = -7
        gpuc.barrier()
        if t != 1:
            pass
        else:
            s[u, t] -= 3
        gpuc.barrier()
        k //= 2
    if t == 0:
        out[j, gpuc.block_index(0)] = s[u, 0]


def _tails(a):
    s = a.reshape(a.shape[0], -1, 16).copy()
    k = 8
    while k > 0:
        s[:, :, :k] += s[:, :, k:2 * k]
        s[:, :, :k] += 1
        s[:, :, :k // 2] *= 2
        s[:, :, 1] -= 3
        k //= 2
    return s[:, :, 0]


@gpuc.kernel
def tails_with_work_elsewhere(a, out):
    # guards whose idle side cannot be skipped: every item stores before one, a branch that differs
    # between items comes before another, the idle side of a third stores, a fourth is in a loop
    s = gpuc.shared.array(TPB, gpuc.int64)
    w = gpuc.shared.array(TPB, gpuc.int64)
    t, i = gpuc.thread_index(0), gpuc.index(0)
    s[t] = a[i]
    w[t] = 0
    gpuc.barrier()
    k = TPB // 2
    while k > 0:
        w[t] += k
        if t < k:
            s[t] += s[t + k]
        gpuc.barrier()
        if a[i] % 3 == 0:
            w[t] += 1
        elif t < k:
            s[t] += 1
        gpuc.barrier()
        if t < k:
            s[t] -= w[t] % 5
        else:
            w[t] -= 1
        gpuc.barrier()
        for m in range(3):
            if t < k + m:
                w[t] += 2
        gpuc.barrier()
        k //= 2
    out[i] = s[t] * 1000 + w[t]


def _tails_with_work_elsewhere(a):
    s = a.reshape(-1, TPB).copy()
    w = np.zeros_like(s)
    t = np.arange(TPB)
    k = TPB // 2
    while k > 0:
        w += k
        s[:, :k] += s[:, k:2 * k]
        by_value = a.reshape(s.shape) % 3 == 0
        w += by_value
        s += ~by_value & (t < k)
        s[:, :k] -= w[:, :k] % 5
        w[:, k:] -= 1
        for m in range(3):
            w += 2 * (t < k + m)
        k //= 2
    return (s * 1000 + w).ravel()


@pytest.mark.parametrize("threads", (1, 2))
def test_items_past_an_idle_tail_are_not_run(threads):
    a = np.random.default_rng(2).integers(-1000, 1000, (8, 48))
    out = np.zeros((8, 3), np.int64)
    tails.launch((48, 8), a, out, block=(16, 4), threads=threads)
    np.testing.assert_array_equal(out, _tails(a))
    again = np.zeros_like(out)
    gpuc.kernel(vectorize=False)(tails.py_func).launch((48, 8), a, again, block=(16, 4), threads=threads)
    np.testing.assert_array_equal(again, out)


@pytest.mark.parametrize("threads", (1, 2))
def test_guards_whose_idle_items_have_work_elsewhere_run_every_item(threads):
    a = np.random.default_rng(4).integers(-1000, 1000, 5 * TPB)
    out = np.zeros_like(a)
    tails_with_work_elsewhere.launch(len(a), a, out, block=TPB, threads=threads)
    np.testing.assert_array_equal(out, _tails_with_work_elsewhere(a))


def test_the_tree_reduction_runs_only_the_items_below_its_stride():
    # the region's loop over items ends at min(stride, block width), from a run of its first item as far
    # as the guard; with vectorization off, every item runs (the plain schedule)
    tpb = block_adjoints.TPB
    a, out = np.zeros(tpb * 4), np.zeros(4)
    assert "@llvm.smin.i64" in block_adjoints.block_sums.inspect(a, out, block=tpb).llvm
    plain = gpuc.kernel(vectorize=False)(block_adjoints.block_sums.py_func)
    assert "@llvm.smin.i64" not in plain.inspect(a, out, block=tpb).llvm
