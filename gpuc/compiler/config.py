"""What to compile and how: CompilerConfig (immutable, hashable) and CompilerJob (source + config)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace

from .plugins import REGISTRY, Plugin, builtin_plugins, ordered
from .source import as_source


def _resolve_plugins(plugins, builtins: bool) -> tuple[Plugin, ...]:
    if plugins is None:
        return REGISTRY.snapshot()
    resolved = []
    if isinstance(plugins, (Plugin, str)):
        plugins = (plugins,)
    for p in plugins:
        if isinstance(p, Plugin):
            resolved.append(p)
        elif isinstance(p, str):
            found = REGISTRY.get(p)
            if found is None:
                raise ValueError(f"CompilerConfig(plugins=...): no registered plugin named {p!r}")
            resolved.append(found)
        else:
            raise TypeError(f"CompilerConfig(plugins=...) takes Plugin objects or names, not {type(p).__name__}")
    names = [p.name for p in resolved]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"CompilerConfig(plugins=...) names {', '.join(dupes)} more than once")
    if builtins:
        resolved += [p for p in builtin_plugins() if p.name not in names]
    return ordered(resolved)


#: A launch on the CPU that stores at least this many bytes (into arrays it only writes) stores them
#: non-temporally: past the caches, without first reading each line it overwrites. Measured on the 2-CPU
#: Rocket Lake Xeon of benchmarks/bench_vectorize.py: streaming wins from about 2 MiB of output (the
#: size of its L2) even where the next kernel reads the output back, and loses up to 3.5x below 1 MiB.
STREAMING_BYTES = 8 << 20


def check_streaming_bytes(value, where: str) -> None:
    if value is not None and (type(value) is not int or value < 0):
        raise ValueError(f"{where} is a number of bytes (0 or more) or None, not {value!r}")


def boundscheck_default() -> bool:
    """`GPUC_BOUNDSCHECK=1` turns bounds checks on for every compile that does not say otherwise."""
    return os.environ.get("GPUC_BOUNDSCHECK", "") not in ("", "0")


@dataclass(frozen=True)
class CompilerConfig:
    """How to compile: target, optimization, validation and the plugin set (captured at creation).

    `plugins=None` captures the globally registered plugins *now*; a sequence of Plugin objects
    (from `make_plugin`/`register_plugin`) or registered names scopes the set to this config, to
    which gpuc's own built-in plugins (context propagation) are added unless `builtin_plugins=False`.
    `whole_blocks`: the kernel is launched in whole blocks (`block=`): every work item of every block
    runs it, also those beyond the launch size (docs/frontend.md, "Blocks").
    `snapshots`: the trace keeps the IR after every stage, pass segment and plugin callback
    (`Trace.snapshots`, shown by `trace.html(path)`); such compiles bypass the disk cache.
    `boundscheck`: every index into an array is checked; the first out of range stops the launch with
    an IndexError naming the site (docs/debugging.md, "Bounds checks"). None: `GPUC_BOUNDSCHECK=1` says.
    `vectorize`: on the CPU, the launch loop runs several work items at once in vector lanes
    (gpuc/plugins/vectorize.py, docs/targets.md); False runs them one after another.
    `streaming_bytes`: on the CPU, a vectorized launch that stores at least this many bytes into arrays
    it does nothing else with writes them with non-temporal (streaming) stores, past the caches
    (docs/targets.md, "Streaming stores"); 0 streams every launch, None none.
    """

    target: object
    kernel: bool = False
    name: str | None = None
    opt_level: int = 2
    optimize: bool = True
    validate: bool = True
    verify_plugins: bool = True
    plugins: tuple[Plugin, ...] | None = None
    fixpoint_rounds: int = 16
    builtin_plugins: bool = True
    whole_blocks: bool = False
    snapshots: bool = False
    vectorize: bool = True
    boundscheck: bool = False
    streaming_bytes: int | None = STREAMING_BYTES

    def __init__(self, target, *, kernel: bool = False, name: str | None = None, opt_level: int = 2,
                 optimize: bool = True, validate: bool = True, verify_plugins: bool = True,
                 plugins=None, fixpoint_rounds: int = 16, builtin_plugins: bool = True,
                 whole_blocks: bool = False, snapshots: bool = False, vectorize: bool = True,
                 boundscheck: bool | None = None, streaming_bytes: int | None = STREAMING_BYTES) -> None:
        from ..targets.interface import Target

        if not isinstance(target, Target):
            raise TypeError(f"CompilerConfig needs a gpuc target (NativeTarget(), PTXTarget(), ...), "
                            f"not {type(target).__name__}")
        if type(opt_level) is not int or opt_level not in (0, 1, 2, 3):
            raise ValueError(f"opt_level must be 0, 1, 2 or 3, not {opt_level!r}")
        if name is not None and not re.fullmatch(r"[A-Za-z_.$][\w.$]*", name):
            raise ValueError(f"name {name!r} is not a valid symbol name")
        if type(fixpoint_rounds) is not int or fixpoint_rounds < 1:
            raise ValueError("fixpoint_rounds must be a positive int")
        check_streaming_bytes(streaming_bytes, "CompilerConfig(streaming_bytes=...)")
        for attr, value in (("target", target), ("kernel", bool(kernel)), ("name", name),
                            ("opt_level", opt_level), ("optimize", bool(optimize)), ("validate", bool(validate)),
                            ("verify_plugins", bool(verify_plugins)),
                            ("plugins", _resolve_plugins(plugins, bool(builtin_plugins))),
                            ("fixpoint_rounds", fixpoint_rounds), ("builtin_plugins", bool(builtin_plugins)),
                            ("whole_blocks", bool(whole_blocks)), ("snapshots", bool(snapshots)),
                            ("vectorize", bool(vectorize)), ("streaming_bytes", streaming_bytes),
                            ("boundscheck", boundscheck_default() if boundscheck is None else bool(boundscheck))):
            object.__setattr__(self, attr, value)

    def replace(self, **changes) -> "CompilerConfig":
        return replace(self, **changes)

    def markers_at(self, point: str) -> tuple[tuple[Plugin, str], ...]:
        """(plugin, marker) for each marker of each plugin with a callback at `point`, in order."""
        cache = self.__dict__.setdefault("_markers_at", {})  # derived data, not a field
        if point not in cache:
            cache[point] = tuple((p, m) for p in self.plugins if p.callback(point) is not None for m in p.markers)
        return cache[point]


@dataclass(frozen=True)
class CompilerJob:
    """A source plus a config: the unit `compile()` works on and the cache key of its result."""

    source: object
    config: CompilerConfig

    def __post_init__(self) -> None:
        if not isinstance(self.config, CompilerConfig):
            raise TypeError(f"CompilerJob needs a CompilerConfig, not {type(self.config).__name__}")
        try:  # (fn, argtypes) becomes fn.__gpuc_source__(argtypes): the frontend's FunctionSource
            object.__setattr__(self, "source", as_source(self.source))
        except TypeError as exc:
            raise TypeError(f"CompilerJob: {exc}") from None
        if getattr(self.source, "is_kernel", False) and not self.config.kernel:
            object.__setattr__(self, "config", self.config.replace(kernel=True))  # a @gpuc.kernel is a kernel

    @property
    def target(self):
        return self.config.target

    def describe(self) -> str:
        source = self.source.describe() if hasattr(self.source, "describe") else repr(self.source)
        kind = "kernel" if self.config.kernel else "function"
        return f"{source} as {kind} for {self.config.target!r}, O{self.config.opt_level}"
