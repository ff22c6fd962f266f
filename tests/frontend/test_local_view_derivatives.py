"""Derivatives of funcs that copy into views of their `gpuc.local` arrays (docs/autodiff.md): the
copy's run-time overlap check compares the local array's address with the source's, which forward
mode accepts because the address is only compared, and the copy's stack buffer and heap temporary
get shadows. `gpuc.derivative` and `gpuc.grad` agree with central finite differences of a NumPy
reference and with derivatives worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

import gpuc

DATA = np.array([1.5, -2.0, 0.75, 3.0])
# The tests that launch kernels run natively and through OpenCL.
ON_DEVICES = pytest.mark.devices("cpu", "opencl")


@gpuc.func
def from_array(s, x):
    t = gpuc.local.array(4, gpuc.float64)
    for k in range(4):
        t[k] = s * (k + 1)
    t[1:] = x[:3]                  # a constant array into the local one: compared, never overlapping
    return t[0] * t[1] + t[2] * s * s + t[3]


def from_array_reference(s):
    t = np.array([s * (k + 1) for k in range(4)])
    t[1:] = DATA[:3]
    return t[0] * t[1] + t[2] * s * s + t[3]


@gpuc.func
def reversed_in_place(s, x):
    t = gpuc.local.array(4, gpuc.float64)
    for k in range(4):
        t[k] = s * (k + 1) + x[k]
    t[:] = t[::-1]                 # overlapping: through the stack buffer
    return t[0] * t[1] + t[3] * s


def reversed_in_place_reference(s):
    t = np.array([s * (k + 1) + DATA[k] for k in range(4)])
    t[:] = t[::-1].copy()
    return t[0] * t[1] + t[3] * s


@gpuc.func
def shifted(s, x):
    t = gpuc.local.array(6, gpuc.float64)
    for k in range(6):
        t[k] = s * s * k + x[k % 4]
    t[1:] = t[:-1]                 # a shift: copied backwards, in place
    t[:3] = t[::2]                 # different strides: one-sided order or the stack buffer
    return t[0] * t[5] + t[1] * t[2] * s


def shifted_reference(s):
    t = np.array([s * s * k + DATA[k % 4] for k in range(6)])
    t[1:] = t[:-1].copy()
    t[:3] = t[::2].copy()
    return t[0] * t[5] + t[1] * t[2] * s


@gpuc.func
def between_locals(s, x):
    t = gpuc.local.array(4, gpuc.float64)
    u = gpuc.local.array(4, gpuc.float64)
    for k in range(4):
        t[k] = s * (k + 1) + x[k]
        u[k] = s
    u[:] = t[::-1]                 # two local arrays: the check cannot tell them apart when compiling
    u[1:] = u[:-1]
    return u[0] * u[1] + u[3] * t[2] * s


def between_locals_reference(s):
    t = np.array([s * (k + 1) + DATA[k] for k in range(4)])
    u = t[::-1].copy()
    u[1:] = u[:-1].copy()
    return u[0] * u[1] + u[3] * t[2] * s


@gpuc.func
def through_the_heap(s, x):
    t = gpuc.local.array(40, gpuc.float64)
    for k in range(40):
        t[k] = s * (k + 1) + x[k % 4] * k
    t[:] = t[::-1]                 # 320 bytes, overlapping: a heap temporary
    t[:5] = t[3:8][::-1]           # the stack buffer
    return t[0] * t[1] + t[39] * t[2] + t[10] * s


def through_the_heap_reference(s):
    t = np.array([s * (k + 1) + DATA[k % 4] * k for k in range(40)])
    t[:] = t[::-1].copy()
    t[:5] = t[3:8][::-1].copy()
    return t[0] * t[1] + t[39] * t[2] + t[10] * s


CASES = {"from_array": (from_array, from_array_reference),
         "reversed_in_place": (reversed_in_place, reversed_in_place_reference),
         "shifted": (shifted, shifted_reference),
         "between_locals": (between_locals, between_locals_reference),
         "through_the_heap": (through_the_heap, through_the_heap_reference)}

POINTS = np.array([0.5, -1.25, 2.0])


def central_difference(f, s, eps=1e-6):
    return (f(s + eps) - f(s - eps)) / (2 * eps)


def kernels(f):
    @gpuc.kernel
    def forward(xs, data, out):
        i = gpuc.index()
        out[i] = gpuc.derivative(f, xs[i], data)

    @gpuc.kernel
    def reverse(xs, data, out):
        i = gpuc.index()
        out[i] = gpuc.grad(f, xs[i], data)[0]

    @gpuc.kernel
    def values(xs, data, out):
        i = gpuc.index()
        out[i] = f(xs[i], data)

    return forward, reverse, values


@ON_DEVICES
@pytest.mark.parametrize("name", list(CASES))
def test_forward_and_reverse_derivatives_of_local_view_copies(name, gpuc_device):
    if name == "through_the_heap" and gpuc_device == "opencl":
        pytest.skip("not on opencl: its overlapping copy of 320 bytes needs a heap temporary, and SPIR-V has no "
                    "allocator (the copy writes nothing there, docs/frontend.md, Views)")
    f, reference = CASES[name]
    forward, reverse, values = kernels(f)
    n = len(POINTS)
    got_value, got_forward, got_reverse = np.zeros(n), np.zeros(n), np.zeros(n)
    values[n](POINTS, DATA, got_value)
    forward[n](POINTS, DATA, got_forward)
    reverse[n](POINTS, DATA, got_reverse)
    np.testing.assert_allclose(got_value, [reference(s) for s in POINTS], rtol=1e-14)
    want = [central_difference(reference, s) for s in POINTS]
    np.testing.assert_allclose(got_forward, want, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(got_reverse, want, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(got_forward, got_reverse, rtol=1e-13)


@ON_DEVICES
@pytest.mark.not_on("opencl", "derivatives called from Python run on the CPU runtime")
def test_derivative_from_python_matches_the_hand_derived_one():
    # reversed_in_place with x = DATA: t = [4s + 3, 3s + 0.75, 2s - 2, s + 1.5] after the copy, so
    # f = (4s + 3)(3s + 0.75) + (s + 1.5)s and f' = 24s + 3 + 9 + 2s + 1.5 = 26s + 13.5.
    for s in POINTS:
        got = gpuc.derivative(reversed_in_place, float(s), DATA)
        assert got == pytest.approx(26 * s + 13.5, rel=1e-14)


@gpuc.func
def reversed_twice(s):
    t = gpuc.local.array(4, gpuc.float64)
    for k in range(4):
        t[k] = s * (k + 1)
    t[:] = t[::-1]
    return t[0] * t[0] * t[3]


@gpuc.func
def second_derivative(s):
    return gpuc.derivative(reversed_twice, s)


@ON_DEVICES
@pytest.mark.not_on("opencl", "derivatives called from Python run on the CPU runtime")
def test_second_derivative_through_local_view_copies():
    # t[0] = 4s, t[3] = s: f = 16 s**3, f'' = 96 s
    for s in POINTS:
        assert gpuc.derivative(second_derivative, float(s)) == pytest.approx(96 * s, rel=1e-13)
