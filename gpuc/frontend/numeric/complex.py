"""Complex numbers in gpuc functions: complex64/complex128 values, their operators, builtins, cmath and NumPy calls.

A complex value is an LLVM struct {T, T} (real, imaginary) of its part type T (float or double). Every
operation takes the parts apart, computes with the target's float instructions and math functions
(mathlib, so it lowers on every target), and builds the struct again; SROA turns the structs into plain
registers. Arrays of complex numbers have NumPy's layout (the two parts side by side). The typing rules
are NumPy 2's (types.promote); the algorithms are CPython's (complexobject.c, cmathmodule.c): the naive
product, Smith's quotient, integer powers by repeated squaring, and cmath's functions with C99 Annex G's
special values. docs/frontend.md, "Complex numbers", says where results may differ from Python.
"""

from __future__ import annotations

import ast
import math

from ...llvm import Constant, ConstantFP, ConstantInt
from ..core.errors import UserError, located
from ..core.plans import BinPlan, ComparePlan, UnaryPlan
from ..core.types import ComplexType, PyObject, ScalarType, boolean, check_scalar, float64, promote
from ..core.types import an


def is_complex(t) -> bool:
    return isinstance(t, ComplexType)


def _number(t, what: str):
    if isinstance(t, ComplexType):
        return t
    return check_scalar(t, what)


# -- typing ------------------------------------------------------------------------------------


def binary_plan(op: str, lt, rt, lw: bool, rw: bool) -> BinPlan:
    """`+ - * / **` of complex numbers (with any real number); the others are TypeError in Python."""
    lt, rt = _number(lt, f"the left operand of {op}"), _number(rt, f"the right operand of {op}")
    if op not in ("+", "-", "*", "/", "**"):
        raise UserError(f"operator {op} is not defined for complex numbers ({lt} and {rt}; Python raises TypeError)",
                        hint="complex numbers have + - * / and **; use z.real and z.imag for the parts")
    t = promote(lt, rt, lw, rw)
    return BinPlan(op, t, t, "complex")


def unary_plan(op: str, t) -> UnaryPlan:
    if op == "Not":
        return UnaryPlan(op, t, boolean)
    if op in ("USub", "UAdd"):
        return UnaryPlan(op, t, t)
    raise UserError(f"operator ~ is not defined for complex numbers ({t})")


def compare_plan(op: str, lt, rt, lw: bool, rw: bool) -> ComparePlan:
    lt, rt = _number(lt, "a compared value"), _number(rt, "a compared value")
    if op not in ("==", "!="):
        raise UserError(f"complex numbers cannot be ordered: {op} of {lt} and {rt} (Python raises TypeError)",
                        hint="compare abs(z), z.real or z.imag, or test == / !=")
    return ComparePlan(op, promote(lt, rt, lw, rw))


def attribute_type(typer, node: ast.Attribute, base):
    """z.real, z.imag and z.conjugate (a method) of a complex number; the same of an int or a float
    (Python's numbers all have them: x.real is x, x.imag is 0)."""
    if isinstance(base, ScalarType) and base.is_bool:
        raise UserError(f"{an(base)} has no attribute {node.attr!r} in gpuc functions",
                        hint="convert it first: int(b).real")
    if node.attr not in ("real", "imag", "conjugate"):
        what = "complex numbers" if is_complex(base) else "numbers"
        raise UserError(f"{what} have no attribute {node.attr!r} in gpuc functions",
                        hint="use z.real, z.imag or z.conjugate()")
    if node.attr == "conjugate":
        return PyObject(CONJUGATE)
    result = base.part if is_complex(base) else base
    if typer.is_literal(node.value):  # (2+3j).imag is the literal 3.0
        value = getattr(typer.typed.consts[id(node.value)], node.attr)
        typer.consumed(node.value)
        typer.literal(node, value)
        return float64 if isinstance(value, float) else result
    return result


def lower_attribute(lw, node: ast.Attribute, base):
    value = lw.expr(node.value)
    if is_complex(base):
        return lw.b.extract_value(value, 0 if node.attr == "real" else 1)
    if node.attr == "real":
        return value
    return lw.const(base, 0)


# -- values ------------------------------------------------------------------------------------


def parts(lw, v):
    return lw.b.extract_value(v, 0), lw.b.extract_value(v, 1)


def make(lw, t: ComplexType, re, im):
    agg = Constant.poison(lw.ltype(t))
    return lw.b.insert_value(lw.b.insert_value(agg, re, 0), im, 1)


def constant(lw, t: ComplexType, value):
    """A Python or NumPy number as a constant of `t` (each part rounded to the part type, as NumPy does)."""
    value = complex(value)
    ty = lw.ltype(t.part)
    return make(lw, t, ConstantFP.get(ty, value.real), ConstantFP.get(ty, value.imag))


def convert(lw, v, src, dst):
    """A number converted to a complex type: a real one gets the imaginary part +0.0 (as complex(x))."""
    if not is_complex(dst):
        raise UserError(f"a complex number ({src}) cannot be converted to {dst}",
                        hint="take z.real, z.imag or abs(z) (Python raises TypeError, NumPy would drop the "
                             "imaginary part)")
    if is_complex(src):
        re, im = parts(lw, v)
        return make(lw, dst, lw.convert(re, src.part, dst.part), lw.convert(im, src.part, dst.part))
    return make(lw, dst, lw.convert(v, src, dst.part), ConstantFP.get(lw.ltype(dst.part), 0.0))


def truth(lw, v):
    """bool(z): z != 0 (a NaN part is true, as in Python)."""
    re, im = parts(lw, v)
    zero = ConstantFP.get(re.type, 0.0)
    return lw.b.or_(lw.b.fcmp("une", re, zero), lw.b.fcmp("une", im, zero))


def load(lw, ptr, t: ComplexType):
    """An element of a complex array, read as its two parts (no aggregate loads: every backend has these)."""
    part = lw.ltype(t.part)
    i32 = lw.ctx.i32
    zero = ConstantInt.get(i32, 0)
    re = lw.b.load(part, lw.b.gep(lw.ltype(t), ptr, [zero, zero]))
    im = lw.b.load(part, lw.b.gep(lw.ltype(t), ptr, [zero, ConstantInt.get(i32, 1)]))
    return make(lw, t, re, im)


def store(lw, ptr, value, t: ComplexType) -> None:
    i32 = lw.ctx.i32
    zero = ConstantInt.get(i32, 0)
    re, im = parts(lw, value)
    lw.b.store(re, lw.b.gep(lw.ltype(t), ptr, [zero, zero]))
    lw.b.store(im, lw.b.gep(lw.ltype(t), ptr, [zero, ConstantInt.get(i32, 1)]))


# -- float arithmetic for transcribing C ---------------------------------------------------------


class F:
    """Float operations on one part type `t`, so that formulas read like the C they follow. Values are
    `V`s; Python floats are constants of `t`. Both sides of a choice are computed and `sel` picks one
    (floating-point operations do not trap), so the code has no branches."""

    def __init__(self, lw, t: ScalarType) -> None:
        self.lw, self.t, self.b = lw, t, lw.b
        self.ty = lw.ltype(t)

    def const(self, x: float):
        return ConstantFP.get(self.ty, float(x))

    def v(self, x) -> "V":
        return x if isinstance(x, V) else V(self, x if not isinstance(x, (int, float)) else self.const(x))

    def raw(self, x):
        if isinstance(x, V):
            return x.v
        return self.const(x) if isinstance(x, (int, float)) else x

    def call(self, name: str, *args) -> "V":
        return V(self, self.lw.math(name, self.t, [self.raw(a) for a in args]))

    def cmp(self, pred: str, a, b):
        return self.b.fcmp(pred, self.raw(a), self.raw(b))

    def lt(self, a, b): return self.cmp("olt", a, b)
    def le(self, a, b): return self.cmp("ole", a, b)
    def gt(self, a, b): return self.cmp("ogt", a, b)
    def ge(self, a, b): return self.cmp("oge", a, b)
    def eq(self, a, b): return self.cmp("oeq", a, b)
    def ne(self, a, b): return self.cmp("une", a, b)

    def and_(self, *conds):
        out = conds[0]
        for c in conds[1:]:
            out = self.b.and_(out, c)
        return out

    def or_(self, *conds):
        out = conds[0]
        for c in conds[1:]:
            out = self.b.or_(out, c)
        return out

    def not_(self, c):
        return self.b.not_(c)

    def sel(self, cond, a, b) -> "V":
        return V(self, self.b.select(cond, self.raw(a), self.raw(b)))

    def sel2(self, cond, a, b):
        """A choice between two complex values (pairs)."""
        return self.sel(cond, a[0], b[0]), self.sel(cond, a[1], b[1])

    def isnan(self, a): return self.cmp("uno", a, a)
    def isinf(self, a): return self.eq(self.fabs(a), math.inf)
    def isfinite(self, a): return self.cmp("one", self.fabs(a), math.inf)

    def fabs(self, a): return self.call("fabs", a)
    def copysign(self, a, b): return self.call("copysign", a, b)
    def sqrt(self, a): return self.call("sqrt", a)
    def hypot(self, a, b): return self.call("hypot", a, b)
    def log(self, a): return self.call("log", a)
    def log1p(self, a): return self.call("log1p", a)
    def atan2(self, a, b): return self.call("atan2", a, b)
    def exp(self, a): return self.call("exp", a)
    def cos(self, a): return self.call("cos", a)
    def sin(self, a): return self.call("sin", a)
    def tan(self, a): return self.call("tan", a)
    def cosh(self, a): return self.call("cosh", a)
    def sinh(self, a): return self.call("sinh", a)
    def tanh(self, a): return self.call("tanh", a)
    def asinh(self, a): return self.call("asinh", a)


class V:
    """An LLVM float value with C's arithmetic operators (each one IEEE operation, in the written order)."""

    __slots__ = ("f", "v")

    def __init__(self, f: F, v) -> None:
        self.f, self.v = f, v

    def _op(self, name, a, b):
        return V(self.f, getattr(self.f.b, name)(self.f.raw(a), self.f.raw(b)))

    def __add__(self, o): return self._op("fadd", self, o)
    def __radd__(self, o): return self._op("fadd", o, self)
    def __sub__(self, o): return self._op("fsub", self, o)
    def __rsub__(self, o): return self._op("fsub", o, self)
    def __mul__(self, o): return self._op("fmul", self, o)
    def __rmul__(self, o): return self._op("fmul", o, self)
    def __truediv__(self, o): return self._op("fdiv", self, o)
    def __rtruediv__(self, o): return self._op("fdiv", o, self)
    def __neg__(self): return V(self.f, self.f.b.fneg(self.v))


# -- arithmetic (CPython's complexobject.c) --------------------------------------------------------


def c_prod(a, b):
    return a[0] * b[0] - a[1] * b[1], a[0] * b[1] + a[1] * b[0]


def c_quot(f: F, a, b):
    """CPython's _Py_c_quot (Smith's method). Where Python raises ZeroDivisionError (b == 0) the
    quotient is NumPy's: each part divided by +0.0 (an infinity or NaN)."""
    abs_br, abs_bi = f.fabs(b[0]), f.fabs(b[1])
    by_real = f.ge(abs_br, abs_bi)
    ratio = b[1] / b[0]
    denom = b[0] + b[1] * ratio
    r1 = (a[0] + a[1] * ratio) / denom, (a[1] - a[0] * ratio) / denom
    r1 = f.sel2(f.eq(abs_br, 0.0), (a[0] / abs_br, a[1] / abs_br), r1)
    ratio2 = b[0] / b[1]
    denom2 = b[0] * ratio2 + b[1]
    r2 = (a[0] * ratio2 + a[1]) / denom2, (a[1] * ratio2 - a[0]) / denom2
    nan = (f.v(math.nan), f.v(math.nan))
    return f.sel2(by_real, r1, f.sel2(f.ge(abs_bi, abs_br), r2, nan))


def c_powu(f: F, x, n: int):
    """CPython's c_powu for a constant n >= 0: repeated squaring from r = 1 + 0j."""
    r, p, mask = (f.v(1.0), f.v(0.0)), x, 1
    while mask <= n:
        if n & mask:
            r = c_prod(r, p)
        mask <<= 1
        if mask <= n:
            p = c_prod(p, p)
    return r


def c_powi(f: F, x, n: int):
    one = (f.v(1.0), f.v(0.0))
    return c_powu(f, x, n) if n > 0 else c_quot(f, one, c_powu(f, x, -n))


def _powi_runtime(f: F, x, n):
    """c_powi for an integer n with |n| <= 100 known at run time only (`n` a float V): seven squarings
    with each product taken where n's bit is set."""
    lw, b = f.lw, f.b
    i64 = lw.ctx.i64
    k = b.fptosi(f.fabs(n).v, i64)
    r, p = (f.v(1.0), f.v(0.0)), x
    for bit in range(7):
        on = b.icmp("ne", b.and_(k, ConstantInt.get(i64, 1 << bit)), ConstantInt.get(i64, 0))
        r = f.sel2(on, c_prod(r, p), r)
        p = c_prod(p, p)
    inverse = c_quot(f, (f.v(1.0), f.v(0.0)), r)
    return f.sel2(f.gt(n, 0.0), r, inverse)


def c_pow(f: F, a, b):
    """CPython's _Py_c_pow: 1 for a zero exponent, 0 for a zero base, else polar form."""
    vabs = f.hypot(a[0], a[1])
    length = f.call("pow", vabs, b[0])
    at = f.atan2(a[1], a[0])
    phase = at * b[0]
    has_imag = f.ne(b[1], 0.0)
    length = f.sel(has_imag, length / f.exp(at * b[1]), length)
    phase = f.sel(has_imag, phase + b[1] * f.log(vabs), phase)
    r = length * f.cos(phase), length * f.sin(phase)
    zero_base = f.and_(f.eq(a[0], 0.0), f.eq(a[1], 0.0))
    r = f.sel2(zero_base, (f.v(0.0), f.v(0.0)), r)
    zero_exp = f.and_(f.eq(b[0], 0.0), f.eq(b[1], 0.0))
    return f.sel2(zero_exp, (f.v(1.0), f.v(0.0)), r)


def _integral_exponent(value) -> int | None:
    """The n of CPython's c_powi path for a constant exponent: integral, no imaginary part, |n| <= 100."""
    value = complex(value)
    if value.imag == 0.0 and math.isfinite(value.real) and value.real == math.floor(value.real) \
            and abs(value.real) <= 100.0:
        return int(value.real)
    return None


def c_power(f: F, a, b, exponent=None):
    """complex ** complex as CPython's complex_pow: c_powi for an integral real exponent up to 100 in
    magnitude, _Py_c_pow otherwise; `exponent` is the constant exponent when there is one."""
    if exponent is not None:
        n = _integral_exponent(exponent)
        return c_powi(f, a, n) if n is not None else c_pow(f, a, b)
    integral = f.and_(f.eq(b[1], 0.0), f.eq(b[0], f.call("floor", b[0])), f.le(f.fabs(b[0]), 100.0))
    return f.sel2(integral, _powi_runtime(f, a, f.sel(integral, b[0], 0.0)), c_pow(f, a, b))


def lower_binary(lw, plan: BinPlan, left, lt, right, rt, rconst=None):
    t = plan.operand
    a, b = parts(lw, lw.convert(left, lt, t)), parts(lw, lw.convert(right, rt, t))
    f = F(lw, t.part)
    a, b = (f.v(a[0]), f.v(a[1])), (f.v(b[0]), f.v(b[1]))
    if plan.op == "+":
        r = a[0] + b[0], a[1] + b[1]
    elif plan.op == "-":
        r = a[0] - b[0], a[1] - b[1]
    elif plan.op == "*":
        r = c_prod(a, b)
    elif plan.op == "/":
        r = c_quot(f, a, b)
    else:
        r = c_power(f, a, b, rconst if isinstance(rconst, (bool, int, float, complex)) else None)
    return make(lw, t, r[0].v, r[1].v)


def lower_unary(lw, plan: UnaryPlan, value, t):
    if plan.op == "Not":
        return lw.b.not_(truth(lw, value))
    v = lw.convert(value, t, plan.operand)
    if plan.op == "UAdd":
        return v
    re, im = parts(lw, v)
    return make(lw, plan.operand, lw.b.fneg(re), lw.b.fneg(im))


def lower_compare(lw, plan: ComparePlan, a, b):
    (ar, ai), (br, bi) = parts(lw, a), parts(lw, b)
    if plan.op == "==":
        return lw.b.and_(lw.b.fcmp("oeq", ar, br), lw.b.fcmp("oeq", ai, bi))
    return lw.b.or_(lw.b.fcmp("une", ar, br), lw.b.fcmp("une", ai, bi))


def absolute(lw, v, t: ComplexType):
    """abs(z): hypot(re, im), which is C99's cabs (an infinite part gives inf, even with a NaN)."""
    re, im = parts(lw, v)
    return lw.math("hypot", t.part, [re, im])


class _Method:
    """A method of numbers gpuc compiles (z.conjugate): the call table's key for it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<number method {self.name}>"


CONJUGATE = _Method("conjugate")


# -- derivatives -------------------------------------------------------------------------------------


def first_complex(typed):
    """(typed function, node) of the first expression of a complex type in `typed` or a function it
    calls (transitively), or None: the derivative transformations do not differentiate complex numbers."""
    seen, work = {id(typed)}, [typed]
    while work:
        current = work.pop(0)
        nodes = [n for n in ast.walk(current.info.tree)
                 if isinstance(current.types.get(id(n)), ComplexType) and hasattr(n, "lineno")]
        if nodes:
            return current, min(nodes, key=lambda n: (n.lineno, n.col_offset))
        for plan in current.calls.values():
            callees = [plan[0]] if isinstance(plan, tuple) else []
            callees += list(getattr(plan[1], "calls", ()) or ()) if isinstance(plan, tuple) else []
            for callee in callees:
                if hasattr(callee, "types") and id(callee) not in seen:
                    seen.add(id(callee))
                    work.append(callee)
    return None


def refuse_in_derivative(typed, api: str):
    """The located error for complex arithmetic in a function `api` differentiates (None when there is none)."""
    found = first_complex(typed)
    if found is None:
        return None
    where, node = found
    return located(UserError(f"{api} cannot differentiate complex arithmetic yet: this {where.types[id(node)]} "
                             f"value is in {where.function.__qualname__}, which {api} differentiates",
                             hint="differentiate a function of real numbers: write the real and imaginary parts "
                                  "as floats", node=node), where.info)
