"""What each backend cannot lower: the targets' tables checked against LLVM itself, and how validation reports it."""

from __future__ import annotations

import pytest

import gpuc
from gpuc import llvm
from gpuc.llvm.isolated import isolated_emit
from gpuc.targets.interface import float_element, split_intrinsic

FLOAT_TYPES = {"f16": "half", "bf16": "bfloat", "f32": "float", "f64": "double"}
GPU_TARGETS = {"ptx": gpuc.PTXTarget(), "gcn": gpuc.GCNTarget(), "spirv": gpuc.SPIRVTarget()}

# How each intrinsic of the tables is called: (return type, parameters, name suffix), with T the float type.
SHAPES = {
    "powi": ("T", "T, i32", "{m}.i32"), "ldexp": ("T", "T, i32", "{m}.i32"),
    "frexp": ("{T, i32}", "T", "{m}.i32"), "sincos": ("{T, T}", "T", "{m}"), "modf": ("{T, T}", "T", "{m}"),
    "lrint": ("i64", "T", "i64.{m}"), "llrint": ("i64", "T", "i64.{m}"),
    "lround": ("i64", "T", "i64.{m}"), "llround": ("i64", "T", "i64.{m}"),
    "clear_cache": ("void", "ptr, ptr", ""), "fma": ("T", "T, T, T", "{m}"),
}
BINARY = {"pow", "atan2", "minnum", "maxnum", "minimum", "maximum", "minimumnum", "maximumnum", "copysign"}


def intrinsic_module(target, base: str, m: str | None) -> tuple[str, str]:
    """(IR text, intrinsic name) of a function calling llvm.<base> on the float type `m`."""
    ty = FLOAT_TYPES.get(m, "float")
    ret, params, suffix = SHAPES.get(base, ("T", "T, T" if base in BINARY else "T", "{m}"))
    ret, params = ret.replace("T", ty), params.replace("T", ty)
    name = f"llvm.{base}" + (f".{suffix.format(m=m)}" if suffix else "")
    args = ", ".join(f"{p} %a{i}" for i, p in enumerate(params.split(", ")))
    body = f"call void @{name}({args})\n  ret void" if ret == "void" else \
        f"%r = call {ret} @{name}({args})\n  ret {ret} %r"
    text = (f'target triple = "{target.triple()}"\ndeclare {ret} @{name}({params})\n\n'
            f"define {ret} @f({args}) {{\n  {body}\n}}\n")
    return text, name


def emits(target, text: str) -> bool:
    """Whether the backend generates code for `text`, asked in a forked child that may crash."""
    tm = target.cached_target_machine()
    with llvm.Context() as ctx, llvm.Module.parse(text, ctx) as module:
        module.data_layout = tm.data_layout
        bitcode = module.to_bitcode()
    try:
        isolated_emit(bitcode, tm.triple, tm.cpu, tm.features, tm.opt_level, "asm", fresh=True)
    except llvm.LLVMError:
        return False
    return True


def table_entries(target) -> list[tuple[str, str | None]]:
    return [(base, None if base == "clear_cache" else m)
            for base, types in sorted(target.unselectable_intrinsics.items())
            for m in sorted(FLOAT_TYPES if "*" in types else types)]


@pytest.mark.parametrize("target_name", sorted(GPU_TARGETS))
def test_every_table_entry_fails_in_the_backend(target_name):
    # A table entry that the backend can lower would refuse valid code.
    target = GPU_TARGETS[target_name]
    modules = [intrinsic_module(target, base, m) for base, m in table_entries(target)]
    assert all(target.intrinsic_issue(name) is not None for _, name in modules)
    lowered = [name for text, name in modules if emits(target, text)]
    assert not lowered, f"{target!r} lowers {lowered}: remove them from its table"


# Neighbours of the table entries that the backends do lower: validation must let them through.
LOWERED = [("ptx", "sqrt", "f64"), ("ptx", "exp2", "f32"), ("ptx", "fma", "f64"), ("ptx", "floor", "f32"),
           ("gcn", "sin", "f32"), ("gcn", "exp", "f32"), ("gcn", "pow", "f32"), ("gcn", "sqrt", "f64"),
           ("spirv", "sin", "f64"), ("spirv", "pow", "f32")]


@pytest.mark.parametrize("target_name, base, m", LOWERED, ids=["-".join(c) for c in LOWERED])
def test_lowered_neighbours_pass(target_name, base, m):
    target = GPU_TARGETS[target_name]
    text, name = intrinsic_module(target, base, m)
    assert target.intrinsic_issue(name) is None
    assert emits(target, text)


def test_ptx_approximate_sine_needs_afn():
    target = gpuc.PTXTarget()
    text, name = intrinsic_module(target, "sin", "f32")
    assert target.intrinsic_issue(name) is not None and not emits(target, text)
    assert target.intrinsic_issue(name, approximate=True) is None
    assert emits(target, text.replace("call float", "call afn float"))


@pytest.mark.parametrize("name, split", [
    ("llvm.sin.f64", ("sin", ("f64",))), ("llvm.lround.i64.f32", ("lround", ("i64", "f32"))),
    ("llvm.powi.v4f32.i32", ("powi", ("v4f32", "i32"))), ("llvm.memcpy.p0.p1.i64", ("memcpy", ("p0", "p1", "i64"))),
    ("llvm.fptosi.sat.i32.f64", ("fptosi.sat", ("i32", "f64"))), ("llvm.trap", ("trap", ())),
    ("llvm.experimental.constrained.sin.f64", ("experimental.constrained.sin", ("f64",))),
])
def test_split_intrinsic(name, split):
    assert split_intrinsic(name) == split


def test_float_element():
    assert float_element(("v4f32", "i32")) == "f32" and float_element(("nxv2f64",)) == "f64"
    assert float_element(("i64",)) is None and float_element(("bf16",)) == "bf16"


def test_validation_report(make_job, filecheck):
    ir = """\
@tls = thread_local global i32 0
declare double @llvm.cos.f64(double)
declare i32 @llvm.amdgcn.workitem.id.x()

define void @kernel(ptr %p, double %x) {
  %c = call double @llvm.cos.f64(double %x)
  store double %c, ptr %p
  %i = call i32 @llvm.amdgcn.workitem.id.x()
  store i32 %i, ptr @tls
  ret void
}
"""
    with pytest.raises(gpuc.ValidationError) as info:
        gpuc.compile(make_job(ir, target=gpuc.PTXTarget()), "asm")
    filecheck(str(info.value), """
        CHECK: 3 problem(s)
        CHECK-DAG: - @kernel calls the intrinsic @llvm.cos.f64, which PTXTarget(cap='sm_90') cannot compile: {{.*}}llvm.cos on f64
        CHECK-DAG: - @kernel calls the intrinsic @llvm.amdgcn.workitem.id.x, {{.*}}: it is an intrinsic of the AMDGPU backend
        CHECK-DAG: - global @tls cannot be compiled for PTXTarget(cap='sm_90'): GPUs have no thread-local storage
        """)
    kinds = {(i.kind, i.function, i.symbol) for i in info.value.issues}
    assert ("unsupported-on-target", "kernel", "llvm.cos.f64") in kinds


def test_without_validation_only_lowering_is_checked_for_machine_code(make_job):
    # An unresolved external is left to the linker; an x86 intrinsic would abort NVPTX.
    ir = "declare void @ext()\ndeclare void @llvm.x86.sse2.pause()\n\ndefine void @kernel() {\n" \
         "  call void @ext()\n  call void @llvm.x86.sse2.pause()\n  ret void\n}\n"
    job = make_job(ir, target=gpuc.PTXTarget(), validate=False)
    with pytest.raises(gpuc.ValidationError) as info:
        gpuc.compile(job, "asm")
    assert [i.symbol for i in info.value.issues] == ["llvm.x86.sse2.pause"]
    assert "call void @llvm.x86.sse2.pause()" in gpuc.compile(job, "llvm").output  # IR output is not checked


def test_own_namespace_and_types_pass(make_job):
    # An x86 intrinsic every x86-64 CPU has (rdpid, used before, aborts LLVM on CPUs without RDPID).
    ir = ("declare void @llvm.x86.sse2.pause()\n\ndefine i32 @kernel(ptr %p) {\n  %v = load x86_fp80, ptr %p\n"
          "  %w = fadd x86_fp80 %v, %v\n  store x86_fp80 %w, ptr %p\n  call void @llvm.x86.sse2.pause()\n"
          "  ret i32 0\n}\n")
    assert gpuc.compile(make_job(ir), "obj").output


def test_target_extension_types(make_job):
    ir = 'define void @kernel(target("spirv.Image", void, 1, 0, 0, 0, 0, 0, 0) %i) {\n  ret void\n}\n'
    with pytest.raises(gpuc.ValidationError, match=r'@kernel uses type target .*target extension types'):
        gpuc.compile(make_job(ir), "obj")
    assert gpuc.compile(make_job(ir, target=gpuc.SPIRVTarget()), "llvm").output
