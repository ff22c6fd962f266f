"""Python-kernel tests share helpers with tests/compiler (fixtures are in tests/conftest.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "compiler"))
