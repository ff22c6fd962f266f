"""Python @gpuc.kernels launched on the GPU (device="cuda") on gpuc.cuda device arrays, checked against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import gpuc.cuda as cuda

from support.kernel_cases import atomic_sum, atomic_tickets, deep_index, saxpy, stencil5


@pytest.mark.parametrize("n", [1, 255, 1000, 1 << 20])
def test_saxpy(n):
    rng = np.random.default_rng(n)
    x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    dy = cuda.to_device(y)
    saxpy.launch(n, np.float32(2.5), cuda.to_device(x), dy, device="cuda")
    np.testing.assert_allclose(dy.copy_to_host(), np.float32(2.5) * x + y, rtol=1e-6, atol=1e-6)


def test_saxpy_picks_the_gpu_from_its_arguments():
    x, y = np.arange(300, dtype=np.float32), np.ones(300, np.float32)
    dy = cuda.to_device(y)
    saxpy[500](np.float32(-1.0), cuda.to_device(x), dy)  # no device=: the arrays live on the GPU
    np.testing.assert_array_equal(dy.copy_to_host(), 1.0 - x)


@pytest.mark.parametrize("shape", [(30, 40), (257, 129), (1024, 1000)])
def test_stencil(shape):
    u = np.random.default_rng(1).random(shape)
    want = u.copy()
    want[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.2 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]
                                              - 4.0 * u[1:-1, 1:-1])
    out = cuda.to_device(np.zeros(shape))
    stencil5.launch((shape[1], shape[0]), cuda.to_device(u), out, 0.2, device="cuda")
    np.testing.assert_allclose(out.copy_to_host(), want, rtol=1e-12)


@pytest.mark.parametrize("n", [1000, 1 << 20])
def test_atomic_reduction(n):
    x = np.random.default_rng(2).standard_normal(n)
    total = cuda.to_device(np.zeros(1))
    atomic_sum.launch(n + 77, cuda.to_device(x), total, device="cuda")  # extra work items return early
    np.testing.assert_allclose(total.copy_to_host()[0], np.dot(x, x), rtol=1e-9)


def test_atomic_tickets_are_a_permutation():
    n = 100_000
    counter, order = cuda.to_device(np.zeros(1, np.uint32)), cuda.to_device(np.zeros(n, np.uint32))
    atomic_tickets.launch(n, counter, order, device="cuda")
    assert counter.copy_to_host()[0] == n
    np.testing.assert_array_equal(np.sort(order.copy_to_host()), np.arange(n, dtype=np.uint32))


def test_index_three_calls_deep():
    out = cuda.to_device(np.zeros(1000, np.int64))
    deep_index.launch(1000, out, device="cuda")
    np.testing.assert_array_equal(out.copy_to_host(), np.arange(1000) * 3 + 1)
