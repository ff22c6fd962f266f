"""The launch geometry checks every launcher makes (CPU, CUDA, OpenCL), from what the compile found
(gpuc/abi.py: EntryABI.dims and block_model, which the context plugin records on the kernel entry):
a kernel that uses the block model needs `block=`, and a launch along a dimension whose position the
kernel never reads warns once (numba-cuda's `k[blocks, threads]` ported as a 2-D launch)."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

from ..errors import LaunchWarning

_GPUC = str(Path(__file__).resolve().parents[1])


class Geometry:
    """One launcher's checks: `check(n, block)` before a launch (a ValueError, or a LaunchWarning once)."""

    __slots__ = ("name", "block_model", "dims", "warned")

    def __init__(self, name: str, block_model: str = "", dims: tuple | None = None) -> None:
        #: The kernel's name in messages (the launcher's entry until dispatch names the Python kernel).
        self.name, self.block_model, self.dims, self.warned = name, block_model, dims, False

    @classmethod
    def of(cls, entry, name: str | None = None) -> "Geometry":
        """The checks for a compiled entry (an abi.EntryABI)."""
        return cls(name or f"@{entry.name}", entry.block_model, entry.dims)

    def check(self, n, block) -> None:
        if block is None and self.block_model:
            raise ValueError(f"{self.name} uses the block model ({self.block_model}) and was launched without "
                             f"block=: give the block size, as in {self.name}[{_spelled(n).strip('()')}](..., block=256) (numba-cuda's "
                             f"k[blocks, threads](...) is k[blocks * threads](..., block=threads))")
        if self.dims is None or self.warned or not isinstance(n, (tuple, list)) or not 1 <= len(n) <= 3:
            return  # (a launch of no such shape: its own error follows)
        ignored = [d for d in range(1, len(n)) if _extent(n[d]) > 1 and d not in self.dims]
        if ignored:
            self.warned = True
            d = ignored[0]
            warnings.warn(f"{self.name} was launched over {_spelled(n)} but never reads gpuc.index({d}) (nor "
                          f"thread_index({d}) or block_index({d})): the work items along dimension {d} all do the "
                          "same work. A port of numba-cuda's k[blocks, threads](...) is "
                          "k[blocks * threads](..., block=threads) in gpuc", LaunchWarning, stacklevel=_user_level())


def _extent(value) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0  # the launch itself says what is wrong with it


def _spelled(n) -> str:
    return str(tuple(n)) if isinstance(n, (tuple, list)) else str(n)


def _user_level() -> int:
    """The stack level of the first frame outside gpuc, for warnings.warn called from check()."""
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_code.co_filename.startswith(_GPUC):
        frame, level = frame.f_back, level + 1
    return level


__all__ = ["Geometry"]
