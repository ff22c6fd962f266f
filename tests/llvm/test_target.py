"""Targets and target machines (host, NVPTX, AMDGPU, SPIR-V), code emission and pass pipelines."""

import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

import gpuc.llvm as llvm

from support.llvm_testing import filecheck

SAXPY = """
define void @saxpy(ptr %x, ptr %y, float %a, i64 %i) {
entry:
  %px = getelementptr inbounds float, ptr %x, i64 %i
  %py = getelementptr inbounds float, ptr %y, i64 %i
  %vx = load float, ptr %px
  %vy = load float, ptr %py
  %m = fmul float %a, %vx
  %s = fadd float %m, %vy
  store float %s, ptr %py
  ret void
}
"""

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# name, triple, cpu, features, LLVM target name, can emit an object file
TARGETS = [
    ("X86", None, "", "", "x86-64", True),
    ("NVPTX", "nvptx64-nvidia-cuda", "sm_90", "+ptx80", "nvptx64", False),
    ("AMDGPU", "amdgcn-amd-amdhsa", "gfx90a", "", "amdgcn", True),
    ("SPIRV", "spirv64-unknown-unknown", "", "", "spirv64", True),
]


def make_machine(spec):
    name, triple, cpu, features, target_name, _ = spec
    llvm.initialize(name)
    llvm.initialize(name)  # idempotent
    triple = triple or llvm.host_triple()
    target = llvm.Target.from_triple(triple)
    assert target.name == target_name and target.triple == triple
    return target.machine(cpu, features)


@pytest.fixture(scope="module", params=TARGETS, ids=[t[0] for t in TARGETS])
def machine(request):
    with make_machine(request.param) as tm:
        yield tm, request.param


def compile_module(tm, source=SAXPY, cc=None):
    m = llvm.Module.parse(source)
    m.triple, m.data_layout = tm.triple, tm.data_layout
    if cc:
        m.functions["saxpy"].calling_convention = cc
    return m


def test_machine_description(machine):
    tm, (_, _, cpu, features, _, _) = machine
    assert (tm.cpu, tm.features) == (cpu, features)
    assert tm.data_layout.startswith("e")
    with tm.target_data() as td:
        assert td.pointer_size == 8
        assert str(td) == tm.data_layout


def test_emit_assembly_and_object(machine):
    tm, (name, _, _, _, _, has_obj) = machine
    m = compile_module(tm)
    llvm.run_passes(m, "default<O2>", tm)
    asm = tm.emit(m, "asm").decode()
    assert "saxpy" in asm
    if has_obj:
        obj = tm.emit(m, "obj")
        magic = {"X86": b"\x7fELF", "AMDGPU": b"\x7fELF", "SPIRV": b"\x03\x02\x23\x07"}[name]
        assert obj[:4] == magic
    else:
        with pytest.raises(llvm.LLVMError, match="can't emit a file of this type"):
            tm.emit(m, "obj")


def test_ptx_kernel():
    tm = make_machine(TARGETS[1])
    m = compile_module(tm, cc="ptx_kernel")
    filecheck(tm.emit(m, "asm").decode(), """
; CHECK: .version 8.0
; CHECK: .target sm_90
; CHECK: .address_size 64
; CHECK: .visible .entry saxpy(
; CHECK: {{(mul|fma)}}.rn.f32
; CHECK: ret;
""")


def test_amdgpu_kernel():
    tm = make_machine(TARGETS[2])
    m = compile_module(tm, cc="amdgpu_kernel")
    filecheck(tm.emit(m, "asm").decode(), """
; CHECK: .amdgcn_target "amdgcn-amd-amdhsa--gfx90a
; CHECK-LABEL: saxpy:
; CHECK: s_endpgm
""")


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
def test_ptx_passes_ptxas(tmp_path):
    tm = make_machine(TARGETS[1])
    (tmp_path / "k.ptx").write_bytes(tm.emit(compile_module(tm, cc="ptx_kernel"), "asm"))
    subprocess.run(["ptxas", "-arch=sm_90", str(tmp_path / "k.ptx"), "-o", str(tmp_path / "k.cubin")],
                   check=True, capture_output=True, timeout=60)


@pytest.mark.skipif(shutil.which("spirv-val") is None, reason="spirv-val not installed")
def test_spirv_binary_passes_spirv_val(tmp_path):
    # In a fresh process: LLVM 22's SPIR-V backend keeps static state between compilations
    # (llvm/llvm-project#160613), so a later binary in the same process is sometimes invalid.
    code = textwrap.dedent(f"""
        import sys
        from test_target import TARGETS, compile_module, make_machine
        tm = make_machine(TARGETS[3])
        sys.stdout.buffer.write(tm.emit(compile_module(tm, cc="spir_kernel"), "obj"))
    """)
    # gpuc, tests/ (for support) and this directory (for test_target itself)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, os.path.join(REPO, "tests"), os.path.dirname(__file__)]))
    spv = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, check=True, timeout=60).stdout
    (tmp_path / "k.spv").write_bytes(spv)
    subprocess.run(["spirv-val", str(tmp_path / "k.spv")], check=True, capture_output=True, timeout=60)


def test_spirv_machine_can_be_reused(ctx):
    # Regression: a second emission with one SPIR-V machine crashed the process (llvm/llvm-project#223774).
    tm = make_machine(TARGETS[3])
    for _ in range(10):
        m = llvm.Module.parse(SAXPY, ctx)
        m.triple, m.data_layout = tm.triple, tm.data_layout
        assert b"OpFunction" in tm.emit(m, "asm") and tm.emit(m, "obj")[:4] == b"\x03\x02\x23\x07"


def test_emit_leaves_the_module_unchanged(ctx):
    for spec in TARGETS:
        tm = make_machine(spec)
        m = compile_module(tm)
        before = str(m)
        tm.emit(m, "asm")
        assert str(m) == before, spec[0]


def test_emit_rejects_unknown_kind_and_invalid_ir(host_machine, ctx):
    m = llvm.Module.parse(SAXPY, ctx)
    with pytest.raises(ValueError, match="emit kind"):
        host_machine.emit(m, "exe")
    m.functions["saxpy"].entry_block.terminator.erase()
    with pytest.raises(llvm.LLVMError, match="does not have terminator"):
        host_machine.emit(m, "obj")  # would crash the code generator


@pytest.mark.parametrize("kind", ["asm", "obj"])
def test_emit_reports_error_diagnostics(host_machine, ctx, kind):
    # Invalid inline assembly fails only through an error diagnostic, not the emit status.
    m = llvm.Module.parse('define void @f() {\n  call void asm sideeffect "bogus_mnemonic", ""()\n  ret void\n}\n', ctx)
    with pytest.raises(llvm.LLVMError, match="invalid instruction mnemonic 'bogus_mnemonic'"):
        host_machine.emit(m, kind)
    assert ctx.take_diagnostics() == []


CTRL_C = textwrap.dedent("""
    import _thread, threading, time
    import gpuc.llvm as llvm
    from gpuc.llvm import capi

    llvm.initialize("X86")
    tm = llvm.Target.from_triple(llvm.host_triple()).machine()
    body = "\\n".join(f"  %x{i + 1} = mul i64 %x{i}, %x{max(i - 7, 0)}" for i in range(300))
    functions = [f"define i64 @f{k}(i64 %x0) {{\\n{body}\\n  ret i64 %x300\\n}}" for k in range(20)]
    bogus = 'define void @last() {\\n  call void asm sideeffect "bogus_mnemonic", ""()\\n  ret void\\n}'
    module = llvm.Module.parse("\\n".join(functions + [bogus]))  # codegen reports the error at the end
    module.triple, module.data_layout = tm.triple, tm.data_layout

    def interrupt_during_emission():
        while not any(isinstance(c, tuple) and c and c[0] is tm for calls in capi.calls_elsewhere() for c in calls):
            time.sleep(1e-4)
        time.sleep(0.005)
        _thread.interrupt_main()  # what Ctrl-C does

    threading.Thread(target=interrupt_during_emission, daemon=True).start()
    try:
        tm.emit(module, "obj", verify=False)
    except KeyboardInterrupt:
        print("interrupted")
    except llvm.LLVMError:
        try:
            time.sleep(5)
            print("lost")
        except KeyboardInterrupt:
            print("late")
    print(tm.emit(llvm.Module.parse("define i32 @g() {\\n  ret i32 1\\n}"), "obj")[:4] == b"\\x7fELF")
""")


def test_ctrl_c_during_code_generation_interrupts_it():
    # Regression: Ctrl-C in LLVM lands on the diagnostic callback's first line, where ctypes swallowed it.
    env = dict(os.environ, PYTHONPATH=REPO)
    out = subprocess.run([sys.executable, "-c", CTRL_C], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["interrupted", "True"], out.stderr
    assert "Exception ignored" not in out.stderr


def test_host_description():
    assert llvm.host_triple().startswith(("x86_64", "aarch64"))
    assert llvm.host_cpu()
    assert "+" in llvm.host_features() or "-" in llvm.host_features()


def test_unknown_target_and_triple():
    with pytest.raises(ValueError, match="does not support LLVM target 'Z80'"):
        llvm.initialize("Z80")
    with pytest.raises(llvm.LLVMError, match="no LLVM target for triple 'bogus-unknown-unknown'"):
        llvm.Target.from_triple("bogus-unknown-unknown")


# -- pass pipelines -------------------------------------------------------------------------------

LOOP = """
define i32 @f(i32 %n) {
entry:
  %p = alloca i32
  store i32 0, ptr %p
  %a = add i32 %n, 0
  %b = mul i32 %a, 1
  store i32 %b, ptr %p
  %r = load i32, ptr %p
  ret i32 %r
}
"""


@pytest.mark.parametrize("pipeline", [
    "default<O2>", "default<O0>", "function(instcombine)", "function(sroa,instcombine,simplifycfg)",
    "always-inline,function(sroa),cgscc(inline)", "globaldce",
])
def test_valid_pipelines(ctx, pipeline):
    m = llvm.Module.parse(LOOP, ctx)
    llvm.run_passes(m, pipeline)
    m.verify()


def test_optimization_happens(ctx, host_machine):
    m = llvm.Module.parse(LOOP, ctx)
    llvm.run_passes(m, "function(sroa,instcombine)", host_machine, verify_each=True)
    filecheck(str(m), """
; CHECK-LABEL: define i32 @f(i32 %n)
; CHECK-NOT: alloca
; CHECK-NOT: mul
; CHECK: ret i32 %n
""")


@pytest.mark.parametrize("pipeline, message", [
    ("function(notapass)", "unknown function pass 'notapass'"),
    ("default<O9>", "invalid optimization level"),
    ("function(instcombine", "invalid pipeline"),
])
def test_invalid_pipeline(ctx, pipeline, message):
    m = llvm.Module.parse(LOOP, ctx)
    before = str(m)
    with pytest.raises(llvm.LLVMError, match=re.escape(f"pipeline {pipeline!r}: ") + ".*" + message):
        llvm.run_passes(m, pipeline)
    assert str(m) == before


def test_passes_refuse_invalid_ir(module, builder, ctx):
    # Regression: LLVMRunPasses segfaulted on a block without a terminator.
    fn = module.add_function("f", llvm.FunctionType.get(ctx.i32, [ctx.i32]))
    builder.position_at_end(fn.append_block("e")).add(fn.args[0], fn.args[0])
    with pytest.raises(llvm.LLVMError, match="does not have terminator"):
        llvm.run_passes(module, "default<O2>")
