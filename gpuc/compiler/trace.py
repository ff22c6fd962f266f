"""The record of one compile: stages with durations, pipeline segments, and plugin callbacks."""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass(frozen=True)
class StageRecord:
    name: str
    seconds: float


@dataclass(frozen=True)
class SegmentRecord:
    """One uninterrupted LLVMRunPasses call inside the optimize stage."""

    name: str
    seconds: float


@dataclass(frozen=True)
class CallbackRecord:
    plugin: str
    marker: str
    point: str
    round: int
    changed: bool
    seconds: float


@dataclass(frozen=True)
class CompilationRecord:
    """One `compile_into` by a plugin: the symbol, the source, the point, whether the module had it
    already, and who asked for it (as the plugin says)."""

    symbol: str
    source: str
    point: str | None
    reused: bool
    seconds: float
    requested_by: str | None = None


@dataclass(frozen=True)
class TransformationRecord:
    """One function a plugin derived from another in the module (e.g. a tangent function): the new
    symbol, what it was made from, the point, whether the module had it already, and who asked."""

    symbol: str
    origin: str
    point: str | None
    reused: bool
    seconds: float
    requested_by: str | None = None
    #: What the plugin found that the code's users may need, as (name, value) pairs (e.g. the
    #: autodiff plugin's ("reach", (r0, r1, r2)) of an adjoint kernel).
    details: tuple = ()


@dataclass(frozen=True)
class Snapshot:
    """The module's IR after one step of a compile made with `CompilerConfig(snapshots=True)`: a stage
    ("irgen", "link", "finalize_module", "launch_entry", "finish"), a pass segment ("simplify",
    "fixpoint@early", ...) or a plugin callback (`plugin`, `marker`, `point`, whether it `changed` the
    module)."""

    step: str
    kind: str  # "stage", "segment" or "callback"
    ir: str
    seconds: float = 0.0
    plugin: str | None = None
    marker: str | None = None
    point: str | None = None
    changed: bool = True


@dataclass
class Trace:
    stages: list[StageRecord] = field(default_factory=list)
    segments: list[SegmentRecord] = field(default_factory=list)
    callbacks: list[CallbackRecord] = field(default_factory=list)
    libraries: list[str] = field(default_factory=list)
    compilations: list[CompilationRecord] = field(default_factory=list)
    transformations: list[TransformationRecord] = field(default_factory=list)
    #: Where the code came from: "hit" (the disk cache, gpuc/compiler/cache.py: no stage ran), "miss"
    #: (compiled and stored), None (compiled; not cacheable, or the cache is off).
    cache: str | None = None
    #: With CompilerConfig(snapshots=True): the IR after every step, in order (the first is irgen's).
    snapshots: list[Snapshot] = field(default_factory=list)
    #: With snapshots: the target assembly, when the compile emitted it as text.
    assembly: str | None = None
    #: What was compiled (CompilerJob.describe()), for the pipeline page.
    title: str | None = None

    def snapshot(self, module, step: str, kind: str, **details) -> None:
        """Keep the IR of `module` after `step` (the driver calls this only for snapshots=True)."""
        self.snapshots.append(Snapshot(step, kind, str(module), **details))

    def html(self, path=None) -> str:
        """A self-contained HTML page of this compile (gpuc/compiler/page.py): the stages and segments with
        their times, the callback points with the plugins that fired and the markers they consumed, the IR
        before and after every step as per-function diffs (with CompilerConfig(snapshots=True)), and the
        assembly. Written to `path` when given; returned."""
        from .page import pipeline_page

        return pipeline_page([self], path)

    @contextmanager
    def stage(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.stages.append(StageRecord(name, time.perf_counter() - start))

    def record(self) -> dict:
        """What the disk cache keeps of the trace (plain data): what produced the code, not how long
        it took — the callbacks that fired, libraries, compilations and transformations."""
        def rows(records):
            return [[getattr(r, f) if f != "details" else [list(d) for d in r.details]
                     for f in r.__dataclass_fields__] for r in records]
        return {"callbacks": rows(self.callbacks), "libraries": list(self.libraries),
                "compilations": rows(self.compilations), "transformations": rows(self.transformations)}

    @classmethod
    def from_record(cls, data: dict) -> "Trace":
        """The trace of code that came from the disk cache (`cache` "hit"; no stage ran)."""
        def details(value):
            return tuple((name, tuple(v) if isinstance(v, list) else v) for name, v in value)
        transformations = [TransformationRecord(*row[:-1], details(row[-1])) for row in data.get("transformations", ())]
        return cls(callbacks=[CallbackRecord(*row) for row in data.get("callbacks", ())],
                   libraries=list(data.get("libraries", ())),
                   compilations=[CompilationRecord(*row) for row in data.get("compilations", ())],
                   transformations=transformations, cache="hit")

    @property
    def stage_names(self) -> list[str]:
        return [s.name for s in self.stages]

    def fired(self, point: str | None = None) -> list[CallbackRecord]:
        return [c for c in self.callbacks if point is None or c.point == point]

    @property
    def total_seconds(self) -> float:
        return sum(s.seconds for s in self.stages)

    def __str__(self) -> str:
        lines = ["stage            time"]
        for s in self.stages:
            lines.append(f"  {s.name:<16} {s.seconds * 1e3:8.2f} ms")
            if s.name == "optimize":
                lines += [f"    | {seg.name:<20} {seg.seconds * 1e3:8.2f} ms" for seg in self.segments]
            if s.name == "link" and self.libraries:
                lines.append(f"    | linked: {', '.join(self.libraries)}")
        lines.append(f"  {'total':<16} {self.total_seconds * 1e3:8.2f} ms")
        lines.append({"hit": "disk cache: hit (the code came from gpuc's disk cache; no stage ran)",
                      "miss": "disk cache: miss (compiled and stored)"}.get(self.cache, "disk cache: not used"))
        if self.callbacks:
            lines.append("callbacks (point, round, plugin, marker, changed)")
            lines += [f"  {c.point:<11} {c.round:>2}  {c.plugin} @{c.marker}  "
                      f"{'changed' if c.changed else 'unchanged'}  {c.seconds * 1e3:.2f} ms" for c in self.callbacks]
        else:
            lines.append("callbacks: none fired")
        lines += [f"  compiled into the module at {c.point}: @{c.symbol} ({c.source}"
                  f"{', already there' if c.reused else ''}"
                  f"{f', for {c.requested_by}' if c.requested_by else ''})  {c.seconds * 1e3:.2f} ms"
                  for c in self.compilations]
        for t in self.transformations:
            vectorized = dict(t.details).get("vectorize")
            if vectorized is not None:  # gpuc/plugins/vectorize: what ran in lanes, what lane by lane
                lines.append(f"  {vectorized.split(':')[0]} at {t.point}: @{t.symbol} "
                             f"({vectorized.partition(': ')[2]})  {t.seconds * 1e3:.2f} ms")
                continue
            lines.append(f"  derived at {t.point}: @{t.symbol} from {t.origin}{', already there' if t.reused else ''}"
                         f"{f', for {t.requested_by}' if t.requested_by else ''}  {t.seconds * 1e3:.2f} ms")
        return "\n".join(lines)
