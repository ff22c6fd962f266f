"""Derivatives of `llvm.vector.reduce.fadd`, the in-order sum of a vector's lanes that LLVM's loop vectorizer
makes of a loop adding into a float (gpuc.llvm.passes.OPTIONS): code optimized before it is differentiated
(an adjoint's primal, a derivative inside a kernel) holds it. Hand-written IR, run in the JIT."""

from __future__ import annotations

import ctypes

import pytest
from tangent_helpers import tangent
from test_reverse_ir import Triple, _call, _gradient

SUM = """
define double @f(double %x, double %y) {
entry:
  %v0 = insertelement <4 x double> poison, double %x, i32 0
  %v1 = insertelement <4 x double> %v0, double %y, i32 1
  %xy = fmul double %x, %y
  %v2 = insertelement <4 x double> %v1, double %xy, i32 2
  %v3 = insertelement <4 x double> %v2, double 2.0, i32 3
  %s = call double @llvm.vector.reduce.fadd.v4f64(double %x, <4 x double> %v3)
  %t = call reassoc double @llvm.vector.reduce.fadd.v4f64(double %s, <4 x double> %v3)
  ret double %t
}
declare double @llvm.vector.reduce.fadd.v4f64(double, <4 x double>)
"""


def _f(x, y):
    return 3 * x + 2 * y + 2 * x * y + 4


@pytest.mark.parametrize("x, y", [(1.5, 0.25), (-2.0, 3.0)])
def test_gradient_of_a_vector_sum(x, y):
    jit, address, text = _gradient(SUM, "f", "11")
    with jit:
        got = _call(address, Triple, [ctypes.c_double, ctypes.c_double, ctypes.c_double], x, y, 1.0)
    assert (got.value, got.dx, got.dy) == pytest.approx((_f(x, y), 3 + 2 * y, 2 + 2 * x), rel=1e-15)


@pytest.mark.parametrize("x, y", [(1.5, 0.25), (-2.0, 3.0)])
def test_tangent_of_a_vector_sum(x, y):
    for active, want in (([True, False], 3 + 2 * y), ([False, True], 2 + 2 * x)):
        jit, f = tangent(SUM, "f", active)
        try:
            assert f(x, y, 1.0) == pytest.approx((_f(x, y), want), rel=1e-15)
        finally:
            jit.close()


MASKED = """
define double @g(double %x, ptr %p) {
entry:
  %px = insertelement <4 x double> poison, double %x, i32 0
  %sx = shufflevector <4 x double> %px, <4 x double> poison, <4 x i32> zeroinitializer
  %v = call <4 x double> @llvm.masked.load.v4f64.p0(ptr align 8 %p, <4 x i1> <i1 1, i1 1, i1 0, i1 0>, <4 x double> %sx)
  %s = call double @llvm.vector.reduce.fadd.v4f64(double 0.0, <4 x double> %v)
  %r = fmul double %s, %x
  ret double %r
}
declare <4 x double> @llvm.masked.load.v4f64.p0(ptr, <4 x i1>, <4 x double>)
declare double @llvm.vector.reduce.fadd.v4f64(double, <4 x double>)
"""


def test_tangent_of_a_masked_load_of_constant_data():
    """A vectorized loop's last, partial vector of an input array the derivative does not vary: the lanes
    loaded have no tangent, the lanes left out are the pass-through's (x here)."""
    data = (ctypes.c_double * 4)(1.25, -3.0, 100.0, 100.0)
    x = 0.75
    jit, f = tangent(MASKED, "g", [True, False])
    try:
        value, dvalue = f(x, ctypes.addressof(data), 1.0)
    finally:
        jit.close()
    assert (value, dvalue) == pytest.approx((x * (1.25 - 3.0 + 2 * x), 1.25 - 3.0 + 4 * x), rel=1e-15)
