"""The optimization pipeline: LLVM pass segments with plugin callback points between them."""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..llvm import LLVMError, Module, run_passes
from ..errors import CompilationError, CompilerError, IRIssue, PluginError, ValidationError
from .plugins import find_marker, is_prefix_marker
from .trace import CallbackRecord, SegmentRecord

# Run after a round in which a callback changed the module, before the point repeats.
CLEANUP = "always-inline,function(instcombine<max-iterations=1;no-verify-fixpoint>,simplifycfg)"


@dataclass(frozen=True)
class Step:
    kind: str  # "passes" or "point"
    name: str
    text: str = ""


@dataclass(frozen=True)
class Pipeline:
    """An ordered list of pass segments and callback points; `str()` shows it."""

    steps: tuple[Step, ...]

    def __str__(self) -> str:
        return "\n".join(f"[{s.name}]" if s.kind == "point" else f"{s.name}: {s.text}" for s in self.steps)

    @property
    def points(self) -> list[str]:
        return [s.name for s in self.steps if s.kind == "point"]


def build_pipeline(target, opt_level: int) -> Pipeline:
    """The default<O`opt_level`> pipeline of `target`, split at the four callback points."""
    if opt_level == 0:
        segments = {"simplify": "always-inline", "optimize": "", "cleanup": ""}
    else:
        segments = target.pipeline_segments(opt_level)
    steps = [Step("point", "early"), Step("passes", "simplify", segments["simplify"]),
             Step("point", "simplified"), Step("passes", "optimize", segments["optimize"]),
             Step("point", "optimized"), Step("passes", "cleanup", segments["cleanup"]),
             Step("point", "last")]
    return Pipeline(tuple(s for s in steps if s.kind == "point" or s.text))


def early_only_pipeline() -> Pipeline:
    """What runs when optimization is off: the early callback point, so markers can be resolved."""
    return Pipeline((Step("point", "early"),))


def invalid_ir_issue(message: str) -> IRIssue:
    return IRIssue("invalid-ir", "the module became invalid after plugin callbacks (verify_plugins=False, so "
                   f"the culprit was not identified; enable it to name the plugin):\n{message}")


def run_pipeline(state, pipeline: Pipeline | None = None) -> None:
    """Run `pipeline` (default: the job's) on the compile state's module, callbacks at its points."""
    job, module, tm, trace = state.job, state.module, state.target_machine, state.trace
    pipeline = pipeline or build_pipeline(job.config.target, job.config.opt_level)
    for step in pipeline.steps:
        if step.kind == "point":
            run_point(state, step.name)
            continue
        start = time.perf_counter()
        try:
            # With verify_plugins every change was verified already; otherwise verify here, since
            # passes may crash the process on invalid IR.
            run_passes(module, step.text, tm, verify=not job.config.verify_plugins)
        except LLVMError as exc:
            if job.config.verify_plugins or not any(c.changed for c in trace.callbacks):
                raise
            raise ValidationError([invalid_ir_issue(str(exc))], job) from None
        seconds = time.perf_counter() - start
        trace.segments.append(SegmentRecord(step.name, seconds))
        if job.config.snapshots:
            trace.snapshot(module, step.name, "segment", seconds=seconds)


def run_point(state, point: str) -> None:
    """Fire the callbacks registered for `point` whose markers the module has, to a fixpoint."""
    job, module, tm, trace = state.job, state.module, state.target_machine, state.trace
    watched = job.config.markers_at(point)
    if not watched:
        return
    rounds = job.config.fixpoint_rounds
    outer, state.point = state.point, point
    try:
        for round_no in range(1, rounds + 1):
            changed_by = _run_round(state, point, watched, round_no)
            if not changed_by:
                return
            start = time.perf_counter()
            run_passes(module, CLEANUP, tm, verify=not job.config.verify_plugins)
            seconds = time.perf_counter() - start
            trace.segments.append(SegmentRecord(f"fixpoint@{point}", seconds))
            if job.config.snapshots:
                trace.snapshot(module, f"fixpoint@{point}", "segment", seconds=seconds, point=point)
    finally:
        state.point = outer
    name, marker = changed_by[0]
    raise PluginError(f"no fixpoint after {rounds} rounds: the callback reported a change in every round "
                      "(return False when there is nothing left to do)", plugin=name, marker=marker,
                      point=point, job=job)


def _run_round(state, point: str, watched, round_no: int) -> list[tuple[str, str]]:
    """One round of `point`: (plugin, marker) of each callback that changed the module."""
    module = state.module
    changed_by: list[tuple[str, str]] = []
    prefixes = any(is_prefix_marker(m) for _, m in watched)
    present = module.function_names() if prefixes or len(watched) > _DIRECT_LOOKUPS else None
    for plugin, marker in watched:
        name = marker
        if is_prefix_marker(marker):
            # Names may have changed since the walk: an earlier callback may add or remove markers.
            name = find_marker(marker, module.function_names() if changed_by else present)
            if name is None:
                continue
        elif present is not None and marker not in present:
            continue  # the common case: the module knows nothing of this plugin
        fn = module.functions.get(name)  # an earlier callback may have removed it
        if fn is not None and _invoke(state, plugin, point, name, fn, round_no):
            changed_by.append((plugin.name, name))
    return changed_by


# Up to this many markers are looked up one by one; beyond, one walk over the module's function
# names is cheaper (plugin sets are large, modules declare few functions).
_DIRECT_LOOKUPS = 8


def call_plugin(module: Module, plugin_name: str, hook: str, call):
    """Run plugin code on the module being compiled: it cannot close or give away the module
    (or its context) meanwhile; trying to raises ValueError, which becomes its PluginError."""
    with module.keep_open(f"it is being compiled (plugin {plugin_name!r} runs its {hook} on it)"):
        return call()


def _invoke(state, plugin, point: str, marker: str, fn, round_no: int) -> bool:
    """Call one plugin's callback for `marker` with (state, marker function, module)."""
    job, module, trace = state.job, state.module, state.trace
    start = time.perf_counter()
    try:
        changed = call_plugin(module, plugin.name, f"{point} callback",
                              lambda: plugin.callback(point)(state, fn, module))
    except CompilationError:
        raise  # a plugin reporting a fault in the user's source, with its location
    except CompilerError as exc:
        raise PluginError(f"{type(exc).__name__}: {exc}", plugin=plugin.name, marker=marker,
                          point=point, job=job) from exc
    except Exception as exc:  # noqa: BLE001 - any plugin failure becomes a PluginError
        raise PluginError(f"the callback raised {type(exc).__name__}: {exc}", plugin=plugin.name,
                          marker=marker, point=point, job=job) from exc
    if not isinstance(changed, bool):
        raise PluginError(f"the callback returned {changed!r}; it must return True (module changed) or False",
                          plugin=plugin.name, marker=marker, point=point, job=job)
    seconds = time.perf_counter() - start
    trace.callbacks.append(CallbackRecord(plugin.name, marker, point, round_no, changed, seconds))
    if job.config.snapshots:
        trace.snapshot(module, f"{plugin.name} @{marker}", "callback", seconds=seconds, plugin=plugin.name,
                       marker=marker, point=point, changed=changed)
    entry = module.functions.get(job.source.entry_name)
    if entry is None or entry.is_declaration:
        raise PluginError(f"the callback deleted the entry function @{job.source.entry_name} (or its body)",
                          plugin=plugin.name, marker=marker, point=point, job=job)
    if changed and job.config.verify_plugins:
        try:
            module.verify()
        except LLVMError as exc:
            raise PluginError(f"the callback left invalid IR:\n{exc}", plugin=plugin.name, marker=marker,
                              point=point, job=job) from None
    return changed
