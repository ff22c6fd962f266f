"""SPIR-V: spirv64 modules (OpenCL kernel environment), `spir_kernel` entry points."""

from __future__ import annotations

from dataclasses import dataclass

from .interface import Target, without_pass


@dataclass(frozen=True, repr=False)
class SPIRVTarget(Target):
    """SPIR-V binaries ("obj") or SPIR-V assembly ("asm") from LLVM's SPIR-V backend."""

    name = "spirv"
    llvm_target = "SPIRV"
    kernel_calling_convention = "spir_kernel"
    is_gpu = True

    def triple(self) -> str:
        return "spirv64-unknown-unknown"

    def allows_external(self, name: str) -> bool:
        # OpenCL built-ins reach the backend as mangled declarations and become OpExtInst/builtins.
        return name.startswith(("llvm.", "_Z", "__spirv_"))

    def unsupported_type(self, type_text: str) -> str | None:
        if "x86_fp80" in type_text or "fp128" in type_text:
            return "SPIR-V has no 80- or 128-bit floating point"
        return None

    def pipeline_segments(self, opt_level: int) -> dict[str, str]:
        # IndVarSimplify rewrites a loop's exit value in closed form with a wider integer (the sum
        # of 0..n-1 as an i65 product), which SPIR-V cannot express without an extension
        # (SPV_ALTERA_arbitrary_precision_integers): leave it out.
        segments = super().pipeline_segments(opt_level)
        return {name: without_pass(text, "indvars") for name, text in segments.items()}

    def __repr__(self) -> str:
        return "SPIRVTarget()"
