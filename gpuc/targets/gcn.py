"""AMD GCN: amdgcn-amd-amdhsa code objects, `amdgpu_kernel` entry points."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .interface import Target, split_intrinsic, unselectable_table

# Math intrinsics AMDGPU cannot select (it lowers sin/cos/exp/log/pow only in single precision).
_UNSELECTABLE = unselectable_table({
    "f16 bf16 f32 f64": "tan asin acos atan atan2 sinh cosh tanh modf",
    "f64": "sin cos exp exp2 exp10 log log2 log10 pow sincos",
    "bf16": "lrint llrint lround llround", "*": "clear_cache",
})
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

    def __post_init__(self) -> None:
        if not re.fullmatch(r"gfx[0-9a-f]+", self.arch):
            raise ValueError(f"GCNTarget arch must look like 'gfx90a', not {self.arch!r}")

    def triple(self) -> str:
        return "amdgcn-amd-amdhsa"

    def cpu(self) -> str:
        return self.arch

    def features(self) -> str:
        return self.feature_string

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
