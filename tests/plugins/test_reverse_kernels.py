"""Adjoint kernels (gpuc.adjoint): shadows after the launch against central finite differences of a scalar
loss, with 1 and 2 threads; the cases NVIDIA Warp documents as wrong; atomics only where needed (IR);
every target; launch checks."""

from __future__ import annotations

import math
import types

import numpy as np
import pytest
from support.llvm_testing import filecheck
from support.reverse_kernels import dynamic_loop, elementwise, stencil

import gpuc


@gpuc.kernel
def reduction(x, out):
    i = gpuc.index()
    gpuc.atomic_add(out, 0, x[i] * x[i])


@gpuc.kernel
def subtract_into(x, out):
    i = gpuc.index()
    gpuc.atomic_sub(out, i % 3, x[i] * x[i])


@gpuc.kernel
def data_dependent_while(x, y):
    i = gpuc.index()
    v = x[i]
    k = 0
    while v < 10.0:
        v = v * 1.5 + 0.1
        k += 1
    y[i] = v * k


@gpuc.kernel
def square_in_place(x):
    i = gpuc.index()
    x[i] *= x[i]


@gpuc.kernel
def divide_in_place(x, y):
    i = gpuc.index()
    x[i] /= y[i]
    x[i] *= x[i] + 1.0


@gpuc.kernel
def two_d(a, b):
    i, j = gpuc.index(0), gpuc.index(1)
    b[i, j] = a[i, j] * a[j, i] + math.exp(a[i, j])


@gpuc.func
def smooth(u, v):
    return u * v / (1.0 + u * u)


@gpuc.kernel
def calls_funcs(x, y, out):
    i = gpuc.index()
    out[i] = smooth(x[i], y[i]) + smooth(y[i], x[i]) * 2.0


@gpuc.kernel
def gather(x, idx, y):
    i = gpuc.index()
    y[i] = x[idx[i]] * x[idx[i]]


@gpuc.kernel
def matvec(a, x, y):
    i = gpuc.index()
    s = 0.0
    for j in range(x.shape[0]):
        s += a[i, j] * x[j]
    y[i] = math.tanh(s)


@gpuc.kernel
def scaled(x, c, y):
    i = gpuc.index()
    if i >= y.shape[0]:
        return
    y[i] = c * x[i] * x[i]


@gpuc.kernel
def float32_mix(x, y):
    i = gpuc.index()
    v = x[i]
    y[i] = v * v * gpuc.float32(0.5) + math.exp(v)


# What OpenCL runs lack: SPIR-V has no allocator, so a tape is a buffer of tape.HEAPLESS_BYTES per work item
# (a MemoryError past it), which a test of tapes growing with trip counts outgrows on purpose.
TAPE_BOUND = ("on SPIR-V a tape is a fixed buffer per work item (no allocator to grow it); this test grows one "
              "past it (test_a_tape_outgrowing_its_buffer_on_opencl_raises)")

RNG = np.random.default_rng(2026)
N = 13
X = RNG.uniform(0.5, 1.5, N)
CASES = {
    "elementwise": (elementwise, lambda: [X.copy(), np.zeros(N)], N, [1]),
    "stencil": (stencil, lambda: [X.copy(), np.zeros(N)], N, [1]),
    "reduction": (reduction, lambda: [X.copy(), np.zeros(1)], N, [1]),
    "atomic_sub": (subtract_into, lambda: [X.copy(), np.zeros(3)], N, [1]),
    "dynamic_loop": (dynamic_loop, lambda: [X.copy(), RNG.integers(0, 8, N), np.zeros(N)], N, [2]),
    "data_dependent_while": (data_dependent_while, lambda: [X.copy(), np.zeros(N)], N, [1]),
    "square_in_place": (square_in_place, lambda: [X.copy()], N, [0]),
    "divide_in_place": (divide_in_place, lambda: [X.copy(), X[::-1].copy() + 1.0], N, [0]),
    "two_d": (two_d, lambda: [RNG.uniform(-1, 1, (4, 4)), np.zeros((4, 4))], (4, 4), [1]),
    "calls_funcs": (calls_funcs, lambda: [X.copy(), X[::-1].copy(), np.zeros(N)], N, [2]),
    "gather_repeated": (gather, lambda: [X.copy(), np.array([0, 1, 1, 2, 0, 0, 5, 5, 5, 3, 0, 12, 12]),
                                         np.zeros(N)], N, [2]),
    "matvec": (matvec, lambda: [RNG.uniform(-1, 1, (5, 4)), RNG.uniform(-1, 1, 4), np.zeros(5)], 5, [2]),
    "scaled_early_return": (scaled, lambda: [X.copy(), 1.5, np.zeros(N - 3)], N, [2]),
    "float32": (float32_mix, lambda: [X.astype(np.float32), np.zeros(N, np.float32)], N, [1]),
}
TAPED = {"dynamic_loop", "data_dependent_while", "matvec"}  # loops whose values the reverse sweep keeps


def _copy(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def _fd_gradients(kernel, args, n, seeds, wrt):
    """Central differences of L = sum over outputs of seed * output after the primal launch."""
    def loss(a):
        kernel.launch(n, *a, threads=1)
        return sum(float(np.sum(seeds[p].astype(np.float64) * a[p])) for p in seeds)

    x = args[wrt]
    grad = np.zeros(x.shape)
    h = 1e-3 if x.dtype == np.float32 else 1e-6
    for e in range(x.size):
        plus, minus = _copy(args), _copy(args)
        plus[wrt].flat[e] += h
        minus[wrt].flat[e] -= h
        grad.flat[e] = (loss(plus) - loss(minus)) / (2 * h)
    return grad


def _adjoint_shadows(kernel, args, n, seeds, threads):
    full, shadows = [], {}
    for p, a in enumerate(_copy(args)):
        full.append(a)
        if isinstance(a, np.ndarray) and a.dtype.kind == "f":
            shadows[p] = seeds[p].copy() if p in seeds else np.zeros_like(a)
            full.append(shadows[p])
    gpuc.adjoint(kernel).launch(n, *full, threads=threads)
    return full, shadows


@pytest.mark.devices("cpu", "opencl")
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", list(CASES))
def test_shadows_match_finite_differences(name, threads, gpuc_device):
    kernel, make, n, outputs = CASES[name]
    args = make()
    rng = np.random.default_rng(7)
    seeds = {p: rng.standard_normal(args[p].shape).astype(args[p].dtype) for p in outputs}
    _, shadows = _adjoint_shadows(kernel, args, n, seeds, threads)
    float32 = any(isinstance(a, np.ndarray) and a.dtype == np.float32 for a in args)
    for p, shadow in shadows.items():
        # Every float array, read or written: dL/d(its value before the launch). For an output that is
        # overwritten it is 0 (the seed consumed); where it is left alone or added to, the seed stays.
        want = _fd_gradients(kernel, args, n, seeds, p)
        np.testing.assert_allclose(shadow, want, rtol=2e-2 if float32 else 1e-6, atol=2e-2 if float32 else 1e-7,
                                   err_msg=f"shadow of argument {p}")


def test_case_count():
    assert len(CASES) >= 12


@pytest.mark.devices("cpu", "opencl")
@pytest.mark.parametrize("threads", [1, 2])
def test_seed_is_consumed_and_primal_runs(threads):
    x = X.copy()
    y = np.zeros(N)
    dx, dy = np.full(N, 0.5), np.ones(N)
    gpuc.adjoint(elementwise).launch(N, x, dx, y, dy, threads=threads)
    np.testing.assert_allclose(y, np.sin(X) * X)           # the primal's effects happen
    np.testing.assert_array_equal(dy, 0.0)                  # the seed of the overwritten output is consumed
    np.testing.assert_allclose(dx, 0.5 + np.cos(X) * X + np.sin(X))  # accumulated onto what was there


@pytest.mark.devices("cpu", "opencl")
def test_repeated_launches_accumulate():
    x, y = X.copy(), np.zeros(N)
    dx = np.zeros(N)
    for _ in range(3):
        gpuc.adjoint(elementwise)[N](x, dx, y, np.ones(N))
    np.testing.assert_allclose(dx, 3 * (np.cos(X) * X + np.sin(X)))


@pytest.mark.devices("cpu", "opencl")
def test_large_launch_many_threads_gather_with_atomics():
    n = 200_000
    x = np.linspace(0.1, 1.0, 1000)
    idx = np.arange(n) % 1000
    y, dx = np.zeros(n), np.zeros(1000)
    gpuc.adjoint(gather).launch(n, x, dx, idx, y, np.ones(n), threads=2)
    np.testing.assert_allclose(dx, 2 * x * (n // 1000), rtol=1e-12)


@pytest.mark.devices("cpu", "opencl")
@pytest.mark.not_on("opencl", TAPE_BOUND)
def test_tape_memory_follows_trip_counts():
    # Items with trip counts from 0 to 3000: each keeps its own tape, freed at its end; results exact.
    n = 64
    x = np.linspace(0.2, 0.9, n)
    steps = (np.arange(n) * 47) % 3001
    y, dx = np.zeros(n), np.zeros(n)
    gpuc.adjoint(dynamic_loop).launch(n, x, dx, steps, y, np.ones(n), threads=2)
    for i in (0, 1, 17, 63):
        acc, d = x[i], 1.0
        for _ in range(steps[i]):
            acc, d = acc * 0.5 + math.sin(acc), d * (0.5 + math.cos(acc))
        assert dx[i] == pytest.approx(d, rel=1e-12, abs=1e-300)


@pytest.mark.devices("opencl")
def test_a_tape_outgrowing_its_buffer_on_opencl_raises():
    # SPIR-V has no allocator: each work item's tape is a buffer of tape.HEAPLESS_BYTES. Items whose loops
    # fit run as on the CPU; one that outgrows it fills the launch's record, its reverse ends at its next pop
    # and the launch raises a MemoryError naming the gradient.
    from gpuc.plugins.autodiff.tape import HEAPLESS_BYTES

    n = 16
    x = np.linspace(0.2, 0.9, n)
    fits = np.arange(n) % 7 + 1
    want = np.zeros(n)
    gpuc.adjoint(dynamic_loop).launch(n, x, want, fits, np.zeros(n), np.ones(n), device="cpu")
    dx = np.zeros(n)
    gpuc.adjoint(dynamic_loop).launch(n, x, dx, fits, np.zeros(n), np.ones(n))
    np.testing.assert_allclose(dx, want, rtol=1e-13)
    steps = fits.copy()
    steps[5] = HEAPLESS_BYTES  # one record or more per step
    with pytest.raises(MemoryError, match=r"reverse_kernels.py:\d+:\d+: the reverse sweep's tape of "
                                          r"dynamic_loop needed \d+ bytes, more than the 4096"):
        gpuc.adjoint(dynamic_loop).launch(n, x, np.zeros(n), steps, np.zeros(n), np.ones(n))
    dx[:] = 0.0  # the record was read and cleared: the next launch is clean
    gpuc.adjoint(dynamic_loop).launch(n, x, dx, fits, np.zeros(n), np.ones(n))
    np.testing.assert_allclose(dx, want, rtol=1e-13)


@gpuc.func
def _taped(p, n, arr):
    a = arr[0]
    for k in range(n):
        a = math.tanh(a * p) + 0.5 * math.cos(a + k)
    return a


@gpuc.func
def _two_taped_gradients(p, n, arr):
    varied = gpuc.local.array(2, gpuc.float64)  # an array whose values depend on p: not read as a constant
    varied[0] = arr[0] * (1.0 + 0.25 * p)
    varied[1] = arr[1]
    g1 = gpuc.grad(_taped, p, n, varied)
    v, g2 = gpuc.value_and_grad(_taped, p * 0.5, n, varied)
    return g1[0] * g1[0] + math.tanh(g2[0]) * v


@gpuc.kernel
def _gradient_of_gradients(out, xs, cs, n):
    i = gpuc.index()
    v, g = gpuc.value_and_grad(_two_taped_gradients, xs[i], n, cs)
    out[i, 0] = v
    out[i, 1] = g[0]


@gpuc.kernel
def _two_taped_gradients_at(out, xs, cs, n):
    i = gpuc.index()
    out[i] = _two_taped_gradients(xs[i], n, cs)


# The gradient of a func taking two taped gradients of an array that depends on the primal (differentiated
# with their tapes, not by rule as a constant array's are: the CPU refuses it, its reverse cannot follow the
# tapes' heap memory) compiles on SPIR-V, whose tapes are buffers on the stack, and matches central
# differences of the func; where its own tape outgrew the buffer, a failed tape's pops read garbage
# pointers, which the reverse sweep dereferenced: Intel's runtime crashed the process. The reverse now ends
# at such a pop.
@pytest.mark.devices("opencl")
def test_an_outgrown_tape_of_a_gradient_of_gradients_raises_on_opencl():
    xs, cs = np.array([0.3, 0.7]), np.array([0.4, 0.2])
    out = np.zeros((2, 2))
    _gradient_of_gradients.launch(2, out, xs, cs, 3)
    e = 1e-6
    around = np.zeros(4)
    _two_taped_gradients_at.launch(4, around, np.concatenate([xs - e, xs + e]), cs, 3, device="cpu")
    np.testing.assert_allclose(out[:, 1], (around[2:] - around[:2]) / (2 * e), rtol=1e-6)
    with pytest.raises(MemoryError, match=r"reverse_kernels.py:\d+:\d+: the reverse sweep's tape of "
                                          r"_two_taped_gradients needed \d+ bytes"):
        _gradient_of_gradients.launch(2, out, xs, cs, 24)


@gpuc.kernel
def _uneven_tapes(x, out, n):
    s = gpuc.shared.array(64, gpuc.float64)
    t = gpuc.thread_index(0)
    i = gpuc.index(0)
    a = x[i]
    for _ in range(n * t):  # item t's loop, and so its tape, grows with t
        a = math.sin(a) * 0.9 + 0.1
    s[t] = a
    gpuc.barrier()
    acc = 0.0
    for j in range(4):
        acc += s[(t + j) % 64] * x[i]
        gpuc.barrier()
    out[i] = acc


# Items of one block whose bounded tapes fail at different pops (per-item loops before a loop of barriers) end
# their reverse sweeps at different places, skipping barriers the others reach: on Intel's OpenCL CPU device
# the launch still ends and raises; below the buffer the gradient is the CPU's.
@pytest.mark.devices("opencl")
def test_items_whose_tapes_fail_apart_raise_on_opencl():
    x, dout = np.linspace(0.1, 0.9, 64), np.ones(64)
    dx, want = np.zeros(64), np.zeros(64)
    gpuc.adjoint(_uneven_tapes).launch(64, x, dx, np.zeros(64), dout.copy(), 2, block=64)
    gpuc.adjoint(_uneven_tapes).launch(64, x, want, np.zeros(64), dout.copy(), 2, block=64, device="cpu")
    np.testing.assert_allclose(dx, want, rtol=1e-12)
    with pytest.raises(MemoryError, match=r"the reverse sweep's tape of _uneven_tapes needed \d+ bytes"):
        gpuc.adjoint(_uneven_tapes).launch(64, x, np.zeros(64), np.zeros(64), dout.copy(), 40, block=64)


# -- atomics only where several work items touch an element (IR) --------------------------------------

F64 = gpuc.Array[gpuc.float64, 1]


def test_own_index_shadows_use_plain_adds():
    ir = gpuc.code_llvm(gpuc.adjoint(elementwise), (F64,) * 4)
    filecheck(ir, """
        CHECK-LABEL: define void @elementwise.adjoint
        CHECK-NOT: atomicrmw
        CHECK: store double 0.0
        CHECK: fadd double
        CHECK: ret void
    """)


def test_neighbour_reads_use_atomic_adds():
    ir = gpuc.code_llvm(gpuc.adjoint(stencil), (F64,) * 4)
    filecheck(ir, """
        CHECK-LABEL: define void @stencil.adjoint
        CHECK: atomicrmw fadd ptr
        CHECK: ret void
    """)


def test_gather_shadow_uses_atomics_only_for_the_gathered_array():
    ir = gpuc.code_llvm(gpuc.adjoint(gather), (F64, F64, gpuc.Array[gpuc.int64, 1], F64, F64))
    filecheck(ir, """
        CHECK-LABEL: define void @gather.adjoint
        CHECK: %[[SHADOW:[0-9]+]] = getelementptr inbounds double, ptr %x_shadow.data
        CHECK: atomicrmw fadd ptr %[[SHADOW]]
        CHECK-NOT: atomicrmw
        CHECK: ret void
    """)


# -- targets -------------------------------------------------------------------------------------------

F32 = gpuc.Array[gpuc.float32, 1]
I64 = gpuc.Array[gpuc.int64, 1]
TARGET_KERNELS = [(elementwise, (F32,) * 4), (stencil, (F32,) * 4), (reduction, (F32,) * 4),
                  (dynamic_loop, (F32, F32, I64, F32, F32)), (calls_funcs, (F32,) * 6)]


@pytest.mark.parametrize("kernel, types", TARGET_KERNELS, ids=[k.__name__ for k, _ in TARGET_KERNELS])
def test_ptx(kernel, types, ptxas):
    ptxas(gpuc.code_native(gpuc.adjoint(kernel), types, target=gpuc.PTXTarget()))


@pytest.mark.parametrize("kernel, types", [TARGET_KERNELS[0], TARGET_KERNELS[1], TARGET_KERNELS[2]],
                         ids=["elementwise", "stencil", "reduction"])
def test_gcn(kernel, types):
    asm = gpuc.code_native(gpuc.adjoint(kernel), types, target=gpuc.GCNTarget())
    assert ".amdhsa_kernel" in asm or "amdhsa" in asm


def test_spirv_own_index(spirv_val):
    job = gpuc.CompilerJob((gpuc.adjoint(elementwise), (F32,) * 4), gpuc.CompilerConfig(gpuc.SPIRVTarget()))
    spirv_val(gpuc.compile(job, "obj").output)


# SPIR-V has no float atomics: the adjoint's adds into shadows work items share were refused there;
# they are compare-and-swap loops on the float's bits.
def test_spirv_shared_shadows_add_by_compare_and_swap(spirv_val):
    job = gpuc.CompilerJob((gpuc.adjoint(stencil), (F32,) * 4), gpuc.CompilerConfig(gpuc.SPIRVTarget()))
    ir = gpuc.compile(job, "llvm").output
    assert "cmpxchg" in ir and "atomicrmw fadd" not in ir
    spirv_val(gpuc.compile(job, "obj").output)


def test_loop_tape_without_allocator_is_a_fixed_buffer():
    # GCN has no allocator: the tape is a buffer of tape.HEAPLESS_BYTES per work item, and a push past it
    # traps (SPIR-V, which cannot trap, raises after the launch: test_a_tape_outgrowing_its_buffer_on_opencl_raises)
    code = gpuc.code_native(gpuc.adjoint(dynamic_loop), (F32, F32, I64, F32, F32), target=gpuc.GCNTarget())
    assert "s_trap" in code


@gpuc.func
def _recursive_loop(x, n):
    acc = x
    for _ in range(n):
        acc = acc * 0.5 + math.sin(acc)
    if n < 2:
        return acc
    return _recursive_loop(acc, n // 2) * x + acc  # (no tail call, which LLVM makes a loop)


@gpuc.kernel
def _recursive_grad(x, out, n):
    i = gpuc.index()
    out[i] = gpuc.grad(_recursive_loop, x[i], n)[0]


def test_recursive_loop_tape_without_allocator_is_a_located_error():
    # a fixed buffer per call would stack up with the recursion
    with pytest.raises(gpuc.CompilationError) as info:
        gpuc.code_native(_recursive_grad, (F64, F64, gpuc.int64), target=gpuc.GCNTarget())
    assert "not given to a recursive function" in str(info.value) and info.value.location is not None


# -- launch checks -------------------------------------------------------------------------------------

@pytest.mark.devices("cpu", "opencl")
def test_shadow_must_match_layout():
    x, y = X.copy(), np.zeros(N)
    with pytest.raises(TypeError, match="shadow"):
        gpuc.adjoint(elementwise)[N](x, np.zeros(N + 1), y, np.ones(N))
    with pytest.raises(TypeError, match="overlap"):
        b = np.broadcast_to(np.float64(1.0), (N,))
        gpuc.adjoint(elementwise)[N](b, np.broadcast_to(np.float64(0.0), (N,)), y, np.ones(N))


@pytest.mark.devices("cpu", "opencl")
def test_wrong_argument_count():
    # the message lists what the adjoint takes for the arrays given
    with pytest.raises(TypeError, match=r"followed by its shadow: \(x, x's shadow, y, y's shadow\) .* but 3 "):
        gpuc.adjoint(elementwise)[N](X.copy(), np.zeros(N), np.zeros(N))
    with pytest.raises(TypeError, match=r"\(x, x's shadow, y \[and its shadow if a float array\]\)"):
        gpuc.adjoint(elementwise)[N](X.copy(), np.zeros(N))


def test_adjoint_of_a_func_is_an_error():
    with pytest.raises(TypeError, match="gpuc.grad"):
        gpuc.adjoint(smooth)


# -- schedules on the CPU: one thread (no atomics), several (two phases; atomics only for "any" arrays) --

@gpuc.kernel
def laplace(a, b):
    i, j = gpuc.index(0), gpuc.index(1)
    if i > 0 and j > 0 and i < a.shape[0] - 1 and j < a.shape[1] - 1:
        b[i, j] = (a[i - 1, j] + a[i + 1, j] + a[i, j - 1] + a[i, j + 1] - 4.0 * a[i, j]) ** 2


@gpuc.kernel
def near_and_gather(x, idx, table, y):
    i = gpuc.index()
    if i > 1:
        y[i] = x[i - 2] * table[idx[i]] + x[i]


def _adjoint_results(kernel, n, arrays, threads):
    copies = [a.copy() for a in arrays]
    gpuc.adjoint(kernel).launch(n, *copies, threads=threads)
    return copies


@pytest.mark.devices("cpu", "opencl")
@pytest.mark.parametrize("case", ["stencil", "laplace", "near_and_gather"])
def test_schedules_agree(case):
    rng = np.random.default_rng(5)
    if case == "stencil":
        n = 300_000
        x = rng.uniform(0.5, 1.5, n)
        kernel, size, arrays = stencil, n, [x, np.zeros(n), np.zeros(n), rng.standard_normal(n)]
    elif case == "laplace":
        a = rng.uniform(-1, 1, (400, 300))
        kernel, size = laplace, a.shape
        arrays = [a, np.zeros_like(a), np.zeros_like(a), rng.standard_normal(a.shape)]
    else:
        n = 200_000
        idx = rng.integers(0, 50, n)
        table = rng.uniform(-1, 1, 50)
        kernel, size = near_and_gather, n
        arrays = [rng.uniform(-1, 1, n), np.zeros(n), idx, table, np.zeros(50), np.zeros(n), rng.standard_normal(n)]
    serial = _adjoint_results(kernel, size, arrays, threads=1)
    for threads in (2, 3):
        parallel = _adjoint_results(kernel, size, arrays, threads=threads)
        for s, p in zip(serial, parallel):
            np.testing.assert_allclose(p, s, rtol=1e-12, atol=1e-12)


def test_two_phase_runs_never_meet():
    # The runs of one phase are farther apart than the reach: cover the boundary arithmetic.
    from gpuc.runtime.cpu import launch_in_two_phases
    seen = []
    launch_in_two_phases(lambda argv, begin, end, sizes: seen.append((begin, end)), b"", (1000, 30), 4, (2, 1, 0))
    span = 2 * (2 + 1000 * 1) + 1
    assert sorted(seen)[0][0] == 0 and max(e for _, e in seen) == 30_000
    assert sum(e - b for b, e in seen) == 30_000
    assert all(e - b >= span for b, e in seen)


@gpuc.kernel
def row_broadcast(x, y):
    i, j = gpuc.index(0), gpuc.index(1)
    y[i, j] = x[i] * x[i] * (j + 1.0)


@pytest.mark.devices("cpu", "opencl")
def test_element_read_by_a_whole_row_is_shared():
    # x[i] in a kernel that reads index(1) too: every item of row i adds to x's shadow at i.
    ir = gpuc.code_llvm(gpuc.adjoint(row_broadcast), (F64, F64, gpuc.Array[gpuc.float64, 2],
                                                      gpuc.Array[gpuc.float64, 2]))
    filecheck(ir, """
        CHECK-LABEL: define void @row_broadcast.adjoint
        CHECK: atomicrmw fadd
    """)
    x = np.linspace(0.5, 1.5, 300)
    for threads in (1, 2, 3):
        dx = np.zeros_like(x)
        gpuc.adjoint(row_broadcast).launch((300, 40), x, dx, np.zeros((300, 40)), np.ones((300, 40)),
                                           threads=threads)
        np.testing.assert_allclose(dx, 2 * x * sum(j + 1.0 for j in range(40)), rtol=1e-12)


@gpuc.kernel
def first_index_only(x, y):
    i = gpuc.index(0)
    y[i] = x[i] * x[i]


@gpuc.kernel
def second_index_only(x, y):
    j = gpuc.index(1)
    y[j] = x[j] * x[j]


@pytest.mark.devices("cpu", "opencl")
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_a_launch_over_dimensions_the_kernel_does_not_read(threads, gpuc_device):
    # Work items that differ only along a dimension the kernel does not read share their elements: one of
    # them consumes the seed of y[i], and dx[i] gets the derivative once, however many run at once.
    n = 20_480  # whole blocks of 64 (the kernels do not check their index)
    x = np.linspace(0.5, 1.5, n)
    blocks = [{}] + ([{"block": (64, 2)}] if gpuc_device == "cpu" else [])
    for extra in blocks:
        for _ in range(4):
            y, dx, dy = np.zeros(n), np.zeros(n), np.ones(n)
            gpuc.adjoint(first_index_only).launch((n, 8), x, dx, y, dy, threads=threads, **extra)
            np.testing.assert_array_equal(y, x * x)
            np.testing.assert_array_equal(dx, 2 * x)
            np.testing.assert_array_equal(dy, 0.0)
    for _ in range(4):  # index(1) is 0 in every item of a 1-D launch: all of them write y[0]
        y, dx, dy = np.zeros(n), np.zeros(n), np.ones(n)
        gpuc.adjoint(second_index_only).launch(n, x, dx, y, dy, threads=threads)
        np.testing.assert_array_equal(dx, np.where(np.arange(n) == 0, 2 * x, 0.0))
        np.testing.assert_array_equal(dy, np.where(np.arange(n) == 0, 0.0, 1.0))


@gpuc.kernel
def fill_row(x, y):
    for k in range(y.shape[0]):
        y[k] = x[k] * 2.0  # every item writes every element of y, all the same values


@pytest.mark.devices("cpu", "opencl")
@pytest.mark.parametrize("threads", [1, 2])
def test_an_element_every_item_writes_passes_its_seed_on_once(threads):
    x, seed = np.linspace(0.5, 1.5, 64), np.linspace(1.0, 2.0, 64)
    for _ in range(3):
        y, dx, dy = np.zeros(64), np.zeros(64), seed.copy()
        gpuc.adjoint(fill_row).launch(8192, x, dx, y, dy, threads=threads)
        np.testing.assert_array_equal(y, 2 * x)
        np.testing.assert_array_equal(dx, 2 * seed)
        np.testing.assert_array_equal(dy, 0.0)
    filecheck(gpuc.code_llvm(gpuc.adjoint(fill_row), (F64,) * 4), """
        CHECK-LABEL: define void @fill_row.adjoint
        CHECK: atomicrmw xchg ptr {{.*}}, i64 0
        CHECK: bitcast i64 {{.*}} to double
    """)


def test_a_launch_over_the_dimensions_the_kernel_reads_keeps_plain_adds():
    # The adjoint is compiled for the dimensions the launch spans: atomics only where they are needed.
    adj = gpuc.adjoint(elementwise)
    args = (X, np.zeros(N), np.zeros(N), np.ones(N))
    flags = adj._layout([gpuc.runtime.dispatch.typeof(a, k) for k, a in enumerate(args)])
    for spans, atomic in (((0,), False), ((0, 1), True)):
        text = str(adj._kernel(flags, "parity", spans).inspect(*args).llvm)
        assert ("atomicrmw fadd" in text) == atomic, spans
        # the seed of y[i], which every item of a row writes on a 2-D launch: taken by one of them
        assert ("atomicrmw xchg" in text) == atomic, spans


@gpuc.kernel
def shared_parameters(x, w, loss):
    i = gpuc.index()
    r = math.tanh(w[0] * x[i] + w[w.shape[0] - 1]) - 0.5
    gpuc.atomic_add(loss, 0, r * r)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_adds_of_every_item_into_one_element_are_summed_per_chunk(threads):
    # Every item reads w[0] and w[-1] and adds into loss[0]: on several threads their shadows' atomic adds,
    # and the loss's own, contended on one cache line, ran 3.5x slower than on one thread. The CPU's launch
    # entry now sums them per chunk of items and adds each sum once (autodiff/sums.py).
    n = 40_009
    x, w = np.linspace(-1.0, 1.0, n), np.array([0.7, -0.3, 0.1])
    dx, dw, loss, dloss = np.zeros(n), np.zeros(3), np.array([0.25]), np.array([1.5])
    gpuc.adjoint(shared_parameters).launch(n, x, dx, w, dw, loss, dloss, threads=threads)
    t = np.tanh(w[0] * x + w[2])
    s = 1.5 * 2.0 * (t - 0.5) * (1.0 - t * t)
    np.testing.assert_allclose(dx, s * w[0], rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(dw, [np.sum(s * x), 0.0, np.sum(s)], rtol=1e-11)
    np.testing.assert_allclose(loss, 0.25 + np.sum((t - 0.5) ** 2), rtol=1e-12)
    assert dloss[0] == 1.5  # only added into: its seed stays


def test_the_launch_entry_adds_each_chunk_sum_once():
    n = 64
    args = (np.linspace(-1.0, 1.0, n), np.zeros(n), np.ones(2), np.zeros(2), np.zeros(1), np.ones(1))
    adj = gpuc.adjoint(shared_parameters)
    flags = adj._layout([gpuc.runtime.dispatch.typeof(a, k) for k, a in enumerate(args)])
    text = str(adj._kernel(flags, "parity", (0,)).inspect(*args).llvm)
    assert "gpuc.autodiff.sum" not in text
    entry = text[text.index("define void @shared_parameters.adjoint"):]
    entry = entry[entry.index(".range("):]
    entry = entry[:entry.index("\n}\n")]
    blocks = entry.split("\n\n")
    summed = [blk for blk in blocks if "atomicrmw" in blk]
    # the loss, w's shadow at 0 and at -1: after the loop over the items, in the block that returns
    assert len(summed) == 1 and summed[0].count("atomicrmw fadd") == 3 and "ret void" in summed[0], entry
    filecheck(text, """
        CHECK-LABEL: define void @shared_parameters.adjoint{{.*}}.range(
        CHECK: phi double [ -0.000000e+00
        CHECK: atomicrmw fadd
    """)
    # the adjoint's own function, compiled on its own (no chunks): an atomic add per item, as before
    body = text[text.index("define void @shared_parameters.adjoint"):]
    assert body[:body.index("\n}\n")].count("atomicrmw fadd") == 3


_TWO_SUMS_INTO_ONE_ELEMENT = """
declare void @gpuc.autodiff.sum.double(ptr, double)
define void @k.range(ptr %argv, i64 %begin, i64 %end, ptr %launch) {
entry:
  br label %loop
loop:
  %i = phi i64 [ %begin, %entry ], [ %next, %loop ]
  %slot = getelementptr i8, ptr %argv, i64 8
  %w = load ptr, ptr %slot
  %p = getelementptr double, ptr %w, i64 3
  %v = sitofp i64 %i to double
  call void @gpuc.autodiff.sum.double(ptr %p, double %v)
  %u = fmul double %v, 2.0
  call void @gpuc.autodiff.sum.double(ptr %p, double %u)
  %next = add i64 %i, 1
  %c = icmp ult i64 %next, %end
  br i1 %c, label %loop, label %done
done:
  ret void
}
"""


def test_two_sums_into_one_element_share_a_slot_and_an_atomic_add():
    # Two adds into w[3] whose address the loop computes (from the argument slots): its computation is copied
    # into the entry's first block once, so both adds go into one register and one atomic add per chunk (it
    # was copied per call: two registers, two atomic adds).
    from gpuc.plugins.autodiff import sums
    module = gpuc.llvm.Module.parse(_TWO_SUMS_INTO_ONE_ELEMENT)
    state = types.SimpleNamespace(target_machine=gpuc.NativeTarget().cached_target_machine())
    assert sums.resolve(state, module.functions["gpuc.autodiff.sum.double"], module)
    text = str(module)
    assert text.count("atomicrmw fadd") == 1 and text.count("phi double") == 1, text
    filecheck(text, """
        CHECK-LABEL: entry:
        CHECK: [[W:%[0-9]+]] = load ptr
        CHECK: [[P:%[0-9]+]] = getelementptr double, ptr [[W]], i64 3
        CHECK-NOT: getelementptr double
        CHECK: loop:
        CHECK: [[S:%.+]] = phi double [ -0.000000e+00, %entry ]
        CHECK: [[A:%[0-9]+]] = fadd double [[S]], %v
        CHECK: [[B:%[0-9]+]] = fadd double [[A]], %u
        CHECK: done:
        CHECK-NEXT: atomicrmw fadd ptr [[P]], double [[B]]
        CHECK-NEXT: ret void
    """)


@gpuc.kernel
def normalize_rows(x, out):
    i = gpuc.index(0)
    s = 0.0
    for k in range(x.shape[1]):
        s += x[i, k] * x[i, k]
    r = 1.0 / (1e-6 + s) ** 0.5
    for k in range(x.shape[1]):
        out[i, k] = x[i, k] * r


@gpuc.kernel
def scale_by_row_sums(x, out):
    i, j = gpuc.index(0), gpuc.index(1)
    s = 0.0
    for k in range(x.shape[1]):
        s += x[j, k]
    out[j, i] = x[j, i] * s


def _normalized_gradient(x, seed):
    norm = np.sqrt(1e-6 + (x * x).sum(axis=1, keepdims=True))
    return seed / norm - x * (seed * x).sum(axis=1, keepdims=True) / norm ** 3


@pytest.mark.devices("cpu", "opencl")
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_rows_of_one_work_item_take_plain_adds(threads, gpuc_device):
    # x[i, k] and out[i, k] over k: a row per item, whatever k is (access.partition), no atomics
    x, seed = np.random.default_rng(3).uniform(-1, 1, (3000, 24)), np.random.default_rng(4).uniform(-1, 1, (3000, 24))
    dx, out = np.zeros_like(x), np.zeros_like(x)
    gpuc.adjoint(normalize_rows).launch(3000, x, dx, out, seed.copy(), threads=threads)
    np.testing.assert_allclose(dx, _normalized_gradient(x, seed), rtol=1e-10, atol=1e-12)
    if gpuc_device == "cpu":
        adj = gpuc.adjoint(normalize_rows)
        args = (x, dx, out, seed)
        flags = adj._layout([gpuc.runtime.dispatch.typeof(a, k) for k, a in enumerate(args)])
        for schedule in ("parity", "concurrent"):
            assert "atomicrmw" not in str(adj._kernel(flags, schedule, (0,)).inspect(*args).llvm), schedule


@pytest.mark.parametrize("threads", [2, 3])
def test_rows_that_items_of_a_row_share_run_a_row_at_a_time(threads):
    # x[j, k] over k in a 2-D launch: the items of row j share it; runs of whole rows, no two at once
    x, seed = np.random.default_rng(5).uniform(-1, 1, (200, 40)), np.random.default_rng(6).uniform(-1, 1, (200, 40))
    want = np.zeros_like(x)
    gpuc.adjoint(scale_by_row_sums).launch((40, 200), x, want, np.zeros_like(x), seed.copy(), threads=1)
    np.testing.assert_allclose(want, seed * x.sum(axis=1, keepdims=True) + (seed * x).sum(axis=1, keepdims=True),
                               rtol=1e-11, atol=1e-12)
    dx = np.zeros_like(x)
    gpuc.adjoint(scale_by_row_sums).launch((40, 200), x, dx, np.zeros_like(x), seed.copy(), threads=threads)
    np.testing.assert_allclose(dx, want, rtol=1e-12, atol=1e-13)
    adj = gpuc.adjoint(scale_by_row_sums)
    args = (x, dx, np.zeros_like(x), seed)
    flags = adj._layout([gpuc.runtime.dispatch.typeof(a, k) for k, a in enumerate(args)])
    launcher = gpuc.runtime.dispatch.launcher_for(adj._kernel(flags, "parity", (0, 1)), args, "cpu")
    assert gpuc.runtime.adjoint._apart(launcher, (40, 200, 1)) == (39, 0, 0)
    assert "atomicrmw" not in str(adj._kernel(flags, "parity", (0, 1)).inspect(*args).llvm)


@gpuc.kernel
def chooses_between_array_and_local(x, t, y):
    i = gpuc.index()
    v = x[i]
    e = (t[0] if t[1] > v else v) if v < 0.4 else v
    y[i] = e
    while v < 0.5:
        v += 0.5


@pytest.mark.devices("cpu", "opencl")
def test_pointer_chosen_between_an_array_and_a_local():
    # A select between &t[0] and a local's slot: its shadow is taped like any value, and t's shadow,
    # which every item may reach through it, takes atomic adds.
    x, t = np.linspace(-1.0, 1.0, 8), np.array([0.3, 0.4, 0.5])
    for threads in (1, 2):
        dx, dt = np.zeros(8), np.zeros(3)
        gpuc.adjoint(chooses_between_array_and_local).launch(8, x, dx, t, dt, np.zeros(8), np.ones(8),
                                                             threads=threads)
        np.testing.assert_array_equal(dx, [0, 0, 0, 0, 0, 1, 1, 1])
        np.testing.assert_array_equal(dt, [5, 0, 0])
    ir = gpuc.code_llvm(gpuc.adjoint(chooses_between_array_and_local), (F64,) * 6)
    filecheck(ir, """
        CHECK-LABEL: define void @chooses_between_array_and_local.adjoint
        CHECK: atomicrmw fadd
    """)



@gpuc.func
def _cube(p):
    return p * p * p


@gpuc.kernel
def gated_overwrite(x0, x1, y0, c):
    j, i = gpuc.index(0), gpuc.index(1)
    t1 = x1[j] / (x0[i, j] * x0[i, j] + 1.0)
    t2 = x0[i, j]
    if _cube(math.exp(-(t2 * t2))) > t1 * t2 / (x1[j] * x1[j] + 2.0):
        return
    y0[i, j] = math.cos(c) * (x0[i, j] * c + x0[i, j])
    y0[i, j] = t1


@pytest.mark.parametrize("vectorize", (True, False))
@pytest.mark.parametrize("threads", (1, 2))
def test_a_seed_read_under_a_branch_is_read_before_it_is_zeroed(vectorize, threads):
    # LLVM's loop vectorizer predicated the read of dy0 and the store of 0 after it; LLVM 22's instcombine then
    # folded the select of the read into a masked load placed after that store: dx1 was 0 on one thread.
    from support.vectorize import item_by_item
    kernel = gated_overwrite if vectorize else item_by_item(gated_overwrite)
    rng = np.random.default_rng(1)
    x0, x1 = rng.uniform(0.2, 1.5, (9, 8)), rng.uniform(-1, 1, 8)
    dx0, dx1, y0 = np.zeros_like(x0), np.zeros_like(x1), np.zeros_like(x0)
    seed = np.linspace(0.5, 1.5, x0.size).reshape(x0.shape)
    gpuc.adjoint(kernel).launch((8, 9), x0, dx0, x1, dx1, y0, seed.copy(), 0.7, threads=threads)
    t1 = x1 / (x0 * x0 + 1.0)
    kept = ~(np.exp(-(x0 * x0)) ** 3 > t1 * x0 / (x1 * x1 + 2.0))
    assert kept.any() and not kept.all()
    np.testing.assert_allclose(dx1, (kept * seed / (x0 * x0 + 1.0)).sum(axis=0), rtol=1e-13)


@gpuc.kernel
def neighbours(x, y):
    i = gpuc.index()
    if i + 1 < len(x):
        y[i] = x[i] * x[i + 1]


def test_inspect_with_one_thread_shows_what_a_one_thread_launch_runs():
    # The work items of a one-thread CPU launch run one after another: its adjoint adds into dx[i + 1] without
    # atomics. Without threads=1, inspect shows the adjoint for items that run at once (atomic adds there).
    x, y = np.linspace(0.5, 2.0, 16), np.zeros(16)
    adj = gpuc.adjoint(neighbours)
    assert "atomicrmw fadd" in adj.inspect(x, np.zeros(16), y, np.ones(16)).llvm
    assert "atomicrmw" not in adj.inspect(x, np.zeros(16), y, np.ones(16), threads=1).llvm
    dx = np.zeros(16)
    adj.launch(16, x, dx, y, np.ones(16), threads=1)
    want = np.zeros(16)
    want[:-1] += x[1:]
    want[1:] += x[:-1]
    np.testing.assert_allclose(dx, want, rtol=1e-15)
