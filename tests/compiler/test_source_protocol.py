"""The compiler's source protocol: the compiler reaches the frontend only through it, never by import."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import gpuc
from gpuc.compiler import Source, as_source

COMPILER = Path(gpuc.__file__).parent / "compiler"
ABOVE = ("gpuc.frontend", "gpuc.plugins", "gpuc.runtime", "gpuc.cli", "gpuc.cuda")


def imported_modules(path: Path):
    """Every module an import statement in `path` names, relative imports resolved, at any depth."""
    package = "gpuc.compiler"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(p for p in (base, node.module) if p)
            if node.module:  # `from .. import llvm` names gpuc.llvm, not gpuc itself
                yield module
            yield from (f"{module}.{alias.name}" for alias in node.names)


@pytest.mark.parametrize("path", sorted(COMPILER.glob("*.py")), ids=lambda p: p.name)
def test_the_compiler_imports_nothing_above_it(path):
    wrong = sorted({m for m in imported_modules(path) if m.startswith(ABOVE) or m in ("gpuc", "gpuc.frontend")})
    assert not wrong, f"gpuc/compiler/{path.name} imports {wrong}, above the compiler in the layering"


def test_python_functions_become_sources_through_the_protocol():
    @gpuc.func
    def inc(x):
        return x + 1

    source = as_source((inc, (gpuc.int64,)))
    assert isinstance(source, Source) and source.entry_name.endswith("protocol.inc.i64") and source.generated_by_gpuc
    assert isinstance(gpuc.IRSource("define void @f() {\n  ret void\n}\n", entry="f"), Source)
    for wrong in ("define void @f() {\n  ret void\n}", b"BC", 3):
        with pytest.raises(TypeError, match="pass an IRSource"):
            as_source(wrong)
