"""A plain-Python model of a @gpuc.kernel launch: the reference side of the kernel differential tests.

`emulate(kernel, n, *args)` runs `kernel.py_func` once per work item of the index space `n` (an int
or a tuple of up to 3 ints; index(0) varies fastest, as in docs/kernel-abi.md), sequentially, so
the atomics (gpuc's own Python versions) are ordinary read-modify-writes and every result is deterministic.

gpuc.index/ndrange refuse to run outside compiled code and read no state we could set, so the
emulation re-creates each function it runs with substituted globals and closure cells
(`types.FunctionType(code, globals, ...)`): the `gpuc` module becomes a namespace whose
index/ndrange read the current work item, intrinsics imported by name are swapped the
same way, @gpuc.func helpers are rebound recursively (so `gpuc.index()` three calls deep works),
and `math` keeps float32 arguments in float32 as the compiler does. Nothing in gpuc is patched,
so emulation is safe next to compiled launches. Not rebound: intrinsics and funcs reached through
other attribute chains (`gpuc.frontend.index`, `helpers.axpy` for a module `helpers`); an index()
reached that way raises as it does outside kernels.

Arguments are typed the way the launcher types them: Python ints become np.int64 and floats
np.float64 (strong types, not Python's weak literals), and `index()` returns np.int64.
"""

from __future__ import annotations

import math
import types

import numpy as np

import gpuc
from gpuc.frontend.core import intrinsics
from gpuc.frontend.core.functions import Func

__all__ = ["emulate", "launch_args"]


class _WorkItem:
    """The emulated context: the current index and the launch size, both padded to 3 dims."""

    def __init__(self, n) -> None:
        dims = (n,) if not isinstance(n, tuple) else n
        if not 1 <= len(dims) <= 3 or any(int(d) < 0 for d in dims):
            raise ValueError(f"an index space has 1 to 3 non-negative sizes, not {n!r}")
        self.ndrange = tuple(int(d) for d in dims) + (1,) * (3 - len(dims))
        self.index = (0, 0, 0)

    def items(self):
        n0, n1, n2 = self.ndrange
        for i2 in range(n2):
            for i1 in range(n1):
                for i0 in range(n0):  # dimension 0 innermost: it varies fastest
                    self.index = (i0, i1, i2)
                    yield

    def get_index(self, dim: int = 0):
        return np.int64(self.index[dim])

    def get_ndrange(self, dim: int = 0):
        return np.int64(self.ndrange[dim])


def _float32_preserving(fn):
    def call(*args):
        result = fn(*args)
        floats = [a for a in args if isinstance(a, (float, np.floating))]
        if floats and all(isinstance(a, np.float32) for a in floats) and isinstance(result, float):
            return np.float32(result)
        return result
    return call


def _math_namespace() -> types.SimpleNamespace:
    ns = types.SimpleNamespace(**{k: getattr(math, k) for k in dir(math) if not k.startswith("_")})
    for name in ("sqrt", "exp", "log", "log2", "log10", "sin", "cos", "tan", "tanh", "pow", "fabs",
                 "copysign", "fma"):
        if hasattr(math, name):
            setattr(ns, name, _float32_preserving(getattr(math, name)))
    ns.floor = lambda x: np.int64(math.floor(x))  # int64 in kernels, like Python's int
    ns.ceil = lambda x: np.int64(math.ceil(x))
    return ns


_MATH = _math_namespace()


class _Rebinder:
    """Re-creates functions with the emulated intrinsics in place of the real ones."""

    def __init__(self, item: _WorkItem) -> None:
        self.gpuc = types.SimpleNamespace(**{k: getattr(gpuc, k) for k in dir(gpuc) if not k.startswith("__")})
        self.gpuc.index, self.gpuc.ndrange = item.get_index, item.get_ndrange
        self.gpuc.deferred = self.deferred
        self.funcs: set = set()  # ids of the re-created @gpuc.func/@gpuc.kernel functions
        self.by_identity = {id(intrinsics.index): item.get_index, id(intrinsics.ndrange): item.get_ndrange,
                            id(gpuc): self.gpuc, id(math): _MATH}
        self.done: dict = {}

    def value(self, v):
        if isinstance(v, Func):
            found = self.function(v.py_func)
            self.funcs.add(id(found))
            return found
        return self.by_identity.get(id(v), v)

    def deferred(self, f, *args, kernel=False):
        """`gpuc.deferred(f, ...)` in the emulation: the pointer is the function itself (its
        specialization only fixes argument types, which the interpreter does not model)."""
        if id(f) not in self.funcs:
            raise TypeError(f"gpuc.deferred needs a @gpuc.func, not {f!r}")
        return f

    def function(self, fn):
        found = self.done.get(fn)
        if found is None:
            glb = {}  # filled below, so that recursive funcs find themselves
            found = self.done[fn] = types.FunctionType(fn.__code__, glb, fn.__name__, fn.__defaults__,
                                                       self._cells(fn))
            glb.update({k: self.value(v) for k, v in fn.__globals__.items()})
        return found

    def _cells(self, fn):
        if fn.__closure__ is None:
            return None
        cells = []
        for cell in fn.__closure__:
            try:
                cells.append(types.CellType(self.value(cell.cell_contents)))
            except ValueError:  # an empty cell (a name assigned later in the enclosing scope)
                cells.append(cell)
        return tuple(cells)


def launch_args(args) -> list:
    """Arguments as the launcher types them: int -> np.int64, float -> np.float64; the rest unchanged."""
    out = []
    for a in args:
        if type(a) is int:
            out.append(np.int64(a))
        elif type(a) is float:
            out.append(np.float64(a))
        else:
            out.append(a)
    return out


def emulate(kernel, n, *args) -> None:
    """Run `kernel` (a @gpuc.kernel) over the index space `n` in the interpreter, updating array arguments."""
    item = _WorkItem(n)
    body = _Rebinder(item).function(kernel.py_func)
    args = launch_args(args)
    with np.errstate(all="ignore"):  # integers wrap and floats overflow silently in kernels too
        for _ in item.items():
            body(*args)
