"""Values LLVM's SPIR-V backend translated wrong or could not translate, which SPIRVTarget.finish_module
rewrites first (gpuc/targets/spirv.py): phis of tuples, constant tuples holding tuples, bools converted to
floats by sitofp, and bits of a ballot read through a vector of bools."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gpuc

F32 = gpuc.Array[gpuc.float32, 1, "C"]


@gpuc.func
def first_positive(p):
    for v in p:
        if v > 0:
            return (v, True)
    return (gpuc.float32(0), False)


@gpuc.kernel
def found_values(out, a):
    v, found = first_positive(a)
    out[gpuc.index()] = v if found else -1.0


@gpuc.func
def minus_one_if(p):
    if p:
        v = -1
    else:
        k = gpuc.uint64(0)
    return np.int32(v if gpuc.index() == False else k)  # noqa: E712 - the bool compare is the case


@gpuc.kernel
def subtract(out, p):
    out[1] -= minus_one_if(p)


# The tuple a func returns on two paths is a phi of a struct after inlining: the backend crashed on one
# (SIGSEGV) or gave it the type of its first element (spirv-val: "OpPhi's result type does not match").
@pytest.mark.devices("cpu", "opencl")
def test_tuple_returned_on_two_paths():
    out = np.zeros(3, np.float32)
    found_values[3](out, np.array([-1.0, -2.0, 3.5, 4.0], np.float32))
    assert out.tolist() == [3.5] * 3
    found_values[3](out, np.array([-1.0, -2.0], np.float32))
    assert out.tolist() == [-1.0] * 3


def test_no_phi_of_a_struct_reaches_the_backend(spirv_val):
    job = gpuc.CompilerJob((found_values, (F32, F32)), gpuc.CompilerConfig(gpuc.SPIRVTarget(), kernel=True))
    assert "phi {" not in gpuc.compile(job, "llvm").output
    spirv_val(gpuc.compile(job, "obj").output)


# `sitofp i1 true` is -1.0; the backend converted the bool through the integer 1 (out[1] became -1, not 1).
@pytest.mark.devices("cpu", "opencl")
def test_bool_converted_to_a_float_by_sitofp():
    out = np.zeros(4, np.float32)
    subtract[1](out, True)
    assert out[1] == 1.0


@gpuc.kernel
def from_lane_zero(out, v):
    i = gpuc.index()
    out[i] = gpuc.shfl_idx(v[i], 0)


# Whether lane 0 is there to read, bit 0 of the ballot of true, became `bitcast <4 x i32> to <128 x i1>`
# under instcombine, which the backend could not legalize (LLVM ERROR, an internal compiler error).
@pytest.mark.devices("cpu", "opencl")
def test_shuffle_from_a_constant_lane():
    v = np.arange(12, dtype=np.int64) * 10
    out = np.zeros(12, np.int64)
    from_lane_zero.launch(12, out, v, block=4)  # a block of 4 lies in one warp on every device
    assert out.tolist() == [0] * 4 + [40] * 4 + [80] * 4


@gpuc.func
def tuple_valued(p0, p1, p2):
    t0 = math.sin(p1)
    t1 = t0 + p0 * 3.0
    return (t0, p1 * (p2 * p0 - p0 / (t1 * t1 + 1.0)) / (math.tanh(t0) * math.tanh(t0) + 1.0))


@gpuc.func
def pulled_back(p0, p1, p2):
    v, c = gpuc.vjp(tuple_valued, (p2 + p0, p1 * p1, p0), (p2, gpuc.float32(0.25)))
    return (math.sin(c[1]) + math.sin(c[2])) * p0, c[1] + math.cos(p1 + p0)


@gpuc.func
def pulled_back_by_constants(p0, p1, p2):
    v, c = gpuc.vjp(tuple_valued, (p0, p1, p2), (gpuc.float32(2.0), gpuc.float32(1.0)))
    return c[0] * v[0]


@gpuc.kernel
def derivatives_of_vjps(out, xr):
    i = gpuc.index()
    x = xr[i]
    out[i, 0] = gpuc.derivative(pulled_back, x[0], x[1], x[2])[0]
    out[i, 1] = gpuc.derivative(pulled_back_by_constants, x[0], x[1], x[2])


# The derivative of a vjp passes the cotangent's tangent beside it, `{ {float, float} zeroinitializer,
# {float, float} {2.0, 1.0} }`, to the gradient both derivatives call: the backend could not translate
# that constant (LLVM ERROR, an internal compiler error).
@pytest.mark.devices("cpu", "opencl")
def test_constant_tuple_of_tuples():
    xr = np.array([[0.3, -1.25, 2.0], [1.5, 0.5, -0.75]], np.float32)
    out = np.zeros((2, 2), np.float32)
    derivatives_of_vjps[2](out, xr)
    want = [[gpuc.derivative(pulled_back, *map(np.float32, x))[0], gpuc.derivative(pulled_back_by_constants,
                                                                                 *map(np.float32, x))] for x in xr]
    np.testing.assert_allclose(out, want, rtol=1e-5)
