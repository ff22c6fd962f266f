"""The built-in plugins (context propagation, deferred compilation) are written only against gpuc's public API, as a third-party plugin would be."""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest

import gpuc.plugins.context
import gpuc.plugins.context_pointers
import gpuc.plugins.deferred
import gpuc.plugins.block_uniform
import gpuc.plugins.workitems

# What a plugin may import from gpuc: the layers below the plugins, through their public names.
ALLOWED = ("gpuc.abi", "gpuc.errors", "gpuc.llvm", "gpuc.compiler")
#: ... and a plugin's own modules (the context plugin's work-item loops, their uniformity analysis and
#: its handling of function pointers live in files of their own).
OWN = {"gpuc.plugins.workitems", "gpuc.plugins.block_uniform", "gpuc.plugins.context_pointers"}


def _absolute(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    base = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _public(module: str) -> set[str]:
    return set(getattr(importlib.import_module(module), "__all__", ()))


def import_problems(source: str, package: str) -> list[str]:
    """Every import in `source` (a module of `package`), at any depth, that is not the standard
    library or a public name of ALLOWED, and every underscore attribute of an imported gpuc module."""
    problems, modules = [], set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if alias.name in ALLOWED:
                    modules.add(alias.asname or alias.name.split(".")[0])
                elif top not in sys.stdlib_module_names:
                    problems.append(f"line {node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(node, package)
            if module.split(".")[0] in sys.stdlib_module_names or module == "__future__":
                continue
            if module in OWN:
                continue
            if module not in ALLOWED:
                problems.append(f"line {node.lineno}: from {module} import ...")
                continue
            public = _public(module)
            for alias in node.names:
                if alias.name.startswith("_") or alias.name not in public:
                    problems.append(f"line {node.lineno}: {module}.{alias.name} is not in {module}.__all__")
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in modules:
                problems.append(f"line {node.lineno}: private attribute {node.attr}")
    return problems


@pytest.mark.parametrize("plugin", [gpuc.plugins.context, gpuc.plugins.context_pointers, gpuc.plugins.deferred,
                                    gpuc.plugins.workitems, gpuc.plugins.block_uniform],
                         ids=lambda m: m.__name__)
def test_builtin_plugin_imports_only_public_names(plugin):
    path = Path(plugin.__file__)
    assert import_problems(path.read_text(), "gpuc.plugins") == []


def test_the_check_catches_private_and_foreign_imports():
    source = ("from gpuc.compiler.plugins import REGISTRY\nfrom ..targets import TARGETS\n"
              "from gpuc.llvm import _base\nfrom gpuc.llvm import Nonexistent\n"
              "import gpuc.frontend\nimport gpuc.llvm\n"
              "def f():\n    from gpuc.runtime import cpu\n    return gpuc.llvm._base\n")
    problems = import_problems(source, "gpuc.plugins")
    assert len(problems) == 7, problems
    assert import_problems("from dataclasses import dataclass\nfrom gpuc.abi import MAX_EXTENT\n",
                           "gpuc.plugins") == []
