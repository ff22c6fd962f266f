"""Reverse mode through funcs that stay calls (recursive ones) and copy within their `gpuc.local`
arrays (docs/autodiff.md, "Calls"): the heap temporary such a copy allocates and frees itself is no
memory its caller sees, so the gradient may rerun the func. Gradients and adjoints agree with central
finite differences of a NumPy reference; what a rerun would get wrong is still a located error."""

from __future__ import annotations

import numpy as np
import pytest

import gpuc
import gpuc.llvm as llvm
from gpuc.plugins.autodiff.reverse_rules import memory_effects

HEAP = ("malloc", "free")
# What OpenCL runs lack: SPIR-V has no allocator, and a recursive func gets no fixed tape (a located error).
NO_HEAP = ("the reverse sweep keeps values of each iteration of a loop on a tape in memory allocated at run "
           "time, and SPIR-V has no allocator")


@gpuc.func
def unrolled(x, n):
    t = gpuc.local.array(40, gpuc.float64)
    for k in range(40):
        t[k] = x * (k + 1) + k * 0.125
    t[:] = t[::-1]                  # overlapping, 320 bytes: the heap temporary
    t[1:] = t[:-1]                  # a shift
    if n == 0:
        return t[0] * x + t[39]
    return unrolled(t[2] * 0.05, n - 1) * x + t[5]


def unrolled_reference(x, n):
    t = np.array([x * (k + 1) + k * 0.125 for k in range(40)])
    t[:] = t[::-1].copy()
    t[1:] = t[:-1].copy()
    if n == 0:
        return t[0] * x + t[39]
    return unrolled_reference(t[2] * 0.05, n - 1) * x + t[5]


@gpuc.func
def small(x, n):
    t = gpuc.local.array(4, gpuc.float64)
    u = gpuc.local.array(4, gpuc.float64)
    for k in range(4):
        t[k] = x * (k + 1) - k
        u[k] = x
    u[:] = t[::-1]                  # two local arrays: the heap branch is compiled, never run
    t[:] = t[::-1]                  # the stack buffer
    if n == 0:
        return t[0] * u[1]
    return small(t[1] * 0.5 + u[3], n - 1) * x + t[3]


def small_reference(x, n):
    t = np.array([x * (k + 1) - k for k in range(4)])
    u = t[::-1].copy()
    t[:] = t[::-1].copy()
    if n == 0:
        return t[0] * u[1]
    return small_reference(t[1] * 0.5 + u[3], n - 1) * x + t[3]


def central_difference(f, x, eps=1e-6):
    return (f(x + eps) - f(x - eps)) / (2 * eps)


FUNCS = {"heap": (unrolled, unrolled_reference), "stack": (small, small_reference)}
POINTS = np.array([0.5, -1.25, 2.0])


@pytest.mark.devices("cpu", "opencl")
@pytest.mark.parametrize("name", list(FUNCS))
def test_grad_of_a_recursive_func_copying_into_local_views(name, gpuc_device):
    if gpuc_device == "opencl" and name == "heap":
        pytest.skip(f"not on opencl: {NO_HEAP}")
    f, reference = FUNCS[name]

    @gpuc.kernel
    def k(xs, out):
        i = gpuc.index()
        out[i] = gpuc.grad(f, xs[i], 3)[0]

    out = np.zeros(len(POINTS))
    k[len(POINTS)](POINTS, out)
    want = [central_difference(lambda x: reference(x, 3), x) for x in POINTS]
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-8)


@pytest.mark.devices("cpu", "opencl")
@pytest.mark.parametrize("name", list(FUNCS))
def test_adjoint_of_a_kernel_calling_a_recursive_func_copying_into_local_views(name, gpuc_device):
    if gpuc_device == "opencl" and name == "heap":
        pytest.skip(f"not on opencl: {NO_HEAP}")
    f, reference = FUNCS[name]

    @gpuc.kernel
    def k(x, y):
        i = gpuc.index()
        y[i] = f(x[i], 2) * x[i]

    rng = np.random.default_rng(3)
    x = rng.random(5) * 2 - 1
    seed = rng.random(5)
    y, gx, gy = np.zeros(5), np.zeros(5), seed.copy()
    gpuc.adjoint(k)[5](x, gx, y, gy)
    np.testing.assert_allclose(y, [reference(v, 2) * v for v in x], rtol=1e-13)
    want = [s * central_difference(lambda v: reference(v, 2) * v, v) for v, s in zip(x, seed)]
    np.testing.assert_allclose(gx, want, rtol=1e-6, atol=1e-8)


@gpuc.func
def shifts_its_argument(y, i, n):
    if n == 0:
        return y[i, 0]
    y[i, 1:] = y[i, :-1]
    y[i, :] = y[i, ::-1]
    return shifts_its_argument(y, i, n - 1) * y[i, 1]


@gpuc.kernel
def calls_a_writer(y, out):
    i = gpuc.index()
    out[i] = shifts_its_argument(y, i, 3)


@pytest.mark.devices("cpu", "opencl")
def test_a_recursive_func_writing_the_differentiated_array_is_still_refused():
    # Its gradient reruns it: writes into the caller's array would be made twice.
    y, gy = np.ones((2, 40)), np.zeros((2, 40))
    out, gout = np.zeros(2), np.ones(2)
    with pytest.raises(gpuc.CompilationError, match="writes memory and is not inlined"):
        gpuc.adjoint(calls_a_writer)[2](y, gy, out, gout)


# -- memory_effects on IR ---------------------------------------------------------------------------

_DECLARATIONS = """
declare ptr @malloc(i64)
declare void @free(ptr)
declare void @keep(ptr)
declare void @llvm.masked.store.v2f64.p0(<2 x double>, ptr, i32, <2 x i1>)
"""


def _effects(body: str, params: str = "double %x, ptr %a", heap=HEAP):
    module = llvm.Module.parse(f"define double @f({params}) {{\n{body}\n}}\n{_DECLARATIONS}")
    try:
        return memory_effects(module.functions["f"], heap=heap)
    finally:
        module.close()


_TEMPORARY = """
  %t = call ptr @malloc(i64 16)
  %null = icmp eq ptr %t, null
  %e = getelementptr double, ptr %t, i64 1
  store double %x, ptr %e
  %i = ptrtoint ptr %t to i64
  %j = ptrtoint ptr %a to i64
  %far = add i64 %i, 16
  %over = icmp ult i64 %j, %far
  %v = load double, ptr %e
"""


def test_a_temporary_allocated_and_freed_is_no_effect():
    assert _effects(_TEMPORARY + "  call void @free(ptr %t)\n  ret double %v") == (False, False)
    # without the allocator's names, malloc and free are calls of unknown functions
    assert _effects(_TEMPORARY + "  call void @free(ptr %t)\n  ret double %v", heap=None) == (True, True)


@pytest.mark.parametrize("escape", [
    "  ret double %v",                                           # never freed
    "  store ptr %t, ptr %a\n  call void @free(ptr %t)\n  ret double %v",
    "  call void @keep(ptr %e)\n  call void @free(ptr %t)\n  ret double %v",
    "  %k = inttoptr i64 %i to ptr\n  call void @free(ptr %t)\n  ret double %v",
    "  %p = select i1 %over, ptr %t, ptr %a\n  store double %x, ptr %p\n  call void @free(ptr %t)\n  ret double %v",
], ids=["unfreed", "stored", "passed", "inttoptr", "merged"])
def test_a_temporary_whose_address_leaves_the_function_is_an_effect(escape):
    reads, writes = _effects(_TEMPORARY + escape)
    assert writes


def test_a_masked_store_into_an_argument_is_a_write():
    body = ("  call void @llvm.masked.store.v2f64.p0(<2 x double> zeroinitializer, ptr %a, i32 8, "
            "<2 x i1> <i1 true, i1 false>)\n  ret double %x")
    assert _effects(body) == (False, True)
    own = ("  %s = alloca [2 x double]\n" + body.replace("ptr %a, i32", "ptr %s, i32"))
    assert _effects(own) == (False, False)
