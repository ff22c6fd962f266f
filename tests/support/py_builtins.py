"""Python's `pow(a, b)`, `divmod(a, b)`, `sum(t)` / `sum(t, start)` and `round(x)` in generated programs: the
generator's productions (a mixin of support.progen.Generator), their typing (a mixin of support.typer.Typer) and
their values (a mixin of support.reference's evaluator), as docs/frontend.md defines them.

`pow(a, b)` is `a ** b` (of literals too: a folded literal, as `2 ** 3` is) and `divmod(a, b)` is
`(a // b, a % b)` in the operators' common type, so by 0 an integer gives 0 and 0, a float NumPy's `inf` or
NaN and NaN. `sum` adds a tuple's numbers from the left, starting at the int literal 0 (or `start`), each step
promoting as `+` does. `round(x)` is an int64: a float rounded half to even (saturating: NaN gives 0, the
infinities the int64 limits), an integer converted as `int(x)` converts it; of a literal, Python's value (a
literal). The forms kernels do not take are documented compile errors: `round(x, ndigits)` but for
`ndigits=None`, `pow(a, b, mod)`, `sum` of an array, and an integer raised to a negative literal.
"""

from __future__ import annotations

import ast

import numpy as np

from .expressions import Ex, _fits_text
from .numeric import (Arr, Expected, Tup, Undefined, Weak, common, convert, default_type, fits, is_float, is_int,
                      is_scalar, promote)

PY_BUILTIN_FEATURES = {"py_builtins"}
PY_BUILTINS = ("pow", "divmod", "sum", "round")
ROUND_DIGITS = ["2", "0", "(-1)"]


def _is_none(node) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


class PyBuiltinRules:
    """Productions: the four calls inside expressions (pow of integers, `divmod(a, b)[k]`, `sum(...)`,
    `round(x)`), divmod's pair unpacked, kept or stored, and float powers as the values of array stores."""

    def e_py_builtin(self, scope, depth, want):
        if not self.on("py_builtins") or want not in (None, "int", "float"):
            return None
        r = self.rng.random()
        if r < 0.3:
            return self._round(scope, depth, want)
        if r < 0.5:
            return self._int_pow(scope, depth, want)
        if r < 0.75:
            return self._divmod_item(scope, depth, want)
        return self._sum(scope, depth, want)

    def _round(self, scope, depth, want):
        if want not in (None, "int"):
            return None
        a = self.expr(scope, depth, "float" if self.rng.random() < 0.7 else None)
        if not isinstance(a.t, str):
            return None
        r = self.rng.random()
        if a.weak:  # folded to Python's int
            try:
                value = round(eval(a.text, {}))
            except Exception:  # noqa: BLE001 - a literal Python cannot round (NaN, inf): computed at run time
                return None
            return Ex(f"round({a.text})", "int64", True, value) if isinstance(value, int) and abs(value) < 2**63 \
                else None
        if r < 0.01:  # round(x, ndigits): a documented error
            return Ex(f"round({a.text}, {self.rng.choice(ROUND_DIGITS)})", "int64")
        if r < 0.1:
            return Ex(f"round({a.text}, None)", "int64")
        return Ex(f"round({a.text})", "int64")

    def _int_pow(self, scope, depth, want):
        if want == "float":
            return None
        r = self.rng.random()
        if r < 0.1:  # of literals: a literal, as `2 ** 3`
            base, e = self.rng.choice([2, 3, -2, 7, 0, 1, -1, 10]), self.rng.randint(0, 4)
            text = f"pow({base if base >= 0 else f'({base})'}, {e})"
            return Ex(text, "int64", True, base ** e)
        a = self.expr(scope, depth, "int")
        if a.weak or not isinstance(a.t, str):
            return None
        if r < 0.55:
            e = self.rng.choice(["0", "1", "2", "3", "True"] + (["(-1)"] if self.rng.random() < 0.02 else []))
        else:  # a run-time exponent, now and then negative (gives 1, as for **)
            ex = self.expr(scope, depth, "int")
            e = f"({ex.text} & 3)" if self.rng.random() < 0.6 else f"({ex.text} % 5 - 2)"
            t = self.result_type(a, Ex(e, ex.t, ex.weak))
            if t is None or not is_int(t):
                return None
            return Ex(f"pow({a.text}, {e})", t) if self.ok(t, want) else None
        t = "int64" if a.t == "bool" else a.t
        return Ex(f"pow({a.text}, {e})", t) if self.ok(t, want) else None

    def _divmod_item(self, scope, depth, want):
        a, b, t = self._divmod_operands(scope, depth, want)
        if t is None or not self.ok(t, want):
            return None
        return Ex(f"divmod({a.text}, {b.text})[{self.rng.choice(['0', '1', '0', '1', '-1', '-2'])}]", t)

    def _divmod_operands(self, scope, depth, want=None):
        a = self.expr(scope, depth, want)
        b = self.expr(scope, depth, want)
        if self.rng.random() < 0.7:
            b = self.guard_nonzero(b)
        if not (isinstance(a.t, str) and isinstance(b.t, str)):
            return a, b, None
        if a.weak and b.weak:
            t = promote(a.t, b.t)
        else:
            t = self.result_type(a, b)
        return a, b, ("int64" if t == "bool" else t)

    def _sum(self, scope, depth, want):
        r = self.rng.random()
        tuples = [(n, t) for n, t in scope.vars.items() if isinstance(t, Tup) and t.elts
                  and all(isinstance(e, str) for e in t.elts)]
        if r < 0.01 and self.arrays:  # sum of an array: a documented error
            return Ex(f"sum({self.rng.choice(list(self.arrays))})", "float64")
        if tuples and r < 0.4:
            name, t = self.rng.choice(tuples)
            text, parts = name, [Ex(name, e) for e in t.elts]
        elif self.arrays and r < 0.5:
            name, (_, ndim) = self.rng.choice(list(self.arrays.items()))
            text, parts = f"{name}.shape", [Ex("", "int64")] * ndim
        else:
            parts = [self.expr(scope, depth, want) for _ in range(self.rng.choice([1, 2, 2, 3]))]
            if any(not isinstance(p.t, str) or (p.weak and not _fits_text(p.text, "int64")) for p in parts):
                return None
            text = f"({', '.join(p.text for p in parts)}{',' if len(parts) == 1 else ''})"
            parts = [Ex(p.text, p.t) for p in parts]  # a tuple's elements are strong
        acc, start = Ex("0", "int64", True, 0), ""
        if self.rng.random() < 0.3:
            acc = self.expr(scope, depth, want)
            if not isinstance(acc.t, str) or (acc.weak and not _fits_text(acc.text, "int64")):
                return None
            start = f", {acc.text}"
        for p in parts:
            t = self.result_type(acc, p)
            if t is None:
                return None
            acc = Ex("", "int64" if t == "bool" else t)
        return Ex(f"sum({text}{start})", acc.t) if self.ok(acc.t, want) else None

    def s_py_builtin(self, scope):
        """divmod's pair unpacked, kept as a tuple or stored into two outputs; a float power stored."""
        if not self.on("py_builtins"):
            return None
        r = self.rng.random()
        if r < 0.3 and self.in_kernel:
            return self._store_pow(scope)
        a, b, t = self._divmod_operands(scope, 1)
        if t is None:
            return None
        call = f"divmod({a.text}, {b.text})"
        if r < 0.6:
            q, m = self.fresh(), self.fresh()
            self.emit(f"{q}, {m} = {call}")
            scope.vars[q] = scope.vars[m] = t
        elif r < 0.8 or not self.in_kernel:
            name = self.fresh("t")
            self.emit(f"{name} = {call}")
            scope.vars[name] = Tup((t, t))
        else:
            q, m = self.out_for(t), self.out_for(t)
            if q is None or m is None:
                return None
            self.emit(f"{q}[{self.next_slot()}], {m}[{self.next_slot()}] = {call}")
        return True

    def _store_pow(self, scope):
        floats = [n for n, d in self.outs if is_float(d)]
        if not floats:
            return None
        a = self.expr(scope, 1, "float" if self.rng.random() < 0.7 else None)
        if a.weak or not isinstance(a.t, str):
            return None
        r = self.rng.random()
        if r < 0.01:  # pow with a modulus: a documented error
            b = f"{self.rng.choice(['2', '3'])}, {self.rng.choice(['5', '7'])}"
        elif r < 0.5:
            b = self.rng.choice(["2", "3", "0.5", "(-1)", "(-2)", "1.5", "0", "(-0.5)"])
        else:
            b = self.expr(scope, 2, "float" if self.rng.random() < 0.7 else None).text
        self.emit(f"{self.rng.choice(floats)}[{self.next_slot()}] = pow({a.text}, {b})")
        return True


class PyBuiltinTyping:
    """support.typer.Typer's pow/divmod/sum/round calls."""

    def c_pow(self, node, env):
        if len(node.args) == 3:
            raise Expected("pow modulus", "pow(base, exp, mod)")
        if len(node.args) != 2:
            raise Undefined("pow arity")
        left, right = self.args(node, env)
        if left[1] and right[1]:  # literals: the literal `a ** b` folds to
            return self.fold_binop(node, ast.Pow(), left, right)
        return self.binop(node, ast.Pow(), left, right, node.args[1]), False

    def c_divmod(self, node, env):
        if len(node.args) != 2:
            raise Undefined("divmod arity")
        operands = self.args(node, env)
        if any(not is_scalar(t) or t.startswith("complex") for t, _, _ in operands):
            raise Undefined("divmod of complex numbers")
        if all(weak for _, weak, _ in operands):  # computed at run time, in the literals' default types
            c = promote(*(default_type(v) for _, _, v in operands))
            c = "int64" if c == "bool" else c
            for _, _, v in operands:
                if not fits(v, c):
                    raise Expected("literal", f"{v!r} does not fit {c}")
            self.typed.optype[id(node)] = c
        else:
            self.binop(node, ast.FloorDiv(), *operands, node.args[1])
            c = self.typed.optype[id(node)]
        t = "int64" if c == "bool" else c
        return Tup((t, t)), False

    def c_sum(self, node, env):
        if not 1 <= len(node.args) <= 2:
            raise Undefined("sum arity")
        t, _ = self.expr(node.args[0], env)
        if isinstance(t, Arr):
            raise Expected("sum of an array", "sum() takes a tuple in kernels")
        if not isinstance(t, Tup) or not all(is_scalar(e) and not e.startswith("complex") for e in t.elts):
            raise Undefined(f"sum of {t}")
        acc = self.operand(node.args[1], env) if len(node.args) == 2 else ("int64", True, 0)
        steps = []
        for e in t.elts:
            c = common([acc, (e, False, None)])
            steps.append(c)
            acc = ("int64" if c == "bool" else c, False, None)
        self.typed.optype[id(node)] = steps
        if not steps:
            return default_type(acc[2]) if acc[1] else acc[0], False
        return acc[0], False

    def c_round(self, node, env):
        args = node.args
        if len(args) == 2 and not _is_none(args[1]):
            raise Expected("round ndigits", "round(x, ndigits)")
        if len(args) not in (1, 2):
            raise Undefined("round arity")
        t, weak, _ = self.operand(args[0], env)
        if t.startswith("complex") or (weak and len(args) == 2):
            raise Undefined("round of a complex number, or of a literal with ndigits=None")
        self.typed.optype[id(node)] = t
        return "int64", False


class PyBuiltinEval:
    """support.reference's values of the four calls."""

    def call_py_builtin(self, node, name, env):
        c = self.t.optype[id(node)]
        if name == "pow":
            return self.binop(node, ast.Pow(), self.eval(node.args[0], env), node.args[1], env)
        if name == "divmod":
            a, b = (self.eval(x, env) for x in node.args)
            return self.arith(ast.FloorDiv(), c, a, b), self.arith(ast.Mod(), c, a, b)
        if name == "sum":
            values = self.eval(node.args[0], env)
            acc = self.eval(node.args[1], env) if len(node.args) == 2 else Weak(0)
            for step, v in zip(c, values):
                acc = self.arith(ast.Add(), step, acc, v)
            return convert(acc, self.t.types[id(node)][0])
        x = self.eval(node.args[0], env)
        if is_float(c):  # half to even; NaN gives 0, beyond int64 the limits (convert saturates)
            return convert(np.rint(convert(x, c)), "int64")
        return convert(int(x), "int64")
