"""gpuc's error types, at the bottom of the layers: user errors, plugin failures, IR validation and
internal bugs. Every layer raises these; this module imports nothing from gpuc."""

from __future__ import annotations

import functools
import os
import platform
import sys
from dataclasses import dataclass

__all__ = ["CompilationError", "CompilerError", "IRIssue", "InternalCompilerError", "KernelError", "LaunchWarning", "PluginError",
           "SourceLocation", "ValidationError"]

class CompilerError(Exception):
    """Base of every error gpuc raises while compiling."""

    def __reduce__(self):
        # Errors travel between processes (a pool's or a Dask cluster's workers raise them in the client), and
        # each class's __init__ takes different arguments: rebuild from the formatted message and the fields.
        # The job stays behind: its description is in the message, and its source may not pickle.
        state = {name: None if name == "job" else value for name, value in self.__dict__.items()}
        return _rebuild, (type(self), self.args, state)


def _rebuild(cls: type, args: tuple, state: dict) -> CompilerError:
    error = cls.__new__(cls, *args)
    error.__dict__.update(state)
    return error


@dataclass(frozen=True)
class SourceLocation:
    file: str
    line: int
    col: int
    text: str = ""  # the source line

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    def excerpt(self) -> str:
        if not self.text:
            return ""
        return f"    {self.text.rstrip()}\n    {' ' * max(self.col - 1, 0)}^"


class CompilationError(CompilerError):
    """The user's source is at fault: says where (file:line:col, with the line and a caret) and what to do."""

    def __init__(self, message: str, location: SourceLocation | None = None, hint: str | None = None) -> None:
        self.message, self.location, self.hint = message, location, hint
        #: Further places that explain the error, as (text, location or None), e.g. where a deferred
        #: function that fails to compile was asked for.
        self.notes: list[tuple[str, SourceLocation | None]] = []
        super().__init__(self._text())

    def with_note(self, text: str, location: SourceLocation | None = None) -> "CompilationError":
        """Add a note (`text`, at `location`) to the message; returns the error, to be raised again."""
        self.notes.append((text, location))
        self.args = (self._text(),)
        return self

    def located_at(self, location: SourceLocation | None) -> "CompilationError":
        """Give the error `location` when it has none (e.g. the definition of the function at fault, when
        the IR carries no line); returns the error, to be raised again."""
        if self.location is None and location is not None:
            self.location = location
            self.args = (self._text(),)
        return self

    def _text(self) -> str:
        location, parts = self.location, []
        parts.append(f"{location}: {self.message}" if location else self.message)
        if location and location.excerpt():
            parts.append(location.excerpt())
        if self.hint:
            parts.append(f"hint: {self.hint}")
        for text, where in self.notes:
            parts.append(f"note: {where}: {text}" if where else f"note: {text}")
            if where and where.excerpt():
                parts.append(where.excerpt())
        return "\n".join(parts)


class PluginError(CompilerError):
    """A plugin failed: its callback raised, left invalid IR, or never reached a fixpoint."""

    def __init__(self, message: str, *, plugin: str, marker: str | None, point: str, job=None) -> None:
        self.plugin, self.marker, self.point, self.job = plugin, marker, point, job
        where = f"plugin {plugin!r}" + (f" (marker @{marker})" if marker else "") + f" at point {point!r}"
        job_text = f"\n  job: {job.describe()}" if job is not None else ""
        super().__init__(f"{where}: {message}{job_text}")


@dataclass(frozen=True)
class IRIssue:
    """One problem found by validation."""

    kind: str          # "unresolved-marker", "undefined-external", "unsupported-type", "invalid-kernel"
    message: str
    function: str | None = None
    symbol: str | None = None
    #: Where in the source the construct at fault is, when the IR says it (file:line:col).
    location: SourceLocation | None = None

    def __str__(self) -> str:
        return f"{self.location}: {self.message}" if self.location is not None else self.message


class ValidationError(CompilerError):
    """All IR problems found after optimization (not just the first)."""

    def __init__(self, issues: list[IRIssue], job=None) -> None:
        self.issues, self.job = list(issues), job
        lines = [f"{len(self.issues)} problem(s) in the optimized IR"
                 + (f" of {job.describe()}" if job is not None else "") + ":"]
        lines += [f"  - {issue}" for issue in self.issues]
        super().__init__("\n".join(lines))


class InternalCompilerError(CompilerError):
    """A bug in gpuc. The message carries the versions and the job, for a bug report."""

    def __init__(self, message: str, job=None) -> None:
        from ._version import __version__

        llvm = _llvm_version()
        self.job = job
        super().__init__(
            f"internal compiler error: {message}\n"
            f"  gpuc {__version__}, LLVM {llvm}, Python {platform.python_version()}\n"
            f"  job: {job.describe() if job is not None else '(none)'}\n"
            "  This is a bug in gpuc; please report it with the lines above.")


def _llvm_version() -> str:
    """The loaded libLLVM's version, without importing the LLVM layer (which sits above this one):
    an internal error can only happen once it is loaded."""
    capi = sys.modules.get("gpuc.llvm.capi")
    try:
        return ".".join(map(str, capi.version())) if capi is not None else "not loaded"
    except Exception:  # noqa: BLE001 - reporting must not fail
        return "unknown"


def full_tracebacks() -> bool:
    """Whether errors keep gpuc's own frames: GPUC_FULL_TRACEBACK=1 (for debugging gpuc itself)."""
    return os.environ.get("GPUC_FULL_TRACEBACK", "").strip().lower() in ("1", "true", "yes", "on")


def user_facing(fn):
    """Decorator for the entry points users call (launches, compiles, derivatives from Python): a
    CompilationError, a located mistake in the user's code, reaches the caller without the frames inside
    gpuc that led to it (its message says where the mistake is), as Numba trims its tracebacks.
    GPUC_FULL_TRACEBACK=1 keeps them."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except CompilationError as exc:
            if full_tracebacks():
                raise
            # the same exception, raised from here: its cause stays, gpuc's frames go
            raise exc.with_traceback(None)
    return wrapper


class KernelError(RuntimeError):
    """A kernel stopped at run time because its work items broke a rule of the language the compiler
    could not check (work items of a block arriving at different barriers); says where."""


class LaunchWarning(UserWarning):
    """A launch that runs but is probably not what was meant (docs/debugging.md, "Launch geometry"): a
    multi-dimensional launch of a kernel that never reads its position along one of the dimensions."""
