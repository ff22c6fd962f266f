"""The call table's complex entries: complex(), the complex types as conversions, abs, z.conjugate(),
cmath's functions and NumPy's functions of complex numbers (docs/frontend.md, "Complex numbers")."""

from __future__ import annotations

import builtins
import cmath

import numpy as np

from ...llvm import ConstantFP
from ..numeric import complex as C
from ..numeric import complex_math as M
from ..core import registry
from ..core.errors import UserError
from .numpy_math import require
from ..core.plans import BinPlan, CallPlan, ComparePlan, Handler
from ..core.types import COMPLEX, NUMBERS, ComplexType, TupleType, boolean, complex128, float64, promote
from ..core.types import an


class ComplexPlan(CallPlan):
    """The plan of a call that a complex argument sent to the complex computation."""


def _numbers(handler, typer, node, low, high=None) -> list:
    types = handler.args(typer, node, low, high)
    for a, t in zip(node.args, types):
        if not isinstance(t, NUMBERS):
            raise UserError(f"{handler.name}() needs numbers, not {an(t)}", node=a)
    return types


def _need_math(typer, node, what: str, t=float64) -> None:
    require(typer, node.func, what, M.NEEDS, t)


class ComplexBuiltin(Handler):
    """complex(), complex(x), complex(re, im) as CPython's complex_new: complex(a, b) is
    (a.real - b.imag, a.imag + b.real) with each part taken only where that argument is complex."""

    name = "complex"

    def type(self, typer, node):
        types = _numbers(self, typer, node, 0, 2)
        for a in node.args:
            typer.fit(a, complex128)
        return CallPlan(complex128, tuple(types))

    def lower(self, lw, node, plan):
        if not node.args:
            return C.constant(lw, complex128, 0j)
        if len(node.args) == 1:
            return lw.operand(node.args[0], complex128)
        (rr, ri), (ir, ii) = (C.parts(lw, lw.operand(a, complex128)) for a in node.args)
        rt, it = plan.args
        re = lw.b.fsub(rr, ii) if C.is_complex(it) else rr
        im = lw.b.fadd(ri, ir) if C.is_complex(rt) else ir
        return C.make(lw, complex128, re, im)


class ComplexConvert(Handler):
    """gpuc.complex64(x), numpy.complex128(x), ...: a number converted as NumPy converts it."""

    def __init__(self, name: str, target: ComplexType) -> None:
        self.name, self.target = name, target

    def type(self, typer, node):
        types = _numbers(self, typer, node, 0, 1)
        for a in node.args:
            typer.fit(a, self.target)
        return CallPlan(self.target, tuple(types))

    def lower(self, lw, node, plan):
        if not node.args:
            return C.constant(lw, self.target, 0j)
        return lw.operand(node.args[0], self.target)


class _Complexified(Handler):
    """A real handler (abs, numpy.sqrt, ...) that computes complex arguments itself."""

    def __init__(self, real: Handler | None, name: str) -> None:
        self.real, self.name = real, name
        self.keywords = getattr(real, "keywords", False)

    def type(self, typer, node):
        if node.keywords or not any(C.is_complex(typer.value_expr(a)) for a in node.args):
            if self.real is None:
                raise UserError(f"{self.name}() needs a complex number here")
            return self.real.type(typer, node)
        return self.complex_type(typer, node)

    def lower(self, lw, node, plan):
        if isinstance(plan, ComplexPlan):
            return self.complex_lower(lw, node, plan)
        return self.real.lower(lw, node, plan)


class Absolute(_Complexified):
    """abs(z) / numpy.absolute(z): hypot of the parts, in the part type (abs of a complex64 is a float32)."""

    def complex_type(self, typer, node):
        (t,) = _numbers(self, typer, node, 1)
        require(typer, node.func, self.name, ("hypot",), t.part)
        return ComplexPlan(t.part, (t,))

    def complex_lower(self, lw, node, plan):
        (t,) = plan.args
        return C.absolute(lw, lw.expr(node.args[0]), t)


class Truth(_Complexified):
    """bool(z): z != 0, as in Python."""

    def complex_type(self, typer, node):
        (t,) = _numbers(self, typer, node, 1)
        return ComplexPlan(boolean, (t,))

    def complex_lower(self, lw, node, plan):
        return C.truth(lw, lw.expr(node.args[0]))


class Unary(_Complexified):
    """A NumPy function of one number computed by cmath's algorithm for complex arguments (in float64,
    rounded back for complex64), or a simple one: conjugate, negative, positive, square, reciprocal."""

    SIMPLE = ("conjugate", "negative", "positive", "square", "reciprocal")

    def __init__(self, real, name: str, cmath_name: str) -> None:
        super().__init__(real, name)
        self.cmath_name = cmath_name

    def complex_type(self, typer, node):
        (t,) = _numbers(self, typer, node, 1)
        if self.cmath_name not in self.SIMPLE:
            _need_math(typer, node, self.name)
        return ComplexPlan(t, (t,))

    def complex_lower(self, lw, node, plan):
        (t,) = plan.args
        z = lw.expr(node.args[0])
        op = self.cmath_name
        if op in self.SIMPLE:
            re, im = C.parts(lw, z)
            if op == "conjugate":
                return C.make(lw, t, re, lw.b.fneg(im))
            if op == "negative":
                return C.make(lw, t, lw.b.fneg(re), lw.b.fneg(im))
            if op == "positive":
                return z
            if op == "square":
                return C.lower_binary(lw, BinPlan("*", t, t, "complex"), z, t, z, t)
            return C.lower_binary(lw, BinPlan("/", t, t, "complex"), C.constant(lw, t, 1.0), t, z, t)
        return M.apply(lw, op, z, t)


class Classify(_Complexified):
    """numpy.isnan / isinf / isfinite of a complex number: of either part (isfinite: of both)."""

    def __init__(self, real, name: str, kind: str) -> None:
        super().__init__(real, name)
        self.kind = kind

    def complex_type(self, typer, node):
        (t,) = _numbers(self, typer, node, 1)
        return ComplexPlan(boolean, (t,))

    def complex_lower(self, lw, node, plan):
        return classify(lw, self.kind, lw.expr(node.args[0]), plan.args[0])


def classify(lw, kind: str, z, t):
    f = C.F(lw, t.part)
    re, im = C.parts(lw, z)
    if kind == "isnan":
        return f.or_(f.isnan(re), f.isnan(im))
    if kind == "isinf":
        return f.or_(f.isinf(re), f.isinf(im))
    return f.and_(f.isfinite(re), f.isfinite(im))


class Binary(_Complexified):
    """numpy.add / subtract / multiply / divide / power / equal / not_equal with a complex argument: the
    operator's computation (docs/frontend.md), in the promoted type."""

    def __init__(self, real, name: str, op: str) -> None:
        super().__init__(real, name)
        self.op = op

    def complex_type(self, typer, node):
        lt, rt = _numbers(self, typer, node, 2)
        t = promote(lt, rt, typer.is_weak(node.args[0]), typer.is_weak(node.args[1]))
        for a in node.args:
            typer.fit(a, t)
        if self.op == "**":
            _need_math(typer, node, self.name)
        return ComplexPlan(boolean if self.op in ("==", "!=") else t, (lt, rt), t)

    def complex_lower(self, lw, node, plan):
        t = plan.extra
        a, b = (lw.operand(n, t) for n in node.args)
        if self.op in ("==", "!="):
            return C.lower_compare(lw, ComparePlan(self.op, t), a, b)
        const = lw.typed.consts.get(id(node.args[1])) if lw.is_literal(node.args[1]) else None
        return C.lower_binary(lw, BinPlan(self.op, t, t, "complex"), a, t, b, t, const)


class Part(Handler):
    """numpy.real(x), numpy.imag(x), numpy.angle(x) of a number (a real one's imaginary part is 0)."""

    def __init__(self, name: str) -> None:
        self.name, self.part = f"numpy.{name}", name

    def type(self, typer, node):
        if node.keywords:
            raise UserError(f"{self.name}() takes one number in gpuc functions (no keywords)")
        (t,) = _numbers(self, typer, node, 1)
        if C.is_complex(t):
            result = t.part
        elif self.part == "angle":
            result = t if t.is_float else float64
        else:
            result = t
        typer.fit(node.args[0], t)
        if self.part == "angle":
            require(typer, node.func, self.name, ("atan2",), result)
        return CallPlan(result, (t,))

    def lower(self, lw, node, plan):
        (t,) = plan.args
        v = lw.operand(node.args[0], t)
        if C.is_complex(t):
            re, im = C.parts(lw, v)
            if self.part == "angle":
                return lw.math("atan2", t.part, [im, re])
            return re if self.part == "real" else im
        if self.part == "real":
            return v
        if self.part == "imag":
            return lw.const(t, 0)
        x = lw.convert(v, t, plan.result)
        return lw.math("atan2", plan.result, [ConstantFP.get(x.type, 0.0), x])


class Cmath(Handler):
    """cmath.<name>(z) for a number z (converted to complex128, as cmath does)."""

    def __init__(self, name: str) -> None:
        self.name, self.fn = f"cmath.{name}", name

    def type(self, typer, node):
        fn = self.fn
        if fn == "rect":
            types = _numbers(self, typer, node, 2)
            for a, t in zip(node.args, types):
                if C.is_complex(t):
                    raise UserError("cmath.rect(r, phi) takes two real numbers", node=a)
                typer.fit(a, float64)
            _need_math(typer, node, self.name)
            return CallPlan(complex128, tuple(types))
        types = _numbers(self, typer, node, 1, 2 if fn == "log" else 1)
        for a in node.args:
            typer.fit(a, complex128)
        result = {"phase": float64, "polar": TupleType((float64, float64)), "isnan": boolean, "isinf": boolean,
                  "isfinite": boolean}.get(fn, complex128)
        if fn not in ("isnan", "isinf", "isfinite"):
            _need_math(typer, node, self.name)
        return CallPlan(result, tuple(types))

    def lower(self, lw, node, plan):
        fn = self.fn
        if fn == "rect":
            return M.rect(lw, *(lw.operand(a, float64) for a in node.args))
        z = lw.operand(node.args[0], complex128)
        if fn in ("isnan", "isinf", "isfinite"):
            return classify(lw, fn, z, complex128)
        if fn in ("phase", "polar"):
            re, im = C.parts(lw, z)
            phase = lw.math("atan2", float64, [im, re])
            if fn == "phase":
                return phase
            return lw.make_tuple([C.absolute(lw, z, complex128), phase], plan.result)
        if fn == "log" and len(node.args) == 2:
            return M.log_base(lw, z, lw.operand(node.args[1], complex128))
        return M.apply(lw, fn, z)


class Conjugate(Handler):
    """z.conjugate() (x.conjugate() of a real number is x)."""

    name = "conjugate"

    def type(self, typer, node):
        if node.args:
            raise UserError("conjugate() takes no arguments")
        return CallPlan(typer.typed.types[id(node.func.value)])

    def lower(self, lw, node, plan):
        v = lw.expr(node.func.value)
        if not C.is_complex(plan.result):
            return v
        re, im = C.parts(lw, v)
        return C.make(lw, plan.result, re, lw.b.fneg(im))


_CMATH = ("sqrt", "exp", "log", "log10", "sin", "cos", "tan", "sinh", "cosh", "tanh", "asin", "acos", "atan",
          "asinh", "acosh", "atanh", "phase", "polar", "rect", "isnan", "isinf", "isfinite")
_NUMPY_UNARY = {"sqrt": "sqrt", "exp": "exp", "log": "log", "log10": "log10", "sin": "sin", "cos": "cos",
                "tan": "tan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "arcsin": "asin", "arccos": "acos",
                "arctan": "atan", "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh",
                "conjugate": "conjugate", "negative": "negative", "positive": "positive", "square": "square",
                "reciprocal": "reciprocal"}
_NUMPY_BINARY = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/", "true_divide": "/", "power": "**",
                 "equal": "==", "not_equal": "!="}


def complex_calls(table: dict) -> dict:
    """Entries that replace or wrap `table`'s (the real handlers stay in charge of real arguments)."""
    out = {builtins.complex: ComplexBuiltin(), builtins.abs: Absolute(table.get(builtins.abs), "abs"),
           builtins.bool: Truth(table.get(builtins.bool), "bool"),
           C.CONJUGATE: Conjugate()}
    for t in COMPLEX:
        out[t] = ComplexConvert(f"gpuc.{t.name}", t)
        out[np.dtype(t.name).type] = ComplexConvert(f"numpy.{t.name}", t)
    for name in _CMATH:
        out[getattr(cmath, name)] = Cmath(name)
    for name, op in _NUMPY_UNARY.items():
        fn = getattr(np, name)
        out[fn] = Unary(table.get(fn), f"numpy.{name}", op)
    out[np.absolute] = Absolute(table.get(np.absolute), "numpy.absolute")
    for name in ("isnan", "isinf", "isfinite"):
        fn = getattr(np, name)
        out[fn] = Classify(table.get(fn), f"numpy.{name}", name)
    for name, op in _NUMPY_BINARY.items():
        fn = getattr(np, name)
        out[fn] = Binary(table.get(fn), f"numpy.{name}", op)
    for name in ("real", "imag", "angle"):
        out[getattr(np, name)] = Part(name)
    return out


registry.register_layer(complex_calls)
for _t in COMPLEX:
    registry.expose(_t.name, _t, group="the types")
