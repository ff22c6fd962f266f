"""The target interface: the fixed set of hooks every target implements, with their defaults.

A new target is one new file: a small frozen dataclass deriving from `Target` that overrides
the hooks it needs.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ..llvm import Function, Module, Target as LLVMTarget, TargetMachine, initialize


_per_thread = threading.local()


@dataclass(frozen=True)
class Target:
    """Base class of gpuc targets; instances are immutable and hashable (they key caches)."""

    name = "abstract"           # short name: "native", "ptx", "gcn", "spirv"
    llvm_target = ""            # LLVM target to initialize: "X86", "NVPTX", ...
    kernel_calling_convention = None  # e.g. "ptx_kernel"; a class attribute, not a field
    emit_kinds = ("asm", "obj")  # what `emit` can produce; the driver rejects the others up front
    is_gpu = False

    # -- description ---------------------------------------------------------------------
    def triple(self) -> str:
        raise NotImplementedError

    def cpu(self) -> str:
        return ""

    def features(self) -> str:
        return ""

    def pipeline_key(self) -> str:
        """Which generated pipeline family (gpuc/compiler/_pipelines.py) this target uses."""
        return self.name

    def pipeline_segments(self, opt_level: int) -> dict[str, str]:
        """The pass segments ("simplify", "optimize", "cleanup") for `opt_level` 1-3: LLVM's own
        default<On> for the target, which a target may adjust."""
        from ..compiler._pipelines import SEGMENTS
        return SEGMENTS[self.pipeline_key()][opt_level]

    def target_machine(self, opt_level: int = 2) -> TargetMachine:
        initialize(self.llvm_target)
        return LLVMTarget.from_triple(self.triple()).machine(self.cpu(), self.features(), opt_level=opt_level)

    def cached_target_machine(self, opt_level: int = 2) -> TargetMachine:
        """A machine reused by every compile for this target and level on the calling thread.

        Creating a machine costs about a millisecond; LLVM machines are not thread-safe, so
        each thread keeps its own. Never close the returned machine.
        """
        machines = _per_thread.__dict__.setdefault("machines", {})
        key = (self, opt_level)
        tm = machines.get(key)
        if tm is None:
            tm = machines[key] = self.target_machine(opt_level)
        return tm

    def data_layout(self) -> str:
        return self.cached_target_machine().data_layout

    # -- hooks called by the driver, in stage order ----------------------------------------
    def prepare_module(self, job, module: Module, tm: TargetMachine) -> None:
        """irgen: give the module this target's triple and data layout."""
        module.triple = self.triple()
        module.data_layout = tm.data_layout

    def link_libraries(self, job, module: Module) -> list[str]:
        """link: link target libraries the module needs; returns the names of those linked."""
        return []

    def allows_external(self, name: str) -> bool:
        """validate: may the module call the undefined function `name` on this target?"""
        return not self.is_gpu or name.startswith("llvm.")

    def unsupported_type(self, type_text: str) -> str | None:
        """validate: why a type (as printed) cannot be used on this target, or None."""
        return None

    def mark_kernel(self, job, fn: Function, module: Module) -> None:
        """finish: turn `fn` into a kernel entry point the target's way."""
        if self.kernel_calling_convention:
            fn.calling_convention = self.kernel_calling_convention

    def finish_module(self, job, module: Module, tm: TargetMachine) -> None:
        """finish: last target-specific rewrite before code generation."""

    def emit(self, job, module: Module, tm: TargetMachine, output: str) -> str | bytes:
        """codegen: "asm" gives text, "obj" gives bytes. The driver has verified the module and
        discards it afterwards, so code generation may work on it in place."""
        data = tm.emit(module, output, verify=False, preserve=False)
        return data.decode() if output == "asm" else data

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items())
        return f"{type(self).__name__}({fields})"


def without_pass(pipeline: str, name: str) -> str:
    """`pipeline` (a textual pass pipeline) with every occurrence of the parameterless pass `name` removed."""
    parts = pipeline.replace("(", "(,").replace(")", ",)").split(",")
    kept = ",".join(p for p in parts if p != name)
    return kept.replace("(,", "(").replace(",)", ")")
