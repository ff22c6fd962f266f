"""NumPy's scalar types called in kernels: `np.int32(x)`, `np.float32(x)`, `np.bool_(x)`, ... convert like
`gpuc.int32(x)` (docs/frontend.md, Builtins); the types gpuc has no counterpart for are errors naming those it has."""

from __future__ import annotations

from ..core import registry
from ..core.plans import Handler
from .builtins import Convert
from ..core.errors import UserError
from ..core.types import SCALARS, as_type


class UnsupportedScalar(Handler):
    """A NumPy scalar type with no gpuc type (np.int8, np.float16, np.complex64, ...)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def type(self, typer, node):
        have = ", ".join(f"numpy.{t.name}" if t.name != "bool" else "numpy.bool_" for t in SCALARS)
        raise UserError(f"numpy.{self.name} has no gpuc type, so it cannot be called in gpuc functions",
                        hint=f"gpuc computes with {have} (and Python's bool, int, float)", node=node.func)


def numpy_calls() -> dict:
    """The call table's entries for every NumPy scalar type (aliases such as np.intc included)."""
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy is a dependency
        return {}
    table = {}
    for scalar in set(np.sctypeDict.values()):
        name = scalar.__name__
        try:
            t = as_type(np.dtype(scalar))
        except TypeError:
            table[scalar] = UnsupportedScalar(name)
            continue
        table[scalar] = Convert(f"numpy.{name}", t)
    return table


registry.register_table(numpy_calls)
