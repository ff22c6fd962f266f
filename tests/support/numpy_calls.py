"""NumPy's functions on scalars in generated programs (`np.maximum(a, b)`, `np.sqrt(x)`, `np.clip(x, lo, hi)`, ...):
the generator's productions (a mixin of support.progen.Generator), their typing (a mixin of support.typer.Typer)
and their values (a mixin of support.reference's evaluator).

NumPy itself is the reference: a call is typed by calling the NumPy function on NumPy scalars of the argument
types (Python values for weak literals, which NumPy 2 treats as weak too), and evaluated by calling it on the
arguments' values. Where NumPy raises, the docs say what gpuc does: an out-of-range literal (np.where's too,
which NumPy wraps) or a negative literal integer power is a compile error, a loop in a type gpuc lacks (np.sqrt of a bool is float16) too; a
negative integer power at run time gives 1, an integer reciprocal of 0 the type's maximum (NumPy's result is
platform-defined). Library functions (sin, exp, ...) are inexact, so they are generated as stored values
only; everything else must match NumPy exactly, signed zeros included, except the zero fmax/fmin return for
two zeros, which the docs leave open (such programs are undefined).
"""

from __future__ import annotations

import ast
import warnings

import numpy as np

from .expressions import Ex
from .numeric import ALL_SCALARS, NUMPY, Expected, Undefined, convert, fits, int_range, is_float, is_int

NUMPY_FEATURES = {"numpy_math"}

UNARY = ["absolute", "abs", "sign", "square", "negative", "positive", "floor", "ceil", "trunc", "rint", "fabs",
         "sqrt", "reciprocal", "isnan", "isinf", "isfinite", "signbit", "logical_not", "deg2rad", "rad2deg", "round"]
BINARY = ["maximum", "minimum", "fmax", "fmin", "copysign", "fmod", "remainder", "mod", "floor_divide", "add",
          "subtract", "multiply", "divide", "power", "heaviside", "logical_and", "logical_or", "logical_xor"]
LIBRARY1 = ["exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "arcsin", "arccos",
            "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "cbrt"]
LIBRARY2 = ["arctan2", "hypot", "logaddexp", "logaddexp2", "float_power", "power"]
#: Every np.<name> the generated programs call.
NUMPY_CALLS = set(UNARY + BINARY + LIBRARY1 + LIBRARY2 + ["clip", "where"])
_INEXACT = set(LIBRARY1 + LIBRARY2) - {"power"}   # power is inexact for float loops only


def _call(name: str, args):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return np.asarray(getattr(np, name)(*args))[()]


def numpy_type(name: str, operands) -> str:
    """The type NumPy gives np.<name> of `operands` [(type, weak, value)] (None for a literal None), or the
    documented compile error (Expected) where NumPy raises or computes in a type gpuc lacks."""
    samples = [None if t is None else _plain(value) if weak else NUMPY[t](1) for t, weak, value in operands]
    try:
        result = _call(name, samples)
    except OverflowError as exc:
        raise Expected("literal", f"np.{name}: {exc}")
    except ValueError as exc:
        raise Expected("negative power" if name in ("power", "pow") else "numpy", f"np.{name}: {exc}")
    except TypeError as exc:
        raise Expected("numpy loop", f"np.{name}: {exc}")
    t = "bool" if result.dtype == np.bool_ else result.dtype.name
    if t not in ALL_SCALARS:
        raise Expected("numpy type", f"np.{name} computes in {t}")
    if name == "where" and any(weak and not fits(value, t) for _, weak, value in operands[1:]):
        raise Expected("literal", f"np.where: a literal beyond {t}")  # NumPy wraps it; gpuc refuses, as for `if`
    return t


def _plain(value):
    """A weak literal's value as NumPy sees it: a Python bool, int or float."""
    return value if isinstance(value, (bool, float)) else int(value) if isinstance(value, int) else float(value)


def _is_none(node) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


class NumpyRules:
    """Productions: exact NumPy calls in expressions, library ones as the values of array stores."""

    def e_numpy(self, scope, depth, want):
        if want not in (None, "float", "int", "bool"):
            return None
        r = self.rng.random()
        if r < 0.12:
            return self._numpy_clip(scope, depth, want)
        if r < 0.2:
            c, a, b = self.expr(scope, depth), self.expr(scope, depth, want), self.expr(scope, depth, want)
            return self._numpy_ex("where", [c, a, b], want)
        if r < 0.55:
            name = self.rng.choice(UNARY)
            a = self.expr(scope, depth, want if want != "bool" else None)
            if name == "round" and self.rng.random() < 0.5:
                d = self.rng.randint(-2, 3)
                return self._numpy_ex(name, [a, Ex(str(d) if d >= 0 else f"({d})", "int64", True, d)], want)
            return self._numpy_ex(name, [a], want)
        name = self.rng.choice(BINARY)
        a = self.expr(scope, depth, want if want != "bool" else None)
        b = self.expr(scope, depth, want if want != "bool" else None)
        if name == "power" and self.rng.random() < 0.8:  # small exponents: integer powers that do not all wrap
            e = self.rng.randint(0, 3)
            b = Ex(str(e), "int64", True, e)
        return self._numpy_ex(name, [a, b], want)

    def _numpy_clip(self, scope, depth, want):
        x = self.expr(scope, depth, want if want != "bool" else None)
        lo, hi = (self.expr(scope, depth, want if want != "bool" else None) for _ in range(2))
        none = Ex("None", None, True, None)
        bounds = self.rng.choice([[lo, hi], [lo, hi], [none, hi], [lo, none]])
        return self._numpy_ex("clip", [x] + bounds, want)

    def _numpy_ex(self, name, parts, want):
        """The call's Ex, typed by NumPy; None where NumPy refuses it (now and then kept: a documented error)."""
        if all(p.weak for p in parts) or any(not p.weak and not isinstance(p.t, str) for p in parts):
            return None
        operands = []
        for p in parts:
            value = p.value
            if p.weak and value is None and p.t is not None:  # a literal expression
                try:
                    value = eval(p.text, {})
                except Exception:
                    return None
            operands.append((p.t, p.weak, value))
        try:
            t = numpy_type(name, operands)
        except Expected:
            if self.rng.random() < 0.95:
                return None
            t = "float64"
        if not self.ok(t, want):
            return None
        return Ex(f"np.{name}({', '.join(p.text for p in parts)})", t)

    def s_store_numpy(self, scope):
        if not self.in_kernel or not self.on("numpy_math") or not self.on("math_transcendental"):
            return None
        floats = [n for n, d in self.outs if is_float(d)]
        a = self.expr(scope, 1, "float" if self.rng.random() < 0.7 else None)
        if not floats or a.weak:
            return None
        if self.rng.random() < 0.7:
            text = f"np.{self.rng.choice(LIBRARY1)}({a.text})"
        else:
            b = self.expr(scope, 2, "float" if self.rng.random() < 0.7 else None)
            text = f"np.{self.rng.choice(LIBRARY2)}({a.text}, {b.text})"
        self.emit(f"{self.rng.choice(floats)}[{self.next_slot()}] = {text}")
        return True


class NumpyTyping:
    """support.typer.Typer's np.<name>(...) calls."""

    def call_numpy(self, node, name, env):
        if name not in NUMPY_CALLS:
            raise Undefined(f"np.{name}")
        operands = [(None, True, None) if _is_none(a) else self.operand(a, env) for a in node.args]
        if all(weak for _, weak, _ in operands):
            raise Undefined(f"np.{name} of literals only")  # NumPy's own rules for Python scalars alone
        if name == "round" and len(node.args) == 2 and not operands[1][1]:
            raise Expected("round decimals", "np.round(x, decimals) needs a constant")
        t = numpy_type(name, operands)
        if name in _INEXACT or name == "power" and is_float(t):
            self.inexact_here(f"np.{name}")
        return t, False


class NumpyEval:
    """support.reference's values of np.<name>(...) calls: NumPy's, where the docs define them."""

    def call_numpy(self, node, name, env):
        t = self.t.types[id(node)][0]
        args = []
        for a in node.args:
            if _is_none(a):
                args.append(None)
                continue
            at, weak = self.t.types[id(a)]
            value = self.eval(a, env)
            args.append(_plain(value) if weak else NUMPY[at](value))
        if name in ("fmax", "fmin") and all(isinstance(v, np.floating) and v == 0 for v in args):
            raise Undefined(f"np.{name} of two zeros (which zero is not specified)")
        if name == "reciprocal" and is_int(t) and args[0] == 0:
            return int_range(t)[1]  # NumPy converts 1.0 / 0; gpuc saturates
        if name == "round" and is_int(t) and len(args) == 2 and args[1] < 0:  # in float64, converted back
            return convert(_call(name, [np.float64(args[0]), args[1]]), t)  # saturating, where NumPy's is not
        try:
            result = _call(name, args)
        except ValueError:
            if name in ("power", "pow"):
                return convert(1, t)  # a negative integer power at run time: NumPy raises, gpuc gives 1
            raise
        return convert(result.item() if is_int(t) else result, t)
