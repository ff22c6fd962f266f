"""The `math` module in kernels: which functions exist, how they are typed, and what each target calls."""

from __future__ import annotations

import math

from ..llvm import ConstantFP, ConstantInt
from .builtins import CallPlan, Handler
from .errors import UserError
from .types import ScalarType, boolean, common_type, float64, int64

# Math functions: name -> (arity, result rule). Rules: "float" (same float type as the promoted
# arguments, float64 for integers), "int" (math.floor/ceil return Python ints), "bool".
MATH = {
    "sqrt": (1, "float"), "exp": (1, "float"), "log": (1, "float"), "log2": (1, "float"), "log10": (1, "float"),
    "sin": (1, "float"), "cos": (1, "float"), "tan": (1, "float"), "tanh": (1, "float"), "pow": (2, "float"),
    "floor": (1, "int"), "ceil": (1, "int"), "fabs": (1, "float"), "copysign": (2, "float"),
    "fma": (3, "float"), "isnan": (1, "bool"), "isinf": (1, "bool"),
}
# Which math functions lower to an LLVM intrinsic on each target; the rest become calls to the
# target's math library (libm on the CPU, libdevice's __nv_* on PTX).
_ALL_INTRINSICS = frozenset({"sqrt", "exp", "log", "log2", "log10", "sin", "cos", "tan", "tanh", "pow", "floor",
                             "ceil", "fabs", "copysign", "fma"})
_BASIC_INTRINSICS = frozenset({"sqrt", "floor", "ceil", "fabs", "copysign", "fma"})
INTRINSICS_BY_TARGET = {"native": _ALL_INTRINSICS, "ptx": _BASIC_INTRINSICS, "gcn": _ALL_INTRINSICS,
                        "spirv": _ALL_INTRINSICS}


# What a target cannot compute at all: gpuc links no device math library for AMD GPUs (yet), and
# the AMDGPU backend expands only these intrinsics itself (the others fail or crash in isel).
UNAVAILABLE = {("gcn", 64): frozenset({"exp", "log", "log2", "log10", "sin", "cos", "tan", "tanh", "pow"}),
               ("gcn", 32): frozenset({"tan", "tanh"})}


def math_symbol(name: str, t: ScalarType, target: str) -> str:
    """The function a math operation calls on `target`: an LLVM intrinsic, libdevice or libm."""
    if name in UNAVAILABLE.get((target, t.bits), ()):
        raise UserError(f"{name} on {t} is not available on the {target} target (no device math library is "
                        "linked for it)", hint="compute in float32 where that works, or target ptx/spirv/native")
    suffix = "f32" if t.bits == 32 else "f64"
    if name in INTRINSICS_BY_TARGET.get(target, _ALL_INTRINSICS):
        return f"llvm.{name}.{suffix}"
    if target == "ptx":
        return f"__nv_{name}f" if t.bits == 32 else f"__nv_{name}"
    return f"{name}f" if t.bits == 32 else name


class MathFunction(Handler):
    def __init__(self, name: str) -> None:
        self.name = name
        self.arity, self.rule = MATH[name]

    def type(self, typer, node):
        types = self.scalars(typer, node, self.arity)
        t = common_type(types, [typer.is_weak(a) for a in node.args])
        if self.rule == "bool":
            return CallPlan(boolean, tuple(types), t)
        ft = t if t.is_float else float64
        return CallPlan(int64 if self.rule == "int" else ft, tuple(types), ft)

    def lower(self, lw, node, plan):
        args = [lw.expr(a) for a in node.args]
        if self.rule == "bool":
            t = plan.extra
            if not t.is_float:
                return ConstantInt.get(lw.ctx.i1, 0)
            (x,) = [lw.convert(args[0], plan.args[0], t)]
            if self.name == "isnan":
                return lw.b.fcmp("uno", x, x)
            inf = ConstantFP.get(x.type, math.inf)
            return lw.b.fcmp("oeq", lw.math("fabs", t, [x]), inf)
        ft = plan.extra
        values = [lw.convert(v, at, ft) for v, at in zip(args, plan.args)]
        result = lw.math(self.name, ft, values)
        if self.rule == "int":
            return lw.convert(result, ft, int64)
        return result


def math_calls() -> dict:
    """The call table's math entries: each `math` function gpuc knows, and gpuc.fma."""
    from . import intrinsics

    table = {getattr(math, name): MathFunction(name) for name in MATH if hasattr(math, name)}
    table[intrinsics.fma] = MathFunction("fma")
    return table
