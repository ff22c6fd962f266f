"""Code generation for every target, checked by the vendors' own tools where they are installed."""

import pytest

import gpuc

from support.compiler_ir import SEED_IR, SINF_KERNEL, STORE_KERNEL_IR, erase_unused_calls

ELF_MAGIC = b"\x7fELF"
SPIRV_MAGIC = 0x07230203


# Two functions: a kernel, and a device function it calls that must stay internal.
SAXPY = """\
define float @axpy(float %a, float %x, float %y) {
  %m = fmul float %a, %x
  %r = fadd float %m, %y
  ret float %r
}

define void @kernel(ptr addrspace(1) %out, ptr addrspace(1) %xs, float %a, i64 %i) {
  %px = getelementptr float, ptr addrspace(1) %xs, i64 %i
  %x = load float, ptr addrspace(1) %px
  %po = getelementptr float, ptr addrspace(1) %out, i64 %i
  %y = load float, ptr addrspace(1) %po
  %r = call float @axpy(float %a, float %x, float %y)
  store float %r, ptr addrspace(1) %po
  ret void
}
"""


def asm(make_job, ir, target, **config):
    return gpuc.compile(make_job(ir, target=target, **config), "asm").output


# -- PTX ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("cap", ["sm_80", "sm_90"])
def test_ptx_passes_ptxas(cap, make_job, ptxas, filecheck):
    ptx = asm(make_job, SAXPY, gpuc.PTXTarget(cap=cap), kernel=True)
    filecheck(ptx, f"CHECK: .target {cap}\nCHECK: .address_size 64\nCHECK: .visible .entry kernel(\n"
                   "CHECK-NOT: .func axpy\nCHECK: mul.rn.f32\nCHECK: add.rn.f32\nCHECK: st.global.b32\n")
    ptxas(ptx, cap)


def test_ptx_kernel_is_an_entry_and_a_function_is_not(make_job, filecheck):
    target = gpuc.PTXTarget()
    filecheck(asm(make_job, STORE_KERNEL_IR, target, kernel=True), "CHECK: .visible .entry kernel(\n")
    filecheck(asm(make_job, STORE_KERNEL_IR, target, kernel=False),
              "CHECK-NOT: .entry\nCHECK: .visible .func kernel(\n")
    filecheck(gpuc.compile(make_job(STORE_KERNEL_IR, target=target, kernel=True)).output,
              "CHECK: define ptx_kernel void @kernel(\n")


def test_ptx_seed_marker_resolved(make_job, ptxas, filecheck):
    gpuc.register_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls)
    ptx = asm(make_job, SEED_IR, gpuc.PTXTarget(), kernel=True)
    filecheck(ptx, "CHECK-NOT: gpucompiler\nCHECK: .visible .entry kernel(\nCHECK: st.global\n")
    ptxas(ptx, "sm_90")


def test_ptx_links_libdevice(make_job, ptxas, filecheck):
    if gpuc.targets.find_libdevice() is None:
        pytest.skip("libdevice.10.bc not found (pip install nvidia-cuda-nvcc-cu12)")
    result = gpuc.compile(make_job(SINF_KERNEL, target=gpuc.PTXTarget(), kernel=True), "asm")
    assert result.trace.libraries == ["libdevice"]
    # __nv_sinf is linked in and inlined: no call to it is left, nothing unused from libdevice stays
    filecheck(result.output, "CHECK-NOT: __nv_sinf\nCHECK-NOT: __nv_cosf\nCHECK: .visible .entry kernel(\n")
    ptxas(result.output, "sm_90")
    ir = gpuc.compile(make_job(SINF_KERNEL, target=gpuc.PTXTarget(), kernel=True)).output
    filecheck(ir, "CHECK-NOT: define {{.*}}@__nv_\nCHECK: define ptx_kernel void @kernel(\n"
                  "CHECK-NOT: define {{.*}}@__nv_\n")
    # the PTX pipeline runs nvvm-reflect: libdevice's __nvvm_reflect queries are folded away
    assert "__nvvm_reflect" not in ir and "__CUDA_FTZ" not in result.output


def test_ir_without_data_layout_gets_the_targets_alignment(make_job, filecheck):
    # Regression: IR text without a datalayout was parsed with LLVM's default (i64 align 4),
    # so NVPTX split an i64 store into two 32-bit stores.
    ptx = asm(make_job, SEED_IR.replace("call void @helper(i64 %x)\n", ""), gpuc.PTXTarget(), kernel=True)
    filecheck(ptx, "CHECK: st.global.b64\n")


# -- AMD GCN -----------------------------------------------------------------------------------

def test_gcn_asm_has_kernel_descriptors(make_job, filecheck):
    text = asm(make_job, SAXPY, gpuc.GCNTarget("gfx90a"), kernel=True)
    filecheck(text, "CHECK: .amdgcn_target \"amdgcn-amd-amdhsa--gfx90a\n"
                    "CHECK: kernel:\nCHECK: .amdhsa_kernel kernel\nCHECK: .end_amdhsa_kernel\n")
    assert "amdhsa" in text
    # a device function gets no kernel descriptor
    assert ".amdhsa_kernel" not in asm(make_job, STORE_KERNEL_IR, gpuc.GCNTarget(), kernel=False)


@pytest.mark.parametrize("arch", ["gfx90a", "gfx942", "gfx1100"])
def test_gcn_object_is_elf(arch, make_job):
    obj = gpuc.compile(make_job(SAXPY, target=gpuc.GCNTarget(arch), kernel=True), "obj").output
    assert isinstance(obj, bytes) and obj[:4] == ELF_MAGIC
    assert obj[18:20] == (224).to_bytes(2, "little")  # e_machine: EM_AMDGPU


def test_gcn_kernel_calling_convention(make_job, filecheck):
    ir = gpuc.compile(make_job(STORE_KERNEL_IR, target=gpuc.GCNTarget(), kernel=True)).output
    filecheck(ir, "CHECK: target triple = \"amdgcn-amd-amdhsa\"\nCHECK: define amdgpu_kernel void @kernel(\n")


# -- SPIR-V ------------------------------------------------------------------------------------

def test_spirv_binary_passes_spirv_val(make_job, spirv_val):
    binary = gpuc.compile(make_job(SAXPY, target=gpuc.SPIRVTarget(), kernel=True), "obj").output
    assert isinstance(binary, bytes) and len(binary) % 4 == 0
    assert int.from_bytes(binary[:4], "little") == SPIRV_MAGIC
    spirv_val(binary)


def test_spirv_assembly(make_job, filecheck):
    ir = SINF_KERNEL.replace("__nv_sinf", "llvm.sin.f32")
    text = asm(make_job, ir, gpuc.SPIRVTarget(), kernel=True)
    filecheck(text, "CHECK: OpCapability Kernel\nCHECK: OpEntryPoint Kernel %[[K:[0-9]+]] \"kernel\"\n"
                    "CHECK: OpExtInst {{.*}} sin\n")
    filecheck(gpuc.compile(make_job(ir, target=gpuc.SPIRVTarget(), kernel=True)).output,
              "CHECK: define spir_kernel void @kernel(\n")


def test_spirv_many_compiles_in_one_process_stay_valid(make_job, spirv_val):
    # Regression: LLVM 22's SPIR-V backend caches IR addresses process-wide, so a later module whose
    # objects reused freed addresses got duplicate ids ("Id N is defined more than once"), in a few
    # percent of compiles. gpuc emits SPIR-V in a forked child, leaving the parent's state clean.
    jobs = [make_job(SAXPY, target=gpuc.SPIRVTarget(), kernel=True),
            make_job(STORE_KERNEL_IR, target=gpuc.SPIRVTarget(), kernel=True)]
    for i in range(60):
        spirv_val(gpuc.compile(jobs[i % 2], "obj").output)


def test_spirv_seed_kernel(make_job, spirv_val):
    gpuc.register_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls)
    seed = SEED_IR.replace("ptr %p", "ptr addrspace(1) %p")
    spirv_val(gpuc.compile(make_job(seed, target=gpuc.SPIRVTarget(), kernel=True), "obj").output)


# -- native ------------------------------------------------------------------------------------

def test_native_asm_and_object(make_job, filecheck):
    gpuc.register_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls)
    text = asm(make_job, SEED_IR, gpuc.NativeTarget())
    filecheck(text, "CHECK: .globl kernel\nCHECK: kernel:\nCHECK-NOT: gpucompiler.mark\nCHECK: ret\n")
    assert gpuc.code_native(make_job(SEED_IR)) == text
    obj = gpuc.compile(make_job(SEED_IR), "obj").output
    assert isinstance(obj, bytes) and obj[:4] == ELF_MAGIC
    assert b"kernel" in obj and b"gpucompiler.mark" not in obj


def test_native_bitcode(make_job):
    gpuc.register_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls)
    bc = gpuc.compile(make_job(SEED_IR), "bc").output
    assert bc[:4] == b"BC\xc0\xde"


def test_only_the_entry_stays_external(make_job, filecheck):
    ir = gpuc.compile(make_job(SAXPY)).output  # native: @axpy is inlined and dropped
    filecheck(ir, "CHECK-NOT: @axpy\nCHECK: define void @kernel(\nCHECK-NOT: @axpy\n")
    helper_kept = SAXPY + "define float @other(float %x) {\n  ret float %x\n}\n"
    out = gpuc.compile(make_job(helper_kept, opt_level=0)).output
    filecheck(out, "CHECK-NOT: @other\nCHECK: define internal float @axpy(\nCHECK: define void @kernel(\n")


def test_spirv_loop_exit_values_stay_64_bit(make_job, spirv_val):
    # Regression: IndVarSimplify rewrote a loop's exit value (the sum 0 + 1 + ... + n-1) in closed
    # form with an i65 product, which the SPIR-V backend cannot lower; SPIRVTarget omits indvars.
    ir = """\
define i64 @tri(i64 %n) {
entry:
  %empty = icmp sle i64 %n, 0
  br i1 %empty, label %done, label %loop
loop:
  %k = phi i64 [ 0, %entry ], [ %k1, %loop ]
  %s = phi i64 [ 0, %entry ], [ %s1, %loop ]
  %s1 = add i64 %s, %k
  %k1 = add nsw i64 %k, 1
  %more = icmp slt i64 %k1, %n
  br i1 %more, label %loop, label %done
done:
  %r = phi i64 [ 0, %entry ], [ %s1, %loop ]
  ret i64 %r
}
"""
    job = make_job(ir, entry="tri", target=gpuc.SPIRVTarget())
    assert "i65" not in gpuc.compile(job).output
    spirv_val(gpuc.compile(job, "obj").output)
    assert "indvars" not in str(gpuc.build_pipeline(gpuc.SPIRVTarget(), 2))
