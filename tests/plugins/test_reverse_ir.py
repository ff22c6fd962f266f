"""gradient_function on hand-written IR: control flow the frontend rarely makes (several returns, a
switch, phis that swap in a loop, nested loops), run in the JIT against hand-derived gradients."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest
from support.llvm_testing import filecheck

import gpuc.llvm as llvm
from gpuc.plugins.autodiff.reverse import Settings, gradient_function
from gpuc.targets import NativeTarget

HOST = Settings(heap=("malloc", "free"))


def _gradient(ir: str, name: str, mask: str, settings=HOST):
    """The JIT-compiled gradient of @name, behind `void @call(ptr out, args...)` that stores the struct
    {R, adjoints...} to `out` (C returns a struct of three doubles through memory, LLVM in registers)."""
    target = NativeTarget()
    ctx = llvm.Context()
    module = llvm.Module.parse(ir, ctx)
    module.triple, module.data_layout = target.triple(), target.data_layout()
    g = gradient_function(module, module.functions[name], mask, settings)
    g.attributes.add("noinline")  # kept whole, for the IR checks
    wrapper = module.add_function("call", llvm.FunctionType.get(ctx.void, [ctx.ptr()] + list(g.function_type.params)))
    with llvm.Builder(ctx) as b:
        b.position_at_end(wrapper.append_block("entry"))
        b.store(b.call(g, list(wrapper.args)[1:]), wrapper.args[0])
        b.ret()
    symbol = wrapper.name
    module.verify()
    llvm.run_passes(module, "default<O2>")
    text = str(module)
    jit = llvm.LLJIT()
    jit.add_module(module)
    return jit, jit.lookup(symbol), text


def _call(address, restype, argtypes, *args):
    out = restype()
    ctypes.CFUNCTYPE(None, ctypes.c_void_p, *argtypes)(address)(ctypes.addressof(out), *args)
    return out


class Pair(ctypes.Structure):
    _fields_ = [("value", ctypes.c_double), ("dx", ctypes.c_double)]


class Triple(ctypes.Structure):
    _fields_ = [("value", ctypes.c_double), ("dx", ctypes.c_double), ("dy", ctypes.c_double)]


SWITCH = """
define double @f(double %x, i32 %k) {
entry:
  switch i32 %k, label %other [ i32 0, label %zero
                                i32 1, label %one
                                i32 2, label %one ]
zero:
  %a = fmul double %x, %x
  ret double %a
one:
  %b = fmul double %x, 3.0
  br label %join
other:
  %c = call double @llvm.sin.f64(double %x)
  br label %join
join:
  %p = phi double [ %b, %one ], [ %c, %other ]
  %q = fmul double %p, %x
  ret double %q
}
declare double @llvm.sin.f64(double)
"""


@pytest.mark.parametrize("k, want", [(0, lambda x: 2 * x), (1, lambda x: 6 * x), (2, lambda x: 6 * x),
                                     (7, lambda x: __import__("math").cos(x) * x + __import__("math").sin(x))])
def test_switch_with_duplicate_edges_and_two_returns(k, want):
    jit, address, _ = _gradient(SWITCH, "f", "10")
    with jit:
        got = _call(address, Pair, [ctypes.c_double, ctypes.c_int32, ctypes.c_double], 0.7, k, 1.0)
    assert got.dx == pytest.approx(want(0.7), rel=1e-14)


SWAP = """
define double @f(double %x, double %y, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %loop ]
  %a = phi double [ %x, %entry ], [ %b, %loop ]
  %b = phi double [ %y, %entry ], [ %a2, %loop ]
  %a2 = fmul double %a, 2.0
  %i1 = add i64 %i, 1
  %c = icmp slt i64 %i1, %n
  br i1 %c, label %loop, label %done
done:
  %r = fmul double %a, %b
  ret double %r
}
"""


def _swap(x, y, n):
    a, b, da, db = x, y, (1.0, 0.0), (0.0, 1.0)
    for _ in range(n - 1):
        a, b, da, db = b, 2 * a, db, (2 * da[0], 2 * da[1])
    return (da[0] * b + a * db[0], da[1] * b + a * db[1])


@pytest.mark.parametrize("n", [1, 2, 5, 6])
def test_phis_that_swap_in_a_loop(n):
    jit, address, _ = _gradient(SWAP, "f", "110")
    with jit:
        got = _call(address, Triple, [ctypes.c_double, ctypes.c_double, ctypes.c_int64, ctypes.c_double],
                    1.5, 0.25, n, 1.0)
    assert (got.dx, got.dy) == pytest.approx(_swap(1.5, 0.25, n), rel=1e-14)


NESTED = """
define double @f(double %x, i64 %n) {
entry:
  br label %outer
outer:
  %i = phi i64 [ 0, %entry ], [ %i1, %outer.end ]
  %s = phi double [ 0.0, %entry ], [ %s1, %outer.end ]
  br label %inner
inner:
  %j = phi i64 [ 0, %outer ], [ %j1, %inner ]
  %t = phi double [ %x, %outer ], [ %t1, %inner ]
  %t1 = call double @llvm.sin.f64(double %t)
  %j1 = add i64 %j, 1
  %cj = icmp slt i64 %j1, %i
  br i1 %cj, label %inner, label %outer.end
outer.end:
  %s1 = fadd double %s, %t1
  %i1 = add i64 %i, 1
  %ci = icmp slt i64 %i1, %n
  br i1 %ci, label %outer, label %done
done:
  ret double %s1
}
declare double @llvm.sin.f64(double)
"""


def test_nested_loops_keep_a_tape():
    import math
    jit, address, text = _gradient(NESTED, "f", "10")
    want = 0.0
    for i in range(8):
        t, d = 0.6, 1.0
        for _ in range(max(i, 1)):
            t, d = math.sin(t), math.cos(t) * d
        want += d
    with jit:
        got = _call(address, Pair, [ctypes.c_double, ctypes.c_int64, ctypes.c_double], 0.6, 8, 1.0)
    assert got.dx == pytest.approx(want, rel=1e-13)
    filecheck(text, """
        CHECK-LABEL: define {{.*}} @f.gradient.10(
        CHECK: call {{.*}} @gpuc.autodiff.tape.grow
        CHECK: call void @free
    """)


STRAIGHT = """
define double @f(double %x, double %y) {
  %a = fmul double %x, %y
  %b = call double @llvm.exp.f64(double %a)
  %c = fdiv double %b, %y
  ret double %c
}
declare double @llvm.exp.f64(double)
"""


def test_straight_line_code_keeps_no_tape():
    jit, address, text = _gradient(STRAIGHT, "f", "11")
    filecheck(text, """
        CHECK-LABEL: define {{.*}} @f.gradient.11(
        CHECK-NOT: = alloca
        CHECK-NOT: malloc
        CHECK: ret
    """)
    import math
    with jit:
        got = _call(address, Triple, [ctypes.c_double, ctypes.c_double, ctypes.c_double], 0.5, 2.0, 1.0)
    e = math.exp(1.0)
    assert (got.value, got.dx, got.dy) == pytest.approx((e / 2, e, (0.5 * e * 2 - e) / 4), rel=1e-14)


def test_loop_tape_without_allocator_is_refused():
    with pytest.raises(Exception, match="no memory allocator"):
        _gradient(NESTED, "f", "10", Settings(heap=None))


# A loop whose body branches (a diamond, then a block taken on some iterations only) and may leave early:
# the blocks after the early exit keep one tape record per iteration, pushed at the latch, which every path
# through them reaches (their values get there through stack slots). Records of blocks not taken in an
# iteration are pushed too, and never read. The header, which may leave the loop, needs its counter and which
# way it was entered: both follow from a counter kept in a stack slot (the loop runs once per call), so it
# keeps no record of its own (recompute.py's counted loops).
BRANCHY = """
define double @f(double %x, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %latch ]
  %s = phi double [ %x, %entry ], [ %s2, %latch ]
  %big = fcmp ogt double %s, 4.0
  br i1 %big, label %out, label %body
body:
  %odd = and i64 %i, 1
  %isodd = icmp eq i64 %odd, 1
  br i1 %isodd, label %then, label %else
then:
  %a = call double @llvm.sin.f64(double %s)
  %a2 = fmul double %a, %s
  br label %join
else:
  %b = fmul double %s, %s
  br label %join
join:
  %t = phi double [ %a2, %then ], [ %b, %else ]
  %u = fadd double %t, %s
  %small = fcmp olt double %u, 0.5
  br i1 %small, label %bump, label %latch
bump:
  %v = call double @llvm.exp.f64(double %u)
  br label %latch
latch:
  %s2 = phi double [ %v, %bump ], [ %u, %join ]
  %i1 = add i64 %i, 1
  %more = icmp slt i64 %i1, %n
  br i1 %more, label %loop, label %done
out:
  %r = fmul double %s, 2.0
  ret double %r
done:
  ret double %s2
}
declare double @llvm.sin.f64(double)
declare double @llvm.exp.f64(double)
"""


def _branchy(x, n):
    """f of BRANCHY and its derivative, in Python."""
    import math
    s, ds = x, 1.0
    for i in range(n):
        if s > 4.0:
            return 2 * s, 2 * ds
        if i % 2:
            t, dt = math.sin(s) * s, (math.cos(s) * s + math.sin(s)) * ds
        else:
            t, dt = s * s, 2 * s * ds
        u, du = t + s, dt + ds
        s, ds = (math.exp(u), math.exp(u) * du) if u < 0.5 else (u, du)
    return s, ds


@pytest.mark.parametrize("x, n", [(0.3, 1), (0.3, 2), (0.3, 7), (-0.9, 9), (-0.45, 12), (-0.2, 40), (1.1, 6)])
def test_a_loop_with_branches_and_an_early_exit_keeps_one_record_per_iteration(x, n):
    jit, address, text = _gradient(BRANCHY, "f", "10")
    with jit:
        got = _call(address, Pair, [ctypes.c_double, ctypes.c_int64, ctypes.c_double], x, n, 1.0)
    assert (got.value, got.dx) == pytest.approx(_branchy(x, n), rel=1e-13)
    # one record, so one place that may grow the tape: the latch's (four blocks' values)
    filecheck(text, """
        CHECK-LABEL: define {{.*}} @f.gradient.10(
        CHECK-COUNT-1: call {{.*}} @gpuc.autodiff.tape.grow
        CHECK-NOT: call {{.*}} @gpuc.autodiff.tape.grow
        CHECK: ret
    """)


# A loop whose odd iterations read x[2 i]: the reverse of that read adds into the shadow of x[2 i], and the
# reverse of the join needs to know whether the iteration was odd. Both follow from the counter i, which
# the loop (run once per call) keeps in a stack slot and the reverse steps back: the record holds the floats
# the derivative needs (v, s), not the counter, a pointer or a flag (recompute.py).
COUNTED = """
define double @f(ptr %x, double %w, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %latch ]
  %s = phi double [ %w, %entry ], [ %s2, %latch ]
  %odd = and i64 %i, 1
  %isodd = icmp eq i64 %odd, 1
  br i1 %isodd, label %then, label %latch
then:
  %j = shl i64 %i, 1
  %p = getelementptr double, ptr %x, i64 %j
  %v = load double, ptr %p
  %t = fmul double %v, %s
  br label %latch
latch:
  %s1 = phi double [ %t, %then ], [ %s, %loop ]
  %s2 = fadd double %s1, %w
  %i1 = add i64 %i, 1
  %more = icmp slt i64 %i1, %n
  br i1 %more, label %loop, label %done
done:
  ret double %s2
}
"""


def _counted(x, w, n):
    """f of COUNTED, d f / d w and d f / d x, in Python."""
    s, ds, dsx = w, 1.0, np.zeros(len(x))
    for i in range(n):
        if i % 2:
            s, ds, dsx = x[2 * i] * s, x[2 * i] * ds, x[2 * i] * dsx
            dsx[2 * i] += s / x[2 * i]
        s, ds = s + w, ds + 1.0
    return s, ds, dsx


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_values_that_follow_from_the_loop_counter_are_computed_again(n):
    ctx = llvm.Context()
    module = llvm.Module.parse(COUNTED, ctx)
    g = gradient_function(module, module.functions["f"], "110", HOST)
    records = re.findall(r"getelementptr \((\{[^}]*\}), ptr null", str(g))
    assert records and all("ptr" not in r and "i32" not in r and "i64" not in r for r in records), records
    assert all("double" in r for r in records), records
    x = np.linspace(0.5, 1.7, 2 * n)
    jit, address, _ = _gradient(COUNTED, "f", "110")
    dx = np.zeros_like(x)
    with jit:
        got = _call(address, Pair, [ctypes.c_void_p, ctypes.c_double, ctypes.c_int64, ctypes.c_void_p,
                                     ctypes.c_double], x.ctypes.data, 0.7, n, dx.ctypes.data, 1.0)
    value, dw, want_dx = _counted(x, 0.7, n)
    assert (got.value, got.dx) == pytest.approx((value, dw), rel=1e-13)
    np.testing.assert_allclose(dx, want_dx, rtol=1e-13)


# A cycle with two entries (irreducible: neither block dominates the other). Which way each block was entered
# looks decided by the branch in %entry, which dominates both, but only the first time: nothing about such
# cycles is computed again (recompute.py), the predecessor indices stay on the tape.
IRREDUCIBLE = """
define double @f(double %x, i64 %n, i1 %c) {
entry:
  br i1 %c, label %a, label %b
a:
  %i.a = phi i64 [ 0, %entry ], [ %i.b1, %b ]
  %s.a = phi double [ %x, %entry ], [ %s.b1, %b ]
  %s.a1 = fmul double %s.a, 1.1
  %i.a1 = add i64 %i.a, 1
  %done.a = icmp sge i64 %i.a1, %n
  br i1 %done.a, label %out, label %b
b:
  %i.b = phi i64 [ 0, %entry ], [ %i.a1, %a ]
  %s.b = phi double [ %x, %entry ], [ %s.a1, %a ]
  %s.b1 = call double @llvm.sin.f64(double %s.b)
  %i.b1 = add i64 %i.b, 1
  %done.b = icmp sge i64 %i.b1, %n
  br i1 %done.b, label %out, label %a
out:
  %r = phi double [ %s.a1, %a ], [ %s.b1, %b ]
  ret double %r
}
declare double @llvm.sin.f64(double)
"""


@pytest.mark.parametrize("c", [0, 1])
@pytest.mark.parametrize("n", [1, 2, 5])
def test_an_irreducible_cycle_keeps_its_predecessor_indices(n, c):
    import math

    def f(x):
        s, in_a = x, bool(c)
        for _ in range(n):
            s = s * 1.1 if in_a else math.sin(s)
            in_a = not in_a
        return s

    jit, address, _ = _gradient(IRREDUCIBLE, "f", "100")
    with jit:
        got = _call(address, Pair, [ctypes.c_double, ctypes.c_int64, ctypes.c_bool, ctypes.c_double], 0.7, n, c, 1.0)
    h = 1e-6
    assert got.value == pytest.approx(f(0.7), rel=1e-14)
    assert got.dx == pytest.approx((f(0.7 + h) - f(0.7 - h)) / (2 * h), rel=1e-7)


# The branch in %loop dominates the join, and %t is on its true side, but %t is entered from %f too: which way
# the join was entered does not follow from %c (i % 3 == 1 takes %f, then %t). It stays on the tape.
TWO_WAYS_IN = """
define double @f(double %x, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %join ]
  %s = phi double [ %x, %entry ], [ %s2, %join ]
  %m3 = urem i64 %i, 3
  %c = icmp eq i64 %m3, 0
  br i1 %c, label %t, label %f
f:
  %d = icmp eq i64 %m3, 1
  br i1 %d, label %t, label %g
t:
  %st = call double @llvm.sin.f64(double %s)
  br label %join
g:
  %sg = fmul double %s, 1.3
  br label %join
join:
  %s1 = phi double [ %st, %t ], [ %sg, %g ]
  %s2 = fadd double %s1, %s
  %i1 = add i64 %i, 1
  %more = icmp slt i64 %i1, %n
  br i1 %more, label %loop, label %done
done:
  ret double %s2
}
declare double @llvm.sin.f64(double)
"""


@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_an_arm_entered_two_ways_keeps_the_predecessor_index(n):
    import math
    s, ds = 0.4, 1.0
    for i in range(n):
        t, dt = (math.sin(s), math.cos(s) * ds) if i % 3 < 2 else (1.3 * s, 1.3 * ds)
        s, ds = t + s, dt + ds
    jit, address, _ = _gradient(TWO_WAYS_IN, "f", "10")
    with jit:
        got = _call(address, Pair, [ctypes.c_double, ctypes.c_int64, ctypes.c_double], 0.4, n, 1.0)
    assert (got.value, got.dx) == pytest.approx((s, ds), rel=1e-13)


# A loop counter LLVM narrowed to the i32 of its trip count (`add nsw i32`): the loop is counted as with an i64
# counter (recompute.py), so its record holds the double alone, neither the header's predecessor index nor
# sin's result, which sin's derivative does not read (reverse.py's `_used`); and the reverse loop, which steps
# that counter back, keeps the hint against unrolling by a run-time factor (cfg.keep_loops_whole). Without
# `nsw` the i32 counter could wrap around to its first value: the predecessor index stays on the tape.
NARROW_COUNTER = """
define double @f(double %x, i32 %n) {
entry:
  %any = icmp sgt i32 %n, 0
  br i1 %any, label %loop, label %done
loop:
  %k = phi i32 [ 0, %entry ], [ %k1, %loop ]
  %s = phi double [ %x, %entry ], [ %s2, %loop ]
  %h = fmul double %s, 0.5
  %sn = call double @llvm.sin.f64(double %s)
  %s2 = fadd double %h, %sn
  %k1 = add {flags} i32 %k, 1
  %more = icmp slt i32 %k1, %n
  br i1 %more, label %loop, label %done
done:
  %r = phi double [ %x, %entry ], [ %s2, %loop ]
  ret double %r
}
declare double @llvm.sin.f64(double)
"""


@pytest.mark.parametrize("flags", ["nsw", ""])
@pytest.mark.parametrize("n", [0, 1, 2, 9])
def test_a_narrow_counter_without_wrap_keeps_the_record_to_the_values_needed(n, flags):
    import math
    ir = NARROW_COUNTER.replace("{flags}", flags)
    ctx = llvm.Context()
    module = llvm.Module.parse(ir, ctx)
    g = gradient_function(module, module.functions["f"], "10", HOST)
    records = set(re.findall(r"getelementptr \((\{[^}]*\}), ptr null", str(g)))  # (the push's and the pop's)
    assert records == ({"{ double }"} if flags else {"{ double, i32 }"}), records
    assert re.search(r"br i1 [^\n]*, !llvm.loop ![0-9]+", str(g)), "the loops carry no hint"
    assert "llvm.loop.unroll.runtime.disable" in str(module)
    s, ds = 0.4, 1.0
    for _ in range(n):
        s, ds = 0.5 * s + math.sin(s), (0.5 + math.cos(s)) * ds
    jit, address, _ = _gradient(ir, "f", "10")
    with jit:
        got = _call(address, Pair, [ctypes.c_double, ctypes.c_int32, ctypes.c_double], 0.4, n, 1.0)
    assert (got.value, got.dx) == pytest.approx((s, ds), rel=1e-13)
