"""Launching a kernel without vectorization across work items (gpuc/plugins/vectorize), to compare
with the default launch: the random-program generators run each program both ways."""

from __future__ import annotations

import numpy as np


def item_by_item(kernel):
    """`kernel` as @gpuc.kernel(vectorize=False) makes it: its launches compile with
    CompilerConfig(vectorize=False)."""
    return type(kernel)(kernel.py_func, {**kernel.options, "vectorize": False})


def streaming(kernel, threshold: int | None = 0):
    """`kernel` with CompilerConfig(streaming_bytes=threshold): with 0, every launch writes the arrays it only
    stores to with non-temporal stores (gpuc/plugins/vectorize/streaming.py), not only those that store 8 MiB
    or more; with None, none does."""
    return type(kernel)(kernel.py_func, {**kernel.options, "streaming_bytes": threshold})


def differences(vectorized, scalar) -> list[str]:
    """Where two lists of arrays differ bit for bit (signs of zero included), a NaN equal to any NaN: which
    operand's NaN an operation passes on (its payload and sign) is the instruction's choice, which neither
    IEEE 754 nor NumPy fixes, and vector and scalar code may order an operation's operands differently."""
    out = []
    for k, (a, b) in enumerate(zip(vectorized, scalar)):
        a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            out.append(f"  array argument {k}: {a.dtype}{a.shape} vectorized, {b.dtype}{b.shape} item by item")
            continue
        same = (a.view(np.uint8) == b.view(np.uint8)).reshape(a.shape + (-1,)).all(axis=-1) if a.size else a
        if a.size and a.dtype.kind in "fc":
            parts = (lambda v: (v.real.copy(), v.imag.copy())) if a.dtype.kind == "c" else (lambda v: (v,))
            both_nan = np.ones(a.shape, bool)
            for x, y in zip(parts(a), parts(b)):
                both_nan &= (np.isnan(x) == np.isnan(y)) & (np.isnan(x) | (x.view(np.uint8) == y.view(np.uint8))
                                                            .reshape(x.shape + (-1,)).all(axis=-1))
            same = same | both_nan
        for idx in zip(*np.nonzero(~same)) if a.size else ():
            out.append(f"  array argument {k}{[int(i) for i in idx]}: vectorized {a[idx]!r}, item by item {b[idx]!r}")
    return out
