"""The compile state: one per compile, passed to every plugin callback and finalize_module hook."""

from __future__ import annotations

import threading
import time

from ..llvm import Context, Function, Module, run_passes
from .config import CompilerJob
from .linking import link_into
from .pipeline import build_pipeline
from .plugins import claimed_by, find_marker
from .source import CompiledFunction, as_source
from .trace import CompilationRecord, SegmentRecord
from ..targets.interface import without_pass

_ACTIVE: dict[int, "CompileState"] = {}  # context handle -> the state of the compile using it, while it runs
_ACTIVE_LOCK = threading.Lock()
# CompileState.scratch keys of what compile_into derives once per compile.
_CONFIGS, _MARKERS, _UNPROVIDED = "gpuc.compile_into.configs", "gpuc.plugin_markers", "gpuc.libraries.unprovided"


#: Interprocedural passes that rewrite a function for its callers of the moment: fold an argument
#: every present call passes alike (ipsccp), drop a result or argument they leave unused
#: (deadargelim), change the calling convention (globalopt). Left out of `CompileState.optimize`:
#: a plugin that finds a function again by name and calls it from new code needs it as it was made.
CALLER_SPECIFIC = ("ipsccp", "globalopt", "deadargelim", "called-value-propagation")


def _without_caller_specific(text: str) -> str:
    for name in CALLER_SPECIFIC:
        text = without_pass(text, name)
    return text


class CompileState:
    """What one compile works on: its job, module, `compiled` mapping, trace and target machine.

    Plugin callbacks receive it as their first argument. It forwards `config`, `source`, `target`
    and `describe()` to the job (`state.job` is the job itself), so callbacks written against a job
    keep working. `compiled` maps LLVM function names to the CompiledFunction they came from; a
    plugin may read it and add to it, and `compile_into` adds what it compiles.
    """

    def __init__(self, job, module: Module | None, target_machine, trace, compiled: dict[str, CompiledFunction],
                 *, context: Context | None = None) -> None:
        self.job = job
        #: The module being compiled (None while irgen makes it, in `context`).
        self.module = module
        self._context = context if context is not None else module.context
        self.target_machine = target_machine
        self.trace = trace
        self.compiled = compiled
        #: The callback point being run ("early", ... "last"), "finalize_module", or None between them.
        self.point: str | None = None
        #: Per-compile storage for sources and plugins, each under a key of its own (e.g. the
        #: frontend keeps its typing session here, so that every compile_into of one compile
        #: types each function once). Dropped with the state when the compile ends.
        self.scratch: dict = {}
        #: Names of the module's entry points besides the job's own, in the order they were added.
        self.extra_entries: list[str] = []
        #: Target library functions kept from inlining until after the `optimized` point (name ->
        #: whether it was alwaysinline), or None: while a plugin there transforms IR, library calls
        #: stay calls (`Target.library_function`; see `hold_libraries`).
        self.held_libraries: dict[str, bool] | None = None

    @property
    def config(self):
        return self.job.config

    @property
    def source(self):
        return self.job.source

    @property
    def target(self):
        return self.job.config.target

    @property
    def context(self) -> Context:
        return self._context

    def describe(self) -> str:
        return self.job.describe()

    def __repr__(self) -> str:
        return f"<CompileState of {self.describe()} at {self.point or 'no point'}>"

    @staticmethod
    def of(module: "Module | Context") -> "CompileState | None":
        """The state of the compile working in `module`'s context (or in the context given), while
        that compile runs: from irgen on (a source's irgen finds it from its context), through
        every callback point. Each compile has a context of its own."""
        context = module if isinstance(module, Context) else module.context
        with _ACTIVE_LOCK:
            return _ACTIVE.get(context.address)

    def compile_into(self, source, *, kernel: bool = False, requested_by: str | None = None) -> Function:
        """Compile a further source into this compile's module (same context) and return its entry.

        `source` is a Source (e.g. an IRSource), or `(fn, argtypes)` for a @gpuc.func/@gpuc.kernel.
        It is compiled with this compile's config (`kernel=False` unless asked; a @gpuc.kernel is
        always a kernel). Functions are deduplicated by symbol: what the module already defines from
        the same source and signature (recorded in `compiled`) is reused, a declaration of the symbol
        is filled in, and everything newly defined is recorded in `compiled`. Symbols are
        deterministic. The new code is unoptimized; the pipeline's later segments optimize it.
        Target libraries it needs (libdevice on PTX) are linked. A fault in the source is a
        CompilationError located in it. `state.trace.compilations` records each call, with
        `requested_by` (e.g. the name of the function whose marker call asked for it).
        """
        src = as_source(source)
        job = CompilerJob(src, self._config_into(kernel))
        if not callable(getattr(src, "irgen_into", None)):
            raise TypeError(f"{src.describe()} cannot be compiled into an existing module (it has no irgen_into)")
        start = time.perf_counter()
        existing = self.module.functions.get(src.entry_name)
        reused = existing is not None and not existing.is_declaration
        fn = src.irgen_into(job, self.module, self.compiled, self.target_machine)
        names = self.module.function_names()
        if self.held_libraries is None and self.config.optimize and self._claims_optimized(names):
            self.hold_libraries()  # the new code asks a plugin at the optimized point (see the driver)
        self._link_libraries(job, names)
        self.trace.compilations.append(CompilationRecord(
            fn.name, src.describe(), self.point, reused and fn == existing, time.perf_counter() - start,
            requested_by))
        return fn

    def add_entry(self, fn: Function) -> None:
        """Keep `fn`, a kernel compiled into the module (`compile_into(..., kernel=True)`), as a
        further entry point: the finish stage keeps it external and marks it as a kernel the
        target's way, and `result.entries` names it after the job's own entry. Adding the job's
        entry or one already added does nothing. Keep the function's name: entries are found by it."""
        if not isinstance(fn, Function) or fn.is_declaration:
            raise TypeError(f"add_entry() takes a function defined in the module, not {fn!r}")
        if fn.name != self.job.source.entry_name and fn.name not in self.extra_entries:
            self.extra_entries.append(fn.name)

    def link(self, other: "Module | bytes") -> list[str]:
        """Link a module (or bitcode) into this compile's module; returns the names it defined.

        A module of another context is copied through bitcode and left to its owner; a module of
        this compile's context is consumed. Names the module already uses keep their meaning (see
        `gpuc.compiler.linking.link_into`). Nothing is recorded in `compiled`, as a module is no
        source that could be compiled again: to have IR recorded, compile_into an IRSource of it."""
        if isinstance(other, (bytes, bytearray)):
            other = Module.parse(bytes(other), self.context, name="<bitcode>")
        elif not isinstance(other, Module):
            raise TypeError(f"link() takes a gpuc.llvm.Module or bitcode bytes, not {type(other).__name__}")
        elif other.context != self.context:
            other = Module.parse(other.to_bitcode(), self.context, name=other.name or "<module>")
        before = {f.name for f in self.module.functions if not f.is_declaration}
        link_into(self.module, other, self.compiled, {}, what=f"the linked module {other.name!r}")
        return sorted({f.name for f in self.module.functions if not f.is_declaration} - before)

    def optimize(self, functions=None) -> None:
        """Optimize `functions` (default: the whole module) with the target's `simplify` and
        `optimize` pass segments at the compile's opt level, as the pipeline does before the
        `optimized` point: for code a plugin makes there, which the rest of the pipeline would
        leave unoptimized. Other functions are kept as they are meanwhile (not optimized again,
        not inlined into the new code); the pipeline may delete functions nothing uses any more.
        A function keeps its interface (CALLER_SPECIFIC passes are left out): a plugin may call it
        again from code it makes later."""
        chosen = None if functions is None else {f.name for f in functions}
        steps = [(s.name, _without_caller_specific(s.text)) for s in build_pipeline(self.target, self.config.opt_level).steps
                 if s.kind == "passes" and s.name in ("simplify", "optimize")]
        frozen = {} if chosen is None else self._freeze(chosen)
        start = time.perf_counter()
        try:
            for name, text in steps:
                if name == "optimize":  # as the pipeline does before its optimize segment
                    self.target.annotate_for_vectorizer(self.job, self.module)
                run_passes(self.module, text, self.target_machine, verify=not self.config.verify_plugins)
        finally:
            self._thaw(frozen)
        self.trace.segments.append(SegmentRecord(f"optimize@{self.point or 'libraries'}", time.perf_counter() - start))

    def _freeze(self, chosen: set[str]) -> dict[str, tuple[bool, bool]]:
        """Mark every other defined function optnone (with noinline, without alwaysinline, as LLVM
        requires); returns what to undo: name -> (had noinline, had alwaysinline)."""
        frozen = {}
        for fn in self.module.functions:
            attrs = fn.attributes
            if fn.is_declaration or fn.name in chosen or "optnone" in attrs:
                continue
            frozen[fn.name] = ("noinline" in attrs, "alwaysinline" in attrs)
            attrs.remove("alwaysinline")
            attrs.add("noinline")
            attrs.add("optnone")
        return frozen

    def _thaw(self, frozen: dict[str, tuple[bool, bool]]) -> None:
        for name, (noinline, alwaysinline) in frozen.items():
            fn = self.module.functions.get(name)  # the passes may have deleted it
            if fn is None or fn.is_declaration:
                continue
            fn.attributes.remove("optnone")
            if not noinline:
                fn.attributes.remove("noinline")
            if alwaysinline:
                fn.attributes.add("alwaysinline")

    def _config_into(self, kernel: bool):
        """The config of what compile_into compiles (one per kernel flag: its derived data is kept)."""
        configs = self.scratch.setdefault(_CONFIGS, {})
        if kernel not in configs:
            configs[kernel] = self.config.replace(kernel=kernel, name=None)
        return configs[kernel]

    def _claims_optimized(self, names: set[str]) -> bool:
        return any(find_marker(marker, names) is not None for _, marker in self.config.markers_at("optimized"))

    def hold_libraries(self) -> None:
        """Keep the target library functions the module defines (and links from now on) from being
        inlined, until `release_libraries`: library functions linked meanwhile are held too."""
        self.held_libraries = {}
        self._hold(self.module.functions)

    def _hold(self, functions) -> None:
        for fn in functions:
            attrs = fn.attributes
            if fn.is_declaration or not self.target.library_function(fn.name) or "noinline" in attrs:
                continue
            self.held_libraries[fn.name] = "alwaysinline" in attrs
            attrs.remove("alwaysinline")
            attrs.add("noinline")
            # External meanwhile: interprocedural passes keep its signature (no argument is
            # dropped or specialized away), so that a call of it still reads as the library's.
            fn.linkage = "external"

    def release_libraries(self) -> bool:
        """Link the libraries that code made meanwhile declares, let the held library functions be
        inlined again, and optimize the module once more so that they are; returns whether there
        was any to release."""
        held, self.held_libraries = self.held_libraries or {}, None
        for name, alwaysinline in held.items():
            fn = self.module.functions.get(name)
            if fn is not None and not fn.is_declaration:
                fn.linkage = "internal"
                fn.attributes.remove("noinline")
                if alwaysinline:
                    fn.attributes.add("alwaysinline")
        self._link_libraries(self.job)
        if not (held or any(self.target.library_function(f.name) for f in self.module.functions)):
            return False
        self.optimize()
        return True

    def _link_libraries(self, job, names: set[str] | None = None) -> None:
        """Link the target libraries that newly compiled code declares (into a scratch module first:
        a target links a library once, and the module may hold part of it already). `names`: the
        module's function names, when the caller has them."""
        # Not intrinsics, plugins' markers, symbols `compiled` records (asked for by symbol, e.g.
        # gpuc.deferred's, and compiled by a plugin), or names no library provided before (the
        # libraries do not change within a compile): no library defines those. Names are filtered
        # before any function is looked at, as this runs once per compile_into.
        markers = self.scratch.get(_MARKERS)
        if markers is None:
            markers = self.scratch[_MARKERS] = tuple({m for plugin in self.config.plugins for m in plugin.markers})
        unprovided = self.scratch.setdefault(_UNPROVIDED, set())
        functions = self.module.functions
        wanted = {}
        for name in self.module.function_names() if names is None else names:
            if name.startswith("llvm.") or name in self.compiled or name in unprovided:
                continue
            if claimed_by(markers, name):
                unprovided.add(name)
                continue
            fn = functions.get(name)
            if fn is not None and fn.is_declaration:
                wanted[name] = fn.function_type
        if not wanted:
            return
        scratch = Module("gpuc.libraries", self.context)
        try:
            scratch.triple, scratch.data_layout = self.module.triple, self.module.data_layout
            for name, fnty in wanted.items():
                scratch.add_function(name, fnty)
            libraries = self.target.link_libraries(job, scratch)
            provided = [f for f in scratch.functions if not f.is_declaration]
        except BaseException:
            scratch.close()
            raise
        unprovided.update(set(wanted).difference(f.name for f in provided))
        if not any(f.name in wanted for f in provided):
            scratch.close()
            return
        for fn in provided:  # only what the module declares is linked by name; the rest stays private
            fn.linkage = "external" if fn.name in wanted else "internal"
        link_into(self.module, scratch, self.compiled, {}, what="a target library")
        linked = [self.module.functions.get(name) for name in wanted]
        linked = [fn for fn in linked if fn is not None and not fn.is_declaration]
        for fn in linked:
            fn.linkage = "internal"
        if self.held_libraries is not None:
            self._hold(linked)
        self.trace.libraries += [name for name in libraries if name not in self.trace.libraries]


class active:
    """While inside, `CompileState.of(module or context)` finds `state` for its context."""

    def __init__(self, state: CompileState) -> None:
        self.state = state
        self.key = state.context.address

    def __enter__(self) -> CompileState:
        with _ACTIVE_LOCK:
            _ACTIVE[self.key] = self.state
        return self.state

    def __exit__(self, *exc) -> None:
        with _ACTIVE_LOCK:
            _ACTIVE.pop(self.key, None)
