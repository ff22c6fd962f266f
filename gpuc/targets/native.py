"""The host CPU target: host triple, CPU name and features, run through the ORC JIT."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..llvm import host_cpu, host_features, host_triple
from .interface import Target


@dataclass(frozen=True, repr=False)
class NativeTarget(Target):
    """Compile for the machine gpuc runs on (or the given CPU/features)."""

    cpu_name: str = field(default_factory=host_cpu)
    feature_string: str = field(default_factory=host_features)

    name = "native"
    llvm_target = "X86"

    def triple(self) -> str:
        return host_triple()

    def cpu(self) -> str:
        return self.cpu_name

    def features(self) -> str:
        return self.feature_string

    def __repr__(self) -> str:
        return f"NativeTarget(cpu={self.cpu_name!r})"
