"""What to compile and how: IRSource, CompilerConfig (immutable, hashable) and CompilerJob."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field, replace

from ..llvm import Context, LLVMError, Module
from ..errors import CompilationError, SourceLocation
from .plugins import REGISTRY, Plugin, builtin_plugins, ordered


@dataclass(frozen=True)
class CompiledFunction:
    """Where an LLVM function came from: its source object and argument-type signature."""

    source: object
    signature: tuple | None = None


@dataclass(frozen=True, eq=False)
class IRSource:
    """LLVM IR (text or bitcode) with a named entry function: how non-Python frontends plug in."""

    text: str | bytes
    entry: str
    filename: str = "<ir>"
    _digest: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.text, (str, bytes)):
            raise TypeError("IRSource text must be LLVM IR text (str) or bitcode (bytes)")
        if not isinstance(self.entry, str) or not self.entry:
            raise TypeError("IRSource needs the entry function's name, e.g. IRSource(text, entry='kernel')")
        _require_unicode(self.entry, "the entry name")
        if isinstance(self.text, str):
            _require_unicode(self.text, "the LLVM IR text", _printable(self.filename))
        data = self.text.encode() if isinstance(self.text, str) else self.text
        object.__setattr__(self, "_digest", hashlib.sha256(data).hexdigest())

    def __eq__(self, other) -> bool:
        return isinstance(other, IRSource) and (self._digest, self.entry) == (other._digest, other.entry)

    def __hash__(self) -> int:
        return hash((self._digest, self.entry))

    @property
    def entry_name(self) -> str:
        return self.entry

    def describe(self) -> str:
        return f"IRSource({_printable(self.filename)}, entry=@{self.entry})"

    def lower(self, job: "CompilerJob", context: Context, tm=None) -> tuple[Module, dict[str, CompiledFunction]]:
        """Parse into `context`. Text without a data layout gets the target's (from `tm`) before
        parsing, so loads and stores without explicit alignment get the target's ABI alignment."""
        text, offset = self.text, 0
        if tm is not None and isinstance(text, str) and "target datalayout" not in text:
            text, offset = f'target datalayout = "{tm.data_layout}"\n' + text, 1
        try:
            module = Module.parse(text, context, name=_printable(self.filename))
        except LLVMError as exc:
            raise _ir_syntax_error(str(exc), self, offset) from None
        entry = module.functions.get(self.entry)
        if entry is None or entry.is_declaration:
            defined = sorted(f.name for f in module.functions if not f.is_declaration)
            module.close()
            raise CompilationError(
                f"the entry function @{self.entry} is not defined in {_printable(self.filename)}",
                hint=f"define it, or pick one of the defined functions: {', '.join(defined) or '(none)'}")
        try:
            module.verify()  # the parser does not verify; invalid input is the user's fault, not an ICE
        except LLVMError as exc:
            module.close()
            raise CompilationError(f"{_printable(self.filename)}: the LLVM IR parses but is invalid:\n{exc}",
                                   hint="check it with `opt -passes=verify`") from None
        compiled = {f.name: CompiledFunction(self, None) for f in module.functions if not f.is_declaration}
        return module, compiled


def _printable(text: str) -> str:
    """`text` with what cannot be encoded (lone surrogates, e.g. from a non-UTF-8 file name) escaped."""
    return text.encode("utf-8", "backslashreplace").decode()


def _require_unicode(text: str, what: str, filename: str | None = None) -> None:
    """CompilationError, located when `filename` is given, if `text` holds lone surrogates (which
    Python makes of undecodable bytes, e.g. in command-line arguments) and so is not Unicode text."""
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        location = None
        if filename is not None:
            start = text.rfind("\n", 0, exc.start) + 1
            end = text.find("\n", exc.start)
            line = text[start:end if end >= 0 else len(text)]
            location = SourceLocation(filename, text.count("\n", 0, exc.start) + 1, exc.start - start + 1,
                                      _printable(line))
        char = text[exc.start]
        raise CompilationError(f"{what} is not valid Unicode: it holds the lone surrogate {char!r} (Python's "
                               "stand-in for an undecodable byte)",
                               location, hint="pass text decoded from valid UTF-8 (bytes for bitcode)") from None


def _ir_syntax_error(message: str, source: IRSource, offset: int = 0) -> CompilationError:
    # LLVM's parser says "<name>:LINE:COL: error: MESSAGE"; turn that into a located error.
    m = re.search(r":(\d+):(\d+): error: (.*)", message)
    if m is None or not isinstance(source.text, str):
        return CompilationError(f"{_printable(source.filename)}: invalid LLVM IR: {message}",
                                hint="check the IR with `llvm-as`, or pass text that LLVM 22 accepts")
    line, col = int(m.group(1)) - offset, int(m.group(2))
    lines = source.text.splitlines()
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    if len(text) > 300:  # generated IR on one line: the location says enough
        text = ""
    return CompilationError(f"invalid LLVM IR: {m.group(3).strip()}",
                            SourceLocation(_printable(source.filename), line, col, text),
                            hint="fix the IR at this position (LLVM 22 syntax, opaque pointers)")


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


@dataclass(frozen=True)
class CompilerConfig:
    """How to compile: target, optimization, validation and the plugin set (captured at creation).

    `plugins=None` captures the globally registered plugins *now*; a sequence of Plugin objects
    (from `make_plugin`/`register_plugin`) or registered names scopes the set to this config, to
    which gpuc's own built-in plugins (context propagation) are added unless `builtin_plugins=False`.
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

    def __init__(self, target, *, kernel: bool = False, name: str | None = None, opt_level: int = 2,
                 optimize: bool = True, validate: bool = True, verify_plugins: bool = True,
                 plugins=None, fixpoint_rounds: int = 16, builtin_plugins: bool = True) -> None:
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
        for attr, value in (("target", target), ("kernel", bool(kernel)), ("name", name),
                            ("opt_level", opt_level), ("optimize", bool(optimize)), ("validate", bool(validate)),
                            ("verify_plugins", bool(verify_plugins)),
                            ("plugins", _resolve_plugins(plugins, bool(builtin_plugins))),
                            ("fixpoint_rounds", fixpoint_rounds), ("builtin_plugins", bool(builtin_plugins))):
            object.__setattr__(self, attr, value)

    def replace(self, **changes) -> "CompilerConfig":
        return replace(self, **changes)

    def markers_at(self, point: str) -> tuple[tuple[Plugin, str, bytes], ...]:
        """(plugin, marker, encoded marker) for each plugin with a callback at `point`, in order."""
        cache = self.__dict__.setdefault("_markers_at", {})  # derived data, not a field
        if point not in cache:
            cache[point] = tuple((p, m, m.encode()) for p in self.plugins if p.callback(point) is not None
                                 for m in p.markers)
        return cache[point]


@dataclass(frozen=True)
class CompilerJob:
    """A source plus a config: the unit `compile()` works on and the cache key of its result."""

    source: object
    config: CompilerConfig

    def __post_init__(self) -> None:
        if not isinstance(self.config, CompilerConfig):
            raise TypeError(f"CompilerJob needs a CompilerConfig, not {type(self.config).__name__}")
        if isinstance(self.source, tuple):  # (fn, argtypes): a Python function for the frontend
            from ..frontend.source import as_source
            object.__setattr__(self, "source", as_source(self.source))
        if getattr(getattr(self.source, "function", None), "is_kernel", False) and not self.config.kernel:
            object.__setattr__(self, "config", self.config.replace(kernel=True))  # a @gpuc.kernel is a kernel
        # str has a .lower() too: test for it first, so IR text gets a pointer to IRSource.
        if isinstance(self.source, (str, bytes)) or not hasattr(self.source, "lower"):
            raise TypeError(f"CompilerJob cannot compile a {type(self.source).__name__}; "
                            "pass an IRSource(text, entry=name) or (fn, argtypes) for a @gpuc.func / @gpuc.kernel")

    @property
    def target(self):
        return self.config.target

    def describe(self) -> str:
        source = self.source.describe() if hasattr(self.source, "describe") else repr(self.source)
        kind = "kernel" if self.config.kernel else "function"
        return f"{source} as {kind} for {self.config.target!r}, O{self.config.opt_level}"
