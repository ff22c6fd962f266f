"""NumPy's functions on scalars in kernels: np.sqrt(x), np.maximum(a, b), np.clip(x, lo, hi), np.where(c, a, b).

A ufunc's types are NumPy's own answer (`ufunc.resolve_dtypes`, with Python literals as NEP 50's weak
scalars): the loop NumPy would run gives the type the arguments convert to and the result type. The
loop is then computed as NumPy's C loops compute it, the math functions through mathlib (so each
target's math library, and mathlib's located error where a target lacks one). docs/frontend.md,
"NumPy functions", lists them.
"""

from __future__ import annotations

import ast
import math
import warnings
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import numpy as np

from ...llvm import ConstantFP, ConstantInt
from ..arrays.array_methods import numpy_reduction_calls
from ..core import registry
from ..core.errors import UserError
from ..numeric.mathlib import available, classify, emit, float_to_int, unavailable
from ..core.plans import BinPlan, CallPlan, Handler
from ..numeric.arithmetic import lower_binary
from ..core.types import ScalarType, as_type, boolean, common_type, float64, int32, int64, int_range, uint64
from ..core.types import an


@dataclass(frozen=True)
class Ufunc:
    """How one ufunc's loop is computed: `lower(lw, t, args)` on arguments converted to the loop type `t`,
    and the mathlib functions its float loops call (a target must have them all)."""

    lower: Callable
    needs: tuple = ()
    in_half: bool = False  # float16 computed in float16 itself (selections), not widened to float32


def _library(name: str) -> Ufunc:
    """A ufunc NumPy has only float loops for, computed by the C function mathlib calls `name`."""
    return Ufunc(lambda lw, t, args: emit(lw, name, t, args), (name,))


def _fconst(lw, t: ScalarType, value: float):
    return ConstantFP.get(lw.ltype(t), value)


def _iconst(lw, t: ScalarType, value: int):
    return ConstantInt.get(lw.ltype(t), value & ((1 << t.bits) - 1))


def _isnan(lw, x):
    return lw.b.fcmp("uno", x, x)


# -- loops that have integer (and bool) versions --------------------------------------------------------


def _absolute(lw, t, args):
    (x,) = args
    if t.is_float:
        return lw.math("fabs", t, [x])
    if not t.signed:
        return x
    return lw.b.select(lw.b.icmp("slt", x, _iconst(lw, t, 0)), lw.b.sub(_iconst(lw, t, 0), x), x)  # MIN wraps


def _sign(lw, t, args):
    """-1, 0 or 1; a float's NaN stays NaN and both zeros give 0.0."""
    (x,) = args
    bld = lw.b
    if t.is_float:
        zero = _fconst(lw, t, 0.0)
        result = bld.select(bld.fcmp("oeq", x, zero), zero, x)
        result = bld.select(bld.fcmp("olt", x, zero), _fconst(lw, t, -1.0), result)
        return bld.select(bld.fcmp("ogt", x, zero), _fconst(lw, t, 1.0), result)
    zero = _iconst(lw, t, 0)
    if not t.signed:
        return bld.zext(bld.icmp("ne", x, zero), x.type)
    result = bld.select(bld.icmp("slt", x, zero), _iconst(lw, t, -1), zero)
    return bld.select(bld.icmp("sgt", x, zero), _iconst(lw, t, 1), result)


def _square(lw, t, args):
    (x,) = args
    return lw.b.fmul(x, x) if t.is_float else lw.b.mul(x, x)


def _reciprocal(lw, t, args):
    """1 / x; NumPy's integer loop computes 1.0 / x in float64 and converts (so 0 for |x| > 1, and
    1.0 / 0 converted as gpuc converts: the type's maximum, where NumPy's result is platform-defined)."""
    (x,) = args
    if t.is_float:
        return lw.b.fdiv(_fconst(lw, t, 1.0), x)
    return float_to_int(lw, lw.b.fdiv(_fconst(lw, float64, 1.0), lw.convert(x, t, float64)), float64, t)


def _negative(lw, t, args):
    (x,) = args
    return lw.b.fneg(x) if t.is_float else lw.b.sub(_iconst(lw, t, 0), x)


def _rounding(name: str) -> Ufunc:
    """floor/ceil/trunc: integers and bools are their own result."""
    return Ufunc(lambda lw, t, args: lw.math(name, t, args) if t.is_float else args[0], (name,))


def _arithmetic(op: str, bool_op: str = "", needs: tuple = ()) -> Ufunc:
    """A ufunc computed as gpuc's operator `op` computes it (docs/frontend.md, Expressions); a bool loop
    (np.add, np.multiply) is the logical `bool_op`."""
    def lower(lw, t, args):
        a, b = args
        if t.is_bool:
            return getattr(lw.b, bool_op)(a, b)
        return lower_binary(lw, BinPlan(op, t, t), a, t, b, t)
    return Ufunc(lower, needs)


def _fmod(lw, t, args):
    """C's remainder, with the dividend's sign; as NumPy's integer loop, x fmod 0 and MIN fmod -1 are 0."""
    a, b = args
    if t.is_float:
        return emit(lw, "fmod", t, [a, b])
    bld = lw.b
    bad = bld.icmp("eq", b, _iconst(lw, t, 0))
    if t.signed:  # x fmod -1 is 0 for every x, and MIN srem -1 would trap: divide by 1 instead
        bad = bld.or_(bad, bld.icmp("eq", b, _iconst(lw, t, -1)))
    divisor = bld.select(bad, _iconst(lw, t, 1), b)
    return bld.srem(a, divisor) if t.signed else bld.urem(a, divisor)


def _extreme(name: str) -> Ufunc:
    """maximum/minimum propagate NaN (a NaN `a`, else `b`); fmax/fmin ignore one NaN. NumPy's scalar
    formulas: maximum is `a if a > b or isnan(a) else b`, fmax `a if a >= b or isnan(b) else b`."""
    larger = name in ("maximum", "fmax")

    def lower(lw, t, args):
        a, b = args
        bld = lw.b
        if t.is_bool:
            return bld.or_(a, b) if larger else bld.and_(a, b)
        if not t.is_float:
            pred = ("s" if t.signed else "u") + ("gt" if larger else "lt")
            return bld.select(bld.icmp(pred, a, b), a, b)
        if name in ("maximum", "minimum"):  # NumPy's float16 loop keeps `a` on ties: a >= b
            strict = ("ogt" if larger else "olt") if t.bits != 16 else ("oge" if larger else "ole")
            take_a = bld.or_(bld.fcmp(strict, a, b), _isnan(lw, a))
        else:
            take_a = bld.or_(bld.fcmp("oge" if larger else "ole", a, b), _isnan(lw, b))
        return bld.select(take_a, a, b)
    return Ufunc(lower, in_half=True)


def _classification(name: str) -> Ufunc:
    return Ufunc(lambda lw, t, args: classify(lw, name, t, args[0]), ("fabs",) if name != "isnan" else ())


def _logical(name: str) -> Ufunc:
    """On the truth of each argument (NaN is true)."""
    op = {"logical_and": "and_", "logical_or": "or_", "logical_xor": "xor", "logical_not": "not_"}[name]
    return Ufunc(lambda lw, t, args: getattr(lw.b, op)(*(lw.truth(a, t) for a in args)))


# -- float-only loops with NumPy's own formulas ---------------------------------------------------------


_LOGE2, _LOG2E = 0.693147180559945309417232121458176568, 1.442695040888963407359924681001892137  # NPY_LOGE2, NPY_LOG2E


def _factor(value: float, t: ScalarType) -> float:
    """A constant of NumPy's C loops in the loop's precision (NPY_LOGE2f for float32)."""
    return value if t.bits == 64 else float(np.float32(value))


def _angle(to_radians: bool) -> Ufunc:
    """deg2rad(x) = x * (pi / 180), rad2deg(x) = x * (180 / pi), the factor rounded as the loop's type divides."""
    def lower(lw, t, args):
        pi = np.float64(math.pi) if t.bits == 64 else np.float32(math.pi)
        factor = pi / pi.dtype.type(180.0) if to_radians else pi.dtype.type(180.0) / pi
        return lw.b.fmul(args[0], _fconst(lw, t, float(factor)))
    return Ufunc(lower)


def _signbit(lw, t, args):
    (x,) = args
    bits = lw.b.bitcast(x, lw.ltype(int32 if t.bits == 32 else int64))
    return lw.b.icmp("slt", bits, ConstantInt.get(bits.type, 0))


def _logaddexp(base2: bool) -> Ufunc:
    """npy_logaddexp: x + log(2) when x == y (equal infinities too), else max + log1p(exp(-|x - y|));
    logaddexp2 the same in base 2 (log2(1 + v) as log1p(v) * log2(e)); NaN when x - y is."""
    exp = "exp2" if base2 else "exp"

    def lower(lw, t, args):
        x, y = args
        bld = lw.b
        diff = bld.fsub(x, y)
        positive = bld.fcmp("ogt", diff, _fconst(lw, t, 0.0))
        larger = bld.select(positive, x, y)
        tail = lw.math("log1p", t, [lw.math(exp, t, [bld.select(positive, bld.fneg(diff), diff)])])
        if base2:
            tail = bld.fmul(tail, _fconst(lw, t, _factor(_LOG2E, t)))
        result = bld.select(_isnan(lw, diff), diff, bld.fadd(larger, tail))
        same = bld.fadd(x, _fconst(lw, t, 1.0 if base2 else _factor(_LOGE2, t)))
        return bld.select(bld.fcmp("oeq", x, y), same, result)
    return Ufunc(lower, ("log1p", exp))


def _heaviside(lw, t, args):
    """0 below zero, `h0` at (either) zero, 1 above, NaN for NaN."""
    x, h0 = args
    bld, zero = lw.b, _fconst(lw, t, 0.0)
    result = bld.select(bld.fcmp("olt", x, zero), zero, _fconst(lw, t, 1.0))
    result = bld.select(bld.fcmp("oeq", x, zero), h0, result)
    return bld.select(_isnan(lw, x), _fconst(lw, t, math.nan), result)


_DIVMOD = ("fmod", "floor", "copysign")  # gpuc's float // and %, CPython's (and NumPy's) divmod
_LIBRARY = {"sqrt": "sqrt", "cbrt": "cbrt", "exp": "exp", "exp2": "exp2", "expm1": "expm1", "log": "log",
            "log2": "log2", "log10": "log10", "log1p": "log1p", "sin": "sin", "cos": "cos", "tan": "tan",
            "arcsin": "asin", "arccos": "acos", "arctan": "atan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh",
            "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh", "arctan2": "atan2", "hypot": "hypot",
            "copysign": "copysign", "fabs": "fabs", "rint": "rint", "float_power": "pow"}

#: The ufuncs gpuc compiles, by NumPy's name (aliases such as np.abs, np.mod, np.pow, np.acos are the same objects).
UFUNCS: dict[str, Ufunc] = {name: _library(c) for name, c in _LIBRARY.items()} | {
    "absolute": Ufunc(_absolute, ("fabs",)), "sign": Ufunc(_sign), "square": Ufunc(_square),
    "reciprocal": Ufunc(_reciprocal), "negative": Ufunc(_negative), "positive": Ufunc(lambda lw, t, args: args[0]),
    "floor": _rounding("floor"), "ceil": _rounding("ceil"), "trunc": _rounding("trunc"),
    "deg2rad": _angle(True), "radians": _angle(True), "rad2deg": _angle(False), "degrees": _angle(False),
    "add": _arithmetic("+", "or_"), "subtract": _arithmetic("-"), "multiply": _arithmetic("*", "and_"),
    "divide": _arithmetic("/"), "floor_divide": _arithmetic("//", needs=_DIVMOD),
    "remainder": _arithmetic("%", needs=_DIVMOD), "power": _arithmetic("**", needs=("pow",)),
    "fmod": Ufunc(_fmod, ("fmod",)),
    "maximum": _extreme("maximum"), "minimum": _extreme("minimum"), "fmax": _extreme("fmax"),
    "fmin": _extreme("fmin"),
    "isnan": _classification("isnan"), "isinf": _classification("isinf"), "isfinite": _classification("isfinite"),
    "signbit": Ufunc(_signbit),
    "logical_and": _logical("logical_and"), "logical_or": _logical("logical_or"),
    "logical_xor": _logical("logical_xor"), "logical_not": _logical("logical_not"),
    "logaddexp": _logaddexp(False), "logaddexp2": _logaddexp(True), "heaviside": Ufunc(_heaviside),
}
#: NumPy's functions (not ufuncs) gpuc compiles on scalars.
FUNCTIONS = ("clip", "where", "round", "around")


@lru_cache(maxsize=None)
def supported() -> tuple[str, ...]:
    """The names NumPy has for the functions gpuc compiles, aliases included (np.abs and np.absolute)."""
    objects = {id(getattr(np, name)) for name in [*UFUNCS, *FUNCTIONS]}
    return tuple(sorted(name for name in dir(np) if not name.startswith("_") and id(getattr(np, name, None)) in objects))


def supported_on(target, bits: int) -> list[str]:
    """The NumPy functions whose float loops of `bits` bits `target` computes."""
    return sorted([name for name, spec in UFUNCS.items() if all(available(n, target, bits) for n in spec.needs)]
                  + [n for n in FUNCTIONS if n not in ("round", "around") or available("rint", target, bits)])


def require(typer, node, what: str, needs, t: ScalarType) -> None:
    """mathlib's error, located at `node`, when the target cannot compute one of `needs` on `t`."""
    target = typer.session.target
    for name in needs:
        if t.is_float and not available(name, target, t.bits):
            error = unavailable(name, t, target, what, supported_on(target, t.bits))
            error.node = node
            raise error


def _scalar(handler, typer, node) -> ScalarType:
    t = typer.value_expr(node, f"an argument of {handler.name}()")
    if not isinstance(t, ScalarType):
        raise UserError(f"{handler.name}() needs numbers, not {an(t)}", node=node)
    return t


def _as_array(typer, node, t: ScalarType) -> ScalarType:
    """The type of the array NumPy makes of an argument (np.clip's and np.round's x): a literal's own
    type, uint64 for integers from 2**63 on."""
    value = typer.typed.consts.get(id(node))
    return uint64 if typer.is_weak(node) and type(value) is int and value > int_range(int64)[1] else t


# -- typing: NumPy's loop resolution -----------------------------------------------------------------


def _operand(typer, node, t: ScalarType):
    """What NumPy's resolver is told about an argument: its dtype, or a weak Python int/float literal's type."""
    if typer.is_weak(node):
        value = typer.typed.consts[id(node)]
        if type(value) in (int, float):
            return type(value)
    return np.dtype(t.name)


@lru_cache(maxsize=None)
def _resolve(ufunc, operands: tuple) -> tuple:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ufunc.resolve_dtypes(operands + (None,) * ufunc.nout)


def _fit(typer, node, t: ScalarType) -> None:
    """typer.fit, its error located at the argument."""
    try:
        typer.fit(node, t)
    except UserError as exc:
        exc.node = exc.node or node
        raise


def _gpuc_type(dtype, what: str, node) -> ScalarType:
    try:
        return as_type(dtype)
    except TypeError:
        raise UserError(f"{what} computes in {dtype} in NumPy, which gpuc has no type for", node=node,
                        hint="convert the arguments first, e.g. numpy.float32(x)") from None


class NumpyUfunc(Handler):
    """np.<ufunc>(x, ...) on scalars: the loop NumPy resolves for the argument types, computed per `spec`."""

    def __init__(self, ufunc, spec: Ufunc) -> None:
        self.ufunc, self.spec, self.name = ufunc, spec, f"numpy.{ufunc.__name__}"

    def type(self, typer, node):
        types = self.scalars(typer, node, self.ufunc.nin)
        operands = tuple(_operand(typer, a, t) for a, t in zip(node.args, types))
        try:
            resolved = _resolve(self.ufunc, operands)
        except TypeError as exc:
            raise UserError(f"{self.name} is not defined for {', '.join(map(str, types))} (NumPy: {exc})",
                            node=node.func) from None
        what = f"{self.name} of {', '.join(map(str, types))}"
        if resolved[0] == np.float16 and resolved[-1] != np.float16:
            resolved = (np.dtype(np.float32),) + resolved[1:]  # np.signbit of a bool: the same answer in float32
        loop = _gpuc_type(resolved[0], what, node.func)
        result = _gpuc_type(resolved[-1], what, node.func)
        for a in node.args:
            _fit(typer, a, loop)
        exponent = typer.typed.consts.get(id(node.args[-1])) if typer.is_weak(node.args[-1]) else None
        if self.ufunc is np.power and not loop.is_float and type(exponent) is int and exponent < 0:
            raise UserError("integers cannot be raised to a negative power (NumPy raises ValueError)",
                            hint="make the base a float: numpy.power(float(x), -n)", node=node.args[-1])
        require(typer, node.func, self.name, self.spec.needs, loop)
        return CallPlan(result, tuple(types), loop)

    def lower(self, lw, node, plan):
        t = plan.extra
        args = [lw.operand(a, t) for a in node.args]
        if t.is_float and t.bits == 16 and not self.spec.in_half:  # float32, rounded (small_dtypes.py)
            from ..numeric.small_dtypes import computes_in
            wide = computes_in(t)
            result = self.spec.lower(lw, wide, [lw.convert(a, t, wide) for a in args])
            return lw.convert(result, wide, t) if plan.result == t else result
        return self.spec.lower(lw, t, args)


# -- np.clip, np.where, np.round ---------------------------------------------------------------------


def _is_none(node) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


class Clip(Handler):
    """np.clip(x, lo, hi): NumPy's clip loop (`lo` if lo > x or lo is NaN, then `hi` if hi < that or hi is
    NaN); a bound of None, or a Python int beyond an integer x's range on its side, is left out, and one
    bound alone is np.maximum(x, lo) / np.minimum(x, hi), as NumPy computes them. NumPy makes x an array
    first, so a literal x is strong (np.clip(2.5, lo, hi) is float64); literal bounds are weak."""

    name = "numpy.clip"

    def type(self, typer, node):
        if len(node.args) != 3:
            raise UserError(f"numpy.clip() takes 3 arguments (x, lo, hi), but {len(node.args)} were given")
        x, lo, hi = node.args
        tx = _as_array(typer, x, _scalar(self, typer, x))
        kept = []
        for bound, side in ((lo, 0), (hi, 1)):
            if _is_none(bound):
                continue
            t = _scalar(self, typer, bound)
            value = typer.typed.consts.get(id(bound))
            if tx.is_int and typer.is_weak(bound) and type(value) is int:
                if (value <= int_range(tx)[0]) if side == 0 else (value >= int_range(tx)[1]):
                    typer.consumed(bound)
                    continue  # NumPy drops it: every x is on the right side of it
            kept.append((bound, t, side))
        nodes = [x] + [b for b, _, _ in kept]
        t = common_type([tx] + [bt for _, bt, _ in kept], [False] + [typer.is_weak(n) for n in nodes[1:]])
        for n in nodes:
            _fit(typer, n, t)
        return CallPlan(t, (tx,), tuple((b, side) for b, _, side in kept))

    def lower(self, lw, node, plan):
        t, kept = plan.result, plan.extra
        x = lw.operand(node.args[0], t)
        bounds = {side: lw.operand(b, t) for b, side in kept}
        if len(bounds) == 1:
            (side, bound), = bounds.items()
            return _extreme("maximum" if side == 0 else "minimum").lower(lw, t, [x, bound])
        if not bounds:
            return x
        lo, hi = bounds[0], bounds[1]
        bld = lw.b
        if not t.is_float:
            gt, lt = (("sgt", "slt") if t.signed else ("ugt", "ult"))
            x = bld.select(bld.icmp(gt, lo, x), lo, x)
            return bld.select(bld.icmp(lt, hi, x), hi, x)
        x = bld.select(bld.or_(bld.fcmp("ogt", lo, x), _isnan(lw, lo)), lo, x)
        return bld.select(bld.or_(bld.fcmp("olt", hi, x), _isnan(lw, hi)), hi, x)


class Where(Handler):
    """np.where(c, a, b) on scalars: `a` where c is true (its truth, NaN true), else `b`, both evaluated,
    in the common type of a and b (NumPy's result_type; literals are weak)."""

    name = "numpy.where"

    def type(self, typer, node):
        if len(node.args) != 3:
            raise UserError("numpy.where() takes 3 arguments (condition, a, b) in gpuc functions",
                            hint="numpy.where(condition) (the indices of nonzero elements) needs arrays, which "
                                 "gpuc functions cannot create")
        types = self.scalars(typer, node, 3)
        t = common_type(types[1:], [typer.is_weak(a) for a in node.args[1:]])
        _fit(typer, node.args[0], boolean)
        for a in node.args[1:]:
            _fit(typer, a, t)
        return CallPlan(t, tuple(types))

    def lower(self, lw, node, plan):
        c, a, b = (lw.operand(n, t) for n, t in zip(node.args, (boolean, plan.result, plan.result)))
        return lw.b.select(c, a, b)


class Round(Handler):
    """np.round(x, decimals=0) / np.around: NumPy's PyArray_Round. A float is rint(x * 10**d) / 10**d (for
    d < 0: rint(x / 10**-d) * 10**-d) in its own type; an integer is itself for d >= 0, else that computed in
    float64 and converted back."""

    keywords = True

    def __init__(self, name: str) -> None:
        self.name = f"numpy.{name}"

    def type(self, typer, node):
        given = node.args + [k.value for k in node.keywords]
        if len(given) not in (1, 2) or not node.args or any(k.arg != "decimals" for k in node.keywords):
            raise UserError(f"{self.name}() takes x and decimals (a constant), as {self.name}(x, 2) or "
                            f"{self.name}(x, decimals=2)")
        t = _as_array(typer, node.args[0], _scalar(self, typer, node.args[0]))
        decimals = 0
        if len(given) == 2:
            typer.expr(given[1])
            decimals = typer.typed.consts.get(id(given[1]))
            if type(decimals) is not int or not typer.is_weak(given[1]):
                raise UserError(f"{self.name}(x, decimals) needs decimals as a constant integer", node=given[1])
            typer.consumed(given[1])
        if t.is_bool and decimals:
            raise UserError(f"{self.name} of a bool with decimals is an error in NumPy (its result cannot be "
                            "stored as a bool)", hint="convert it first, e.g. numpy.round(numpy.float32(b), 2)",
                            node=node.func)
        if t.is_bool:
            t = as_type("float16")  # NumPy rounds a bool in its float16 loop
        _fit(typer, node.args[0], t)
        if t.is_float or decimals < 0:
            require(typer, node.func, self.name, ("rint",), t if t.is_float else float64)
        return CallPlan(t, (t,), decimals)

    def lower(self, lw, node, plan):
        t, decimals = plan.result, plan.extra
        x = lw.operand(node.args[0], t)
        if t.is_int and decimals >= 0:
            return x
        ft = t if t.is_float else float64
        value = lw.convert(x, t, ft)
        scale = _fconst(lw, ft, float(ft(_power_of_ten(abs(decimals)))))  # a Python float: weak, in ft
        bld = lw.b
        if decimals >= 0:
            value = bld.fdiv(lw.math("rint", ft, [bld.fmul(value, scale)]), scale) if decimals else \
                lw.math("rint", ft, [value])
        else:
            value = bld.fmul(lw.math("rint", ft, [bld.fdiv(value, scale)]), scale)
        return value if t.is_float else float_to_int(lw, value, ft, t)


def _power_of_ten(n: int) -> float:
    """NumPy's power_of_ten: exact up to 1e8, then 1e9 multiplied by 10.0 in float64 (inf past 1e308)."""
    if n < 9:
        return 10.0 ** n
    result = 1e9
    for _ in range(min(n, 400) - 9):
        result *= 10.0
    return result


class UnsupportedNumpy(Handler):
    """A NumPy function gpuc does not compile: the error lists those it does."""

    def __init__(self, name: str) -> None:
        self.name = name

    def type(self, typer, node):
        raise UserError(f"numpy.{self.name} is not supported in gpuc functions",
                        hint=f"gpuc compiles these NumPy functions on scalars: {', '.join(supported())}, and "
                             "NumPy's scalar types (numpy.float32(x), ...), and np.sum, np.prod, np.max, np.min "
                             "and np.mean of an array; other functions of arrays are not supported: write a loop",
                        node=node.func)


def numpy_math_calls() -> dict:
    """The call table's entries for NumPy's public functions: those of `UFUNCS` and `FUNCTIONS` compile,
    any other (np.sum, np.zeros, ...) is an error listing them. Classes (np.float32, ...) are not here."""
    table = {}
    # NumPy's namespace as it stands: dir() and getattr() would import its lazily loaded submodules
    # (np.testing, np.f2py, np.polynomial, ...), 80-140 ms of a fresh process's first compile, for no
    # function (they are modules) and for the names it has retired (each an AttributeError)
    for name, value in list(vars(np).items()):
        if name.startswith("_") or isinstance(value, type) or not callable(value):
            continue
        try:
            table.setdefault(value, UnsupportedNumpy(name))
        except TypeError:  # unhashable
            continue
    for name, spec in UFUNCS.items():
        table[getattr(np, name)] = NumpyUfunc(getattr(np, name), spec)
    table[np.clip], table[np.where] = Clip(), Where()
    table[np.round], table[np.around] = Round("round"), Round("around")
    table.update(numpy_reduction_calls())
    return table


registry.register_table(numpy_math_calls)
