"""Expression productions of the random-program generator (a mixin of support.progen.Generator).

Each `e_*` method returns an `Ex` (source text, rough type, whether it is a weak literal) or None
when it does not apply; `EXPR_RULES` and `LEAF_RULES` weight them.
"""

from __future__ import annotations

from dataclasses import dataclass

from .launches import SHAPE_2D, SIZE_1D
from .numeric import FLOATS, SCALARS, FnPtr, Tup, int_range, is_float, is_int, promote

ARITH = ["+", "-", "*", "//", "%", "/"]
BITOPS = ["&", "|", "^"]
CMPOPS = ["<", "<=", ">", ">=", "==", "!="]
SMALL_INTS = [0, 1, 2, 3, 5, 7, -1, -2, -3, 10, 100]
BIG_INTS = [127, 255, -128, 2**31 - 1, 2**31, -2**31, 2**32 - 1, 2**32, 2**63 - 1, -2**63, 2**63, 2**64 - 1,
            2**24 + 1, 2**53 + 1, 2**63 - 2**39 + 1]   # the last ones round differently through float64
FLOAT_LITS = ["0.0", "-0.0", "0.5", "1.5", "-2.25", "3.0", "0.1", "1e10", "-1e-3", "7.75"]
EDGE_FLOATS = ["3.4028235e38", "1e39", "5e-324", "1e-46", "1.401298464324817e-45", "-1e308"]


@dataclass
class Ex:
    text: str
    t: object          # a scalar type name or a Tup
    weak: bool = False
    value: object = None   # the value of a weak literal



class ExprRules:
    """Expressions; the Generator provides rng, features, arrays, funcs, globals and max_depth."""

    def expr(self, scope, depth=0, want=None) -> Ex:
        """A scalar expression; `want` = "int" (an integer type), "float", or None (any scalar)."""
        if depth >= self.max_depth or (depth and self.rng.random() < 0.3):
            return self.leaf(scope, want)
        ex = self.pick(EXPR_RULES, scope, depth + 1, want)
        return ex if ex is not None else self.leaf(scope, want)

    def leaf(self, scope, want=None) -> Ex:
        ex = self.pick(LEAF_RULES, scope, want)
        return ex if ex is not None else self.e_literal(scope, want)

    def ok(self, t, want) -> bool:
        return want is None or (want == "int" and is_int(t)) or (want == "float" and is_float(t)) or want == t

    def e_literal(self, scope, want=None, *_):
        r = self.rng.random()
        if want == "float" or (want is None and r < 0.3):
            edge = self.on("big_literals") and self.rng.random() < 0.05
            text = self.rng.choice(EDGE_FLOATS if edge else FLOAT_LITS)
            return Ex(text, "float64", True, float(text))
        if want is None and r < 0.4:
            text = self.rng.choice(["True", "False"])
            return Ex(text, "bool", True, text == "True")
        values = SMALL_INTS + (BIG_INTS if self.on("big_literals") and self.rng.random() < 0.15 else [])
        v = self.rng.choice(values)
        text = str(v) if v >= 0 else f"({v})"
        if v >= 2**32 and self.rng.random() < 0.5:
            text = {2**63: "2**63", 2**32: "2**32"}.get(v, text)
        return Ex(text, "int64", True, v)

    def e_var(self, scope, want=None, *_):
        found = self.scalar_vars(scope, lambda t: self.ok(t, want))
        if not found:
            return None
        name, t = self.rng.choice(found)
        return Ex(name, t)

    def e_global(self, scope, want=None, *_):
        found = [(n, t) for n, t, _ in self.globals if self.ok(t, want)]
        if not found:
            return None
        name, t = self.rng.choice(found)
        value = next(v for n, _, v in self.globals if n == name)
        return Ex(name, t, t in ("int64", "float64", "bool") and not isinstance(value, str), value)

    def e_index(self, scope, want=None, *_):
        if not self.on("index") or want not in (None, "int") or (self.pointee and not self.on("deferred_index")):
            return None
        return Ex(self.rng.choice(["gpuc.index()", "gpuc.index(0)"]), "int64")

    def e_element(self, scope, want=None, *_):
        arrays = [(n, a) for n, a in self.arrays.items() if self.ok(a[0], want)]
        if not arrays:
            return None
        name, (dtype, ndim) = self.rng.choice(arrays)
        return Ex(f"{name}[{self.index_text(scope, ndim)}]", dtype)

    def index_text(self, scope, ndim):
        extents = [SIZE_1D] if ndim == 1 else list(SHAPE_2D)
        parts = []
        for extent in extents:
            if self.rng.random() < 0.5:
                parts.append(str(self.rng.randrange(-extent, extent)))
            else:
                i = self.expr(scope, 2, "int")
                parts.append(f"{i.text} % {extent}")
        return ", ".join(parts)

    def e_binop(self, scope, depth, want):
        op = self.rng.choice(ARITH)
        a = self.expr(scope, depth, want if want != "bool" else None)
        b = self.expr(scope, depth, want if want != "bool" else None)
        if op in ("//", "%", "/"):
            b = self.guard_nonzero(b)
        t = self.result_type(a, b)
        if t is None:
            return None
        if op == "/":
            t = t if is_float(t) else "float64"
        elif t == "bool":
            t = "int64"
        if not self.ok(t, want):
            return None
        return Ex(f"({a.text} {op} {b.text})", t, a.weak and b.weak)

    def guard_nonzero(self, b: Ex) -> Ex:
        if not b.weak and self.rng.random() < 0.3:
            return b  # division by 0 is defined (docs): integer // and % give 0, floats NumPy's results
        if b.weak:
            return b if b.value else Ex("3", "int64", True, 3)
        return Ex(f"({b.text} or 3)", "int64" if b.t == "bool" else b.t)

    def result_type(self, a: Ex, b: Ex):
        for lit, other in ((a, b), (b, a)):  # mostly avoid literals that do not fit (a documented error)
            if (lit.weak and not other.weak and isinstance(lit.value, int) and isinstance(other.t, str)
                    and is_int(other.t) and not _fits_value(lit.value, other.t) and self.rng.random() < 0.9):
                return None
        if a.weak and b.weak:
            return a.t if a.t == b.t else "float64"
        if a.weak:
            return self.weak_meets(a, b.t)
        if b.weak:
            return self.weak_meets(b, a.t)
        if not isinstance(a.t, str) or not isinstance(b.t, str):
            return None
        return promote(a.t, b.t)

    @staticmethod
    def weak_meets(lit: Ex, t):
        if lit.t == "bool":
            return t
        if lit.t == "int64":
            return "int64" if t == "bool" else t
        return t if is_float(t) else "float64"

    def e_bitop(self, scope, depth, want):
        if want == "float":
            return None
        a, b = self.expr(scope, depth, "int"), self.expr(scope, depth, "int")
        t = self.result_type(a, b)
        if t is None or not (is_int(t) or t == "bool"):
            return None
        if self.on("shifts") and self.rng.random() < 0.4 and is_int(t):
            bits = 32 if t in ("int32", "uint32") else 64
            op = self.rng.choice(["<<", ">>"])
            count = f"({b.text} & {bits - 1})" if self.rng.random() < 0.7 else b.text  # any count is defined
            return Ex(f"({a.text} {op} {count})", t, False) if self.ok(t, want) else None
        return Ex(f"({a.text} {self.rng.choice(BITOPS)} {b.text})", t, a.weak and b.weak) if self.ok(t, want) else None

    def e_pow(self, scope, depth, want):
        a = self.expr(scope, depth, "int")
        if a.weak or not self.ok(a.t, want):
            return None
        if self.rng.random() < 0.6:
            return Ex(f"({a.text} ** {self.rng.choice(['0', '1', '2', '3'])})", a.t)
        e = self.expr(scope, depth, "int")
        # a runtime exponent, sometimes negative (the docs: an integer ** a negative runtime exponent is 1)
        e = Ex(f"({e.text} & 3)" if self.rng.random() < 0.6 else f"({e.text} % 5 - 2)", e.t, e.weak, None)
        t = self.result_type(a, e)
        return Ex(f"({a.text} ** {e.text})", t) if t is not None and is_int(t) and self.ok(t, want) else None

    def e_unary(self, scope, depth, want):
        a = self.expr(scope, depth, want)
        if a.t == "bool" or a.weak:
            return Ex(f"(not {a.text})", "bool") if want in (None, "bool") else None
        op = "~" if is_int(a.t) and self.rng.random() < 0.4 else "-"
        return Ex(f"({op}{a.text})", a.t)

    def e_compare(self, scope, depth, want):
        if want not in (None, "bool"):
            return None
        a, b = self.expr(scope, depth), self.expr(scope, depth)
        if (a.weak and b.weak) or self.result_type(a, b) is None:
            return None
        text = f"{a.text} {self.rng.choice(CMPOPS)} {b.text}"
        if self.on("compare_chain") and self.rng.random() < 0.2:
            c = self.expr(scope, depth)
            if not (b.weak and c.weak):
                text += f" {self.rng.choice(CMPOPS)} {c.text}"
        return Ex(f"({text})", "bool")

    def e_boolop(self, scope, depth, want):
        if not self.on("boolop"):
            return None
        parts = [self.expr(scope, depth, want) for _ in range(self.rng.choice([2, 2, 3]))]
        t = self.common(parts)
        if t is None or not self.ok(t, want):
            return None
        return Ex("(" + f" {self.rng.choice(['and', 'or'])} ".join(p.text for p in parts) + ")", t)

    def common(self, parts):
        t = parts[0]
        for p in parts[1:]:
            rt = self.result_type(t, p)
            if rt is None:
                return None
            t = Ex("", rt, t.weak and p.weak)
        if t.weak:
            return None
        for p in parts:  # every literal must fit the common type (mostly)
            if self.result_type(p, t) is None:
                return None
        return t.t

    def e_ifexp(self, scope, depth, want):
        a, b = self.expr(scope, depth, want), self.expr(scope, depth, want)
        t = self.common([a, b])
        if t is None or not self.ok(t, want):
            return None
        return Ex(f"({a.text} if {self.cond(scope, depth).text} else {b.text})", t)

    def e_minmax(self, scope, depth, want):
        parts = [self.expr(scope, depth, want) for _ in range(self.rng.choice([2, 2, 3]))]
        t = self.common(parts)
        if t is None or not self.ok(t, want):
            return None
        return Ex(f"{self.rng.choice(['min', 'max'])}({', '.join(p.text for p in parts)})", t)

    def e_abs(self, scope, depth, want):
        a = self.expr(scope, depth, want)
        if a.weak or a.t == "bool":
            return None
        return Ex(f"abs({a.text})", a.t)

    def e_convert(self, scope, depth, want):
        target = self.rng.choice(SCALARS)
        if not self.ok(target, want):
            return None
        a = self.expr(scope, depth)
        return self.cast(a, target)

    def cast(self, a: Ex, target: str):
        """`a` converted to `target`, guarding float -> integer conversions against out-of-range values."""
        mod = "np" if self.on("np_calls") and self.rng.random() < 0.3 else "gpuc"
        name = "bool_" if target == "bool" else target
        if self.rng.random() < 0.3 and target in ("int64", "float64", "bool"):
            call = {"int64": "int", "float64": "float", "bool": "bool"}[target]
        else:
            call = f"{mod}.{name}"
        if a.weak and (is_int(target) or target == "bool") and a.t != "int64" and a.t != "bool":
            return None
        if a.weak and is_int(target):
            try:
                v = eval(a.text)
            except Exception:
                return None
            lo, hi = int_range(target)
            if not lo <= v <= hi:
                return None
        if is_int(target) and is_float(a.t) and self.rng.random() < 0.3:  # (conversions saturate anyway)
            return Ex(f"({call}({a.text}) if abs({a.text}) < 1e9 else 5)", target)
        return Ex(f"{call}({a.text})", target)

    def e_bit_count(self, scope, depth, want):
        """gpuc.popc / clz / ffs of an integer: its type (int64 for a literal), ffs a uint32."""
        if want not in (None, "int"):
            return None
        a = self.expr(scope, depth, "int")
        if not is_int(a.t) or (a.weak and not _fits_text(a.text, "int64") and self.rng.random() < 0.9):
            return None
        name = self.rng.choice(["popc", "clz", "ffs"])
        return Ex(f"gpuc.{name}({a.text})", "uint32" if name == "ffs" else "int64" if a.weak else a.t)

    def e_math(self, scope, depth, want):
        if not self.on("math") or want not in (None, "float", "int", "bool"):
            return None
        a = self.expr(scope, depth, "float" if self.rng.random() < 0.7 else None)
        if a.t == "bool" or a.weak:
            return None
        ft = a.t if is_float(a.t) else "float64"
        choice = self.rng.choice(["sqrt", "fabs", "copysign", "floor", "ceil", "isnan", "isinf"]
                                 + (["trunc", "fmod", "isfinite", "radians", "degrees"] if self.on("math_extra") else []))
        if choice in ("radians", "degrees") and want in (None, "float"):
            return Ex(f"math.{choice}({a.text})", ft)
        if choice == "fmod" and want in (None, "float"):
            return Ex(f"math.fmod({a.text}, {self.guard_nonzero(self.expr(scope, depth, 'float')).text})", ft)
        if choice in ("floor", "ceil", "trunc"):
            return Ex(f"math.{choice}({a.text})", "int64") if want in (None, "int") else None
        if choice in ("isnan", "isinf", "isfinite"):
            return Ex(f"math.{choice}({a.text})", "bool") if want in (None, "bool") else None
        if want not in (None, "float"):
            return None
        if choice == "sqrt":
            return Ex(f"math.sqrt(abs({a.text}))", ft)
        if choice == "copysign":
            return Ex(f"math.copysign({a.text}, {self.rng.choice(['-1.0', '1.0', a.text])})", ft)
        return Ex(f"math.fabs({a.text})", ft)

    def e_len(self, scope, want=None, *_):
        if want not in (None, "int") or not self.arrays:
            return None
        name, (dtype, ndim) = self.rng.choice(list(self.arrays.items()))
        form = self.rng.choice(["len", "size", "shape"])
        if form == "len":
            return Ex(f"len({name})", "int64")
        if form == "size":
            return Ex(f"{name}.size", "int64")
        return Ex(f"{name}.shape[{self.rng.randrange(ndim)}]", "int64")

    def e_tuple_item(self, scope, want=None, *_):
        tuples = [(n, t) for n, t in scope.vars.items() if isinstance(t, Tup)]
        if not tuples:
            return None
        name, t = self.rng.choice(tuples)
        k = self.rng.randrange(len(t.elts))
        et = t.elts[k]
        if not isinstance(et, str) or not self.ok(et, want):
            return None
        return Ex(f"{name}[{k if self.rng.random() < 0.7 else k - len(t.elts)}]", et)

    def e_call(self, scope, depth, want):
        if not self.funcs or not self.in_kernel:
            return None
        name, params, ret = self.rng.choice(self.funcs)
        if not isinstance(ret, str) or not self.ok(ret, want):
            return None
        return self.call_text(scope, name, params, ret, depth)

    def call_text(self, scope, name, params, ret, depth):
        args = []
        for t in params:
            if isinstance(t, FnPtr):  # a pointer parameter: a pointer of that type
                arg = self.pointer_arg(scope, t, depth)
                if arg is None:
                    return None
                args.append(arg)
            elif isinstance(t, tuple):  # an array parameter: any kernel array of that dtype and rank
                same = [n for n, a in self.arrays.items() if a == t[1]]
                if not same:
                    return None
                args.append(self.rng.choice(same))
            else:
                args.append(self.arg_for(scope, t, depth))
        return Ex(f"{name}({', '.join(args)})", ret)

    def s_call_tuple(self, scope):
        """A func returning a tuple: unpacked, or kept and indexed later."""
        funcs = [f for f in self.funcs if isinstance(f[2], Tup)]
        if not funcs or not self.in_kernel:
            return None
        name, params, ret = self.rng.choice(funcs)
        call = self.call_text(scope, name, params, ret, 1)
        if call is None:
            return None
        if self.rng.random() < 0.5:
            names = [self.fresh() for _ in ret.elts]
            self.emit(f"{', '.join(names)} = {call.text}")
            scope.vars.update(zip(names, ret.elts))
        else:
            t = self.fresh("t")
            self.emit(f"{t} = {call.text}")
            scope.vars[t] = ret
        return True

    def arg_for(self, scope, t, depth):
        found = self.scalar_vars(scope, lambda u: u == t)
        if found and self.rng.random() < 0.5:
            return self.rng.choice(found)[0]
        ex = self.expr(scope, depth + 1)
        if ex.t == t and not ex.weak:
            return ex.text
        if ex.weak and ((t == "int64" and ex.t == "int64" and _fits_text(ex.text, "int64"))
                        or (t == "float64" and ex.t == "float64") or (t == "bool" and ex.t == "bool")):
            return ex.text
        cast = self.cast(ex, t) if isinstance(t, str) else None
        return cast.text if cast is not None else self.cast(Ex("1", "int64", True, 1), t).text

    def cond(self, scope, depth=1) -> Ex:
        if self.rng.random() < 0.4:
            ex = self.expr(scope, depth)
            if not ex.weak:
                return ex
        for _ in range(10):
            ex = self.e_compare(scope, depth, "bool")
            if ex is not None:
                return ex
        return Ex(f"({self.leaf(scope).text} == 1)", "bool")


def _fits_value(v: int, t: str) -> bool:
    lo, hi = int_range(t)
    return lo <= v <= hi


def _fits_text(text: str, t: str) -> bool:
    try:
        v = eval(text)
    except Exception:
        return True
    if isinstance(v, bool) or isinstance(v, float):
        return True
    lo, hi = int_range(t if t != "bool" else "int64") if not is_float(t) else (-(1 << 64), 1 << 64)
    return lo <= v <= hi


# (weight, feature or None, method)
LEAF_RULES = [
    (3, None, "e_literal"), (5, None, "e_var"), (3, None, "e_element"), (1, None, "e_len"),
    (1, "tuples", "e_tuple_item"), (1, "globals", "e_global"), (0.3, "index", "e_index"),
    (0.7, "views", "e_view_reduce"),
]
EXPR_RULES = LEAF_RULES + [
    (6, None, "e_binop"), (2, None, "e_bitop"), (1, None, "e_pow"), (1, None, "e_unary"),
    (2, None, "e_compare"), (1, "boolop", "e_boolop"), (2, "ifexp", "e_ifexp"), (2, "minmax", "e_minmax"),
    (1, None, "e_abs"), (2, "conversions", "e_convert"), (1, "math", "e_math"), (1, "bit_counts", "e_bit_count"),
    (1, "numpy_math", "e_numpy"), (2, "funcs", "e_call"), (1, "tuple_runtime_index", "e_tuple_index"),
    (3, "deferred", "e_ptr_call"), (0.5, "complex", "e_complex"), (1, "py_builtins", "e_py_builtin"),
]
