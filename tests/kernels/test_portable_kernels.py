"""Python kernels beyond the CPU: deep context intrinsics, markers, GPU targets, launch errors, the launch cache.
The tests that launch run on the CPU and through OpenCL (the devices mark)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import gpuc
import gpuc.cuda
from gpuc.runtime import dispatch
from gpuc.runtime.cuda import CudaUnavailableError

from support.compiler_ir import erase_unused_calls
from support.emulate import emulate
from support.kernel_cases import CASES

pytestmark = pytest.mark.devices("cpu", "opencl")
COMPILES_ONLY = pytest.mark.devices("cpu")  # launches nothing: one run

# -- (a) gpuc.index() three calls below the kernel ----------------------------------------------


@gpuc.func
def global_xy():
    return gpuc.index(0), gpuc.index(1)


@gpuc.func
def linear(width):
    x, y = global_xy()
    return y * width + x


@gpuc.func
def offset_of(a):
    return linear(a.shape[1])


@gpuc.kernel
def fill_linear(a):
    k = offset_of(a)
    a[k // a.shape[1], k % a.shape[1]] = k * gpuc.ndrange(1)


A2i64 = (gpuc.Array[gpuc.int64, 2],)


@pytest.mark.parametrize("threads", [1, 2])
def test_index_three_calls_deep(threads):
    got = np.full((7, 9), -1, np.int64)
    fill_linear.launch((9, 7), got, threads=threads)
    np.testing.assert_array_equal(got, np.arange(63).reshape(7, 9) * 7)
    want = np.full((7, 9), -1, np.int64)
    emulate(fill_linear, (9, 7), want)
    np.testing.assert_array_equal(want, got)


@COMPILES_ONLY
def test_index_three_calls_deep_on_ptx(ptxas):
    ptx = gpuc.code_native(fill_linear, A2i64, target=gpuc.PTXTarget())
    for register in ("%tid.x", "%ctaid.x", "%ntid.x", "%tid.y", "%ctaid.y", "%ntid.y"):
        assert register in ptx, f"{register} missing from\n{ptx}"
    assert "gpuc.ctx" not in ptx  # every marker resolved
    ptxas(ptx)


# -- (b) a marker called in a Python kernel, erased by a plugin -----------------------------------

trace = gpuc.marker("my.trace", None, (gpuc.int64,))


@gpuc.kernel
def traced(x):
    i = gpuc.index()
    trace(i)
    x[i] = i * 2.0


A1f64 = (gpuc.Array[gpuc.float64, 1],)


@COMPILES_ONLY
def test_registered_plugin_erases_the_marker(isolated_plugins):
    gpuc.register_plugin("my.trace", pipeline_callback=erase_unused_calls)
    unoptimized = gpuc.code_llvm(traced, A1f64, optimize=False)
    assert re.search(r"call void @my\.trace\(i64 ", unoptimized), unoptimized
    assert "my.trace" not in gpuc.code_llvm(traced, A1f64)


@COMPILES_ONLY
def test_plugin_in_the_config_erases_the_marker():
    plugin = gpuc.make_plugin("my.trace", pipeline_callback=erase_unused_calls)
    config = gpuc.CompilerConfig(gpuc.NativeTarget(), plugins=(*gpuc.registered_plugins(), plugin))
    job = gpuc.CompilerJob((traced, A1f64), config)
    assert "call void @my.trace(" in gpuc.code_llvm(job, optimize=False)
    assert "my.trace" not in gpuc.code_llvm(job)
    # without the plugin, nothing resolves the marker: it survives optimization
    assert "call void @my.trace(" in gpuc.code_llvm(traced, A1f64)


def test_kernel_with_erased_marker_launches(isolated_plugins):
    @gpuc.kernel
    def traced_here(x):  # a fresh kernel: its launcher is compiled with the plugin registered
        i = gpuc.index()
        trace(i)
        x[i] = i * 2.0

    gpuc.register_plugin("my.trace", pipeline_callback=erase_unused_calls)
    x = np.zeros(5)
    traced_here[5](x)
    np.testing.assert_array_equal(x, [0.0, 2.0, 4.0, 6.0, 8.0])


# -- (c) every differential kernel compiles for the GPU targets -----------------------------------

def argtypes(c):
    return tuple(dispatch.typeof(a, i) for i, a in enumerate(c.make()))


def compile_for(c, target, kind):
    return gpuc.compile(gpuc.CompilerJob((c.kernel, argtypes(c)), gpuc.CompilerConfig(target)), kind).output


# Where docs/frontend.md says a construct is unsupported on a target: the documented error, then skip.
# (SPIR-V's float atomics were: they are compare-exchange loops now.)
DOCUMENTED: dict[tuple[str, str], str] = {}
# Not documented, so bugs: strict xfails that flip once fixed.
# (int64_loop was one: IndVarSimplify computed an int64 running sum in closed form in i65, which
# the SPIR-V backend cannot express; SPIRVTarget now leaves that pass out.)
SPIRV_BUGS: dict[str, str] = {}


def expect_documented_error(target: str, c) -> bool:
    message = DOCUMENTED.get((target, c.id))
    if message is None:
        return False
    with pytest.raises(gpuc.CompilationError, match=re.escape(message)):
        compile_for(c, {"gcn": gpuc.GCNTarget(), "spirv": gpuc.SPIRVTarget()}[target], "asm")
    return True


@COMPILES_ONLY
@pytest.mark.parametrize("c", [pytest.param(c, id=c.id) for c in CASES])
def test_ptx(c, ptxas):
    ptx = compile_for(c, gpuc.PTXTarget(), "asm")
    assert ".visible .entry" in ptx and "%tid.x" in ptx
    ptxas(ptx)


@COMPILES_ONLY
@pytest.mark.parametrize("c", [pytest.param(c, id=c.id) for c in CASES])
def test_gcn(c):
    if expect_documented_error("gcn", c):
        pytest.skip("docs/frontend.md: float64 transcendental math is a compile error on GCN (no device libm)")
    asm = compile_for(c, gpuc.GCNTarget(), "asm")
    assert "s_endpgm" in asm


@COMPILES_ONLY
@pytest.mark.parametrize("c", [pytest.param(c, id=c.id, marks=[pytest.mark.xfail(strict=True, reason=SPIRV_BUGS[c.id])]
                                            if c.id in SPIRV_BUGS else []) for c in CASES])
def test_spirv(c, spirv_val):
    if expect_documented_error("spirv", c):
        pytest.skip("docs/frontend.md documents this construct as unsupported on SPIR-V")
    spirv_val(compile_for(c, gpuc.SPIRVTarget(), "obj"))


# -- (d) launch errors: clear exceptions, never a crash -------------------------------------------

@gpuc.kernel
def scale_into(x, out, factor):
    i = gpuc.index()
    out[i] = x[i] * factor


def f32(n=4):
    return np.arange(n, dtype=np.float32)


def test_wrong_argument_count_is_a_compilation_error():
    with pytest.raises(gpuc.CompilationError, match=r"takes 3 argument\(s\), but the signature has 2"):
        scale_into[4](f32(), f32())


@COMPILES_ONLY
def test_wrong_ndim_is_a_compilation_error():
    # x[i] of a 2-D x is a row (a view), which `*` does not take
    with pytest.raises(gpuc.CompilationError, match=r"operand of \* must be a number or bool, not Array\[float32, 1"):
        scale_into[4](np.zeros((2, 2), np.float32), f32(), np.float32(2))


@pytest.mark.parametrize("bad, message", [
    ([1.0, 2.0], "argument 0: cannot pass a list to a kernel"),
    ("abc", "argument 0: cannot pass a str to a kernel"),
    (np.zeros(4, np.longdouble), "argument 0: dtype float128 is not supported"),
    (np.zeros((1, 1, 1, 1), np.float32), "argument 0: kernels take arrays of 1 to 3 dimensions, not 4"),
    (np.zeros((), np.float32), "argument 0: kernels take arrays of 1 to 3 dimensions, not 0"),
])
def test_unsupported_arguments(bad, message):
    with pytest.raises(TypeError, match=re.escape(message)):
        scale_into[4](bad, f32(), np.float32(2))


def test_scalar_out_of_range():
    with pytest.raises(OverflowError, match="does not fit in i64"):
        scale_into[4](np.arange(4), np.zeros(4, np.int64), 1 << 70)


# the CPU runtime's words, and the GPU runtimes' (CUDA's and OpenCL's launch sizes are read alike)
@pytest.mark.parametrize("n, error, message, gpu_message", [
    (-1, ValueError, "must not be negative", "a tuple of 1 to 3 non-negative ints, not -1"),
    ((4, -2), ValueError, "must not be negative", "a tuple of 1 to 3 non-negative ints, not (4, -2)"),
    ((1, 2, 3, 4), ValueError, "1 to 3 dimensions, not 4", "a tuple of 1 to 3 non-negative ints, not (1, 2, 3, 4)"),
    ((), ValueError, "1 to 3 dimensions, not 0", "a tuple of 1 to 3 non-negative ints, not ()"),
    (2.5, TypeError, "cannot be interpreted as an integer", "must be an int or a tuple of 1 to 3 ints, not 2.5"),
])
def test_bad_index_space(n, error, message, gpu_message, gpuc_device):
    with pytest.raises(error, match=re.escape(message if gpuc_device == "cpu" else gpu_message)):
        scale_into[n](f32(), f32(), np.float32(2))


@pytest.mark.not_on("opencl", "threads= is the CPU runtime's (OpenCL devices schedule their own work items)")
def test_bad_thread_count():
    with pytest.raises(ValueError, match="threads must be at least 1"):
        scale_into.launch(4, f32(), f32(), np.float32(2), threads=0)


@COMPILES_ONLY
def test_bad_device_name():
    with pytest.raises(ValueError, match="device must be one of cpu, cuda, opencl, not 'gpu'"):
        scale_into.launch(4, f32(), f32(), np.float32(2), device="gpu")


@COMPILES_ONLY
@pytest.mark.skipif(gpuc.cuda.available(), reason="this machine has a CUDA device")
def test_cuda_without_a_gpu_is_a_clear_error():
    with pytest.raises(CudaUnavailableError, match="no CUDA device"):
        scale_into.launch(4, f32(), f32(), np.float32(2), device="cuda")
    assert not any(device == "cuda" for _, device in scale_into.__dict__["_gpuc_launchers"])


def test_empty_index_space_runs_nothing():
    out = np.full(4, 7.0, np.float32)
    scale_into[0](f32(), out, np.float32(2))
    scale_into[(4, 0)](f32(), out, np.float32(2))
    assert out.tolist() == [7.0] * 4


# -- (e) the dispatch cache: one compilation per (types, device) ---------------------------------

@pytest.fixture
def compiles(monkeypatch, gpuc_device):
    """The (kernel name, types) of every launcher compiled for the test's device while the test runs."""
    seen = []
    real = dispatch._COMPILERS[gpuc_device]

    def counting(kernel, types, **options):
        seen.append((kernel.__name__, types))
        return real(kernel, types, **options)
    monkeypatch.setitem(dispatch._COMPILERS, gpuc_device, counting)
    return seen


def test_new_types_compile_a_new_specialization(compiles):
    @gpuc.kernel
    def double_it(x, out):
        i = gpuc.index()
        out[i] = x[i] + x[i]

    for dtype in (np.float32, np.float64, np.int32, np.float32, np.float64):
        x = np.arange(5, dtype=dtype)
        out = np.zeros(5, dtype)
        double_it[5](x, out)
        np.testing.assert_array_equal(out, 2 * x)
    assert len(compiles) == 3
    assert len(double_it.__dict__["_gpuc_launchers"]) == 3


def test_second_launch_does_not_recompile(compiles):
    @gpuc.kernel
    def add_one(x):
        x[gpuc.index()] += 1

    x = np.zeros(8, np.int64)
    add_one[8](x)
    launcher = dict(add_one.__dict__["_gpuc_launchers"])
    for _ in range(3):
        add_one[8](x, threads=2)
    y = np.arange(8)  # another array of the same type: the same launcher
    add_one[8](y)
    assert compiles == [("add_one", (dispatch.typeof(x),))]
    assert add_one.__dict__["_gpuc_launchers"] == launcher
    assert x.tolist() == [4] * 8 and y.tolist() == list(range(1, 9))


def test_failed_compilation_is_not_cached(compiles):
    for _ in range(2):
        with pytest.raises(gpuc.CompilationError):
            scale_into[4](f32(), f32())
    assert len(compiles) == 2
    assert all(len(types) == 3 for types, _ in scale_into.__dict__["_gpuc_launchers"])
