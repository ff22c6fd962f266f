"""The native target end to end: compile IR, load it into the ORC JIT, call it through ctypes."""

import ctypes
import math

import pytest

import gpuc
import gpuc.runtime

from support.compiler_ir import SEED_IR, erase_unused_calls

ADD = """\
define i64 @add(i64 %a, i64 %b) {
  %s = add i64 %a, %b
  ret i64 %s
}
"""

LIBM = """\
declare double @sin(double)
declare double @llvm.sqrt.f64(double)

define double @f(double %x) {
  %s = call double @sin(double %x)
  %q = call double @llvm.sqrt.f64(double %x)
  %r = fadd double %s, %q
  ret double %r
}
"""

LOOP = """\
define i64 @sum_to(i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i.next, %loop ]
  %acc = phi i64 [ 0, %entry ], [ %acc.next, %loop ]
  %acc.next = add i64 %acc, %i
  %i.next = add i64 %i, 1
  %done = icmp sgt i64 %i.next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret i64 %acc.next
}
"""


def test_integer_function(make_job):
    with gpuc.runtime.load(make_job(ADD, entry="add")) as jit:
        add = jit.function(ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)
        assert add(40, 2) == 42
        assert add(-5, 3) == -2
        assert jit.entry == "add" and jit.lookup() == jit.lookup("add") != 0


@pytest.mark.parametrize("opt_level", [0, 3])
def test_loop_at_every_level(opt_level, make_job):
    with gpuc.runtime.load(make_job(LOOP, entry="sum_to", opt_level=opt_level)) as jit:
        sum_to = jit.function(ctypes.c_int64, ctypes.c_int64)
        assert [sum_to(n) for n in (0, 1, 10, 1000)] == [0, 1, 55, 500500]


def test_libm_and_intrinsics(make_job):
    with gpuc.runtime.load(make_job(LIBM, entry="f")) as jit:
        f = jit.function(ctypes.c_double, ctypes.c_double)
        for x in (0.0, 0.5, 2.0, 10.0):
            assert f(x) == pytest.approx(math.sin(x) + math.sqrt(x), rel=1e-15)


def test_seed_kernel_runs_after_the_plugin_resolved_the_marker(make_job, no_disk_cache):
    gpuc.register_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls)
    with gpuc.runtime.load(make_job(SEED_IR)) as jit:
        kernel = jit.function(None, ctypes.POINTER(ctypes.c_int64), ctypes.c_int64)
        out = ctypes.c_int64(0)
        kernel(ctypes.byref(out), 1234)
        assert out.value == 1234
        assert "optimized" in {c.point for c in jit.trace.callbacks}


def test_renamed_entry_point(make_job):
    with gpuc.runtime.load(make_job(ADD, entry="add", name="plus")) as jit:
        assert jit.entry == "plus"
        assert jit.function(ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)(1, 2) == 3


def test_callable_keeps_the_jit_alive(make_job):
    add = gpuc.runtime.load(make_job(ADD, entry="add")).function(ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)
    import gc

    gc.collect()
    assert add(2, 3) == 5


def test_many_jits_in_one_process(make_job):
    for i in range(20):
        ir = ADD.replace("add i64 %a, %b", f"add i64 %a, {i}")
        with gpuc.runtime.load(make_job(ir, entry="add")) as jit:
            assert jit.function(ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)(100, 0) == 100 + i


def test_only_native_jobs_run_on_the_cpu(make_job):
    with pytest.raises(ValueError, match="only NativeTarget jobs"):
        gpuc.runtime.load(make_job(ADD, entry="add", target=gpuc.PTXTarget()))


def test_compile_errors_surface_from_load(make_job):
    with pytest.raises(gpuc.ValidationError, match="unresolved marker @gpucompiler.mark"):
        gpuc.runtime.load(make_job(SEED_IR))
    with pytest.raises(gpuc.CompilationError):
        gpuc.runtime.load(make_job("define i64 @add(", entry="add"))
