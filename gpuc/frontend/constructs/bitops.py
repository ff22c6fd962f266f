"""gpuc.popc / gpuc.clz / gpuc.ffs: CUDA's bit counts on integer scalars, through LLVM's ctpop/ctlz/cttz
intrinsics, which every backend gpuc targets expands.

Types follow numba-cuda: popc and clz return the argument's type, ffs returns uint32. A Python int (a
literal) is an int64, as everywhere in kernels. Called from Python, they compute the same values.
"""

from __future__ import annotations

import numpy as np

from ...llvm import ConstantInt
from ..core import registry
from ..core.errors import UserError
from ..core.plans import CallPlan, Handler
from ..core.types import ScalarType, int64, uint32


def _integer(x, name: str):
    """x as a NumPy integer scalar (a Python int as an int64, like a literal in kernels)."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
        raise TypeError(f"gpuc.{name}() needs an integer, not {type(x).__name__}")
    return np.int64(x) if isinstance(x, int) else x


def _unsigned(x) -> tuple[int, int]:
    """(x's bits as a non-negative Python int, its width)."""
    bits = x.dtype.itemsize * 8
    return int(x) & ((1 << bits) - 1), bits


def popc(x):
    """The number of bits set in the integer x (of x's type)."""
    x = _integer(x, "popc")
    value, _ = _unsigned(x)
    return x.dtype.type(bin(value).count("1"))


def clz(x):
    """The number of leading zero bits of the integer x (x's width for 0; of x's type)."""
    x = _integer(x, "clz")
    value, bits = _unsigned(x)
    return x.dtype.type(bits - value.bit_length())


def ffs(x):
    """The position of the least significant bit set in the integer x, counting from 1; 0 for 0 (a uint32)."""
    value, _ = _unsigned(_integer(x, "ffs"))
    return np.uint32((value & -value).bit_length())


class BitCount(Handler):
    """gpuc.popc(x), gpuc.clz(x), gpuc.ffs(x) on an int32, int64, uint32 or uint64 x."""

    def __init__(self, name: str) -> None:
        self.name = name

    def type(self, typer, node):
        (t,) = self.args(typer, node, 1)
        if not (isinstance(t, ScalarType) and t.is_int):
            raise UserError(f"gpuc.{self.name}() needs an integer (int8 to int64, uint8 to uint64), not {t}",
                            hint="convert it first, e.g. gpuc.uint32(x)" if isinstance(t, ScalarType) else None,
                            node=node.args[0])
        if typer.is_literal(node.args[0]):
            try:
                typer.fit(node.args[0], int64)
            except UserError as exc:
                exc.node = exc.node or node.args[0]
                raise
            t = int64
        return CallPlan(uint32 if self.name == "ffs" else t, (t,))

    def lower(self, lw, node, plan):
        (t,) = plan.args
        x = lw.operand(node.args[0], t)
        ty, b = x.type, lw.b
        false = ConstantInt.get(lw.ctx.i1, 0)
        if self.name == "popc":
            return b.call(lw.declare(f"llvm.ctpop.i{t.bits}", ty, [ty]), [x])
        if self.name == "clz":  # not poison at 0: the width
            return b.call(lw.declare(f"llvm.ctlz.i{t.bits}", ty, [ty, lw.ctx.i1]), [x, false])
        trailing = b.call(lw.declare(f"llvm.cttz.i{t.bits}", ty, [ty, lw.ctx.i1]), [x, false])
        position = b.add(trailing, ConstantInt.get(ty, 1))
        zero = ConstantInt.get(ty, 0)
        position = b.select(b.icmp("eq", x, zero), zero, position)
        i32 = lw.ctx.i32
        if t.bits == 32:
            return position
        return b.trunc(position, i32) if t.bits > 32 else b.zext(position, i32)  # int8/int16: a uint32 too


for _fn in (popc, clz, ffs):
    registry.register(_fn, BitCount(_fn.__name__), public=_fn.__name__, group="bit operations")
