"""The autodiff plugin's modules import only gpuc's public API, as a third-party plugin would."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_context_imports import import_problems

import gpuc.plugins.autodiff

MODULES = sorted(Path(gpuc.plugins.autodiff.__file__).parent.glob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=[p.name for p in MODULES])
def test_autodiff_imports_only_public_names(path):
    problems = import_problems(path.read_text(), "gpuc.plugins.autodiff")
    # The package's own modules import each other; everything else must be public gpuc API.
    assert [p for p in problems if "from gpuc.plugins.autodiff" not in p] == []


def test_the_package_exception_is_only_for_its_own_modules():
    problems = import_problems("from .kinds import error\nfrom ..context import resolve\n", "gpuc.plugins.autodiff")
    outside = [p for p in problems if "from gpuc.plugins.autodiff" not in p]
    assert outside == ["line 2: from gpuc.plugins.context import ..."]
