"""Streaming stores (gpuc/plugins/vectorize/streaming.py): a launch that stores enough into arrays it does
nothing else with writes them non-temporally, and every result equals the launch without them, bit for bit."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

import gpuc
from support.llvm_testing import filecheck
from support.vectorize import differences, item_by_item, streaming


@functools.lru_cache(maxsize=None)
def streamed(kernel):
    """`kernel` streaming every launch (compiled once per kernel)."""
    return streaming(kernel, 0)


@functools.lru_cache(maxsize=None)
def never(kernel):
    return streaming(kernel, None)


def trace_line(kernel, *args) -> str:
    lines = [l.strip() for l in str(kernel.inspect(*args).trace).splitlines() if "vectorized at" in l]
    assert len(lines) == 1, lines
    return lines[0]


@gpuc.kernel
def saxpy(a, x, y, out):
    i = gpuc.index()
    out[i] = a * x[i] + y[i]


@gpuc.kernel
def two_outputs(x, s, c):
    i = gpuc.index()
    s[i] = math.sin(x[i])
    c[i] = x[i] * 0.5


@gpuc.kernel
def rows(u, out):
    x, y = gpuc.index(0), gpuc.index(1)
    out[y + 1, x + 1] = 0.25 * (u[y, x + 1] + u[y + 2, x + 1] + u[y + 1, x] + u[y + 1, x + 2])


@gpuc.kernel
def newton(x, out, tol):
    i = gpuc.index()
    v = x[i]
    r = v if v > 1.0 else 1.0
    while abs(r * r * r - v) > tol * v:
        r = r - (r * r * r - v) / (3.0 * r * r)
    out[i] = r


@gpuc.kernel
def narrow(x, out8, out16):
    i = gpuc.index()
    out8[i] = np.uint8(x[i] & 255)
    out16[i] = np.int16(x[i] - 7)


@gpuc.kernel
def accumulate(x, out):
    i = gpuc.index()
    out[i] += x[i]


@gpuc.kernel
def some(x, out):
    i = gpuc.index()
    if x[i] > 0.0:
        out[i] = x[i]


@gpuc.kernel
def twice(x, out):
    i = gpuc.index()
    out[i] = x[i] * 2.0
    x[i] = out[0]


SAXPY_ITEM_BY_ITEM = item_by_item(saxpy)


@gpuc.kernel
def tally(x, out, seen):
    i = gpuc.index()
    out[i] = x[i] * 2.0
    seen[i] += 1.0


@pytest.mark.parametrize("threads", (2, 3))
@pytest.mark.parametrize("n", (999, 4099, 20011))
def test_items_before_a_chunks_first_do_not_run(n, threads):
    # a chunk that starts inside a row starts its vector loop up to a vector early, at the output's
    # alignment: the items before its first belong to another chunk and must run there only
    for offset in range(4):
        x, out = buffers(n, np.float64, offset, 2, np.random.default_rng(offset))
        seen = np.zeros(n)
        streamed(tally).launch(n, x, out, seen, threads=threads)
        np.testing.assert_array_equal(seen, 1.0)
        np.testing.assert_array_equal(out, x * 2.0)


def buffers(n, dtype, offset, count, rng):
    """`count` arrays of n elements at `offset` elements into a buffer of their own: all equally misaligned."""
    out = []
    for _ in range(count):
        base = rng.standard_normal(n + offset + 16).astype(dtype)
        out.append(base[offset:offset + n])
    return out


@pytest.mark.parametrize("threads", (1, 2))
@pytest.mark.parametrize("offset", (0, 1, 3, 7))
@pytest.mark.parametrize("n", (*range(1, 70), 100, 1000, 4099))
def test_saxpy_equals_the_launch_without_streaming(n, offset, threads):
    # the elements around the output (the rest of its buffer) keep their values: every length around a
    # vector of lanes, started at each alignment
    results = []
    for kernel in (streamed(saxpy), never(saxpy), SAXPY_ITEM_BY_ITEM):
        x, y, out = buffers(n, np.float32, offset, 3, np.random.default_rng(n))
        kernel.launch(n, np.float32(2.5), x, y, out, threads=threads)
        results.append([out.base.copy(), x.base.copy()])
    assert differences(results[0], results[1]) == []
    assert differences(results[0], results[2]) == []
    x, y, _ = buffers(n, np.float32, offset, 3, np.random.default_rng(n))
    np.testing.assert_array_equal(results[0][0][offset:offset + n], np.float32(2.5) * x + y)


@pytest.mark.parametrize("threads", (1, 2))
def test_arrays_misaligned_differently_run_without_streaming(threads):
    n = 3001
    rng = np.random.default_rng(1)
    base = rng.standard_normal(n + 64).astype(np.float32)
    for shift in range(4):  # the output one element past the inputs' alignment
        out_base = np.zeros(n + 64, np.float32)
        x, y, out = base[:n], base[5:n + 5], out_base[shift:shift + n]
        streamed(saxpy).launch(n, np.float32(-1.5), x, y, out, threads=threads)
        np.testing.assert_array_equal(out, np.float32(-1.5) * x + y)
        assert not out_base[:shift].any() and not out_base[shift + n:].any()


ROWS_ITEM_BY_ITEM = item_by_item(rows)


@pytest.mark.parametrize("threads", (1, 2))
@pytest.mark.parametrize("shape", ((3, 5), (7, 37), (40, 70), (130, 261)))
def test_rows_of_a_2d_output(shape, threads):
    rng = np.random.default_rng(shape[1])
    u = rng.standard_normal(shape)
    got, want = np.zeros(shape), np.zeros(shape)
    streamed(rows).launch((shape[1] - 2, shape[0] - 2), u, got, threads=threads)
    ROWS_ITEM_BY_ITEM.launch((shape[1] - 2, shape[0] - 2), u, want, threads=threads)
    assert differences([got], [want]) == []
    if min(shape) > 2:
        np.testing.assert_array_equal(got[1:-1, 1:-1], 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]))


@pytest.mark.parametrize("threads", (1, 2))
@pytest.mark.parametrize("n", (5, 33, 1000))
def test_a_body_with_a_loop_streams_what_it_stores_after_it(n, threads):
    rng = np.random.default_rng(n)
    x = rng.uniform(0.5, 1000.0, n)
    got, want = np.zeros(n), np.zeros(n)
    streamed(newton).launch(n, x, got, 1e-12, threads=threads)
    item_by_item(newton).launch(n, x, want, 1e-12, threads=threads)
    assert differences([got], [want]) == []
    assert "1 streaming store" in trace_line(streamed(newton), x, got, 1e-12)


@pytest.mark.parametrize("n", (7, 100, 1025))
def test_outputs_of_one_size_stream_together(n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n)
    s, c = np.zeros(n), np.zeros(n)
    streamed(two_outputs).launch(n, x, s, c)
    s2, c2 = np.zeros(n), np.zeros(n)
    item_by_item(two_outputs).launch(n, x, s2, c2)
    assert differences([s, c], [s2, c2]) == []
    assert "2 streaming stores" in trace_line(streamed(two_outputs), x, s, c)


@pytest.mark.parametrize("n", (7, 100, 1025))
def test_narrow_elements(n):
    x = np.arange(n, dtype=np.int64) * 37
    a8, a16 = np.zeros(n, np.uint8), np.zeros(n, np.int16)
    streamed(narrow).launch(n, x, a8, a16, threads=2)
    np.testing.assert_array_equal(a8, (x & 255).astype(np.uint8))
    np.testing.assert_array_equal(a16, (x - 7).astype(np.int16))
    # bytes and halves cannot start aligned together: the first's size streams
    assert "1 streaming store" in trace_line(streamed(narrow), x, a8, a16)


@pytest.mark.parametrize("threads", (1, 2))
@pytest.mark.parametrize("n", (33, 100, 1025))
def test_a_store_some_items_make_streams_where_every_lane_makes_it(n, threads):
    # runs of positive and negative inputs, some longer than a vector of lanes, some shorter
    x = np.sin(np.arange(n) * np.where(np.arange(n) < n // 2, 0.02, 0.3))
    got, want = np.full(n, 7.0), np.full(n, 7.0)
    streamed(some).launch(n, x, got, threads=threads)
    item_by_item(some).launch(n, x, want, threads=threads)
    assert differences([got], [want]) == []
    np.testing.assert_array_equal(got, np.where(x > 0.0, x, 7.0))
    assert "1 streaming store" in trace_line(streamed(some), x, got)


@pytest.mark.parametrize("kernel", (accumulate, twice), ids=("accumulate", "twice"))
def test_stores_that_do_not_stream(kernel):
    # an output that is also read, an output read back
    n = 100
    x = np.linspace(-1.0, 1.0, n)
    got, want = np.ones(n), np.ones(n)
    x1, x2 = x.copy(), x.copy()
    streamed(kernel).launch(n, x1, got)
    item_by_item(kernel).launch(n, x2, want)
    assert differences([got, x1], [want, x2]) == []
    assert "streaming" not in trace_line(streamed(kernel), x, got)


def test_a_bounds_checked_store_does_not_stream():
    kernel = type(saxpy)(saxpy.py_func, {"streaming_bytes": 0, "boundscheck": True})
    x = np.ones(64, np.float32)
    out = np.zeros(64, np.float32)
    kernel.launch(64, np.float32(2.0), x, x, out)
    np.testing.assert_array_equal(out, 3.0)


def test_the_ir_streams_aligned_and_fences():
    x = np.ones(64, np.float32)
    ir = saxpy.inspect(np.float32(2.0), x, x, x).llvm
    filecheck(ir, """
    CHECK: define void @saxpy.{{.*}}.range(
    CHECK: [[ITEMS:%items[0-9]*]] = mul i64
    CHECK: icmp ugt i64 [[ITEMS]], 2097151
    CHECK: store <{{[0-9]+}} x float> {{.*}}, ptr {{.*}}, align {{32|64}}, !nontemporal
    CHECK: call void @llvm.masked.store.v{{[0-9]+}}f32.p0(
    """)
    # one sfence, before the launch entry returns (not per row)
    assert ir.count("call void @llvm.x86.sse.sfence()") == 1
    assert "call void @llvm.x86.sse.sfence()\n  ret void" in ir
    asm = saxpy.inspect(np.float32(2.0), x, x, x).output
    assert "vmovntps" in asm and "sfence" in asm


def test_the_trace_names_the_threshold():
    x = np.ones(64, np.float32)
    line = trace_line(saxpy, np.float32(2.0), x, x, x)
    assert "1 streaming store (non-temporal from 8388608 bytes stored; other launches: LLVM)" in line, line
    assert "not vectorized" in trace_line(never(saxpy), np.float32(2.0), x, x, x)


def test_a_launch_past_the_threshold_equals_numpy():
    n = (8 << 20) // 4 + 77  # past 8 MiB of float32 output
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    saxpy.launch(n, np.float32(0.75), x, y, out, threads=2)
    np.testing.assert_array_equal(out, np.float32(0.75) * x + y)


@pytest.mark.parametrize("value", (-1, 1.5, True, "big"))
def test_a_bad_threshold_is_refused(value):
    with pytest.raises(ValueError, match="streaming_bytes"):
        gpuc.kernel(streaming_bytes=value)(saxpy.py_func)


@pytest.mark.parametrize("threads", (1, 2))
@pytest.mark.parametrize("shift", (0, 1, -1, 5))
def test_an_output_that_is_also_an_input(shift, threads):
    # out is x itself, or x shifted by a few elements: the memory test decides whether the row runs in
    # lanes; where it does, the streamed store of an item comes after its loads
    n = 1000
    y = np.random.default_rng(3).standard_normal(n).astype(np.float32)
    results = []
    for kernel in (streamed(saxpy), SAXPY_ITEM_BY_ITEM):
        buf = np.random.default_rng(shift + 10).standard_normal(n + 20).astype(np.float32)
        x, out = buf[10:10 + n], buf[10 + shift:10 + shift + n]
        kernel.launch(n, np.float32(1.25), x, y, out, threads=threads)
        results.append([buf])
    if threads == 1 or shift == 0:  # (with a shift, two threads race at their chunks' edges either way)
        assert differences(results[0], results[1]) == []
    if shift == 0:
        x = np.random.default_rng(10).standard_normal(n + 20).astype(np.float32)[10:10 + n]
        np.testing.assert_array_equal(results[0][0][10:10 + n], np.float32(1.25) * x + y)


@gpuc.kernel
def counted(x, out, hits):
    i = gpuc.index()
    out[i] = x[i] * 3.0
    gpuc.atomic_add(hits, 0, 1)


def test_an_output_also_touched_by_an_atomic_does_not_stream():
    n = 100
    x = np.linspace(0.0, 1.0, n)
    out, hits = np.zeros(n), np.zeros(1, np.int64)
    streamed(counted).launch(n, x, out, hits, threads=2)
    np.testing.assert_array_equal(out, x * 3.0)
    assert hits[0] == n
    line = trace_line(streamed(counted), x, out, hits)
    assert "1 streaming store" in line, line  # out streams; hits, touched by the atomic only, is not a store


@gpuc.kernel
def stored_and_counted(x, iout):
    i = gpuc.index()
    iout[i] = x[i]
    gpuc.atomic_add(iout, 0, 1)


def test_an_output_an_atomic_also_touches_does_not_stream():
    n = 100
    x = np.arange(n, dtype=np.int64)
    got, want = np.zeros(n, np.int64), np.zeros(n, np.int64)
    streamed(stored_and_counted).launch(n, x, got, threads=1)
    item_by_item(stored_and_counted).launch(n, x, want, threads=1)
    np.testing.assert_array_equal(got, want)
    assert got[0] == n and (got[1:] == x[1:]).all()
    assert "streaming" not in trace_line(streamed(stored_and_counted), x, got)


def _variants(kernel) -> list:
    """The CPU launchers `kernel` compiled: 'small' for the variant without streaming stores."""
    return sorted("small" if "small" in key[1] else "streams" for key in kernel.__dict__.get("_gpuc_launchers", {}))


# A body without loops that may stream compiled two vector loops for every launch (about twice the compile
# time); a launch too small to stream now compiles without them: its work items times the bytes of one
# element of each array stay below the threshold.
def test_launches_too_small_to_stream_compile_without_streaming_stores():
    kernel = gpuc.kernel(streaming_bytes=4096)(saxpy.py_func)   # float64 saxpy: 24 bytes per item, 171 items
    x, y = np.arange(600.0), np.ones(600)
    out = np.zeros(600)
    kernel[170](2.0, x[:170], y[:170], out[:170])
    assert _variants(kernel) == ["small"]
    launcher = gpuc.runtime.dispatch.launcher_for(kernel, (2.0, x, y, out))   # without n: the one compiled
    assert launcher.item_limit == 171
    assert "streaming" not in str(launcher.module.trace)
    for _ in range(3):  # the plan of the small variant takes small launches only
        kernel[171](2.0, x[:171], y[:171], out[:171])
    assert _variants(kernel) == ["small", "streams"]
    kernel[600](3.0, x, y, out)   # 600 * 8 bytes stored: streams
    np.testing.assert_array_equal(out, 3.0 * x + 1.0)
    kernel[100](4.0, x, y, out)   # the variant that streams serves every launch once it is compiled
    assert _variants(kernel) == ["small", "streams"]
    np.testing.assert_array_equal(out[:100], 4.0 * x[:100] + 1.0)


def test_a_prepared_launch_compiles_the_variant_of_its_size():
    kernel = gpuc.kernel(streaming_bytes=4096)(saxpy.py_func)
    x, out = np.arange(16.0), np.zeros(16)
    kernel.prepare(16, 2.0, x, x, out)()
    assert _variants(kernel) == ["small"]
    np.testing.assert_array_equal(out, 3.0 * x)
    big, big_out = np.arange(600.0), np.zeros(600)
    kernel.prepare(600, 2.0, big, big, big_out)()
    assert _variants(kernel) == ["small", "streams"]
    np.testing.assert_array_equal(big_out, 3.0 * big)
