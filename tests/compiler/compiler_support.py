"""IR snippets, callbacks and tool discovery shared by the compiler tests (imported by name)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from gpuc.llvm import CallInst

# The seed scenario: the marker is called through an internal helper that the inliner folds
# into @kernel during optimization.
SEED_IR = """\
declare void @gpucompiler.mark(i64)

define internal void @helper(i64 %x) {
  call void @gpucompiler.mark(i64 %x)
  ret void
}

define void @kernel(ptr %p, i64 %x) {
  call void @helper(i64 %x)
  store i64 %x, ptr %p
  ret void
}
"""

# A GPU-shaped kernel with a global-memory pointer argument; valid on every target.
STORE_KERNEL_IR = """\
define void @kernel(ptr addrspace(1) %p, i32 %x) {
  %y = mul i32 %x, 3
  store i32 %y, ptr addrspace(1) %p
  ret void
}
"""


def erase_unused_calls(job, marker, module) -> bool:
    """The seed's pipeline_callback: erase every call to `marker` whose result is unused."""
    changed = False
    for use in list(marker.uses):
        call = use.user
        if isinstance(call, CallInst) and not call.uses:
            call.erase()
            changed = True
    return changed


def callers_of(marker) -> list[str]:
    """Names of the functions containing a call to `marker`."""
    return sorted({use.user.function.name for use in marker.uses})


# -- external tools --------------------------------------------------------------------------

def _first_executable(candidates) -> str | None:
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
    candidates += ["/usr/local/bin/ptxas", "/usr/local/cuda/bin/ptxas"]
    return _first_executable(candidates)


def find_spirv_val() -> str | None:
    """spirv-val (SPIRV-Tools) from PATH or the usual install locations."""
    return _first_executable([shutil.which("spirv-val"), "/usr/bin/spirv-val", "/usr/local/bin/spirv-val"])
