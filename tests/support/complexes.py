"""Complex numbers in random programs: the generator's productions and the reference's arithmetic.

Feature `complex`: complex128 values built inside an expression that gives a float64 back: `complex(a, b)`
of any two scalar expressions, combined with `+ - *` with a scalar or another complex value, divided
into a scalar (`x / complex(c, 1.5)`) and read with `.real`, `.imag` or `abs(...)`.

Feature `complex_vars`: complex64 and complex128 variables (assigned, reassigned, augmented, carried around
loops, joined with real values (bool, integers, floats, literals) at an `if`/`else` or an `if` without
`else`, where they unify to NumPy's promotion as Numba unifies them: float64 or int64 with complex64 gives
complex128), complex scalar arguments (`c0`: NumPy complex64/complex128 scalars or Python complex numbers),
complex input arrays (`b0`, 1-D or 2-D, iterated with `for z in b0`) and complex output arrays (`w0`),
values built of `complex(a, b)`, `gpuc.complex64(...)`/`np.complex128(...)`, `+ - * /` with complex and real
operands (literals weak), integer powers `z ** k` (-2 <= k <= 4), unary minus and `z.conjugate()`; stored
whole into complex outputs, or read with `.real`/`.imag` into real ones. Feature `complex_math`:
`cmath.sqrt, exp, log, sin, cos, tanh` stored into complex outputs, `abs` and `cmath.phase` into float ones
(inexact: within the reference's relative tolerance, as its other transcendental results, and only as a
stored value).

The reference (independent of gpuc) computes on the parts in the part type (float32 for complex64) with
the documented algorithms (docs/frontend.md, "Complex numbers"): a real operand becomes `x + 0j` first,
`+ -` part by part, `*` the naive product, `/` CPython's Smith division (a zero divisor: each part divided
by +0.0), `z ** k` CPython's repeated squaring (`c_powi`); these results must match bit for bit. Where the
docs promise Python's value, the complex128 results equal Python's complex arithmetic (checked by
tests/fuzz/test_reference_complex.py).
"""

from __future__ import annotations

import ast
import cmath
import math
import operator

from dataclasses import dataclass

import numpy as np

from .expressions import Ex
from .numeric import NUMPY, Expected, Undefined, common, convert, is_complex, part_type, promote

COMPLEX_FEATURES = {"complex", "complex_vars", "complex_math"}
CMATH = ("sqrt", "exp", "log", "sin", "cos", "tanh", "phase")
@dataclass(frozen=True)
class Cx:
    """The generator's type of a complex variable: not a string, so that the real productions leave it alone."""
    t: str

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


class ComplexRules:
    """The generator's complex productions (a mixin of support.progen.Generator)."""

    def e_complex(self, scope, depth, want):
        if not self.on("complex") or want not in (None, "float"):
            return None
        z = self.complex_value(scope, depth)
        r = self.rng.random()
        if r < 0.1:  # inexact (hypot): the reference allows it only as a stored value
            return Ex(f"abs({z})", "float64")
        part = self.rng.choice(["real", "imag"])
        if r < 0.35:
            x = self.expr(scope, depth)
            return Ex(f"({x.text} / complex({self.expr(scope, depth).text}, 1.5)).{part}", "float64")
        op = self.rng.choice(["+", "-", "*"])
        other = self.complex_value(scope, depth) if self.rng.random() < 0.4 else self.expr(scope, depth).text
        left, right = (z, other) if self.rng.random() < 0.5 else (other, z)
        return Ex(f"({left} {op} {right}).{part}", "float64")

    def complex_value(self, scope, depth) -> str:
        a, b = self.expr(scope, depth), self.expr(scope, depth)
        return f"complex({a.text}, {b.text})"

    # -- complex variables, arguments and arrays (feature complex_vars) ----------------------------
    def cvars(self, scope, t=None):
        return [(n, v.t) for n, v in scope.vars.items() if isinstance(v, Cx) and (t is None or v.t == t)]

    def cx(self, scope, depth=0):
        """A complex expression: (text, complex type)."""
        if depth >= 2 or (depth and self.rng.random() < 0.4):
            return self.cx_leaf(scope)
        r = self.rng.random()
        if r < 0.45:
            op = self.rng.choice(["+", "-", "*", "*", "/"])
            a = self.cx(scope, depth + 1)
            if self.rng.random() < 0.5:
                b = self.cx(scope, depth + 1)
                t = promote(a[1], b[1])
            else:
                ex = self.expr(scope, 2)
                if not isinstance(ex.t, str):
                    return a
                b = (ex.text, ex.t)
                t = a[1] if ex.weak else promote(a[1], ex.t)
                if ex.weak and isinstance(ex.value, bool):
                    return a
            left, right = (a, b) if self.rng.random() < 0.6 else (b, a)
            if op == "/" and self.rng.random() < 0.6:  # mostly away from zero divisors (those are defined too)
                right = (f"complex({self.expr(scope, 2).text}, 1.5)", "complex128")
                t = promote(t, "complex128")
            return f"({left[0]} {op} {right[0]})", t
        if r < 0.55:
            a = self.cx(scope, depth + 1)
            return f"({a[0]}) ** {self.rng.choice([0, 1, 2, 2, 3, 4, -1, -2])}", a[1]
        if r < 0.65:
            a = self.cx(scope, depth + 1)
            return f"(-{a[0]})", a[1]
        if r < 0.8:
            a = self.cx(scope, depth + 1)
            t = self.rng.choice(["complex64", "complex128"])
            return f"{self.rng.choice(['gpuc', 'np'])}.{t}({a[0]})", t
        return self.cx_leaf(scope)

    def cx_leaf(self, scope):
        r = self.rng.random()
        found = self.cvars(scope)
        if found and r < 0.5:
            name, t = self.rng.choice(found)
            return (f"{name}.conjugate()" if self.rng.random() < 0.15 else name), t
        if self.carrays and r < 0.7:
            name, (t, ndim) = self.rng.choice(sorted(self.carrays.items()))
            index = self.rng.randint(-6, 5) if ndim == 1 else f"{self.rng.randint(-3, 2)}, {self.rng.randint(-4, 3)}"
            return f"{name}[{index}]", t
        if r < 0.8:
            ex = self.expr(scope, 2)
            if isinstance(ex.t, str) and not ex.weak:
                t = self.rng.choice(["complex64", "complex128"])
                return f"{self.rng.choice(['gpuc', 'np'])}.{t}({ex.text})", t
        return self.complex_value(scope, 1), "complex128"

    def s_cx_assign(self, scope):
        if not (self.on("complex_vars") and self.complex_program):
            return None
        text, t = self.cx(scope)
        found = self.cvars(scope, t) if self.loop_depth else self.cvars(scope)
        if found and self.rng.random() < 0.5:  # reassigned (around a loop: of one type)
            name = self.rng.choice(found)[0]
            vt = scope.vars[name].t
            if self.rng.random() < 0.3:
                if promote(vt, t) != vt:
                    return None
                self.emit(f"{name} {self.rng.choice(['+', '-', '*', '/'])}= {text}")
                return True
            if self.loop_depth and vt != t:
                return None
        else:
            name = self.fresh("z")
        self.emit(f"{name} = {text}")
        scope.vars[name] = Cx(t)
        scope.dead.discard(name)
        return True

    def s_cx_store(self, scope):
        if not (self.on("complex_vars") and self.complex_program) or not self.in_kernel:
            return None
        text, t = self.cx(scope)
        r = self.rng.random()
        inexact = self.on("complex_math") and r < 0.45
        if self.couts and r < 0.6:
            if inexact:
                text = f"cmath.{self.rng.choice(CMATH[:-1])}({text})"
            self.emit(f"{self.rng.choice(self.couts)}[{self.next_slot()}] = {text}")
            return True
        if inexact:
            text, t = (f"abs({text})", part_type(t)) if r < 0.3 else (f"cmath.phase({text})", "float64")
        else:
            text, t = f"({text}).{self.rng.choice(['real', 'imag'])}", part_type(t)
        out = self.out_for(t)
        if out is None:
            return None
        self.emit(f"{out}[{self.next_slot()}] = {text}")
        return True

    def s_cx_join(self, scope):
        """A real value and a complex one at a join: the variable is complex after it, of the type NumPy's
        promotion gives (docs: Numba's unification; float64 or int64 with complex64 is complex128, a weak
        literal counting as int64/float64 once assigned), the real path's value with imaginary part +0.0.
        As `if`/`else`, or as an assignment before an `if` without `else` that assigns the other."""
        if not (self.on("complex_vars") and self.complex_program) or self.loop_depth:
            return None
        text, t = self.cx(scope)
        real = self.expr(scope, 1, self.rng.choice(["float", "float", "int", None]))
        if not isinstance(real.t, str):
            return None
        t = promote(real.t, t)  # a weak literal's type is the one it has once assigned (int64, float64, bool)
        name = self.fresh("z")
        branches = [f"{name} = {text}", f"{name} = {real.text}"]
        self.rng.shuffle(branches)
        if self.rng.random() < 0.5:
            self.emit(branches[0])
            self.emit(f"if {self.cond(scope).text}:")
            self.emit("    " + branches[1])
        else:
            self.emit(f"if {self.cond(scope).text}:")
            self.emit("    " + branches[0])
            self.emit("else:")
            self.emit("    " + branches[1])
        scope.vars[name] = Cx(t)
        return True

    def s_cx_for(self, scope):
        """`for z in b0:` over a complex array (of one or two dimensions: then its rows' first elements)."""
        if not (self.on("complex_vars") and self.complex_program) or not self.carrays or self.loop_depth >= 2:
            return None
        name, (t, ndim) = self.rng.choice(sorted(self.carrays.items()))
        z = self.fresh("z")
        if ndim == 2 and not self.on("view_rows"):
            return None
        acc = self.fresh("z")
        self.emit(f"{acc} = gpuc.{t}(0)")
        self.emit(f"for {z} in {name}:")
        item = z if ndim == 1 else f"{z}[{self.rng.randint(-4, 3)}]"
        self.emit(f"    {acc} = {acc} {self.rng.choice(['+', '*', '-'])} {item}")
        scope.vars[acc] = Cx(t)
        return True

    def store_complex_vars(self, scope):
        """At the kernel's end: complex variables into complex outputs (or their real parts)."""
        for name, t in self.cvars(scope):
            if self.rng.random() < 0.7:
                if self.couts:
                    self.emit(f"{self.rng.choice(self.couts)}[{self.next_slot()}] = {name}")
                else:
                    out = self.out_for(part_type(t))
                    if out is not None:
                        self.emit(f"{out}[{self.next_slot()}] = {name}.real")


# -- the reference ----------------------------------------------------------------------------------


def type_binop(typer, node, op, left, right):
    """The type of a binary operator with a complex operand (None: no complex operand): NumPy 2's promotion
    through the parts, literals weak (docs: `z64 * 2.5` stays complex64)."""
    if not (is_complex(left[0]) or is_complex(right[0])):
        return None
    if isinstance(op, ast.Pow):
        exponent = right[2]
        if not (right[1] and type(right[2]) is int and abs(exponent) <= 100) or is_complex(right[0]) and not right[1]:
            raise Undefined("a complex power other than by an integer literal")  # not generated
        c = left[0] if not left[1] else None
        if c is None or not is_complex(c):
            raise Undefined("a real base of a complex power")
        typer.typed.optype[id(node)] = c
        return c
    if type(op) not in _OPS:
        raise Expected("complex operator", f"{type(op).__name__} of complex numbers")
    c = common([left, right])
    if c is None or not is_complex(c):
        raise Undefined("a complex literal operand")  # complex literals are not generated
    typer.typed.optype[id(node)] = c
    return c


def type_call(typer, node, env):
    """complex(a, b): two real scalars (any kind) give a complex128."""
    if len(node.args) != 2:
        raise Undefined("complex() arity")
    for a in node.args:
        t, _, _ = typer.operand(a, env)
        if is_complex(t):
            raise Undefined("complex() of a complex number")  # not generated
    return "complex128", False


def type_conjugate(typer, node, env):
    t, _ = typer.expr(node.func.value, env)
    if node.args or not is_complex(t):
        raise Undefined("conjugate of a non-complex value")  # not generated
    return t, False


def type_cmath(typer, node, name, env):
    """cmath.<name>(z): z converted to complex128 (as cmath does); phase gives a float64."""
    if name not in CMATH or len(node.args) != 1:
        raise Undefined(f"cmath.{name}")
    typer.operand(node.args[0], env)
    typer.inexact_here(f"cmath.{name}")
    return ("float64" if name == "phase" else "complex128"), False


def type_abs(typer, t):
    """abs(z): hypot of the parts in the part type (an ulp or two: a stored value only)."""
    typer.inexact_here("abs of a complex number")
    return part_type(t), False


def _parts(value, c):
    z = convert(value, c)
    p = NUMPY[part_type(c)]
    return p(z.real), p(z.imag)


def _make(c, re, im):
    return NUMPY[c](complex(float(re), float(im)))


def _prod(a, b):
    return a[0] * b[0] - a[1] * b[1], a[0] * b[1] + a[1] * b[0]


def _quot(a, b):
    """CPython's _Py_c_quot (Smith's method) on parts of one float type; a zero divisor gives each part
    divided by +0.0 (docs: NumPy's value where Python raises)."""
    abs_br, abs_bi = abs(b[0]), abs(b[1])
    if abs_br >= abs_bi:
        if abs_br == 0:
            return a[0] / abs_br, a[1] / abs_br
        ratio = b[1] / b[0]
        denom = b[0] + b[1] * ratio
        return (a[0] + a[1] * ratio) / denom, (a[1] - a[0] * ratio) / denom
    if abs_bi >= abs_br:
        ratio = b[0] / b[1]
        denom = b[0] * ratio + b[1]
        return (a[0] * ratio + a[1]) / denom, (a[1] * ratio - a[0]) / denom
    nan = type(a[0])(np.nan)
    return nan, nan


def _powi(x, n: int):
    """CPython's c_powi: repeated squaring from 1 + 0j; a negative n is 1 / x ** -n."""
    one = (type(x[0])(1.0), type(x[0])(0.0))
    r, p, mask, m = one, x, 1, abs(n)
    while mask <= m:
        if m & mask:
            r = _prod(r, p)
        mask <<= 1
        p = _prod(p, p)
    return r if n >= 0 else _quot(one, r)


def evaluate_binop(op, left, right, c, exponent=None):
    a = _parts(left, c)
    if isinstance(op, ast.Pow):
        return _make(c, *_powi(a, exponent))
    b = _parts(right, c)
    if isinstance(op, ast.Add):
        return _make(c, a[0] + b[0], a[1] + b[1])
    if isinstance(op, ast.Sub):
        return _make(c, a[0] - b[0], a[1] - b[1])
    if isinstance(op, ast.Mult):
        return _make(c, *_prod(a, b))
    return _make(c, *_quot(a, b))


def evaluate_call(values):
    """complex(a, b) of two real numbers: float(a) + float(b)j."""
    a, b = values
    return np.complex128(complex(float(a), float(b)))


def evaluate_cmath(name, value):
    z = complex(convert(value, "complex128"))
    try:
        result = getattr(cmath, name)(z)
    except (ValueError, OverflowError) as exc:
        raise Undefined(f"cmath.{name}({z}): {exc}") from None  # the IEEE value there is not modelled
    if name == "phase":
        return np.float64(result)
    return np.complex128(result)


def evaluate_abs(value):
    """hypot of the parts in the part type (C99's cabs: an infinite part gives inf even next to a NaN)."""
    re, im = value.real, value.imag
    if math.isinf(re) or math.isinf(im):
        return type(re)(np.inf)
    return type(re)(np.hypot(re, im))


def part(value, attr: str):
    if isinstance(value, (complex, np.complexfloating)):
        return getattr(value, attr)  # a NumPy complex scalar's parts keep the part type
    return np.float64(getattr(value, attr))
