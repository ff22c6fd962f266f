"""Launching a kernel without vectorization across work items (gpuc/plugins/vectorize), to compare
with the default launch: the random-program generators run each program both ways."""

from __future__ import annotations

import numpy as np


def item_by_item(kernel):
    """A copy of `kernel` whose launches compile with CompilerConfig(vectorize=False): the launch
    option `vectorize` that gpuc/runtime/dispatch.py reads from the kernel's options."""
    twin = type(kernel)(kernel.py_func, kernel.options)
    twin.options = {**kernel.options, "vectorize": False}
    return twin


def differences(vectorized, scalar) -> list[str]:
    """Where two lists of arrays differ bit for bit (NaN payloads and signs of zero included)."""
    out = []
    for k, (a, b) in enumerate(zip(vectorized, scalar)):
        a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            out.append(f"  array argument {k}: {a.dtype}{a.shape} vectorized, {b.dtype}{b.shape} item by item")
            continue
        same = (a.view(np.uint8) == b.view(np.uint8)).reshape(a.shape + (-1,)).all(axis=-1) if a.size else a
        for idx in zip(*np.nonzero(~same)) if a.size else ():
            out.append(f"  array argument {k}{[int(i) for i in idx]}: vectorized {a[idx]!r}, item by item {b[idx]!r}")
    return out
