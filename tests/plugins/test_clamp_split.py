"""The clamp-splitting plugin (gpuc/plugins/clamp_split.py): CPU launches of stencils with clamped
neighbour indices run the range where the clamps return their input without them, and every value
equals the same kernel compiled without the split (and a NumPy or Python reference)."""

from __future__ import annotations

import numpy as np
import pytest

import gpuc
from gpuc import Array, float64, int64

SPLIT = "gpuc.cpu.split_clamps"
F1, F2 = Array[float64, 1], Array[float64, 2]
F1C = Array[float64, 1, "C"]


def without_split():
    """A config with every registered plugin but the split (the same code, clamps in every iteration)."""
    plugins = tuple(p for p in gpuc.registered_plugins() if p.name != SPLIT)
    return gpuc.CompilerConfig(gpuc.NativeTarget(), plugins=plugins, builtin_plugins=False)


@gpuc.kernel
def blur3(src, out):
    i = gpuc.index()
    n = src.shape[0]
    out[i] = src[min(max(i - 1, 0), n - 1)] + 2.0 * src[i] + src[min(max(i + 1, 0), n - 1)]


@gpuc.kernel
def wide(src, out, lo, hi):
    # clamps to run-time bounds, offsets beyond one, max and min in either order and nesting
    i = gpuc.index()
    total = 0.0
    for d in range(-3, 4):
        total += src[max(min(i + d, hi), lo)] * (d + 4)
    out[i] = total + src[min(i, hi)] - src[max(lo, i - 2)]


@gpuc.kernel
def stencil2d(src, out):
    x = gpuc.index(0)
    y = gpuc.index(1)
    h, w = src.shape[0], src.shape[1]
    acc = 0.0
    for dy in range(-1, 2):
        r = min(max(y + dy, 0), h - 1)
        for dx in range(-2, 3):
            acc += src[r, min(max(x + dx, 0), w - 1)] * (dx + 3)
    out[y, x] = acc


@gpuc.kernel
def branchy(src, out, k):
    # control flow inside the loop body: a multi-block loop
    i = gpuc.index()
    n = src.shape[0]
    if src[i] > 0.5:
        out[i] = src[min(i + k, n - 1)]
    else:
        out[i] = -src[max(i - k, 0)]


@gpuc.kernel
def variant_limit(src, out):
    # a limit that changes with the index: not a clamp the split may remove
    i = gpuc.index()
    n = src.shape[0]
    out[i] = src[min(i + 1, n - 1 - i % 3)]


def reference_blur3(src):
    padded = np.pad(src, 1, mode="edge")
    return padded[:-2] + 2.0 * padded[1:-1] + padded[2:]


@pytest.mark.devices("cpu", "opencl")
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8, 17, 100, 1001])
@pytest.mark.parametrize("threads", [1, 3])
def test_a_three_point_blur_equals_numpy_at_every_size(n, threads):
    src = np.random.default_rng(n).random(n)
    out = np.full(n, np.nan)
    blur3.launch(n, src, out, threads=threads)
    np.testing.assert_array_equal(out, reference_blur3(src))


def test_the_blur_loop_is_split_and_the_clamp_free_copy_has_no_clamps():
    ir = gpuc.compile(gpuc.CompilerJob((blur3, (F1, F1)), gpuc.CompilerConfig(gpuc.NativeTarget(), kernel=True)),
                      "llvm").output
    assert "split.middle" in ir
    middle = ir[ir.index("\nsplit.middle."):]
    middle = middle[:middle.index("br i1")]
    assert "smin" not in middle and "smax" not in middle and "usub.sat" not in middle


def python_wide(src, lo, hi):
    out = np.empty_like(src)
    for i in range(len(src)):
        total = 0.0
        for d in range(-3, 4):
            total += src[max(min(i + d, hi), lo)] * (d + 4)
        out[i] = total + src[min(i, hi)] - src[max(lo, i - 2)]
    return out


@pytest.mark.devices("cpu", "opencl")
@pytest.mark.parametrize("n,lo,hi", [(1, 0, 0), (6, 0, 5), (6, 2, 3), (6, 3, 3), (9, 4, 2), (30, 5, 20),
                                     (30, 0, 29), (12, -0, 11), (40, 10, 10)])
@pytest.mark.parametrize("threads", [1, 2])
def test_run_time_bounds_and_wide_offsets_equal_python(n, lo, hi, threads):
    # lo > hi and lo == hi leave no clamp-free range; every index stays within the array
    src = np.random.default_rng(n + lo).random(max(n, hi + 1, lo + 1))
    out = np.full(len(src), np.nan)
    wide.launch(n, src, out, lo, hi, threads=threads)
    want = python_wide(src, lo, hi)
    np.testing.assert_array_equal(out[:n], want[:n])


def python_stencil2d(src):
    h, w = src.shape
    out = np.empty_like(src)
    for y in range(h):
        for x in range(w):
            acc = 0.0
            for dy in range(-1, 2):
                r = min(max(y + dy, 0), h - 1)
                for dx in range(-2, 3):
                    acc += src[r, min(max(x + dx, 0), w - 1)] * (dx + 3)
            out[y, x] = acc
    return out


@pytest.mark.devices("cpu", "opencl")
@pytest.mark.parametrize("shape", [(1, 1), (3, 1), (1, 4), (4, 5), (7, 13), (16, 33)])
@pytest.mark.parametrize("threads", [1, 2, 5])
def test_a_2d_stencil_equals_python_when_threads_split_rows(shape, threads):
    # with several threads a chunk starts and ends inside rows: each row's range is clipped to it
    src = np.random.default_rng(shape[1]).random(shape)
    out = np.full(shape, np.nan)
    stencil2d.launch((shape[1], shape[0]), src, out, threads=threads)
    np.testing.assert_array_equal(out, python_stencil2d(src))


@pytest.mark.devices("cpu", "opencl")
@pytest.mark.parametrize("n,k", [(1, 1), (5, 1), (5, 7), (40, 3), (40, 0)])
def test_a_loop_with_branches_equals_python(n, k):
    src = np.random.default_rng(n * 7 + k).random(n)
    out = np.full(n, np.nan)
    branchy.launch(n, src, out, k)
    want = [src[min(i + k, n - 1)] if src[i] > 0.5 else -src[max(i - k, 0)] for i in range(n)]
    np.testing.assert_array_equal(out, want)


@pytest.mark.devices("cpu", "opencl")
def test_a_limit_that_varies_with_the_index_is_left_alone():
    n = 50
    src = np.random.default_rng(3).random(n)
    out = np.full(n, np.nan)
    variant_limit.launch(n, src, out)
    np.testing.assert_array_equal(out, [src[min(i + 1, n - 1 - i % 3)] for i in range(n)])


def test_kernels_without_clamps_are_not_split():
    @gpuc.kernel
    def saxpy(a, x, y):
        i = gpuc.index()
        y[i] = a * x[i] + y[i]

    ir = gpuc.compile(gpuc.CompilerJob((saxpy, (float64, F1, F1)), gpuc.CompilerConfig(gpuc.NativeTarget(),
                                                                                         kernel=True)), "llvm").output
    assert "split.middle" not in ir and SPLIT not in ir


def test_without_optimization_the_marker_is_absent_and_the_blur_still_runs():
    config = gpuc.CompilerConfig(gpuc.NativeTarget(), kernel=True, opt_level=0)
    ir = gpuc.compile(gpuc.CompilerJob((blur3, (F1, F1)), config), "llvm").output
    assert SPLIT not in ir


def test_without_the_plugin_the_marker_is_absent():
    ir = gpuc.compile(gpuc.CompilerJob((blur3, (F1, F1)), without_split().replace(kernel=True)), "llvm").output
    assert SPLIT not in ir and "split.middle" not in ir


@pytest.mark.devices("cpu", "opencl")
def test_integer_clamps_of_int64_data():
    @gpuc.kernel
    def box(src, out):
        i = gpuc.index()
        n = src.shape[0]
        out[i] = src[max(i - 2, 0)] + src[i] + src[min(i + 2, n - 1)]

    for n in (1, 2, 3, 4, 9, 64):
        src = np.random.default_rng(n).integers(-100, 100, n)
        out = np.zeros(n, np.int64)
        box.launch(n, src, out)
        want = [src[max(i - 2, 0)] + src[i] + src[min(i + 2, n - 1)] for i in range(n)]
        assert out.tolist() == want
    assert "split.middle" in gpuc.compile(gpuc.CompilerJob((box, (Array[int64, 1], Array[int64, 1])),
                                                           gpuc.CompilerConfig(gpuc.NativeTarget(), kernel=True)),
                                          "llvm").output


# -- guards: tests of the index that hold (or fail) on a range of it --------------------------------------------

@gpuc.kernel
def guarded(src, out, lo, hi):
    # tests of i against the shape and the arguments, either operand first, `!=`, a negated `or`, an `else`
    i = gpuc.index()
    n = src.shape[0]
    acc = 0.0
    if i > 0 and i < n - 1:
        acc += 0.25 * src[i - 1] + 0.5 * src[i] + 0.25 * src[i + 1]
    if i != lo:
        acc += src[i] * 3.0
    if not (i < lo or i > hi):
        acc -= src[min(i + 2, n - 1)]
    if n - 3 > i:
        acc += 1.5
    else:
        acc -= 2.0
    if i >= n:
        return
    out[i] = acc


def python_guarded(src, lo, hi):
    n = len(src)
    out = []
    for i in range(n):
        acc = 0.0
        if i > 0 and i < n - 1:
            acc += 0.25 * src[i - 1] + 0.5 * src[i] + 0.25 * src[i + 1]
        if i != lo:
            acc += src[i] * 3.0
        if not (i < lo or i > hi):
            acc -= src[min(i + 2, n - 1)]
        acc += 1.5 if n - 3 > i else -2.0
        out.append(acc)
    return np.array(out)


@pytest.mark.devices("cpu", "opencl")
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 9, 33, 100, 1001])
@pytest.mark.parametrize("lo, hi", [(0, 0), (2, 7), (7, 2), (-5, 3), (50, 2000), (-(2 ** 62), 2 ** 62)])
@pytest.mark.parametrize("threads", [1, 3])
def test_guards_of_the_index_equal_python(n, lo, hi, threads):
    src = np.random.default_rng(n).random(n)
    out = np.full(n, np.nan)
    guarded.launch(n, src, out, lo, hi, threads=threads)
    np.testing.assert_array_equal(out, python_guarded(src, lo, hi))


@gpuc.kernel
def interior(x, y):
    i = gpuc.index()
    n = len(x)
    if i > 0 and i < n - 1:
        y[i] = 0.25 * x[i - 1] + 0.5 * x[i] + 0.25 * x[i + 1]


def test_a_stencil_with_a_guard_and_no_clamp_is_split_and_its_middle_tests_nothing():
    x, y = np.zeros(100), np.zeros(100)
    ir = interior.inspect(x, y, threads=1).llvm
    assert "split.middle" in ir
    # the middle part's test is gone, its `if` with it: one block of straight code, which LLVM vectorized
    middle = ir[ir.index("\nsplit.middle.items:"):]
    middle = middle[:middle.index("\n\n")]
    assert "split.middle.if" not in ir and "select i1" not in middle, middle
    assert "icmp slt" in ir.split("\nsplit.after.items:")[1]  # the part after it tests as the kernel does
    unsplit = gpuc.compile(gpuc.CompilerJob((interior, (F1C, F1C)), without_split().replace(kernel=True)),
                           "llvm").output
    assert "split.middle" not in unsplit


@pytest.mark.parametrize("n", [1, 2, 3, 31, 32, 33, 34, 64, 65, 100, 1000])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_an_adjoint_is_split_where_it_is_built_and_its_gradient_holds(n, threads):
    """The adjoint's body is built at the optimized point: its loop is split there, before it is vectorized,
    and the gradient is the stencil's transpose applied to the seed."""
    rng = np.random.default_rng(n)
    x, seed = rng.random(n), rng.random(n)
    dx, y, dy = np.zeros(n), np.zeros(n), seed.copy()
    gpuc.adjoint(interior).launch(n, x, dx, y, dy, threads=threads)
    want = np.zeros(n)
    for i in range(1, n - 1):
        want[i - 1] += 0.25 * seed[i]
        want[i] += 0.5 * seed[i]
        want[i + 1] += 0.25 * seed[i]
    np.testing.assert_allclose(dx, want, rtol=1e-15, atol=1e-15)
    assert dy[1:-1].tolist() == [0.0] * max(n - 2, 0) and (n < 2 or (dy[0] == seed[0] and dy[-1] == seed[-1]))


def test_the_adjoint_loop_is_split_then_vectorized():
    n = 64
    args = [np.zeros(n) for _ in range(4)]
    result = gpuc.adjoint(interior).inspect(*args, threads=1)
    assert "split.middle" in result.llvm
    lines = [l for l in str(result.trace).splitlines() if "vectorized at optimized" in l]
    assert lines and "whole chunks without the mask" in lines[0], lines
