"""The CPU launcher: the generated range wrapper, argument marshalling and multi-threaded launches."""

from __future__ import annotations

import time

import numpy as np
import pytest

import gpuc
from gpuc.runtime import JITModule, KernelSignature, launch, load
from gpuc.runtime.cpu import default_threads, index_space

from support.ctx_kernels import (MARKER_FREE_IR, RECURSIVE_IR, indexing_expected, indexing_kernel, indexing_signature,
                                 job)

SAXPY_IR = """\
declare i64 @gpuc.ctx.index(i32)
define void @saxpy(float %a, ptr %x, i64 %xs, i64 %xt, ptr %y, i64 %ys, i64 %yt) {
  %i = call i64 @gpuc.ctx.index(i32 0)
  %xo = mul i64 %i, %xt
  %yo = mul i64 %i, %yt
  %xp = getelementptr float, ptr %x, i64 %xo
  %yp = getelementptr float, ptr %y, i64 %yo
  %xv = load float, ptr %xp
  %yv = load float, ptr %yp
  %m = fmul float %a, %xv
  %r = fadd float %m, %yv
  store float %r, ptr %yp
  ret void
}
"""
SAXPY_SIGNATURE = [("scalar", "float"), ("array", np.float32, 1), ("array", np.float32, 1)]

SCALARS_IR = """\
define void @kernel(i1 %b, i32 %i, i64 %l, float %f, double %d, ptr %out, i64 %s0, i64 %t0) {
  %bv = uitofp i1 %b to double
  %iv = sitofp i32 %i to double
  %lv = sitofp i64 %l to double
  %fv = fpext float %f to double
  %p1 = getelementptr double, ptr %out, i64 1
  %p2 = getelementptr double, ptr %out, i64 2
  %p3 = getelementptr double, ptr %out, i64 3
  %p4 = getelementptr double, ptr %out, i64 4
  store double %bv, ptr %out
  store double %iv, ptr %p1
  store double %lv, ptr %p2
  store double %fv, ptr %p3
  store double %d, ptr %p4
  ret void
}
"""
SCALARS_SIGNATURE = [("scalar", "i1"), ("scalar", "i32"), ("scalar", "i64"), ("scalar", "float"),
                     ("scalar", "double"), ("array", np.float64, 1)]


@pytest.fixture(scope="module")
def indexing():
    modules = {d: JITModule(job(indexing_kernel(d)), signature=indexing_signature(d)) for d in (1, 2, 3)}
    yield modules
    for m in modules.values():
        m.close()


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", [(1000,), (37, 19), (7, 5, 11)], ids=["1d", "2d", "3d"])
def test_index_spaces_match_numpy(indexing, shape, threads):
    module = indexing[len(shape)]
    assert module.abi.launch == "context" and module.launch_entry == "kernel.range"
    rng = np.random.default_rng(0)
    inp = rng.random(shape)
    out = np.full(shape, np.nan)
    launch(module, shape, (1.5, inp, out), threads=threads)
    np.testing.assert_array_equal(out, indexing_expected(1.5, inp))


def test_strided_and_transposed_arrays(indexing):
    base = np.random.default_rng(1).random((40, 30))
    inp = base[::2, 1::3].T  # non-contiguous, transposed: shape (10, 20)
    out = np.zeros((10, 20))[:, ::-1]  # negative stride
    launch(indexing[2], inp.shape, (2.0, inp, out), threads=2)
    np.testing.assert_array_equal(out, indexing_expected(2.0, inp))


def test_more_threads_than_items(indexing):
    inp = np.arange(3.0)
    out = np.zeros(3)
    launch(indexing[1], 3, (1.0, inp, out), threads=8)
    np.testing.assert_array_equal(out, indexing_expected(1.0, inp))


def test_saxpy_float32():
    with JITModule(job(SAXPY_IR, entry="saxpy"), signature=SAXPY_SIGNATURE) as module:
        x = np.linspace(0, 1, 100_003, dtype=np.float32)
        y = np.ones_like(x)
        launch(module, x.size, (3.0, x, y), threads=2)
        np.testing.assert_allclose(y, np.float32(3.0) * x + 1, rtol=1e-6)


def test_scalar_parameters():
    with JITModule(job(SCALARS_IR), signature=SCALARS_SIGNATURE) as module:
        out = np.zeros(5)
        launch(module, 1, (True, -7, 2**40, 0.5, -1.25, out))
        np.testing.assert_array_equal(out, [1, -7, 2**40, 0.5, -1.25])
        launch(module, 1, (False, 2**32 - 1, -(2**63), 1.0, 0.0, out))  # unsigned spellings wrap
        np.testing.assert_array_equal(out, [0, -1, -(2.0**63), 1.0, 0.0])
        with pytest.raises(OverflowError, match="does not fit in i32"):
            launch(module, 1, (True, 2**32, 0, 0.0, 0.0, out))
        with pytest.raises(TypeError):
            launch(module, 1, (True, 1.5, 0, 0.0, 0.0, out))


def test_recursion_through_a_marker_reaching_function():
    with JITModule(job(RECURSIVE_IR), signature=[("array", np.int64, 1)]) as module:
        out = np.zeros(50, np.int64)
        launch(module, 50, (out,), threads=2)
        np.testing.assert_array_equal(out, 4 * np.arange(50))


def test_marker_free_kernel_runs_once_per_item():
    with JITModule(job(MARKER_FREE_IR), signature=[("array", np.int64, 1)]) as module:
        assert module.abi.launch == "none" and module.launch_entry == "kernel.range"
        counter = np.zeros(1, np.int64)
        launch(module, (10, 3, 2), (counter,), threads=2)
        assert counter[0] == 60


def test_unoptimized_kernel_launches():
    with JITModule(job(indexing_kernel(2), optimize=False), signature=indexing_signature(2)) as module:
        inp = np.ones((4, 6))
        out = np.zeros((4, 6))
        launch(module, (4, 6), (0.5, inp, out), threads=2)
        np.testing.assert_array_equal(out, indexing_expected(0.5, inp))


def test_empty_index_space_does_nothing(indexing):
    out = np.full(4, 7.0)
    launch(indexing[1], 0, (1.0, np.zeros(4), out))
    launch(indexing[1], (4, 0), (1.0, np.zeros(4), out))
    assert (out == 7.0).all()


# -- errors ------------------------------------------------------------------------------------

def test_argument_errors(indexing):
    module = indexing[1]
    inp, out = np.zeros(4), np.zeros(4)
    with pytest.raises(TypeError, match="takes 3 argument"):
        launch(module, 4, (1.0, inp))
    with pytest.raises(TypeError, match=r"argument 1 \(in\) of @kernel must hold float64, not '<f4' \(float32\)"):
        launch(module, 4, (1.0, inp.astype(np.float32), out))
    with pytest.raises(TypeError, match="must have 1 dimension\\(s\\), not 2"):
        launch(module, 4, (1.0, np.zeros((2, 2)), out))
    with pytest.raises(TypeError, match="must be a numpy array, not list"):
        launch(module, 4, (1.0, [0.0] * 4, out))
    odd = np.lib.stride_tricks.as_strided(np.zeros(8), shape=(3,), strides=(12,))
    with pytest.raises(ValueError, match="not multiples of the item size 8"):
        launch(module, 3, (1.0, odd, out))


def test_signature_errors(indexing):
    module = indexing[2]
    with pytest.raises(TypeError, match=r"flattens to .* but @kernel takes"):
        launch(module, 4, (1.0, np.zeros(4), np.zeros(4)), signature=indexing_signature(1))
    with pytest.raises(ValueError, match="bad kernel parameter"):
        KernelSignature([("array", np.float64, 4)])
    with pytest.raises(TypeError, match="'i128' is not a scalar type"):
        KernelSignature([("scalar", "i128")])
    with JITModule(job(SAXPY_IR, entry="saxpy")) as bare:
        with pytest.raises(TypeError, match="needs its KernelSignature"):
            launch(bare, 4, ())


def test_non_kernel_without_context_cannot_launch():
    ir = "define void @f(ptr %p) {\n  store i64 1, ptr %p\n  ret void\n}\n"
    with JITModule(job(ir, entry="f", kernel=False)) as module:
        assert module.launch_entry is None
        with pytest.raises(TypeError, match="cannot be launched"):
            launch(module, 1, (0,), signature=[("scalar", "ptr")])


@pytest.mark.parametrize("n, message", [(-1, "negative"), ((1, 2, 3, 4), "1 to 3 dimensions"), ((), "1 to 3")])
def test_bad_index_spaces(n, message):
    with pytest.raises(ValueError, match=message):
        index_space(n)


def test_thread_count_from_the_environment(monkeypatch, indexing):
    monkeypatch.setenv("GPUC_NUM_THREADS", "3")
    assert default_threads() == 3
    monkeypatch.setenv("GPUC_NUM_THREADS", "zero")
    big = 1 << 14  # read by launches large enough for more than one thread (small ones run on the caller)
    with pytest.raises(ValueError, match="GPUC_NUM_THREADS"):
        launch(indexing[1], big, (1.0, np.zeros(big), np.zeros(big)))
    launch(indexing[1], 2, (1.0, np.zeros(2), np.zeros(2)))
    with pytest.raises(ValueError, match="threads must be at least 1"):
        launch(indexing[1], 2, (1.0, np.zeros(2), np.zeros(2)), threads=0)


def test_warm_launch_overhead_is_small():
    # Loose bound only (see benchmarks/ for speed targets); the figure is printed with -s.
    ir = "declare i64 @gpuc.ctx.index(i32)\ndefine void @empty(ptr %x, i64 %s, i64 %t) {\n" \
         "  %i = call i64 @gpuc.ctx.index(i32 0)\n  ret void\n}\n"
    with JITModule(job(ir, entry="empty"), signature=[("array", np.float32, 1)]) as module:
        x = np.zeros(8, np.float32)
        for _ in range(50):
            launch(module, 1, (x,), threads=1)
        rounds = 500
        start = time.perf_counter()
        for _ in range(rounds):
            launch(module, 1, (x,), threads=1)
        per_launch = (time.perf_counter() - start) / rounds
        print(f"warm launch of an empty kernel: {per_launch * 1e6:.1f} us")
        assert per_launch < 5e-3


def test_undefined_external_is_named_before_jitting():
    # Regression: a kernel calling a function nothing defines (e.g. a marker without a plugin)
    # failed inside the JIT with "Failed to materialize symbols", naming the symbol only on stderr.
    ir = """\
declare void @my.trace(i64)

define void @kernel(ptr %out) {
  call void @my.trace(i64 1)
  store i64 1, ptr %out
  ret void
}
"""
    job = gpuc.CompilerJob(gpuc.IRSource(ir, entry="kernel"), gpuc.CompilerConfig(gpuc.NativeTarget(), kernel=True))
    with pytest.raises(gpuc.CompilationError, match=r"calls @my\.trace, which nothing defines") as info:
        load(job)
    assert "register a plugin" in str(info.value)


def test_a_launcher_of_a_closed_module_refuses_to_run():
    # Its code was unmapped with the JIT: the call jumped into freed memory.
    ir = "declare i64 @gpuc.ctx.index(i32)\ndefine void @fill(ptr %p, i64 %n, i64 %s) {\n" \
         "  %i = call i64 @gpuc.ctx.index(i32 0)\n  %a = getelementptr i64, ptr %p, i64 %i\n" \
         "  store i64 7, ptr %a\n  ret void\n}\n"
    module = JITModule(job(ir, entry="fill"), signature=[("array", np.int64, 1)])
    launcher = module.launcher()
    out = np.zeros(2, dtype=np.int64)
    launcher(2, (out,))
    assert out.tolist() == [7, 7]
    module.close()
    with pytest.raises(ValueError, match="was closed"):
        launcher(2, (out,))


@pytest.mark.parametrize("how", ["items", "blocks", "items2"])
def test_ctrl_c_stops_a_one_thread_launch_between_chunks(how):
    """A long launch on one thread runs in chunks; Ctrl-C raises KeyboardInterrupt at the next chunk boundary,
    and the next launch works. `items2`: the same on two threads, the pool thread's chunks claimed and run
    by the pool's compiled scheduler."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).with_name("interrupt_kernels.py")
    proc = subprocess.run([sys.executable, str(script), how], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("interrupted after"), proc.stdout
    assert float(lines[0].split()[2]) < 20  # the whole launch takes about a minute
    assert lines[1] == "next launch True"


@pytest.mark.filterwarnings("ignore::gpuc.errors.LaunchWarning")  # (16, 2): a kernel that reads no index(1)
@pytest.mark.parametrize("device", ["cpu", "opencl"])
def test_a_block_of_another_rank_than_the_launch_is_padded_with_ones(device):
    """k[(16, 2)](..., block=4) runs blocks of (4, 1) and k[16](..., block=(4, 2)) blocks of (4, 2), on every
    device (numba-cuda's rule; docs/frontend.md, Blocks)."""
    from opencl_kernels import fill_block_ids
    if device == "opencl":
        from gpuc.runtime import opencl
        if not opencl.available():
            pytest.skip(opencl.unavailable_reason())
    i = np.arange(16)
    for n, block in (((16, 2), 4), (16, (4, 2))):
        out = np.zeros(16, np.int64)
        fill_block_ids[n](out, block=block, device=device)
        np.testing.assert_array_equal(out, (i // 4) * 1000 + i % 4)
