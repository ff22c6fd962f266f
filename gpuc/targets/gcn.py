"""AMD GCN: amdgcn-amd-amdhsa code objects, `amdgpu_kernel` entry points."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..llvm import ConstantInt, FunctionType, Module
from .interface import Target, split_intrinsic, unselectable_table

# Math intrinsics AMDGPU cannot select (it lowers sin/cos/exp/log/pow only in single precision).
_UNSELECTABLE = unselectable_table({
    "f16 bf16 f32 f64": "tan asin acos atan atan2 sinh cosh tanh modf",
    "f64": "sin cos exp exp2 exp10 log log2 log10 pow sincos",
    "bf16": "lrint llrint lround llround", "*": "clear_cache",
})
# The math functions AMDGPU expands itself, per float width: llvm.sin.f64 and llvm.pow.f64 crash its
# instruction selection, llvm.asin and friends fail with "no libcall". gpuc links no device math
# library for AMD GPUs, so nothing else is available there.
_EXPANDED = frozenset({"sqrt", "floor", "ceil", "trunc", "fabs", "copysign", "fma"})
_MATH_INTRINSICS = {32: _EXPANDED | {"exp", "exp2", "log", "log2", "log10", "sin", "cos", "pow"}, 64: _EXPANDED}
# Intrinsics on the stack, which lower only for pointers into the private address space (5).
_STACK_INTRINSICS = ("frameaddress", "stacksave", "stackrestore")


@dataclass(frozen=True, repr=False)
class GCNTarget(Target):
    """AMDGPU code for the given `arch` ("gfx90a", "gfx942", ...)."""

    arch: str = "gfx90a"
    feature_string: str = ""

    name = "gcn"
    llvm_target = "AMDGPU"
    kernel_calling_convention = "amdgpu_kernel"
    is_gpu = True
    intrinsic_namespaces = ("llvm.amdgcn.",)
    unselectable_intrinsics = _UNSELECTABLE
    isolated_codegen = True
    array_address_space = 1  # global
    math_intrinsics = _MATH_INTRINSICS
    # `frem` is C's fmod, which the AMDGPU backend expands exactly (an iterative reduction).
    math_instructions = {"fmod": "frem"}
    cli_options = {"arch": ("arch", "GCN architecture")}

    def __post_init__(self) -> None:
        if not re.fullmatch(r"gfx[0-9a-f]+", self.arch):
            raise ValueError(f"GCNTarget arch must look like 'gfx90a', not {self.arch!r}")

    def triple(self) -> str:
        return "amdgcn-amd-amdhsa"

    def cpu(self) -> str:
        return self.arch

    def features(self) -> str:
        return self.feature_string

    def global_index(self, builder, module: Module, dim: int):
        # workgroup id * workgroup size + work-item id; the workgroup size comes from the HSA
        # dispatch packet: u16 workgroup_size_{x,y,z} at byte 4, 6, 8.
        llctx = module.context
        i64, xyz = llctx.i64, "xyz"[dim]

        def read(name: str, ty):
            return builder.call(module.get_or_insert_function(name, FunctionType.get(ty, [])), [])

        block = builder.zext(read(f"llvm.amdgcn.workgroup.id.{xyz}", llctx.i32), i64)
        thread = builder.zext(read(f"llvm.amdgcn.workitem.id.{xyz}", llctx.i32), i64)
        packet = read("llvm.amdgcn.dispatch.ptr", llctx.ptr(4))
        field = builder.gep(llctx.i8, packet, [ConstantInt.get(i64, 4 + 2 * dim)])
        threads = builder.zext(builder.load(llctx.int_type(16), field, align=2), i64)
        return builder.add(builder.mul(block, threads), thread, f"index{dim}")

    def unsupported_type(self, type_text: str) -> str | None:
        if type_text in ("x86_fp80", "fp128", "ppc_fp128"):
            return "AMDGPU has no 80- or 128-bit floating point"
        return super().unsupported_type(type_text)

    def intrinsic_issue(self, name: str, approximate: bool = False) -> str | None:
        base, suffixes = split_intrinsic(name)
        if base in _STACK_INTRINSICS and suffixes != ("p5",):
            return (f"AMDGPU's stack is in address space 5: llvm.{base} lowers only as llvm.{base}.p5, "
                    f"not {name}")
        return super().intrinsic_issue(name, approximate)

    def __repr__(self) -> str:
        return f"GCNTarget(arch={self.arch!r})"
