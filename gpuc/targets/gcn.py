"""AMD GCN: amdgcn-amd-amdhsa code objects, `amdgpu_kernel` entry points."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .interface import Target


@dataclass(frozen=True, repr=False)
class GCNTarget(Target):
    """AMDGPU code for the given `arch` ("gfx90a", "gfx942", ...)."""

    arch: str = "gfx90a"
    feature_string: str = ""

    name = "gcn"
    llvm_target = "AMDGPU"
    kernel_calling_convention = "amdgpu_kernel"
    is_gpu = True

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
        if "x86_fp80" in type_text or "fp128" in type_text:
            return "AMDGPU has no 80- or 128-bit floating point"
        return None

    def __repr__(self) -> str:
        return f"GCNTarget(arch={self.arch!r})"
