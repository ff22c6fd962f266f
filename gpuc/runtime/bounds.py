"""The IndexError of a failed bounds check (docs/debugging.md, "Bounds checks"), made from the record the
first failing work item of a launch filled (gpuc/abi.py: BOUNDS_RECORD): the same on every runtime."""

from __future__ import annotations

import numpy as np

from ..abi import BOUNDS_RECORD_WORDS, BOUNDS_SHAPE_WORDS, BOUNDS_SITE_BYTES, BOUNDS_TAPE


def index_error(site: str, words) -> IndexError:
    """The error for the record `words` (its BOUNDS_RECORD_WORDS words; word 0 set) of a check at `site`
    ("file:line:col: expression in function")."""
    dim, index, ndim = int(words[2]), int(words[3]), int(words[4])
    shape = tuple(int(w) for w in words[5:5 + min(ndim, BOUNDS_SHAPE_WORDS)])
    shape_text = ("(" + ", ".join(map(str, shape)) + ("," if ndim == 1 else "")
                  + (", ..." if ndim > BOUNDS_SHAPE_WORDS else "") + ")")
    where, _, what = site.partition(": ")
    return IndexError(f"{where}: index {index} is out of bounds for axis {dim} with size "
                      f"{shape[dim] if dim < len(shape) else '?'} in {what} (an array of shape {shape_text}); "
                      "the launch stopped at the first work item whose index failed its check")


def tape_error(site: str, words) -> MemoryError:
    """The error of a record a tape filled (ndim abi.BOUNDS_TAPE): the reverse sweep's tape of the gradient
    at `site` needed more than its fixed buffer on a target without an allocator."""
    needed, size = int(words[3]), int(words[5])
    where, _, what = site.partition(": ")
    return MemoryError(f"{where}: {what} needed {needed} bytes, more than the {size} its work item has on this "
                       "device, which has no allocator to grow it (SPIR-V: docs/autodiff.md, \"Tapes on targets "
                       "without an allocator\"); launch on the CPU or CUDA, or shorten the loops of one work item")


def device_error(record: np.ndarray) -> IndexError | MemoryError | None:
    """The error a device's record (abi.BOUNDS_DEVICE_RECORD_WORDS int64 words: the words, then the site's
    text) holds, or None when no check failed."""
    if not record[0]:
        return None
    text = record[BOUNDS_RECORD_WORDS:].view(np.uint8)[:BOUNDS_SITE_BYTES].tobytes().split(b"\0", 1)[0]
    site = text.decode(errors="replace") or "?"
    return tape_error(site, record) if int(record[4]) == BOUNDS_TAPE else index_error(site, record)


__all__ = ["device_error", "index_error", "tape_error"]
