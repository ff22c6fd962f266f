"""A Csmith-style generator of random @gpuc.kernel programs inside the documented language.

`generate(seed, index)` returns a `Case`: a module's source (helper @gpuc.funcs and one kernel
named `kernel`) and several launches (argument specs) of that kernel with different argument types,
values and layouts. The generator tracks variable types only roughly, to keep most programs
valid; the reference (support.reference) is the judge of what a program means, and programs whose
result is undefined there (division by zero, overlong loops, ...) are regenerated.

New constructs are taught by adding a method and a row to `EXPR_RULES` (support.expressions) or
`STMT_RULES` (here): (weight, feature, method). Features can be switched off (`FEATURES`) to aim a
run at a class. Launch arguments are built by support.launches.
"""

from __future__ import annotations

import functools
import math
import random
from dataclasses import dataclass, field

import numpy as np

from .expressions import FLOAT_LITS, Ex, ExprRules, SMALL_INTS, _fits_text
from .launches import OUT_LEN, ArgSpec, array_spec, perturb, scalar_value
from .numeric import (COMPLEX_T, FLOATS, INTS, NUMPY, SCALARS, SMALL, FnPtr, Tup, is_float, is_int, promote,
                      stores)
from .loops import LOOP_FEATURES, LoopRules
from .numpy_calls import NUMPY_FEATURES, NumpyRules
from .pointers import POINTER_FEATURES, PointerRules
from .views import VIEW_FEATURES, ViewAugRules, ViewRules
from .complexes import COMPLEX_FEATURES, ComplexRules, Cx
from .py_builtins import PY_BUILTIN_FEATURES, PyBuiltinRules

FEATURES = {
    "funcs", "early_return", "loops", "while", "break_continue", "tuples", "augassign", "annassign",
    "minmax", "ifexp", "boolop", "compare_chain", "math", "math_transcendental", "big_literals",
    "retype", "conflict_read", "carried", "strided", "specializations", "np_calls", "array_ifexp",
    "runtime_step", "unsigned_negative_step", "shifts", "conversions", "math_extra", "globals",
    "tuple_args", "chained", "index", "func_arrays", "func_tuples", "bit_counts", "small_dtypes",
    "float_literal_stores", "math_log_base", "sums",
} | POINTER_FEATURES | LOOP_FEATURES | NUMPY_FEATURES | VIEW_FEATURES | COMPLEX_FEATURES | PY_BUILTIN_FEATURES

# floats stored into integer outputs: negative ones (truncated toward zero), ones past the small types' ranges
STORED_FLOATS = ["-2.5", "-0.7", "300.7", "-1.5", "0.999", "-128.9", "255.5", "65535.25", "2147483647.5", "-1e18",
                 "1e20", "9223372036854775808.0", "math.pi"]
MATH1 = ["exp", "log", "log2", "log10", "sin", "cos", "tan", "tanh"]
MATH_EXTRA1 = ["asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "expm1", "log1p", "cbrt",
               "erf", "erfc", "gamma", "lgamma", "exp2"]
MATH_EXTRA2 = ["atan2", "hypot"]


@dataclass
class Scope:
    vars: dict = field(default_factory=dict)      # readable variables: name -> type
    dead: set = field(default_factory=set)        # names whose types conflict at a join
    done: bool = False                            # the block returned, broke or continued

    def copy(self) -> "Scope":
        return Scope(dict(self.vars), set(self.dead), False)


def merge(scopes):
    live = [s for s in scopes if not s.done]
    if not live:
        out = scopes[0].copy()
        out.done = True
        return out
    out = Scope()
    for s in live:
        out.dead |= s.dead
    for name in sorted({n for s in live for n in s.vars}):
        types = {s.vars[name] for s in live if name in s.vars}
        partial = any(name not in s.vars for s in live)  # a pointer has no value on the other paths
        if len(types) > 1 and all(isinstance(t, str) for t in types):  # scalars unify (docs: Joins)
            types = {functools.reduce(promote, sorted(types))}
        if len(types) == 1 and name not in out.dead and not (partial and isinstance(next(iter(types)), FnPtr)):
            out.vars[name] = types.pop()
        else:
            out.dead.add(name)
    return out


@dataclass
class Case:
    seed: int
    index: int
    source: str
    launches: list            # [[ArgSpec, ...], ...]

    @property
    def name(self) -> str:
        return f"p{self.seed}_{self.index}"


class Generator(ExprRules, PointerRules, LoopRules, NumpyRules, ViewRules, ViewAugRules, ComplexRules,
                PyBuiltinRules):
    def __init__(self, rng: random.Random, features=FEATURES) -> None:
        self.rng, self.features = rng, set(features)
        self.lines: list[str] = []
        self.indent = 1
        self.counter = 0
        self.funcs: list = []           # (name, param types, return type)
        self.loop_depth = 0
        self.ret = None                 # the return type of the function being generated
        self.in_kernel = False
        self.arrays: dict = {}          # name -> (dtype, ndim) readable arrays
        self.outs: list = []            # output array names with dtypes
        self.slot = 0
        self.budget = 0
        self.forever = None             # the exit test of a `while True` loop being started
        self.globals: list = []         # (name, type, value): module-level constants
        self.max_depth = rng.choice([1, 2, 2, 3])
        self.families: list = []        # function-pointer families (support.pointers)
        self.pointee = False            # generating a function that is called through pointers
        self.annotated = False          # generating a function with a return annotation
        self.carrays: dict = {}         # name -> (complex dtype, ndim): complex input arrays (support.complexes)
        self.couts: list = []           # complex output array names
        self.complex_program = False    # the kernel has complex variables (drawn in `generate`)
        self.sums_rng = None            # the stream of the kernel's closing float sums (`sums`)

    # -- helpers ------------------------------------------------------------------------------
    def on(self, feature: str) -> bool:
        return feature in self.features

    def fresh(self, prefix: str = "v") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    def pick(self, rules, *args):
        rows = [(w, fn) for w, feature, fn in rules if feature is None or self.on(feature)]
        total = sum(w for w, _ in rows)
        for _ in range(20):
            r = self.rng.uniform(0, total)
            for w, fn in rows:
                r -= w
                if r <= 0:
                    break
            result = getattr(self, fn)(*args)
            if result is not None:
                return result
        return None

    def scalar_vars(self, scope, pred=lambda t: True):
        return [(n, t) for n, t in scope.vars.items() if isinstance(t, str) and pred(t)]

    # -- statements ---------------------------------------------------------------------------
    def block(self, scope, n):
        for _ in range(n):
            if scope.done or self.budget <= 0:
                break
            self.budget -= 1
            self.pick(STMT_RULES, scope)
        return scope

    def nested(self, scope, n):
        self.indent += 1
        start = len(self.lines)
        inner = self.block(scope, n)
        if len(self.lines) == start:
            self.emit("pass")
        self.indent -= 1
        return inner

    def assign_type_ok(self, scope, name, t) -> bool:
        """Inside loops, a variable changes only to a type that its type at the loop header holds (the header
        unifies the two to the type it has on entry, so the generator's view of the header stays right)."""
        old = scope.vars.get(name)
        if old is None or old == t:
            return True
        if self.loop_depth == 0:
            return self.on("retype")
        return (self.on("retype") and isinstance(old, str) and isinstance(t, str) and promote(old, t) == old
                and self.rng.random() < 0.3)

    def s_assign_new(self, scope):
        ex = self.expr(scope)
        if ex.weak and not _fits_text(ex.text, "int64"):
            return None
        name = self.fresh()
        self.emit(f"{name} = {ex.text}")
        scope.vars[name] = ex.t if not ex.weak else ex.t
        return True

    def s_chained(self, scope):
        ex = self.expr(scope)
        if ex.weak and not _fits_text(ex.text, "int64"):
            return None
        a, b = self.fresh(), self.fresh()
        self.emit(f"{a} = {b} = {ex.text}")
        scope.vars[a] = scope.vars[b] = ex.t
        return True

    def s_assign_existing(self, scope):
        found = self.scalar_vars(scope)
        if not found:
            return None
        name, t = self.rng.choice(found)
        ex = self.expr(scope)
        if ex.weak and not _fits_text(ex.text, "int64"):
            return None
        if not self.assign_type_ok(scope, name, ex.t):
            ex = self.cast(ex, t)
            if ex is None:
                return None
        self.emit(f"{name} = {ex.text}")
        scope.vars[name] = ex.t
        scope.dead.discard(name)
        return True

    def s_augassign(self, scope):
        found = self.scalar_vars(scope, lambda t: t != "bool")
        if not found:
            return None
        name, t = self.rng.choice(found)
        op = self.rng.choice(["+", "-", "*", "//", "%", "/", "**"] + (["&", "|", "^", "<<", ">>"] if is_int(t) else []))
        ex = self.expr(scope, 1, "int" if op in ("&", "|", "^", "<<", ">>", "**") else None)
        if op in ("//", "%", "/"):
            ex = self.guard_nonzero(ex)
        rt = self.result_type(Ex(name, t), ex)
        if rt is None or (op in ("&", "|", "^", "<<", ">>", "**") and not is_int(rt)):
            return None
        if op in ("<<", ">>"):
            ex = Ex(f"({ex.text} & {31 if rt in ('int32', 'uint32') else 63})", ex.t)
        elif op == "**":
            ex = Ex(f"({ex.text} & 3)", ex.t)
        rt = "int64" if rt == "bool" else "float64" if op == "/" and not is_float(rt) else rt
        if not self.assign_type_ok(scope, name, rt):
            return None
        self.emit(f"{name} {op}= {ex.text}")
        scope.vars[name] = rt
        return True

    def s_annassign(self, scope):
        target = self.rng.choice(SCALARS)
        ex = self.expr(scope)
        if is_int(target) and self.on("float_literal_stores") and self.rng.random() < 0.3:
            text = self.rng.choice(FLOAT_LITS + STORED_FLOATS)
            ex = Ex(text, "float64", True)
        if is_int(target) and is_float(ex.t) and ex.weak and self.on("float_literal_stores"):
            value = self.literal_value(ex)  # a float literal is truncated toward zero, as NumPy's np.int32(2.5)
            if value is None or not stores(value, target):
                return None
        elif (is_int(target) and is_float(ex.t)) or (ex.weak and not _fits_text(ex.text, target)):
            return None
        name = self.fresh()
        ann = {"int64": "int", "float64": "float", "bool": "bool"}.get(target) if self.rng.random() < 0.3 else None
        self.emit(f"{name}: {ann or 'gpuc.' + ('bool_' if target == 'bool' else target)} = {ex.text}")
        scope.vars[name] = target
        return True

    def out_for(self, t, allow_float_to_int=False):
        """An output array that can hold a value of type `t` without an undefined conversion."""
        fitting = [n for n, d in self.outs if d == t] or [n for n, d in self.outs if is_float(d) or d == "bool"
                                                          or not is_float(t) or allow_float_to_int]
        return self.rng.choice(fitting) if fitting else None

    def next_slot(self):
        self.slot = (self.slot + 1) % OUT_LEN
        return self.slot if self.rng.random() < 0.85 else self.slot - OUT_LEN

    def s_store(self, scope):
        if not self.in_kernel:
            return None
        ex = self.expr(scope)
        if not isinstance(ex.t, str):
            return None
        out = self.out_for(ex.t)
        if out is None or (ex.weak and not _fits_text(ex.text, dict(self.outs)[out])):
            return None
        self.emit(f"{out}[{self.next_slot()}] = {ex.text}")
        return True

    def s_float_store(self, scope):
        """A weak float (a literal, a folded expression of literals, a module constant) stored into an integer
        output: NumPy's setitem truncates it toward zero (`o0[3] = -2.5` stores -2)."""
        if not self.in_kernel:
            return None
        r = self.rng.random()
        if r < 0.5:
            text = self.rng.choice(FLOAT_LITS + STORED_FLOATS)
        elif r < 0.8:
            ex = self.expr(scope, 2, "float")
            if not (ex.weak and is_float(ex.t)):
                return None
            text = ex.text
        else:
            a, b = (self.rng.choice(FLOAT_LITS + STORED_FLOATS) for _ in range(2))
            text = f"({a} {self.rng.choice(['+', '-', '*', '/'])} {b})"
        out = self.int_out_for_float(Ex(text, "float64", True))
        if out is None:
            return None
        self.emit(f"{out}[{self.next_slot()}] = {text}")
        return True

    def int_out_for_float(self, ex):
        """An integer output for the weak float `ex`, which NumPy's setitem truncates toward zero: one whose
        range holds the truncated value, or now and then one whose range does not (a documented error)."""
        value = self.literal_value(ex)
        if value is None:
            return None
        ints = [(n, d) for n, d in self.outs if is_int(d)]
        fitting = [n for n, d in ints if stores(value, d)]
        if fitting and self.rng.random() < 0.9:
            return self.rng.choice(fitting)
        others = [n for n, d in ints if n not in fitting]
        return self.rng.choice(others) if others else None

    def literal_value(self, ex):
        """The Python value of a weak float expression (literals, module constants, `math` constants), or None."""
        if isinstance(ex.value, float):
            return ex.value
        names = {"math": math, **{n: v for n, t, v in self.globals if not isinstance(v, str)}}
        try:
            value = eval(ex.text, names)
        except Exception:  # noqa: BLE001 - a name or call the generator does not know: no such store
            return None
        return value if isinstance(value, float) else None

    def s_aug_store(self, scope):
        if not self.in_kernel or not self.on("augassign"):
            return None
        out, dtype = self.rng.choice(self.outs)
        op = self.rng.choice(["+", "-", "*"] + (["&", "|", "^"] if is_int(dtype) else []))
        ex = self.expr(scope, 1, "int" if op in "&|^" or is_int(dtype) else None)
        rt = self.result_type(Ex(out, dtype), ex)
        if rt is None or (is_float(rt) and not is_float(dtype)) or (op in "&|^" and not is_int(rt)):
            return None
        self.emit(f"{out}[{self.next_slot()}] {op}= {ex.text}")
        return True

    def s_store_math(self, scope):
        if not self.in_kernel or not self.on("math_transcendental"):
            return None
        floats = [n for n, d in self.outs if is_float(d)]
        a = self.expr(scope, 1, "float" if self.rng.random() < 0.7 else None)
        if not floats or a.t == "bool":
            return None
        r = self.rng.random()
        if r < 0.2:
            b = self.expr(scope, 2, "float")
            text = f"{a.text} ** {b.text}" if not (a.weak and b.weak) else None
        elif r < 0.3 and self.on("math_extra"):
            b = self.expr(scope, 2, "float")
            text = f"math.{self.rng.choice(MATH_EXTRA2)}({a.text}, {b.text})"
        elif r < 0.42 and self.on("math_log_base"):  # math.log(x, base): a literal base, or a computed one
            base = self.rng.choice(["2", "10", "2.5", "0.5", "math.e", "1.0"]) if self.rng.random() < 0.5 \
                else self.expr(scope, 2, "float").text
            text = f"math.log({a.text}, {base})"
        elif r < 0.5 and self.on("math_extra"):
            text = f"math.{self.rng.choice(MATH_EXTRA1)}({a.text})"
        else:
            text = f"math.{self.rng.choice(MATH1 + ['pow'])}({a.text}" + (", 2.5)" if r >= 0.9 else ")")
            text = text.replace("math.pow(" + a.text + ")", f"math.pow({a.text}, 0.5)")
        if text is None:
            return None
        self.emit(f"{self.rng.choice(floats)}[{self.next_slot()}] = {text}")
        return True

    def s_if(self, scope):
        self.emit(f"if {self.cond(scope).text}:")
        then = self.nested(scope.copy(), self.rng.randint(1, 3))
        branches = [then]
        r = self.rng.random()
        if r < 0.35:          # if without else
            branches.append(scope.copy())
        else:
            if r < 0.6:
                self.emit(f"elif {self.cond(scope).text}:")
                branches.append(self.nested(scope.copy(), self.rng.randint(1, 2)))
            self.emit("else:")
            branches.append(self.nested(scope.copy(), self.rng.randint(1, 3)))
        merged = merge(branches)
        scope.vars, scope.dead, scope.done = merged.vars, merged.dead, merged.done
        return True

    def s_retype_in_branch(self, scope):
        """A variable that changes type in one branch: after the join a scalar has the unified type (docs:
        Joins), a tuple or pointer that changed is unreadable (a conflict)."""
        if not self.on("retype") or self.loop_depth:
            return None
        found = self.scalar_vars(scope)
        if not found:
            return None
        name, t = self.rng.choice(found)
        ex = self.expr(scope, 1)
        if ex.weak and not _fits_text(ex.text, "int64"):
            return None
        self.emit(f"if {self.cond(scope).text}:")
        self.indent += 1
        self.emit(f"{name} = {ex.text}")
        inner = scope.copy()
        inner.vars[name] = ex.t
        if self.ret is not None and self.on("early_return") and self.rng.random() < 0.5:
            self.emit(f"return {self.return_value(inner)}")
            inner.done = True
        elif self.ret is None and self.in_kernel and self.rng.random() < 0.15:
            self.emit("return")
            inner.done = True
        self.indent -= 1
        merged = merge([inner, scope.copy()])
        scope.vars, scope.dead = merged.vars, merged.dead
        if name in scope.dead and self.on("conflict_read") and self.rng.random() < 0.1:
            out = self.out_for("float64")
            if out is not None:
                self.emit(f"{out}[{self.next_slot()}] = {name}")  # the docs require a compile error here
        return True

    def s_for(self, scope):
        if not self.on("loops") or self.loop_depth >= 2:
            return None
        t = self.rng.choice(INTS)
        j = self.fresh("j")
        self.emit(f"for {j} in {self.range_text(scope, t)}:")
        return self.loop_body(scope, {j: t})

    def range_text(self, scope, t):
        small = [n for n, u in scope.vars.items() if u == t and n.startswith("n")]

        def bound(lo, hi):
            if not t.startswith("int"):  # unsigned: no negative start; a stop of -1 ends a count down at 0
                lo = max(lo, -1 if lo < 0 and hi <= 1 else 0)
            r = self.rng.random()
            if small and r < 0.4:
                return self.rng.choice(small)
            v = self.rng.randint(lo, hi)
            if r < 0.7 or (v < 0 and not t.startswith("int")):
                return str(v) if v >= 0 else f"({v})"
            return f"{'gpuc' if not self.on('np_calls') or self.rng.random() < 0.5 else 'np'}.{t}({v})"
        r = self.rng.random()
        if r < 0.3:
            return f"range({bound(0, 5)})"
        if r < 0.55:
            return f"range({bound(-2, 3)}, {bound(0, 6)})"
        step = self.rng.choice([1, 2, 3, -1, -2])
        if step < 0 and not t.startswith("int") and not self.on("unsigned_negative_step"):
            step = -step
        if self.on("runtime_step") and self.rng.random() < 0.3:
            ex = self.expr(scope, 2, "int")
            text = f"({ex.text} % 3 + 1)"
            step_text = text if step > 0 else f"-{text}"
        else:
            step_text = str(step) if step > 0 else f"({step})"
        if step > 0:
            return f"range({bound(-2, 2)}, {bound(0, 7)}, {step_text})"
        return f"range({bound(0, 7)}, {bound(-2, 1)}, {step_text})"

    def loop_body(self, scope, bound=None, unrolled=False, trace=False):
        """The body of a loop binding the names `bound` (None: a while loop); with `trace`, it first adds
        what it binds into the outputs. An unrolled loop's copies are straight-line code: no variable is
        carried around, and what the body binds is left unread after it."""
        inner = scope.copy()
        inner.vars.update(bound or {})
        carried = None
        if self.on("carried") and not unrolled and self.rng.random() < 0.25:   # read before its assignment later
            carried, ct = self.fresh(), self.rng.choice(["int64", "float64", "float32", "uint32"])
            inner.vars[carried] = ct
        self.loop_depth += 1
        self.indent += 1
        start = len(self.lines)
        if bound is None:
            self.emit(f"{self.counter_name} += 1")
            if self.forever:
                self.emit(f"if {self.forever}:")
                self.emit("    break")
                self.forever = None
        if trace:
            self.trace_values(bound)
        self.block(inner, self.rng.randint(1, 4))
        if self.on("break_continue") and self.rng.random() < 0.4 and not inner.done:
            self.emit(f"if {self.cond(inner).text}:")
            self.indent += 1
            self.emit(self.rng.choice(["break", "continue"]))
            self.indent -= 1
        if carried is not None and not inner.done:
            ct = inner.vars.pop(carried)
            ex = self.expr(inner, 1)
            inner.vars[carried] = ct
            cast = ex if ex.t == inner.vars[carried] and not ex.weak else self.cast(ex, inner.vars[carried])
            self.emit(f"{carried} = {(cast or Ex('1', 'int64', True, 1)).text}")
        if len(self.lines) == start:
            self.emit("pass")
        self.indent -= 1
        self.loop_depth -= 1
        inner.done = False
        merged = merge([inner, scope.copy()])
        if unrolled:  # each copy may leave its own types behind
            for name in set(merged.vars) - set(scope.vars) | set(bound):
                merged.vars.pop(name, None)
                merged.dead.add(name)
        scope.vars, scope.dead = merged.vars, merged.dead
        return True

    def s_while(self, scope):
        if not self.on("while") or self.loop_depth >= 2:
            return None
        k = self.fresh("k")
        t = self.rng.choice(INTS)
        self.emit(f"{k} = {'gpuc.' + t + '(0)' if t != 'int64' else '0'}")
        scope.vars[k] = t
        if self.rng.random() < 0.3:  # while True, left by a break
            self.emit("while True:")
            self.forever = f"{k} > {self.rng.randint(0, 4)}"
        else:
            self.emit(f"while {k} < {self.rng.randint(1, 5)}:")
        self.counter_name = k
        return self.loop_body(scope)

    def s_tuple(self, scope):
        if not self.on("tuples"):
            return None
        r = self.rng.random()
        found = self.scalar_vars(scope)
        if r < 0.3 and len(found) >= 2:
            (a, ta), (b, tb) = self.rng.sample(found, 2)
            if self.loop_depth and ta != tb:
                return None
            self.emit(f"{a}, {b} = {b}, {a}")
            scope.vars[a], scope.vars[b] = tb, ta
            return True
        parts = [self.expr(scope, 1) for _ in range(self.rng.choice([2, 2, 3]))]
        if any(p.weak and not _fits_text(p.text, "int64") for p in parts):
            return None
        if r < 0.65:
            names = [self.fresh() for _ in parts]
            self.emit(f"{', '.join(names)} = {', '.join(p.text for p in parts)}")
            for n, p in zip(names, parts):
                scope.vars[n] = p.t
        else:
            name = self.fresh("t")
            self.emit(f"{name} = ({', '.join(p.text for p in parts)},)")
            scope.vars[name] = Tup(tuple(p.t for p in parts))
        return True

    def s_return(self, scope):
        if not self.on("early_return") or self.in_kernel and self.rng.random() < 0.7:
            return None
        self.emit(f"if {self.cond(scope).text}:")
        self.indent += 1
        self.emit("return" if self.ret is None else f"return {self.return_value(scope)}")
        self.indent -= 1
        return True

    def return_value(self, scope) -> str:
        if isinstance(self.ret, Tup):
            ret, parts = self.ret, []
            for t in ret.elts:
                self.ret = t
                parts.append(self.return_value(scope))
            self.ret = ret
            return f"({', '.join(parts)})"
        if (self.rng.random() < 0.15 and self.ret in ("int64", "float64", "int32", "uint32")
                and (not self.annotated or self.on("annotated_literal_return"))):
            return "0"  # literals adapt to the return type
        ex = self.expr(scope, 1)
        if ex.t == self.ret and not ex.weak:
            return ex.text
        cast = self.cast(ex, self.ret)
        return cast.text if cast is not None else self.cast(Ex("1", "int64", True, 1), self.ret).text

    def s_array_ifexp(self, scope):
        if not self.in_kernel or not self.on("array_ifexp") or self.indent != 1:
            return None
        same = {}
        for n, a in self.arrays.items():
            same.setdefault(a, []).append(n)
        pairs = [v for v in same.values() if len(v) >= 2]
        if not pairs:
            return None
        a, b = self.rng.sample(self.rng.choice(pairs), 2)
        name = self.fresh("arr")
        self.emit(f"{name} = {a} if {self.cond(scope).text} else {b}")
        self.arrays[name] = self.arrays[a]
        return True

    # -- programs -----------------------------------------------------------------------------
    def func(self, index, name=None, params=None, ret=None, prelude=None, annotate=False):
        """A helper @gpuc.func; `prelude(scope)` emits its first statements, `annotate` writes the
        return annotation."""
        name = name or f"f{index}"
        if params is None:
            params = [self.rng.choice(SCALARS) for _ in range(self.rng.randint(1, 3))]
            if self.families and self.on("deferred_funcs") and self.rng.random() < 0.4:
                params.insert(self.rng.randrange(len(params) + 1), self.rng.choice(self.families).sig)
        params = list(params)
        self.ret = ret or self.rng.choice(SCALARS)
        if ret is None and self.on("func_tuples") and self.rng.random() < 0.2:
            self.ret = Tup(tuple(self.rng.choice(SCALARS) for _ in range(2)))
        scope = Scope({f"p{k}": t for k, t in enumerate(params)})
        arrays, self.arrays = self.arrays, {}
        if self.on("func_arrays") and arrays and prelude is None and ret is None and self.rng.random() < 0.4:
            params.append(("array", self.rng.choice(list(arrays.values()))))
            self.arrays = {f"p{len(params) - 1}": params[-1][1]}
        names = [f"p{k}" for k in range(len(params))]
        self.lines.append("@gpuc.func")
        returns = f" -> {type_text(self.ret)}" if annotate else ""
        self.lines.append(f"def {name}({', '.join(names)}){returns}:")
        if self.rng.random() < 0.2:
            self.lines.append('    """A generated helper."""')
        self.indent, self.budget, self.in_kernel = 1, self.rng.randint(2, 6), False
        self.annotated = annotate
        if prelude is not None:
            prelude(scope)
        self.block(scope, 6)
        if not scope.done:
            self.emit(f"return {self.return_value(scope)}")
        self.arrays = arrays
        self.lines.append("")
        self.funcs.append((name, params, self.ret))
        self.ret, self.annotated = None, False

    def kernel(self, params):
        scope = Scope({n: t for n, t in params if isinstance(t, (str, Tup, Cx))})
        self.lines.append("@gpuc.kernel")
        self.lines.append(f"def kernel({', '.join(n for n, _ in params)}):")
        self.indent, self.budget, self.in_kernel = 1, self.rng.randint(6, 16), True
        self.block(scope, 16)
        if not scope.done:
            for name, t in list(scope.vars.items()):
                if isinstance(t, str) and self.rng.random() < 0.7:
                    out = self.out_for(t)
                    if out is not None:
                        self.emit(f"{out}[{self.next_slot()}] = {name}")
                elif isinstance(t, Tup) and t.elts and isinstance(t.elts[-1], str) and self.rng.random() < 0.5:
                    out = self.out_for(t.elts[-1])
                    if out is not None:
                        self.emit(f"{out}[{self.next_slot()}] = {name}[-1]")
            self.store_complex_vars(scope)
            if self.on("sums") and self.sums_rng is not None and self.sums_rng.random() < 0.3:
                self.sums(self.sums_rng)

    def sums(self, rng: random.Random) -> None:
        """1 to 16 float accumulators summed over a float input array, round and round, stored into an output of
        their type: LLVM's loop vectorizer adds such sums in order in vector lanes, several at once by a
        transpose (docs/targets.md, "Float sums in loops"), which must give the interpreter's bits. Drawn from a
        stream of its own (`sums_rng`) at the kernel's end, so the rest of the program is what it was."""
        arrays = [n for n, a in self.arrays.items() if isinstance(a, tuple) and a[0] in ("float32", "float64")
                  and a[1] == 1]
        if not arrays:
            return
        a = rng.choice(arrays)
        t = self.arrays[a][0]
        outs = [n for n, d in self.outs if d == t]
        if not outs:
            return
        names = [self.fresh("s") for _ in range(rng.choice([1, 2, 3, 4, 5, 8, 9, 12, 16]))]
        r, j, x = self.fresh("r"), self.fresh("j"), self.fresh("x")
        for name in names:
            self.emit(f"{name} = gpuc.{t}({rng.choice(['0.0', '-0.0', '1.5', '-0.25', '1e-3'])})")
        self.emit(f"for {r} in range({rng.randint(1, 5)}):")
        self.emit(f"    for {j} in range(len({a})):")
        self.emit(f"        {x} = {a}[{j}]")
        for name in names:
            term = rng.choice([x, f"{x} * {x}", f"{x} * {rng.choice(['0.5', '-1.25', '3.0', '1e-7'])}", f"{x} * {x} * {x}",
                               f"-{x}", f"({x} - {name} * 0.125)"])  # the last: no sum, a recurrence
            self.emit(f"        {name} {rng.choice(['+=', '+=', '+=', '-='])} {term}")
        out = rng.choice(outs)
        for k, name in enumerate(names):
            self.emit(f"{out}[{k % OUT_LEN}] = {name}")


STMT_RULES = [
    (5, None, "s_assign_new"), (3, None, "s_assign_existing"), (3, "augassign", "s_augassign"),
    (1, "annassign", "s_annassign"), (5, None, "s_store"), (1, "augassign", "s_aug_store"),
    (1, "math_transcendental", "s_store_math"), (1, "numpy_math", "s_store_numpy"),
    (4, None, "s_if"), (2, "retype", "s_retype_in_branch"),
    (3, "loops", "s_for"), (2, "for_tuple", "s_for_each"), (1, "for_array", "s_for_each"), (2, "while", "s_while"),
    (2, "tuples", "s_tuple"), (1, "early_return", "s_return"),
    (1, "array_ifexp", "s_array_ifexp"), (0.5, "chained", "s_chained"), (1, "func_tuples", "s_call_tuple"),
    (1, "float_literal_stores", "s_float_store"), (0.7, "py_builtins", "s_py_builtin"),
    (1, "views", "s_view_copy"), (1, "view_augassign", "s_view_aug"), (0.7, "view_rows", "s_for_rows"), (0.8, "runtime_slices", "s_runtime_slice"),
    (1.5, "complex_vars", "s_cx_assign"), (1.5, "complex_vars", "s_cx_store"), (0.5, "complex_vars", "s_cx_join"),
    (0.4, "complex_vars", "s_cx_for"), (2, "deferred", "s_ptr_take"), (1.5, "deferred", "s_ptr_select"), (0.4, "deferred_errors", "s_ptr_error"),
]


def type_text(t: str) -> str:
    return "gpuc.bool_" if t == "bool" else f"gpuc.{t}"



def small_dtypes(rng: random.Random, outs, ins, scalars):
    """Now and then an array's element type or a scalar argument's type becomes a small dtype (int8, uint8,
    int16, uint16, float16), drawn from a stream of its own so that the other draws stay as they were."""
    def pick(t, p):
        return rng.choice(SMALL) if rng.random() < p else t
    return ([pick(t, 0.1) for t in outs], [(pick(t, 0.2), ndim) for t, ndim in ins],
            [pick(t, 0.15) for t in scalars])


def generate(seed: int, index: int, features=FEATURES) -> Case:
    """Program `index` of the stream `seed` (the same pair always gives the same program)."""
    rng = random.Random(f"{seed}:{index}")
    g = Generator(rng, features)
    strided = g.on("strided")
    outs = [rng.choice(FLOATS)] + [rng.choice(SCALARS) for _ in range(rng.randint(1, 2))]
    ins = [(rng.choice(SCALARS), rng.choice([1, 1, 2])) for _ in range(rng.randint(1, 2))]
    scalars = [rng.choice(SCALARS) for _ in range(rng.randint(1, 3))]
    counts = [rng.choice(INTS) for _ in range(rng.randint(0, 2))]
    tuples = [Tup(tuple(rng.choice(SCALARS) for _ in range(rng.randint(2, 3))))
              for _ in range(rng.random() < 0.3 and g.on("tuple_args"))]
    if g.on("small_dtypes"):
        outs, ins, scalars = small_dtypes(random.Random(f"{seed}:{index}:small"), outs, ins, scalars)
    params = ([(f"o{k}", ("out", d)) for k, d in enumerate(outs)] + [(f"a{k}", a) for k, a in enumerate(ins)]
              + [(f"s{k}", t) for k, t in enumerate(scalars)] + [(f"n{k}", t) for k, t in enumerate(counts)]
              + [(f"q{k}", t) for k, t in enumerate(tuples)])
    g.outs = [(f"o{k}", d) for k, d in enumerate(outs)]
    g.arrays = {f"a{k}": a for k, a in enumerate(ins)}
    g.lines = ["import cmath", "import math", "", "import numpy as np", "", "import gpuc", ""]
    if g.on("globals"):
        for k in range(rng.randint(0, 3)):
            t = rng.choice(SCALARS)
            v = scalar_value(rng, t) if t != "int64" else rng.choice(SMALL_INTS)
            if t in ("int64", "float64", "bool") and rng.random() < 0.6 and (t != "float64" or np.isfinite(v)):
                g.globals.append((f"K{k}", t, v))  # a Python number: a weak literal in functions
                g.lines.append(f"K{k} = {v!r}")
            elif np.isfinite(v):
                g.globals.append((f"K{k}", t, "np"))  # a NumPy scalar keeps its dtype
                g.lines.append(f"K{k} = np.{t if t != 'bool' else 'bool_'}({v!r})")
    g.lines += ["", ""]
    if g.on("deferred") and rng.random() < 0.4:
        g.pointer_funcs()
    if g.on("funcs"):
        for k in range(rng.choice([0, 1, 1, 2])):
            g.func(k)
            g.lines.append("")
    g.sums_rng = random.Random(f"{seed}:{index}:sums")  # a stream of its own, as the complex one
    crng = random.Random(f"{seed}:{index}:complex")  # a stream of its own: the other draws stay as they were
    cparams = []
    if g.on("complex_vars") and crng.random() < 0.25:
        g.complex_program = True
        cparams = ([(f"w{k}", ("out", crng.choice(COMPLEX_T))) for k in range(crng.choice([0, 1, 1]))]
                   + [(f"b{k}", (crng.choice(COMPLEX_T), crng.choice([1, 1, 2]))) for k in range(crng.randint(0, 1))]
                   + [(f"c{k}", Cx(crng.choice(COMPLEX_T))) for k in range(crng.randint(0, 2))])
        g.couts = [n for n, t in cparams if n.startswith("w")]
        g.carrays = {n: t for n, t in cparams if n.startswith("b")}
    g.kernel([(n, t if isinstance(t, (str, Tup, Cx)) else None) for n, t in params + cparams])
    source = "\n".join(g.lines) + "\n"

    base = []
    for name, t in params:
        if name.startswith("o"):
            base.append(array_spec(rng, t[1], 1, strided and rng.random() < 0.3,
                                   np.zeros(OUT_LEN, NUMPY[t[1]])))
        elif name.startswith("a"):
            base.append(array_spec(rng, t[0], t[1], strided and rng.random() < 0.3))
        elif name.startswith("n"):
            base.append(ArgSpec("scalar", t, rng.randint(0, 6), numpy=t != "int64" or rng.random() < 0.5))
        elif name.startswith("q"):
            base.append(ArgSpec("tuple", "", [ArgSpec("scalar", e, scalar_value(rng, e), numpy=e not in (
                "int64", "float64", "bool") or rng.random() < 0.5) for e in t.elts]))
        else:
            base.append(ArgSpec("scalar", t, scalar_value(rng, t), numpy=t not in ("int64", "float64", "bool")
                                or rng.random() < 0.5))
    for name, t in cparams:
        if name.startswith("w"):
            base.append(array_spec(crng, t[1], 1, strided and crng.random() < 0.3, np.zeros(OUT_LEN, NUMPY[t[1]])))
        elif name.startswith("b"):
            base.append(array_spec(crng, t[0], t[1], strided and crng.random() < 0.3))
        else:
            base.append(ArgSpec("scalar", t.t, scalar_value(crng, t.t), numpy=t.t != "complex128" or crng.random() < 0.5))
    launches = [base]
    if g.on("specializations"):
        for _ in range(rng.choice([0, 1, 2])):
            launches.append(perturb(rng, base))
    return Case(seed, index, source, launches)


