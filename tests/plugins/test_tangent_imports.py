"""The autodiff plugin's modules import only gpuc's public API, as a third-party plugin would."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_context_imports import import_problems

import gpuc.plugins.autodiff

MODULES = sorted(Path(gpuc.plugins.autodiff.__file__).parent.glob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=[p.name for p in MODULES])
def test_autodiff_imports_only_public_names(path):
    assert import_problems(path.read_text(), "gpuc.plugins.autodiff") == []
