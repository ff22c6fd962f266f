"""Vectorization across work items (gpuc/plugins/vectorize): every launch equals the launch without it,
bit for bit, and the trace says what was vectorized and what ran lane by lane."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gpuc
from gpuc.compiler import CompilerConfig
from gpuc.targets import NativeTarget
from support import vector_kernels as vk
from support.vectorize import differences, item_by_item

SIZES = (1, 3, 15, 16, 17, 33, 100)
NAMES = ("newton", "branches", "divide", "math_loop", "gather", "histogram", "big_func", "recursive", "rows",
         "derivative", "straight_derivative", "tapes")


def both(kernel, n, make, threads=1):
    """The arrays after launching `kernel` and its item-by-item twin on the same arguments."""
    out = []
    for k in (kernel, item_by_item(kernel)):
        args = make()
        k.launch(n, *args, threads=threads)
        out.append([np.array(a) for a in args if isinstance(a, np.ndarray)])
    return out


def trace_line(kernel, *args) -> str:
    lines = [l.strip() for l in str(kernel.inspect(*args).trace).splitlines() if "vectorized at" in l]
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("n", SIZES)
def test_equal_to_item_by_item(name, n):
    kernel = getattr(vk, name)
    vectorized, scalar = both(kernel, n, lambda: vk.arguments(name, n, np.random.default_rng(n)))
    assert differences(vectorized, scalar) == []


@pytest.mark.parametrize("name", ("newton", "branches", "math_loop"))
def test_threads(name):
    # chunks of a launch split between threads start inside a vector of lanes
    n = 1001
    vectorized, scalar = both(getattr(vk, name), n, lambda: vk.arguments(name, n, np.random.default_rng(5)), threads=2)
    assert differences(vectorized, scalar) == []


@pytest.mark.parametrize("name", ("newton", "branches", "gather", "histogram", "tapes", "straight_derivative"))
@pytest.mark.parametrize("n, threads", [(32, 1), (64, 1), (65, 1), (96, 3), (131, 2), (1000, 3)])
def test_whole_chunks_equal_to_item_by_item(name, n, threads):
    # chunks whose lanes are all items run a copy of a body without loops, without the mask; the rest (a
    # row's last chunk, one a thread starts inside a vector) the masked body
    vectorized, scalar = both(getattr(vk, name), n, lambda: vk.arguments(name, n, np.random.default_rng(n)), threads)
    assert differences(vectorized, scalar) == []


def test_whole_chunks_of_bodies_without_loops_are_named():
    n = 64
    line = trace_line(vk.straight_derivative, *vk.arguments("straight_derivative", n, np.random.default_rng(0)))
    assert "whole chunks without the mask" in line, line
    line = trace_line(vk.newton, *vk.arguments("newton", n, np.random.default_rng(0)))
    assert "whole chunks" not in line, line  # a body with a loop: one copy


@pytest.mark.parametrize("name", ("newton", "branches", "divide", "math_loop", "big_func"))
def test_vectorized(name):
    line = trace_line(getattr(vk, name), *vk.arguments(name, 8, np.random.default_rng(0)))
    assert line.startswith("vectorized at simplified"), line
    assert "lane by lane" not in line


@pytest.mark.parametrize("name", ("derivative", "straight_derivative"))
def test_derivative_kernels_vectorize_once_derived(name):
    line = trace_line(getattr(vk, name), *vk.arguments(name, 8, np.random.default_rng(0)))
    assert line.startswith("vectorized at optimized"), line


def test_lane_by_lane_is_named():
    line = trace_line(vk.histogram, *vk.arguments("histogram", 8, np.random.default_rng(0)))
    assert line.startswith("vectorized") and "lane by lane: atomicrmw" in line, line
    assert "1 commuting atomics, tested per row" in line, line  # rows of many items run in lanes
    line = trace_line(vk.recursive, *vk.arguments("recursive", 8, np.random.default_rng(0)))
    assert "lane by lane: call @depth" in line, line


def test_rows_are_left_to_llvm():
    line = trace_line(vk.rows, *vk.arguments("rows", 8, np.random.default_rng(0)))
    assert line.startswith("not vectorized") and "walks memory item by item" in line, line


def test_two_dimensional():
    for width, height in ((1, 1), (7, 3), (33, 5), (64, 2)):
        vectorized, scalar = both(vk.escape, (width, height), lambda: (np.zeros((height, width), np.uint8), 40))
        assert differences(vectorized, scalar) == []
    assert trace_line(vk.escape, np.zeros((2, 2), np.uint8), 40).startswith("vectorized")


def test_overlapping_arrays():
    # b is a one further along: item i writes what item i + 1 reads; the row falls back to one item after another
    def make():
        base = np.linspace(0.0, 3.0, 41)
        return (base[:-1], base[1:])
    vectorized, scalar = both(vk.shift, 40, make)
    assert differences(vectorized, scalar) == []
    assert vectorized[0][5] != make()[0][5]  # the items did see each other's writes


def test_funcs_are_inlined():
    # a func too large for LLVM's inliner: the launch loop calls it no more
    args = vk.arguments("big_func", 8, np.random.default_rng(0))
    result = vk.big_func.inspect(*args)
    assert "call" not in [line.split()[2] if len(line.split()) > 2 else "" for line in result.llvm.splitlines()
                          if "@relax" in line and "=" in line]
    assert "@relax" not in result.llvm.split(".range(")[-1]


def test_option_and_cache_key():
    on, off = CompilerConfig(NativeTarget()), CompilerConfig(NativeTarget(), vectorize=False)
    assert on.vectorize and not off.vectorize and on != off
    twin = item_by_item(vk.newton)
    lines = [line.strip() for line in str(twin.inspect(*vk.arguments("newton", 4, np.random.default_rng(0))).trace)
             .splitlines() if "vectorized at" in line]
    assert lines and all(line.startswith("not vectorized at") and "vectorize=False" in line for line in lines), lines


def test_random_programs(tmp_path):
    # the CI sample of support.vector_programs (a soak: python -m support.vector_programs --count N)
    from support import vector_programs

    found = [f for index in range(12) if (f := vector_programs.check(2026, index, tmp_path))]
    assert found == []


def test_random_programs_with_tapes(tmp_path):
    # Programs 50 and 96 of the seed take 5 and 6 taped gradients (grad, value_and_grad, vjp): the lanes'
    # tapes shared a stack buffer before each item got its own (test_every_item_keeps_its_own_tape), and
    # items differed from the launch item by item.
    from support import vector_programs

    assert all("gpuc.value_and_grad(taped" in vector_programs.program(2026, index) for index in (50, 96))
    found = [f for index in (50, 96) if (f := vector_programs.check(2026, index, tmp_path))]
    assert found == []


@pytest.mark.parametrize("name", ("newton", "branches", "math_loop", "gather", "divide", "histogram"))
def test_avx2_lanes(name):
    # an AVX2 host (8 lanes of 64 bits, libmvec's d variants), compiled here without AVX-512
    from gpuc.abi import KernelSignature
    from gpuc.compiler import CompilerJob
    from gpuc.runtime import JITModule
    from gpuc.runtime.dispatch import launch_job, signature_spec, typeof

    host = NativeTarget()
    if "+avx2" not in host.feature_string.split(","):
        pytest.skip("the host has no AVX2")
    features = ",".join(f for f in host.feature_string.split(",") if not f.startswith("+avx512")) + ",-avx512f"
    target = NativeTarget(cpu_name="haswell", feature_string=features)
    kernel, n = getattr(vk, name), 45
    outs, lines = [], []
    for vectorize in (True, False):
        args = vk.arguments(name, n, np.random.default_rng(1))
        types = tuple(typeof(a, i) for i, a in enumerate(args))
        job = launch_job(kernel, types, "cpu")
        job = CompilerJob(job.source, job.config.replace(target=target, vectorize=vectorize))
        module = JITModule(job, signature=KernelSignature(signature_spec(types)))
        module.launcher()(n, args, 1)
        outs.append([np.array(a) for a in args if isinstance(a, np.ndarray)])
        lines += [l.strip() for l in str(module.trace).splitlines() if "vectorized at" in l]
    assert differences(*outs) == []
    assert lines and lines[0].startswith("vectorized") and "(8 lanes" in lines[0], lines


def test_the_kernel_option_turns_it_off():
    def halve(a):
        i = gpuc.index()
        while a[i] > 1.0:
            a[i] *= 0.5

    on, off = gpuc.kernel(halve), gpuc.kernel(vectorize=False)(halve)
    assert "vectorized at simplified" in str(on.inspect(np.full(64, 9.0)).trace)
    assert "vectorized at" not in str(off.inspect(np.full(64, 9.0)).trace).replace("not vectorized at", "")
    with pytest.raises(ValueError, match=r"@gpuc.kernel\(vectorize=...\) is True or False"):
        gpuc.kernel(vectorize=1)(halve)


@gpuc.kernel
def read_then_clear(a, steps, out):
    i = gpuc.index()
    s = steps[i]
    v = 0.5
    if s > 5:
        for _ in range(s):
            v = v * 0.5 + 1.0
    elif s > 0:
        for _ in range(s):
            v += 2.0
    else:
        v = a[i]
        a[i] = 0.0
    out[i] = v


def test_a_load_stays_before_the_store_that_follows_it():
    # LLVM 22's instcombine made `select(mask, masked.load(p, mask, 0), x)` a new masked load of p where the
    # select is, after the branch's store to p: out[i] read 0 where a[i] was (the lanes' loads are frozen since).
    n = 40

    def make():
        return [np.arange(1.0, n + 1), np.array([(j * 7) % 9 - 2 for j in range(n)]), np.zeros(n)]

    vectorized, scalar = both(read_then_clear, n, make)
    assert differences(vectorized, scalar) == []
    assert trace_line(read_then_clear, *make()).startswith("vectorized at simplified")


@gpuc.kernel
def take_under_branch(a, c, out):
    i = gpuc.index()
    v = 1.0
    if c[i] > 0.0:
        v = a[i]
        a[i] = 0.0
    out[i] = v


@pytest.mark.parametrize("threads", (1, 2))
def test_a_read_before_a_write_under_a_branch_survives_llvms_vectorizer(threads):
    # A body without a loop goes to LLVM's loop vectorizer, which made `v = a[i]` a masked load and the phi
    # of v a select on its mask; LLVM 22's instcombine folded them into a masked load placed after the masked
    # store `a[i] = 0.0`: out[i] was 0 where it should be a[i]. The plugin freezes such reads first.
    n = 64
    a, c, out = np.arange(1.0, n + 1), np.where(np.arange(n) % 3 == 0, 1.0, -1.0), np.zeros(n)
    take_under_branch.launch(n, a, c, out, threads=threads)
    np.testing.assert_array_equal(out, np.where(c > 0, np.arange(1.0, n + 1), 1.0))
    np.testing.assert_array_equal(a, np.where(c > 0, 0.0, np.arange(1.0, n + 1)))
    ir = take_under_branch.inspect(a, c, out).llvm
    assert "llvm.masked.load" in ir and "freeze" in ir  # LLVM's vectorizer still takes the loop


@pytest.mark.parametrize("threads", (1, 2))
def test_without_vectorization_the_read_before_the_write_survives_too(threads):
    # CompilerConfig(vectorize=False) leaves the launch loop to LLVM's vectorizer as well: the plugin still
    # freezes such reads (it fires only for that)
    n = 64
    plain = item_by_item(take_under_branch)
    a, c, out = np.arange(1.0, n + 1), np.where(np.arange(n) % 3 == 0, 1.0, -1.0), np.zeros(n)
    plain.launch(n, a, c, out, threads=threads)
    np.testing.assert_array_equal(out, np.where(c > 0, np.arange(1.0, n + 1), 1.0))
    np.testing.assert_array_equal(a, np.where(c > 0, 0.0, np.arange(1.0, n + 1)))
    assert "freeze" in plain.inspect(a, c, out).llvm


@gpuc.kernel
def local_scratch(x, steps, out):
    i = gpuc.index()
    buf = gpuc.local.array(8, gpuc.float64)
    for j in range(8):
        buf[j] = x[i] * j
    s = 0.0
    for j in range(steps[i]):
        s += buf[j % 8] * math.sin(s + 1.0)
        buf[(j * 3) % 8] = s
    out[i] = s + buf[steps[i] % 8]


@pytest.mark.parametrize("n", (1, 31, 77))
def test_local_arrays_get_a_copy_per_lane(n):
    # A local array is a stack slot each item starts afresh (llvm.lifetime.start in the body): a copy per lane.
    def make():
        rng = np.random.default_rng(n)
        return [rng.uniform(-1, 1, n), rng.integers(0, 20, n), np.zeros(n)]

    vectorized, scalar = both(local_scratch, n, make)
    assert differences(vectorized, scalar) == []
    line = trace_line(local_scratch, *make())
    assert line.startswith("vectorized at simplified") and "tested per row" in line, line


@gpuc.kernel
def large_local(x, out):
    i = gpuc.index()
    buf = gpuc.local.array(4096, gpuc.float64)
    for j in range(4096):
        buf[j] = x[i] + j
    s = 0.0
    for j in range(int(x[i] * 10.0) % 7 + 1):
        s += buf[j * 5]
    out[i] = s


def test_large_local_arrays_keep_one_copy():
    # 32 copies of 32 KiB would be 1 MiB of a pool thread's stack: rows with such a slot run item by item.
    n = 40

    def make():
        return [np.linspace(0.0, 1.0, n), np.zeros(n)]

    vectorized, scalar = both(large_local, n, make)
    assert differences(vectorized, scalar) == []
    ir = large_local.inspect(*make()).llvm
    assert "x [4096 x double]]" not in ir and "[4096 x double]" in ir


def test_every_item_keeps_its_own_tape():
    # Five tapes' first buffers (stack slots) are more than 64 KiB for 32 lanes: where a slot kept one copy
    # for all lanes, the lanes' pushes went into the same buffer and an item read another's branch (the
    # clamp's), a wrong gradient. The lanes halve until every tape's buffer has a copy per lane.
    n = 40
    args = vk.arguments("tapes", n, np.random.default_rng(3))
    vk.tapes.launch(n, *args, threads=2)
    want = [[gpuc.grad(vk.two_gradients, x, 3)[0], gpuc.grad(vk.clamped_slope, x, 3)[0]] for x in args[0]]
    np.testing.assert_allclose(args[1], want, rtol=1e-13)
    assert len({round(w[1], 9) for w in want}) > 2  # items on both sides of the clamp
    line = trace_line(vk.tapes, *args)
    assert line.startswith("vectorized at optimized"), line


@pytest.mark.parametrize("budget, lanes", ((12 * 1024, "4 lanes"), (4096, None)))
def test_lanes_halve_for_the_tapes_slots(monkeypatch, budget, lanes):
    # Five tapes' first buffers (2560 bytes an item) in 12 KiB: 4 lanes; in 4 KiB not even 2 fit: item by item.
    from gpuc.plugins.vectorize import private

    monkeypatch.setattr(private, "MAX_COPY_BYTES", budget)
    monkeypatch.setenv("GPUC_CACHE", "0")
    kernel = gpuc.kernel(vk.tapes.py_func)
    n = 37
    vectorized, scalar = both(kernel, n, lambda: vk.arguments("tapes", n, np.random.default_rng(4)))
    assert differences(vectorized, scalar) == []
    line = trace_line(kernel, *vk.arguments("tapes", n, np.random.default_rng(4)))
    if lanes:
        assert line.startswith("vectorized at optimized") and f"{lanes}," in line, line
    else:
        assert line.startswith("not vectorized at optimized") and "(2560 bytes)" in line and "do not fit in 4096 bytes for 2 lanes" in line, line


@pytest.mark.parametrize("where", ["test", "body"])
def test_a_build_that_fails_leaves_the_loop_as_it_was(where, monkeypatch):
    # The memory test and the vector loop's entry are built in a block split off in front of the loop's
    # preheader; where either fails (an Unsupported the emitter finds late), the split is undone: the
    # module is the one before, the loop runs item by item, and the callback reports no change.
    from gpuc.plugins.vectorize import emit, memory
    from gpuc.plugins.vectorize.loops import Unsupported

    def fail(*args, **kwargs):
        raise Unsupported("failed on purpose")

    if where == "test":
        build_test = memory.Memory.guard

        def guard(self, b, count, first):
            build_test(self, b, count, first)  # (its instructions made, then the failure)
            fail()
        monkeypatch.setattr(memory.Memory, "guard", guard)
    else:
        monkeypatch.setattr(emit.VectorBody, "region", fail)
    monkeypatch.setenv("GPUC_CACHE", "0")
    kernel = gpuc.kernel(vk.newton.py_func)
    n = 37
    vectorized, scalar = both(kernel, n, lambda: vk.arguments("newton", n, np.random.default_rng(3)))
    assert differences(vectorized, scalar) == []
    result = kernel.inspect(*vk.arguments("newton", n, np.random.default_rng(3)))
    lines = [l.strip() for l in str(result.trace).splitlines() if "vectoriz" in l]
    assert any(l.startswith("not vectorized at simplified") and "failed on purpose" in l for l in lines), lines
    assert any("gpuc.cpu.vectorize" in l and "unchanged" in l for l in lines), lines
    assert ".vec:" not in result.llvm and "vec.count" not in result.llvm
