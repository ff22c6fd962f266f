"""Validation after optimization: every IR problem is collected into one ValidationError."""

import pytest

import gpuc

from support.compiler_ir import SEED_IR

TWO_MARKERS_AND_AN_EXTERNAL = """\
declare void @gpucompiler.mark(i64)
declare void @gpuc.other()
declare void @host_only(i64)

define internal void @helper(i64 %x) {
  call void @gpucompiler.mark(i64 %x)
  ret void
}

define void @kernel(ptr addrspace(1) %p, i64 %x) {
  call void @helper(i64 %x)
  call void @gpuc.other()
  call void @host_only(i64 %x)
  store i64 %x, ptr addrspace(1) %p
  ret void
}
"""


def unresolved(make_job, **config):
    with pytest.raises(gpuc.ValidationError) as info:
        gpuc.compile(make_job(SEED_IR, **config))
    (issue,) = info.value.issues
    assert (issue.kind, issue.symbol, issue.function) == ("unresolved-marker", "gpucompiler.mark", "kernel")
    assert "unresolved marker @gpucompiler.mark called from @kernel" in str(info.value)
    return info.value


@pytest.mark.parametrize("target", [gpuc.NativeTarget(), gpuc.PTXTarget()], ids=["native", "ptx"])
def test_unresolved_marker_without_plugin(target, make_job):
    err = unresolved(make_job, target=target)
    assert "no plugin is registered for it" in str(err)
    assert "gpuc.register_plugin" in str(err)
    assert err.job is not None and "entry=@kernel" in str(err)


def test_unresolved_marker_with_a_plugin_that_did_not_resolve_it(make_job):
    gpuc.register_plugin("gpucompiler.mark", pipeline_callback=lambda *a: False)
    err = unresolved(make_job)
    assert "plugin(s) gpucompiler.mark are registered for it but did not resolve it" in str(err)
    assert "no plugin is registered" not in str(err)


def test_unresolved_marker_claimed_by_a_plugin_under_another_name(make_job):
    plugin = gpuc.make_plugin("resolver", markers=["gpucompiler.mark"], early_callback=lambda *a: False)
    err = unresolved(make_job, plugins=[plugin])
    assert "plugin(s) resolver are registered for it" in str(err)


def test_unresolved_marker_registered_after_config(make_job):
    job = make_job(SEED_IR)
    gpuc.register_plugin("gpucompiler.mark", pipeline_callback=lambda *a: False)
    with pytest.raises(gpuc.ValidationError) as info:
        gpuc.compile(job)
    message = str(info.value)
    assert "no plugin is registered for it in this config" in message
    assert "plugin 'gpucompiler.mark' is registered globally" in message


def test_unclaimed_names_outside_reserved_namespaces_are_plain_externals(make_job):
    # @my.hook is nobody's marker: on the CPU it is an ordinary external call.
    ir = SEED_IR.replace("gpucompiler.mark", "my.hook")
    assert "call void @my.hook" in gpuc.compile(make_job(ir)).output
    # ... until a plugin claims it, then it is an unresolved marker.
    plugin = gpuc.make_plugin("my.hook", pipeline_callback=lambda *a: False)
    with pytest.raises(gpuc.ValidationError, match="unresolved marker @my.hook"):
        gpuc.compile(make_job(ir, plugins=[plugin]))


def test_all_issues_are_collected(make_job):
    with pytest.raises(gpuc.ValidationError) as info:
        gpuc.compile(make_job(TWO_MARKERS_AND_AN_EXTERNAL, target=gpuc.PTXTarget(), kernel=True))
    err = info.value
    got = sorted((i.kind, i.symbol, i.function) for i in err.issues)
    assert got == [("undefined-external", "host_only", "kernel"),
                   ("unresolved-marker", "gpuc.other", "kernel"),
                   ("unresolved-marker", "gpucompiler.mark", "kernel")]
    message = str(err)
    assert message.startswith("3 problem(s) in the optimized IR")
    assert all(f"  - {issue}" in message for issue in err.issues)


def test_undefined_external_on_ptx(make_job):
    ir = ("declare void @ext(ptr addrspace(1))\n"
          "define void @kernel(ptr addrspace(1) %p) {\n  call void @ext(ptr addrspace(1) %p)\n  ret void\n}\n")
    with pytest.raises(gpuc.ValidationError) as info:
        gpuc.compile(make_job(ir, target=gpuc.PTXTarget(), kernel=True))
    (issue,) = info.value.issues
    assert (issue.kind, issue.symbol, issue.function) == ("undefined-external", "ext", "kernel")
    assert "call to undefined external function @ext from @kernel" in str(issue)
    # the same call is fine on the CPU, where the host links it
    assert "call void @ext" in gpuc.compile(make_job(ir)).output


def test_driver_functions_and_intrinsics_are_allowed_on_ptx(make_job):
    ir = ("declare i32 @vprintf(ptr, ptr)\ndeclare i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n"
          "@fmt = private unnamed_addr constant [4 x i8] c\"%d\\0A\\00\"\n"
          "define void @kernel() {\n  %t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n"
          "  %r = call i32 @vprintf(ptr @fmt, ptr null)\n  ret void\n}\n")
    assert "vprintf" in gpuc.compile(make_job(ir, target=gpuc.PTXTarget(), kernel=True), "asm").output


def test_missing_libdevice_is_explained(make_job, monkeypatch):
    monkeypatch.setattr("gpuc.targets.ptx.find_libdevice", lambda: None)
    ir = ("declare float @__nv_sinf(float)\n"
          "define void @kernel(ptr addrspace(1) %p, float %x) {\n  %s = call float @__nv_sinf(float %x)\n"
          "  store float %s, ptr addrspace(1) %p\n  ret void\n}\n")
    with pytest.raises(gpuc.ValidationError) as info:
        gpuc.compile(make_job(ir, target=gpuc.PTXTarget(), kernel=True))
    (issue,) = info.value.issues
    assert issue.kind == "undefined-external" and issue.symbol == "__nv_sinf"
    assert "libdevice was not found" in str(issue) and "GPUC_LIBDEVICE" in str(issue)


def test_defining_a_libdevice_function_is_a_user_error(make_job):
    # Regression: linking libdevice failed with "symbol multiply defined" as an internal compiler error.
    if gpuc.targets.find_libdevice() is None:
        pytest.skip("libdevice.10.bc not found (pip install nvidia-cuda-nvcc-cu12)")
    ir = ("declare float @__nv_cosf(float)\ndefine float @__nv_sinf(float %x) {\n  ret float %x\n}\n"
          "define void @kernel(ptr addrspace(1) %p, float %x) {\n  %s = call float @__nv_sinf(float %x)\n"
          "  %c = call float @__nv_cosf(float %s)\n  store float %c, ptr addrspace(1) %p\n  ret void\n}\n")
    with pytest.raises(gpuc.CompilationError, match="defines @__nv_sinf, which libdevice also defines"):
        gpuc.compile(make_job(ir, target=gpuc.PTXTarget(), kernel=True))


@pytest.mark.parametrize("target", [gpuc.PTXTarget(), gpuc.GCNTarget(), gpuc.SPIRVTarget()],
                         ids=["ptx", "gcn", "spirv"])
def test_kernel_returning_a_value(target, make_job):
    ir = "define i32 @kernel(i32 %x) {\n  %y = add i32 %x, 1\n  ret i32 %y\n}\n"
    with pytest.raises(gpuc.ValidationError) as info:
        gpuc.compile(make_job(ir, target=target, kernel=True))
    (issue,) = info.value.issues
    assert (issue.kind, issue.function) == ("invalid-kernel", "kernel")
    assert "kernel @kernel returns i32; kernels must return void" in str(issue)
    # as a device function the same code is fine
    gpuc.compile(make_job(ir, target=target, kernel=False))


@pytest.mark.parametrize("target", [gpuc.PTXTarget(), gpuc.GCNTarget(), gpuc.SPIRVTarget()],
                         ids=["ptx", "gcn", "spirv"])
@pytest.mark.parametrize("config", [dict(optimize=False), dict(validate=False)],
                         ids=["unoptimized", "unvalidated"])
def test_kernel_returning_a_value_without_validation(target, config, make_job):
    # Regression: with validation skipped, the verifier rejected amdgpu_kernel/spir_kernel on a
    # non-void function and the user got an internal compiler error.
    ir = "define i32 @kernel(i32 %x) {\n  ret i32 %x\n}\n"
    with pytest.raises(gpuc.ValidationError, match="kernel @kernel returns i32") as info:
        gpuc.compile(make_job(ir, target=target, kernel=True, **config), "asm")
    assert [i.kind for i in info.value.issues] == ["invalid-kernel"]


def test_unsupported_type_on_gpu(make_job):
    ir = ("define void @kernel(ptr addrspace(1) %p, ptr addrspace(1) %q) {\n"
          "  %v = load x86_fp80, ptr addrspace(1) %p\n  %w = fmul x86_fp80 %v, %v\n"
          "  store x86_fp80 %w, ptr addrspace(1) %q\n  ret void\n}\n")
    with pytest.raises(gpuc.ValidationError) as info:
        gpuc.compile(make_job(ir, target=gpuc.PTXTarget(), kernel=True))
    kinds = {i.kind for i in info.value.issues}
    assert kinds == {"unsupported-type"}
    assert "x86_fp80" in str(info.value) and "@kernel" in str(info.value)


@pytest.mark.parametrize("target", [gpuc.PTXTarget(), gpuc.GCNTarget(), gpuc.SPIRVTarget()])
def test_wide_float_constant_store_is_caught(make_job, target):
    # Regression: only instruction result types were checked; a store of an fp128 constant has
    # none, and the NVPTX backend then aborted the whole process ("unsupported library call").
    ir = ("define void @kernel(ptr addrspace(1) %p) {\n"
          "  store fp128 0xL00000000000000003FFF000000000000, ptr addrspace(1) %p\n  ret void\n}\n")
    with pytest.raises(gpuc.ValidationError, match="@kernel uses type fp128") as info:
        gpuc.compile(make_job(ir, target=target, kernel=True))
    assert [i.kind for i in info.value.issues] == ["unsupported-type"]


def test_names_containing_wide_float_words_are_fine(make_job):
    ir = ("define internal float @to_fp128(float %x) {\n  %fp128.v = fadd float %x, 1.0\n  ret float %fp128.v\n}\n"
          "define void @kernel(ptr addrspace(1) %p, float %x) {\n  %y = call float @to_fp128(float %x)\n"
          "  store float %y, ptr addrspace(1) %p\n  ret void\n}\n")
    assert ".entry kernel" in gpuc.compile(make_job(ir, target=gpuc.PTXTarget(), kernel=True, opt_level=0), "asm").output


def test_validate_false_skips_validation(make_job):
    out = gpuc.compile(make_job(SEED_IR, validate=False)).output
    assert "call void @gpucompiler.mark" in out


def test_code_llvm_unoptimized_skips_validation(make_job):
    out = gpuc.code_llvm(make_job(SEED_IR, target=gpuc.PTXTarget()), optimize=False)
    assert "call void @gpucompiler.mark" in out


GARBAGE_ASM = """\
define { double, double } @f(double %x) noinline {
  %r = call double asm "garbage $0, $1", "=r,r"(double %x)
  %s = insertvalue { double, double } undef, double %r, 0
  ret { double, double } %s
}

define void @kernel(ptr %p) {
  %v = load double, ptr %p
  %r = call { double, double } @f(double %v)
  %a = extractvalue { double, double } %r, 0
  store double %a, ptr %p
  ret void
}
"""


# Inline assembly reached a SPIR-V check written for calls of functions: an internal error.
@pytest.mark.parametrize("target, output, why", [
    (gpuc.SPIRVTarget(), "obj", "SPV_INTEL_inline_assembly"),
    (gpuc.NativeTarget(), "obj", "invalid instruction mnemonic 'garbage'"),
    (gpuc.GCNTarget(), "obj", "invalid instruction"),
], ids=["spirv", "native", "gcn"])
def test_inline_assembly_a_target_cannot_take_is_a_validation_error(target, output, why, make_job):
    with pytest.raises(gpuc.ValidationError) as info:
        gpuc.compile(make_job(GARBAGE_ASM, target=target, kernel=True), output)
    (issue,) = info.value.issues
    assert (issue.kind, issue.function) == ("inline-assembly", "f")
    assert '@f calls inline assembly (`%r = tail call double asm "garbage' in str(issue) and why in str(issue)
    assert gpuc.compile(make_job(SEED_IR.replace("gpucompiler.mark", "other"), target=gpuc.NativeTarget()))
