"""The host CPU target: host triple, CPU name and features, run through the ORC JIT."""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import lru_cache

from ..llvm import host_cpu, host_features, host_triple
from . import one_address, ordered_sums, vector_math
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


def _switch(text: str, field: str) -> bool:
    """"on"/"off" (or true/false, 1/0, yes/no) as a bool, for a boolean option given as text."""
    value = {"on": True, "true": True, "1": True, "yes": True,
             "off": False, "false": False, "0": False, "no": False}.get(text.strip().lower())
    if value is None:
        raise ValueError(f"{field} is on or off, not {text!r}")
    return value


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
    #: Math calls go to glibc's libmvec (x86-64 Linux; on the host where the process can load it;
    #: gpuc/targets/vector_math.py): loops calling them vectorize, with the variant of the widest ISA
    #: the CPU features have, which also computes the calls left scalar. Within 4 ulp of libm.
    #: NativeTarget(vector_math=False) keeps libm's scalar calls. Code using libmvec links with
    #: -lmvec when built into an object or library (docs/targets.md, "Vector math on the CPU").
    vector_math: bool = True

    name = "native"
    launch_context = CONTEXT_POINTER
    math_library = "libm"  # resolved by the JIT in the running process
    heap_functions = ("malloc", "free")  # the C library's, resolved like libm
    serial_blocks = True  # gpuc/plugins/workitems.py
    chunked_launches = True  # gpuc/targets/cpu_launch.py
    # C's fmod is `frem`, which the backend lowers to a call of fmod: one less declaration.
    math_instructions = {"fmod": "frem"}
    cli_options = {"triple": ("triple_name", "LLVM target triple"),
                   "cpu": ("cpu_name", "CPU name (default: the host's for its triple)"),
                   "vector-math": ("vector_math", "on or off: loops call libmvec's vector math (docs/targets.md)")}

    def __post_init__(self) -> None:
        if isinstance(self.vector_math, str):  # from `gpuc compile --vector-math on|off`
            object.__setattr__(self, "vector_math", _switch(self.vector_math, "vector_math"))
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
        object.__setattr__(self, "_vector_library", self._find_vector_library(on_host))
        isas = vector_math.isas(triple, self.feature_string) if self._vector_library else ()
        #: Scalar math function -> its libmvec variant of the widest ISA the features have (vector_math.variants);
        #: empty when vector math is off.
        object.__setattr__(self, "vector_variants", vector_math.variants(isas[0] if isas else None))

    def __reduce__(self):
        # Rebuilt through __init__: a new process loads libmvec and works out what follows from the fields.
        return (type(self), tuple(getattr(self, f.name) for f in fields(self)))

    def _find_vector_library(self, on_host: bool) -> str | None:
        """libmvec's path (loaded into the process) on the host, its name elsewhere; None when off."""
        if not self.vector_math:
            return None
        return vector_math.host_libmvec() if on_host else vector_math.LIBRARY

    def triple(self) -> str:
        return self.triple_name

    def cpu(self) -> str:
        return self.cpu_name

    def features(self) -> str:
        return self.feature_string

    def math_library_call(self, op: MathOp, bits: int) -> MathLowering:
        return MathLowering("call", f"{op.c_name}f" if bits == 32 else op.c_name)

    def link_libraries(self, job, module) -> list[str]:
        # an x86 CPU without F16C converts float16 through library calls the JIT would not find
        from .half_runtime import link_half_conversions, needs_half_conversions
        if needs_half_conversions(self.triple(), self.features(), module):
            return link_half_conversions(module)
        return []

    def pipeline_segments(self, opt_level: int) -> dict[str, str]:
        segments = super().pipeline_segments(opt_level)
        if self.slp_vectorize:
            return segments
        return {name: without_pass(text, "slp-vectorizer") for name, text in segments.items()}

    def annotate_for_vectorizer(self, job, module) -> bool:
        if job.config.opt_level == 0:
            return False
        held = ordered_sums.hold_back(module) > 0
        return (bool(self.vector_variants) and vector_math.annotate(module, self.vector_variants) > 0) or held

    def finish_module(self, job, module, tm) -> None:
        # The calls the vectorizer left call the same variant (one result per argument); not in
        # unoptimized code, which shows the frontend's IR as it is.
        if self.vector_variants and job.config.optimize:
            vector_math.call_variants(module, self.vector_variants)
        if job.config.optimize:
            ordered_sums.rewrite(module)
            one_address.rewrite(module)

    def library_files(self) -> list:
        """The host's libmvec, which vectorized math calls: the disk cache keys on its version, and a
        library built of the code links with it."""
        return [self._vector_library] if self.vector_variants and self.host_executable else []

    @classmethod
    def pipeline_references(cls) -> dict[str, tuple[str, str]]:
        return {llvm_target: (triple, "generic") for llvm_target, triple in _PIPELINE_TRIPLES.items()}

    def add_launch_entry(self, job, module, entry):
        """The CPU launcher runs a kernel through a loop over its index space (cpu_launch.py)."""
        from .cpu_launch import add_launch_entry
        return add_launch_entry(job, module, entry)

    def __repr__(self) -> str:
        extra = ", slp_vectorize=True" if self.slp_vectorize else ""
        if not self.vector_math:
            extra += ", vector_math=False"
        if self.triple_name != _host()[0]:
            extra += f", triple={self.triple_name!r}"
        return f"NativeTarget(cpu={self.cpu_name!r}{extra})"
