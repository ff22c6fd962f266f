"""Adjoint kernels in vector lanes on the CPU (gpuc/plugins/vectorize at the `optimized` point, once the
reverse sweep is built): the trace says they vectorize, each lane keeps a tape of its own, and shadows and
arrays equal the item-by-item launch's bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from support.llvm_testing import filecheck
from support.examples import load_example
from support.reverse_kernels import dynamic_loop, elementwise, stencil
from support.vectorize import differences, item_by_item

import gpuc
from gpuc.frontend.constructs.reverse import CONCURRENT, PARITY, SERIAL
from gpuc.runtime.dispatch import typeof


def _trace_line(adjoint, *args, schedule=CONCURRENT) -> str:
    """The vectorize line of the adjoint's compile for work items that run `schedule` (CONCURRENT, what
    `adjoint.inspect` compiles; SERIAL, what a one-thread launch runs)."""
    flags = adjoint._layout([typeof(a, k) for k, a in enumerate(args)])
    lines = [l.strip() for l in str(adjoint._kernel(flags, schedule).inspect(*args).trace).splitlines()
             if "vectorized at" in l]
    assert len(lines) == 1, lines
    return lines[0]


def _loop_arguments(n, rng):
    # trip counts 0 (no tape), past the unrolled loop's 8 and past the tape's 512-byte stack buffer
    steps = rng.choice([0, 1, 3, 8, 9, 40, 70], n).astype(np.int64)
    return [rng.uniform(-2, 2, n), np.zeros(n), steps, np.zeros(n), rng.uniform(0.5, 1.5, n)]


def test_adjoints_vectorize_once_built():
    n = 40
    line = _trace_line(gpuc.adjoint(dynamic_loop), *_loop_arguments(n, np.random.default_rng(0)))
    assert line.startswith("vectorized at optimized"), line
    assert "tested per row" in line, line  # the tape's accesses are each lane's own: rows of many items in lanes
    assert "lane by lane: call @free, call @gpuc.autodiff.tape.grow" in line, line
    x = np.linspace(-1, 1, n)
    line = _trace_line(gpuc.adjoint(elementwise), x, np.zeros(n), np.zeros(n), np.ones(n))
    assert line.startswith("vectorized at optimized") and "lane by lane" not in line, line


@pytest.mark.parametrize("n", (1, 3, 31, 33, 100))
@pytest.mark.parametrize("threads", (1, 2))
def test_tapes_in_lanes_equal_item_by_item(n, threads):
    # Lanes of one chunk with 0 to 70 trips: each pushes onto and pops from its own tape, some grow it.
    out = []
    for kernel in (dynamic_loop, item_by_item(dynamic_loop)):
        args = _loop_arguments(n, np.random.default_rng(n))
        gpuc.adjoint(kernel).launch(n, *args, threads=threads)
        out.append(args)
    assert differences(*out) == []


def test_items_without_trips_pass_their_seed_on():
    n = 40
    x, steps = np.full(n, 0.3), np.zeros(n, np.int64)
    steps[::3] = 5
    dx, y, dy = np.zeros(n), np.zeros(n), np.arange(1.0, n + 1)
    gpuc.adjoint(dynamic_loop).launch(n, x, dx, steps, y, dy, threads=1)
    np.testing.assert_array_equal(dx[steps == 0], np.arange(1.0, n + 1)[steps == 0])
    np.testing.assert_array_equal(dy, np.zeros(n))


def test_adjoint_loops_are_not_unrolled_by_a_run_time_factor():
    # Unrolled by 8 before the reverse sweep was built, the loop had a copy and a remainder loop, both taped
    # and reversed; in lanes every lane ran both (the adjoint took twice as long).
    f32, i64 = gpuc.Array[gpuc.float32, 1], gpuc.Array[gpuc.int64, 1]
    ir = gpuc.code_llvm(gpuc.adjoint(dynamic_loop), (f32, f32, i64, f32, f32))
    filecheck(ir, """
        CHECK-LABEL: define void @dynamic_loop.adjoint
        CHECK-NOT: .epil
        CHECK: !llvm.loop [[LOOP:![0-9]+]]
        CHECK: [[LOOP]] = distinct !{[[LOOP]], [[HINT:![0-9]+]]
        CHECK: [[HINT]] = !{!"llvm.loop.unroll.runtime.disable"}
    """)


@pytest.mark.parametrize("threads", (1, 2))
def test_a_stencils_adds_into_its_neighbours_run_in_lanes(threads):
    # dx[i - 1], dx[i] and dx[i + 1] += ...: the rows used to fail the memory test (stores that meet) and ran
    # item by item; the adds may come in any order, so the lanes run them, each element getting every share.
    n = 1000
    x, seed = np.linspace(-1.0, 1.0, n), np.linspace(0.5, 1.5, n)
    line = _trace_line(gpuc.adjoint(stencil), x, np.zeros(n), np.zeros(n), seed.copy(), schedule=SERIAL)
    assert line.startswith("vectorized at optimized") and "3 adds in any order, tested per row" in line, line
    out = []
    for kernel in (stencil, item_by_item(stencil)):
        dx, y, dy = np.zeros(n), np.zeros(n), seed.copy()
        gpuc.adjoint(kernel).launch(n, x, dx, y, dy, threads=threads)
        out.append((dx, y, dy))
    want = np.zeros(n)
    inner = seed[1:-1]
    want[:-2] += 0.25 * inner
    want[1:-1] += x[1:-1] * inner
    want[2:] += 0.25 * inner
    for dx, y, dy in out:
        np.testing.assert_allclose(dx, want, rtol=1e-14, atol=1e-15)
    assert differences([out[0][1], out[0][2]], [out[1][1], out[1][2]]) == []


@gpuc.kernel
def wide_stencil(x, y):
    i = gpuc.index()
    n = x.shape[0]
    if i >= 2 and i < n - 2:
        y[i] = x[i - 2] * x[i + 1] + 0.5 * x[i] - x[i + 2] * x[i - 1]


@gpuc.kernel
def row_stencil(x, y):
    i, j = gpuc.index(0), gpuc.index(1)
    if i > 0 and i < x.shape[1] - 1:
        y[j, i] = x[j, i - 1] * x[j, i + 1] + x[j, i]


def _wide_stencil_gradient(x, seed):
    want, inner = np.zeros_like(x), seed[2:-2]
    want[:-4] += x[3:-1] * inner
    want[3:-1] += x[:-4] * inner
    want[2:-2] += 0.5 * inner
    want[4:] -= x[1:-3] * inner
    want[1:-3] -= x[4:] * inner
    return want


@pytest.mark.parametrize("n", (1, 4, 5, 6, 31, 32, 33, 34, 35, 36, 64, 67, 1000))
@pytest.mark.parametrize("threads", (1, 2))
def test_adds_into_neighbours_in_one_window_equal_item_by_item(n, threads):
    # Five read-modify-writes of dx[i - 2] .. dx[i + 2] in each chunk become one window (vectorize/windows.py):
    # one load, shuffles and selects, one store. Every length around a chunk's 32 lanes, so that the window's
    # masks start and end inside it.
    rng = np.random.default_rng(n)
    x, seed, start = rng.uniform(-1.0, 1.0, n), rng.uniform(0.5, 1.5, n), rng.uniform(-1.0, 1.0, n)
    out = []
    for kernel in (wide_stencil, item_by_item(wide_stencil)):
        dx, y, dy = start.copy(), np.zeros(n), seed.copy()
        gpuc.adjoint(kernel).launch(n, x, dx, y, dy, threads=threads)
        np.testing.assert_allclose(dx - start, _wide_stencil_gradient(x, seed), rtol=1e-12, atol=1e-12)
        out.append((dx, y, dy))
    assert differences(list(out[0]), list(out[1])) == []


def test_a_window_is_named_in_the_trace():
    n = 100
    x = np.linspace(-1.0, 1.0, n)
    for kernel in (wide_stencil, stencil):
        for schedule in (SERIAL, PARITY):
            line = _trace_line(gpuc.adjoint(kernel), x, np.zeros(n), np.zeros(n), np.ones(n), schedule=schedule)
            assert "1 window of overlapping loads and stores" in line, line
    line = _trace_line(gpuc.adjoint(elementwise), x, np.zeros(n), np.zeros(n), np.ones(n), schedule=SERIAL)
    assert "window" not in line, line  # dx[i] alone: no load overlaps a store before it


def test_a_windows_ir():
    f64 = gpuc.Array[gpuc.float64, 1]
    adjoint = gpuc.adjoint(wide_stencil)
    flags = adjoint._layout([f64] * 4)
    filecheck(str(adjoint._kernel(flags, SERIAL).inspect(*[np.zeros(8)] * 4).llvm), """
        CHECK-LABEL: vec.chunk:
        CHECK: call <40 x double> @llvm.masked.load.v40f64.p0(
        CHECK-NOT: @llvm.masked.load.v32f64
        CHECK: call void @llvm.masked.store.v40f64.p0(
        CHECK-NOT: @llvm.masked.load.v32f64
        CHECK: br
    """)


@pytest.mark.parametrize("shape", ((3, 1), (5, 2), (7, 33), (4, 70)))
@pytest.mark.parametrize("threads", (1, 2))
def test_windows_in_rows_of_2d_arrays(shape, threads):
    rows, cols = shape
    rng = np.random.default_rng(cols)
    x, seed = rng.uniform(-1.0, 1.0, (rows, cols)), rng.uniform(0.5, 1.5, (rows, cols))
    out = []
    for kernel in (row_stencil, item_by_item(row_stencil)):
        dx, y, dy = np.zeros((rows, cols)), np.zeros((rows, cols)), seed.copy()
        gpuc.adjoint(kernel).launch((cols, rows), x, dx, y, dy, threads=threads)
        out.append((dx, y, dy))
    want, inner = np.zeros_like(x), seed[:, 1:-1]
    want[:, :-2] += x[:, 2:] * inner
    want[:, 2:] += x[:, :-2] * inner
    want[:, 1:-1] += inner
    for dx, _, _ in out:
        np.testing.assert_allclose(dx, want, rtol=1e-12, atol=1e-12)
    if threads == 1:  # (on two, chunks starting inside rows add at their edges in another order)
        assert differences(list(out[0]), list(out[1])) == []


def test_random_window_programs(tmp_path):
    # the CI sample of support.window_programs (a soak: python -m support.window_programs --count N)
    from support import window_programs
    results = [window_programs.check(2026, index, tmp_path) for index in range(16)]
    assert [found for found, _ in results if found] == []
    assert sum(windowed for _, windowed in results) >= 8  # the programs exercise windows, not only lanes


@gpuc.kernel
def weighted_where_positive(x, w, y):
    i = gpuc.index()
    if x[i] > 0.0:  # only some lanes add into w's shadow
        y[i] = w[0] * x[i] + w[1] * x[i] * x[i]


def _parameter_arguments(name, n, dtype, rng):
    if name == "heat_step":
        return [rng.random(n).astype(dtype), np.zeros(n, dtype), np.zeros(n, dtype), rng.random(n).astype(dtype),
                np.array([0.3], dtype), np.zeros(1, dtype), 0.1]
    return [rng.uniform(-1, 1, n).astype(dtype), np.zeros(n, dtype), np.array([0.7, -0.2], dtype), np.zeros(2, dtype),
            np.zeros(n, dtype), rng.random(n).astype(dtype)]


@pytest.mark.parametrize("dtype", (np.float32, np.float64))
@pytest.mark.parametrize("n", (1, 5, 31, 33, 1000, 70001))
@pytest.mark.parametrize("name", ("heat_step", "weighted_where_positive"))
def test_adds_of_every_item_into_one_element_run_in_lanes_in_item_order(name, n, dtype):
    # A parameter every item reads (kappa[0], w[0], w[1]) gets every item's add into one element of its shadow:
    # in lanes one ordered sum of the lanes' terms per chunk (llvm.vector.reduce.fadd without reassoc, lanes
    # that do not add adding -0.0), so that on one thread the shadows are the item-by-item launch's bit for bit.
    # Rows of many items used to run item by item (the test of a row refused a store every lane makes to one
    # address).
    kernel = load_example("heat_tape").heat_step if name == "heat_step" else weighted_where_positive
    out = []
    for k in (kernel, item_by_item(kernel)):
        args = _parameter_arguments(name, n, dtype, np.random.default_rng(n))
        gpuc.adjoint(k).launch(n, *args, threads=1)
        out.append(args)
    assert differences(*out) == []
    line = _trace_line(gpuc.adjoint(kernel), *_parameter_arguments(name, 64, dtype, np.random.default_rng(0)),
                       schedule=SERIAL)
    assert line.startswith("vectorized at optimized") and "tested per row" in line, line
    flags = gpuc.adjoint(kernel)._layout([typeof(a, k) for k, a in
                                          enumerate(_parameter_arguments(name, 64, dtype, np.random.default_rng(0)))])
    text = gpuc.adjoint(kernel)._kernel(flags, SERIAL).inspect(
        *_parameter_arguments(name, 64, dtype, np.random.default_rng(0))).llvm
    assert "llvm.vector.reduce.fadd" in text and "reassoc" not in text


@pytest.mark.parametrize("threads", (2, 3))
def test_chunk_sums_of_a_parameters_shadow_run_in_lanes(threads):
    # On several threads every item's add into w's shadow is the autodiff plugin's sum marker (summed per chunk
    # of items, autodiff/sums.py), which stopped the body from vectorizing: now the lanes make one call with the
    # ordered sum of their values.
    n = 70001
    line = _trace_line(gpuc.adjoint(weighted_where_positive),
                       *_parameter_arguments("weighted", 64, np.float64, np.random.default_rng(0)), schedule=PARITY)
    assert line.startswith("vectorized at optimized") and "rows of one item only" not in line, line
    out = []
    for k in (weighted_where_positive, item_by_item(weighted_where_positive)):
        args = _parameter_arguments("weighted", n, np.float64, np.random.default_rng(3))
        gpuc.adjoint(k).launch(n, *args, threads=threads)
        out.append(args)
    for got, want in zip(*out):
        if isinstance(got, np.ndarray):
            np.testing.assert_allclose(got, want, rtol=1e-12)  # (the chunks' sums arrive in any order)
