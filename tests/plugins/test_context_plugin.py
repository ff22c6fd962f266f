"""The context-propagation plugin (gpuc.ctx): native context threading, GPU lowering, errors."""

from __future__ import annotations

import re

import pytest

import gpuc

from support.ctx_kernels import MARKER_FREE_IR, RECURSIVE_IR, indexing_kernel, job

INDEX_IN = """\
declare i64 @gpuc.ctx.index(i32)
define void @kernel(ptr %p, i32 %d) {{
  %i = call i64 @gpuc.ctx.index(i32 {dim})
  store i64 %i, ptr %p
  ret void
}}
"""


def test_registered_at_import():
    plugin = next(p for p in gpuc.registered_plugins() if p.name == "gpuc.ctx")
    assert plugin.markers[:2] == ("gpuc.ctx.index", "gpuc.ctx.ndrange")
    assert {"gpuc.ctx.barrier", "gpuc.ctx.thread_index", "gpuc.ctx.shared", "gpuc.ctx.shfl_down.float"} <= set(plugin.markers)
    assert plugin.callback("early") is not None


def test_native_threads_the_context_three_calls_deep(filecheck):
    ir = gpuc.code_llvm(job(indexing_kernel(2)), optimize=False)
    filecheck(ir, """\
CHECK-NOT: @gpuc.ctx.index
CHECK-LABEL: define internal i64 @ix0(ptr %gpuc.ctx)
CHECK: %index0 = load i64, ptr %gpuc.ctx, align 8
CHECK-LABEL: define internal i64 @nd0(ptr %gpuc.ctx)
CHECK: [[P:%.*]] = getelementptr inbounds nuw i8, ptr %gpuc.ctx, i64 24
CHECK: %ndrange0 = load i64, ptr [[P]]
CHECK-LABEL: define internal i64 @ix2(ptr %gpuc.ctx)
CHECK: getelementptr inbounds nuw i8, ptr %gpuc.ctx, i64 16
CHECK-LABEL: define internal i64 @linear(ptr %gpuc.ctx)
CHECK: call i64 @ix0(ptr %gpuc.ctx)
CHECK-LABEL: define internal i64 @offset(i64 %t0, i64 %t1, ptr %gpuc.ctx)
CHECK: %i0 = call i64 @ix0(ptr %gpuc.ctx)
CHECK-LABEL: define internal void @body(double %a, ptr %in, i64 %int0, i64 %int1, ptr %out, i64 %outt0, i64 %outt1, ptr %gpuc.ctx)
CHECK: %oi = call i64 @offset(i64 %int0, i64 %int1, ptr %gpuc.ctx)
CHECK: %l = call i64 @linear(ptr %gpuc.ctx)
CHECK-LABEL: define void @kernel(double %a, ptr %in, {{.*}}, i64 %outt1, ptr %gpuc.ctx)
CHECK-NEXT: call void @body({{.*}}, ptr %gpuc.ctx)
CHECK-NOT: @gpuc.ctx.
""")


def test_native_optimized_kernel_reads_the_context(filecheck):
    ir = gpuc.code_llvm(job(indexing_kernel(3)))
    filecheck(ir, """\
CHECK-LABEL: define void @kernel(
CHECK-SAME: ptr {{.*}}%gpuc.ctx)
CHECK: load i64, ptr %gpuc.ctx
CHECK-NOT: call {{.*}}@gpuc.ctx.
CHECK: call void @llvm.assume(
CHECK: ret void
CHECK-NOT: @gpuc.ctx.
""")


def test_recursion_and_cycles_get_the_context(filecheck):
    ir = gpuc.code_llvm(job(RECURSIVE_IR), optimize=False)
    filecheck(ir, """\
CHECK-LABEL: define internal i64 @sum_to_index(i64 %k, ptr %gpuc.ctx)
CHECK: %rest = call i64 @sum_to_index(i64 %k1, ptr %gpuc.ctx)
CHECK-LABEL: define internal i64 @even(i64 %k, ptr %gpuc.ctx)
CHECK: call i64 @odd(i64 %k1, ptr %gpuc.ctx)
CHECK-LABEL: define internal i64 @odd(i64 %k, ptr %gpuc.ctx)
CHECK: call i64 @even(i64 %k1, ptr %gpuc.ctx)
CHECK-LABEL: define void @kernel(ptr %out, i64 %s0, i64 %t0, ptr %gpuc.ctx)
""")
    gpuc.compile(job(RECURSIVE_IR), "asm")  # and it optimizes and codegens


def test_only_functions_reaching_a_marker_change(filecheck):
    ir = """\
declare i64 @gpuc.ctx.index(i32)
define internal i64 @pure(i64 %x) {
  %y = add i64 %x, 1
  ret i64 %y
}
define internal i64 @idx() {
  %i = call i64 @gpuc.ctx.index(i32 0)
  ret i64 %i
}
define void @kernel(ptr %p) {
  %a = call i64 @pure(i64 1)
  %b = call i64 @idx()
  %c = add i64 %a, %b
  store i64 %c, ptr %p
  ret void
}
"""
    filecheck(gpuc.code_llvm(job(ir), optimize=False), """\
CHECK: define internal i64 @pure(i64 %x) {
CHECK: define internal i64 @idx(ptr %gpuc.ctx)
CHECK: define void @kernel(ptr %p, ptr %gpuc.ctx)
CHECK: call i64 @pure(i64 1)
""")


def test_attributes_and_linkage_survive_the_rebuild():
    ir = """\
declare i64 @gpuc.ctx.index(i32)
define internal noundef i64 @idx(ptr noalias %unused) noinline nounwind {
  %i = call i64 @gpuc.ctx.index(i32 0)
  ret i64 %i
}
define void @kernel(ptr %p) {
  %i = call i64 @idx(ptr %p)
  store i64 %i, ptr %p
  ret void
}
"""
    text = gpuc.code_llvm(job(ir), optimize=False)
    assert "define internal noundef i64 @idx(ptr noalias %unused, ptr %gpuc.ctx) #0" in text
    assert "attributes #0 = { noinline nounwind }" in text


def test_marker_free_kernel_is_untouched():
    with_plugin = gpuc.code_llvm(job(MARKER_FREE_IR))
    without = gpuc.code_llvm(job(MARKER_FREE_IR, plugins=[]))
    assert with_plugin == without
    assert "gpuc.ctx" not in with_plugin


def test_unused_marker_declaration_is_removed_and_the_kernel_untouched():
    text = gpuc.code_llvm(job("declare i64 @gpuc.ctx.index(i32)\n" + MARKER_FREE_IR), optimize=False)
    assert "gpuc.ctx" not in text


def test_scoped_plugin_set_works():
    text = gpuc.code_llvm(job(INDEX_IN.format(dim=1), plugins=["gpuc.ctx"]))
    assert "%gpuc.ctx" in text and "@gpuc.ctx.index" not in text


def test_without_the_plugin_the_marker_is_reported():
    with pytest.raises(gpuc.ValidationError, match="unresolved marker @gpuc.ctx.index"):
        gpuc.compile(job(INDEX_IN.format(dim=0), plugins=[], builtin_plugins=False))


@pytest.mark.parametrize("target", [gpuc.NativeTarget(), gpuc.PTXTarget(), gpuc.GCNTarget(), gpuc.SPIRVTarget()],
                         ids=lambda t: t.name)
def test_unoptimized_compiles_resolve_the_markers(target):
    result = gpuc.compile(job(indexing_kernel(3), target, optimize=False))
    assert "@gpuc.ctx." not in result.output
    assert "early" in result.trace.stage_names


# -- errors ------------------------------------------------------------------------------------

def test_non_constant_dimension_is_a_compilation_error():
    ir = INDEX_IN.format(dim="%d")
    with pytest.raises(gpuc.CompilationError, match=r"must be a constant 0, 1 or 2.*@kernel") as info:
        gpuc.compile(job(ir))
    assert "gpuc.index(0)" in str(info.value)  # the hint


@pytest.mark.parametrize("dim", [3, -1])
def test_dimension_out_of_range_is_a_compilation_error(dim):
    with pytest.raises(gpuc.CompilationError, match=rf"dimension {dim} of @gpuc.ctx.index is out of range"):
        gpuc.compile(job(INDEX_IN.format(dim=dim)))


def test_wrong_marker_type_is_a_compilation_error():
    ir = "declare i32 @gpuc.ctx.index(i32)\ndefine void @kernel() {\n  call i32 @gpuc.ctx.index(i32 0)\n  ret void\n}\n"
    with pytest.raises(gpuc.CompilationError, match=r"declared as i32 \(i32\), not i64 \(i32\)"):
        gpuc.compile(job(ir))


# A function reading the launch context whose address was taken was refused ("used other than by a
# direct call"); pointers now pass the context (gpuc/plugins/context_pointers.py).
POINTERS_IR = """\
declare i64 @gpuc.ctx.index(i32)
define internal i64 @idx(i64 %x) {
  %i = call i64 @gpuc.ctx.index(i32 0)
  %r = add i64 %i, %x
  ret i64 %r
}
define internal i64 @plain(i64 %x) {
  ret i64 %x
}
define internal i64 @call(ptr %f, i64 %x) {
  %r = call i64 %f(i64 %x)
  ret i64 %r
}
define internal i64 @direct(i64 %x) {
  %r = call i64 @plain(i64 %x)
  ret i64 %r
}
define void @kernel(ptr %p, i1 %c) {
  %f = select i1 %c, ptr @idx, ptr @plain
  %r = call i64 @call(ptr %f, i64 5)
  %d = call i64 @direct(i64 %r)
  store i64 %d, ptr %p
  ret void
}
"""


def test_address_taken_functions_and_calls_through_pointers_take_the_context(filecheck):
    ir = gpuc.code_llvm(job(POINTERS_IR), optimize=False)
    filecheck(ir, """\
CHECK-LABEL: define internal i64 @idx(i64 %x, ptr %gpuc.ctx)
CHECK: load i64, ptr %gpuc.ctx
CHECK-LABEL: define internal i64 @plain(i64 %x, ptr %gpuc.ctx)
CHECK-LABEL: define internal i64 @call(ptr %f, i64 %x, ptr %gpuc.ctx)
CHECK-NEXT: %r = call i64 %f(i64 %x, ptr %gpuc.ctx)
CHECK-LABEL: define internal i64 @direct(i64 %x, ptr %gpuc.ctx)
CHECK-NEXT: %r = call i64 @plain(i64 %x, ptr %gpuc.ctx)
CHECK-LABEL: define void @kernel(ptr %p, i1 %c, ptr %gpuc.ctx)
CHECK-NEXT: %f = select i1 %c, ptr @idx, ptr @plain
CHECK-NEXT: %r = call i64 @call(ptr {{.*}}%f, i64 5, ptr %gpuc.ctx)
CHECK-NOT: @gpuc.ctx.
""")


def test_pointers_stay_as_they_are_where_no_function_they_hold_reads_the_context(filecheck):
    ir = gpuc.code_llvm(job(POINTERS_IR.replace("ptr @idx, ptr @plain", "ptr @plain, ptr @plain")), optimize=False)
    filecheck(ir, """\
CHECK-LABEL: define internal i64 @plain(i64 %x)
CHECK-LABEL: define internal i64 @call(ptr %f, i64 %x)
CHECK-NEXT: %r = call i64 %f(i64 %x)
CHECK-LABEL: define void @kernel(ptr %p, i1 %c)
""")


@pytest.mark.parametrize("use, message", [
    ("call void @external(ptr @idx)", r"@idx reaches a gpuc.ctx marker \(it uses the launch context\) but is handed "
                                      r"to @external \(which the module does not define\) in @kernel"),
    ("store ptr @external.fn, ptr %p\n  store ptr @idx, ptr %p", r"@external.fn is only declared, and its address is "
                                                                 r"taken in a module whose function pointers pass"),
])
def test_pointers_the_context_cannot_follow_are_errors(use, message):
    ir = f"""\
declare i64 @gpuc.ctx.index(i32)
declare void @external(ptr)
declare i64 @external.fn(i64)
define internal i64 @idx(i64 %x) {{
  %i = call i64 @gpuc.ctx.index(i32 0)
  ret i64 %i
}}
define void @kernel(ptr %p) {{
  {use}
  ret void
}}
"""
    with pytest.raises(gpuc.CompilationError, match=message):
        gpuc.compile(job(ir))


def test_variadic_function_reaching_a_marker_is_rejected():
    ir = """\
declare i64 @gpuc.ctx.index(i32)
define internal i64 @idx(...) {
  %i = call i64 @gpuc.ctx.index(i32 0)
  ret i64 %i
}
define void @kernel(ptr %p) {
  %i = call i64 (...) @idx()
  store i64 %i, ptr %p
  ret void
}
"""
    with pytest.raises(gpuc.CompilationError, match="variable arguments"):
        gpuc.compile(job(ir))


def test_errors_leave_no_state_behind():
    with pytest.raises(gpuc.CompilationError):
        gpuc.compile(job(INDEX_IN.format(dim=7)))
    assert "%gpuc.ctx" in gpuc.code_llvm(job(INDEX_IN.format(dim=0)))


# -- GPU targets -------------------------------------------------------------------------------

def test_ptx_uses_thread_registers_and_guards_the_launch_size(filecheck, ptxas):
    kernel = job(indexing_kernel(2), gpuc.PTXTarget())
    filecheck(gpuc.code_llvm(kernel), """\
CHECK-LABEL: define ptx_kernel void @kernel(
CHECK-SAME: i64 %gpuc.n0, i64 %gpuc.n1, i64 %gpuc.n2)
CHECK: gpuc.guard:
CHECK-DAG: call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
CHECK-DAG: call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
CHECK-DAG: call i32 @llvm.nvvm.read.ptx.sreg.tid.y()
CHECK-DAG: %inside0 = icmp {{.*}}%gpuc.n0
CHECK-DAG: %inside1 = icmp {{.*}}%gpuc.n1
CHECK-DAG: %inside2 = icmp {{.*}}%gpuc.n2
CHECK-NOT: @gpuc.ctx.
""")
    ptx = gpuc.code_native(kernel)
    filecheck(ptx, """\
CHECK: .entry kernel(
CHECK-DAG: %tid.x
CHECK-DAG: %ctaid.x
CHECK-DAG: %ntid.x
CHECK-DAG: %tid.y
CHECK-DAG: %ctaid.y
""")
    ptxas(ptx, "sm_90")


def test_ptx_guard_covers_every_dimension(filecheck):
    # Regression: only the dimensions a kernel indexed were guarded, so a kernel reading index(0)
    # but launched 2-D ran its body again in the extra rows of the rounded-up grid.
    ir = """\
declare i64 @gpuc.ctx.index(i32)

define void @kernel(ptr %out) {
  %i = call i64 @gpuc.ctx.index(i32 0)
  %p = getelementptr i64, ptr %out, i64 %i
  store i64 %i, ptr %p
  ret void
}
"""
    filecheck(gpuc.code_llvm(job(ir, gpuc.PTXTarget()), optimize=False), """\
CHECK: gpuc.guard:
CHECK-DAG: %inside0 = icmp {{.*}}%gpuc.n0
CHECK-DAG: %inside1 = icmp {{.*}}%gpuc.n1
CHECK-DAG: %inside2 = icmp {{.*}}%gpuc.n2
""")


def test_ptx_device_functions_get_the_launch_size_only_when_they_read_it():
    ir = gpuc.code_llvm(job(indexing_kernel(1), gpuc.PTXTarget()), optimize=False)
    assert "define internal i64 @ix0() {\n  %1 = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()" in ir
    assert "define internal i64 @nd0(i64 %gpuc.n0, i64 %gpuc.n1, i64 %gpuc.n2) {\n  ret i64 %gpuc.n0" in ir
    assert "define internal i64 @linear(i64 %gpuc.n0, i64 %gpuc.n1, i64 %gpuc.n2)" in ir
    assert "define internal i64 @offset(i64 %t0)" in ir


def test_ptx_guard_keeps_static_allocas_in_the_entry_block():
    ir = """\
declare i64 @gpuc.ctx.index(i32)
define void @kernel(ptr %p) {
  %slot = alloca i64
  %i = call i64 @gpuc.ctx.index(i32 0)
  store volatile i64 %i, ptr %slot
  %v = load volatile i64, ptr %slot
  store i64 %v, ptr %p
  ret void
}
"""
    text = gpuc.code_llvm(job(ir, gpuc.PTXTarget()), optimize=False)
    entry = text.split("gpuc.guard:")[1].split("br i1")[0]
    assert "%slot = alloca i64" in entry


def test_ptx_recursion(ptxas):
    ptxas(gpuc.code_native(job(RECURSIVE_IR, gpuc.PTXTarget())), "sm_90")


def test_gcn_uses_workgroup_and_workitem_ids(filecheck):
    kernel = job(indexing_kernel(3), gpuc.GCNTarget())
    filecheck(gpuc.code_llvm(kernel), """\
CHECK-LABEL: define amdgpu_kernel void @kernel(
CHECK-SAME: i64 %gpuc.n0, i64 %gpuc.n1, i64 %gpuc.n2)
CHECK-DAG: call i32 @llvm.amdgcn.workgroup.id.z()
CHECK-DAG: call i32 @llvm.amdgcn.workitem.id.z()
CHECK-DAG: call {{.*}}ptr addrspace(4) @llvm.amdgcn.dispatch.ptr()
""")
    asm = gpuc.code_native(kernel)
    assert ".amdhsa_user_sgpr_dispatch_ptr 1" in asm


def test_spirv_uses_the_global_invocation_id(filecheck, spirv_val):
    kernel = job(indexing_kernel(3), gpuc.SPIRVTarget())
    filecheck(gpuc.code_llvm(kernel), """\
CHECK-LABEL: define spir_kernel void @kernel(
CHECK-SAME: i64 %gpuc.n0, i64 %gpuc.n1, i64 %gpuc.n2)
CHECK-DAG: call spir_func i64 @_Z13get_global_idj(i32 2)
""")
    assert "BuiltIn GlobalInvocationId" in gpuc.code_native(kernel)
    spirv_val(gpuc.compile(kernel, "obj").output)


def test_non_kernel_gpu_entry_gets_no_guard():
    ir = "declare i64 @gpuc.ctx.index(i32)\ndefine i64 @f() {\n  %i = call i64 @gpuc.ctx.index(i32 0)\n  ret i64 %i\n}\n"
    text = gpuc.code_llvm(job(ir, gpuc.PTXTarget(), entry="f", kernel=False))
    assert re.search(r"define .*i64 @f\(\) ", text) and "gpuc.guard" not in text
