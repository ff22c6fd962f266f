"""The `math` module in kernels: which functions exist, how they are typed, and how they are emitted.

How a target computes each function is the target's answer (`Target.math_lowering`, docs/targets.md):
an LLVM intrinsic its backend expands, a call into its math library (libm on the CPU, libdevice on
PTX, OpenCL's built-ins on SPIR-V), or an instruction. A function a target cannot compute is a
compile error naming what does work there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...llvm import CALLING_CONVENTIONS, ConstantFP, ConstantInt
from ...targets import TARGETS, MathLowering, MathOp, Target
from ..core import registry
from ..core.plans import CallPlan, Handler
from .small_dtypes import through_float32
from ..core.errors import UserError
from ..core.types import ScalarType, boolean, common_type, float32, float64, int64


@dataclass(frozen=True)
class MathSpec:
    """One math function. `rule` says what it returns: "float" (the promoted float type of the
    arguments, float64 for integers), "int" (floor/ceil/trunc return integers, as in Python) or
    "bool". `c_name` is its name in libm, libdevice (`__nv_` + name) and OpenCL when that differs
    from Python's."""

    low: int
    high: int
    rule: str = "float"
    intrinsic: bool = False  # LLVM has `llvm.<c_name>.f32/.f64`
    c_name: str = ""
    params: int = 0          # the library function's parameter count, when the arity varies


def _fn(arity, rule="float", intrinsic=False, c_name="", params=0) -> MathSpec:
    low, high = arity if isinstance(arity, tuple) else (arity, arity)
    return MathSpec(low, high, rule, intrinsic, c_name, params or low)


_I = True  # marks the functions LLVM has an intrinsic for
MATH: dict[str, MathSpec] = {
    # exponentials and logarithms
    "sqrt": _fn(1, intrinsic=_I), "cbrt": _fn(1), "exp": _fn(1, intrinsic=_I), "exp2": _fn(1, intrinsic=_I),
    "expm1": _fn(1), "log": _fn((1, 2), intrinsic=_I, params=1), "log2": _fn(1, intrinsic=_I), "log10": _fn(1, intrinsic=_I),
    "log1p": _fn(1), "pow": _fn(2, intrinsic=_I),
    # trigonometric and hyperbolic functions, angles
    "sin": _fn(1, intrinsic=_I), "cos": _fn(1, intrinsic=_I), "tan": _fn(1, intrinsic=_I),
    "asin": _fn(1, intrinsic=_I), "acos": _fn(1, intrinsic=_I), "atan": _fn(1, intrinsic=_I),
    "atan2": _fn(2, intrinsic=_I), "hypot": _fn((1, 32), params=2), "sinh": _fn(1, intrinsic=_I),
    "cosh": _fn(1, intrinsic=_I), "tanh": _fn(1, intrinsic=_I), "asinh": _fn(1), "acosh": _fn(1),
    "atanh": _fn(1), "radians": _fn(1), "degrees": _fn(1),
    # special functions
    "erf": _fn(1), "erfc": _fn(1), "gamma": _fn(1, c_name="tgamma"), "lgamma": _fn(1),
    # rounding, remainders, signs
    "floor": _fn(1, "int", _I), "ceil": _fn(1, "int", _I), "trunc": _fn(1, "int", _I),
    "fabs": _fn(1, intrinsic=_I), "copysign": _fn(2, intrinsic=_I), "fmod": _fn(2), "fma": _fn(3, intrinsic=_I),
    # classification
    "isnan": _fn(1, "bool"), "isinf": _fn(1, "bool"), "isfinite": _fn(1, "bool"),
}


def c_name(name: str) -> str:
    return MATH[name].c_name or name


#: Functions NumPy has and Python's math module has not (gpuc/frontend/constructs/numpy_math.py), asked of the targets
#: like the others: C's rint (round half to even) is `llvm.rint`, libm's and libdevice's `rint`, OpenCL's `rint`.
NUMPY_ONLY: dict[str, MathSpec] = {"rint": _fn(1, intrinsic=_I)}

#: What the targets are asked about each function (`Target.math_lowering`).
OPS = {name: MathOp(name, spec.c_name or name, spec.params, spec.intrinsic)
       for name, spec in (MATH | NUMPY_ONLY).items()}
# Functions composed from others (or from plain arithmetic): a target has them when it has their parts.
_COMPOSED = {"radians": (), "degrees": (), "isnan": (), "isinf": ("fabs",), "isfinite": ("fabs",)}


def available(name: str, target: Target, bits: int) -> bool:
    """Whether `target` can compute math.<name> on floats of `bits` bits."""
    if name in _COMPOSED:
        return all(available(part, target, bits) for part in _COMPOSED[name])
    return target.math_lowering(OPS[name], 32 if bits == 16 else bits) is not None  # float16: in float32


def supported_on(target: Target, bits: int) -> list[str]:
    return sorted(name for name in MATH if available(name, target, bits))


def lowering(name: str, t: ScalarType, target: Target) -> MathLowering:
    """How `target` computes math.<name> on `t`: an LLVM intrinsic, a math library call or an instruction."""
    found = target.math_lowering(OPS[name], 32 if t.bits == 16 else t.bits)
    if found is None:
        raise unavailable(name, t, target)
    return found


def unavailable(name: str, t: ScalarType, target: Target, function: str = "", supported=None) -> UserError:
    """The error for math.<name> on `t` where `target` cannot compute it; `function` names what was called
    when that is not math.<name> (numpy.arcsin), `supported` lists what works there instead of math's."""
    why = (f"its {target.math_library} math library lacks it" if target.math_library
           else "gpuc links no device math library for it")
    with_library = [n for n, cls in TARGETS.items() if cls.math_library]
    supported = supported_on(target, t.bits) if supported is None else supported
    return UserError(f"{function or 'math.' + name} on {t} is not available on the {target.name} target ({why}); "
                     f"there it supports: {', '.join(supported)}",
                     hint=f"compute in float32 where that works, or target {', '.join(with_library)}")


def emit(lw, name: str, t: ScalarType, args):
    """Emit math.<name> on values of float type `t` (the arguments already converted to `t`)."""
    if t.bits == 16:  # float16 computes in float32 and rounds, as NumPy does (small_dtypes.py)
        return through_float32(lw, args, lambda wide: emit(lw, name, float32, wide))
    how = lowering(name, t, lw.target)
    if how.kind == "instruction":
        return getattr(lw.b, how.symbol)(*args)
    ft = lw.ltype(t)
    fn = lw.declare(how.symbol, ft, [ft] * len(args))
    call = lw.b.call(fn, args)
    if how.calling_convention:
        fn.calling_convention = how.calling_convention
        call.calling_convention = CALLING_CONVENTIONS[how.calling_convention]
    return call


def float_to_int(lw, value, src: ScalarType, dst: ScalarType):
    """A float converted to an integer type, truncating toward zero and saturating: NaN gives 0 and
    values beyond the type's range give its minimum or maximum (llvm.fpto[su]i.sat; never poison)."""
    kind = "fptosi" if dst.signed else "fptoui"
    ity, fty = lw.ltype(dst), lw.ltype(src)
    fn = lw.declare(f"llvm.{kind}.sat.i{dst.bits}.f{src.bits}", ity, [fty])
    return lw.b.call(fn, [value])


class MathFunction(Handler):
    """A call of math.<name> (or gpuc.fma), typed by its spec's rule and lowered per target."""

    def __init__(self, name: str) -> None:
        self.name, self.spec = name, MATH[name]

    def type(self, typer, node):
        types = self.scalars(typer, node, self.spec.low, self.spec.high)
        t = common_type(types, [typer.is_weak(a) for a in node.args])
        ft = t if t.is_float else float64
        if self.spec.rule == "int" and not t.is_float:  # an integer gives int(x): int64, as for a float
            typer.fit(node.args[0], int64)
            return CallPlan(int64, tuple(types), t)
        for a in node.args:  # each argument is used as a float (math.hypot(x, 2**63) is fine)
            typer.fit(a, ft)
        if self.spec.rule == "bool":
            return CallPlan(boolean, tuple(types), t)
        if self.spec.rule == "int":  # a float gives int64, as Python's math.floor gives an int
            return CallPlan(int64, tuple(types), t)
        if not available(self.name, typer.session.target, ft.bits):
            raise unavailable(self.name, ft, typer.session.target)
        return CallPlan(ft, tuple(types), ft)

    def lower(self, lw, node, plan):
        t = plan.extra
        if self.spec.rule == "int" and not t.is_float:
            return lw.operand(node.args[0], plan.result)
        # each argument converts from its own type (a literal directly), never through an integer type
        values = [lw.operand(a, t if t.is_float else float64) for a in node.args]
        if self.spec.rule == "bool":
            return classify(lw, self.name, t, values[0])
        if self.spec.rule == "int":
            return float_to_int(lw, emit(lw, self.name, t, values), t, int64)
        if self.name in ("radians", "degrees"):
            return _angle(lw, self.name, values[0], t)
        if self.name == "hypot":
            return _hypot(lw, t, values)
        if self.name == "log" and len(values) == 2:  # log(x, base): CPython's log(x) / log(base)
            return lw.b.fdiv(emit(lw, "log", t, values[:1]), emit(lw, "log", t, values[1:]))
        return emit(lw, self.name, t, values)


def classify(lw, name: str, t: ScalarType, x):
    """isnan/isinf/isfinite of `x` of type `t`: integers and bools are never NaN or infinite."""
    if not t.is_float:
        return ConstantInt.get(lw.ctx.i1, int(name == "isfinite"))
    if name == "isnan":
        return lw.b.fcmp("uno", x, x)
    inf = ConstantFP.get(x.type, math.inf)
    # isinf: |x| == inf (ordered); isfinite: |x| != inf and not NaN ("one" is false for NaN)
    return lw.b.fcmp("oeq" if name == "isinf" else "one", lw.math("fabs", t, [x]), inf)


# CPython's constants: radians(x) is x * (pi / 180) and degrees(x) is x * (180 / pi), in float64.
_DEG_TO_RAD, _RAD_TO_DEG = math.pi / 180.0, 180.0 / math.pi


def _angle(lw, name: str, x, t: ScalarType):
    """radians/degrees as CPython computes them; a float32 gets the float64 result rounded to float32."""
    wide = lw.convert(x, t, float64)
    factor = ConstantFP.get(lw.ltype(float64), _DEG_TO_RAD if name == "radians" else _RAD_TO_DEG)
    return lw.convert(lw.b.fmul(wide, factor), float64, t)


def _hypot(lw, t: ScalarType, values):
    """hypot(x) is |x|; hypot(x, y, z, ...) is hypot(hypot(x, y), z) ...: libm's hypot, pairwise."""
    result = lw.math("fabs", t, [values[0]]) if len(values) == 1 else values[0]
    for v in values[1:]:
        result = lw.math("hypot", t, [result, v])
    return result


class UnsupportedMath(Handler):
    """A function of Python's math module that gpuc does not compile: the error lists what it has."""

    def __init__(self, name: str) -> None:
        self.name = name

    def type(self, typer, node):
        raise UserError(f"math.{self.name} is not supported in gpuc functions",
                        hint=f"gpuc compiles these math functions: {', '.join(sorted(MATH))}", node=node.func)


def math_calls() -> dict:
    """The call table's entries for every function of Python's math module."""
    table = {}
    for name in dir(math):
        value = getattr(math, name)
        if callable(value) and not name.startswith("_"):
            table[value] = MathFunction(name) if name in MATH else UnsupportedMath(name)
    return table


registry.register_table(math_calls)
