"""Derivatives taken inside kernels with blocks on the CPU (they were refused): gpuc.grad, value_and_grad,
vjp, derivative and jvp, nested and with loops that keep a tape, between barriers, in loops over shared
tiles and beside warp shuffles, against the same calls made from Python, on 1 and 2 threads, with and
without vectorization across work items."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gpuc


@gpuc.func
def f(x, y):
    acc = x
    k = 0
    while k < int(y * 3.0) + 2:   # a run-time trip count: the reverse sweep keeps a tape
        acc = acc * 0.5 + math.sin(acc * y)
        k += 1
    return acc


@gpuc.func
def d1(x, y):
    return gpuc.derivative(f, x, y)


@gpuc.func
def fixed_point(v):
    t2, t3, it = math.cos(v), 1.0, 0
    while abs(t3) > 1e-13 and it < 80:
        t4 = 0.5 * math.cos(t2)
        t3, t2, it = t4 - t2, t4, it + 1
    return t2


@gpuc.kernel
def with_shuffles(x, y, out):
    i = gpuc.index(0)
    inside = i < len(x)
    xi = x[i] if inside else 0.5
    yi = y[i] if inside else 0.5
    g = gpuc.grad(d1, xi, yi)                      # reverse over forward
    v = gpuc.value_and_grad(fixed_point, xi)
    a = gpuc.shfl_down(g[0] + v[1][0], 1)
    b = gpuc.vjp(f, (xi, yi), 1.5)
    if inside:
        out[i] = a + b[1][1] + v[0]


@gpuc.kernel
def over_tiles(x, y, out):
    s = gpuc.shared.array((8, 8), gpuc.float64)
    tx, ty = gpuc.thread_index(0), gpuc.thread_index(1)
    i, j = gpuc.index(0), gpuc.index(1)
    acc = 0.0
    for r in range(3):
        s[ty, tx] = gpuc.grad(f, x[j, i] + r, y[j, i])[1]
        gpuc.barrier()
        acc += s[tx, ty] * gpuc.jvp(f, (x[j, i], y[j, i]), (1.0, 0.5))[1]
        gpuc.barrier()
    out[j, i] = acc


@gpuc.func
def three_steps(a, b):
    r = a
    for _ in range(3):
        r = 0.5 * r + 0.75 * math.sin(r * b)
    return r


@gpuc.kernel
def branches_around_a_shuffle(x, out):
    # Two branches on `inside` around a shuffle and a jvp. The adjoint optimized the kernel once the jvp was
    # resolved, before its shuffle was `convergent`: LLVM threaded the second branch through the first, a copy
    # of the shuffle in each arm, and the items of a partial block arrived at different shuffles.
    i, t = gpuc.index(0), gpuc.thread_index(0)
    inside = i < len(x)
    v = x[i] if inside else 0.25 + 0.01 * t
    u = gpuc.shfl_xor(math.sin(2.0) + v, 3)
    jv = gpuc.jvp(three_steps, (v, 0.5), (0.5, -0.25))
    if inside:
        out[i] = jv[0] - jv[1] + u * v


def _with_shuffles(x, y, n):
    """with_shuffles from Python: lane l of a warp of 32 reads lane l + 1 (the last lane its own)."""
    xs = [float(v) for v in x] + [0.5] * (n - len(x))
    ys = [float(v) for v in y] + [0.5] * (n - len(y))
    vg = [gpuc.value_and_grad(fixed_point, a) for a in xs]
    c = [gpuc.grad(d1, a, b)[0] + v[1][0] for a, b, v in zip(xs, ys, vg)]
    out = np.zeros(len(x))
    for k in range(len(x)):
        src = k + 1 if k % 32 < 31 else k
        out[k] = c[src] + gpuc.vjp(f, (xs[k], ys[k]), 1.5)[1][1] + vg[k][0]
    return out


def _over_tiles(x, y):
    out = np.zeros_like(x)
    for bj in range(0, x.shape[0], 8):
        for bi in range(0, x.shape[1], 8):
            for r in range(3):
                s = [[gpuc.grad(f, float(x[bj + ty, bi + tx]) + r, float(y[bj + ty, bi + tx]))[1] for tx in range(8)]
                     for ty in range(8)]
                for ty in range(8):
                    for tx in range(8):
                        a, b = float(x[bj + ty, bi + tx]), float(y[bj + ty, bi + tx])
                        out[bj + ty, bi + tx] += s[tx][ty] * gpuc.jvp(f, (a, b), (1.0, 0.5))[1]
    return out


@pytest.mark.parametrize("vectorize", [True, False])
@pytest.mark.parametrize("threads", [1, 2])
def test_derivatives_beside_warp_shuffles(threads, vectorize):
    kernel = with_shuffles if vectorize else gpuc.kernel(vectorize=False)(with_shuffles.py_func)
    x, y = np.linspace(-1.0, 1.0, 50), np.linspace(0.1, 0.9, 50)
    out = np.zeros(50)
    kernel.launch(64, x, y, out, block=32, threads=threads)
    np.testing.assert_allclose(out, _with_shuffles(x, y, 64), rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("vectorize", [True, False])
@pytest.mark.parametrize("threads", [1, 2])
def test_derivatives_written_to_shared_tiles_between_barriers(threads, vectorize):
    kernel = over_tiles if vectorize else gpuc.kernel(vectorize=False)(over_tiles.py_func)
    x = np.linspace(-1.0, 1.0, 256).reshape(16, 16)
    y = np.linspace(0.1, 0.9, 256).reshape(16, 16)
    out = np.zeros_like(x)
    kernel.launch((16, 16), x, y, out, block=(8, 8), threads=threads)
    np.testing.assert_allclose(out, _over_tiles(x, y), rtol=1e-13, atol=1e-14)


@gpuc.func
def _uses_the_block(v):
    return v * float(gpuc.thread_index(0))


@gpuc.kernel
def differentiates_block_code(x, out):
    i = gpuc.index(0)
    gpuc.barrier()
    out[i] = gpuc.grad(_uses_the_block, x[i])[0]


def test_differentiating_code_that_uses_the_block_is_a_located_error():
    with pytest.raises(gpuc.CompilationError, match="uses the launch context") as caught:
        differentiates_block_code.launch(32, np.ones(32), np.zeros(32), block=32)
    assert "test_block_derivatives.py:" in str(caught.value)   # at the request
    assert "pass it to the function as an argument" in str(caught.value)


# -- adjoints of such kernels ----------------------------------------------------------------------------
# gpuc.adjoint of a kernel with blocks that takes derivatives inside: its inner requests are resolved first
# (but those the adjoint differentiates in place), and the adjoint differentiates their tangent and
# gradient functions as it does any func: reverse over reverse over forward beside shuffles, and the
# gradients written to a shared tile between barriers.

@pytest.mark.parametrize("vectorize", [True, False])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", ["with_shuffles", "over_tiles", "branches_around_a_shuffle"])
def test_adjoints_of_kernels_taking_derivatives_inside(name, threads, vectorize):
    from support.block_adjoints import finite_differences

    kernel = globals()[name]
    kernel = kernel if vectorize else gpuc.kernel(vectorize=False)(kernel.py_func)
    if name == "with_shuffles":
        arrays = [np.linspace(-1.0, 1.0, 50), np.linspace(0.1, 0.9, 50), np.zeros(50)]
        n, block = 64, 32
    elif name == "branches_around_a_shuffle":   # a partial last block: items inside and outside
        arrays = [np.linspace(-1.0, 1.0, 70), np.zeros(70)]
        n, block = 70, 32
    else:
        arrays = [np.linspace(-1.0, 1.0, 256).reshape(16, 16), np.linspace(0.1, 0.9, 256).reshape(16, 16),
                  np.zeros((16, 16))]
        n, block = (16, 16), (8, 8)
    assert finite_differences(kernel, arrays, n, block, threads=threads, samples=25) < 1e-6


@pytest.mark.parametrize("name", ["with_shuffles", "over_tiles"])
def test_adjoints_taking_derivatives_inside_compile_for_ptx(name, ptxas):
    a1, a2 = gpuc.Array[gpuc.float64, 1, "C"], gpuc.Array[gpuc.float64, 2, "C"]
    types = (a1,) * 6 if name == "with_shuffles" else (a2,) * 6
    job = gpuc.CompilerJob((gpuc.adjoint(globals()[name]), types),
                           gpuc.CompilerConfig(gpuc.PTXTarget(cap="sm_90"), kernel=True, whole_blocks=True))
    ptxas(gpuc.compile(job, "asm").output)


@gpuc.func
def wave(x, y):
    return math.sin(x * y) * x + math.exp(-x * x) * y


@gpuc.kernel
def loop_free_inside(x, y, out):
    # derivatives without a tape: the adjoint compiles for GCN and SPIR-V too, and runs through OpenCL
    i = gpuc.index()
    t = gpuc.thread_index()
    s = gpuc.shared.array(16, gpuc.float64)
    s[t] = gpuc.grad(wave, x[i], y[i])[0]
    gpuc.barrier()
    nb = (t + 3) % gpuc.block_dim()
    out[i] = s[t] * s[nb] + gpuc.jvp(wave, (x[i], y[i]), (0.5, 1.0))[1] + gpuc.shfl_xor(gpuc.derivative(wave, x[i], y[i]), 1)


@pytest.mark.devices("cpu", "opencl")
def test_adjoint_taking_loop_free_derivatives_inside():
    from support.block_adjoints import finite_differences

    arrays = [np.linspace(-1.2, 1.1, 48), np.linspace(0.3, -0.7, 48), np.zeros(48)]
    assert finite_differences(loop_free_inside, arrays, 48, 16) < 1e-6


@pytest.mark.parametrize("target", ["gcn", "spirv"])
def test_adjoint_taking_loop_free_derivatives_inside_compiles(target, spirv_val):
    a1 = gpuc.Array[gpuc.float64, 1, "C"]
    made = gpuc.GCNTarget() if target == "gcn" else gpuc.SPIRVTarget()
    job = gpuc.CompilerJob((gpuc.adjoint(loop_free_inside), (a1,) * 6),
                           gpuc.CompilerConfig(made, kernel=True, whole_blocks=True))
    binary = gpuc.compile(job, "obj").output
    if target == "spirv":
        spirv_val(binary)
    else:
        assert binary


@gpuc.kernel
def plain_inside(x, y, out):
    # no blocks: on a GPU (and OpenCL) it still runs in whole blocks, whose adjoint is built as a block
    # kernel's is; derivatives inside made that a refusal naming blocks the kernel does not use
    i = gpuc.index()
    out[i] = gpuc.grad(wave, x[i], y[i])[1] * gpuc.derivative(wave, y[i], x[i])


@pytest.mark.devices("cpu", "opencl")
def test_adjoint_of_a_kernel_without_blocks_taking_derivatives_inside():
    from support.block_adjoints import finite_differences

    arrays = [np.linspace(-1.2, 1.1, 40), np.linspace(0.3, -0.7, 40), np.zeros(40)]
    assert finite_differences(plain_inside, arrays, 40, None) < 1e-6


@pytest.mark.parametrize("target", ["ptx", "spirv"])
def test_adjoint_of_a_kernel_without_blocks_taking_derivatives_inside_compiles(target, ptxas, spirv_val):
    a1 = gpuc.Array[gpuc.float64, 1, "C"]
    made = gpuc.PTXTarget(cap="sm_90") if target == "ptx" else gpuc.SPIRVTarget()
    job = gpuc.CompilerJob((gpuc.adjoint(plain_inside), (a1,) * 6),
                           gpuc.CompilerConfig(made, kernel=True, whole_blocks=True))
    if target == "ptx":
        ptxas(gpuc.compile(job, "asm").output)
    else:
        spirv_val(gpuc.compile(job, "obj").output)
