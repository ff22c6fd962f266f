"""The compiler's source protocol: what a job compiles (IRSource here; the Python frontend's
FunctionSource implements the same protocol), and the record of where each LLVM function came from."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from ..errors import CompilationError, SourceLocation
from ..llvm import Context, Function, LLVMError, Module
from .linking import link_into


@dataclass(frozen=True)
class CompiledFunction:
    """Where an LLVM function came from: a source that can be compiled again and its signature.

    For a Python function `source` is the @gpuc.func/@gpuc.kernel object and `signature` its
    argument types (gpuc types), so `CompilerJob((cf.source, cf.signature), config)` compiles it
    again; for LLVM IR `source` is the IRSource and `signature` is None.

    A record may stand for a function the module only declares yet: one that code asks for by
    symbol (`gpuc.deferred`) and a plugin compiles on demand. `kernel` says it is to be compiled as
    an additional kernel entry point, and `requested_at` where it was first asked for (for errors).
    Neither takes part in comparisons: a record is its source and signature.
    """

    source: object
    signature: tuple | None = None
    kernel: bool = field(default=False, compare=False)
    requested_at: SourceLocation | None = field(default=None, compare=False)

    def as_source(self) -> "Source":
        """The source that compiles this function again (its entry is this function)."""
        return as_source(self.source if self.signature is None else (self.source, self.signature))


@runtime_checkable
class Source(Protocol):
    """What a CompilerJob compiles. Implemented by IRSource and the frontend's FunctionSource.

    - `entry_name`: the LLVM symbol of the entry function; deterministic (the same in every process).
    - `describe()`: one line naming the source, for errors and traces.
    - `irgen(job, context, tm)`: a new module in `context` holding the entry and all it needs, and
      the `compiled` mapping (LLVM name -> CompiledFunction) of every function it defined.
    - `irgen_into(job, module, compiled, tm)`: the same, into an existing module: functions that
      `compiled` already records for the same source and signature are reused, declarations of the
      symbol are filled in, other name clashes get distinct deterministic names. Returns the entry
      Function and records what it defined in `compiled`.
    - `generated_by_gpuc`: whether the IR holds only constructs gpuc's own code generator emits.
    """

    generated_by_gpuc: bool

    @property
    def entry_name(self) -> str: ...

    def describe(self) -> str: ...

    def irgen(self, job, context: Context, tm=None) -> tuple[Module, dict[str, CompiledFunction]]: ...

    def irgen_into(self, job, module: Module, compiled: dict[str, CompiledFunction], tm=None) -> Function: ...


def as_source(obj) -> Source:
    """`obj` as a Source: a Source itself, or `(fn, argtypes)` for an object that knows how to
    become one (`fn.__gpuc_source__(argtypes)`, as @gpuc.func and @gpuc.kernel do)."""
    if isinstance(obj, tuple) and len(obj) == 2:
        make = getattr(type(obj[0]), "__gpuc_source__", None)
        if make is not None:
            return make(obj[0], obj[1])
        name = getattr(obj[0], "__qualname__", type(obj[0]).__name__)
        raise TypeError(f"{name} is not a gpuc function; decorate it with @gpuc.func or @gpuc.kernel to compile it")
    if not callable(getattr(obj, "irgen", None)) or not hasattr(obj, "entry_name"):
        raise TypeError(f"cannot compile a {type(obj).__name__}; pass an IRSource(text, entry=name) or "
                        "(fn, argtypes) for a @gpuc.func / @gpuc.kernel")
    return obj


@dataclass(frozen=True, eq=False)
class IRSource:
    """LLVM IR (text or bitcode) with a named entry function: how non-Python frontends plug in."""

    generated_by_gpuc = False
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

    def fingerprint(self) -> str:
        """What the compiled code depends on (the disk cache's key): the IR and the entry."""
        return f"ir:{self._digest}:{self.entry}:{self.filename}"

    def irgen(self, job, context: Context, tm=None) -> tuple[Module, dict[str, CompiledFunction]]:
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

    def irgen_into(self, job, module: Module, compiled: dict, tm=None) -> Function:
        """Parse and link into `module`. What `compiled` records as coming from this same IR is
        reused; any other definition of a name the module already defines is a CompilationError."""
        existing = module.functions.get(self.entry)
        if existing is not None and not existing.is_declaration and compiled.get(self.entry) == CompiledFunction(self):
            return existing
        other, defined = self.irgen(job, module.context, tm)
        link_into(module, other, compiled, defined, what=self.describe())
        return module.functions[self.entry]


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
