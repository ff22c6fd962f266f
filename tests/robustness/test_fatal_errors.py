"""IR that LLVM's code generators abort on: refused by validation, or contained in the helper process.

Each case once killed the Python process (SIGABRT "LLVM ERROR: Cannot select", SIGSEGV). Now it
runs in its own interpreter, which must get the documented error, naming the target and the
problem, and then compile a good module for the same target and a CPU kernel (the fixture).
"""

from __future__ import annotations

import pytest

CASE = """
import gpuc
IR = {ir!r}
GOOD = "define void @good(ptr %p) {{\\n  store i32 1, ptr %p\\n  ret void\\n}}\\n"
target = gpuc.{target}
try:
    gpuc.compile(gpuc.CompilerJob(gpuc.IRSource(IR, entry="f"), gpuc.CompilerConfig(target, **{config!r})),
                 {output!r})
except gpuc.{error} as exc:
    print("ERROR-TYPE-OK")
    print(exc)
else:
    print("NO-ERROR")
assert gpuc.compile(gpuc.CompilerJob(gpuc.IRSource(GOOD, entry="good"), gpuc.CompilerConfig(target)),
                    {output!r}).output
print("SAME-TARGET-OK")
"""

PTX, GCN, NATIVE = "PTXTarget()", "GCNTarget()", "NativeTarget()"
OUTPUT = {PTX: "asm", GCN: "asm", NATIVE: "obj"}


def call(intrinsic: str, ret: str = "void", args: str = "", decl_args: str = "") -> str:
    value = "" if ret == "void" else "%r = "
    tail = "ret void" if ret == "void" else f"ret {ret} %r"
    return (f"declare {ret} @{intrinsic}({decl_args})\n\ndefine {ret} @f(double %x) {{\n"
            f"  {value}call {ret} @{intrinsic}({args})\n  {tail}\n}}\n")


SIN_F64 = call("llvm.sin.f64", "double", "double %x", "double")

# (id, target, IR, config, expected error type, fragments of the message)
REFUSED = [
    ("sin-f64-ptx", PTX, SIN_F64, {}, ["PTXTarget", "@f calls the intrinsic @llvm.sin.f64", "cannot lower"]),
    ("sin-f64-gcn", GCN, SIN_F64, {}, ["GCNTarget", "@llvm.sin.f64", "AMDGPU backend cannot lower llvm.sin on f64"]),
    ("x86-on-ptx", PTX, call("llvm.x86.sse2.pause"), {}, ["PTXTarget", "@llvm.x86.sse2.pause", "X86 backend"]),
    ("nvvm-on-gcn", GCN, call("llvm.nvvm.read.ptx.sreg.tid.x", "i32"), {}, ["GCNTarget", "NVPTX backend"]),
    ("nvvm-on-native", NATIVE, call("llvm.nvvm.read.ptx.sreg.tid.x", "i32"), {}, ["NativeTarget", "NVPTX"]),
    ("amdgcn-on-ptx", PTX, call("llvm.amdgcn.workitem.id.x", "i32"), {}, ["PTXTarget", "AMDGPU backend"]),
    ("thread-local-gcn", GCN, "@g = thread_local global i32 0\n\ndefine void @f() {\n  store i32 1, ptr @g\n"
     "  ret void\n}\n", {}, ["global @g", "GCNTarget", "thread-local"]),
    ("vscale-native", NATIVE, "define <vscale x 4 x i32> @f(<vscale x 4 x i32> %a) {\n"
     "  %r = add <vscale x 4 x i32> %a, %a\n  ret <vscale x 4 x i32> %r\n}\n", {},
     ["@f uses type vscale", "NativeTarget", "scalable vectors"]),
    ("ppc-fp128-native", NATIVE, "define ppc_fp128 @f(ppc_fp128 %a) {\n  %r = fadd ppc_fp128 %a, %a\n"
     "  ret ppc_fp128 %r\n}\n", {}, ["@f uses type ppc_fp128", "NativeTarget"]),
    ("frameaddress-gcn", GCN, call("llvm.frameaddress.p0", "ptr", "i32 0", "i32"), {},
     ["GCNTarget", "@llvm.frameaddress.p0", "address space 5"]),
    # Without optimization validation is off, but what the backend cannot lower is still checked.
    ("x86-fp80-ptx-no-opt", PTX, "define void @f(ptr %p) {\n  %v = load x86_fp80, ptr %p\n"
     "  %w = fadd x86_fp80 %v, %v\n  store x86_fp80 %w, ptr %p\n  ret void\n}\n",
     {"optimize": False, "validate": False}, ["@f uses type x86_fp80", "PTXTarget"]),
    ("sin-f64-ptx-no-validate", PTX, SIN_F64, {"validate": False}, ["PTXTarget", "@llvm.sin.f64"]),
]

# IR that validation does not know to refuse: the helper process crashes instead of this one
# (compiled without optimization, which would otherwise turn some of it into plain code).
CONTAINED = [
    ("indirectbr-ptx", PTX, "define i32 @f(i1 %c) {\nentry:\n  %a = select i1 %c, ptr blockaddress(@f, %x), "
     "ptr blockaddress(@f, %y)\n  indirectbr ptr %a, [label %x, label %y]\nx:\n  ret i32 1\ny:\n  ret i32 2\n}\n",
     ["PTXTarget", "crashed", "Cannot select"]),
    ("fptosi-i128-ptx", PTX, "define i128 @f(double %a) {\n  %r = fptosi double %a to i128\n  ret i128 %r\n}\n",
     ["PTXTarget", "crashed", "unsupported library call"]),
    ("alias-ptx", PTX, "@g = global i32 0\n@a = alias i32, ptr @g\n\ndefine i32 @f() {\n  %v = load i32, ptr @a\n"
     "  ret i32 %v\n}\n", ["PTXTarget", "crashed", "NVPTX aliasee must be a non-kernel function definition"]),
    # An error LLVM reports without aborting: the same error type, without "crashed".
    ("cmpxchg-i128-gcn", GCN, "define i128 @f(ptr %p, i128 %a, i128 %b) {\n"
     "  %r = cmpxchg ptr %p, i128 %a, i128 %b seq_cst seq_cst\n  %v = extractvalue {i128, i1} %r, 0\n"
     "  ret i128 %v\n}\n", ["GCNTarget", "unsupported cmpxchg"]),
    ("addrspace-99-gcn", GCN, "define i32 @f(ptr addrspace(99) %p) {\n  %v = load i32, ptr addrspace(99) %p\n"
     "  ret i32 %v\n}\n", ["GCNTarget", "crashed", "Cannot select"]),
]


def run_case(survive, target, ir, config, error):
    result = survive(CASE.format(ir=ir, target=target, config=config, output=OUTPUT[target], error=error))
    assert "ERROR-TYPE-OK" in result.stdout, result.stdout + result.stderr
    assert "SAME-TARGET-OK" in result.stdout, result.stdout + result.stderr
    return result.stdout


@pytest.mark.parametrize("target, ir, config, fragments", [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_validation_refuses_what_the_backend_aborts_on(survive, target, ir, config, fragments):
    out = run_case(survive, target, ir, config, "ValidationError")
    for fragment in fragments:
        assert fragment in out, out


@pytest.mark.parametrize("target, ir, fragments", [c[1:] for c in CONTAINED], ids=[c[0] for c in CONTAINED])
def test_backend_crash_is_contained(survive, target, ir, fragments):
    out = run_case(survive, target, ir, {"optimize": False}, "InternalCompilerError")
    for fragment in fragments:
        assert fragment in out, out


def test_cli_no_opt_x86_fp80_for_ptx(survive, tmp_path):
    # `gpuc compile --no-opt` skipped validation, and NVPTX aborted on x86_fp80.
    (tmp_path / "wide.ll").write_text("define void @f(ptr %p) {\n  %v = load x86_fp80, ptr %p\n"
                                      "  %w = fadd x86_fp80 %v, %v\n  store x86_fp80 %w, ptr %p\n  ret void\n}\n")
    result = survive("""
        import sys
        from gpuc.cli import main
        status = main(["compile", "wide.ll", "--entry", "f", "--target", "ptx", "--emit", "asm", "--no-opt"])
        print("STATUS", status)
        """)
    assert "STATUS 0" not in result.stdout and "STATUS" in result.stdout, result.stdout + result.stderr
    assert "x86_fp80" in result.stderr and "PTXTarget" in result.stderr, result.stderr


def test_python_kernel_with_non_ascii_names_for_ptx(survive):
    # NVPTX aborted with "Symbol name with unsupported characters" on a kernel named in Cyrillic.
    result = survive("""
        import gpuc

        @gpuc.func
        def удвоить(x):
            return 2.0 * x

        @gpuc.kernel
        def ядро(выход, значение):
            выход[gpuc.index()] = удвоить(значение)

        job = gpuc.CompilerJob((ядро, (gpuc.Array[gpuc.float32, 1], gpuc.float32)),
                               gpuc.CompilerConfig(gpuc.PTXTarget()))
        result = gpuc.compile(job, "asm")
        assert result.entry.isascii() and "$" in result.entry, result.entry
        assert f".entry {result.entry}(" in result.output, result.output
        print("ENTRY", result.entry)
        """)
    assert "ENTRY " in result.stdout


PLUGIN_CASE = """
import gpuc
from gpuc.llvm import Module

EVIL = {evil!r}

def resolve(job, marker, module):
    if not marker.uses:
        return False
    module.link(Module.parse(EVIL, module.context))
    marker.replace_all_uses_with(module.functions["evil_impl"])
    return True

plugin = gpuc.make_plugin("test.evil", early_callback=resolve)
evil = gpuc.marker("test.evil", gpuc.int64, (gpuc.{argtype},))

@gpuc.kernel
def k(x, out):
    i = gpuc.index()
    out[i] = evil(x[i])

types = (gpuc.Array[gpuc.{argtype}, 1], gpuc.Array[gpuc.int64, 1])
try:
    gpuc.compile(gpuc.CompilerJob((k, types), gpuc.CompilerConfig(gpuc.{target}, plugins=[plugin])), {output!r})
except gpuc.{error} as exc:
    print("ERROR-TYPE-OK")
    print(exc)
"""

PLUGIN_CASES = [
    # The module is no longer gpuc's own, so PTX generates its code in the helper process.
    ("ptx-helper", PTX, "float64", "define i64 @evil_impl(double %x) {\n  %w = fptosi double %x to i128\n"
     "  %h = lshr i128 %w, 64\n  %r = trunc i128 %h to i64\n  ret i64 %r\n}\n", "InternalCompilerError",
     ["PTXTarget", "crashed", "unsupported library call"]),
    # ... and the CPU, which has no helper, scans the printed module for types, not the source.
    ("native-types", NATIVE, "int64", "define i64 @evil_impl(i64 %x) {\n  %a = sitofp i64 %x to ppc_fp128\n"
     "  %b = fmul ppc_fp128 %a, %a\n  %r = fptosi ppc_fp128 %b to i64\n  ret i64 %r\n}\n", "ValidationError",
     ["@evil_impl uses type ppc_fp128", "NativeTarget"]),
]


@pytest.mark.parametrize("target, argtype, evil, error, fragments", [c[1:] for c in PLUGIN_CASES],
                         ids=[c[0] for c in PLUGIN_CASES])
def test_third_party_plugin_ir(survive, target, argtype, evil, error, fragments):
    # A plugin links IR the backend aborts on into a Python kernel.
    result = survive(PLUGIN_CASE.format(evil=evil, argtype=argtype, target=target, output=OUTPUT[target],
                                        error=error))
    assert "ERROR-TYPE-OK" in result.stdout, result.stdout + result.stderr
    for fragment in fragments:
        assert fragment in result.stdout, result.stdout
