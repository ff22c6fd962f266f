"""Finding the external checkers the tests run: ptxas (NVIDIA) and spirv-val (SPIRV-Tools)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def first_executable(candidates) -> str | None:
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return str(c)
    return None


def find_ptxas() -> str | None:
    """ptxas from PATH, this interpreter's bin dir, NVIDIA's pip wheel, or a CUDA install."""
    candidates = [shutil.which("ptxas"), Path(sys.executable).parent / "ptxas"]
    try:
        import nvidia.cuda_nvcc as wheel  # type: ignore[import-not-found]

        candidates += [Path(p) / "bin/ptxas" for p in wheel.__path__]
    except ImportError:
        pass
    return first_executable(candidates + ["/usr/local/bin/ptxas", "/usr/local/cuda/bin/ptxas"])


def find_spirv_val() -> str | None:
    return first_executable([shutil.which("spirv-val"), "/usr/bin/spirv-val", "/usr/local/bin/spirv-val"])
