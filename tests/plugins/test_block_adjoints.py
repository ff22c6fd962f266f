"""Adjoints of kernels that use blocks: shared memory, barriers, warp shuffles and votes, atomics into
shared and global memory, on the CPU (1 and 2 threads, partial blocks and warps) against central
finite differences, and compiled for PTX, GCN and SPIR-V."""

from __future__ import annotations

import math

import numpy as np
import pytest
from support.block_adjoints import (BS, TILE, TPB, block_sums, butterfly, carried_tile, dynamic_and_static, dynamic_sums,
                                    sums_then_scan,
                                    finite_differences, gathered, halo_stencil, matmul, own_lanes, prefix_sum,
                                    rotating_tile, shared_atomics, warp_sum)

import gpuc
from gpuc.frontend.constructs.reverse import CONCURRENT

RNG = np.random.default_rng(0)
U = lambda *shape: RNG.uniform(-1.0, 1.0, shape)  # noqa: E731

# name -> (kernel, arrays, launch size, block)
CASES = {
    "block_sums": (block_sums, [U(250), np.zeros(4)], 256, TPB),
    "tiled_matmul": (matmul, [U(40, 24), U(24, 36), np.zeros((40, 36))], (48, 48), (TILE, TILE)),
    "halo_stencil": (halo_stencil, [U(100), np.zeros(100)], 128, BS),
    "warp_shuffle_sum": (warp_sum, [U(96), np.zeros(24)], 96, 96),  # one entry per warp of 4 lanes or more
    "warp_shuffle_sum_partial_warp": (warp_sum, [U(96), np.zeros(24)], 72, 72),
    "butterfly": (butterfly, [U(64), np.zeros(64)], 64, 64),
    # shfl_down(v, 0) counted the cotangent twice: once as the lane reading itself, once as a read
    # outside the warp (which keeps the lane's own value)
    "own_lane_shuffles": (own_lanes, [U(64), np.zeros(64)], 50, 64),
    "butterfly_partial_warps": (butterfly, [U(64), np.zeros(64)], 50, 25),
    "gathered_shuffles": (gathered, [U(64), np.array([6], np.int64), np.zeros(64)], 45, 45),
    "prefix_sum": (prefix_sum, [U(128), np.zeros(128)], 128, TPB),
    "shared_atomics_and_votes": (shared_atomics, [U(48), U(3), np.zeros(1)], 48, 16),
    "rotating_tile": (rotating_tile, [U(3 * BS), np.zeros(3 * BS)], 3 * BS, BS),
    "carried_tile": (carried_tile, [U(3 * BS), np.zeros(3 * BS)], 3 * BS, BS),
    "sums_then_scan": (sums_then_scan, [U(12, 15), U(12, 15)], (15, 12), (3, 3)),
    "dynamic_shared_sums": (dynamic_sums, [U(250), np.zeros(4)], 256, TPB),
    "dynamic_shared_sums_shorter_than_the_block": (dynamic_sums, [U(250), np.zeros(4)], 256, TPB),
    "dynamic_and_static_shared": (dynamic_and_static, [U(90), np.zeros(90)], 96, BS),
}
# the launches' `shared=` bytes: 776 = 3 float64 per item and one more, no multiple of 16
SHARED = {"dynamic_shared_sums": TPB * 8, "dynamic_shared_sums_shorter_than_the_block": 16 * 8,
          "dynamic_and_static_shared": 3 * BS * 8 + 8}


# Adjoints of kernels with blocks were refused; the reverse of a barrier is a barrier, shared arrays
# have zeroed shadows and shuffles send cotangents back to the lanes they came from.
@pytest.mark.devices("cpu", "opencl")
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", sorted(CASES))
def test_adjoint_matches_finite_differences(name, threads, gpuc_device):
    kernel, arrays, n, block = CASES[name]
    assert finite_differences(kernel, arrays, n, block, threads=threads, shared=SHARED.get(name, 0)) < 1e-6


@pytest.mark.devices("cpu", "opencl")
def test_seed_consumed_and_primal_effects():
    a = np.linspace(-1.0, 1.0, 256)
    da, out, dout = np.zeros(256), np.zeros(4), np.arange(1.0, 5.0)
    gpuc.adjoint(block_sums).launch(256, a, da, out, dout, block=TPB)
    np.testing.assert_allclose(out, [(a[k * TPB:(k + 1) * TPB] ** 2).sum() for k in range(4)], rtol=1e-13)
    np.testing.assert_array_equal(dout, 0.0)
    np.testing.assert_allclose(da, 2 * a * np.repeat(np.arange(1.0, 5.0), TPB), rtol=1e-14)


A1, A2 = gpuc.Array[gpuc.float64, 1, "C"], gpuc.Array[gpuc.float64, 2, "C"]
I1 = gpuc.Array[gpuc.int64, 1, "C"]
TYPES = {"block_sums": (A1,) * 4, "tiled_matmul": (A2,) * 6, "halo_stencil": (A1,) * 4,
         "warp_shuffle_sum": (A1,) * 4, "butterfly": (A1,) * 4, "gathered_shuffles": (A1, A1, I1, A1, A1),
         "prefix_sum": (A1,) * 4, "shared_atomics_and_votes": (A1,) * 6, "rotating_tile": (A1,) * 4,
         "carried_tile": (A1,) * 4, "sums_then_scan": (A2,) * 4,
         "own_lane_shuffles": (A1,) * 4, "dynamic_shared_sums": (A1,) * 4, "dynamic_and_static_shared": (A1,) * 4}


def _compile(name, target, output):
    kernel = CASES[name][0]
    job = gpuc.CompilerJob((gpuc.adjoint(kernel), TYPES[name]),
                           gpuc.CompilerConfig(target, kernel=True, whole_blocks=True))
    return gpuc.compile(job, output).output


@pytest.mark.parametrize("name", sorted(TYPES))
def test_adjoint_compiles_for_ptx(name, ptxas):
    ptxas(_compile(name, gpuc.PTXTarget(cap="sm_90"), "asm"))


# Kernels whose adjoints keep a tape (the matmul's loop over tiles, the tile's rounds, the tree over dynamic
# shared memory of run-time depth): on GCN and SPIR-V, which have no allocator, in a buffer of its own
# per work item (tape.HEAPLESS_BYTES), which these fit in.
NO_TAPE = {"tiled_matmul", "rotating_tile", "dynamic_shared_sums", "dynamic_shared_sums_shorter_than_the_block"}


def _reloaded(name) -> int:
    """How many loads from shared memory the CPU adjoint of CASES[name] loads again in its reverse."""
    trace = gpuc.compile(gpuc.CompilerJob((gpuc.adjoint(CASES[name][0]), TYPES[name]), gpuc.CompilerConfig(
        gpuc.NativeTarget(), kernel=True, whole_blocks=True)), "asm").trace
    [found] = [dict(t.details)["reloaded shared loads"] for t in trace.transformations
               if "reloaded shared loads" in dict(t.details)]
    return found


# Values loaded from shared memory inside a loop went on every item's tape (the tiled matmul's items
# taped a row and a column of each tile); the reverse now restores shared memory and loads them again.
def test_shared_loads_used_at_once_are_loaded_again():
    assert _reloaded("tiled_matmul") == 2 * TILE  # sa[ty, kk] and sb[kk, tx], the loop over kk unrolled
    assert _reloaded("rotating_tile") == 3        # the three reads of neighbours, not `kept`
    assert _reloaded("shared_atomics_and_votes") == 0  # atomics into shared memory: everything on the tape


# The reverse of the loop over tiles goes round as often as the forward did, and needs each tile as the
# forward saw it. The loop runs once per item: its counter lives in a stack slot that the reverse steps back
# (which way its header was entered follows: the first tile or a later one), and what each tile's stores
# into shared memory overwrote is the previous tile, loaded again from `a` and `b`, which the kernel never
# writes and no other argument overlaps (the launch checks). So the adjoint keeps no tape at all, and the
# CPU's loops over items find every region left alike by all items (none looks for items that went
# elsewhere).
def test_tiled_loops_keep_no_tape():
    kernel, arrays, n, block = CASES["tiled_matmul"]
    args = [x for a in arrays for x in (a, np.zeros_like(a))]
    ir = gpuc.adjoint(kernel).inspect(*args, block=block).llvm
    assert "gpuc.autodiff.tape" not in ir
    assert "diverged.items" not in ir


# ... and so compile for the GPUs (the launch compiles that variant for a GPU too, its arrays checked alike).
@pytest.mark.parametrize("name", ["tiled_matmul", "carried_tile"])
def test_adjoints_that_load_tiles_again_compile_for_the_gpus(name, ptxas, spirv_val):
    adjoint = gpuc.adjoint(CASES[name][0])
    kernel = adjoint._kernel(adjoint._layout(TYPES[name]), CONCURRENT, None, True)
    for target in (gpuc.PTXTarget(cap="sm_90"), gpuc.GCNTarget(), gpuc.SPIRVTarget()):
        job = gpuc.CompilerJob((kernel, TYPES[name]), gpuc.CompilerConfig(target, kernel=True, whole_blocks=True))
        llvm_ir = gpuc.compile(job, "llvm").output
        assert "gpuc.autodiff.tape" not in llvm_ir and "tape.first" not in llvm_ir, target
        code = gpuc.compile(job, "asm" if isinstance(target, gpuc.PTXTarget) else "obj").output
        if isinstance(target, gpuc.PTXTarget):
            ptxas(code)
        elif isinstance(target, gpuc.SPIRVTarget):
            spirv_val(code)
        else:
            assert code


# Where two arguments share memory, an array the kernel never writes through its own parameter may be
# written through another: the launch takes the adjoint that keeps what the tiles overwrote on the tape.
# The same gradients either way.
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("overlap", ["same array", "overlapping rows"])
def test_overlapping_arguments_keep_what_the_reverse_needs_on_the_tape(overlap, threads):
    big = U(40, 24)
    a, b = (big[:24], big[:24]) if overlap == "same array" else (big[:24], big[16:])
    seed = U(24, 24)

    def gradients(a, b):
        args = [a, np.zeros_like(a), b, np.zeros_like(b), np.zeros((24, 24)), seed.copy()]
        gpuc.adjoint(matmul).launch((32, 32), *args, block=(TILE, TILE), threads=threads)
        return args, args[1], args[3], args[4]

    args, da, db, c = gradients(a, b)
    _, da2, db2, c2 = gradients(a.copy(), b.copy())
    np.testing.assert_array_equal(c, c2)
    np.testing.assert_array_equal(da, da2)
    np.testing.assert_array_equal(db, db2)
    np.testing.assert_allclose(da, seed @ b.T, rtol=1e-12)
    assert "gpuc.autodiff.tape" in gpuc.adjoint(matmul).inspect(*args, block=(TILE, TILE)).llvm


@gpuc.kernel
def tiles_then_in_place(x, w):
    # one block: every item reads the tiles of w, then (after the loop's last barrier) writes its own w[t]
    s = gpuc.shared.array(TILE, gpuc.float64)
    t = gpuc.thread_index(0)
    acc = 0.0
    for k0 in range(0, len(w), TILE):
        s[t] = w[k0 + t] * x[t]
        gpuc.barrier()
        for k in range(TILE):
            acc += s[k] * s[(k + t) % TILE]
        gpuc.barrier()
    w[t] = acc


# An array the kernel writes is not loaded again in the reverse (the tiles of w are gone by then): what the
# tiles' stores overwrote stays on the tape.
@pytest.mark.parametrize("threads", [1, 2])
def test_tiles_of_an_array_the_kernel_writes_stay_on_the_tape(threads):
    assert finite_differences(tiles_then_in_place, [U(TILE), U(3 * TILE)], TILE, TILE, threads=threads) < 1e-6
    ir = gpuc.adjoint(tiles_then_in_place).inspect(U(TILE), np.zeros(TILE), U(3 * TILE), np.zeros(3 * TILE),
                                                   block=TILE).llvm
    assert "gpuc.autodiff.tape" in ir


@pytest.mark.parametrize("name", sorted(TYPES))
def test_adjoint_compiles_for_gcn(name):
    code = _compile(name, gpuc.GCNTarget(), "obj")
    assert code
    if name in NO_TAPE - {"dynamic_shared_sums"}:  # an outgrown tape traps (no allocator to grow it)
        assert "s_trap" in _compile(name, gpuc.GCNTarget(), "asm")
    # (the tree halves its step: at most 59 rounds of one 32-byte record each, which LLVM proves fit)


@pytest.mark.parametrize("name", sorted(TYPES))
def test_adjoint_compiles_for_spirv(name, spirv_val):
    spirv_val(_compile(name, gpuc.SPIRVTarget(), "obj"))


@gpuc.kernel
def grid_synced(x, y):
    i = gpuc.index(0)
    y[i] = x[i] * x[i]
    gpuc.grid_barrier()
    x[i] = y[(i + 1) % len(y)]


@pytest.mark.devices("cpu", "opencl")
def test_grid_barrier_is_a_located_refusal():
    x, y = np.ones(8), np.zeros(8)
    with pytest.raises(gpuc.CompilationError, match="grid barrier is not supported") as info:
        gpuc.adjoint(grid_synced).launch(8, x, np.zeros(8), y, np.zeros(8), block=4)
    assert "split the kernel in two launches" in str(info.value)
    # located at the barrier (its site operand: the call has no debug location), not at the kernel's def
    line = grid_synced.py_func.__code__.co_firstlineno + 4
    assert info.value.location.line == line and info.value.location.file.endswith("test_block_adjoints.py")
    assert "gpuc.grid_barrier()" in str(info.value)


@gpuc.kernel
def shuffled_inside(x, y):
    i = gpuc.index(0)
    inside = i < len(y)
    v = x[i] if inside else 0.25
    u = gpuc.shfl_down(v * v, 8)
    if inside:
        y[i] = u


@gpuc.kernel
def voted_inside(x, y):
    i = gpuc.index(0)
    inside = i < len(y)
    v = x[i] if inside else 0.25
    if gpuc.barrier_any(v > 0.0):
        v = 2.0 * v
    if inside:
        y[i] = v * v


# The reverse sweep's own shuffles and barriers were declared without `convergent` and moved into a
# branch that items outside the arrays skip: "work items ... arrived at different barriers".
@pytest.mark.devices("cpu", "opencl")
@pytest.mark.parametrize("kernel, n", [(shuffled_inside, 40), (voted_inside, 32)], ids=["shfl_down", "barrier_any"])
def test_reverse_synchronization_stays_where_every_item_reaches_it(kernel, n):
    assert finite_differences(kernel, [U(15), np.zeros(15)], n, n) < 1e-6


@gpuc.kernel
def broadcast_first(x, y):
    # every item reads s[0], and items 2k and 2k + 1 read s[k]: in the reverse, several items add into one
    # element of the shared shadow, which the CPU's loop over items must keep in item order
    # (SERIAL_ITEMS_ATTRIBUTE), not run in lanes
    s = gpuc.shared.array(TPB, gpuc.float64)
    t, i = gpuc.thread_index(0), gpuc.index(0)
    s[t] = x[i] if i < len(x) else 0.0
    gpuc.barrier()
    if i < len(x):
        y[i] = s[0] * x[i] + s[t // 2]


@pytest.mark.parametrize("threads", [1, 2])
def test_adds_of_several_items_into_one_shared_shadow_element_are_all_kept(threads):
    n = 3 * TPB - 7
    x, dy = U(n), U(n)
    dx, y = np.zeros(n), np.zeros(n)
    gpuc.adjoint(broadcast_first).launch(3 * TPB, x, dx, y, dy.copy(), block=TPB, threads=threads)
    want = np.zeros(n)
    for start in range(0, n, TPB):
        xs, ds = x[start:start + TPB], dy[start:start + TPB]
        mine = want[start:start + TPB]
        mine += ds * xs[0]                    # d(s0 * x[i]) / dx[i]
        mine[0] += (ds * xs).sum()            # ... / d s0, summed over the block's items
        np.add.at(mine, np.arange(len(xs)) // 2, ds)  # s[t // 2]: items 2k and 2k + 1 read x[k]
    np.testing.assert_allclose(dx, want, rtol=1e-12, atol=1e-14)
    kernel = gpuc.adjoint(broadcast_first).inspect(x, dx, y, dy, block=TPB).llvm
    assert "gpuc-serial-items" in kernel


@gpuc.kernel
def read_by_all(x, y):
    s = gpuc.shared.array(1, gpuc.float64)
    t, i = gpuc.thread_index(0), gpuc.index(0)
    if t == 0:
        s[0] = x[i]
    gpuc.barrier()
    y[i] = s[0] * 1.5


def test_adds_into_a_shared_shadow_element_keep_the_items_order():
    # Every item reads s[0], so the reverse adds every item's cotangent into its shadow, in item order on
    # the CPU. LLVM took the loop's vector width hint as leave to sum them in eight lanes (118.012 here
    # instead of 112.7515); such loops get no width hint now.
    n, tpb = 128, 64
    dy = np.tile([1e16, 1.0, -1e16, 3.0, 0.5, 1e-3, 7.0, -2.0], n // 8)
    dx = np.zeros(n)
    gpuc.adjoint(read_by_all).launch(n, np.arange(1.0, n + 1), dx, np.zeros(n), dy.copy(), block=tpb, threads=1)
    want = np.zeros(n)
    for b in range(n // tpb):
        for v in dy[b * tpb:(b + 1) * tpb]:
            want[b * tpb] += 1.5 * v
    np.testing.assert_array_equal(dx, want)


# gpuc.shared.dynamic was refused in adjoints. The adjoint is launched with the primal's `shared=`: it runs
# with the primal's bytes and, from the next multiple of 16, their shadow, and the kernel sees the primal's
# size (len(d) enters y, and its gradient).
@pytest.mark.devices("cpu", "opencl")
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shared", [3 * BS * 8, 3 * BS * 8 + 8, 3 * BS * 8 + 24, 3 * BS * 8 + 40])
def test_dynamic_shared_memory_and_its_shadow(shared, threads):
    x = np.linspace(-1.0, 1.0, 90)
    want = np.zeros(90)
    dynamic_and_static.launch(96, x, want, block=BS, shared=shared, threads=threads)
    y, dx, dy = np.zeros(90), np.zeros(90), np.ones(90)
    gpuc.adjoint(dynamic_and_static).launch(96, x, dx, y, dy, block=BS, shared=shared, threads=threads)
    np.testing.assert_array_equal(y, want)   # the primal's effects, with len(d) = shared // 8
    np.testing.assert_array_equal(dy, 0.0)
    t = np.arange(96) % BS
    v = np.where(np.arange(96) < 90, np.concatenate([x, np.zeros(6)]), 0.0)
    nxt, prv = (np.arange(96) // BS) * BS + (t + 1) % BS, (np.arange(96) // BS) * BS + (t + BS - 1) % BS
    ref = np.zeros(96)
    for i in range(90):  # y[i] = v[prv]^2 * v[nxt] + sin(v[nxt]) * v[i] + len(d) * v[i]
        ref[prv[i]] += 2 * v[prv[i]] * v[nxt[i]]
        ref[nxt[i]] += v[prv[i]] ** 2 + math.cos(v[nxt[i]]) * v[i]
        ref[i] += math.sin(v[nxt[i]]) + shared // 8
    np.testing.assert_allclose(dx, ref[:90], rtol=1e-13, atol=1e-13)


# gpuc.Tape records the launch's `shared=` and its backward launches the adjoint as the primal was.
def test_a_tape_runs_the_adjoint_over_dynamic_shared_memory():
    a, out = np.linspace(-1.0, 1.0, 256), np.zeros(4)
    with gpuc.Tape() as tape:
        dynamic_sums.launch(256, a, out, block=TPB, shared=TPB * 8)
    tape.backward(grads=[(out, np.arange(1.0, 5.0))])
    np.testing.assert_allclose(tape.gradients[a], 2 * a * TPB * np.repeat(np.arange(1.0, 5.0), TPB), rtol=1e-13)
