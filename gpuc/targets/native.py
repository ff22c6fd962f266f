"""The host CPU target: host triple, CPU name and features, run through the ORC JIT."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..llvm import host_cpu, host_features, host_triple
from .interface import Target, without_pass


@dataclass(frozen=True, repr=False)
class NativeTarget(Target):
    """Compile for the machine gpuc runs on (or the given CPU/features)."""

    cpu_name: str = field(default_factory=host_cpu)
    feature_string: str = field(default_factory=host_features)
    #: LLVM's SLP vectorizer is off by default: on loop-carried scalar code (an escape-time loop
    #: updating (zr, zi), say) it packs pairs into 2-wide vectors whose shuffles cost more than
    #: they save — 1.5x slower on benchmarks/bench_kernels.py's mandelbrot (znver5). The loop
    #: vectorizer is unaffected. NativeTarget(slp_vectorize=True) runs LLVM's pipeline unchanged.
    slp_vectorize: bool = False

    name = "native"
    llvm_target = "X86"
    intrinsic_namespaces = ("llvm.x86.",)

    def triple(self) -> str:
        return host_triple()

    def cpu(self) -> str:
        return self.cpu_name

    def features(self) -> str:
        return self.feature_string

    def pipeline_segments(self, opt_level: int) -> dict[str, str]:
        segments = super().pipeline_segments(opt_level)
        if self.slp_vectorize:
            return segments
        return {name: without_pass(text, "slp-vectorizer") for name, text in segments.items()}

    def __repr__(self) -> str:
        extra = ", slp_vectorize=True" if self.slp_vectorize else ""
        return f"NativeTarget(cpu={self.cpu_name!r}{extra})"

