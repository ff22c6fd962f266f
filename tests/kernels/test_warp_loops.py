"""Warp operations inside loops on the CPU and through OpenCL against a lock-step NumPy model of the warps:
every shuffle kind, ballots, votes and syncwarp, in loops of the same trip count for the whole warp and
of one per lane (a lane that leaves the loop returns, and is no longer a source nor a voter), with
loop-carried lanes, deltas, masks and ballots, over blocks of whole and partial warps. The model's warps
are as wide as the device's (32 lanes on the CPU, the sub-group the OpenCL driver picked for the kernel).

Each launch covers three blocks with a few surplus items (they run the kernel too); every array has
one element per item of the grid, so nothing reads out of bounds.
"""

from __future__ import annotations

import functools
import zlib

import numpy as np
import pytest

import gpuc

from support.devices import DEVICE_LANES, warp_of

pytestmark = pytest.mark.devices("cpu", "opencl")

WARP = 32  # gpuc.warp_size() on the CPU
BLOCKS = (32, 40, 100)  # one whole warp; a whole and a partial one; three whole and a partial one
KINDS = ("idx", "up", "down", "xor")


@pytest.fixture
def rng(request):
    return np.random.default_rng(zlib.crc32(request.node.name.encode()))


class Warps:
    """The work items of `blocks` blocks of `block` items, in grid order, as warps see them."""

    def __init__(self, block: int, blocks: int = 3, warp: int = WARP) -> None:
        self.items, self.block = block * blocks, block
        self.set_warp(warp)

    def set_warp(self, warp: int) -> None:
        self.warp = warp
        i = np.arange(self.items)
        q = i % self.block
        self.lane = q % warp
        self.base = i - self.lane  # the first item of each item's warp
        self.width = np.minimum(warp, self.block - (q - self.lane))  # the items of each item's warp

    def shuffle(self, values, source, active):
        """What each item's shuffle from lane `source` gives when `active` items take part: the source's
        value, or the item's own where the source is outside its warp or not active."""
        source = np.asarray(source, np.int64)
        inside = (source >= 0) & (source < self.width)
        item = np.where(inside, self.base + source, np.arange(self.items))
        return np.where(inside & active[item], values[item], values)

    def source(self, kind: str, operand):
        operand = np.asarray(operand, np.int64)
        return {"idx": operand % self.warp, "up": self.lane - operand, "down": self.lane + operand,
                "xor": self.lane ^ operand}[kind]

    def ballot(self, pred, active):
        """Each item's ballot of `pred` over the active lanes of its warp (an int64)."""
        bits = np.where(pred & active, np.int64(1) << self.lane, 0)
        out = np.zeros(self.items, np.int64)
        for base in np.unique(self.base):
            mine = self.base == base
            out[mine] = np.bitwise_or.reduce(bits[mine])
        return out

    def launch(self, kernel, *args, block, threads: int = 1) -> None:
        """Launch `kernel`, the model's warps then as wide as the device's for it."""
        self.set_warp(warp_of(kernel, args, block))
        kernel.launch(self.items - 3, *args, block=block, threads=threads)


def trip_counts(rng, items: int, divergent: bool):
    return rng.integers(0, 6, items) if divergent else np.full(items, 4)


# -- every shuffle kind in a loop, its operand carried from one iteration to the next ----------------

@functools.cache
def shuffle_loop(kind: str):
    shuffle = getattr(gpuc, f"shfl_{kind}")

    @gpuc.kernel
    def kernel(v, operand, step, trips, out, last):
        i = gpuc.index(0)
        t, op = v[i], operand[i]
        k = 0
        while k < trips[i]:
            t = t * 3 + shuffle(t, op)
            op = (op + step[i] + k) & 63  # lanes, distances and masks of 32 and more are outside the warp
            k += 1
        out[i] = t
        last[i] = op
    return kernel


def shuffle_loop_reference(warps: Warps, kind: str, v, operand, step, trips):
    t, op = v.copy(), operand.copy()
    for k in range(trips.max(initial=0)):
        active = trips > k
        t = np.where(active, t * 3 + warps.shuffle(t, warps.source(kind, op), active), t)
        op = np.where(active, (op + step + k) & 63, op)
    return t, op


# A shuffle in a loop read lanes that had already gone round it (an xor butterfly gave [6, 10, 11, 18], not 6s).
@pytest.mark.parametrize("divergent", [False, True], ids=["uniform", "divergent"])
@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("kind", KINDS)
def test_shuffle_in_a_loop(kind, block, divergent, rng):
    warps = Warps(block)
    n = warps.items
    v = rng.integers(-1000, 1000, n)
    operand = rng.integers(0, 40, n)
    step = rng.integers(0, 9, n)
    trips = trip_counts(rng, n, divergent)
    out, last = np.zeros(n, np.int64), np.zeros(n, np.int64)
    warps.launch(shuffle_loop(kind), v, operand, step, trips, out, last, block=block, threads=2)
    want, want_last = shuffle_loop_reference(warps, kind, v, operand, step, trips)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(last, want_last)


# -- warp algorithms written as loops, in several types ----------------------------------------------

@gpuc.func
def xor_step(t, m):
    return t + gpuc.shfl_xor(t, m)


@gpuc.kernel
def warp_loops(f, x, g, nxt, dist, out, fout, gout):
    i = gpuc.index(0)
    lane = gpuc.lane_index()
    total = f[i]  # float64: the butterfly sum, through a func
    m = 1
    while m < 32:
        total = xor_step(total, m)
        m *= 2
    scan = x[i]  # int32: Hillis-Steele inclusive scan
    d = 1
    while d < 32:
        y = gpuc.shfl_up(scan, d)
        if lane >= d:
            scan += y
        d *= 2
    red = g[i]  # float32: the tree reduction toward lane 0
    d = 16
    while d > 0:
        red += gpuc.shfl_down(red, d)
        d //= 2
    succ, rank = nxt[i], dist[i]  # list ranking by pointer jumping: the lane itself is shuffled
    for _ in range(5):
        rank += gpuc.shfl_idx(rank, succ)
        succ = gpuc.shfl_idx(succ, succ)
    odd = lane % 2 == 1  # a bool travelling around the warp
    for k in range(4):
        odd = gpuc.shfl_xor(odd, 1 << k) != (lane == k)
    alt = nxt[i]  # two shuffles taking turns, each reached from the other and from itself
    for k in range(5):
        if k % 3 == 0:
            alt = alt * 3 + gpuc.shfl_xor(alt, k + 1)
        else:
            alt = alt * 3 + gpuc.shfl_up(alt, k)
    out[i, 0], out[i, 1], out[i, 2], out[i, 3], out[i, 4] = scan, rank, succ, odd, alt
    fout[i], gout[i] = total, red


# Warp sums, scans, reductions, pointer jumping, alternating shuffles as loops, in five types, one in a func.
@pytest.mark.parametrize("block", BLOCKS)
def test_warp_algorithms_as_loops(block, rng):
    warps = Warps(block)
    n = warps.items
    everyone = np.ones(n, bool)
    f = rng.integers(-50, 50, n).astype(np.float64)
    x = rng.integers(-50, 50, n).astype(np.int32)
    g = rng.integers(-50, 50, n).astype(np.float32)
    nxt = rng.integers(0, WARP, n)
    dist = rng.integers(0, 5, n)
    out, fout, gout = np.zeros((n, 5), np.int64), np.zeros(n), np.zeros(n, np.float32)
    warps.launch(warp_loops, f, x, g, nxt, dist, out, fout, gout, block=block)
    lane = warps.lane
    total, m = f.copy(), 1
    while m < 32:
        total = total + warps.shuffle(total, lane ^ m, everyone)
        m *= 2
    scan, d = x.copy(), 1
    while d < 32:
        scan = np.where(lane >= d, scan + warps.shuffle(scan, lane - d, everyone), scan)
        d *= 2
    red, d = g.copy(), 16
    while d > 0:
        red = red + warps.shuffle(red, lane + d, everyone)
        d //= 2
    succ, rank = nxt.copy(), dist.copy()
    for _ in range(5):  # shfl_idx takes its lane modulo the warp size
        rank = rank + warps.shuffle(rank, succ % warps.warp, everyone)
        succ = warps.shuffle(succ, succ % warps.warp, everyone)
    odd = lane % 2 == 1
    for k in range(4):
        odd = warps.shuffle(odd, lane ^ (1 << k), everyone) != (lane == k)
    alt = nxt.copy()
    for k in range(5):
        source = lane ^ (k + 1) if k % 3 == 0 else lane - k
        alt = alt * 3 + warps.shuffle(alt, source, everyone)
    np.testing.assert_array_equal(out, np.stack([scan, rank, succ, odd, alt], axis=1))
    np.testing.assert_array_equal(fout, total)
    np.testing.assert_array_equal(gout, red)


# -- votes and ballots in loops, the ballot carried into the next iteration's predicate --------------

@gpuc.kernel
def votes_in_a_loop(v, trips, out):
    i = gpuc.index(0)
    lane = gpuc.lane_index()
    t, mask, k = v[i], 0, 0
    while k < trips[i]:
        mask ^= gpuc.int64(gpuc.ballot(((mask >> lane) & 1) == ((t >> k) & 1)))
        if gpuc.vote_any(t % 5 == k):
            t += 7
        if gpuc.vote_all(((mask >> lane) & 1) == 1):
            t = t * 2 + 1
        k += 1
    out[i, 0], out[i, 1] = t, mask


# Votes and ballots in loops: a lane that left its loop (and returned) neither votes nor sets a ballot bit.
@pytest.mark.parametrize("divergent", [False, True], ids=["uniform", "divergent"])
@pytest.mark.parametrize("block", BLOCKS)
def test_votes_in_a_loop(block, divergent, rng):
    warps = Warps(block)
    n = warps.items
    v = rng.integers(-1000, 1000, n)
    trips = trip_counts(rng, n, divergent)
    out = np.zeros((n, 2), np.int64)
    warps.launch(votes_in_a_loop, v, trips, out, block=block, threads=2)
    lane = warps.lane
    t, mask = v.copy(), np.zeros(n, np.int64)
    for k in range(trips.max(initial=0)):
        active = trips > k
        mask = np.where(active, mask ^ warps.ballot(((mask >> lane) & 1) == ((t >> k) & 1), active), mask)
        t = np.where(active & warps_any(warps, t % 5 == k, active), t + 7, t)
        mine = ((mask >> lane) & 1) == 1
        t = np.where(active & ~warps_any(warps, ~mine, active), t * 2 + 1, t)
    np.testing.assert_array_equal(out, np.stack([t, mask], axis=1))


def warps_any(warps: Warps, pred, active):
    return warps.ballot(pred, active) != 0


# -- a loop the warp runs while any lane wants to: shuffles in it carry their distance ---------------

@gpuc.kernel
def vote_controlled_loop(v, trips, out):
    i = gpuc.index(0)
    t, k = v[i], 0
    while gpuc.vote_any(k < trips[i]):
        s = gpuc.shfl_down(t, 1 + (k & 3))
        x = gpuc.shfl_xor(s, k + 1)
        if k < trips[i]:
            t = t * 3 + x
        k += 1
    out[i] = t


# A loop the warp runs while any lane wants to (a vote in its test): every lane shuffles each time, done or not.
@pytest.mark.parametrize("block", BLOCKS)
def test_vote_controlled_loop(block, rng):
    warps = Warps(block)
    n = warps.items
    v = rng.integers(-1000, 1000, n)
    trips = rng.integers(0, 6, n)
    out = np.zeros(n, np.int64)
    warps.launch(vote_controlled_loop, v, trips, out, block=block)
    lane = warps.lane
    everyone = np.ones(n, bool)
    longest = np.zeros(n, np.int64)
    for base in np.unique(warps.base):
        longest[warps.base == base] = trips[warps.base == base].max()
    t = v.copy()
    for k in range(longest.max(initial=0)):
        going = longest > k
        x = warps.shuffle(warps.shuffle(t, lane + 1 + (k & 3), everyone), lane ^ (k + 1), everyone)
        t = np.where(going & (k < trips), t * 3 + x, t)
    np.testing.assert_array_equal(out, t)


# -- syncwarp in a loop: shared memory exchanged within the warp ----------------------------------------

@gpuc.kernel
def syncwarp_loop(v, trips, out):
    s = gpuc.shared.array(128, gpuc.int64)
    i, q, lane = gpuc.index(0), gpuc.thread_index(0), gpuc.lane_index()
    t = v[i]
    s[q] = t
    k = 0
    while k < trips[i]:
        gpuc.syncwarp()
        partner = lane ^ (1 + k % (gpuc.warp_size() - 1))
        p = q - lane + partner
        u = s[p] if p < gpuc.block_dim(0) and partner < gpuc.warp_size() else t
        gpuc.syncwarp()
        t = t * 3 + u
        s[q] = t
        k += 1
    out[i] = t


# syncwarp in loops: a partner reads each iteration's write, and the last one of a lane that left the loop.
@pytest.mark.parametrize("divergent", [False, True], ids=["uniform", "divergent"])
@pytest.mark.parametrize("block", BLOCKS)
def test_syncwarp_in_a_loop(block, divergent, rng):
    warps = Warps(block)
    n = warps.items
    v = rng.integers(-1000, 1000, n)
    trips = trip_counts(rng, n, divergent)
    out = np.zeros(n, np.int64)
    warps.launch(syncwarp_loop, v, trips, out, block=block)
    lane = warps.lane
    t, s = v.copy(), v.copy()
    for k in range(trips.max(initial=0)):
        active = trips > k
        partner = lane ^ (1 + k % (warps.warp - 1))
        u = np.where(partner < warps.width, s[np.minimum(warps.base + partner, n - 1)], t)
        t = np.where(active, t * 3 + u, t)
        s = t.copy()
    np.testing.assert_array_equal(out, t)


# -- 2-D blocks: lanes are the linear thread index ----------------------------------------------------

@gpuc.kernel
def butterfly_2d(v, out):
    x, y = gpuc.index(0), gpuc.index(1)
    t = v[y, x]
    m = 1
    while m < 32:
        t += gpuc.shfl_xor(t, m)
        m *= 2
    out[y, x] = t


# An xor butterfly over 8x5 blocks: warps of 32 and 8 lanes, x fastest; masks past the 8 give a lane its own.
def test_butterfly_in_2d_blocks(rng, gpuc_device):
    v = rng.integers(-1000, 1000, (10, 16))
    out = np.zeros_like(v)
    butterfly_2d.launch((16, 10), v, out, block=(8, 5), threads=2)
    warp = warp_of(butterfly_2d, (v, out), (8, 5))
    if gpuc_device == "opencl" and 8 % warp:
        pytest.skip(f"rows of 8 lanes in sub-groups of {warp}: {DEVICE_LANES}")
    warps, want = Warps(40, 1, warp), np.zeros_like(v)
    for by in range(2):
        for bx in range(2):
            t = v[by * 5:(by + 1) * 5, bx * 8:(bx + 1) * 8].ravel()  # linear index, x fastest
            for m in (1, 2, 4, 8, 16):
                t = t + warps.shuffle(t, warps.lane ^ m, np.ones(40, bool))
            want[by * 5:(by + 1) * 5, bx * 8:(bx + 1) * 8] = t.reshape(5, 8)
    np.testing.assert_array_equal(out, want)
