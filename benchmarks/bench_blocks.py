"""Blocks on the CPU: barrier kernels against the same algorithms written without blocks, and against NumPy.

    .venv/bin/python benchmarks/bench_blocks.py [--quick] [--reps N] [--json OUT]

- matmul of 512x512 float32: tiles of 16x16 in shared memory (block=(16, 16), two barriers per
  tile) against a block-free kernel (one output per work item, its dot product read from the
  arrays) and NumPy's `A @ B` (OpenBLAS; its one-thread figure from a subprocess with
  OPENBLAS_NUM_THREADS=1);
- sum of 10M float32, the way CUDA reductions are written: each work item sums a chunk of CHUNK
  elements (eight accumulators), a shared-memory tree per block of 256 combines the items' sums and
  one atomic add per block the blocks'; against the same algorithm without blocks (each work item
  adds its chunk's sum atomically) and `a.sum()`. Also a tree of one element per work item, then the
  same kernel over the block partials until one is left, against block-free kernels (each work item
  sums a chunk, contiguous or grid-stride, with one accumulator);
each on one thread and on all the CPU's threads, the best of --reps runs after a warm-up launch.
Ratios: barrier kernel / block-free kernel, and barrier kernel / NumPy (above 1: the barrier
kernel is slower).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import numpy as np

import _common  # noqa: F401 - puts the repository on sys.path
from _common import banner, machine_facts, ms, table, timed, write_json

import gpuc

TILE = 16
TPB = 256
CHUNK = 4096  # elements each work item of the block-free sums adds up
ITEM_CHUNK = 1024  # elements each work item of the coarsened block reduction (and its block-free twin) sums

# -- matmul ---------------------------------------------------------------------------------------


@gpuc.kernel
def matmul_tiled(a, b, c):
    sa = gpuc.shared.array((TILE, TILE), gpuc.float32)
    sb = gpuc.shared.array((TILE, TILE), gpuc.float32)
    tx, ty = gpuc.thread_index(0), gpuc.thread_index(1)
    col, row = gpuc.index(0), gpuc.index(1)
    m, k, n = a.shape[0], a.shape[1], b.shape[1]
    acc = gpuc.float32(0.0)
    for k0 in range(0, k, TILE):
        sa[ty, tx] = a[row, k0 + tx] if row < m and k0 + tx < k else gpuc.float32(0.0)
        sb[ty, tx] = b[k0 + ty, col] if k0 + ty < k and col < n else gpuc.float32(0.0)
        gpuc.barrier()
        for kk in range(TILE):
            acc += sa[ty, kk] * sb[kk, tx]
        gpuc.barrier()
    if row < m and col < n:
        c[row, col] = acc


@gpuc.kernel
def matmul_plain(a, b, c):
    col, row = gpuc.index(0), gpuc.index(1)
    acc = gpuc.float32(0.0)
    for k in range(a.shape[1]):
        acc += a[row, k] * b[k, col]
    c[row, col] = acc


# -- sum ------------------------------------------------------------------------------------------


@gpuc.kernel
def sum_tree(a, partials):
    s = gpuc.shared.array(TPB, gpuc.float32)
    t, i = gpuc.thread_index(0), gpuc.index(0)
    s[t] = a[i] if i < len(a) else gpuc.float32(0.0)
    gpuc.barrier()
    stride = TPB // 2
    while stride > 0:
        if t < stride:
            s[t] += s[t + stride]
        gpuc.barrier()
        stride //= 2
    if t == 0:
        partials[gpuc.block_index(0)] = s[0]


@gpuc.kernel
def sum_chunks(a, total):
    start = gpuc.index(0) * CHUNK
    acc = gpuc.float32(0.0)
    for j in range(start, min(start + CHUNK, len(a))):
        acc += a[j]
    gpuc.atomic_add(total, 0, acc)


@gpuc.kernel
def sum_grid_stride(a, total):
    acc = gpuc.float32(0.0)
    for j in range(gpuc.index(0), len(a), gpuc.ndrange(0)):
        acc += a[j]
    gpuc.atomic_add(total, 0, acc)


@gpuc.func
def chunk_sum(a, start, stop):
    """a[start:stop].sum() with eight accumulators (independent additions, as a GPU thread's ILP)."""
    s0, s1, s2, s3 = gpuc.float32(0.0), gpuc.float32(0.0), gpuc.float32(0.0), gpuc.float32(0.0)
    s4, s5, s6, s7 = gpuc.float32(0.0), gpuc.float32(0.0), gpuc.float32(0.0), gpuc.float32(0.0)
    j = start
    while j + 8 <= stop:
        s0 += a[j]
        s1 += a[j + 1]
        s2 += a[j + 2]
        s3 += a[j + 3]
        s4 += a[j + 4]
        s5 += a[j + 5]
        s6 += a[j + 6]
        s7 += a[j + 7]
        j += 8
    while j < stop:
        s0 += a[j]
        j += 1
    return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))


@gpuc.kernel
def sum_blocks(a, total):
    s = gpuc.shared.array(TPB, gpuc.float32)
    t = gpuc.thread_index(0)
    start = gpuc.index(0) * ITEM_CHUNK
    s[t] = chunk_sum(a, start, min(start + ITEM_CHUNK, len(a)))
    gpuc.barrier()
    stride = TPB // 2
    while stride > 0:
        if t < stride:
            s[t] += s[t + stride]
        gpuc.barrier()
        stride //= 2
    if t == 0:
        gpuc.atomic_add(total, 0, s[0])


@gpuc.kernel
def sum_items(a, total):
    start = gpuc.index(0) * ITEM_CHUNK
    gpuc.atomic_add(total, 0, chunk_sum(a, start, min(start + ITEM_CHUNK, len(a))))


def coarsened_sum(kernel, a, threads, block):
    total = np.zeros(1, np.float32)
    kernel.launch(-(-len(a) // ITEM_CHUNK), a, total, threads=threads, block=block)
    return total[0]


def tree_sum(a, threads):
    """The sum of `a` by sum_tree, launched over its own partials until one is left."""
    while True:
        partials = np.empty(-(-len(a) // TPB), np.float32)
        sum_tree.launch(len(a), a, partials, block=TPB, threads=threads)
        if len(partials) == 1:
            return partials[0]
        a = partials


def block_free_sum(kernel, a, threads):
    total = np.zeros(1, np.float32)
    kernel.launch(-(-len(a) // CHUNK), a, total, threads=threads)
    return total[0]


# -- timing ---------------------------------------------------------------------------------------


def best(fn, reps: int) -> tuple[float, object]:
    """(the least seconds of `reps` calls after a warm-up call, the warm-up's result)."""
    result = fn()
    return min(timed(fn)[0] for _ in range(reps)), result


NUMPY_ONE_THREAD = """
import sys, time
import numpy as np
n, reps = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
a, b = rng.standard_normal((n, n), np.float32), rng.standard_normal((n, n), np.float32)
a @ b
times = []
for _ in range(reps):
    start = time.perf_counter()
    a @ b
    times.append(time.perf_counter() - start)
print(min(times))
"""


def numpy_matmul_one_thread(n: int, reps: int) -> float:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", NUMPY_ONE_THREAD, str(n), str(reps)], env=env, check=True,
                         capture_output=True, text=True, timeout=600)
    return float(out.stdout.strip())


def run_matmul(n: int, reps: int, thread_counts) -> dict:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n), np.float32), rng.standard_normal((n, n), np.float32)
    want = a.astype(np.float64) @ b
    c_tiled, c_plain = np.zeros((n, n), np.float32), np.zeros((n, n), np.float32)
    rows = {}
    for t in thread_counts:
        tiled, _ = best(lambda: matmul_tiled.launch((n, n), a, b, c_tiled, block=(TILE, TILE), threads=t), reps)
        plain, _ = best(lambda: matmul_plain.launch((n, n), a, b, c_plain, threads=t), reps)
        rows[t] = {"tiled": tiled, "plain": plain}
    rows[thread_counts[0]]["numpy"] = numpy_matmul_one_thread(n, reps)
    rows[thread_counts[-1]]["numpy"] = best(lambda: a @ b, reps)[0]
    scale = np.abs(want).max()
    errors = {name: float(np.abs(c - want).max() / scale) for name, c in (("tiled", c_tiled), ("plain", c_plain))}
    return {"n": n, "times": rows, "errors": errors}


def run_sum(n: int, reps: int, thread_counts) -> dict:
    a = np.random.default_rng(1).random(n, dtype=np.float32)
    want = a.sum(dtype=np.float64)
    rows, errors = {}, {}
    for t in thread_counts:
        tree, got_tree = best(lambda: tree_sum(a, t), reps)
        chunks, got_chunks = best(lambda: block_free_sum(sum_chunks, a, t), reps)
        stride, got_stride = best(lambda: block_free_sum(sum_grid_stride, a, t), reps)
        blocks, got_blocks = best(lambda: coarsened_sum(sum_blocks, a, t, TPB), reps)
        items, got_items = best(lambda: coarsened_sum(sum_items, a, t, None), reps)
        rows[t] = {"tree": tree, "chunks": chunks, "grid-stride": stride, "blocks": blocks, "items": items}
        for name, got in (("tree", got_tree), ("chunks", got_chunks), ("grid-stride", got_stride),
                          ("blocks", got_blocks), ("items", got_items)):
            errors[name] = max(errors.get(name, 0.0), abs(float(got) - want) / want)
    numpy, got = best(lambda: a.sum(), reps)
    errors["numpy"] = abs(float(got) - want) / want
    for t in thread_counts:
        rows[t]["numpy"] = numpy  # a.sum() runs on one thread
    return {"n": n, "times": rows, "errors": errors}


def report(matmul: dict, total: dict, thread_counts) -> None:
    rows = []
    for t in thread_counts:
        m = matmul["times"][t]
        rows.append([f"{t}", ms(m["tiled"]), ms(m["plain"]), ms(m["numpy"]), f"{m['tiled'] / m['plain']:.2f}",
                     f"{m['tiled'] / m['numpy']:.1f}"])
    print(table(["threads", "tiled (ms)", "block-free (ms)", "A @ B (ms)", "tiled/block-free", "tiled/numpy"], rows,
                title=f"== matmul {matmul['n']}x{matmul['n']} float32, tiles {TILE}x{TILE} (best of runs) =="))
    print("   relative error (max |C - C64| / max |C64|): " +
          ", ".join(f"{k} {v:.1e}" for k, v in matmul["errors"].items()))
    print()
    rows = []
    for t in thread_counts:
        s = total["times"][t]
        rows.append([f"{t}", ms(s["blocks"]), ms(s["items"]), ms(s["numpy"]), f"{s['blocks'] / s['items']:.2f}",
                     f"{s['blocks'] / s['numpy']:.2f}"])
    print(table(["threads", "block reduction (ms)", "block-free (ms)", "a.sum() (ms)", "blocks/block-free",
                 "blocks/numpy"], rows,
                title=f"== sum of {total['n']:,} float32: {ITEM_CHUNK} elements per work item, a tree per block "
                      f"of {TPB}, an atomic per block (best of runs; a.sum() is one thread) =="))
    print()
    rows = []
    for t in thread_counts:
        s = total["times"][t]
        rows.append([f"{t}", ms(s["tree"]), ms(s["chunks"]), ms(s["grid-stride"]), ms(s["numpy"]),
                     f"{s['tree'] / s['chunks']:.2f}", f"{s['tree'] / s['grid-stride']:.2f}",
                     f"{s['tree'] / s['numpy']:.1f}"])
    print(table(["threads", "tree (ms)", "chunks (ms)", "grid-stride (ms)", "a.sum() (ms)", "tree/chunks",
                 "tree/grid-stride", "tree/numpy"], rows,
                title=f"== sum of {total['n']:,} float32, one element per work item, blocks of {TPB} (best of runs) =="))
    print("   relative error against the float64 sum: " + ", ".join(f"{k} {v:.1e}" for k, v in total["errors"].items()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="256x256 and 1M elements, 3 runs")
    ap.add_argument("--reps", type=int, help="timed runs per measurement (default 7, 3 with --quick)")
    ap.add_argument("--json", help="write the results to this file")
    args = ap.parse_args()
    reps = args.reps or (3 if args.quick else 7)
    thread_counts = sorted({1, os.cpu_count() or 1})
    facts = machine_facts()
    print(banner(facts))
    print()
    matmul = run_matmul(256 if args.quick else 512, reps, thread_counts)
    total = run_sum(1_000_000 if args.quick else 10_000_000, reps, thread_counts)
    report(matmul, total, thread_counts)
    if args.json:
        write_json(args.json, {"facts": facts, "matmul": matmul, "sum": total, "reps": reps})
    return 0


if __name__ == "__main__":
    sys.exit(main())
