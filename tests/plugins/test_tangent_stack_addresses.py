"""The tangent transformation and addresses of stack slots (docs/autodiff.md, Limits): an address
that is only compared (a copy's overlap check) is accepted and the tangent is right; one that could
become a pointer again, or leaves the function, is a located error."""

from __future__ import annotations

import pytest
from tangent_helpers import close, tangent

import gpuc
import gpuc.llvm as llvm
from gpuc.plugins.autodiff import tangent_function

# f(x, p) = x*x if the slot lies below p + 8 (it does not overlap it or it does: either way a compare),
# else 3x; the slot holds x*x, its address is compared through integer arithmetic and a select.
COMPARED = """
define double @f(double %x, ptr %p) {
  %s = alloca [2 x double]
  %sq = fmul double %x, %x
  store double %sq, ptr %s
  %e = getelementptr double, ptr %s, i64 1
  %i = ptrtoint ptr %e to i64
  %j = ptrtoint ptr %p to i64
  %k = add i64 %i, 8
  %m = select i1 true, i64 %k, i64 %j
  %below = icmp ult i64 %m, %j
  %direct = icmp ne ptr %s, %p
  %both = or i1 %below, %direct
  %v = load double, ptr %s
  %t = fmul double %x, 3.0
  %r = select i1 %both, double %v, double %t
  ret double %r
}
"""


@pytest.mark.parametrize("optimize", [False, True])
def test_compared_stack_addresses_are_accepted(optimize):
    jit, call = tangent(COMPARED, "f", [True, False], optimize=optimize)
    try:
        for x in (0.5, -1.5, 3.0):
            value, d = call(x, 0, 1.0)  # p = null: the slot lies above it, and differs from it
            assert close(value, x * x, 1e-15) and close(d, 2 * x, 1e-15)
    finally:
        jit.close()


@pytest.mark.parametrize("use, what", [
    ("  %q = inttoptr i64 %k to ptr\n  store double %x, ptr %q", "ptrtoint"),
    ("  %q = getelementptr i8, ptr %p, i64 %k\n  store double %x, ptr %q", "ptrtoint"),
    ("  store i64 %k, ptr %p", "ptrtoint"),
    ("  call void @g(i64 %k)", "ptrtoint"),
], ids=["inttoptr", "gep", "stored", "passed"])
def test_addresses_that_may_become_pointers_are_refused(use, what):
    ir = (f"declare void @g(i64)\ndefine double @f(double %x, ptr %p) {{\n  %s = alloca double\n"
          f"  store double %x, ptr %s\n  %i = ptrtoint ptr %s to i64\n  %k = add i64 %i, 8\n{use}\n"
          f"  %v = load double, ptr %s\n  ret double %v\n}}\n")
    module = llvm.Module.parse(ir)
    try:
        with pytest.raises(gpuc.CompilationError, match="a pointer to a stack slot escapes") as caught:
            tangent_function(module, module.functions["f"], [True, False])
        assert what in str(caught.value)
        module.verify()
    finally:
        module.close()
