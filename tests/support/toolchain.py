"""Finding the external checkers the tests run: ptxas (NVIDIA) and spirv-val (SPIRV-Tools)."""

from __future__ import annotations

import os
import shutil


def first_executable(candidates) -> str | None:
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return str(c)
    return None


def find_ptxas() -> str | None:
    """ptxas as gpuc finds it (GPUC_PTXAS, PATH, this interpreter's bin dir, NVIDIA's pip wheel, a CUDA install)."""
    from gpuc.targets.ptx import find_ptxas as find

    return find()


def find_spirv_val() -> str | None:
    return first_executable([shutil.which("spirv-val"), "/usr/bin/spirv-val", "/usr/local/bin/spirv-val"])
