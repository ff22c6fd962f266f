"""The block model in kernels: the classic shared-memory, barrier and warp algorithms against NumPy on the
CPU and through OpenCL, the semantics of every block intrinsic against Python references (warps as wide as
the device's: 32 lanes on the CPU, the sub-group size the OpenCL driver picked for the kernel), and compiles
for the GPU targets.

Each acceptance kernel runs with blocks of 1, 32, 128 and 256 work items (where its algorithm allows)
over an index space that is not a multiple of the block, on one and two threads. Shared arrays have
constant shapes: a kernel either closes over its block size (a factory, cached per size) or sizes
them for MAX_BLOCK and reads gpuc.block_dim() at run time. Every store is guarded: nothing checks
bounds.
"""

from __future__ import annotations

import re

import functools
import math
import zlib

import numpy as np
import pytest

pytestmark = pytest.mark.devices("cpu", "opencl")

import gpuc
import gpuc.opencl
from gpuc.runtime import dispatch

from support.devices import DEVICE_LANES, warp_of

BLOCKS = (1, 32, 128, 256)
THREADS = (1, 2)
MAX_BLOCK = 256
WARP = 32  # gpuc.warp_size() on the CPU; OpenCL's sub-group size is the driver's choice per kernel (warp_of)
INF = math.inf


@pytest.fixture
def rng(request):
    """A generator seeded by the test's name: each test's data is the same however the tests are run."""
    return np.random.default_rng(zlib.crc32(request.node.name.encode()))


def blocks_of(n: int, block: int) -> int:
    return -(-n // block)


def per_block(a, block: int, fill=0):
    """`a` padded with `fill` to whole blocks, one block per row."""
    rows = blocks_of(len(a), block)
    return np.concatenate([a, np.full(rows * block - len(a), fill, a.dtype)]).reshape(rows, block)


def launch_params(blocks=BLOCKS):
    return [pytest.param(b, t, id=f"block{b}-threads{t}") for b in blocks for t in THREADS]




# -- tiled matrix multiplication (2-D blocks, two shared tiles) ------------------------------------

@functools.cache
def tiled_matmul(tile: int):
    @gpuc.kernel
    def matmul(a, b, c):
        sa = gpuc.shared.array((tile, tile), gpuc.float32)
        sb = gpuc.shared.array((tile, tile), gpuc.float32)
        tx, ty = gpuc.thread_index(0), gpuc.thread_index(1)
        col, row = gpuc.index(0), gpuc.index(1)
        m, k, n = a.shape[0], a.shape[1], b.shape[1]
        acc = gpuc.float32(0.0)
        for k0 in range(0, k, tile):
            sa[ty, tx] = 0.0
            sb[ty, tx] = 0.0
            if row < m and k0 + tx < k:
                sa[ty, tx] = a[row, k0 + tx]
            if k0 + ty < k and col < n:
                sb[ty, tx] = b[k0 + ty, col]
            gpuc.barrier()
            for kk in range(tile):
                acc += sa[ty, kk] * sb[kk, tx]
            gpuc.barrier()
        if row < m and col < n:
            c[row, col] = acc
    return matmul


def matmul_args(rng, m=37, k=45, n=29):
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    return a, b, np.full((m, n), np.nan, np.float32)


@pytest.mark.parametrize("tile, threads", [pytest.param(t, h, id=f"tile{t}-threads{h}")
                                           for t in (1, 8, 16) for h in THREADS])
def test_tiled_matmul(tile, threads, rng):
    a, b, c = matmul_args(rng)
    tiled_matmul(tile).launch((c.shape[1], c.shape[0]), a, b, c, block=(tile, tile), threads=threads)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


# -- block tree reduction (the block size a closed-over constant) -----------------------------------

@functools.cache
def tree_reduction(tpb: int):
    @gpuc.kernel
    def reduce(a, partials):
        s = gpuc.shared.array(tpb, gpuc.float32)
        t, i = gpuc.thread_index(0), gpuc.index(0)
        s[t] = a[i] if i < len(a) else gpuc.float32(0.0)
        gpuc.barrier()
        stride = tpb // 2
        while stride > 0:
            if t < stride:
                s[t] += s[t + stride]
            gpuc.barrier()
            stride //= 2
        if t == 0:
            partials[gpuc.block_index(0)] = s[0]
    return reduce


@pytest.mark.parametrize("block, threads", launch_params())
def test_block_tree_reduction(block, threads, rng):
    a = rng.random(3001, dtype=np.float32)
    partials = np.full(blocks_of(len(a), block), np.nan, np.float32)
    tree_reduction(block).launch(len(a), a, partials, block=block, threads=threads)
    want = per_block(a, block).astype(np.float64).sum(axis=1)
    np.testing.assert_allclose(partials, want, rtol=1e-5)
    assert math.isclose(partials.sum(dtype=np.float64), a.sum(dtype=np.float64), rel_tol=1e-5)


# -- block-level inclusive scans (shared arrays for MAX_BLOCK, gpuc.block_dim() at run time) ------

@gpuc.kernel
def scan_hillis_steele(a, out):
    buf = gpuc.shared.array((2, MAX_BLOCK), gpuc.int64)
    t, i, nb = gpuc.thread_index(0), gpuc.index(0), gpuc.block_dim(0)
    buf[0, t] = a[i] if i < len(a) else 0
    gpuc.barrier()
    src = 0
    offset = 1
    while offset < nb:
        v = buf[src, t]
        if t >= offset:
            v += buf[src, t - offset]
        buf[1 - src, t] = v
        gpuc.barrier()
        src = 1 - src
        offset *= 2
    if i < len(a):
        out[i] = buf[src, t]


@gpuc.func
def blelloch_step(t, offset):
    left = offset * (2 * t + 1) - 1
    right = offset * (2 * t + 2) - 1
    return left, right


@gpuc.kernel
def scan_blelloch(a, out):
    s = gpuc.shared.array(MAX_BLOCK, gpuc.int64)
    t, i, nb = gpuc.thread_index(0), gpuc.index(0), gpuc.block_dim(0)
    x = a[i] if i < len(a) else 0
    s[t] = x
    gpuc.barrier()
    offset = 1
    d = nb // 2
    while d > 0:  # up-sweep: partial sums in a tree
        if t < d:
            left, right = blelloch_step(t, offset)
            s[right] += s[left]
        offset *= 2
        d //= 2
        gpuc.barrier()
    if t == 0:
        s[nb - 1] = 0
    gpuc.barrier()
    d = 1
    while d < nb:  # down-sweep: the exclusive scan
        offset //= 2
        if t < d:
            left, right = blelloch_step(t, offset)
            carried = s[left]
            s[left] = s[right]
            s[right] += carried
        d *= 2
        gpuc.barrier()
    if i < len(a):
        out[i] = s[t] + x


@pytest.mark.parametrize("scan", [scan_hillis_steele, scan_blelloch], ids=["hillis_steele", "blelloch"])
@pytest.mark.parametrize("block, threads", launch_params())
def test_block_inclusive_scan(scan, block, threads, rng):
    a = rng.integers(-1000, 1000, 1234)
    out = np.zeros_like(a)
    scan.launch(len(a), a, out, block=block, threads=threads)
    np.testing.assert_array_equal(out, np.cumsum(per_block(a, block), axis=1).ravel()[:len(a)])


# -- histogram: privatized bins in shared memory, then global atomics -----------------------------

NBINS = 40


@gpuc.kernel
def histogram(data, bins):
    mine = gpuc.shared.array(NBINS, gpuc.int32)
    t, nb = gpuc.thread_index(0), gpuc.block_dim(0)
    j = t
    while j < NBINS:
        mine[j] = 0
        j += nb
    gpuc.barrier()
    i = gpuc.index(0)
    if i < len(data):
        gpuc.atomic_add(mine, data[i], 1)
    gpuc.barrier()
    j = t
    while j < NBINS:
        if mine[j] != 0:
            gpuc.atomic_add(bins, j, mine[j])
        j += nb


@pytest.mark.parametrize("block, threads", launch_params())
def test_histogram_with_shared_bins(block, threads, rng):
    data = rng.integers(0, NBINS, 5003).astype(np.int32)
    data[:300] = 7  # a hot bin: contention in every early block
    bins = np.zeros(NBINS, np.int32)
    histogram.launch(len(data), data, bins, block=block, threads=threads)
    np.testing.assert_array_equal(bins, np.bincount(data, minlength=NBINS))


# -- 2-D stencil: a tile with a one-element halo in shared memory -----------------------------------

STENCIL_BLOCKS = ((1, 1), (8, 4), (16, 8), (16, 16))  # 1, 32, 128 and 256 work items


@functools.cache
def laplacian(bx: int, by: int):
    @gpuc.kernel
    def stencil(u, out):
        tile = gpuc.shared.array((by + 2, bx + 2), gpuc.float64)
        tx, ty = gpuc.thread_index(0), gpuc.thread_index(1)
        x0, y0 = gpuc.block_index(0) * bx - 1, gpuc.block_index(1) * by - 1
        ny, nx = u.shape[0], u.shape[1]
        k = ty * bx + tx
        while k < (bx + 2) * (by + 2):  # the block loads its tile and halo together
            ly, lx = k // (bx + 2), k % (bx + 2)
            gy, gx = y0 + ly, x0 + lx
            v = 0.0
            if 0 <= gy < ny and 0 <= gx < nx:
                v = u[gy, gx]
            tile[ly, lx] = v
            k += bx * by
        gpuc.barrier()
        x, y = gpuc.index(0), gpuc.index(1)
        if x < nx and y < ny:
            out[y, x] = (tile[ty, tx + 1] + tile[ty + 2, tx + 1] + tile[ty + 1, tx] + tile[ty + 1, tx + 2]
                         - 4.0 * tile[ty + 1, tx + 1])
    return stencil


@pytest.mark.parametrize("shape, threads", [pytest.param(s, t, id=f"block{s[0]}x{s[1]}-threads{t}")
                                            for s in STENCIL_BLOCKS for t in THREADS])
def test_stencil_with_shared_halo(shape, threads, rng):
    u = rng.standard_normal((45, 37))
    out = np.full_like(u, np.nan)
    laplacian(*shape).launch((u.shape[1], u.shape[0]), u, out, block=shape, threads=threads)
    p = np.pad(u, 1)
    want = p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4.0 * u
    np.testing.assert_allclose(out, want, rtol=1e-13, atol=1e-13)


# -- bitonic sort of each block's elements -----------------------------------------------------------

@gpuc.kernel
def bitonic_sort(a, out):
    s = gpuc.shared.array(MAX_BLOCK, gpuc.float32)
    t, i, nb = gpuc.thread_index(0), gpuc.index(0), gpuc.block_dim(0)
    s[t] = a[i] if i < len(a) else INF
    gpuc.barrier()
    k = 2
    while k <= nb:
        j = k // 2
        while j > 0:
            p = t ^ j
            if p > t:
                ascending = (t & k) == 0
                x, y = s[t], s[p]
                if (x > y) if ascending else (x < y):
                    s[t] = y
                    s[p] = x
            gpuc.barrier()
            j //= 2
        k *= 2
    if i < len(a):
        out[i] = s[t]


@pytest.mark.parametrize("block, threads", launch_params())
def test_bitonic_sort_within_blocks(block, threads, rng):
    a = rng.standard_normal(1000).astype(np.float32)
    a[::50] = a[1]  # repeated keys
    out = np.full_like(a, np.nan)
    bitonic_sort.launch(len(a), a, out, block=block, threads=threads)
    np.testing.assert_array_equal(out, np.sort(per_block(a, block, np.inf), axis=1).ravel()[:len(a)])


# -- warp-shuffle reduction, warps combined through shared memory -----------------------------------

@gpuc.func
def warp_sum(v):
    offset = gpuc.warp_size() // 2
    while offset > 0:
        v += gpuc.shfl_down(v, offset)
        offset //= 2
    return v


@gpuc.kernel
def warp_reduce(a, partials):
    sums = gpuc.shared.array(MAX_BLOCK, gpuc.float64)  # one per warp, for any warp size
    t, i = gpuc.thread_index(0), gpuc.index(0)
    lane, warp_id = gpuc.lane_index(), t // gpuc.warp_size()
    v = a[i] if i < len(a) else 0.0
    v = warp_sum(v)
    if lane == 0:
        sums[warp_id] = v
    gpuc.barrier()
    if warp_id == 0:
        warps = (gpuc.block_dim(0) + gpuc.warp_size() - 1) // gpuc.warp_size()
        v = 0.0
        w = lane
        while w < warps:  # more warps than lanes where warps are narrow (sub-groups of 8 on a CPU)
            v += sums[w]
            w += gpuc.warp_size()
        v = warp_sum(v)
        if lane == 0:
            partials[gpuc.block_index(0)] = v


# shfl_down keeps the caller's own value past the block's last lane, so the block is whole warps
@pytest.mark.parametrize("block, threads", launch_params((32, 96, 128, 256)))
def test_warp_shuffle_reduction(block, threads, rng):
    a = rng.standard_normal(4321)
    partials = np.full(blocks_of(len(a), block), np.nan)
    warp_reduce.launch(len(a), a, partials, block=block, threads=threads)
    np.testing.assert_allclose(partials, per_block(a, block).sum(axis=1), rtol=1e-12, atol=1e-12)


# -- dynamic shared memory ------------------------------------------------------------------------------

@gpuc.kernel
def reverse_blocks(a, out, bits, lengths):
    s = gpuc.shared.dynamic(gpuc.float64)
    t, i, nb = gpuc.thread_index(0), gpuc.index(0), gpuc.block_dim(0)
    if i < len(a):
        s[t] = a[i]
    gpuc.barrier()
    source = gpuc.block_index(0) * nb + nb - 1 - t
    if i < len(a) and source < len(a):
        out[i] = s[nb - 1 - t]
    same_bytes = gpuc.shared.dynamic(gpuc.int64)
    if i < len(a):
        bits[i] = same_bytes[t]
    if t == 0:
        lengths[gpuc.block_index(0)] = len(s)


@pytest.mark.parametrize("block, threads", launch_params())
def test_dynamic_shared_memory(block, threads, rng):
    a = rng.standard_normal(999)
    out, bits = np.full_like(a, np.nan), np.zeros(len(a), np.int64)
    lengths = np.zeros(blocks_of(len(a), block), np.int64)
    shared = block * 8 + 20  # not a whole number of float64 beyond the block
    reverse_blocks.launch(len(a), a, out, bits, lengths, block=block, shared=shared, threads=threads)
    np.testing.assert_array_equal(out, per_block(a, block, np.nan)[:, ::-1].ravel()[:len(a)])
    np.testing.assert_array_equal(bits, a.view(np.int64))
    assert lengths.tolist() == [shared // 8] * len(lengths)


# -- every block intrinsic inside a func the kernel calls -------------------------------------------

FIELDS = ("thread_index", "block_index", "block_dim", "grid_dim", "lane_index", "warp_size", "index", "ndrange",
          "shared", "dynamic", "local", "barrier_count", "barrier_all", "barrier_any", "shfl_idx", "shfl_up",
          "shfl_down", "shfl_xor", "ballot", "vote_any", "vote_all", "atomic", "shared_total")


@gpuc.func
def local_total(t):
    scratch = gpuc.local.array((2, 3), gpuc.int64)
    scratch[t % 2, t % 3] = 7
    return scratch[0, 0] + scratch[0, 1] + scratch[0, 2] + scratch[1, 0] + scratch[1, 1] + scratch[1, 2]


@gpuc.func
def probe(out, r):
    """Writes what every block intrinsic gives this work item into row `r` of `out` (FIELDS)."""
    t, i, n = gpuc.thread_index(0), gpuc.index(0), gpuc.ndrange(0)
    nb = gpuc.block_dim(0)
    out[r, 0], out[r, 1], out[r, 2], out[r, 3] = t, gpuc.block_index(0), nb, gpuc.grid_dim(0)
    out[r, 4], out[r, 5], out[r, 6], out[r, 7] = gpuc.lane_index(), gpuc.warp_size(), i, n
    s = gpuc.shared.array(MAX_BLOCK, gpuc.int64)
    d = gpuc.shared.dynamic(gpuc.int64)
    counter = gpuc.shared.array(1, gpuc.uint32)
    if t == 0:
        counter[0] = 0
    s[t] = 3 * i
    d[t] = 5 * i
    gpuc.fence_block()
    gpuc.barrier()
    out[r, 8], out[r, 9] = s[(t + 1) % nb], d[nb - 1 - t]
    out[r, 10] = local_total(t)
    out[r, 11] = gpuc.barrier_count(i % 3 == 0)
    out[r, 12] = gpuc.barrier_all(i < n)
    out[r, 13] = gpuc.barrier_any(i == n)
    out[r, 14] = gpuc.shfl_idx(i, 3)
    out[r, 15] = gpuc.shfl_up(i, 1)
    out[r, 16] = gpuc.shfl_down(i, 2)
    out[r, 17] = gpuc.shfl_xor(i, 5)
    gpuc.syncwarp()
    out[r, 18] = gpuc.ballot(i % 2 == 0)
    out[r, 19] = gpuc.vote_any(i % 7 == 0)
    out[r, 20] = gpuc.vote_all(i < n)
    gpuc.fence()
    out[r, 21] = gpuc.atomic_add(counter, 0, 1) < nb
    gpuc.barrier()
    out[r, 22] = counter[0]


@gpuc.kernel
def probe_kernel(out):
    i = gpuc.index(0)
    if i < out.shape[0]:
        probe(out, i)


def lanes_of(block: int, warp: int = WARP):
    """(lane, first item of its warp, active lanes of that warp) of each work item of a block."""
    t = np.arange(block)
    lane, base = t % warp, t - t % warp
    return lane, base, np.minimum(warp, block - base)


def shuffled(values, sources, block: int, warp: int = WARP):
    """The shuffles' reference: each item's `values[source]`, its own value where the source lane is
    outside its warp (negative, `warp` or more, or past the block's last item)."""
    out = values.copy()
    for b in range(len(values) // block):
        lane, base, active = lanes_of(block, warp)
        src = sources[b * block:(b + 1) * block]
        inside = (src >= 0) & (src < active)
        k = b * block + np.nonzero(inside)[0]
        out[k] = values[b * block + base[inside] + src[inside]]
    return out


def warp_bits(pred, block: int, warp: int = WARP):
    """Each item's ballot: bit k set for lane k of its warp where pred holds (active lanes only)."""
    out = np.zeros(len(pred), np.uint64)
    for w in range(0, len(pred), block):
        for base in range(0, block, warp):
            lanes = pred[w + base:w + min(block, base + warp)]
            out[w + base:w + base + len(lanes)] = sum(1 << k for k, p in enumerate(lanes) if p)
    return out


@pytest.mark.parametrize("block, threads", launch_params((1, 48, 64)))
def test_every_intrinsic_in_a_func(block, threads):
    n = 3 * block - min(block - 1, 7)
    grid = blocks_of(n, block)
    out = np.full((grid * block, len(FIELDS)), -1, np.int64)
    probe_kernel.launch(n, out, block=block, shared=8 * block, threads=threads)
    got = dict(zip(FIELDS, out.T))
    warp = warp_of(probe_kernel, (out,), block)  # the driver's own word for it on OpenCL
    items = grid * block
    i = np.arange(items)
    t, blk = i % block, i // block
    lane, base, active = lanes_of(block, warp)
    lane, base, active = np.tile(lane, grid), np.tile(base, grid), np.tile(active, grid)
    starts = blk * block
    want = {"thread_index": t, "block_index": blk, "block_dim": block, "grid_dim": grid, "lane_index": lane,
            "warp_size": warp, "index": i, "ndrange": n, "shared": 3 * (starts + (t + 1) % block),
            "dynamic": 5 * (starts + block - 1 - t), "local": 7,
            "barrier_count": (per_block(i, block) % 3 == 0).sum(axis=1)[blk],
            "barrier_all": blk < n // block, "barrier_any": blk == n // block,
            "shfl_idx": shuffled(i, np.full(items, 3), block, warp), "shfl_up": shuffled(i, lane - 1, block, warp),
            "shfl_down": shuffled(i, lane + 2, block, warp), "shfl_xor": shuffled(i, lane ^ 5, block, warp),
            "ballot": warp_bits(i % 2 == 0, block, warp).astype(np.int64),
            "vote_any": [any(i[s:s + a] % 7 == 0) for s, a in zip(starts + base, active)],
            "vote_all": starts + base + active <= n, "atomic": 1, "shared_total": block}
    for name in FIELDS:
        np.testing.assert_array_equal(got[name], np.broadcast_to(want[name], items), err_msg=name)


@gpuc.func
def local_across_barrier(out, i):
    scratch = gpuc.local.array(2, gpuc.int64)
    scratch[i % 2] = i + 1
    gpuc.barrier()
    out[i] = scratch[0] + scratch[1]


@gpuc.kernel
def local_in_func(out):
    i = gpuc.index(0)
    if i < len(out):
        local_across_barrier(out, i)


def test_local_array_in_a_func_with_a_barrier():
    out = np.zeros(10, np.int64)
    local_in_func.launch(10, out, block=4, threads=1)
    assert out.tolist() == list(range(1, 11))  # each item's own zeroed array


# -- barrier_count, barrier_all, barrier_any (work items that returned do not count) -----------------

@gpuc.kernel
def block_votes(pred, alive, out):
    i = gpuc.index(0)
    if not alive[i]:
        return
    count = gpuc.barrier_count(pred[i] != 0)
    every = gpuc.barrier_all(pred[i])
    some = gpuc.barrier_any(pred[i] != 0)
    out[i, 0], out[i, 1], out[i, 2] = count, every, some


@pytest.mark.parametrize("block, threads", launch_params((1, 32, 40, 128, 256)))
def test_barrier_predicates(block, threads, rng):
    n = 7 * block - block // 3
    items = blocks_of(n, block) * block  # items beyond n run too: their inputs are in the arrays
    pred = (rng.random(items) < 0.9).astype(np.int32)
    pred[:block] = 1  # a block where every predicate holds
    pred[block:2 * block] = 0  # and one where none does
    alive = rng.random(items) < 0.8
    alive[2 * block:3 * block] = False  # a block that returns before its barriers
    out = np.full((items, 3), -1, np.int64)
    block_votes.launch(n, pred, alive, out, block=block, threads=threads)
    live = per_block(alive, block)
    counts = (per_block(pred, block).astype(bool) & live).sum(axis=1)
    want = np.stack([counts, counts == live.sum(axis=1), counts > 0], axis=1).repeat(block, axis=0)
    want[~alive] = -1
    np.testing.assert_array_equal(out, want)


# -- warp votes and shuffles against lanes of 32 --------------------------------------------------

@gpuc.kernel
def warp_ops(v, f, pred, src, mask, delta, alive, out, fout):
    i = gpuc.index(0)
    if not alive[i]:
        return
    x, y, d = v[i], f[i], delta[i]
    out[i, 0] = gpuc.ballot(pred[i] != 0)
    out[i, 1] = gpuc.vote_any(pred[i] != 0)
    out[i, 2] = gpuc.vote_all(pred[i] != 0)
    out[i, 3] = gpuc.shfl_idx(x, src[i])
    out[i, 4] = gpuc.shfl_up(x, d)
    out[i, 5] = gpuc.shfl_down(x, d)
    out[i, 6] = gpuc.shfl_xor(x, mask[i])
    out[i, 7] = gpuc.shfl_xor(pred[i] != 0, 1)
    fout[i, 0] = gpuc.shfl_idx(y, src[i])
    fout[i, 1] = gpuc.shfl_down(y, d)


def votes_reference(pred, live, block: int, warp: int = WARP):
    """(ballot, any, all) of each item over the live lanes of its warp."""
    ballot = warp_bits(pred & live, block, warp)
    mask = warp_bits(live, block, warp)
    return ballot, ballot != 0, ballot == mask


def shuffle_reference(values, sources, live, block: int, warp: int = WARP):
    """shuffled(), where a source lane that returned counts as outside the warp too."""
    own = shuffled(np.arange(len(values)), sources, block, warp)
    return values[np.where(live[own], own, np.arange(len(values)))]


def run_warp_ops(rng, block: int, threads: int, alive):
    """The launch of warp_ops over 5 blocks (n short of them; the items beyond n run too): (out, fout) as
    it left them and as the reference says, -7 and NaN for the items that returned."""
    items = 5 * block
    v = rng.integers(-2**40, 2**40, items)
    f = rng.standard_normal(items).astype(np.float32)
    pred = (rng.random(items) < 0.6).astype(np.int32)
    src = rng.integers(-40, 70, items).astype(np.int32)  # lanes modulo the warp size
    mask = rng.integers(0, 40, items).astype(np.int32)  # the warp size and more: outside the warp
    delta = np.full(items, 1 if block < 8 else 3, np.int64)
    delta[-block:] = 0
    out, fout = np.full((items, 8), -7, np.int64), np.full((items, 2), np.nan, np.float32)
    args = (v, f, pred, src, mask, delta, alive, out, fout)
    warp = warp_of(warp_ops, args, block)
    pred[:min(block, warp)] = 1  # a first warp where every lane votes yes
    warp_ops.launch(items - min(block - 1, 5), *args, block=block, threads=threads)
    lane = np.tile(lanes_of(block, warp)[0], 5)
    ballot, some, every = votes_reference(pred != 0, alive, block, warp)
    want = np.stack([ballot.astype(np.int64), some, every, shuffle_reference(v, src % warp, alive, block, warp),
                     shuffle_reference(v, lane - delta, alive, block, warp),
                     shuffle_reference(v, lane + delta, alive, block, warp),
                     shuffle_reference(v, lane ^ mask, alive, block, warp),
                     shuffle_reference(pred != 0, lane ^ 1, alive, block, warp)], axis=1)
    fwant = np.stack([shuffle_reference(f, src % warp, alive, block, warp),
                      shuffle_reference(f, lane + delta, alive, block, warp)], axis=1)
    want[~alive], fwant[~alive] = -7, np.nan
    return (out, fout), (want, fwant)


@pytest.mark.parametrize("block, threads", launch_params((1, 32, 40, 128, 256)))
def test_votes_and_shuffles(block, threads, rng):
    (out, fout), (want, fwant) = run_warp_ops(rng, block, threads, np.ones(5 * block, bool))
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(fout, fwant)


def every_fifth_returns(block: int):
    """Which work items of 5 blocks stay: all but every fifth, which returns before the warp operations."""
    return np.arange(5 * block) % 5 != 4


FIRST_SHUFFLE = 3  # out[:, 3] and fout[:, 0]: shfl_idx, warp_ops' first shuffle (test_first_shuffle_after_a_return)


@pytest.mark.parametrize("block, threads", launch_params((40, 128)))
def test_returned_lanes_do_not_vote_or_shuffle(block, threads, rng):
    (out, fout), (want, fwant) = run_warp_ops(rng, block, threads, every_fifth_returns(block))
    others = [k for k in range(out.shape[1]) if k != FIRST_SHUFFLE]
    np.testing.assert_array_equal(out[:, others], want[:, others])
    np.testing.assert_array_equal(fout[:, 1], fwant[:, 1])


@functools.cache
def shuffle_after_return(kind: str):
    shuffle = getattr(gpuc, f"shfl_{kind}")

    @gpuc.kernel
    def kernel(v, operand, alive, out):
        i = gpuc.index(0)
        if not alive[i]:
            return
        out[i] = shuffle(v[i], operand[i])
    return kernel


@pytest.mark.parametrize("kind", ["idx", "up", "down", "xor"])
@pytest.mark.parametrize("block", [32, 40])
def test_first_shuffle_after_a_return(kind, block, rng):
    items = 4 * block
    v, alive = rng.integers(-2**40, 2**40, items), every_fifth_returns(block)[:items]
    operand = {"idx": rng.integers(0, 2 * WARP, items), "up": np.ones(items, np.int64),
               "down": np.ones(items, np.int64), "xor": np.ones(items, np.int64)}[kind]
    out = np.full(items, -7, np.int64)
    kernel = shuffle_after_return(kind)
    kernel.launch(items, v, operand, alive, out, block=block, threads=1)
    warp = warp_of(kernel, (v, operand, alive, out), block)
    lane = np.tile(lanes_of(block, warp)[0], 4)
    source = {"idx": operand % warp, "up": lane - 1, "down": lane + 1, "xor": lane ^ 1}[kind]
    want = np.where(alive, shuffle_reference(v, source, alive, block, warp), -7)
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("shape", [(8, 5), (4, 4, 3)], ids=["block8x5", "block4x4x3"])
def test_lanes_of_multidimensional_blocks(shape, gpuc_device):
    @gpuc.kernel
    def lanes(out):
        x, y, z = gpuc.index(0), gpuc.index(1), gpuc.index(2)
        if x < out.shape[2] and y < out.shape[1] and z < out.shape[0]:
            out[z, y, x] = gpuc.lane_index() * 1000 + gpuc.shfl_down(gpuc.lane_index(), 1)

    dims = shape + (1,) * (3 - len(shape))
    out = np.full(dims[::-1], -1, np.int64)
    lanes.launch(dims, out, block=shape, threads=2)
    warp = warp_of(lanes, (out,), shape)
    if gpuc_device == "opencl" and shape[0] % warp:
        pytest.skip(f"rows of {shape[0]} lanes in sub-groups of {warp}: {DEVICE_LANES}")
    t = np.arange(math.prod(shape))
    lane = t % warp
    down = np.where((lane + 1 < warp) & (t + 1 < len(t)), lane + 1, lane)
    np.testing.assert_array_equal(out.ravel(), lane * 1000 + down)


# -- work items of a block at different barriers --------------------------------------------------

@gpuc.kernel
def divergent(out):
    t = gpuc.thread_index(0)
    if t < 3:
        gpuc.barrier()
        out[gpuc.index(0)] = 1
    else:
        gpuc.barrier()
        out[gpuc.index(0)] = 2


@gpuc.kernel
def some_return_first(a, out):
    s = gpuc.shared.array(MAX_BLOCK, gpuc.int64)
    t, i = gpuc.thread_index(0), gpuc.index(0)
    s[t] = 0
    if t % 3 == 1:
        return
    s[t] = a[i]
    gpuc.barrier()
    if i < len(out):
        out[i] = s[t] + s[(t + 2) % gpuc.block_dim(0)]


@pytest.mark.not_on("opencl", "checks the CPU runtime's KernelError for items at different barriers (undefined "
                               "on OpenCL devices, as on GPUs)")
@pytest.mark.parametrize("threads", THREADS)
def test_divergent_barriers_raise(threads):
    out = np.zeros(64, np.int64)
    line = divergent.py_func.__code__.co_firstlineno  # the decorator's line
    with pytest.raises(gpuc.KernelError, match=r"arrived at different barriers") as info:
        divergent.launch(64, out, block=32, threads=threads)
    message = str(info.value)
    for where in (f"thread (0, 0, 0) at {__file__}:{line + 4}:9", f"thread (3, 0, 0) at {__file__}:{line + 7}:9"):
        assert where in message, message
    divergent.launch(6, out, block=3, threads=threads)  # every item of a block at the same barrier
    assert out[:6].tolist() == [1] * 6


@pytest.mark.parametrize("block, threads", launch_params((1, 32, 128)))
def test_returning_before_a_barrier_is_fine(block, threads, rng):
    a = rng.integers(-100, 100, blocks_of(300, block) * block)
    out = np.full(300, -1, np.int64)
    some_return_first.launch(300, a, out, block=block, threads=threads)
    s = per_block(a, block)
    t = np.arange(block)
    s[:, t % 3 == 1] = 0
    want = (s + s[:, (t + 2) % block]).ravel()[:300]
    want[np.arange(300) % block % 3 == 1] = -1
    np.testing.assert_array_equal(out, want)


@gpuc.kernel
def exchange_after_returns(alive, out, votes):
    s = gpuc.shared.array(MAX_BLOCK, gpuc.int64)
    t, i = gpuc.thread_index(0), gpuc.index(0)
    s[t] = -1
    gpuc.barrier()
    if alive[i] == 0:
        return
    s[t] = i + 1
    count = gpuc.barrier_count(i % 3 == 0)
    out[i] = s[(t + 1) % gpuc.block_dim(0)]
    votes[i, 0], votes[i, 1], votes[i, 2] = count, gpuc.barrier_all(i % 2 == 0), gpuc.barrier_any(i % 5 == 0)


# Who returns, per block: a block's first or last items, whole warps of 8 or 16, a block smaller than a warp.
RETURN_PATTERNS = [(4, "1100"), (4, "0111"), (12, "111111111100"), (12, "011111110111"), (16, "1" * 8 + "0" * 8),
                   (20, "0" * 16 + "1111"), (20, "1" * 16 + "0000"), (64, "1" * 32 + "0" * 32), (40, "11110" * 8)]


@pytest.mark.parametrize("block, pattern", [pytest.param(b, p, id=f"block{b}-{p}") for b, p in RETURN_PATTERNS])
def test_work_items_that_returned_count_as_arrived(block, pattern):
    # OpenCL leaves a barrier that some work items of the group never reach undefined (Intel's CPU runtime
    # followed the group's last item: the others' stores after the barrier were lost, or items that had
    # returned ran on); gpuc's SPIR-V has them arrive at the barriers the others still reach
    alive = np.array([int(c) for c in pattern] * 3, np.int32)
    n = len(alive)
    out, votes = np.zeros(n, np.int64), np.full((n, 3), -1, np.int64)
    exchange_after_returns.launch(n, alive, out, votes, block=block)
    i = np.arange(n)
    neighbour = i - i % block + (i % block + 1) % block
    np.testing.assert_array_equal(out, np.where(alive == 1, np.where(alive[neighbour] == 1, neighbour + 1, -1), 0))
    live = per_block(alive, block) == 1
    items = per_block(i, block)
    want = np.stack([(live & (items % 3 == 0)).sum(axis=1), ~(live & (items % 2 != 0)).any(axis=1),
                     (live & (items % 5 == 0)).any(axis=1)], axis=1).repeat(block, axis=0)
    want[alive == 0] = -1
    np.testing.assert_array_equal(votes, want)


@gpuc.func
def rotate_sum(s, t, x):
    acc = x
    for k in range(1, 13):
        s[t] = acc
        gpuc.barrier()
        acc += s[(t + k) % gpuc.block_dim(0)] * (k % 3) + math.sqrt(gpuc.float64(k))
        gpuc.barrier()
    return acc


@gpuc.kernel
def rotations(a, alive, out):
    s = gpuc.shared.array(MAX_BLOCK, gpuc.float64)
    t, i = gpuc.thread_index(0), gpuc.index(0)
    s[t] = 0.0
    gpuc.barrier()
    if alive[i] == 0:
        return
    v = rotate_sum(s, t, a[i])
    w = rotate_sum(s, t, v * 0.5)
    out[i] = rotate_sum(s, t, w - 1.0) + rotate_sum(s, t, w + 1.0)


def rotations_reference(a, alive, block: int):
    def rotate(acc, live):
        for k in range(1, 13):
            s = np.where(live, acc, s_prev[0])
            s_prev[0] = s
            acc = acc + s[(np.arange(block) + k) % block] * (k % 3) + math.sqrt(k)
        return acc

    out = np.zeros(len(a))
    for b in range(len(a) // block):
        part, live = a[b * block:(b + 1) * block], alive[b * block:(b + 1) * block] == 1
        s_prev = [np.zeros(block)]
        w = rotate(rotate(part, live) * 0.5, live)
        out[b * block:(b + 1) * block] = np.where(live, rotate(w - 1.0, live) + rotate(w + 1.0, live), 0.0)
    return out


@pytest.mark.parametrize("block, pattern", [(4, "1100"), (20, "0" * 16 + "1111"), (40, "11110" * 8)])
def test_returned_work_items_arrive_at_barriers_in_funcs(block, pattern, rng):
    # funcs with barriers that the optimizer leaves as calls are inlined into SPIR-V kernels first
    alive = np.array([int(c) for c in pattern] * 3, np.int32)
    a = rng.integers(-8, 8, len(alive)).astype(np.float64)
    out = np.zeros(len(alive))
    rotations.launch(len(alive), a, alive, out, block=block)
    np.testing.assert_allclose(out, rotations_reference(a, alive, block), rtol=1e-12)


@gpuc.kernel
def leave_in_rounds(stop, out):
    i = gpuc.index(0)
    total = 0
    r = 0
    while True:
        if r == stop[i]:
            out[i] = total
            return
        total += gpuc.barrier_count(True)
        r += 1


@pytest.mark.parametrize("block", [5, 16, 24])
def test_work_items_leave_a_loop_of_barriers_in_different_rounds(block, rng):
    stop = rng.integers(0, 6, 4 * block)
    out = np.full(len(stop), -1, np.int64)
    leave_in_rounds.launch(len(stop), stop, out, block=block)
    rounds = per_block(stop, block)
    live = np.stack([(rounds > r).sum(axis=1) for r in range(6)], axis=1)  # items still there in each round
    want = [live[k // block, :stop[k]].sum() for k in range(len(stop))]
    np.testing.assert_array_equal(out, want)


# -- grid barriers: the CPU runs them in phases ---------------------------------------------------------

#: SPIR-V's compile error for them is test_compiles_for_spirv's (DOCUMENTED).
GRID_BARRIERS = "grid barriers: OpenCL does not run every work-group of a launch at once (no cooperative launch)"

@gpuc.kernel
def jacobi(u, tmp, steps):
    i = gpuc.index(0)
    n = len(u)
    for _ in range(steps):
        if i < n:
            left = u[i - 1] if i > 0 else u[i]
            right = u[i + 1] if i < n - 1 else u[i]
            tmp[i] = 0.5 * (left + right)
        gpuc.grid_barrier()
        if i < n:
            u[i] = tmp[i]
        gpuc.grid_barrier()


def jacobi_reference(u, steps):
    for _ in range(steps):
        u = 0.5 * (np.concatenate([u[:1], u[:-1]]) + np.concatenate([u[1:], u[-1:]]))
    return u


@pytest.mark.not_on("opencl", GRID_BARRIERS)
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("block", [None, 1, 32, 128, 256])
def test_grid_barrier_jacobi(block, threads, rng):
    u0 = rng.random(301)
    u, tmp = u0.copy(), np.zeros(301)
    jacobi.launch(301, u, tmp, 13, block=block, threads=threads)
    np.testing.assert_allclose(u, jacobi_reference(u0, 13), rtol=1e-14)


@gpuc.kernel
def keeps_shared(out):
    s = gpuc.shared.array(64, gpuc.int64)
    t = gpuc.thread_index(0)
    s[t] = gpuc.block_index(0) * 1000 + t
    gpuc.grid_barrier()
    v = s[(t + 1) % gpuc.block_dim(0)]
    gpuc.grid_barrier()
    if gpuc.index(0) < len(out):
        out[gpuc.index(0)] = v


@pytest.mark.not_on("opencl", GRID_BARRIERS)
@pytest.mark.parametrize("threads", [1, 2])
def test_shared_arrays_and_values_live_across_grid_barriers(threads):
    out = np.zeros(100, np.int64)
    keeps_shared.launch(100, out, block=16, threads=threads)
    i = np.arange(100)
    np.testing.assert_array_equal(out, i // 16 * 1000 + (i % 16 + 1) % 16)


@pytest.mark.not_on("opencl", GRID_BARRIERS)
def test_blocks_at_different_grid_barriers_are_an_error():
    @gpuc.kernel
    def split(out):
        if gpuc.block_index(0) == 0:
            gpuc.grid_barrier()
        else:
            gpuc.grid_barrier()
        out[gpuc.index(0)] = 1

    with pytest.raises(gpuc.KernelError, match="different grid barriers"):
        split.launch(8, np.zeros(8, np.int64), block=4)
    finished = np.zeros(8, np.int64)

    @gpuc.kernel
    def some_return(out):
        if gpuc.block_index(0) == 1:
            return
        gpuc.grid_barrier()
        out[gpuc.index(0)] = 1

    some_return.launch(8, finished, block=4)
    assert finished.tolist() == [1] * 4 + [0] * 4


# -- atomics on shared arrays, every operation and element type ------------------------------------

INTS = ("int32", "int64", "uint32", "uint64")
FLOATS = ("float32", "float64")
ATOMIC_TYPES = {"add": INTS + FLOATS, "sub": INTS + FLOATS, "min": INTS + FLOATS, "max": INTS + FLOATS,
                "exch": INTS + FLOATS, "cas": INTS + FLOATS, "and": INTS, "or": INTS, "xor": INTS,
                "inc": ("uint32", "uint64"), "dec": ("uint32", "uint64")}
ATOMIC_BLOCK, SLOTS = 64, 2
#: The operations whose result does not depend on the order: the blocks' results combine into one
#: global element with the same atomic, where the launch's threads contend.
COMMUTATIVE = ("add", "sub", "min", "max", "and", "or", "xor")


@gpuc.func
def cas_if_initial(s, k, v, initial):
    return gpuc.atomic_cas(s, k, initial, v)


@functools.cache
def shared_atomic(op: str, dtype: str):
    if op == "cas":
        update = cas_if_initial
    else:
        atomic = getattr(gpuc, f"atomic_{op}")

        @gpuc.func
        def update(s, k, v, initial):
            return atomic(s, k, v)
    element, combine = getattr(gpuc, dtype), op in COMMUTATIVE

    @gpuc.kernel
    def kernel(init, vals, olds, finals, total):
        s = gpuc.shared.array(SLOTS, element)
        t, i = gpuc.thread_index(0), gpuc.index(0)
        if t < SLOTS:
            s[t] = init[t]
        gpuc.barrier()
        if i < len(vals):
            olds[i] = update(s, t % SLOTS, vals[i], init[t % SLOTS])
        gpuc.barrier()
        if t < SLOTS:
            finals[gpuc.block_index(0), t] = s[t]
            if combine:
                update(total, t, s[t], init[t])
    return kernel


def wrap(x, dtype):
    """Python number `x` as the NumPy scalar of `dtype`, integers wrapping."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return dt.type(x)
    bits = 8 * dt.itemsize
    x = int(x) % (1 << bits)
    return dt.type(x - (1 << bits) if dt.kind == "i" and x >= 1 << (bits - 1) else x)


def apply(op, cur, v, initial, dtype):
    """`cur` after one atomic `op` with operand `v` (docs/frontend.md, "Atomics")."""
    if np.dtype(dtype).kind == "f":
        cur, v = np.dtype(dtype).type(cur), np.dtype(dtype).type(v)
    else:
        cur, v, initial = int(cur), int(v), int(initial)
    new = {"add": lambda: cur + v, "sub": lambda: cur - v, "min": lambda: min(cur, v), "max": lambda: max(cur, v),
           "exch": lambda: v, "and": lambda: cur & v, "or": lambda: cur | v, "xor": lambda: cur ^ v,
           "inc": lambda: 0 if cur >= v else cur + 1, "dec": lambda: v if cur == 0 or cur > v else cur - 1,
           "cas": lambda: v if cur == initial else cur}[op]()
    return wrap(new, dtype)


def replay(op, initial, vals, olds, dtype):
    """The value after the updates `vals` in an order that gives each its old value in `olds` (an
    update that leaves the value as it was goes first among those that saw the same value), or None
    where no order does."""
    waiting: dict = {}
    for k, old in enumerate(olds):
        waiting.setdefault(old, []).append(k)
    cur = wrap(initial, dtype)
    for _ in range(len(vals)):
        ready = waiting.get(cur)
        if not ready:
            return None
        k = min(ready, key=lambda k: apply(op, cur, vals[k], initial, dtype) != cur)
        ready.remove(k)
        cur = apply(op, cur, vals[k], initial, dtype)
    return cur


def atomic_operands(rng, op, dtype, n):
    """(initial values of the slots, each item's operand): exact in floats, never a no-op for add and sub."""
    dt = np.dtype(dtype)
    signed = dt.kind != "u"
    if op in ("add", "sub"):
        return np.array([1000, 7], dt), rng.integers(1, 50, n).astype(dt)
    if op in ("inc", "dec"):  # one bound per slot; the bound is a slot's value from the start
        return np.array([3, 0], dt), np.resize(np.array([20, 5], dt), n)
    if op in ("and", "or", "xor"):
        info = np.iinfo(dt)
        return (rng.integers(info.min, info.max, 2, dtype=dt, endpoint=True),
                rng.integers(info.min, info.max, n, dtype=dt, endpoint=True))
    if dt.kind == "f":
        return np.array([0.5, -0.25], dt), rng.standard_normal(n).astype(dt)
    low = -10**6 if signed else 0
    return rng.integers(low, 10**6, 2).astype(dt), rng.permutation(np.arange(low, low + 3 * n))[:n].astype(dt)


@pytest.mark.parametrize("op, dtype", [pytest.param(o, d, id=f"{o}-{d}") for o, ts in ATOMIC_TYPES.items()
                                       for d in ts])
def test_shared_atomics(op, dtype, rng):
    n = ATOMIC_BLOCK * 11 + 37
    grid = blocks_of(n, ATOMIC_BLOCK)
    init, vals = atomic_operands(rng, op, dtype, n)
    olds, finals, total = np.zeros_like(vals), np.zeros((grid, SLOTS), vals.dtype), init.copy()
    shared_atomic(op, dtype).launch(n, init, vals, olds, finals, total, block=ATOMIC_BLOCK, threads=2)
    item = np.arange(n)
    for b in range(grid):
        for k in range(SLOTS):
            mine = (item // ATOMIC_BLOCK == b) & (item % SLOTS == k)
            final = replay(op, init[k], vals[mine], olds[mine], dtype)
            assert final is not None, f"block {b}, slot {k}: no order of the updates gives the old values"
            assert finals[b, k] == final, f"block {b}, slot {k}: {finals[b, k]} after the updates, not {final}"
    if op in COMMUTATIVE:
        want = init.copy()
        for k in range(SLOTS):
            for final in finals[:, k]:
                want[k] = apply(op, want[k], final, init[k], dtype)
        np.testing.assert_array_equal(total, want)


# -- launch geometry in 1, 2 and 3 dimensions -----------------------------------------------------

@gpuc.func
def put3(out, r, col, x, y, z):
    out[r, col], out[r, col + 1], out[r, col + 2] = x, y, z


@gpuc.kernel
def geometry(out, beyond):
    x, y, z = gpuc.index(0), gpuc.index(1), gpuc.index(2)
    wx, wy = gpuc.grid_dim(0) * gpuc.block_dim(0), gpuc.grid_dim(1) * gpuc.block_dim(1)
    r = x + wx * (y + wy * z)
    if r < out.shape[0]:
        put3(out, r, 0, x, y, z)
        put3(out, r, 3, gpuc.thread_index(0), gpuc.thread_index(1), gpuc.thread_index(2))
        put3(out, r, 6, gpuc.block_index(0), gpuc.block_index(1), gpuc.block_index(2))
        put3(out, r, 9, gpuc.block_dim(0), gpuc.block_dim(1), gpuc.block_dim(2))
        put3(out, r, 12, gpuc.grid_dim(0), gpuc.grid_dim(1), gpuc.grid_dim(2))
        put3(out, r, 15, gpuc.ndrange(0), gpuc.ndrange(1), gpuc.ndrange(2))
        out[r, 18] = gpuc.lane_index()
    if x >= gpuc.ndrange(0) or y >= gpuc.ndrange(1) or z >= gpuc.ndrange(2):
        gpuc.atomic_add(beyond, 0, 1)


def padded3(size):
    size = size if isinstance(size, tuple) else (size,)
    return size + (1,) * (3 - len(size))


@pytest.mark.parametrize("n, block", [(100, 32), ((37, 11), (8, 4)), ((9, 7, 5), (4, 3, 2)), ((30, 3), (7, 2, 1))],
                         ids=["1d", "2d", "3d", "2d-in-3d-block"])
@pytest.mark.parametrize("threads", THREADS)
def test_geometry(n, block, threads, gpuc_device):
    n3, b3 = padded3(n), padded3(block)
    grid = tuple(blocks_of(d, b) for d, b in zip(n3, b3))
    items = math.prod(grid) * math.prod(b3)
    out, beyond = np.full((items, 19), -1, np.int64), np.zeros(1, np.int64)
    geometry.launch(n, out, beyond, block=block, threads=threads)
    warp = warp_of(geometry, (out, beyond), b3)
    z, y, x = np.indices([g * b for g, b in zip(grid, b3)][::-1]).reshape(3, -1)
    index = np.stack([x, y, z], axis=1)
    thread, blk = index % b3, index // b3
    linear = thread[:, 0] + b3[0] * (thread[:, 1] + b3[1] * thread[:, 2])
    want = np.concatenate([index, thread, blk, np.broadcast_to(b3, index.shape), np.broadcast_to(grid, index.shape),
                           np.broadcast_to(n3, index.shape), (linear % warp)[:, None]], axis=1)
    if gpuc_device == "opencl" and b3[0] % warp and math.prod(b3) > b3[0]:
        want[:, 18] = out[:, 18]  # the lanes: DEVICE_LANES (test_lanes_of_multidimensional_blocks)
    np.testing.assert_array_equal(out, want)
    assert beyond[0] == items - math.prod(n3)


# -- the acceptance kernels compile for the GPU targets ---------------------------------------------

def f32(*shape):
    return np.zeros(shape, np.float32)


def f64(*shape):
    return np.zeros(shape, np.float64)


def i64(*shape):
    return np.zeros(shape, np.int64)


ACCEPTANCE = {
    "tiled_matmul": lambda: (tiled_matmul(16), (f32(4, 4), f32(4, 4), f32(4, 4))),
    "tree_reduction": lambda: (tree_reduction(256), (f32(4), f32(4))),
    "scan_hillis_steele": lambda: (scan_hillis_steele, (i64(4), i64(4))),
    "scan_blelloch": lambda: (scan_blelloch, (i64(4), i64(4))),
    "histogram": lambda: (histogram, (np.zeros(4, np.int32), np.zeros(4, np.int32))),
    "stencil": lambda: (laplacian(16, 16), (f64(4, 4), f64(4, 4))),
    "bitonic_sort": lambda: (bitonic_sort, (f32(4), f32(4))),
    "warp_reduce": lambda: (warp_reduce, (f64(4), f64(4))),
    "dynamic_shared": lambda: (reverse_blocks, (f64(4), f64(4), i64(4), i64(4))),
    "every_intrinsic": lambda: (probe_kernel, (i64(4, len(FIELDS)),)),
    "barrier_predicates": lambda: (block_votes, (np.zeros(4, np.int32), np.zeros(4, bool), i64(4, 3))),
    "warp_ops": lambda: (warp_ops, (i64(4), f32(4), *[np.zeros(4, np.int32)] * 3, i64(4),
                                    np.zeros(4, bool), i64(4, 8), f32(4, 2))),
    "shared_atomics": lambda: (shared_atomic("max", "uint32"), (np.zeros(2, np.uint32),) * 3
                               + (np.zeros((4, 2), np.uint32), np.zeros(2, np.uint32))),
    "grid_jacobi": lambda: (jacobi, (f64(4), f64(4), 3)),
    "returns_before_barriers": lambda: (exchange_after_returns, (np.zeros(4, np.int32), i64(4), i64(4, 3))),
    "leave_in_rounds": lambda: (leave_in_rounds, (i64(4), i64(4))),
}
# docs/frontend.md, "Blocks": grid barriers only on CUDA (and the CPU): located compile errors elsewhere.
DOCUMENTED = {("spirv", "grid_jacobi"): "gpuc.grid_barrier()", ("gcn", "grid_jacobi"): "gpuc.grid_barrier()"}


COMPILES_ONLY = pytest.mark.devices("cpu")  # launches nothing: one run


def compile_block_kernel(name: str, target, output: str):
    kernel, args = ACCEPTANCE[name]()
    types = tuple(dispatch.typeof(a, i) for i, a in enumerate(args))
    config = gpuc.CompilerConfig(target, kernel=True, whole_blocks=True)
    return gpuc.compile(gpuc.CompilerJob((kernel, types), config), output).output


@COMPILES_ONLY
@pytest.mark.parametrize("name", ACCEPTANCE)
def test_compiles_for_ptx(name, ptxas):
    ptx = compile_block_kernel(name, gpuc.PTXTarget(), "asm")
    assert ".visible .entry" in ptx and "gpuc.ctx" not in ptx
    ptxas(ptx)


@COMPILES_ONLY
@pytest.mark.parametrize("name", ACCEPTANCE)
def test_compiles_for_gcn(name):
    if ("gcn", name) in DOCUMENTED:
        with pytest.raises(gpuc.CompilationError, match=re.escape(DOCUMENTED["gcn", name])) as info:
            compile_block_kernel(name, gpuc.GCNTarget(), "asm")
        assert "test_blocks.py:" in str(info.value)  # located
        return
    asm = compile_block_kernel(name, gpuc.GCNTarget(), "asm")
    assert "s_endpgm" in asm and "gpuc.ctx" not in asm


@COMPILES_ONLY
@pytest.mark.parametrize("name", ACCEPTANCE)
def test_compiles_for_spirv(name, spirv_val):
    if ("spirv", name) in DOCUMENTED:
        with pytest.raises(gpuc.CompilationError, match=re.escape(DOCUMENTED["spirv", name])):
            compile_block_kernel(name, gpuc.SPIRVTarget(), "obj")
        return
    spirv_val(compile_block_kernel(name, gpuc.SPIRVTarget(), "obj"))


# -- memory: large shared arrays, a launch asking for more scratch memory than there is ------------------

BIG_SHARED = 1 << 20


@gpuc.kernel
def big_shared(out):
    s = gpuc.shared.array(BIG_SHARED, gpuc.float64)  # 8 MiB per block: scratch memory, not the stack
    t = gpuc.thread_index(0)
    s[t * 1000] = t
    gpuc.barrier()
    out[gpuc.index(0)] = s[(gpuc.block_dim(0) - 1 - t) * 1000]


@pytest.mark.not_on("opencl", "8 MiB of shared memory per block: more than the device's local memory (a "
                               "DeviceLacksError there, test_opencl_runtime.py)")
def test_large_shared_arrays_live_off_the_stack():
    out = np.zeros(64)
    big_shared.launch(64, out, block=32, threads=2)
    np.testing.assert_array_equal(out, np.tile(np.arange(31, -1, -1.0), 2))


@gpuc.kernel
def dynamic_length(out):
    s = gpuc.shared.dynamic(gpuc.float64)
    s[gpuc.thread_index(0)] = 1.0
    out[gpuc.index(0)] = len(s)


def test_scratch_memory_beyond_malloc_is_a_memory_error_and_the_next_launch_works(gpuc_device):
    out = np.zeros(4)
    # the CPU's scratch memory is malloc's; an OpenCL device's is its local memory, which says so
    error, words = {"cpu": (MemoryError, "bytes of scratch memory"),
                    "opencl": (gpuc.opencl.DeviceLacksError, "dynamic shared memory is more than")}[gpuc_device]
    with pytest.raises(error, match=words):
        dynamic_length.launch(4, out, block=4, shared=1 << 39)
    dynamic_length.launch(4, out, block=4, shared=800)
    assert out.tolist() == [100.0] * 4


@COMPILES_ONLY
@pytest.mark.parametrize("name, form", [("returns_before_barriers", "chain"), ("barrier_predicates", "chain"),
                                        ("leave_in_rounds", "rounds"), ("tiled_matmul", None),
                                        ("tree_reduction", None), ("scan_blelloch", None), ("warp_reduce", None)])
def test_spirv_barriers_that_returned_work_items_arrive_at(name, form, spirv_val):
    # Where work items of a group may return (or leave a loop) while others reach a barrier
    # (gpuc/targets/converged_barriers.py): those that returned jump from barrier to barrier, taking part
    # with predicates that change nothing (a chain), or, where barriers lie in loops, every barrier is one
    # that every work item reaches each round, with a reduction of who is still running. Kernels whose
    # barriers the whole group reaches alike (loops and conditions the same for the whole group) keep theirs.
    kernel, args = ACCEPTANCE[name]()
    types = tuple(dispatch.typeof(a, i) for i, a in enumerate(args))
    config = gpuc.CompilerConfig(gpuc.SPIRVTarget(), kernel=True, whole_blocks=True)
    ir = gpuc.compile(gpuc.CompilerJob((kernel, types), config), "llvm").output
    found = "rounds" if "@_Z21work_group_reduce_addl" in ir else "chain" if "%gpuc.done" in ir else None
    assert found == form, ir
    if form == "rounds":
        assert ir.count("call spir_func void @__spirv_ControlBarrier(i32 2") == 1, ir
    spirv_val(compile_block_kernel(name, gpuc.SPIRVTarget(), "obj"))


@COMPILES_ONLY
def test_spirv_kernels_take_dynamic_shared_memory_as_parameters(spirv_val, filecheck):
    # OpenCL's local pointer argument, set with clSetKernelArg(kernel, index, bytes, NULL), and its size
    kernel, args = ACCEPTANCE["dynamic_shared"]()
    types = tuple(dispatch.typeof(a, i) for i, a in enumerate(args))
    job = gpuc.CompilerJob((kernel, types), gpuc.CompilerConfig(gpuc.SPIRVTarget(), kernel=True, whole_blocks=True))
    filecheck(gpuc.compile(job, "llvm").output, """\
        CHECK: define spir_kernel void @{{.*}}(ptr addrspace(1) {{.*}}, ptr addrspace(3) {{.*}}%gpuc.shared, i64 %gpuc.shared_bytes, i64 %gpuc.n0, i64 %gpuc.n1, i64 %gpuc.n2)
        """)
    spirv_val(compile_block_kernel("dynamic_shared", gpuc.SPIRVTarget(), "obj"))
