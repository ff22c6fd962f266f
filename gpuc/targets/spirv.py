"""SPIR-V: spirv64 modules (OpenCL kernel environment), `spir_kernel` entry points."""

from __future__ import annotations

from dataclasses import dataclass

from .interface import Target, unselectable_table, without_pass

# Intrinsics the SPIR-V backend cannot translate (it has little bfloat support).
_UNSELECTABLE = unselectable_table({
    "f16 bf16 f32 f64": "canonicalize exp10 frexp ldexp lrint llrint maximumnum minimumnum sincos",
    "bf16": "sin cos tan asin acos atan atan2 sinh cosh tanh exp exp2 log log2 log10 pow powi modf sqrt fabs "
            "floor ceil trunc rint nearbyint round roundeven lround llround copysign fma minnum maxnum "
            "minimum maximum",
})


@dataclass(frozen=True, repr=False)
class SPIRVTarget(Target):
    """SPIR-V binaries ("obj") or SPIR-V assembly ("asm") from LLVM's SPIR-V backend."""

    name = "spirv"
    llvm_target = "SPIRV"
    kernel_calling_convention = "spir_kernel"
    is_gpu = True
    intrinsic_namespaces = ("llvm.spv.",)
    unselectable_intrinsics = _UNSELECTABLE

    def triple(self) -> str:
        return "spirv64-unknown-unknown"

    def allows_external(self, name: str) -> bool:
        # OpenCL built-ins reach the backend as mangled declarations and become OpExtInst/builtins.
        return name.startswith(("llvm.", "_Z", "__spirv_"))

    def unsupported_type(self, type_text: str) -> str | None:
        if type_text in ("x86_fp80", "fp128", "ppc_fp128"):
            return "SPIR-V has no 80- or 128-bit floating point"
        if type_text == "target":
            return None  # target("spirv.Image") and friends are SPIR-V's own
        return super().unsupported_type(type_text)

    def pipeline_segments(self, opt_level: int) -> dict[str, str]:
        # IndVarSimplify rewrites a loop's exit value in closed form with a wider integer (the sum
        # of 0..n-1 as an i65 product), which SPIR-V cannot express without an extension
        # (SPV_ALTERA_arbitrary_precision_integers): leave it out.
        segments = super().pipeline_segments(opt_level)
        return {name: without_pass(text, "indvars") for name, text in segments.items()}

    def __repr__(self) -> str:
        return "SPIRVTarget()"
