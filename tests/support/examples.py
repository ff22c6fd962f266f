"""The example programs (examples/*.py) as modules for tests: imported afresh from their files, with
examples/ on sys.path while they load (and, through the `example` fixture, while the test runs), so
that an example importing a sibling finds it."""

from __future__ import annotations

import importlib.util
import sys
from contextlib import contextmanager
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@contextmanager
def examples_on_path():
    sys.path.insert(0, str(EXAMPLES))
    try:
        yield
    finally:
        sys.path.remove(str(EXAMPLES))


def load_example(name: str, module_name: str | None = None):
    """examples/<name>.py executed as a new module `module_name` (default gpuc_example_<name>)."""
    spec = importlib.util.spec_from_file_location(module_name or f"gpuc_example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    with examples_on_path():
        spec.loader.exec_module(module)
    return module
