"""Derivatives of calls of vector variants in the x86 vector function ABI (libmvec's `_ZGVbN2v_sin`),
which the CPU's vectorized loops call (docs/targets.md, "Vector math on the CPU"): the rules are the
scalar functions', their derivative code calls the vector intrinsics."""

from __future__ import annotations

import math

import pytest
from tangent_helpers import tangent

import gpuc
import gpuc.llvm as llvm
from gpuc.plugins.autodiff import mathrules
from gpuc.targets import vector_math

needs_libmvec = pytest.mark.skipif(not gpuc.NativeTarget().vector_variants,
                                   reason="the host has no libmvec (x86-64 glibc >= 2.35)")


def test_classified_by_their_libm_name():
    with llvm.Context() as ctx:
        module = llvm.Module("m", ctx)
        for name, want in (("_ZGVbN2v_sin", "sin"), ("_ZGVeN16v_expf", "exp"), ("_ZGVdN4vv_pow", "pow"),
                           ("_ZGVdN8vv_atan2f", "atan2"), ("_ZGVeN8v_log1p", "log1p")):
            vty = llvm.VectorType.get(ctx.double, 2)
            fn = module.add_function(name, llvm.FunctionType.get(vty, [vty]))
            assert mathrules.classify(fn) == (mathrules.INTRINSIC, want)
        vty = llvm.VectorType.get(ctx.double, 2)
        masked = module.add_function("_ZGVbM2v_sin", llvm.FunctionType.get(vty, [vty, vty]))
        assert mathrules.classify(masked) is None  # a masked variant takes a mask: no rule here
        module.close()


# f(x) = sin(x) * exp(x) through libmvec's SSE2 variants (lane 0 of a splat): f' = (cos(x) + sin(x)) exp(x)
IR = """
declare <2 x double> @_ZGVbN2v_sin(<2 x double>)
declare <2 x double> @_ZGVbN2v_exp(<2 x double>)
define double @f(double %x) {
  %a = insertelement <2 x double> poison, double %x, i32 0
  %v = insertelement <2 x double> %a, double %x, i32 1
  %s = call <2 x double> @_ZGVbN2v_sin(<2 x double> %v)
  %e = call <2 x double> @_ZGVbN2v_exp(<2 x double> %v)
  %p = fmul <2 x double> %s, %e
  %r = extractelement <2 x double> %p, i32 0
  ret double %r
}
"""


@needs_libmvec
def test_tangent_of_vector_variant_calls():
    vector_math.host_libmvec()
    jit, call = tangent(IR, "f", [True])
    try:
        for x in (-2.0, -0.3, 0.0, 0.7, 3.0):
            value, dvalue = call(x, 1.0)
            assert math.isclose(value, math.sin(x) * math.exp(x), rel_tol=1e-14, abs_tol=1e-15)
            assert math.isclose(dvalue, (math.cos(x) + math.sin(x)) * math.exp(x), rel_tol=1e-14, abs_tol=1e-15)
    finally:
        jit.close()
