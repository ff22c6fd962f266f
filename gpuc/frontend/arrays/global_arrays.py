"""Global NumPy arrays read in gpuc functions: frozen at compile time, as Numba does, into a constant
global of the module (in the target's array address space), typed as a read-only array.

The array's bytes, dtype and shape are part of the disk cache's key (gpuc/frontend/program.py
hashes every captured ndarray), so a changed global compiles again there; a kernel already compiled
in this process keeps the values it was compiled with, as in Numba.
"""

from __future__ import annotations

import hashlib

import numpy as np

from ... import abi
from ...llvm import Constant
from ..core.errors import UserError
from ..core.types import ArrayType, ScalarType, as_type
from .views import READONLY, array_value


def is_global_array(value) -> bool:
    return isinstance(value, np.ndarray)


def global_array_type(typer, value: np.ndarray, node) -> ArrayType:
    """The read-only array type of a global ndarray; records the array as the node's constant."""
    try:
        dtype = as_type(value.dtype)
    except TypeError:
        dtype = None
    if not isinstance(dtype, ScalarType) or value.dtype.kind not in "biuf" or not value.dtype.isnative:
        raise UserError(f"the global array has dtype {value.dtype}, which gpuc has no array type for",
                        hint="use arrays of numbers or bools in the machine's byte order (int32, float64, ...)")
    if not 1 <= value.ndim <= 3:
        raise UserError(f"the global array has {value.ndim} dimensions; gpuc arrays have 1 to 3",
                        hint="reshape it, or pass it as an argument")
    typer.typed.consts[id(node)] = value
    return ArrayType(dtype, value.ndim, "C", READONLY)


def lower_global_array(lw, value: np.ndarray, t: ArrayType):
    """The array struct of the frozen copy of `value`: one private constant global per distinct content."""
    data = np.ascontiguousarray(value)
    if t.dtype.is_bool:
        data = data.astype(np.uint8)
    raw = data.tobytes()
    digest = hashlib.sha256(repr((data.dtype.str, data.shape)).encode() + raw).hexdigest()[:16]
    module = lw.program.module
    name = f"gpuc.global_array.{digest}"
    gv = module.globals.get(name)
    if gv is None:
        init = Constant.string(lw.ctx, raw, null_terminate=False)
        gv = module.add_global(init.type, name, lw.target.array_address_space)
        gv.initializer = init
        gv.is_global_constant = True
        gv.linkage = "private"
        gv.alignment = max(16, t.dtype.bits // 8)
    shape = data.shape
    from ...llvm import ConstantInt
    i64 = lw.ctx.i64
    return array_value(lw, t, gv, [ConstantInt.get(i64, n) for n in shape],
                       [ConstantInt.get(i64, s) for s in abi.c_strides(shape)])
