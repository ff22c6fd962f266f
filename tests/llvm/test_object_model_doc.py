"""docs/object-model.md: its rewrite example, run as written on IR it must and must not change."""

import ctypes
import re
from pathlib import Path

import gpuc.llvm as llvm

from support.llvm_testing import Jitted, filecheck

DOC = Path(__file__).resolve().parents[2] / "docs" / "object-model.md"

IR = """
define double @f(double %a, double %b, double %c, float %x, float %y) {
entry:
  %m = fmul contract double %a, %b
  %s = fadd contract nnan double %m, %c
  %n = fmul double %a, %c
  %t = fadd contract double %n, %s
  %u = fmul contract float %x, %y
  %v = fadd contract float %u, %x
  %w = fpext float %v to double
  %r = fadd double %t, %w
  ret double %r
}
"""


def _example() -> dict:
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    namespace: dict = {}
    exec(compile(code, str(DOC), "exec"), namespace)  # noqa: S102 - the documentation's own example
    return namespace


def test_the_documented_rewrite_fuses_only_contractable_pairs():
    fuse = _example()["fuse_multiply_add"]
    m = llvm.Module.parse(IR)
    assert fuse(m, m.functions["f"]) == 2  # %n has no contract flag: %t stays
    m.verify()
    filecheck(str(m), """
; CHECK-LABEL: define double @f(
; CHECK-NEXT: entry:
; CHECK-NEXT: [[S:%.*]] = call contract double @llvm.fmuladd.f64(double %a, double %b, double %c)
; CHECK-NEXT: %n = fmul double %a, %c
; CHECK-NEXT: %t = fadd contract double %n, [[S]]
; CHECK-NEXT: [[V:%.*]] = call contract float @llvm.fmuladd.f32(float %x, float %y, float %x)
; CHECK-NEXT: %w = fpext float [[V]] to double
""")
    jitted = Jitted(m)
    try:
        f = jitted.get("f", ctypes.c_double, *[ctypes.c_double] * 3, ctypes.c_float, ctypes.c_float)
        assert f(2.0, 3.0, 4.0, 1.5, 2.0) == 2.0 * 4.0 + (2.0 * 3.0 + 4.0) + (1.5 * 2.0 + 1.5)
    finally:
        jitted.close()
