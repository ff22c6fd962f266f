"""Checking a gpuc.CompilationError: its message, and its file:line:col against the function's own source."""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path

import pytest

import gpuc


def module_from_source(folder: Path, name: str, text: str):
    """The module `name` run from `text`, written to `folder`/`name`.py (gpuc reads functions' source
    from their file, so errors point into it)."""
    path = Path(folder) / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def compile_error(fn, argtypes, target=None) -> gpuc.CompilationError:
    """Compile `fn` for `argtypes`; it must fail with a CompilationError (not an internal one), returned."""
    job = gpuc.CompilerJob((fn, argtypes), gpuc.CompilerConfig(target or gpuc.NativeTarget()))
    with pytest.raises(gpuc.CompilationError) as info:
        gpuc.compile(job, "llvm")
    assert not isinstance(info.value, gpuc.InternalCompilerError)
    return info.value


def check(fn, argtypes, message: str, fragment: str, *, occurrence: int = 0, target=None, hint: str | None = None):
    """Compile, expect a CompilationError containing `message`, located at `fragment` in fn's source
    (at the `|` in it, else at its start)."""
    err = compile_error(fn, argtypes, target)
    assert message in err.message, err
    lines, first = inspect.getsourcelines(fn.__wrapped__)
    offset, fragment = max(fragment.find("|"), 0), fragment.replace("|", "")
    hits = [(first + k, line.index(fragment) + 1 + offset) for k, line in enumerate(lines) if fragment in line]
    line, col = hits[occurrence]
    assert err.location is not None, err
    assert (err.location.line, err.location.col) == (line, col), f"expected {line}:{col}\n{err}"
    assert err.location.file == inspect.getsourcefile(fn.__wrapped__)
    text = str(err)
    assert f"{err.location.file}:{line}:{col}: " in text
    assert fragment in text.splitlines()[1] and text.splitlines()[2].index("^") == 4 + col - 1
    if hint is not None:
        assert hint in (err.hint or ""), err
    return err
