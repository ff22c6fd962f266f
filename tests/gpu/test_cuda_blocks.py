"""Block kernels on the GPU (block=, shared memory, barriers, warp operations, grid barriers), each checked
against NumPy and against the same kernel run on the CPU, which must agree exactly where values are
integers (warp operations included: the CPU's warps are 32 lanes, as NVIDIA's)."""

from __future__ import annotations


import numpy as np
import pytest

import gpuc
from support.examples import load_example
import gpuc.cuda as cuda



@pytest.fixture(scope="module")
def blocks():
    return load_example("blocks", "gpuc_example_blocks_cuda")


@pytest.mark.parametrize("shape", [(16, 16), (300, 200, 250), (512, 512, 512)])
def test_tiled_matmul(blocks, shape):
    m, k, n = shape if len(shape) == 3 else shape + (shape[0],)
    rng = np.random.default_rng(m)
    a, b = rng.random((m, k), dtype=np.float32), rng.random((k, n), dtype=np.float32)
    c = cuda.to_device(np.zeros((m, n), np.float32))
    blocks.matmul.launch((n, m), cuda.to_device(a), cuda.to_device(b), c, block=(16, 16), device="cuda")
    np.testing.assert_allclose(c.copy_to_host(), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("block", [32, 96, 128, 256, 1024])
@pytest.mark.parametrize("n", [1, 1000, 1_000_003])
def test_warp_shuffle_block_sum(blocks, block, n):
    x = np.random.default_rng(n).random(n)
    total = cuda.to_device(np.zeros(1))
    blocks.block_sum.launch(n, cuda.to_device(x), total, block=block, device="cuda")
    np.testing.assert_allclose(total.copy_to_host()[0], x.sum(), rtol=1e-12)


@gpuc.kernel
def warp_facts(out):
    i = gpuc.index(0)
    t = gpuc.thread_index(0)
    v = t * 7 + 3
    a = gpuc.shfl_down(v, 3)
    b = gpuc.shfl_up(v, 5)
    c = gpuc.shfl_xor(v, 6)
    d = gpuc.shfl_idx(v, t + 9)
    bal = gpuc.ballot(t % 3 == 0)
    n = gpuc.barrier_count(t % 5 == 0)
    if i < out.shape[0]:
        out[i, 0] = a
        out[i, 1] = b
        out[i, 2] = c
        out[i, 3] = d
        out[i, 4] = gpuc.int64(bal & 0x7fffffffffffffff)
        out[i, 5] = n
        out[i, 6] = gpuc.lane_index()
        out[i, 7] = gpuc.block_index(0) * 1000 + gpuc.grid_dim(0)


@pytest.mark.parametrize("block", [32, 64, 256])
def test_warp_operations_match_the_cpu(block):
    n = 4 * block
    on_gpu = cuda.to_device(np.zeros((n, 8), np.int64))
    warp_facts.launch(n, on_gpu, block=block, device="cuda")
    on_cpu = np.zeros((n, 8), np.int64)
    warp_facts.launch(n, on_cpu, block=block, threads=2)
    np.testing.assert_array_equal(on_gpu.copy_to_host(), on_cpu)


@gpuc.kernel
def reverse_in_blocks(x, out):
    s = gpuc.shared.dynamic(gpuc.float64)
    t, i = gpuc.thread_index(0), gpuc.index(0)
    s[t] = x[i] if i < len(x) else -1.0
    gpuc.barrier()
    if i < len(out):
        out[i] = s[gpuc.block_dim(0) - 1 - t]


def test_dynamic_shared_memory():
    x = np.arange(512, dtype=np.float64)
    out = cuda.to_device(np.zeros(512))
    reverse_in_blocks.launch(512, cuda.to_device(x), out, block=128, shared=128 * 8, device="cuda")
    np.testing.assert_array_equal(out.copy_to_host(), x.reshape(4, 128)[:, ::-1].ravel())


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


def test_grid_barrier_jacobi_is_a_cooperative_launch():
    u0 = np.random.default_rng(3).random(10_000)
    u, tmp = cuda.to_device(u0), cuda.to_device(np.zeros_like(u0))
    jacobi.launch(10_000, u, tmp, 50, block=256, device="cuda")
    want = u0.copy()
    for _ in range(50):
        want = 0.5 * (np.concatenate([want[:1], want[:-1]]) + np.concatenate([want[1:], want[-1:]]))
    np.testing.assert_allclose(u.copy_to_host(), want, rtol=1e-12)


def test_a_grid_too_large_for_a_cooperative_launch_is_a_clear_error():
    n = 1 << 26
    u, tmp = cuda.to_device(np.zeros(n)), cuda.to_device(np.zeros(n))
    with pytest.raises(ValueError, match="needs every block resident at once"):
        jacobi.launch(n, u, tmp, 1, block=32, device="cuda")
