"""print() in kernels on the CPU (docs/debugging.md, "print"): the function compiled kernels call
through abi.PRINT_HOOK with the description of a line and its values. It formats them as Python
prints them and writes the whole line to sys.stdout at once, so pytest's capture and Jupyter see it
and each work item's lines stay whole and in order."""

from __future__ import annotations

import ctypes
import struct
import sys

import numpy as np

from ..abi import PRINT_FIELD as FIELD  # what the description's fields are separated by


def _value(kind: str, slots: list, at: int):
    """(the Python value of type `kind` read from the 64-bit `slots` at `at`, the next position)."""
    if kind.startswith("("):
        inner, depth, parts, start = kind[1:-1], 0, [], 0
        for k, c in enumerate(inner):
            depth += c == "("
            depth -= c == ")"
            if c == "," and depth == 0:
                parts.append(inner[start:k])
                start = k + 1
        if inner:
            parts.append(inner[start:])
        values = []
        for part in parts:
            v, at = _value(part, slots, at)
            values.append(v)
        return tuple(values), at
    if kind.startswith("complex"):
        re, im = (struct.unpack("<d", struct.pack("<q", slots[at + k]))[0] for k in (0, 1))
        z = complex(re, im)
        return (z if kind == "complex128" else np.complex64(z)), at + 2
    raw = slots[at]
    if kind.startswith("float"):
        x = struct.unpack("<d", struct.pack("<q", raw))[0]
        return (x if kind == "float64" else np.dtype(kind).type(x)), at + 1
    if kind == "bool":
        return raw != 0, at + 1
    if kind == "int64":
        return raw, at + 1
    if kind == "uint64":
        return raw & 0xFFFF_FFFF_FFFF_FFFF, at + 1
    return np.dtype(kind).type(raw), at + 1


def format_line(description: str, slots) -> str:
    """The text print() writes for a description (sep, end, then one field per argument) and values."""
    fields = description.split(FIELD)
    sep, end, out, at = fields[0], fields[1], [], 0
    for field in fields[2:]:
        if field.startswith("s"):
            out.append(field[1:])
            continue
        value, at = _value(field, slots, at)
        out.append(str(value))
    return sep.join(out) + end


@ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int64))
def PRINT_LINE(description, values):  # noqa: N802 - a constant: the one callback every module points to
    text = description.decode()
    count = sum(_slot_count(f) for f in text.split(FIELD)[2:])
    sys.stdout.write(format_line(text, [values[k] for k in range(count)]))


def _slot_count(field: str) -> int:
    if field.startswith("s"):
        return 0
    return sum(2 if k.startswith("complex") else 1 for k in field.replace("(", ",").replace(")", ",").split(",") if k)
