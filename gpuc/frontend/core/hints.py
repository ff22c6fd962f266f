"""What people porting kernels from numba-cuda write, and what gpuc writes instead: hints for the
errors of inference (a `cuda.<name>` in a kernel) and for `gpuc.<name>` attribute errors."""

from __future__ import annotations

_LAUNCH = "launch with kernel[blocks * threads](..., block=threads)"
#: numba-cuda's spellings (as `cuda.<name>` or `gpuc.<name>`) and what gpuc writes instead.
NUMBA_CUDA_SPELLINGS = {
    "threadIdx": "gpuc.thread_index(d) is CUDA's threadIdx (d = 0, 1, 2 for .x, .y, .z)",
    "blockIdx": "gpuc.block_index(d) is CUDA's blockIdx (d = 0, 1, 2 for .x, .y, .z)",
    "blockDim": f"gpuc.block_dim(d) is CUDA's blockDim, the launch's block= ({_LAUNCH})",
    "gridDim": "gpuc.grid_dim(d) is CUDA's gridDim (blocks in the launch)",
    "grid": "gpuc.index(d) is cuda.grid's value along d (blockIdx * blockDim + threadIdx)",
    "gridsize": "gpuc.grid_dim(d) * gpuc.block_dim(d) is cuda.gridsize's value along d; gpuc.ndrange(d) is the "
                "launch size n",
    "laneid": "gpuc.lane_index() is CUDA's lane id", "warpsize": "gpuc.warp_size() is the warp's width",
    "syncthreads": "gpuc.barrier() is CUDA's __syncthreads", "syncthreads_count": "gpuc.barrier_count(p)",
    "syncthreads_and": "gpuc.barrier_all(p)", "syncthreads_or": "gpuc.barrier_any(p)",
    "threadfence": "gpuc.fence()", "threadfence_block": "gpuc.fence_block()",
    "threadfence_system": "gpuc.fence() (device-wide; gpuc has no system scope)",
    "syncwarp": "gpuc.syncwarp()", "shfl_sync": "gpuc.shfl_idx(value, lane) (the whole warp, no mask)",
    "shfl_up_sync": "gpuc.shfl_up(value, delta) (the whole warp, no mask)",
    "shfl_down_sync": "gpuc.shfl_down(value, delta) (the whole warp, no mask)",
    "shfl_xor_sync": "gpuc.shfl_xor(value, lane_mask) (the whole warp, no mask)",
    "ballot_sync": "gpuc.ballot(predicate) (a uint64, bit k = lane k)", "any_sync": "gpuc.vote_any(predicate)",
    "all_sync": "gpuc.vote_all(predicate)", "activemask": "gpuc.ballot(True)",
    "const": "pass constant data as an array argument or capture module-level numbers",
    "cg": "gpuc.grid_barrier() is cuda.cg.this_grid().sync()",
    "this_grid": "gpuc.grid_barrier() is cuda.cg.this_grid().sync()",
    "popc": "gpuc.popc(x)", "clz": "gpuc.clz(x)", "ffs": "gpuc.ffs(x)", "fma": "gpuc.fma(x, y, z)",
}
