"""The host CPU target: host triple, CPU name and features, run through the ORC JIT."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ..llvm import host_cpu, host_features, host_triple
from .interface import CONTEXT_POINTER, MathLowering, MathOp, Target, without_pass

#: A triple's architecture (its first component) -> the LLVM target compiling for it and the
#: namespaces of that backend's own intrinsics.
ARCHITECTURES = {
    "x86_64": ("X86", ("llvm.x86.",)),
    "aarch64": ("AArch64", ("llvm.aarch64.",)),
    "arm64": ("AArch64", ("llvm.aarch64.",)),  # Apple's spelling
}
# A triple for each LLVM target above, whose pipelines tools/gen_pipelines.py prints.
_PIPELINE_TRIPLES = {"X86": "x86_64-unknown-linux-gnu", "AArch64": "aarch64-unknown-linux-gnu"}


@lru_cache(maxsize=1)
def _host() -> tuple[str, str, str]:
    """The host's triple, CPU and features: asked once (about 0.2 ms), the same for the process."""
    return host_triple(), host_cpu(), host_features()


@dataclass(frozen=True, repr=False)
class NativeTarget(Target):
    """Compile for the machine gpuc runs on, or for `triple_name` (with `cpu_name` and
    `feature_string`; they default to the host's for the host's triple, else to a generic CPU)."""

    cpu_name: str | None = None
    feature_string: str | None = None
    #: LLVM's SLP vectorizer is off by default: on loop-carried scalar code (an escape-time loop
    #: updating (zr, zi), say) it packs pairs into 2-wide vectors whose shuffles cost more than
    #: they save — 1.5x slower on benchmarks/bench_kernels.py's mandelbrot (znver5). The loop
    #: vectorizer is unaffected. NativeTarget(slp_vectorize=True) runs LLVM's pipeline unchanged.
    slp_vectorize: bool = False
    triple_name: str | None = None

    name = "native"
    launch_context = CONTEXT_POINTER
    math_library = "libm"  # resolved by the JIT in the running process
    heap_functions = ("malloc", "free")  # the C library's, resolved like libm
    # C's fmod is `frem`, which the backend lowers to a call of fmod: one less declaration.
    math_instructions = {"fmod": "frem"}
    cli_options = {"triple": ("triple_name", "LLVM target triple"),
                   "cpu": ("cpu_name", "CPU name (default: the host's for its triple)")}

    def __post_init__(self) -> None:
        host, cpu, features = _host()
        triple = self.triple_name or host
        arch = triple.split("-", 1)[0]
        if arch not in ARCHITECTURES:
            raise ValueError(f"NativeTarget does not know the architecture {arch!r} of {triple!r}; "
                             f"it knows {', '.join(sorted(ARCHITECTURES))}")
        on_host = triple == host
        object.__setattr__(self, "triple_name", triple)
        if self.cpu_name is None:
            object.__setattr__(self, "cpu_name", cpu if on_host else "generic")
        if self.feature_string is None:
            object.__setattr__(self, "feature_string", features if on_host else "")
        # Not fields: they follow from the triple (so equality and hashing ignore them).
        llvm_target, namespaces = ARCHITECTURES[arch]
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
        if self.slp_vectorize:
            return segments
        return {name: without_pass(text, "slp-vectorizer") for name, text in segments.items()}

    @classmethod
    def pipeline_references(cls) -> dict[str, tuple[str, str]]:
        return {llvm_target: (triple, "generic") for llvm_target, triple in _PIPELINE_TRIPLES.items()}

    def add_launch_entry(self, job, module, entry):
        """The CPU launcher runs a kernel through a loop over its index space (cpu_launch.py)."""
        from .cpu_launch import add_launch_entry
        return add_launch_entry(job, module, entry)

    def __repr__(self) -> str:
        extra = ", slp_vectorize=True" if self.slp_vectorize else ""
        if self.triple_name != _host()[0]:
            extra += f", triple={self.triple_name!r}"
        return f"NativeTarget(cpu={self.cpu_name!r}{extra})"
