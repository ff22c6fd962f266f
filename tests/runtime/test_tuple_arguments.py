"""Tuples as kernel arguments: launches on the CPU and through OpenCL against the interpreter, the argv slots of
an IR kernel, and the CUDA parameter layout against the PTX that NVPTX emits (docs/kernel-abi.md, Tuples)."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest

import gpuc
from gpuc.compiler import CompilerConfig, CompilerJob, IRSource
from gpuc.frontend import as_type
from gpuc.runtime import JITModule
from gpuc.abi import KernelSignature
from gpuc.runtime.cuda_params import marshal
from gpuc.runtime.dispatch import signature_spec, typeof
from gpuc.targets import NativeTarget, PTXTarget


@gpuc.func
def affine(i, t):
    a, b = t
    return a * i + b


@gpuc.func
def nested(i, t):
    a, (flag, b) = t
    return a * i + (b if flag else -b)


@gpuc.func
def mixed(i, t):
    return t[0] * t[1] + t[2] * i + (1 if t[3] else 0)


@gpuc.func
def single(i, t):
    return t[0] - i


def _kernel_for(body):
    @gpuc.kernel
    def run(out, t):
        i = gpuc.index()
        out[i] = body(i, t)
    return run


def _as_launched(value):
    """A tuple's elements typed as the launcher types them (int -> int64, float -> float64)."""
    if isinstance(value, tuple):
        return tuple(_as_launched(v) for v in value)
    if type(value) is int:
        return np.int64(value)
    if type(value) is float:
        return np.float64(value)
    return value


CASES = [
    (affine, (3, 0.5), np.float64),
    (affine, (np.int32(-7), np.int32(5)), np.int32),
    (affine, (np.uint64(2**63 + 5), np.uint64(11)), np.float64),  # uint64 * int64 index: float64
    (affine, (np.float32(1.5), np.float32(-0.25)), np.float32),
    (nested, (2, (True, 1.25)), np.float64),
    (nested, (np.int32(3), (False, np.float32(2.5))), np.float64),
    (mixed, (np.uint32(4000000000), np.uint32(3), np.int64(-2), True), np.int64),
    (mixed, (1.5, np.float32(2.0), np.int32(3), False), np.float64),
    (single, (np.int64(2**62),), np.int64),
]


@pytest.mark.devices("cpu", "opencl")
@pytest.mark.parametrize("body, value, dtype", CASES, ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(CASES)])
def test_tuple_arguments_match_the_interpreter(body, value, dtype):
    kernel = _kernel_for(body)
    n = 37
    got = np.zeros(n, dtype=dtype)
    kernel[n](got, value)
    want = np.zeros(n, dtype=dtype)
    with np.errstate(all="ignore"):  # integers wrap in kernels as in NumPy
        for i in range(n):
            want[i] = body(np.int64(i), _as_launched(value))
    np.testing.assert_array_equal(got, want)


@pytest.mark.devices("cpu", "opencl")
def test_each_tuple_type_is_its_own_specialization():
    kernel = _kernel_for(affine)
    out = np.zeros(4)
    kernel[4](out, (2, 0.5))
    assert out.tolist() == [0.5, 2.5, 4.5, 6.5]
    kernel[4](out, (0.5, 2))
    assert out.tolist() == [2.0, 2.5, 3.0, 3.5]
    assert len(kernel.__dict__["_gpuc_launchers"]) == 2


def test_tuples_type_like_scalars():
    assert str(typeof((1, (2.5, True, np.uint32(3))))) == "tuple[int64, tuple[float64, bool, uint32]]"
    assert signature_spec([typeof((1, (2.5, True)))]) == [
        ("tuple", (("scalar", "i64"), ("tuple", (("scalar", "double"), ("scalar", "i1")))))]


def test_a_tuple_holding_an_array_is_refused():
    with pytest.raises(TypeError, match="tuple passed to a kernel holds scalars"):
        typeof((1, np.zeros(3)))


def test_an_ir_kernel_takes_a_struct_from_one_slot_per_element():
    ir = """
declare i64 @gpuc.ctx.index(i32)
define void @k(ptr %out, i64 %n, i64 %s, { i32, { i1, double } } %t) {
  %i = call i64 @gpuc.ctx.index(i32 0)
  %a = extractvalue { i32, { i1, double } } %t, 0
  %f = extractvalue { i32, { i1, double } } %t, 1, 0
  %b = extractvalue { i32, { i1, double } } %t, 1, 1
  %af = sitofp i32 %a to double
  %nb = fneg double %b
  %sb = select i1 %f, double %b, double %nb
  %v = fadd double %af, %sb
  %p = getelementptr double, ptr %out, i64 %i
  store double %v, ptr %p
  ret void
}
"""
    job = CompilerJob(IRSource(ir, entry="k"), CompilerConfig(NativeTarget(), kernel=True))
    signature = [("array", np.float64, 1), ("tuple", (("scalar", "i32"), ("tuple", (("scalar", "i1"),
                                                                                    ("scalar", "double")))))]
    with JITModule(job, signature=signature) as module:
        out = np.zeros(3)
        module.launcher()(3, (out, (-4, (False, 0.5))))
        assert out.tolist() == [-4.5] * 3
        with pytest.raises(TypeError, match=r"argument 1 \(t\) of @k must be a tuple of 2 element\(s\), not a tuple of 3"):
            module.launcher()(3, (out, (1, 2, 3)))
        with pytest.raises(TypeError, match="flattens to"):
            module.launcher([("array", np.float64, 1), ("tuple", (("scalar", "i32"),))])


@pytest.mark.parametrize("value_types", [(gpuc.int32, (gpuc.boolean, gpuc.float64)),
                                         (gpuc.float32, gpuc.int64, gpuc.boolean),
                                         (gpuc.boolean, gpuc.uint32, (gpuc.float32, (gpuc.int64,)))])
def test_cuda_tuple_parameters_have_the_ptx_layout(value_types):
    # The driver copies each kernel parameter's bytes as the PTX declares them: size and alignment
    # of the ctypes structure must be those of the .param NVPTX emits for the struct.
    kernel = _kernel_for(single)
    types = (gpuc.Array[gpuc.float64, 1], value_types)
    job = CompilerJob((kernel, types), CompilerConfig(PTXTarget(), kernel=True))
    ptx = gpuc.compile(job, "asm").output
    declared = re.search(r"\.param \.align (\d+) \.b8 \S+_param_3\[(\d+)\]", ptx)
    assert declared, ptx
    spec = signature_spec([types[0], as_type(value_types)])
    param = KernelSignature(spec).params[1]
    assert (ctypes.alignment(param.ctype), ctypes.sizeof(param.ctype)) == tuple(map(int, declared.groups()))


def test_cuda_tuple_values_are_packed_in_order():
    signature = KernelSignature([("tuple", (("scalar", "int32"), ("tuple", (("scalar", "bool"),
                                                                             ("scalar", "float64")))))], launch="none")
    packed = marshal(signature, [(-3, (True, 2.5))])
    raw = bytes(packed.values[0])
    assert raw == (-3).to_bytes(4, "little", signed=True) + bytes(4) + b"\1" + bytes(7) + bytes(ctypes.c_double(2.5))
    with pytest.raises(OverflowError, match=r"argument 0 .*\[0\]: 2147483648 does not fit in int32"):
        marshal(signature, [(2**31, (True, 2.5))])
    with pytest.raises(TypeError, match=r"\[1\] must be a tuple of 2"):
        marshal(signature, [(1, 2.5)])
