"""The runtime tests share the IR kernels of tests/plugins."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "plugins"))
