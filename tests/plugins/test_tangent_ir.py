"""The tangent transformation on hand-written IR: memory, aggregates, casts, control flow, what is
built once, how small the optimized tangent is, and the errors for what it cannot differentiate."""

from __future__ import annotations

import ctypes
import math

import pytest
from tangent_helpers import Jitted, close, tangent

import gpuc
import gpuc.llvm as llvm
from gpuc.plugins.autodiff import tangent_function

DECLS = "declare double @llvm.sin.f64(double)\ndeclare double @llvm.exp.f64(double)\n"


def _run(ir: str, name: str, active, *args, optimize: bool = True):
    jit, call = tangent(ir + DECLS, name, active, optimize=optimize)
    try:
        return call(*args)
    finally:
        jit.close()


@pytest.mark.parametrize("optimize", [False, True])
def test_stack_slots_carry_tangents(optimize):
    # An accumulator in an alloca (what unoptimized code looks like): its shadow slot holds the tangent.
    ir = """
define double @f(double %x, i64 %n) {
entry:
  %acc = alloca double
  %i = alloca i64
  store double 1.0, ptr %acc
  store i64 0, ptr %i
  br label %loop
loop:
  %iv = load i64, ptr %i
  %a = load double, ptr %acc
  %m = fmul double %a, %x
  store double %m, ptr %acc
  %iv1 = add i64 %iv, 1
  store i64 %iv1, ptr %i
  %c = icmp slt i64 %iv1, %n
  br i1 %c, label %loop, label %exit
exit:
  %r = load double, ptr %acc
  ret double %r
}
"""
    assert _run(ir, "f", [True, False], 1.5, 4, 1.0, optimize=optimize) == pytest.approx((1.5 ** 4, 4 * 1.5 ** 3),
                                                                                       rel=1e-15)


def test_struct_slot_and_gep():
    ir = """
define double @f(double %x) {
  %s = alloca { double, double }
  %p1 = getelementptr inbounds { double, double }, ptr %s, i32 0, i32 1
  %e = call double @llvm.exp.f64(double %x)
  store double %x, ptr %s
  store double %e, ptr %p1
  %a = load double, ptr %s
  %b = load double, ptr %p1
  %r = fmul double %a, %b
  ret double %r
}
"""
    value, d = _run(ir, "f", [True], 0.7, 1.0)
    assert close(d, math.exp(0.7) * 1.7, 1e-15)


def test_loads_from_array_arguments_are_constants():
    # p(x) = sum a[i] x^i by Horner's rule over an array argument; the coefficients have no tangent.
    ir = """
define double @p(double %x, ptr %a, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [ %n, %entry ], [ %i1, %loop ]
  %acc = phi double [ 0.0, %entry ], [ %acc1, %loop ]
  %i1 = sub i64 %i, 1
  %q = getelementptr double, ptr %a, i64 %i1
  %c = load double, ptr %q
  %m = fmul double %acc, %x
  %acc1 = fadd double %m, %c
  %done = icmp eq i64 %i1, 0
  br i1 %done, label %exit, label %loop
exit:
  ret double %acc1
}
"""
    coefficients = (ctypes.c_double * 4)(1.0, -2.0, 0.5, 3.0)
    value, d = _run(ir, "p", [True, False, False], 1.3, ctypes.addressof(coefficients), 4, 1.0)
    assert close(d, -2.0 + 2 * 0.5 * 1.3 + 3 * 3.0 * 1.3 ** 2, 1e-15)


def test_struct_parameters_results_and_aggregates():
    # f(p) = {x*y, x+y} for p = {x, y}: tangent along (dx, dy); the nesting building block.
    ir = """
define { double, double } @f({ double, double } %p) {
  %x = extractvalue { double, double } %p, 0
  %y = extractvalue { double, double } %p, 1
  %m = fmul double %x, %y
  %s = fadd double %x, %y
  %r0 = insertvalue { double, double } poison, double %m, 0
  %r1 = insertvalue { double, double } %r0, double %s, 1
  ret { double, double } %r1
}
define double @g(double %x, double %y, double %dx, double %dy) {
  %p0 = insertvalue { double, double } poison, double %x, 0
  %p = insertvalue { double, double } %p0, double %y, 1
  %d0 = insertvalue { double, double } poison, double %dx, 0
  %d = insertvalue { double, double } %d0, double %dy, 1
  %t = call { { double, double }, { double, double } } @f.tangent.1({ double, double } %p, { double, double } %d)
  %dm = extractvalue { { double, double }, { double, double } } %t, 1, 0
  %ds = extractvalue { { double, double }, { double, double } } %t, 1, 1
  %r = fmul double %dm, %ds
  ret double %r
}
declare { { double, double }, { double, double } } @f.tangent.1({ double, double }, { double, double })
"""
    module = llvm.Module.parse(ir)
    t = tangent_function(module, module.functions["f"], [True])
    assert t == module.functions["f.tangent.1"] and not t.is_declaration  # the declaration got the body
    module.verify()
    jit = Jitted(module, "g")
    try:
        # d(xy) = y dx + x dy = 3*0.5 + 2*(-1) = -0.5;  d(x+y) = 0.5 - 1 = -0.5
        assert jit.function("g")(2.0, 3.0, 0.5, -1.0) == pytest.approx(0.25)
    finally:
        jit.close()


def test_casts_select_switch_freeze_and_unreachable_blocks():
    ir = """
define double @f(double %x, i32 %k) {
entry:
  %h = fptrunc double %x to float
  %h2 = fmul float %h, %h
  %w = fpext float %h2 to double
  %fk = sitofp i32 %k to double
  %z = freeze double %x
  %neg = fcmp olt double %z, 0.0
  %s = select i1 %neg, double %fk, double %z
  switch i32 %k, label %other [ i32 1, label %one ]
one:
  %a = fmul double %w, %s
  br label %join
other:
  %b = fadd double %w, %s
  br label %join
dead:
  br label %join
join:
  %r = phi double [ %a, %one ], [ %b, %other ], [ 0.0, %dead ]
  ret double %r
}
"""
    x = 0.75  # exact in float32
    assert _run(ir, "f", [True, False], x, 1, 1.0)[1] == pytest.approx(3 * x * x, rel=1e-7)
    assert _run(ir, "f", [True, False], x, 2, 1.0)[1] == pytest.approx(2 * x + 1, rel=1e-7)
    assert _run(ir, "f", [True, False], -x, 2, 1.0)[1] == pytest.approx(-2 * x, rel=1e-7)


def test_recursion_and_callees_built_once():
    ir = """
define internal double @sq(double %x) {
  %m = fmul double %x, %x
  ret double %m
}
define double @f(double %x, i32 %n) {
entry:
  %done = icmp sle i32 %n, 0
  br i1 %done, label %base, label %rec
base:
  ret double 1.0
rec:
  %n1 = sub i32 %n, 1
  %r = call double @f(double %x, i32 %n1)
  %a = call double @sq(double %x)
  %b = call double @sq(double %r)
  %m = fmul double %a, %b
  %s = fdiv double %m, %a
  ret double %s
}
"""
    module = llvm.Module.parse(ir + DECLS)
    t = tangent_function(module, module.functions["f"], [True, False])
    again = tangent_function(module, module.functions["f"], [True, False])
    assert again == t
    names = sorted(f.name for f in module.functions if ".tangent." in f.name)
    assert names == ["f.tangent.10", "sq.tangent.1"]
    module.close()
    # f(x, n) = f(x, n-1)^2 = x^0 ... = 1: a constant, derivative 0; with n = 0, also 1.
    assert _run(ir, "f", [True, False], 1.3, 3, 1.0) == (1.0, 0.0)


def test_tangent_of_a_square_optimizes_to_a_few_instructions():
    ir = "define double @f(double %x) {\n  %m = fmul double %x, %x\n  ret double %m\n}\n"
    module = llvm.Module.parse(ir)
    t = tangent_function(module, module.functions["f"], [0])
    t.linkage = "external"
    module.verify()
    llvm.run_passes(module, "default<O2>")
    body = [i.opcode_name for i in module.functions["f.tangent.1"].instructions()]
    # x*x, x*dx, twice that, the pair, ret
    assert body == ["fmul", "fmul", "fadd", "insertvalue", "insertvalue", "ret"], body
    module.close()


@pytest.mark.parametrize("body, what", [
    ("  store double %x, ptr %p\n  ret double %x", "store double %x, ptr %p"),
    ("  %o = atomicrmw fadd ptr %p, double %x monotonic\n  ret double %o", "atomicrmw fadd"),
    ("  %o = call double @ext(double %x)\n  ret double %o", "call double @ext"),
    ("  %o = call double asm \"mov $0, $1\", \"=r,r\"(double %x)\n  ret double %o", "inline assembly"),
    ("  %o = call double %p(double %x)\n  ret double %o", "an indirect call"),
    ("  %o = call double (double, ...) @va(double %x)\n  ret double %o", "@va"),
    ("  %i = bitcast double %x to i64\n  %j = and i64 %i, 9223372036854775807\n"
     "  %o = bitcast i64 %j to double\n  ret double %o", "bitcast"),
    ("  %o = call double @llvm.nvvm.fabs.f64(double %x)\n  ret double %o", "llvm.nvvm.fabs"),
    ("  %o = call double @tgamma(double %x)\n  ret double %o", "tgamma"),
    ("  %v = insertelement <2 x double> poison, double %x, i64 0\n  call void @llvm.masked.store.v2f64.p0("
     "<2 x double> %v, ptr %p, i32 8, <2 x i1> <i1 true, i1 false>)\n  ret double %x", "writes floats"),
])
def test_what_cannot_be_differentiated_is_a_located_error(body, what):
    ir = (f"define double @bad(double %x, ptr %p) {{\n{body}\n}}\n"
          "declare double @ext(double)\ndeclare double @va(double, ...)\n"
          "declare double @llvm.nvvm.fabs.f64(double)\ndeclare double @tgamma(double)\n"
          "declare void @llvm.masked.store.v2f64.p0(<2 x double>, ptr, i32, <2 x i1>)\n")
    module = llvm.Module.parse(ir)
    with pytest.raises(gpuc.CompilationError) as caught:
        tangent_function(module, module.functions["bad"], [True, False])
    message = str(caught.value)
    assert "cannot differentiate bad" in message and what in message, message
    assert "bad.tangent.10" not in module.functions  # no half-built body is left
    module.verify()
    module.close()


def test_errors_carry_the_source_line_from_debug_info():
    ir = """
define double @bad(double %x, ptr %p) !dbg !4 {
  store double %x, ptr %p, !dbg !7
  ret double %x
}
!llvm.dbg.cu = !{!0}
!llvm.module.flags = !{!3}
!0 = distinct !DICompileUnit(language: DW_LANG_Python, file: !1, emissionKind: LineTablesOnly)
!1 = !DIFile(filename: "kernels.py", directory: "/src")
!3 = !{i32 2, !"Debug Info Version", i32 3}
!4 = distinct !DISubprogram(name: "bad", scope: !1, file: !1, line: 10, unit: !0)
!7 = !DILocation(line: 12, column: 5, scope: !4)
"""
    module = llvm.Module.parse(ir)
    with pytest.raises(gpuc.CompilationError) as caught:
        tangent_function(module, module.functions["bad"], [True, False])
    assert str(caught.value.location) == "/src/kernels.py:12:5"
    module.close()


def test_activity_is_checked():
    module = llvm.Module.parse("define double @f(double %x, i64 %n) {\n  ret double %x\n}\n")
    with pytest.raises(ValueError, match="carries no floats"):
        tangent_function(module, module.functions["f"], [False, True])
    with pytest.raises(ValueError, match="activity"):
        tangent_function(module, module.functions["f"], [True])
    module.close()


def test_vector_lanes():
    # Vectorized code (SLP on GPUs): lane operations, shuffles and vector intrinsics carry tangents.
    ir = """
define double @f(double %x) {
  %v0 = insertelement <2 x double> poison, double %x, i64 0
  %v = insertelement <2 x double> %v0, double 2.0, i64 1
  %w = shufflevector <2 x double> %v, <2 x double> poison, <2 x i32> <i32 1, i32 0>
  %p = fmul <2 x double> %v, %w
  %s = call <2 x double> @llvm.sin.v2f64(<2 x double> %p)
  %t = call <2 x double> @llvm.sqrt.v2f64(<2 x double> %p)
  %q = fmul <2 x double> %s, <double 3.0, double 3.0>
  %a = extractelement <2 x double> %q, i64 0
  %b = extractelement <2 x double> %q, i64 1
  %c = extractelement <2 x double> %t, i64 1
  %ab = fadd double %a, %b
  %r = fadd double %ab, %c
  ret double %r
}
declare <2 x double> @llvm.sin.v2f64(<2 x double>)
declare <2 x double> @llvm.sqrt.v2f64(<2 x double>)
"""
    for optimize in (False, True):
        value, d = _run(ir, "f", [True], 0.4, 1.0, optimize=optimize)
        assert close(value, 6 * math.sin(0.8) + math.sqrt(0.8), 1e-15)
        assert close(d, 12 * math.cos(0.8) + 1 / math.sqrt(0.8), 1e-14), d


# llvm.<name>.f64 called as `call(x)` or `call(x, c)` (or with c first), and the derivative in x.
INTRINSICS = [
    ("exp10", "x", lambda x: math.log(10) * 10 ** x),
    ("powi", "x, i32 3", lambda x: 3 * x * x),
    ("fma", "x, c, c", lambda x: 1.75),
    ("fma", "c, x, x", lambda x: 1.75 + 1),
    ("fmuladd", "x, x, c", lambda x: 2 * x),
    ("minnum", "x, c", lambda x: 1.0 if x < 1.75 else 0.0),
    ("maxnum", "x, c", lambda x: 1.0 if x > 1.75 else 0.0),
    ("minimum", "c, x", lambda x: 1.0 if x < 1.75 else 0.0),
    ("maximum", "c, x", lambda x: 1.0 if x > 1.75 else 0.0),
    ("copysign", "c, x", lambda x: 0.0),
    ("copysign", "x, c", lambda x: math.copysign(1.0, x)),
    ("rint", "x", lambda x: 0.0),
    ("nearbyint", "x", lambda x: 0.0),
    ("round", "x", lambda x: 0.0),
    ("roundeven", "x", lambda x: 0.0),
    ("sinh", "x", math.cosh),
    ("atan2", "x, c", lambda x: 1.75 / (x * x + 1.75 ** 2)),
    ("pow", "c, x", lambda x: 1.75 ** x * math.log(1.75)),
]


@pytest.mark.parametrize("name, args, derivative", INTRINSICS, ids=[f"{n}({a})" for n, a, _ in INTRINSICS])
@pytest.mark.parametrize("x", [0.6, -1.3, 2.2])
def test_intrinsics(name, args, derivative, x):
    operands = ", ".join(a if a.startswith("i32") else f"double %{a}" for a in args.split(", "))
    types = ", ".join("i32" if a.startswith("i32") else "double" for a in args.split(", "))
    suffix = ".i32" if name == "powi" else ""
    ir = (f"define double @f(double %x) {{\n  %c = fadd double 1.75, 0.0\n"
          f"  %r = call double @llvm.{name}.f64{suffix}({operands})\n  ret double %r\n}}\n"
          f"declare double @llvm.{name}.f64{suffix}({types})\n")
    jit, call = tangent(ir, "f", [True])
    try:
        assert close(call(x, 1.0)[1], derivative(x), 1e-12), name
    finally:
        jit.close()


def test_escaping_stack_pointers_are_errors():
    # A slot whose address leaves the function could be written where its shadow is not.
    for body, what in [("  %i = ptrtoint ptr %s to i64\n  store i64 %i, ptr %p\n  ret double %x", "ptrtoint"),
                       ("  store ptr %s, ptr %p\n  ret double %x", "store ptr %s"),
                       ("  %v = call double @g(ptr %s)\n  ret double %v", "call double @g")]:
        ir = (f"define double @g(ptr %q) {{\n  %v = load double, ptr %q\n  ret double %v\n}}\n"
              f"define double @f(double %x, ptr %p) {{\n  %s = alloca double\n  store double %x, ptr %s\n{body}\n}}\n")
        module = llvm.Module.parse(ir)
        with pytest.raises(gpuc.CompilationError, match="stack slot") as caught:
            tangent_function(module, module.functions["f"], [True, False])
        assert what in str(caught.value)
        module.verify()
        module.close()


def test_memcpy_and_memset_on_stack_slots_move_tangents():
    # b = a (memcpy between slots) carries a's tangent; c = data (copied from an argument) has none.
    ir = """
define double @f(double %x, ptr %data) {
  %a = alloca [2 x double]
  %b = alloca [2 x double]
  %c = alloca [2 x double]
  call void @llvm.memset.p0.i64(ptr %a, i8 0, i64 16, i1 false)
  %a1 = getelementptr double, ptr %a, i64 1
  %sq = fmul double %x, %x
  store double %sq, ptr %a1
  call void @llvm.memcpy.p0.p0.i64(ptr %b, ptr %a, i64 16, i1 false)
  call void @llvm.memcpy.p0.p0.i64(ptr %c, ptr %data, i64 16, i1 false)
  %b1 = getelementptr double, ptr %b, i64 1
  %c1 = getelementptr double, ptr %c, i64 1
  %u = load double, ptr %b1
  %v = load double, ptr %c1
  %w = load double, ptr %b
  %uv = fmul double %u, %v
  %r = fadd double %uv, %w
  ret double %r
}
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
"""
    data = (ctypes.c_double * 2)(5.0, 3.0)
    for optimize in (False, True):
        value, d = _run(ir, "f", [True, False], 1.5, ctypes.addressof(data), 1.0, optimize=optimize)
        assert (value, d) == (1.5 ** 2 * 3.0, 2 * 1.5 * 3.0)
