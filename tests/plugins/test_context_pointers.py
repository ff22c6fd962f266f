"""The launch context through function pointers (gpuc/plugins/context_pointers.py): functions reading
gpuc.index(), gpuc.ndrange() or the block model, reached through a pointer chosen at run time, passed
into or returned from a func, or deferred with kernel=True, on the CPU (against the Python model
and NumPy) and compiled for PTX, GCN and SPIR-V."""

from __future__ import annotations

import re

import numpy as np
import pytest

import gpuc
from gpuc import Array, int64
from support.emulate import emulate

I64 = Array[int64, 1]
I64_2 = Array[int64, 2]
# What OpenCL runs lack (a located error there).
NO_POINTERS = "SPIR-V has no function pointers chosen at run time (SPV_INTEL_function_pointers)"


# -- kernels: the launch context behind pointers ----------------------------------------------------

@gpuc.func
def plus_index(x):
    return x + gpuc.index()


@gpuc.func
def twice_plus_index(x):
    return 2 * x + gpuc.index()


@gpuc.func
def no_context(x):
    return x * 7


@gpuc.func
def apply(p, x):
    return p(x)


@gpuc.func
def pick(c):
    return gpuc.deferred(plus_index, 1) if c else gpuc.deferred(twice_plus_index, 1)


@gpuc.kernel
def chosen_at_run_time(out, c):
    p = gpuc.deferred(plus_index, 1) if c else gpuc.deferred(twice_plus_index, 1)
    out[gpuc.index()] = p(2)


@gpuc.kernel
def passed_into_a_func(out, c):
    out[gpuc.index()] = apply(gpuc.deferred(plus_index, 1), 3) + apply(pick(c), 5)


@gpuc.kernel
def constant_pointer_passed(out, c):
    out[gpuc.index()] = apply(gpuc.deferred(twice_plus_index, 1), 3) + c


@gpuc.kernel
def returned_from_a_func(out, c):
    out[gpuc.index()] = pick(c)(4)


@gpuc.kernel
def mixed_with_pointers_to_context_free_funcs(out, c):
    p = gpuc.deferred(no_context, 1) if c == 2 else pick(c)
    out[gpuc.index()] = p(6)


@gpuc.kernel
def index_only_behind_the_pointer(out, c):
    # The kernel itself never reads the index: the functions it calls through the pointer do.
    i = pick(c)(0)
    out[i] = 3 * i + c


@gpuc.func
def linear(x):
    return x + gpuc.index(0) + gpuc.index(1) * gpuc.ndrange(0)


@gpuc.func
def linear_transposed(x):
    return x + gpuc.index(1) + gpuc.index(0) * gpuc.ndrange(1)


@gpuc.kernel
def two_dimensional(out, c):
    p = gpuc.deferred(linear, 1) if c else gpuc.deferred(linear_transposed, 1)
    out[gpuc.index(1), gpuc.index(0)] = p(100)


@gpuc.func
def sum_down(n) -> int:
    if n <= 0:
        return gpuc.index()
    return n + gpuc.deferred(sum_down, n)(n - 1)


@gpuc.kernel
def recursive_through_a_pointer(out, c):
    p = gpuc.deferred(sum_down, 1) if c else gpuc.deferred(plus_index, 1)
    out[gpuc.index()] = p(4)


CASES = [(chosen_at_run_time, (I64, int64)), (passed_into_a_func, (I64, int64)), (constant_pointer_passed, (I64, int64)),
         (returned_from_a_func, (I64, int64)), (mixed_with_pointers_to_context_free_funcs, (I64, int64)),
         (index_only_behind_the_pointer, (I64, int64)), (two_dimensional, (I64_2, int64)),
         (recursive_through_a_pointer, (I64, int64))]


@pytest.mark.devices("cpu", "opencl")
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("c", [0, 1, 2])
@pytest.mark.parametrize("kernel", [k for k, sig in CASES if sig[0] == I64], ids=lambda k: k.__name__)
def test_on_the_cpu_against_the_python_model(kernel, c, threads, gpuc_device):
    if gpuc_device == "opencl" and kernel.__name__ not in CONSTANT_POINTERS:
        pytest.skip(f"not on opencl: {NO_POINTERS}")
    n = 37
    got, want = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
    kernel.launch(n, got, c, threads=threads)
    emulate(kernel, n, want, c)
    np.testing.assert_array_equal(got, want)


@pytest.mark.devices("cpu", "opencl")
@pytest.mark.not_on("opencl", NO_POINTERS)
def test_the_values_the_python_model_gives():
    i = np.arange(9)
    out = np.zeros(9, np.int64)
    chosen_at_run_time[9](out, 1)
    assert out.tolist() == (2 + i).tolist()
    chosen_at_run_time[9](out, 0)
    assert out.tolist() == (4 + i).tolist()
    passed_into_a_func[9](out, 0)
    assert out.tolist() == ((3 + i) + (10 + i)).tolist()
    mixed_with_pointers_to_context_free_funcs[9](out, 2)
    assert out.tolist() == [42] * 9
    recursive_through_a_pointer[9](out, 1)
    assert out.tolist() == (10 + i).tolist()


@pytest.mark.devices("cpu", "opencl")
@pytest.mark.not_on("opencl", NO_POINTERS)
@pytest.mark.parametrize("c", [0, 1])
def test_two_dimensional_index_and_ndrange_behind_a_pointer(c):
    got, want = np.full((5, 3), -1, np.int64), np.full((5, 3), -1, np.int64)
    two_dimensional.launch((3, 5), got, c, threads=2)
    emulate(two_dimensional, (3, 5), want, c)
    np.testing.assert_array_equal(got, want)
    y, x = np.mgrid[0:5, 0:3]
    np.testing.assert_array_equal(got, 100 + (x + 3 * y if c else y + 5 * x))


# -- kernels deferred with kernel=True, their pointers passed on --------------------------------------

@gpuc.kernel
def fill(out):
    out[gpuc.index()] = gpuc.index() * 10 + gpuc.ndrange()


@gpuc.func
def keep(k, x):
    return x + 1


@gpuc.kernel
def hands_on_a_kernel_pointer(out):
    out[gpuc.index()] = keep(gpuc.deferred(fill, out, kernel=True), gpuc.index())


@pytest.mark.devices("cpu", "opencl")
def test_kernel_pointer_passed_into_a_func_on_the_cpu():
    out = np.zeros(6, np.int64)
    hands_on_a_kernel_pointer[6](out)
    assert out.tolist() == [1, 2, 3, 4, 5, 6]
    result = gpuc.compile(gpuc.CompilerJob((hands_on_a_kernel_pointer, (I64,)),
                                           gpuc.CompilerConfig(gpuc.NativeTarget(), kernel=True)), "llvm")
    assert result.entries[1].startswith("fill")
    # The deferred kernel takes the launch context like any CPU kernel reading it.
    assert re.search(rf"define void @{re.escape(result.entries[1])}\(ptr [^,]*%out.data, i64 %out.shape0, "
                     r"i64 %out.stride0, ptr [^,]*%gpuc.ctx\)", result.output), result.output


# -- the block model on the CPU: calls through pointers become direct calls, inlined ----------------

@gpuc.func
def thread_and_block(x):
    return x + gpuc.thread_index() * 100 + gpuc.block_index()


@gpuc.func
def thread_times(x):
    return x * gpuc.thread_index() + 1000 * gpuc.block_index()


@gpuc.kernel
def block_pointer_chosen(out, c):
    p = gpuc.deferred(thread_and_block, 1) if c else gpuc.deferred(thread_times, 1)
    out[gpuc.index()] = p(3)


@gpuc.kernel
def block_pointer_passed(out, c):
    out[gpuc.index()] = apply(gpuc.deferred(thread_and_block, 1), 1) + c


@gpuc.func
def rotate_left(out, i):
    s = gpuc.shared.array(4, gpuc.int64)
    t = gpuc.thread_index()
    s[t] = i
    gpuc.barrier()
    out[i] = s[(t + 1) % 4]
    return 0


@gpuc.func
def rotate_right(out, i):
    s = gpuc.shared.array(4, gpuc.int64)
    t = gpuc.thread_index()
    s[t] = i
    gpuc.barrier()
    out[i] = s[(t + 3) % 4]
    return 0


@gpuc.func
def apply_to(p, out, i):
    return p(out, i)


@gpuc.kernel
def barrier_behind_a_pointer(out, c):
    i = gpuc.index()
    p = gpuc.deferred(rotate_left, out, i) if c else gpuc.deferred(rotate_right, out, i)
    apply_to(p, out, i)


BLOCK_CASES = [(block_pointer_chosen, (I64, int64)), (block_pointer_passed, (I64, int64)),
               (barrier_behind_a_pointer, (I64, int64))]


@pytest.mark.devices("cpu", "opencl")
@pytest.mark.not_on("opencl", NO_POINTERS)
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("c", [0, 1])
def test_block_model_behind_pointers_on_the_cpu(c, threads):
    n, block = 12, 4
    i = np.arange(n)
    t, b = i % block, i // block
    out = np.full(n, -1, np.int64)
    block_pointer_chosen.launch(n, out, c, block=block, threads=threads)
    np.testing.assert_array_equal(out, 3 + t * 100 + b if c else 3 * t + 1000 * b)
    barrier_behind_a_pointer.launch(n, out, c, block=block, threads=threads)
    np.testing.assert_array_equal(out, b * block + (t + (1 if c else 3)) % block)


@pytest.mark.devices("cpu", "opencl")
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("c", [0, 1])
def test_block_model_behind_a_constant_pointer(c, threads):
    n, block = 12, 4
    i = np.arange(n)
    out = np.full(n, -1, np.int64)
    block_pointer_passed.launch(n, out, c, block=block, threads=threads)
    np.testing.assert_array_equal(out, 1 + i % block * 100 + i // block + c)


# -- GPU targets --------------------------------------------------------------------------------------

ALL = CASES + BLOCK_CASES + [(hands_on_a_kernel_pointer, (I64,))]
CONSTANT_POINTERS = {"constant_pointer_passed", "hands_on_a_kernel_pointer", "block_pointer_passed"}


def compile_for(kernel, sig, target, output):
    return gpuc.compile(gpuc.CompilerJob((kernel, sig), gpuc.CompilerConfig(target, kernel=True)), output)


@pytest.mark.parametrize("kernel, sig", ALL, ids=[k.__name__ for k, _ in ALL])
def test_ptx(kernel, sig, ptxas):
    result = compile_for(kernel, sig, gpuc.PTXTarget(), "asm")
    assert ".visible .entry" in result.output
    ptxas(result.output)


@pytest.mark.parametrize("kernel, sig", ALL, ids=[k.__name__ for k, _ in ALL])
def test_gcn(kernel, sig):
    assert "s_endpgm" in compile_for(kernel, sig, gpuc.GCNTarget(), "asm").output


@pytest.mark.parametrize("kernel, sig", ALL, ids=[k.__name__ for k, _ in ALL])
def test_spirv(kernel, sig, spirv_val):
    if kernel.__name__ in CONSTANT_POINTERS:  # inlined, the pointer is a constant: a direct call
        spirv_val(compile_for(kernel, sig, gpuc.SPIRVTarget(), "obj").output)
        return
    # SPIR-V has no function pointers: a pointer chosen at run time is an error saying what works,
    # located at the call through the pointer.
    with pytest.raises(gpuc.CompilationError, match=r"cannot call through a function pointer(.|\n)*hint: call "
                                                    r"the function directly, or choose the pointer from constants") as e:
        compile_for(kernel, sig, gpuc.SPIRVTarget(), "obj")
    where = e.value.location
    assert where is not None and where.file == __file__, str(e.value)
    assert re.search(r"\bp\(|\)\(", where.text), where  # a call through a pointer: `p(...)`, `pick(c)(...)`
    assert str(e.value).startswith(f"{where}: ")


def test_ptx_passes_the_launch_sizes_through_the_pointer(filecheck):
    # ndrange() is a parameter on GPUs: the function behind the pointer takes the launch sizes, and
    # the call through the pointer passes the caller's.
    ir = gpuc.code_llvm(two_dimensional, (I64_2, int64), target=gpuc.PTXTarget(), optimize=False)
    filecheck(ir, """\
CHECK-LABEL: define ptx_kernel void @"two_dimensional_$_A2i64_$_i64"(
CHECK-SAME: i64 %c, i64 %gpuc.n0, i64 %gpuc.n1, i64 %gpuc.n2)
CHECK: select i1 %{{.*}}, ptr @linear_transposed.i64, ptr @linear.i64
CHECK: call i64 %{{.*}}(i64 100, i64 %gpuc.n0, i64 %gpuc.n1, i64 %gpuc.n2)
CHECK-DAG: define internal i64 @linear.i64(i64 %x, i64 %gpuc.n0, i64 %gpuc.n1, i64 %gpuc.n2)
CHECK-DAG: define internal i64 @linear_transposed.i64(i64 %x, i64 %gpuc.n0, i64 %gpuc.n1, i64 %gpuc.n2)
""")
