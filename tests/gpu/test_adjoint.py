"""Adjoint kernels and reverse-mode derivatives launched on the GPU, against the same launches on the CPU."""

from __future__ import annotations


import numpy as np
import pytest

import gpuc
import gpuc.cuda as cuda
from support.reverse_kernels import dynamic_loop, elementwise, horner, horner_slope, stencil


@gpuc.kernel
def grads(x, n, out):
    i = gpuc.index()
    out[i] = gpuc.grad(horner, x[i], n)[0]


def _both(kernel, n, *arrays):
    """Run the adjoint on the CPU and on the GPU from the same inputs; the float arrays after each."""
    cpu = [a.copy() for a in arrays]
    gpuc.adjoint(kernel).launch(n, *cpu, device="cpu")
    on_device = [cuda.to_device(a) for a in arrays]
    gpuc.adjoint(kernel).launch(n, *on_device, device="cuda")
    return cpu, [d.copy_to_host() for d in on_device]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 1000, 1 << 20])
def test_elementwise_and_stencil(n, dtype):
    rng = np.random.default_rng(n)
    x = rng.uniform(0.5, 1.5, n).astype(dtype)
    for kernel in (elementwise, stencil):
        cpu, gpu = _both(kernel, n, x, np.zeros_like(x), np.zeros_like(x), np.ones_like(x))
        rtol = 1e-5 if dtype == np.float32 else 1e-12
        for c, g in zip(cpu, gpu):
            np.testing.assert_allclose(g, c, rtol=rtol, atol=rtol)


def test_dynamic_loop_tape_on_the_device_heap():
    n = 4096
    x = np.linspace(0.1, 0.9, n)
    steps = (np.arange(n) * 7) % 500
    cpu = [x.copy(), np.zeros(n), steps.copy(), np.zeros(n), np.ones(n)]
    gpuc.adjoint(dynamic_loop).launch(n, *cpu, device="cpu")
    dev = [cuda.to_device(a) for a in (x, np.zeros(n), steps, np.zeros(n), np.ones(n))]
    gpuc.adjoint(dynamic_loop).launch(n, *dev, device="cuda")
    np.testing.assert_allclose(dev[1].copy_to_host(), cpu[1], rtol=1e-12)


def test_grad_in_a_gpu_kernel():
    x = np.linspace(-1, 1, 10_000)
    out = cuda.to_device(np.zeros_like(x))
    grads.launch(x.size, cuda.to_device(x), 6, out, device="cuda")
    want = [horner_slope(v, 6) for v in x]
    np.testing.assert_allclose(out.copy_to_host(), want, rtol=1e-12, atol=1e-12)
