"""Complex numbers in random programs: the generator's production and the reference's arithmetic.

The production builds complex128 values inside an expression and gives a float64 back: `complex(a, b)`
of any two scalar expressions, combined with `+ - *` with a scalar or another complex value, divided
into a scalar (`x / complex(c, 1.5)`: never by zero) and read with `.real`, `.imag` or `abs(...)` (hypot,
within an ulp or two: only as a stored value, as the reference's other inexact math). The
reference computes with Python's complex numbers, which gpuc's rules follow operation for operation
(docs/frontend.md, "Complex numbers"): a real operand becomes `complex(x)`, `complex(a, b)` takes float(a)
and float(b), abs is hypot.
"""

from __future__ import annotations

import ast
import operator

import numpy as np

from .expressions import Ex
from .numeric import Undefined

COMPLEX_FEATURES = {"complex"}
COMPLEX = "complex128"
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


# -- the reference ----------------------------------------------------------------------------------


def type_binop(typer, node, op, left, right):
    """The type of a binary operator with a complex operand (None: no complex operand)."""
    if COMPLEX not in (left[0], right[0]):
        return None
    if type(op) not in _OPS:
        raise Undefined(f"{type(op).__name__} of complex numbers")
    typer.typed.optype[id(node)] = COMPLEX
    return COMPLEX


def type_call(typer, node, env):
    """complex(a, b): two scalars (any kind) give a complex128."""
    if len(node.args) != 2:
        raise Undefined("complex() arity")
    for a in node.args:
        typer.operand(a, env)
    return COMPLEX, False


def evaluate_binop(op, left, right):
    try:
        return _OPS[type(op)](complex(left), complex(right))
    except ZeroDivisionError:
        raise Undefined("complex division by zero") from None


def evaluate_call(values):
    a, b = values
    return complex(float(a), float(b))


def part(value, attr: str):
    return np.float64(getattr(value, attr))
