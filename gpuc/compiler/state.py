"""The compile state: one per compile, passed to every plugin callback and finalize_module hook."""

from __future__ import annotations

import threading
import time

from ..llvm import Context, Function, Module
from .config import CompilerJob
from .linking import link_into
from .source import CompiledFunction, as_source
from .trace import CompilationRecord

_ACTIVE: dict[int, "CompileState"] = {}  # context handle -> the state of the compile using it, while it runs
_ACTIVE_LOCK = threading.Lock()


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
        job = CompilerJob(src, self.config.replace(kernel=kernel, name=None))
        if not callable(getattr(src, "irgen_into", None)):
            raise TypeError(f"{src.describe()} cannot be compiled into an existing module (it has no irgen_into)")
        start = time.perf_counter()
        existing = self.module.functions.get(src.entry_name)
        reused = existing is not None and not existing.is_declaration
        fn = src.irgen_into(job, self.module, self.compiled, self.target_machine)
        self._link_libraries(job)
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

    def _link_libraries(self, job) -> None:
        """Link the target libraries that newly compiled code declares (into a scratch module first:
        a target links a library once, and the module may hold part of it already)."""
        # Not intrinsics, plugins' markers, or symbols `compiled` records (asked for by symbol, e.g.
        # gpuc.deferred's, and compiled by a plugin): no library defines those.
        markers = {m for plugin in self.config.plugins for m in plugin.markers}
        wanted = {f.name: f.function_type for f in self.module.functions
                  if f.is_declaration and not f.name.startswith("llvm.") and f.name not in markers
                  and f.name not in self.compiled}
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
        if not any(f.name in wanted for f in provided):
            scratch.close()
            return
        for fn in provided:  # only what the module declares is linked by name; the rest stays private
            fn.linkage = "external" if fn.name in wanted else "internal"
        link_into(self.module, scratch, self.compiled, {}, what="a target library")
        for name in wanted:
            fn = self.module.functions.get(name)
            if fn is not None and not fn.is_declaration:
                fn.linkage = "internal"
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
