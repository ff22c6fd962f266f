"""Checks of LLVM IR text before LLVM's parser sees it: input it would crash on instead of rejecting.

LLVM's parser, printer and verifier recurse once per level of nesting (types, constant
expressions, metadata), so deeply nested input overflows the stack and kills the process
(about 10,000 levels of nested constant expressions on a thread's default 8 MiB stack). gpuc
refuses IR text nested deeper than MAX_NESTING brackets: no real module comes near it, and
everything below it parses, optimizes and compiles safely on every target.
"""

from __future__ import annotations

import re
from itertools import accumulate

from .errors import LLVMError

MAX_NESTING = 1000

_BITCODE_MAGIC = (b"BC\xc0\xde", b"\xde\xc0\x17\x0b")  # raw bitcode, bitcode wrapper
_OPENING, _CLOSING = b"([{<", b")]}>"
# String literals and comments, where brackets do not nest (escapes inside strings are \XX).
_INERT = re.compile(rb'"[^"]*"|;[^\n]*')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in _OPENING + _CLOSING)
_STEPS = bytes.maketrans(_OPENING + _CLOSING, b"\x01" * 4 + b"\x02" * 4)
_TOKEN = re.compile(rb'"[^"]*"|;[^\n]*|[(\[{<]|[)\]}>]|\n')


def check_nesting(data: bytes, name: str) -> None:
    """Raise LLVMError ("name:LINE:COL: error: ...", like the parser's) when IR text nests deeper than
    MAX_NESTING. Bitcode is not text and passes; text with few brackets passes after a count."""
    if data[:4] in _BITCODE_MAGIC:
        return
    if sum(data.count(b) for b in (b"(", b"[", b"{", b"<")) <= MAX_NESTING:
        return  # cannot nest deeper than it has brackets: the common case, at the cost of four counts
    steps = _INERT.sub(b"", data).translate(None, _NOT_BRACKETS).translate(_STEPS)
    if max(accumulate(1 if s == 1 else -1 for s in steps), default=0) > MAX_NESTING:
        line, col = _too_deep_at(data)
        raise LLVMError(f"{name}:{line}:{col}: error: brackets nest more than {MAX_NESTING} levels deep here; "
                        "gpuc refuses such IR, which would overflow LLVM's stack")


def _too_deep_at(data: bytes) -> tuple[int, int]:
    """(line, column) of the bracket that first nests deeper than MAX_NESTING."""
    depth, line, line_start = 0, 1, 0
    for m in _TOKEN.finditer(data):
        token = m.group()
        if token == b"\n":
            line, line_start = line + 1, m.end()
        elif token in (b"(", b"[", b"{", b"<"):
            depth += 1
            if depth > MAX_NESTING:
                return line, m.start() - line_start + 1
        elif len(token) == 1 and token in _CLOSING:
            depth -= 1
        elif token.startswith(b'"'):
            line_start_in = token.rfind(b"\n")  # a string may span lines
            if line_start_in >= 0:
                line, line_start = line + token.count(b"\n"), m.start() + line_start_in + 1
    return line, 1
