"""gpuc.popc / clz / ffs: CUDA's bit counts on every integer type at its edges, compiled on the CPU (in kernels
and funcs) against Python's own counting, their result types, the code for PTX, GCN and SPIR-V, and errors."""

from __future__ import annotations

import numpy as np
import pytest

import gpuc
from gpuc import Array

from support.located_errors import check

TYPES = [np.int32, np.int64, np.uint32, np.uint64]
# The tests that launch kernels run natively and through OpenCL.
ON_DEVICES = pytest.mark.devices("cpu", "opencl")


def edges(dt) -> np.ndarray:
    info = np.iinfo(dt)
    values = {0, 1, -1, 2, 3, 7, info.min, info.max, info.min + 1, info.max - 1, 0x5555555555555555, -0x1234567}
    values |= {1 << k for k in range(info.bits)} | {(1 << k) - 1 for k in range(info.bits)}
    values |= {-(1 << k) for k in range(info.bits)}
    return np.array(sorted(v for v in values if info.min <= v <= info.max), dt)


def python_counts(value: int, bits: int) -> tuple[int, int, int]:
    """(popc, clz, ffs) of `value` as a `bits`-bit integer, from Python's int methods."""
    u = value & ((1 << bits) - 1)
    return bin(u).count("1"), bits - u.bit_length(), (u & -u).bit_length()


@gpuc.func
def counts(x):
    return gpuc.popc(x), gpuc.clz(x), gpuc.ffs(x)


@gpuc.kernel
def in_kernel(x, p, c, f):
    i = gpuc.index()
    p[i] = gpuc.popc(x[i])
    c[i] = gpuc.clz(x[i])
    f[i] = gpuc.ffs(x[i])


@gpuc.kernel
def in_func(x, p, c, f):
    i = gpuc.index()
    p[i], c[i], f[i] = counts(x[i])


@ON_DEVICES
@pytest.mark.parametrize("kernel", [in_kernel, in_func], ids=["kernel", "func"])
@pytest.mark.parametrize("dt", TYPES, ids=lambda d: d.__name__)
def test_edges_match_python(dt, kernel):
    x = edges(dt)
    p, c, f = np.zeros_like(x), np.zeros_like(x), np.zeros(len(x), np.uint32)
    kernel.launch(len(x), x, p, c, f)
    bits = np.iinfo(dt).bits
    want = [python_counts(int(v), bits) for v in x]
    assert list(zip(p.tolist(), c.tolist(), f.tolist())) == want
    assert [(gpuc.popc(v), gpuc.clz(v), gpuc.ffs(v)) for v in x] == want  # in Python: the same values


def test_cuda_edge_values():
    # ffs counts from 1 and is 0 for 0; clz of 0 is the width; popc of -1 is the width
    assert [gpuc.ffs(np.int32(v)) for v in (0, 1, 8, -2**31)] == [0, 1, 4, 32]
    assert gpuc.clz(np.uint64(0)) == 64 and gpuc.clz(np.int32(0)) == 32 and gpuc.clz(np.int32(-1)) == 0
    assert gpuc.popc(np.int64(-1)) == 64 and gpuc.popc(np.uint32(0)) == 0


@gpuc.func
def typed(x):
    return gpuc.popc(x), gpuc.clz(x), gpuc.ffs(x), gpuc.popc(5)


@pytest.mark.parametrize("dt", TYPES, ids=lambda d: d.__name__)
def test_result_types_follow_numba_cuda(dt):
    # popc and clz keep the argument's type, ffs is a uint32 (a literal is an int64)
    ir = gpuc.code_llvm(typed, (gpuc.frontend.as_type(dt),))
    bits = np.iinfo(dt).bits
    assert f"{{ i{bits}, i{bits}, i32, i64 }}" in ir
    got = typed(dt(12))
    assert [type(v) for v in got] == [dt, dt, np.uint32, np.int64] and got == (2, bits - 4, 3, 2)


@pytest.mark.parametrize("target", ["ptx", "gcn", "spirv"])
@pytest.mark.parametrize("dt", TYPES, ids=lambda d: d.__name__)
def test_gpu_code(target, dt, ptxas, spirv_val):
    t = {"ptx": gpuc.PTXTarget(), "gcn": gpuc.GCNTarget(), "spirv": gpuc.SPIRVTarget()}[target]
    A = Array[gpuc.frontend.as_type(dt), 1]
    job = gpuc.CompilerJob((in_func, (A, A, A, Array[gpuc.uint32, 1])), gpuc.CompilerConfig(t))
    if target == "ptx":
        ptx = gpuc.compile(job, "asm").output
        assert "popc.b" in ptx and "clz.b" in ptx
        ptxas(ptx)
    elif target == "spirv":
        spirv_val(gpuc.compile(job, "obj").output)
    else:
        assert gpuc.compile(job, "obj").output


def test_lowering(filecheck):
    ir = gpuc.code_llvm(counts, (gpuc.uint64,), optimize=False)
    filecheck(ir, "CHECK: call i64 @llvm.ctpop.i64(\nCHECK: call i64 @llvm.ctlz.i64(i64 {{.*}}, i1 false)\n"
                  "CHECK: call i64 @llvm.cttz.i64(i64 {{.*}}, i1 false)\nCHECK: trunc i64 {{.*}} to i32\n")


@gpuc.kernel
def on_float(out, x):
    out[0] = gpuc.popc(x)


@gpuc.kernel
def on_bool(out, x):
    out[0] = gpuc.clz(x > 0)


@gpuc.kernel
def two_arguments(out, x):
    out[0] = gpuc.ffs(x, 1)


@gpuc.kernel
def on_array(out):
    out[0] = gpuc.popc(out)


@gpuc.kernel
def big_literal(out):
    out[0] = gpuc.clz(2**63)


@pytest.mark.parametrize("fn, argtypes, message, fragment", [
    (on_float, (Array[gpuc.int64, 1], gpuc.float64), "gpuc.popc() needs an integer (int8 to int64, uint8 to "
     "uint64), not float64", "popc(|x)"),
    (on_bool, (Array[gpuc.int64, 1], gpuc.int64), "gpuc.clz() needs an integer", "x > 0"),
    (two_arguments, (Array[gpuc.int64, 1], gpuc.int64), "ffs() takes 1 argument(s), but 2 were given", "gpuc.ffs("),
    (on_array, (Array[gpuc.int64, 1],), "gpuc.popc() needs an integer", "popc(|out)"),
    (big_literal, (Array[gpuc.int64, 1],), "does not fit in int64", "2**63"),
], ids=lambda v: getattr(v, "__name__", None) if callable(v) else None)
def test_errors_are_located(fn, argtypes, message, fragment):
    check(fn, argtypes, message, fragment)


def test_python_refuses_what_kernels_refuse():
    for bad in (1.5, True, np.float32(2)):
        with pytest.raises(TypeError, match="needs an integer"):
            gpuc.popc(bad)
