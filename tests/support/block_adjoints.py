"""Kernels that use blocks (shared memory, barriers, warp operations), for their adjoints' tests, and a
check of an adjoint launch against central finite differences of the primal."""

from __future__ import annotations

import math

import numpy as np

import gpuc

TPB = 64
TILE = 16
BS = 32


@gpuc.kernel
def block_sums(a, out):
    s = gpuc.shared.array(TPB, gpuc.float64)   # the README's reduction, of squares
    t, i = gpuc.thread_index(0), gpuc.index(0)
    s[t] = a[i] * a[i] if i < len(a) else 0.0
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
def matmul(a, b, c):
    sa = gpuc.shared.array((TILE, TILE), gpuc.float64)
    sb = gpuc.shared.array((TILE, TILE), gpuc.float64)
    tx, ty = gpuc.thread_index(0), gpuc.thread_index(1)
    col, row = gpuc.index(0), gpuc.index(1)
    n = a.shape[1]
    acc = 0.0
    for k0 in range(0, n, TILE):
        sa[ty, tx] = a[row, k0 + tx] if row < a.shape[0] and k0 + tx < n else 0.0
        sb[ty, tx] = b[k0 + ty, col] if k0 + ty < n and col < b.shape[1] else 0.0
        gpuc.barrier()
        for k in range(TILE):
            acc += sa[ty, k] * sb[k, tx]
        gpuc.barrier()
    if row < c.shape[0] and col < c.shape[1]:
        c[row, col] = acc


@gpuc.kernel
def halo_stencil(x, y):
    s = gpuc.shared.array(BS + 2, gpuc.float64)
    t, i = gpuc.thread_index(0), gpuc.index(0)
    n = len(x)
    s[t + 1] = x[i] if i < n else 0.0
    if t == 0:
        s[0] = x[i - 1] if i > 0 else 0.0
    if t == BS - 1:
        s[BS + 1] = x[i + 1] if i + 1 < n else 0.0
    gpuc.barrier()
    if i < n:
        y[i] = 0.25 * s[t] + 0.5 * math.sin(s[t + 1]) * s[t + 1] + 0.25 * s[t + 2]


@gpuc.kernel
def warp_sum(x, out):
    i = gpuc.index(0)
    v = x[i] * x[i]
    v += gpuc.shfl_down(v, 16)
    v += gpuc.shfl_down(v, 8)
    v += gpuc.shfl_down(v, 4)
    v += gpuc.shfl_down(v, 2)
    v += gpuc.shfl_down(v, 1)
    if gpuc.lane_index() == 0:
        out[i // gpuc.warp_size()] = v   # the sub-group's width on OpenCL: 4 to 64 lanes


@gpuc.kernel
def own_lanes(x, out):
    # shuffles that read the lane's own value: a distance of 0, and reads past the warp
    i = gpuc.index(0)
    v = x[i]
    u = gpuc.shfl_down(v, 0) + gpuc.shfl_up(v * v, 0) + gpuc.shfl_down(math.sin(v), 40)
    w = gpuc.shfl_up(u, 0) * gpuc.shfl_xor(v, 0) + gpuc.shfl_up(u, 64)
    out[i] = w + gpuc.shfl_down(w, 3)


@gpuc.kernel
def butterfly(x, out):
    i = gpuc.index(0)
    t = math.sin(x[i])
    m = 1
    while m < 32:
        t += gpuc.shfl_xor(t, m) * 0.5
        m *= 2
    out[i] = t


@gpuc.kernel
def gathered(x, k, out):
    i = gpuc.index(0)
    lane = gpuc.lane_index()
    v = gpuc.shfl_idx(x[i] * x[i], (lane * 5 + 3) % 32)   # any lane, several reading one
    w = gpuc.shfl_up(v, 3) + gpuc.shfl_xor(v, k[0])       # an operand known only at run time
    out[i] = w * x[i]


@gpuc.kernel
def prefix_sum(x, out):
    s = gpuc.shared.array(TPB, gpuc.float64)
    t, i = gpuc.thread_index(0), gpuc.index(0)
    s[t] = x[i]
    gpuc.barrier()
    d = 1
    while d < TPB:
        v = s[t - d] if t >= d else 0.0
        gpuc.barrier()
        s[t] += v
        gpuc.barrier()
        d *= 2
    out[i] = s[t] * x[i]


@gpuc.kernel
def shared_atomics(x, w, total):
    acc = gpuc.shared.array(2, gpuc.float64)
    local = gpuc.local.array(3, gpuc.float64)
    t, i = gpuc.thread_index(0), gpuc.index(0)
    if t < 2:
        acc[t] = 0.0
    gpuc.barrier()
    for k in range(3):
        local[k] = x[i] * w[k]
    gpuc.atomic_add(acc, t % 2, local[0] * local[1] + math.exp(local[2]))
    c = gpuc.barrier_count(x[i] > 0.0)
    if t == 0:
        gpuc.atomic_add(total, 0, acc[0] * acc[1] + float(c))


@gpuc.kernel
def rotating_tile(x, y):
    """A shared tile written again on each round of a loop, items reading their neighbours' entries:
    products of values loaded just before (the reverse loads them again, shared memory restored as it
    goes) and a value kept past a store and barriers (the reverse takes it from the tape)."""
    s = gpuc.shared.array(BS, gpuc.float64)
    t, i, n = gpuc.thread_index(0), gpuc.index(0), gpuc.block_dim(0)
    acc = 0.0
    for k in range(len(x) // n):  # a loop of run-time length: its values need a tape
        s[t] = x[i] * (k + 1.0) + acc
        gpuc.barrier()
        acc += s[(t + n - 1) % n] * s[(t + 1) % n]
        kept = s[t]
        gpuc.barrier()
        s[t] = acc * 0.5
        gpuc.barrier()
        acc += kept * s[(t + 1) % n]
        gpuc.barrier()
    y[i] = acc


@gpuc.kernel
def carried_tile(x, y):
    """A tile read before each round's store, so that what the store overwrites matters: the tile written
    before the loop (from x) in the first round, the previous round's after. The rounds count down by a
    tile from an offset, the last tile partial; the reverse restores each tile from x (which the kernel
    never writes) or, for the first round, from what it kept."""
    s = gpuc.shared.array(BS, gpuc.float64)
    t, i, n = gpuc.thread_index(0), gpuc.index(0), gpuc.block_dim(0)
    s[t] = x[i] * 2.0
    gpuc.barrier()
    acc = 0.0
    for k0 in range(len(x) - BS // 2, -BS, -BS):
        acc += s[(t + 1) % n] * s[t]
        gpuc.barrier()
        s[t] = x[k0 + t] * 3.0 if 0 <= k0 + t < len(x) else 0.5
        gpuc.barrier()
    y[i] = acc + s[t]


@gpuc.kernel
def sums_then_scan(x, y):
    """A loop under a branch on the item's own index (its reverse keeps a tape), then a scan in shared
    memory: LLVM keeps the tape's four words across the scan's barriers as one <4 x double>, whose per-item
    slot in the block's scratch memory is 16-byte aligned (an aligned vector move there faulted)."""
    s = gpuc.shared.array(TPB, gpuc.float64)
    t = gpuc.thread_index(0) + gpuc.block_dim(0) * gpuc.thread_index(1)
    bd = gpuc.block_dim(0) * gpuc.block_dim(1)
    ix, iy = gpuc.index(0), gpuc.index(1)
    inside = ix < y.shape[1] and iy < y.shape[0]
    v = x[iy, ix] if inside else 0.25
    w = math.cos(v)
    s[t] = math.exp(0.5 * math.sin(math.cos(w)))
    if inside:
        for k in range(x.shape[0]):
            w = w + 0.25 * math.cos(x[k, ix] * v)
    s[t] = w / (1.5 + math.cos(w))
    gpuc.barrier()
    e = 1
    while e < bd:
        p = s[t - e] if t >= e else 0.0
        gpuc.barrier()
        s[t] += p
        gpuc.barrier()
        e *= 2
    if inside:
        y[iy, ix] += s[t]


@gpuc.kernel
def dynamic_sums(a, out):
    """The README's tree reduction in `gpuc.shared.dynamic` memory, its length (the launch's `shared=`
    bytes) steering the tree and scaling the sums."""
    s = gpuc.shared.dynamic(gpuc.float64)
    t, i = gpuc.thread_index(0), gpuc.index(0)
    n = len(s)
    if t < n:
        s[t] = a[i] * a[i] if i < len(a) else 0.0
    gpuc.barrier()
    step = n // 2
    while step > 0:
        if t < step:
            s[t] += s[t + step]
        gpuc.barrier()
        step //= 2
    if t == 0:
        out[gpuc.block_index(0)] = s[0] * n


@gpuc.kernel
def dynamic_and_static(x, y):
    """A halo in dynamic shared memory of 3 float64 per item (24 bytes each: a size no multiple of 16), a
    static shared array beside it, and each item's view of the dynamic array's length."""
    d = gpuc.shared.dynamic(gpuc.float64)
    s = gpuc.shared.array(BS, gpuc.float64)
    t, i, nb = gpuc.thread_index(0), gpuc.index(0), gpuc.block_dim(0)
    v = x[i] if i < len(x) else 0.0
    d[3 * t] = v * v
    d[3 * t + 1] = math.sin(v)
    d[3 * t + 2] = float(len(d))
    s[t] = v
    gpuc.barrier()
    left = d[3 * ((t + nb - 1) % nb)]
    right = d[3 * ((t + 1) % nb) + 1]
    if i < len(y):
        y[i] = left * s[(t + 1) % nb] + right * v + d[3 * t + 2] * v


def finite_differences(kernel, arrays, n, block, *, threads=1, h=1e-6, samples=40, seed=1, shared=0):
    """The worst relative difference between the shadows after `gpuc.adjoint(kernel)` launched with a
    random seed in every float array's shadow and the gradient of L = Σ seed · arrays after the
    primal launch, by central differences (at most `samples` entries per array)."""
    rng = np.random.default_rng(seed)
    floats = [a.dtype.kind == "f" for a in arrays]
    seeds = [rng.uniform(-1, 1, a.shape) if f else None for a, f in zip(arrays, floats)]

    def loss(values):
        values = [v.copy() for v in values]
        kernel.launch(n, *values, block=block, threads=threads, shared=shared)
        return sum((s * v).sum() for s, v in zip(seeds, values) if s is not None)

    args, shadows = [], []
    for a, s in zip(arrays, seeds):
        args.append(a.copy())
        if s is not None:
            shadows.append(s.copy())
            args.append(shadows[-1])
    gpuc.adjoint(kernel).launch(n, *args, block=block, threads=threads, shared=shared)
    worst = 0.0
    shadow = iter(shadows)
    for k, (a, s) in enumerate(zip(arrays, seeds)):
        if s is None:
            continue
        got = next(shadow).reshape(-1)
        for j in range(0, a.size, max(1, a.size // samples)):
            plus, minus = [v.copy() for v in arrays], [v.copy() for v in arrays]
            plus[k].reshape(-1)[j] += h
            minus[k].reshape(-1)[j] -= h
            want = (loss(plus) - loss(minus)) / (2 * h)
            worst = max(worst, abs(got[j] - want) / max(1.0, abs(want)))
    return worst
