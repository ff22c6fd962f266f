"""SPIR-V: spirv64 modules (OpenCL kernel environment), `spir_kernel` entry points."""

from __future__ import annotations

from dataclasses import dataclass

from ..llvm import CALLING_CONVENTIONS, ConstantInt, FunctionType, Module
from .interface import MathLowering, MathOp, Target, unselectable_table, without_pass

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
    stateful_codegen = True  # the backend's state from one emission breaks the next
    array_address_space = 1  # CrossWorkgroup
    float_atomics = False
    float_atomics_missing = ("needs the SPIR-V extension SPV_EXT_shader_atomic_float_add, which gpuc's "
                             "spirv target does not enable")
    # Float min/max need another extension (the backend aborts without it); exch and cas work on the
    # float's bits, so they need none.
    atomics_missing = {(op, dtype): "needs the SPIR-V extension SPV_EXT_shader_atomic_float_min_max, which "
                                    "gpuc's spirv target does not enable"
                       for op in ("min", "max") for dtype in ("float32", "float64")}
    # The backend cannot legalize atomicrmw uinc_wrap/udec_wrap.
    atomic_loops = frozenset({"inc", "dec"})
    indirect_calls = False
    indirect_calls_missing = ("SPIR-V needs the extension SPV_INTEL_function_pointers for that, which gpuc's "
                              "spirv target does not enable")
    # The OpenCL extended instruction set: the backend turns the mangled OpenCL C builtin
    # declarations into OpExtInst. OpenCL's fmod is exact by its specification.
    math_library = "OpenCL"

    def triple(self) -> str:
        return "spirv64-unknown-unknown"

    def allows_external(self, name: str) -> bool:
        # OpenCL built-ins reach the backend as mangled declarations and become OpExtInst/builtins.
        return name.startswith(("llvm.", "_Z", "__spirv_"))

    def math_library_call(self, op: MathOp, bits: int) -> MathLowering:
        # OpenCL C's mangled name, e.g. _Z5atan2dd
        return MathLowering("call", f"_Z{len(op.c_name)}{op.c_name}" + ("f" if bits == 32 else "d") * op.params)

    def global_index(self, builder, module: Module, dim: int):
        # OpenCL's get_global_id(uint) -> size_t: the SPIR-V backend turns it into GlobalInvocationId.
        llctx = module.context
        fn = module.get_or_insert_function("_Z13get_global_idj", FunctionType.get(llctx.i64, [llctx.i32]))
        fn.calling_convention = "spir_func"
        # A pure read of the work item's id: equal calls are one value (CSE), as the other targets'
        # register reads are (the autodiff plugin recognizes a work item's own elements by it).
        for attribute, value in (("memory", 0), ("nounwind", 0), ("willreturn", 0), ("nosync", 0)):
            fn.attributes.add(attribute, value)
        call = builder.call(fn, [ConstantInt.get(llctx.i32, dim)], f"index{dim}")
        call.calling_convention = CALLING_CONVENTIONS["spir_func"]
        return call

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
