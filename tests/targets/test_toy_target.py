"""A new target is one class plus its registration: toy copies of SPIRVTarget and NativeTarget,
defined here and nowhere in gpuc, compile kernels (and the CPU one runs them)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

import gpuc
from gpuc.llvm import CALLING_CONVENTIONS, ConstantInt, FunctionType, Module, host_cpu, host_features, host_triple
from gpuc.runtime import cpu
from gpuc.targets import (ARCHITECTURES, CONTEXT_POINTER, TARGETS, MathLowering, MathOp, Target, register_target,
                          unregister_target)
from gpuc.targets.cpu_launch import add_launch_entry
from gpuc.targets.interface import unselectable_table, without_pass


# -- SPIRVTarget's class body, under another name ----------------------------------------------

_UNSELECTABLE = unselectable_table({
    "f16 bf16 f32 f64": "canonicalize exp10 frexp ldexp lrint llrint maximumnum minimumnum sincos",
    "bf16": "sin cos tan asin acos atan atan2 sinh cosh tanh exp exp2 log log2 log10 pow powi modf sqrt fabs "
            "floor ceil trunc rint nearbyint round roundeven lround llround copysign fma minnum maxnum "
            "minimum maximum",
})


@dataclass(frozen=True, repr=False)
class ToyTarget(Target):
    name = "toy"
    llvm_target = "SPIRV"
    kernel_calling_convention = "spir_kernel"
    is_gpu = True
    intrinsic_namespaces = ("llvm.spv.",)
    unselectable_intrinsics = _UNSELECTABLE
    stateful_codegen = True
    array_address_space = 1
    float_atomics = False
    float_atomics_missing = "are beyond the toy target"
    math_library = "OpenCL"

    def triple(self) -> str:
        return "spirv64-unknown-unknown"

    def allows_external(self, name: str) -> bool:
        return name.startswith(("llvm.", "_Z", "__spirv_"))

    def math_library_call(self, op: MathOp, bits: int) -> MathLowering:
        return MathLowering("call", f"_Z{len(op.c_name)}{op.c_name}" + ("f" if bits == 32 else "d") * op.params)

    def global_index(self, builder, module: Module, dim: int):
        llctx = module.context
        fn = module.get_or_insert_function("_Z13get_global_idj", FunctionType.get(llctx.i64, [llctx.i32]))
        fn.calling_convention = "spir_func"
        call = builder.call(fn, [ConstantInt.get(llctx.i32, dim)], f"index{dim}")
        call.calling_convention = CALLING_CONVENTIONS["spir_func"]
        return call

    def unsupported_type(self, type_text: str) -> str | None:
        if type_text in ("x86_fp80", "fp128", "ppc_fp128"):
            return "SPIR-V has no 80- or 128-bit floating point"
        if type_text == "target":
            return None
        return super().unsupported_type(type_text)

    def pipeline_segments(self, opt_level: int) -> dict[str, str]:
        segments = super().pipeline_segments(opt_level)
        return {name: without_pass(text, "indvars") for name, text in segments.items()}

    def __repr__(self) -> str:
        return "ToyTarget()"


# -- NativeTarget's class body, under another name ---------------------------------------------

@dataclass(frozen=True, repr=False)
class ToyCPUTarget(Target):
    cpu_name: str | None = None
    feature_string: str | None = None
    triple_name: str | None = None

    name = "toycpu"
    launch_context = CONTEXT_POINTER
    math_library = "libm"
    math_instructions = {"fmod": "frem"}

    def __post_init__(self) -> None:
        triple = self.triple_name or host_triple()
        on_host = triple == host_triple()
        object.__setattr__(self, "triple_name", triple)
        object.__setattr__(self, "cpu_name", self.cpu_name or (host_cpu() if on_host else "generic"))
        object.__setattr__(self, "feature_string", self.feature_string or (host_features() if on_host else ""))
        llvm_target, namespaces = ARCHITECTURES[triple.split("-", 1)[0]]
        object.__setattr__(self, "llvm_target", llvm_target)
        object.__setattr__(self, "intrinsic_namespaces", namespaces)
        object.__setattr__(self, "host_executable", on_host)

    def triple(self) -> str:
        return self.triple_name

    def cpu(self) -> str:
        return self.cpu_name

    def features(self) -> str:
        return self.feature_string

    def math_library_call(self, op: MathOp, bits: int) -> MathLowering:
        return MathLowering("call", f"{op.c_name}f" if bits == 32 else op.c_name)

    def pipeline_segments(self, opt_level: int) -> dict[str, str]:
        segments = super().pipeline_segments(opt_level)
        return {name: without_pass(text, "slp-vectorizer") for name, text in segments.items()}

    def add_launch_entry(self, job, module, entry):
        return add_launch_entry(job, module, entry)


# -- kernels -----------------------------------------------------------------------------------

@gpuc.func
def blur(a, i, n):
    return (a[i] + a[(i + 1) % n]) * 0.5


@gpuc.kernel
def smooth(out, a, counts):
    i = gpuc.index()
    out[i] = math.sqrt(abs(blur(a, i, gpuc.ndrange()))) + math.erf(a[i]) + math.fmod(a[i], 0.75)
    gpuc.atomic_add(counts, 0, 1)


@gpuc.kernel
def grid(out):
    out[gpuc.index(0), gpuc.index(1)] = gpuc.index(0) * gpuc.ndrange(1) + gpuc.index(1)


@gpuc.kernel
def float_sum(total, a):
    gpuc.atomic_add(total, 0, a[gpuc.index()])


F32, I64 = gpuc.Array[gpuc.float32, 1], gpuc.Array[gpuc.int64, 1]
SMOOTH = (smooth, (F32, F32, I64))
GRID = (grid, (gpuc.Array[gpuc.int64, 2],))


@pytest.fixture
def registered():
    for cls in (ToyTarget, ToyCPUTarget):
        register_target(cls)
    yield
    for cls in (ToyTarget, ToyCPUTarget):
        unregister_target(cls.name)


def compile_for(target, case, output):
    return gpuc.compile(gpuc.CompilerJob(case, gpuc.CompilerConfig(target, kernel=True)), output)


def test_registration_lists_the_toys(registered, capsys):
    assert TARGETS["toy"] is ToyTarget and TARGETS["toycpu"] is ToyCPUTarget
    from gpuc.cli import main
    assert main(["targets"]) == 0
    assert "toy " in capsys.readouterr().out
    with pytest.raises(ValueError, match="replace=True"):
        register_target(type("Other", (ToyTarget,), {}))


@pytest.mark.parametrize("case", [SMOOTH, GRID], ids=["smooth", "grid"])
def test_toy_gpu_compiles_kernels(registered, case, spirv_val):
    ir = compile_for(ToyTarget(), case, "llvm").output
    assert "spir_kernel" in ir and "@_Z13get_global_idj" in ir and "@gpuc.ctx." not in ir
    assert "ptr addrspace(1)" in ir
    if case is SMOOTH:
        assert "@_Z3erff" in ir and "@_Z4fmodff" in ir and "atomicrmw add" in ir
    spirv_val(compile_for(ToyTarget(), case, "obj").output)


def test_toy_gpu_refuses_float_atomics_in_its_own_words(registered):
    with pytest.raises(gpuc.CompilationError, match="atomic_add on float64 arrays are beyond the toy target"):
        compile_for(ToyTarget(), (float_sum, (gpuc.Array[gpuc.float64, 1], gpuc.Array[gpuc.float64, 1])), "llvm")


def test_toy_cpu_compiles_and_runs(registered):
    asm = compile_for(ToyCPUTarget(), SMOOTH, "asm").output
    assert "smooth" in asm
    a = np.linspace(-3, 3, 1000, dtype=np.float32)
    out, counts = np.zeros_like(a), np.zeros(1, np.int64)
    signature = [("array", "float32", 1), ("array", "float32", 1), ("array", "int64", 1)]
    module = cpu.load(gpuc.CompilerJob(SMOOTH, gpuc.CompilerConfig(ToyCPUTarget(), kernel=True)), signature)
    try:
        cpu.launch(module, a.size, (out, a, counts))
    finally:
        module.close()
    blurred = (a + np.roll(a, -1)) * np.float32(0.5)
    want = np.sqrt(np.abs(blurred)) + np.vectorize(math.erf, otypes=[np.float32])(a) + np.fmod(a, np.float32(0.75))
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    assert counts[0] == a.size


def test_the_cli_compiles_for_a_registered_target(registered, tmp_path, capsys):
    from gpuc.cli import main
    source = tmp_path / "k.ll"
    source.write_text("define void @k(ptr addrspace(1) %p) {\n  store i32 1, ptr addrspace(1) %p\n  ret void\n}\n")
    assert main(["compile", str(source), "--entry", "k", "--kernel", "--target", "toy", "--emit", "asm",
                 "-o", str(tmp_path / "k.spvasm")]) == 0
    assert "OpEntryPoint Kernel" in (tmp_path / "k.spvasm").read_text()
