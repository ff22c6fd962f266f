"""Kernels written the CUDA way (blocks, shared memory, barriers, warp shuffles) run unchanged on the
CPU, and compile for NVIDIA (PTX), AMD (GCN) and SPIR-V.

    .venv/bin/python examples/blocks.py
"""

from __future__ import annotations

import sys

import numpy as np

import gpuc

TILE = 16
TPB = 256


@gpuc.kernel
def matmul(a, b, c):
    """c = a @ b, with TILE x TILE tiles of a and b staged in shared memory."""
    sa = gpuc.shared.array((TILE, TILE), gpuc.float32)
    sb = gpuc.shared.array((TILE, TILE), gpuc.float32)
    col, row = gpuc.index(0), gpuc.index(1)
    tx, ty = gpuc.thread_index(0), gpuc.thread_index(1)
    n = a.shape[1]
    acc = gpuc.float32(0.0)
    for t in range((n + TILE - 1) // TILE):
        k = t * TILE
        sa[ty, tx] = a[row, k + tx] if row < a.shape[0] and k + tx < n else gpuc.float32(0.0)
        sb[ty, tx] = b[k + ty, col] if col < b.shape[1] and k + ty < n else gpuc.float32(0.0)
        gpuc.barrier()
        for j in range(TILE):
            acc += sa[ty, j] * sb[j, tx]
        gpuc.barrier()
    if row < c.shape[0] and col < c.shape[1]:
        c[row, col] = acc


@gpuc.func
def warp_sum(v):
    """The sum of v over the warp, by shuffles (every lane gets it in lane 0's place)."""
    offset = gpuc.warp_size() // 2
    while offset > 0:
        v += gpuc.shfl_down(v, offset)
        offset //= 2
    return v


@gpuc.kernel
def block_sum(x, total):
    """Each warp sums its values by shuffles, warp 0 sums the warps', one atomic add per block. Warps are
    32 wide on the CPU and CUDA, but an OpenCL device picks its sub-group size per kernel (4 to 64 on
    Intel's CPU device): a block may hold more warps than a warp has lanes."""
    partial = gpuc.shared.array(TPB, gpuc.float64)  # one per warp, for any warp size
    i, t = gpuc.index(0), gpuc.thread_index(0)
    lane, warp = gpuc.lane_index(), t // gpuc.warp_size()
    v = warp_sum(x[i] if i < len(x) else 0.0)
    if lane == 0:
        partial[warp] = v
    gpuc.barrier()
    if warp == 0:
        warps = (gpuc.block_dim(0) + gpuc.warp_size() - 1) // gpuc.warp_size()
        v, w = 0.0, lane
        while w < warps:  # each lane first adds the partials of warps lane, lane + warp_size, ...
            v += partial[w]
            w += gpuc.warp_size()
        v = warp_sum(v)
        if lane == 0:
            gpuc.atomic_add(total, 0, v)


def section(title: str) -> None:
    print(f"\n=== {title} " + "=" * max(0, 70 - len(title)))


def main() -> int:
    ok = True
    rng = np.random.default_rng(0)

    section(f"blocks on the CPU: tiled matmul ({TILE}x{TILE} tiles in shared memory)")
    a, b = rng.random((300, 200), dtype=np.float32), rng.random((200, 250), dtype=np.float32)
    c = np.zeros((300, 250), np.float32)
    matmul[250, 300](a, b, c, block=(TILE, TILE))  # numba-cuda: matmul[(16, 19), (16, 16)](a, b, c)
    ok &= _report("matmul against a @ b", np.allclose(c, a @ b, rtol=1e-4, atol=1e-4))

    section(f"a block reduction with warp shuffles (blocks of {TPB}, warps of {32} on the CPU)")
    x = rng.random(1_000_003)
    total = np.zeros(1)
    block_sum[x.size](x, total, block=TPB)
    ok &= _report(f"sum = {total[0]:.6f} (NumPy {x.sum():.6f})", np.isclose(total[0], x.sum()))

    section("the same kernels through OpenCL (SPIR-V on the first OpenCL device that takes it)")
    import gpuc.opencl
    if gpuc.opencl.available():
        print(f"  device: {gpuc.opencl.device_info().name} ({gpuc.opencl.device_info().platform})")
        c2 = np.zeros_like(c)
        matmul[250, 300](a, b, c2, block=(TILE, TILE), device="opencl")
        ok &= _report("matmul against the CPU's", np.allclose(c2, c, rtol=1e-5, atol=1e-5))
        total2 = np.zeros(1)
        block_sum[x.size](x, total2, block=TPB, device="opencl")
        ok &= _report(f"sum = {total2[0]:.6f} (the CPU's {total[0]:.6f})", np.isclose(total2[0], total[0]))
    else:
        print(f"  skipped: {gpuc.opencl.unavailable_reason()}")

    section("work items of a block that reach different barriers: an error naming both")

    @gpuc.kernel
    def divergent(out):
        if gpuc.thread_index(0) < 4:
            gpuc.barrier()
        else:
            gpuc.barrier()
        out[gpuc.index(0)] = 1

    try:
        divergent[8](np.zeros(8, np.int64), block=8)
        ok = _report("divergent barriers raise KernelError", False)
    except gpuc.KernelError as exc:
        print("  " + str(exc).split(";")[0])

    section("the same kernels for the GPUs")
    F32x2, F64 = gpuc.Array[gpuc.float32, 2], gpuc.Array[gpuc.float64, 1]
    for kernel, types in ((matmul, (F32x2,) * 3), (block_sum, (F64, F64))):
        for target, output, marks in ((gpuc.PTXTarget(cap="sm_90"), "asm", ("bar.sync", "shfl.sync", ".shared")),
                                      (gpuc.GCNTarget(), "asm", ("s_barrier", "ds_bpermute", "ds_read")),
                                      (gpuc.SPIRVTarget(), "obj", ())):
            job = gpuc.CompilerJob((kernel, types), gpuc.CompilerConfig(target, kernel=True, whole_blocks=True))
            try:
                code = gpuc.compile(job, output).output
            except gpuc.CompilationError as exc:  # what a target cannot do is a located error
                print(f"  {kernel.__name__} for {target.name}: {str(exc).splitlines()[0].split(': ', 1)[1]}")
                continue
            found = [m for m in marks if m in code]
            size = f"{len(code.splitlines())} lines" if output == "asm" else f"{len(code)} bytes of SPIR-V"
            print(f"  {kernel.__name__} for {target.name}: {size}" + (f", uses {', '.join(found)}" if found else ""))
    return 0 if ok else 1


def _report(what: str, good: bool) -> bool:
    print(f"  {what}: {'ok' if good else 'WRONG'}")
    return bool(good)


if __name__ == "__main__":
    sys.exit(main())
