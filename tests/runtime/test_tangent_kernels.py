"""gpuc.tangent(kernel): forward mode over a whole launch. Each float array is followed by its tangent; a launch
computes the primal's values and, in the tangents of what it writes, the derivative along the tangents of what
it reads (docs/autodiff.md, "Tangent kernels"). Checked against central differences of the primal launch,
against the adjoint (the dot-product identity) and across devices and schedules."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

import gpuc


@gpuc.kernel
def mix(x, y, out, a):
    i = gpuc.index()
    out[i] = a * math.sin(x[i]) * y[i] + x[i] * x[i]


@gpuc.kernel
def stencil(u, v):
    i = gpuc.index()
    n = u.shape[0]
    if 0 < i < n - 1:
        v[i] = 0.25 * (u[i - 1] + u[i + 1]) - 0.5 * u[i] * u[i]
    else:
        v[i] = u[i]


@gpuc.kernel
def iterate(x, steps, out):
    i = gpuc.index()
    t = x[i]
    for k in range(steps[i]):
        t = 0.75 * t + 0.25 * math.cos(t + 0.1 * k)
    out[i] = t


@gpuc.kernel
def reduce_into(x, total):
    i = gpuc.index()
    gpuc.atomic_add(total, i % 3, math.exp(0.5 * x[i]))


@gpuc.kernel
def in_place(u):
    i = gpuc.index()
    u[i] *= 2.0 + math.sin(u[i])


@gpuc.func
def depth_sum(a, k, acc):
    if k < 0:
        return acc
    return depth_sum(a, k - 1, acc + a[k] * a[k])


@gpuc.kernel
def through_a_recursive_func(a, out):
    i = gpuc.index()
    out[i] = depth_sum(a, i % a.shape[0], 0.0) + math.tanh(a[i])


@gpuc.kernel
def rows(u, w):
    j = gpuc.index(0)
    i = gpuc.index(1)
    w[i, j] = u[i, j] * u[(i + 1) % u.shape[0], j] - math.sqrt(1.0 + u[i, j] ** 2)


@gpuc.kernel(boundscheck=True)
def checked(x, out, k):
    i = gpuc.index()
    out[i] = x[i + k] * x[i]


@gpuc.kernel
def complex_kernel(z, out):
    i = gpuc.index()
    out[i] = z[i] * z[i]


def jvp_by_differences(kernel, n, args, directions, h=1e-6):
    """The derivative of every array the launch leaves along `directions` (by position: a float array's
    direction, or None), by central differences of the primal launch on float64 arguments."""
    directions = list(directions) + [None] * (len(args) - len(directions))

    def run(sign):
        moved = [a + sign * h * d if d is not None else (a.copy() if isinstance(a, np.ndarray) else a)
                 for a, d in zip(args, directions)]
        kernel.launch(n, *moved, threads=1)
        return moved
    plus, minus = run(1.0), run(-1.0)
    return [(p - m) / (2 * h) if isinstance(p, np.ndarray) and p.dtype.kind == "f" else None
            for p, m in zip(plus, minus)]


def tangent_launch(kernel, n, args, directions, **launch):
    """gpuc.tangent(kernel) launched on copies of `args`, each float array followed by its direction (zeros
    where None): (arrays after, tangents after), by position."""
    full, where = [], []
    directions = list(directions) + [None] * (len(args) - len(directions))
    for a, d in zip(args, directions):
        a = a.copy() if isinstance(a, np.ndarray) else a
        full.append(a)
        if isinstance(a, np.ndarray) and a.dtype.kind == "f":
            full.append(np.array(d if d is not None else np.zeros_like(a), dtype=a.dtype))
            where.append(len(full) - 1)
        else:
            where.append(None)
    gpuc.tangent(kernel).launch(n, *full, **launch)
    arrays = [full[k - 1] if k is not None else None for k in where]
    return arrays, [full[k] if k is not None else None for k in where]


def random(shape, seed, low=-1.0, high=1.0):
    return np.random.default_rng(seed).uniform(low, high, shape)


CASES = [
    (mix, 500, lambda: [random(500, 1), random(500, 2, 2.0, 3.0), np.zeros(500), 1.5], [True, True, False]),
    (stencil, 300, lambda: [random(300, 3), np.zeros(300)], [True, False]),
    (iterate, 200, lambda: [random(200, 4), np.arange(200, dtype=np.int64) % 17, np.zeros(200)], [True, None, False]),
    (reduce_into, 100, lambda: [random(100, 5), random(3, 6)], [True, True]),
    (in_place, 64, lambda: [random(64, 7)], [True]),
    (through_a_recursive_func, 12, lambda: [random(12, 8), np.zeros(12)], [True, False]),
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("kernel, n, make, moved", CASES, ids=lambda v: getattr(v, "__name__", None))
def test_tangents_are_the_derivative_along_the_directions(kernel, n, make, moved, threads):
    args = make()
    directions = [random(a.shape, 10 + k) if isinstance(a, np.ndarray) and flag else None
                  for k, (a, flag) in enumerate(zip(args, moved + [None] * (len(args) - len(moved))))]
    arrays, tangents = tangent_launch(kernel, n, args, directions, threads=threads)
    want = jvp_by_differences(kernel, n, args, directions)
    primal = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    kernel.launch(n, *primal, threads=threads)
    for k, (t, w) in enumerate(zip(tangents, want)):
        if t is None:
            continue
        scale = max(1.0, float(np.max(np.abs(w))))
        np.testing.assert_allclose(t, w, rtol=0, atol=2e-7 * scale, err_msg=f"tangent of argument {k}")
        if kernel is not reduce_into or threads == 1:  # (atomic sums of two threads round in another order)
            np.testing.assert_array_equal(arrays[k], primal[k], err_msg=f"argument {k} after the tangent launch")


def test_two_dimensional_launches():
    u = random((6, 40), 20)
    du = random((6, 40), 21)
    arrays, tangents = tangent_launch(rows, (40, 6), [u, np.zeros((6, 40))], [du, None])
    want = jvp_by_differences(rows, (40, 6), [u, np.zeros((6, 40))], [du, None])
    np.testing.assert_allclose(tangents[1], want[1], rtol=0, atol=2e-7)


def test_the_dot_product_identity_with_the_adjoint():
    """<seed, J d> from the tangent kernel equals <J^T seed, d> from the adjoint, to rounding."""
    x, y = random(500, 30), random(500, 31, 2.0, 3.0)
    dx, dy = random(500, 32), random(500, 33)
    seed = random(500, 34)
    _, tangents = tangent_launch(mix, 500, [x, y, np.zeros(500), 1.5], [dx, dy, None])
    gx, gy = np.zeros(500), np.zeros(500)
    gpuc.adjoint(mix)[500](x.copy(), gx, y.copy(), gy, np.zeros(500), seed.copy(), 1.5)
    along, pulled = float(seed @ tangents[2]), float(gx @ dx + gy @ dy)
    assert abs(along - pulled) <= 1e-12 * (abs(along) + abs(pulled))


def test_without_vectorization_the_same_tangents():
    args = [random(500, 40), random(500, 41, 2.0, 3.0), np.zeros(500), 0.5]
    directions = [random(500, 42), random(500, 43), None]
    _, got = tangent_launch(mix, 500, args, directions, threads=1)
    plain = gpuc.kernel(mix.py_func, vectorize=False)
    _, want = tangent_launch(plain, 500, args, directions, threads=1)
    np.testing.assert_array_equal(got[2], want[2])


def test_float32_tangents():
    x, y = random(256, 50).astype(np.float32), random(256, 51, 2.0, 3.0).astype(np.float32)
    dx, dy = random(256, 52).astype(np.float32), random(256, 53).astype(np.float32)
    _, got = tangent_launch(mix, 256, [x, y, np.zeros(256, np.float32), np.float32(1.5)], [dx, dy, None])
    _, want = tangent_launch(mix, 256, [x.astype(np.float64), y.astype(np.float64), np.zeros(256), 1.5],
                             [dx.astype(np.float64), dy.astype(np.float64), None])
    assert got[2].dtype == np.float32
    np.testing.assert_allclose(got[2], want[2], rtol=1e-5, atol=1e-5)


def test_bounds_checks_hold_in_the_tangent_kernel():
    x, dx = random(10, 60), random(10, 61)
    _, tangents = tangent_launch(checked, 9, [x, np.zeros(9), 1], [dx, None])
    np.testing.assert_allclose(tangents[1], dx[1:] * x[:9] + x[1:] * dx[:9], rtol=1e-15)
    with pytest.raises(IndexError, match=r"index 10 is out of bounds for axis 0 with size 10 in x\[i \+ k\]"):
        tangent_launch(checked, 10, [x, np.zeros(10), 1], [dx, None])


def test_through_opencl_the_same_tangents():
    from gpuc.runtime import opencl
    if not opencl.available():
        pytest.skip(opencl.unavailable_reason())
    args = [random(300, 70)]
    directions = [random(300, 71)]
    _, cpu = tangent_launch(stencil, 300, args + [np.zeros(300)], directions + [None])
    _, device = tangent_launch(stencil, 300, args + [np.zeros(300)], directions + [None], device="opencl")
    np.testing.assert_allclose(device[1], cpu[1], rtol=1e-13, atol=1e-15)


def test_what_it_takes_and_refuses():
    x = np.zeros(4)
    with pytest.raises(TypeError, match="gpuc.tangent takes a @gpuc.kernel"):
        gpuc.tangent(depth_sum)
    with pytest.raises(TypeError, match="not a tangent kernel"):
        gpuc.tangent(gpuc.tangent(mix))
    with pytest.raises(TypeError, match=r"argument 1 \(the shadow of argument 0\)"):
        gpuc.tangent(stencil)[4](x, np.zeros(5), x.copy(), x.copy())
    with pytest.raises(TypeError, match="each float array followed by its shadow"):
        gpuc.tangent(stencil)[4](x, x.copy())
    z = np.zeros(4, np.complex128)
    with pytest.raises(gpuc.CompilationError, match="complex") as info:
        gpuc.tangent(complex_kernel)[4](z, z.copy())
    assert "test_tangent_kernels.py:" in str(info.value)
    assert gpuc.tangent(mix) is gpuc.tangent(mix)
    assert pickle.loads(pickle.dumps(gpuc.tangent(mix))).primal is mix
