"""gpuc.atomic_*: atomic read-modify-write of an array element, typed per element type and lowered to LLVM's
`atomicrmw` and `cmpxchg` (monotonic, CUDA's relaxed atomics). Which element types an operation has is the
language's rule, the same everywhere; what a backend cannot do on top of that is the target's answer
(`Target.atomic_issue`, docs/targets.md).

Called from Python (a func run in the interpreter), each function is a plain, non-atomic update of `a[i]`
with the compiled semantics, and returns the old value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...targets.compare_exchange import compare_exchange_loop, rmw_update
from ..core import registry
from ..core.errors import UserError
from ..core.plans import CallPlan, Handler
from ..core.types import ArrayType, ScalarType, TupleType

from ..numeric.small_dtypes import SMALL_FLOATS, SMALL_INTEGERS, SMALL_UNSIGNED  # noqa: E402
from ..core.types import an

INTEGERS = ("int32", "int64", "uint32", "uint64") + SMALL_INTEGERS
UNSIGNED = ("uint32", "uint64") + SMALL_UNSIGNED
FLOATS = ("float32", "float64") + SMALL_FLOATS


@dataclass(frozen=True)
class AtomicSpec:
    """One atomic operation: the element types it is defined for, the `atomicrmw` operation for
    signed integers, unsigned integers and floats (None for floats: the operation works on the
    float's bits as an integer of its width), and its value arguments."""

    dtypes: tuple
    signed: str
    unsigned: str
    floating: str | None = None
    values: tuple = ("v",)


ATOMICS: dict[str, AtomicSpec] = {
    "add": AtomicSpec(INTEGERS + FLOATS, "add", "add", "fadd"),
    "sub": AtomicSpec(INTEGERS + FLOATS, "sub", "sub", "fsub"),
    "min": AtomicSpec(INTEGERS + FLOATS, "min", "umin", "fmin"),
    "max": AtomicSpec(INTEGERS + FLOATS, "max", "umax", "fmax"),
    "exch": AtomicSpec(INTEGERS + FLOATS, "xchg", "xchg"),
    "and": AtomicSpec(INTEGERS, "and", "and"),
    "or": AtomicSpec(INTEGERS, "or", "or"),
    "xor": AtomicSpec(INTEGERS, "xor", "xor"),
    "inc": AtomicSpec(UNSIGNED, "uinc_wrap", "uinc_wrap", values=("bound",)),
    "dec": AtomicSpec(UNSIGNED, "udec_wrap", "udec_wrap", values=("bound",)),
    "cas": AtomicSpec(INTEGERS + FLOATS, "", "", values=("expected", "new")),
}


# -- in Python: the same update, not atomic --------------------------------------------------------


def _update(a, i, new, *values):
    """a[i] = new(old, *values), the values converted to a's element type as compiled code converts them."""
    old = a[i]
    convert = np.asarray(a).dtype.type
    with np.errstate(all="ignore"):  # integers wrap, as in kernels
        a[i] = new(old, *(convert(v) for v in values))
    return old


def _max_num(x, y, pick):
    """IEEE maxNum/minNum for floats (a NaN operand loses), plain max/min for integers."""
    if isinstance(x, (float, np.floating)):
        if math.isnan(x):
            return y
        if math.isnan(y):
            return x
    return pick(x, y)


def _bits(x):
    return np.asarray(x).view(f"u{np.asarray(x).dtype.itemsize}")[()]


def atomic_add(a, i, v):
    """Atomically a[i] += v (`i` an int, or a tuple of ints for 2-D/3-D arrays); returns the old value."""
    return _update(a, i, lambda old, v: old + v, v)


def atomic_sub(a, i, v):
    """Atomically a[i] -= v; returns the old value."""
    return _update(a, i, lambda old, v: old - v, v)


def atomic_min(a, i, v):
    """Atomically a[i] = min(a[i], v) (floats: IEEE minNum, a NaN operand loses); returns the old value."""
    return _update(a, i, lambda old, v: _max_num(old, v, min), v)


def atomic_max(a, i, v):
    """Atomically a[i] = max(a[i], v) (floats: IEEE maxNum, a NaN operand loses); returns the old value."""
    return _update(a, i, lambda old, v: _max_num(old, v, max), v)


def atomic_exch(a, i, v):
    """Atomically a[i] = v; returns the old value."""
    return _update(a, i, lambda old, v: v, v)


def atomic_and(a, i, v):
    """Atomically a[i] &= v (integer arrays); returns the old value."""
    return _update(a, i, lambda old, v: old & v, v)


def atomic_or(a, i, v):
    """Atomically a[i] |= v (integer arrays); returns the old value."""
    return _update(a, i, lambda old, v: old | v, v)


def atomic_xor(a, i, v):
    """Atomically a[i] ^= v (integer arrays); returns the old value."""
    return _update(a, i, lambda old, v: old ^ v, v)


def atomic_inc(a, i, bound):
    """Atomically a[i] = 0 if a[i] >= bound else a[i] + 1 (uint32/uint64 arrays); returns the old value."""
    return _update(a, i, lambda old, bound: old.dtype.type(0) if old >= bound else old + 1, bound)


def atomic_dec(a, i, bound):
    """Atomically a[i] = bound if a[i] == 0 or a[i] > bound else a[i] - 1 (uint32/uint64 arrays); returns
    the old value."""
    return _update(a, i, lambda old, bound: bound if old == 0 or old > bound else old - 1, bound)


def atomic_cas(a, i, expected, new):
    """Atomically: if a[i] equals `expected` (floats: the same bits), a[i] = new; returns the old value."""
    return _update(a, i, lambda old, expected, new: new if _bits(old) == _bits(expected) else old, expected, new)


# -- in kernels ------------------------------------------------------------------------------------


def _check_index(name: str, array: ArrayType, t, node) -> None:
    indices = t.elements if isinstance(t, TupleType) else (t,)
    if len(indices) != array.ndim or not all(isinstance(e, ScalarType) and not e.is_float for e in indices):
        raise UserError(f"{name} on a {array.ndim}-dimensional array needs {array.ndim} integer index(es)",
                        hint=f"pass a[i, j]'s indices as a tuple: {name}(a, (i, j), ...)", node=node)


def _supported_elsewhere(op: str, dtype: str) -> list[str]:
    """The registered targets that compile atomic_<op> on `dtype` (those constructible without arguments)."""
    from ...targets import TARGETS
    names = []
    for name, cls in TARGETS.items():
        try:
            target = cls()
        except Exception:  # noqa: BLE001 - a target that needs arguments is not suggested
            continue
        if target.atomic_issue(op, dtype) is None:
            names.append(name)
    return names


class Atomic(Handler):
    """gpuc.atomic_<op>(a, i, *values): one atomic read-modify-write of a[i]; returns the old value."""

    def __init__(self, op: str) -> None:
        self.op, self.spec, self.name = op, ATOMICS[op], f"atomic_{op}"

    def type(self, typer, node):
        a, i, *values = self.args(typer, node, 2 + len(self.spec.values))
        if not isinstance(a, ArrayType):
            raise UserError(f"{self.name} needs an array as its first argument, not {an(a)}", node=node.args[0])
        from ..arrays.views import check_writable
        check_writable(a, f"changed by {self.name}")
        dtype = a.dtype
        if dtype.name not in self.spec.dtypes:
            raise UserError(f"{self.name} does not work on {dtype} arrays",
                            hint=f"{self.name} works on {', '.join(self.spec.dtypes)} arrays", node=node.args[0])
        _check_index(self.name, a, i, node.args[1])
        for arg, t, what in zip(node.args[2:], values, self.spec.values):
            if not isinstance(t, ScalarType):
                raise UserError(f"{self.name} needs a number for {what}, not {an(t)}", node=arg)
            try:
                typer.fit(arg, dtype)
            except UserError as exc:  # a literal that does not fit
                exc.node = exc.node or arg
                exc.hint = f"the {what} of {self.name} takes the array's element type, {dtype}"
                raise
        target = typer.session.target
        issue = target.atomic_issue(self.op, dtype.name)
        if issue is not None:
            here = [d for d in self.spec.dtypes if target.atomic_issue(self.op, d) is None]
            elsewhere = _supported_elsewhere(self.op, dtype.name)
            hint = f"here {self.name} works on {', '.join(here) or 'no element type'}"
            if elsewhere:
                hint += f"; on {dtype} arrays it works when compiling for {', '.join(elsewhere)}"
            raise UserError(f"{self.name} on {dtype} arrays {issue}", hint=hint)
        return CallPlan(dtype, (a, i, *values))

    def lower(self, lw, node, plan):
        at, it = plan.args[:2]
        array, index = lw.expr(node.args[0]), lw.expr(node.args[1])
        if isinstance(it, TupleType):
            pairs = [(lw.b.extract_value(index, k), t) for k, t in enumerate(it.elements)]
        else:
            pairs = [(index, it)]
        ptr = lw.element_ptr(array, at, pairs, checked_at=node)
        dtype = at.dtype
        values = [lw.operand(arg, dtype) for arg in node.args[2:]]
        if self.op == "cas":
            return _compare_exchange(lw, ptr, dtype, *values)
        if self.op in ("inc", "dec") and self.op in lw.target.atomic_loops:
            update = rmw_update(lw.program.module, self.spec.unsigned, values[0])
            return compare_exchange_loop(lw.b, lw.fn, ptr, lw.ltype(dtype), update, name=f"atomic.{self.op}")
        op = self.spec.floating if dtype.is_float else self.spec.signed if dtype.signed else self.spec.unsigned
        if op is None:  # on the float's bits
            bits = lw.ctx.int_type(dtype.bits)
            old = lw.b.atomic_rmw(self.spec.signed, ptr, lw.b.bitcast(values[0], bits))
            return lw.b.bitcast(old, lw.ltype(dtype))
        return lw.b.atomic_rmw(op, ptr, values[0])


def _compare_exchange(lw, ptr, dtype: ScalarType, expected, new):
    """cmpxchg, on the bits for floats (so a NaN can be expected, and 0.0 does not match -0.0)."""
    if dtype.is_float:
        bits = lw.ctx.int_type(dtype.bits)
        expected, new = lw.b.bitcast(expected, bits), lw.b.bitcast(new, bits)
    pair = lw.b.cmpxchg(ptr, expected, new, success="monotonic", failure="monotonic")
    old = lw.b.extract_value(pair, 0)
    return lw.b.bitcast(old, lw.ltype(dtype)) if dtype.is_float else old


for _op, _fn in {"add": atomic_add, "sub": atomic_sub, "min": atomic_min, "max": atomic_max, "exch": atomic_exch,
                 "and": atomic_and, "or": atomic_or, "xor": atomic_xor, "inc": atomic_inc, "dec": atomic_dec,
                 "cas": atomic_cas}.items():
    registry.register(_fn, Atomic(_op), public=_fn.__name__, group="atomics")
