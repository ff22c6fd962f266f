"""`compile()`: the fixed sequence of named, timed stages from a job to LLVM IR, assembly or an object."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..llvm import Context, LLVMError, Module, run_passes
from .config import CompilerConfig, CompilerJob
from .depth import run_deep
from ..errors import (CompilationError, CompilerError, InternalCompilerError, IRIssue, PluginError, ValidationError,
                      user_facing)
from . import cache
from .plugins import find_marker
from .pipeline import Pipeline, build_pipeline, call_plugin, early_only_pipeline, invalid_ir_issue, run_pipeline
from .source import CompiledFunction
from .state import CompileState, active
from .trace import SegmentRecord, StageRecord, Trace
from .validate import collect_issues, inline_assembly_issues, kernel_issue

OUTPUTS = ("llvm", "bc", "asm", "obj")
STAGES = ("irgen", "link", "finalize_module", "optimize", "validate", "finish", "codegen")


@dataclass(frozen=True)
class CompileResult:
    output: str | bytes
    entry: str
    trace: Trace
    job: CompilerJob
    #: The function a launcher calls instead of the entry (`Target.add_launch_entry`), if any.
    launch_entry: str | None = None
    #: LLVM name (as irgen and plugins named it) -> the CompiledFunction it came from.
    compiled: dict[str, CompiledFunction] = field(default_factory=dict, repr=False, compare=False)
    #: The final symbol of every entry point: `entry` first, then those plugins added
    #: (`CompileState.add_entry`, e.g. kernels deferred with `gpuc.deferred(k, ..., kernel=True)`).
    entries: list[str] = field(default_factory=list, compare=False)
    #: The final LLVM IR, when asked for next to another output (`kernel.inspect`).
    llvm: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not self.entries:
            object.__setattr__(self, "entries", [self.entry])


class ModuleResult:
    """A finished module (before codegen) that the caller owns; `close()` frees it and its context."""

    def __init__(self, module: Module, entry: str, trace: Trace, job: CompilerJob,
                 launch_entry: str | None = None, compiled: dict[str, CompiledFunction] | None = None,
                 entries: list[str] | None = None) -> None:
        self.module, self.entry, self.trace, self.job = module, entry, trace, job
        #: The final symbol of every entry point, `entry` first (see CompileResult.entries).
        self.entries = list(entries) if entries else [entry]
        #: LLVM name (as irgen and plugins named it) -> the CompiledFunction it came from.
        self.compiled = compiled if compiled is not None else {}
        #: The function a launcher calls instead of the entry (`Target.add_launch_entry`), if any.
        self.launch_entry = launch_entry

    def emit(self, output: str) -> str | bytes:
        """The codegen stage on the finished module, recorded in the trace: "llvm", "bc", "asm" or
        "obj", as `compile()` gives it. Code generation may change the module: close it afterwards."""
        job = self.job
        if output not in OUTPUTS:
            raise ValueError(f"output must be one of {', '.join(OUTPUTS)}, not {output!r}")
        with _guard(job), self.trace.stage("codegen"):
            tm = job.config.target.cached_target_machine(job.config.opt_level)
            data = _codegen(job, self.module, tm, output, contained=not generated_by_gpuc(job, self.trace))
        if job.config.snapshots and output == "asm":
            self.trace.assembly = data
        return data

    def close(self) -> None:
        context = self.module.context
        self.module.close()
        context.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@user_facing
def compile(job: CompilerJob, output: str = "llvm") -> CompileResult:
    """Compile `job` to "llvm" (IR text), "bc" (bitcode), "asm" or "obj" (bytes; SPIR-V binary)."""
    if output not in OUTPUTS:
        raise ValueError(f"output must be one of {', '.join(OUTPUTS)}, not {output!r}")
    _check_job(job)
    target = job.config.target
    if output in ("asm", "obj") and output not in target.emit_kinds:
        raise ValueError(f"{target!r} cannot emit {output!r}; it emits {', '.join(target.emit_kinds)}, "
                         "\"llvm\" or \"bc\"")
    machine_code = output in ("asm", "obj")
    key = cache.key(job, output) if machine_code else None
    hit = cache.load(key)
    if hit is not None:
        header, payload = hit
        trace = Trace.from_record(header["trace"])
        data = payload.decode() if output == "asm" else payload
        return CompileResult(data, header["entry"], trace, job, header.get("launch_entry"), {}, header["entries"])
    with _guard(job):
        tm = job.config.target.cached_target_machine(job.config.opt_level)
        with _build(job, tm, machine_code=machine_code) as built:
            with built.trace.stage("codegen"):
                data = _codegen(job, built.module, tm, output, contained=not generated_by_gpuc(job, built.trace))
            if job.config.snapshots and output == "asm":
                built.trace.assembly = data
            if key is not None:
                built.trace.cache = "miss"
                cache.store(key, {"trace": built.trace.record(), "entry": built.entry, "launch_entry": built.launch_entry,
                                  "entries": list(built.entries)}, data.encode() if output == "asm" else data)
            return CompileResult(data, built.entry, built.trace, job, built.launch_entry, built.compiled,
                                 built.entries)


@user_facing
def compile_module(job: CompilerJob) -> ModuleResult:
    """Run every stage but codegen; the caller owns the returned module (e.g. to hand it to a JIT).

    What the backend cannot lower is checked even with validation off, as the module is usually
    headed for machine code."""
    _check_job(job)
    with _guard(job):
        return _build(job, job.config.target.cached_target_machine(job.config.opt_level), machine_code=True)


@user_facing
def code_llvm(job, argtypes=None, *, target=None, optimize: bool = True) -> str:
    """The LLVM IR `job` compiles to; `optimize=False` skips optimization and validation.

    Also `code_llvm(fn, argtypes, target=..., optimize=...)` for a @gpuc.func or @gpuc.kernel.
    """
    job = _as_job(job, argtypes, target)
    config = job.config.replace(optimize=optimize, validate=job.config.validate and optimize)
    return compile(CompilerJob(job.source, config), "llvm").output


@user_facing
def code_native(job, argtypes=None, *, target=None) -> str:
    """The target assembly (x86, PTX, GCN or SPIR-V text) `job` (or `fn` for `argtypes`) compiles to."""
    return compile(_as_job(job, argtypes, target), "asm").output


def _as_job(job, argtypes, target) -> CompilerJob:
    if isinstance(job, CompilerJob):
        if argtypes is not None or target is not None:
            raise TypeError("pass either a CompilerJob, or a function with argtypes (and target=...)")
        return job
    if argtypes is None:
        raise TypeError(f"compile a CompilerJob, or a @gpuc.func/@gpuc.kernel with argtypes, not {job!r} alone")
    from ..targets import NativeTarget
    return CompilerJob((job, argtypes), CompilerConfig(target if target is not None else NativeTarget()))


def _check_job(job) -> None:
    if not isinstance(job, CompilerJob):
        raise TypeError(f"compile() takes a CompilerJob, not {type(job).__name__}")


class _guard:
    """Turn anything that is not a CompilerError into an InternalCompilerError naming the job."""

    def __init__(self, job) -> None:
        self.job = job

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        # SystemExit and KeyboardInterrupt (not Exceptions) pass unchanged, whoever raised them.
        if exc is None or not isinstance(exc, Exception) or isinstance(exc, (CompilerError, MemoryError)):
            return False
        raise InternalCompilerError(f"{type(exc).__name__}: {exc}", self.job) from exc


def _build(job: CompilerJob, tm, *, machine_code: bool) -> ModuleResult:
    config, trace = job.config, Trace(title=job.describe() if job.config.snapshots else None)
    context = Context()
    module = None
    state = CompileState(job, None, tm, trace, {}, context=context)
    try:
        with active(state):  # irgen and plugins reach this compile's state (CompileState.of)
            # The frontend recurses deeply, and plugins compile further functions into the module
            # (gpuc.deferred's): all of it runs on one thread with a large stack, handed over once
            # (gpuc/compiler/depth.py), not once per function compiled.
            launch_entry = run_deep(_generate, state)
        module, compiled, entry = state.module, state.compiled, job.source.entry_name
        if config.validate or machine_code:  # a backend aborts on IR it cannot lower: always check that
            with trace.stage("validate"):
                issues = collect_issues(job, module, entry, full=config.validate,
                                        own_plugins_only=own_plugins_only(job, trace))
                if issues:
                    raise _validation_error(issues, job)
        with trace.stage("finish"):
            entries = _finish(job, module, entry, tm, launch_entry, state.extra_entries)
        if config.snapshots:
            trace.snapshot(module, "finish", "stage")
        return ModuleResult(module, entries[0], trace, job, launch_entry, compiled, entries)
    except BaseException:
        module = module if module is not None else state.module
        if module is not None:
            module.close()
        context.close()
        raise


def _generate(state: CompileState) -> str | None:
    """irgen, link, then the plugins' stages and the pipeline; returns the launch entry's name, if any."""
    job, trace, target, tm = state.job, state.trace, state.target, state.target_machine
    with trace.stage("irgen"):
        module, compiled = job.source.irgen(job, state.context, tm)
        state.module, state.compiled = module, compiled
        target.prepare_module(job, module, tm)
    if job.config.snapshots:
        trace.snapshot(module, "irgen", "stage")
    with trace.stage("link"):
        linked = target.link_libraries(job, module)
        trace.libraries += linked
    if job.config.snapshots and linked:
        trace.snapshot(module, "link", "stage")
    return _run_plugins(state)


def _validation_error(issues, job) -> CompilerError:
    """A ValidationError; but when what remains is only calls through function pointers that the
    target cannot make (a pointer chosen at run time, on SPIR-V), the program asks for what the
    target lacks: a CompilationError that says so."""
    if all(issue.kind == "indirect-call" for issue in issues):
        target = job.config.target
        where = next((issue.location for issue in issues if issue.location is not None), None)
        return CompilationError(f"{target!r} cannot call through a function pointer, and these remain after "
                                "optimization:\n" + "\n".join(f"  - {issue}" for issue in issues), where,
                                hint="call the function directly, or choose the pointer from constants the "
                                     "optimizer can see through (gpuc.deferred(f, ...) called at once, or passed "
                                     "to a func that is inlined); targets with function pointers "
                                     "(Target.indirect_calls) call through pointers chosen at run time")
    return ValidationError(issues, job)


def _run_plugins(state: CompileState) -> str | None:
    """finalize_module hooks, then the pipeline with its callback points (without optimization only
    the early point, if it has work); returns the launch entry's name, if the target adds one."""
    config, module, trace = state.config, state.module, state.trace
    with trace.stage("finalize_module"):
        _finalize(state)
    if config.snapshots and any(p.finalize_module is not None for p in config.plugins):
        trace.snapshot(module, "finalize_module", "stage")
    if config.optimize:
        with trace.stage("optimize"):
            return _optimize(state)
    if _claims(state, "early"):
        with trace.stage("early"):
            run_pipeline(state, early_only_pipeline())
    start = time.perf_counter()
    launch_entry = _add_launch_entry(state.job, module, trace)
    if launch_entry is not None:
        trace.stages.append(StageRecord("launch_entry", time.perf_counter() - start))
    return launch_entry


def _finalize(state: CompileState) -> None:
    """Every plugin's finalize_module(state, compiled, module), once, before the pipeline."""
    job, module = state.job, state.module
    state.point = "finalize_module"
    for plugin in job.config.plugins:
        if plugin.finalize_module is None:
            continue
        try:
            call_plugin(module, plugin.name, "finalize_module",
                        lambda: plugin.finalize_module(state, state.compiled, module))
        except CompilationError:
            raise
        except Exception as exc:  # noqa: BLE001 - any plugin failure becomes a PluginError
            raise PluginError(f"finalize_module raised {type(exc).__name__}: {exc}", plugin=plugin.name,
                              marker=None, point="finalize_module", job=job) from exc
        if job.config.verify_plugins:
            try:
                module.verify()
            except LLVMError as exc:
                raise PluginError(f"finalize_module left invalid IR:\n{exc}", plugin=plugin.name, marker=None,
                                  point="finalize_module", job=job) from None
    state.point = None


def _optimize(state: CompileState) -> str | None:
    """The pipeline, with the target's launch entry added right after the `early` point and its
    annotations for the vectorizer before the optimize segment; returns the launch entry's name."""
    job, module, trace = state.job, state.module, state.trace
    steps = build_pipeline(job.config.target, job.config.opt_level).steps
    if _claims(state, "optimized"):
        # A plugin at the optimized point transforms IR (e.g. differentiates it): it sees calls of
        # target library functions, not their inlined bodies, which are inlined after it.
        state.hold_libraries()
    cut, mid, late = _after(steps, "early"), _after(steps, "simplified"), _after(steps, "optimized")
    run_pipeline(state, Pipeline(steps[:cut]))
    launch_entry = _add_launch_entry(job, module, trace)
    run_pipeline(state, Pipeline(steps[cut:mid]))
    start = time.perf_counter()
    if job.config.target.annotate_for_vectorizer(job, module):
        trace.segments.append(SegmentRecord("vector_variants", time.perf_counter() - start))
        if job.config.snapshots:
            trace.snapshot(module, "vector_variants", "stage")
    run_pipeline(state, Pipeline(steps[mid:late]))
    if state.held_libraries is not None:
        start = time.perf_counter()
        if state.release_libraries():
            trace.segments.append(SegmentRecord("libraries", time.perf_counter() - start))
            if job.config.snapshots:
                trace.snapshot(module, "libraries", "stage")
    run_pipeline(state, Pipeline(steps[late:]))
    return launch_entry


def _claims(state: CompileState, point: str) -> bool:
    """Whether the module declares a marker that a plugin with a callback at `point` claims."""
    names = state.module.function_names()
    return any(find_marker(marker, names) is not None for _, marker in state.config.markers_at(point))


def _after(steps, point: str) -> int:
    """The index of the step after the callback point `point` (the end when there is none)."""
    return next((i + 1 for i, step in enumerate(steps) if step.kind == "point" and step.name == point), len(steps))


def _add_launch_entry(job, module: Module, trace: Trace) -> str | None:
    """Let the target add the function its launcher calls (`Target.add_launch_entry`)."""
    start = time.perf_counter()
    entry = module.functions.get(job.source.entry_name)
    added = None if entry is None else job.config.target.add_launch_entry(job, module, entry)
    if added is None:
        return None
    trace.segments.append(SegmentRecord("launch_entry", time.perf_counter() - start))
    if job.config.snapshots:
        trace.snapshot(module, "launch_entry", "stage")
    return added.name


def _finish(job, module: Module, entry_name: str, tm, launch_entry: str | None = None,
            extra_entries: list[str] = ()) -> list[str]:
    """Internalize all but the entry points, mark kernels, let the target finish the module;
    returns the entry points' final names, the job's entry first."""
    config, target = job.config, job.config.target
    entry = module.functions[entry_name]
    extras = _extra_entries(job, module, extra_entries)
    if config.name and config.name != entry_name:
        if config.name in module.functions:
            raise CompilationError(f"cannot name the entry point {config.name!r}: the module already has a "
                                   "function of that name", hint="choose another CompilerConfig(name=...)")
        entry.name = config.name
    entry.linkage = "external"
    for fn in module.functions:
        if (not fn.is_declaration and fn != entry and fn.name != launch_entry and fn not in extras
                and not fn.name.startswith("llvm.")):
            fn.linkage = "internal"
    for gv in module.globals:
        if not gv.is_declaration and not gv.name.startswith("llvm."):
            gv.linkage = "internal"
    if config.kernel:
        issue = kernel_issue(entry)
        if issue is not None:  # validation was skipped (optimize=False or validate=False)
            raise ValidationError([issue], job)
        entry = target.mark_kernel(job, entry, module) or entry
    for k, fn in enumerate(extras):
        fn.linkage = "external"
        extras[k] = target.mark_kernel(job, fn, module) or fn
    target.finish_module(job, module, tm)
    run_passes(module, "globaldce", tm, verify=not config.verify_plugins)
    return [entry.name, *(fn.name for fn in extras)]


def _extra_entries(job, module: Module, names) -> list:
    """The functions plugins kept as further kernel entry points, each checked to be one."""
    found, issues = [], []
    for name in names:
        fn = module.functions.get(name)
        if fn is None or fn.is_declaration:
            issues.append(IRIssue("invalid-kernel", f"the entry point @{name} that a plugin added "
                                  "(CompileState.add_entry) is no longer defined in the module", function=name))
            continue
        issue = kernel_issue(fn)
        if issue is not None:
            issues.append(issue)
        found.append(fn)
    if issues:
        raise ValidationError(issues, job)
    return found


def generated_by_gpuc(job, trace: Trace) -> bool:
    """Whether every construct in the module comes from gpuc itself: a source that says so (the
    Python frontend) and no plugin but gpuc's own that could have changed it. Such IR, once
    validated, is trusted with in-process code generation; other IR may hold what a backend aborts
    on, and targets with `isolated_codegen` generate its code in a helper process."""
    return getattr(job.source, "generated_by_gpuc", False) and own_plugins_only(job, trace)


def own_plugins_only(job, trace: Trace) -> bool:
    """Whether no plugin but gpuc's own can have changed the module: none else has a
    finalize_module hook or a callback that fired."""
    own = {p.name for p in job.config.plugins if p.builtin}
    if any(p.finalize_module is not None and p.name not in own for p in job.config.plugins):
        return False
    return all(record.plugin in own for record in trace.callbacks)


def _codegen(job, module: Module, tm, output: str, *, contained: bool = True) -> str | bytes:
    try:
        module.verify()
    except LLVMError as exc:
        if not job.config.verify_plugins:
            raise ValidationError([invalid_ir_issue(str(exc))], job) from None
        raise InternalCompilerError(f"the module is invalid before codegen:\n{exc}", job) from None
    if output == "llvm":
        return str(module)
    if output == "bc":
        return module.to_bitcode()
    try:
        return job.config.target.emit(job, module, tm, output, contained=contained)
    except LLVMError as exc:  # validation let through IR the backend rejects (or crashed on, when isolated)
        issues = inline_assembly_issues(module, f"which the assembler for {job.config.target!r} rejects: {exc}")
        if issues and "<inline asm>" in str(exc):
            raise ValidationError(issues, job) from None
        raise InternalCompilerError(f"code generation for {job.config.target!r} failed: {exc}", job) from None
