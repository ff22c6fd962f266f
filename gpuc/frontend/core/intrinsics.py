"""Kernel intrinsics as Python objects: the frontend recognizes them; called in Python, most refuse to run."""

from __future__ import annotations

import math
import sys

from ...errors import CompilationError, SourceLocation
from .types import GType, as_type, none


def _outside(name: str):
    raise RuntimeError(f"gpuc.{name}() only works inside a compiled @gpuc.kernel or @gpuc.func; "
                       "launch the kernel through gpuc's runtime instead of calling it from Python")


def index(dim: int = 0) -> int:
    """The global index of this work item along `dim` (0, 1 or 2)."""
    _outside("index")


def ndrange(dim: int = 0) -> int:
    """The launch size along `dim` (the n in kernel[n])."""
    _outside("ndrange")


def fma(x, y, z):
    """x * y + z with one rounding (math.fma before Python 3.13)."""
    if hasattr(math, "fma"):
        return math.fma(x, y, z)
    from fractions import Fraction
    if any(map(math.isnan, (x, y, z))) or any(map(math.isinf, (x, y, z))):
        return x * y + z
    return float(Fraction(x) * Fraction(y) + Fraction(z))


class Marker:
    """A marker function: a call in a kernel emits `call <restype> @<name>(<args>)` (see docs/kernel-abi.md)."""

    def __init__(self, name: str, restype=None, argtypes=()) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError("marker(name, ...) needs the marker function's name")
        self.name = name
        self.restype: GType = as_type(restype) if restype is not None else none
        self.argtypes: tuple = tuple(as_type(t) for t in argtypes)

    def __call__(self, *args):
        raise RuntimeError(f"marker {self.name} only works inside compiled gpuc code")

    def __repr__(self) -> str:
        return f"gpuc.marker({self.name!r}, restype={self.restype}, argtypes={self.argtypes})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Marker) and (self.name, self.restype, self.argtypes) == \
            (other.name, other.restype, other.argtypes)

    def __hash__(self) -> int:
        return hash((self.name, self.restype, self.argtypes))


def marker(name: str, restype=None, argtypes=()) -> Marker:
    """A callable that, inside kernels and funcs, emits a call of the marker function `name`."""
    return Marker(name, restype, argtypes)


def deferred(f, *args, kernel: bool = False):
    """Inside kernels and funcs: a pointer to the @gpuc.func `f` specialized for the types of `args`
    (or for a tuple of types, `deferred(f, (gpuc.float64, gpuc.int64))`), compiled on demand.
    With kernel=True, `f` is a @gpuc.kernel kept as an additional entry point of the module."""
    frame = sys._getframe(1)
    location = SourceLocation(frame.f_code.co_filename, frame.f_lineno, 1)
    raise CompilationError("gpuc.deferred(...) only works inside @gpuc.kernel and @gpuc.func code, where it "
                           "makes a function pointer; Python code has no compiled functions to point to",
                           location, hint="call the function directly in Python, or create the pointer inside "
                                          "a compiled function")
