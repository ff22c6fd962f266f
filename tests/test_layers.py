"""gpuc's packages form layers, each importing only from itself and the layers below it
(README.md, "Layout"). Every import counts, also one inside a function: a lazy import is a
dependency all the same, and a cycle hidden in a function is still a cycle."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "gpuc"

#: Bottom to top. A module belongs to the layer of its first name below `gpuc`.
LAYERS = (
    ("errors", "_version"),
    ("llvm",),
    ("abi",),
    ("targets",),
    ("compiler",),
    ("plugins",),
    ("frontend",),
    ("runtime",),
    ("cuda", "opencl", "jax", "cli", "__init__", "__main__"),
)
LAYER_OF = {name: level for level, names in enumerate(LAYERS) for name in names}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def imports(path: Path):
    """(imported gpuc module, line) for every import in the file at `path`, at any depth."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names if alias.name.split(".")[0] == "gpuc")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "gpuc":
                continue
            for alias in node.names:  # `from . import plugins` imports the submodule gpuc.plugins
                sub = f"{target}.{alias.name}"
                yield (sub if is_module(sub) else target), node.lineno


def layer(module: str) -> tuple[str, int]:
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else "__init__"
    if top not in LAYER_OF:
        raise AssertionError(f"{module} is in no layer: add {top!r} to LAYERS here and to README.md's layout")
    return top, LAYER_OF[top]


def edges():
    """(importer, imported, file, line) for every import between two of gpuc's top-level parts."""
    for path in sorted(PACKAGE.rglob("*.py")):
        importer = module_name(path)
        for imported, line in imports(path):
            if layer(importer)[0] != layer(imported)[0]:
                yield importer, imported, path.relative_to(ROOT), line


def test_every_module_has_a_layer():
    for path in PACKAGE.rglob("*.py"):
        layer(module_name(path))


def test_imports_follow_the_layer_order():
    wrong = [f"{file}:{line}: {importer} ({layer(importer)[0]}) imports {imported} ({layer(imported)[0]}), "
             "a layer above it" for importer, imported, file, line in edges()
             if layer(imported)[1] > layer(importer)[1]]
    assert not wrong, "imports against the layer order (README.md, Layout):\n" + "\n".join(wrong)


def test_no_cycles_between_packages():
    graph = defaultdict(set)
    for importer, imported, _, _ in edges():
        graph[layer(importer)[0]].add(layer(imported)[0])
    cycles = []

    def walk(node, stack):
        for nxt in sorted(graph[node]):
            if nxt in stack:
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif len(stack) < len(LAYER_OF):
                walk(nxt, stack + [nxt])

    for start in sorted(graph):
        walk(start, [start])
    assert not cycles, "import cycles between gpuc's packages:\n" + "\n".join(sorted(set(cycles)))


def test_errors_import_nothing_from_gpuc():
    assert {m for m, _ in imports(PACKAGE / "errors.py")} <= {"gpuc._version"}


def test_the_readme_describes_the_same_layers():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    positions = []
    for names in LAYERS[:-1]:
        main = names[0]
        pattern = rf"`gpuc/{main}(/|\.py)`"
        found = re.search(pattern, section)
        assert found, f"README.md's layout section does not name gpuc/{main}"
        positions.append(found.start())
    assert positions == sorted(positions), "README.md's layout section lists the layers in another order"


@pytest.mark.parametrize("source, expected", [
    ("from ..llvm import Module", "gpuc.llvm"),
    ("from .. import plugins", "gpuc.plugins"),
    ("from . import plugins", "gpuc.compiler.plugins"),
    ("def f():\n    from ..frontend import program", "gpuc.frontend.program"),
    ("import gpuc.frontend.program", "gpuc.frontend.program"),
])
def test_the_walker_resolves_imports(tmp_path, source, expected, monkeypatch):
    # The checks above pass vacuously if the walker misses imports: it must see these.
    fake = PACKAGE / "compiler" / "__layers_probe__.py"
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: source if self == fake else _read(self, *a, **k))
    assert [m for m, _ in imports(fake)] == [expected]


_read = Path.read_text


# -- inside the frontend ---------------------------------------------------------------------

#: The frontend's parts, bottom to top (gpuc/frontend/__init__.py). Parts on one level are side by side:
#: neither imports the other (constructs reach the passes only as arguments, the passes reach
#: constructs only through the registry).
FRONTEND_LAYERS = (("core",), ("numeric",), ("arrays",), ("constructs", "passes"), ("program",), ("__init__",))
FRONTEND_LEVEL = {name: level for level, names in enumerate(FRONTEND_LAYERS) for name in names}
#: Import cycles allowed inside one part, as sets of modules: a gpuc function pickles itself by value
#: through pickling.py, which rebuilds gpuc functions; a view copies itself into an array and a copy
#: reads views.
FRONTEND_CYCLES = ({"gpuc.frontend.core.functions", "gpuc.frontend.core.pickling"},
                   {"gpuc.frontend.arrays.views", "gpuc.frontend.arrays.copying"})


def frontend_part(module: str) -> str:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 else "__init__"


def frontend_edges():
    """(importer, imported, file, line) for every import between two of the frontend's modules."""
    for path in sorted((PACKAGE / "frontend").rglob("*.py")):
        importer = module_name(path)
        for imported, line in imports(path):
            if imported.startswith("gpuc.frontend.") and imported != importer:
                yield importer, imported, path.relative_to(ROOT), line


def test_every_frontend_module_has_a_part():
    for path in (PACKAGE / "frontend").rglob("*.py"):
        part = frontend_part(module_name(path))
        assert part in FRONTEND_LEVEL, f"{path}: add {part!r} to FRONTEND_LAYERS here and to gpuc/frontend/__init__.py"


def test_frontend_imports_follow_its_layers():
    wrong = []
    for importer, imported, file, line in frontend_edges():
        src, dst = frontend_part(importer), frontend_part(imported)
        if src != dst and FRONTEND_LEVEL[dst] >= FRONTEND_LEVEL[src]:
            wrong.append(f"{file}:{line}: {importer} ({src}) imports {imported} ({dst})")
    assert not wrong, "imports against the frontend's layers (gpuc/frontend/__init__.py):\n" + "\n".join(wrong)


def test_frontend_cycles_are_the_listed_ones():
    graph = defaultdict(set)
    for importer, imported, _, _ in frontend_edges():
        graph[importer].add(imported)
    # strongly connected components (Tarjan), each a set of modules that import one another
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def connect(v):
        index[v] = low[v] = len(index)
        stack.append(v), on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in sorted(graph):
        if v not in index:
            connect(v)
    unlisted = [" <-> ".join(sorted(c)) for c in found if c not in FRONTEND_CYCLES]
    assert not unlisted, "import cycles in the frontend not in FRONTEND_CYCLES:\n" + "\n".join(unlisted)
    stale = [" <-> ".join(sorted(c)) for c in FRONTEND_CYCLES if c not in found]
    assert not stale, "FRONTEND_CYCLES lists cycles that are gone; remove them:\n" + "\n".join(stale)
