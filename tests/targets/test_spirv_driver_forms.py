"""SPIR-V in the forms OpenCL drivers take: kernel entries without aggregate parameters (tuples and complex
scalars become their scalars, in gpuc.abi.flat_values' order), and atomics OpenCL devices need not have
in one instruction (float add/sub/min/max, 8- and 16-bit elements) as compare-exchange loops. Checked on
the IR and with spirv-val everywhere, and against NumPy on the OpenCL device where there is one."""

from __future__ import annotations

import re

import numpy as np
import pytest

import gpuc
from gpuc.abi import EntryABI, KernelSignature, flat_values, written_params
from gpuc.compiler import CompilerConfig, CompilerJob, compile_module
from gpuc.runtime.dispatch import signature_spec, typeof

Z, C = 1.5 - 0.75j, np.complex64(2.0 + 0.5j)
T, U = (3.0, 4), (2.5, (True, np.int32(7)))


@gpuc.kernel
def mixed(out, z, t, u, c):
    i = gpuc.index()
    w = z * (t[0] + i)
    s = u[0] if u[1][0] else -u[0]
    out[i] = w.real + w.imag * t[1] + s * u[1][1] + c.real - c.imag


def mixed_reference(n, z=Z, t=T, u=U, c=C):
    w = z * (t[0] + np.arange(n))
    s = u[0] if u[1][0] else -u[0]
    return w.real + w.imag * t[1] + s * u[1][1] + np.float64(c.real) - np.float64(c.imag)


@gpuc.kernel
def tuple_then_arrays(t, src, dst):
    i = gpuc.index()
    dst[i] = src[i] * t[0] + t[1][1]


def spirv_job(kernel, args, **options):
    return CompilerJob((kernel, tuple(typeof(a, k) for k, a in enumerate(args))),
                       CompilerConfig(gpuc.SPIRVTarget(), kernel=True, **options))


def ir_and_binary(job):
    with compile_module(job) as built:
        return str(built.module), built.emit("obj")


def opencl_session():
    from gpuc.runtime import opencl

    reason = opencl.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    return opencl.session()


# -- struct parameters ---------------------------------------------------------------------------------

# Intel's OpenCL compiler crashed (killing the process) on a SPIR-V kernel taking a struct by value: a
# complex scalar or a tuple argument.
def test_entry_takes_the_scalars_of_tuples_and_complex_numbers(filecheck, spirv_val):
    ir, binary = ir_and_binary(spirv_job(mixed, (np.zeros(4), Z, T, U, C)))
    filecheck(ir, "CHECK: define spir_kernel void @mixed.{{[^(]*}}(ptr addrspace(1) {{.*}}%out.data, "
                  "i64 %out.shape0, i64 %out.stride0, double %z.0, double %z.1, double %t.0, i64 %t.1, "
                  "double %u.0, i1 {{.*}}%u.1.0, i32 %u.1.1, float %c.0, float %c.1, "
                  "i64 %gpuc.n0, i64 %gpuc.n1, i64 %gpuc.n2)\n"
                  "CHECK-NOT: extractvalue\n"
                  "CHECK: ret void\n")
    spirv_val(binary)


def test_entry_parameters_are_flat_values_order():
    args = (np.zeros(4), Z, T, U, C)
    job = spirv_job(mixed, args)
    signature = KernelSignature(signature_spec(tuple(typeof(a, k) for k, a in enumerate(args))))
    with compile_module(job) as built:
        fn = built.module.functions[built.entry]
        entry = EntryABI.of(fn, written_params(built.module, fn))
    assert entry.types[3:] == ("double",) * 3 + ("i64", "double", "i1", "i32", "float", "float")
    assert entry.names[3:] == ("z.0", "z.1", "t.0", "t.1", "u.0", "u.1.0", "u.1.1", "c.0", "c.1")
    values = [v for p, a in zip(signature.params[1:], args[1:]) for v in flat_values(p, p.converter("x")(a))]
    assert values == [Z.real, Z.imag, 3.0, 4, 2.5, True, 7, np.float32(2.0), np.float32(0.5)]


def test_written_arrays_count_the_flattened_parameters():
    # the tuple's 3 scalars come first: the written array's data pointer is parameter 6, not 4
    args = ((2.0, (1, 0.5)), np.zeros(4), np.zeros(4))
    job = spirv_job(tuple_then_arrays, args)
    with compile_module(job) as built:
        fn = built.module.functions[built.entry]
        entry = EntryABI.of(fn, written_params(built.module, fn))
    assert entry.written == {6}


@pytest.mark.filterwarnings("ignore:Non-empty compiler output")
def test_the_driver_takes_the_scalars_set_one_by_one():
    s = opencl_session()
    cl, n = s.cl, 37
    ir, binary = ir_and_binary(spirv_job(mixed, (np.zeros(n), Z, T, U, C)))
    name = re.search(r"define spir_kernel void @([^(]+)\(", ir).group(1)
    out = np.zeros(n)
    buffer = cl.Buffer(s.context, cl.mem_flags.WRITE_ONLY, out.nbytes)
    kernel = getattr(cl.Program(s.context, binary).build(), name)
    scalars = [np.float64(Z.real), np.float64(Z.imag), np.float64(3.0), np.int64(4), np.float64(2.5), np.uint8(1),
               np.int32(7), np.float32(C.real), np.float32(C.imag)]
    kernel(s.queue, (n,), None, buffer, np.int64(n), np.int64(1), *scalars, np.int64(n), np.int64(1), np.int64(1))
    cl.enqueue_copy(s.queue, out, buffer)
    s.queue.finish()
    np.testing.assert_allclose(out, mixed_reference(n), rtol=1e-12)


@pytest.mark.devices("cpu", "opencl")
def test_tuples_and_complex_numbers_reach_the_kernel():
    out = np.zeros(100)
    mixed[100](out, Z, T, U, C)
    np.testing.assert_allclose(out, mixed_reference(100), rtol=1e-12)
    nested = (1.25, (2, -0.5))
    src, dst = np.arange(50.0), np.zeros(50)
    tuple_then_arrays[50](nested, src, dst)
    np.testing.assert_array_equal(dst, src * 1.25 - 0.5)


# -- atomics -------------------------------------------------------------------------------------------

@gpuc.kernel
def float_atomics(total, rest, lo, hi, v):
    i = gpuc.index()
    k = i % len(total)
    gpuc.atomic_add(total, k, v[i])
    gpuc.atomic_sub(rest, k, v[i])
    gpuc.atomic_min(lo, k, v[i])
    gpuc.atomic_max(hi, k, v[i])


BLOCK, SLOTS = 64, 5


@gpuc.kernel
def shared_float32(sums, tops, v):
    s = gpuc.shared.array(SLOTS, gpuc.float32)
    top = gpuc.shared.array(SLOTS, gpuc.float32)
    t = gpuc.thread_index(0)
    if t < SLOTS:
        s[t] = 0.0
        top[t] = -1000.0
    gpuc.barrier()
    gpuc.atomic_add(s, t % SLOTS, v[gpuc.index(0)])
    gpuc.atomic_max(top, t % SLOTS, v[gpuc.index(0)])
    gpuc.barrier()
    if t < SLOTS:
        sums[gpuc.block_index(0), t] = s[t]
        tops[gpuc.block_index(0), t] = top[t]


@gpuc.kernel
def shared_float16(sums, tops, v):
    s = gpuc.shared.array(SLOTS, gpuc.float16)
    top = gpuc.shared.array(SLOTS, gpuc.float16)
    t = gpuc.thread_index(0)
    if t < SLOTS:
        s[t] = 0.0
        top[t] = -1000.0
    gpuc.barrier()
    gpuc.atomic_add(s, t % SLOTS, v[gpuc.index(0)])
    gpuc.atomic_max(top, t % SLOTS, v[gpuc.index(0)])
    gpuc.barrier()
    if t < SLOTS:
        sums[gpuc.block_index(0), t] = s[t]
        tops[gpuc.block_index(0), t] = top[t]


@gpuc.kernel
def shared_constant_slots(out, v):
    s = gpuc.shared.array(4, gpuc.float16)
    t = gpuc.thread_index(0)
    if t < 4:
        s[t] = 0.0
    gpuc.barrier()
    gpuc.atomic_add(s, 1, v[gpuc.index(0)])
    gpuc.atomic_max(s, 2, v[gpuc.index(0)])
    gpuc.barrier()
    if t < 4:
        out[gpuc.block_index(0), t] = s[t]


@gpuc.kernel
def narrow_integers(c8, c16, wraps, first):
    i = gpuc.index()
    gpuc.atomic_add(c8, i % len(c8), 1)
    gpuc.atomic_sub(c16, i % len(c16), 3)
    gpuc.atomic_inc(wraps, i % len(wraps), 10)
    gpuc.atomic_cas(first, i % len(first), 0, i + 1)


def float_inputs(dtype, n, seed=0):
    """Halves in [-4, 4]: every order of additions gives the same, exact sums."""
    return (np.random.default_rng(seed).integers(-8, 9, n) / 2).astype(dtype)


def float_atomics_arrays(dtype, n, m):
    return (np.zeros(m, dtype), np.full(m, 10, dtype), np.full(m, 100, dtype), np.full(m, -100, dtype),
            float_inputs(dtype, n))


NARROW = re.compile(r"= (atomicrmw [a-z_]+|cmpxchg) ptr[^\n]*, (i8|i16|half) ")


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_float_atomics_are_compare_exchange_loops(dtype, filecheck, spirv_val):
    ir, binary = ir_and_binary(spirv_job(float_atomics, float_atomics_arrays(dtype, 8, 3)))
    word = {"float16": "i32", "float32": "i32", "float64": "i64"}[dtype]
    filecheck(ir, "CHECK-LABEL: define spir_kernel\n" + "".join(
        f"CHECK: load atomic {word}, ptr addrspace(1) {{{{.*}}}} monotonic\n"
        f"CHECK: cmpxchg ptr addrspace(1) {{{{.*}}}}, {word} {{{{.*}}}}, {word} {{{{.*}}}} monotonic monotonic\n"
        for _ in range(4)) + "CHECK-NOT: atomicrmw\n")
    assert not NARROW.search(ir)
    spirv_val(binary)


@pytest.mark.parametrize("kernel", [shared_float32, shared_float16], ids=["float32", "float16"])
def test_shared_float_atomics_compile(kernel, spirv_val):
    dtype = "float16" if kernel is shared_float16 else "float32"
    args = (np.zeros((2, SLOTS), dtype), np.zeros((2, SLOTS), dtype), np.zeros(2 * BLOCK, dtype))
    ir, binary = ir_and_binary(spirv_job(kernel, args, whole_blocks=True))
    assert "atomicrmw" not in ir and "cmpxchg ptr addrspace(3)" in ir and not NARROW.search(ir)
    spirv_val(binary)


def test_narrow_integer_atomics_exchange_words(spirv_val):
    args = (np.zeros(3, np.int8), np.zeros(5, np.int16), np.zeros(3, np.uint16), np.zeros(6, np.int16))
    ir, binary = ir_and_binary(spirv_job(narrow_integers, args))
    assert not NARROW.search(ir) and "cmpxchg ptr addrspace(1)" in ir
    spirv_val(binary)


# Float atomics were refused on SPIR-V ("needs the SPIR-V extension SPV_EXT_shader_atomic_float_add").
@pytest.mark.devices("cpu", "opencl")
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_float_atomics_with_many_items_per_element(dtype):
    n, m = (600, 8) if dtype == "float16" else (20000, 7)
    total, rest, lo, hi, v = float_atomics_arrays(dtype, n, m)
    float_atomics[n](total, rest, lo, hi, v)
    k = np.arange(n) % m
    expect = [np.zeros(m), np.full(m, 10.0), np.full(m, 100.0), np.full(m, -100.0)]
    np.add.at(expect[0], k, v.astype(np.float64))
    np.subtract.at(expect[1], k, v.astype(np.float64))
    np.minimum.at(expect[2], k, v.astype(np.float64))
    np.maximum.at(expect[3], k, v.astype(np.float64))
    for got, want in zip((total, rest, lo, hi), expect):
        np.testing.assert_array_equal(got, want.astype(dtype))


@pytest.mark.devices("cpu", "opencl")
@pytest.mark.parametrize("kernel", [shared_float32, shared_float16], ids=["float32", "float16"])
def test_shared_float_atomics_per_block(kernel):
    dtype, blocks = ("float16" if kernel is shared_float16 else "float32"), 6
    v = float_inputs(dtype, blocks * BLOCK, seed=1)
    sums, tops = np.zeros((blocks, SLOTS), dtype), np.zeros((blocks, SLOTS), dtype)
    kernel.launch(blocks * BLOCK, sums, tops, v, block=BLOCK)
    slots = np.arange(BLOCK) % SLOTS
    per_block = v.astype(np.float64).reshape(blocks, BLOCK)
    want_sums, want_tops = np.zeros((blocks, SLOTS)), np.full((blocks, SLOTS), -1000.0)
    for b in range(blocks):
        np.add.at(want_sums[b], slots, per_block[b])
        np.maximum.at(want_tops[b], slots, per_block[b])
    np.testing.assert_array_equal(sums, want_sums.astype(dtype))
    np.testing.assert_array_equal(tops, want_tops.astype(dtype))


# The word holding a constant slot of a shared array is found from the slot's address as an instruction.
@pytest.mark.devices("cpu", "opencl")
def test_shared_atomics_at_constant_slots():
    blocks, v = 3, float_inputs("float16", 3 * BLOCK, seed=2)
    out = np.zeros((blocks, 4), np.float16)
    shared_constant_slots.launch(blocks * BLOCK, out, v, block=BLOCK)
    per_block = v.astype(np.float64).reshape(blocks, BLOCK)
    want = np.zeros((blocks, 4))
    want[:, 1], want[:, 2] = per_block.sum(axis=1), np.maximum(per_block.max(axis=1), 0)
    np.testing.assert_array_equal(out, want.astype(np.float16))


# 8- and 16-bit atomics passed spirv-val but Intel's OpenCL compiler could not link them (OpenCL has none).
@pytest.mark.devices("cpu", "opencl")
def test_narrow_integer_atomics_leave_their_neighbours_alone():
    n = 3001
    c8, c16, wraps, first = np.zeros(3, np.int8), np.zeros(5, np.int16), np.zeros(3, np.uint16), np.zeros(6, np.int16)
    narrow_integers[n](c8, c16, wraps, first)
    counts = [np.bincount(np.arange(n) % m, minlength=m) for m in (3, 5, 3)]
    np.testing.assert_array_equal(c8, counts[0].astype(np.int8))  # wrapping, as int8 does
    np.testing.assert_array_equal(c16, (-3 * counts[1]).astype(np.int16))
    np.testing.assert_array_equal(wraps, counts[2] % 11)
    assert all(v > 0 and (v - 1) % 6 == k for k, v in enumerate(first)), first
