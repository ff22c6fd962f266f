"""Static typing of a generated program the way docs/frontend.md defines it, independently of gpuc.

One `Typed` per (function, argument types): the type and weakness of every expression node, the
folded value of every weak (literal-only) node, the common type each operator computes in, and the
return type. Joins follow the docs: a variable assigned on only some incoming paths keeps its type
(it reads as 0 on the others); two different types make it unreadable until it is assigned again;
loop headers are joins, computed to a fixpoint. Anything the docs call a compile error raises
`Expected`; anything the reference does not model raises `Undefined` (the program is discarded).
"""

from __future__ import annotations

import ast
import math
import operator
from dataclasses import dataclass, field

from .iterables import IterableTyping
from .numpy_calls import NumpyTyping
from .py_builtins import PyBuiltinTyping
from .views import is_view, is_view_method, type_augmented, type_copy, type_method, type_view
from .numeric import (ALL_SCALARS, Arr, Expected, FnPtr, SCALARS, Tup, Undefined, common, default_type, fits, int_range, promote, promote_weak,
                      is_complex, is_float, is_int, is_scalar, part_type, signed, stores)

TRANSCENDENTAL = {"exp", "exp2", "log", "log2", "log10", "sin", "cos", "tan", "tanh", "pow", "asin", "acos",
                  "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "expm1", "log1p", "cbrt", "erf", "erfc",
                  "gamma", "lgamma", "atan2", "hypot"}
EXACT_MATH = {"sqrt": 1, "fabs": 1, "copysign": 2, "fma": 3, "fmod": 2, "radians": 1, "degrees": 1}
FLOAT_MATH = {name: 2 if name in ("pow", "atan2", "hypot") else 1 for name in TRANSCENDENTAL} | EXACT_MATH
INT_MATH = {"floor", "ceil", "trunc"}
PRED_MATH = {"isnan", "isinf", "isfinite"}
MATH_CONSTANTS = {"pi": math.pi, "e": math.e, "inf": math.inf, "nan": math.nan, "tau": math.tau}
TYPE_NAMES = {"int32": "int32", "uint32": "uint32", "int64": "int64", "uint64": "uint64", "float32": "float32",
              "float64": "float64", "bool_": "bool", "boolean": "bool", "complex64": "complex64",
              "complex128": "complex128"}
BUILTIN_TYPES = {"int": "int64", "float": "float64", "bool": "bool"}
BIT_COUNTS = {"popc", "clz", "ffs"}  # gpuc.popc(x) ...: x's type (a literal: int64); ffs gives uint32

COMPARE = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
           ast.Eq: operator.eq, ast.NotEq: operator.ne}
FOLD = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow, ast.BitAnd: operator.and_,
        ast.BitOr: operator.or_, ast.BitXor: operator.xor, ast.LShift: operator.lshift,
        ast.RShift: operator.rshift}
BITWISE = (ast.BitAnd, ast.BitOr, ast.BitXor)
SHIFTS = (ast.LShift, ast.RShift)


@dataclass(frozen=True)
class Conflict:
    types: frozenset


class _Unknown(Exception):
    """Inside a loop's fixpoint iteration: a variable whose type is not known yet."""


@dataclass
class Typed:
    name: str
    argtypes: tuple
    types: dict = field(default_factory=dict)      # id(node) -> (type, weak)
    consts: dict = field(default_factory=dict)     # id(node) -> Python value of a weak node
    optype: dict = field(default_factory=dict)     # id(node) -> type an operator computes in (list for Compare)
    inexact: set = field(default_factory=set)      # id(Assign) storing a transcendental result
    copies: dict = field(default_factory=dict)     # (id(For), n) -> [(target, body)] of an unrolled loop
    ret: object = None


def join(envs):
    envs = [e for e in envs if e is not None]
    if not envs:
        return None
    out = {}
    for name in {n for e in envs for n in e}:
        found = set()
        for e in envs:
            state = e.get(name)
            if isinstance(state, Conflict):
                found |= state.types
            elif state is not None:
                found.add(state)
        out[name] = next(iter(found)) if len(found) == 1 else unify(found)
    return out


def unify(types):
    """Numba's unification of the types a variable has on joining paths (docs/frontend.md "Joins"): scalars
    promote as NumPy promotes strong types, tuples element by element; anything else is a Conflict."""
    types = list(set(types))
    if len(types) == 1:
        return types[0]
    if all(is_scalar(t) for t in types):
        result = types[0]
        for t in types[1:]:
            result = promote(result, t)
        return result
    if all(isinstance(t, Tup) for t in types) and len({len(t.elts) for t in types}) == 1:
        elements = [unify({t.elts[k] for t in types}) for k in range(len(types[0].elts))]
        if not any(isinstance(e, Conflict) for e in elements):
            return Tup(tuple(elements))
    return Conflict(frozenset(types))


def strong(t, weak, value):
    """The type a value gets when it is stored in a variable or passed on: weak literals become int64/float64/bool."""
    if not weak:
        return t
    t = default_type(value)
    if not fits(value, t):
        raise Expected("literal", f"{value!r} does not fit {t}")
    return t


class Typer(IterableTyping, NumpyTyping, PyBuiltinTyping):
    def __init__(self, program, fdef: ast.FunctionDef, argtypes: tuple) -> None:
        self.program, self.fdef = program, fdef
        self.typed = Typed(fdef.name, argtypes)
        self.returns: list = []
        self.loops: list = []
        self.tolerant = False
        self.store_rhs = None

    # -- statements ---------------------------------------------------------------------------
    def run(self) -> Typed:
        params = [a.arg for a in self.fdef.args.args]
        if len(params) != len(self.typed.argtypes):
            raise Expected("arity", self.fdef.name)
        end = self.block(self.fdef.body, dict(zip(params, self.typed.argtypes)))
        valued = [r for r in self.returns if r[0] is not None]
        if valued and (end is not None or len(valued) != len(self.returns)):
            raise Expected("missing return", self.fdef.name)
        strong_types = {t for t, weak, _ in valued if not weak}
        if strong_types:
            ret = unify(strong_types)  # several return types unify as a join's do (docs/frontend.md)
            if isinstance(ret, Conflict):
                raise Expected("returns", f"{self.fdef.name}: {sorted(map(str, strong_types))}")
            for t, weak, value in valued:  # weak literals promote it as NEP 50 says (1.5 makes int64 float64)
                if weak and is_scalar(ret):
                    ret = promote_weak(value, ret)
            for t, weak, value in valued:
                if weak and not (is_scalar(ret) and fits(value, ret)):
                    raise Expected("literal", f"return {value!r} in a function returning {ret}")
        elif valued:
            kinds = {default_type(v) for _, _, v in valued}
            if len(kinds) > 1:
                raise Undefined("only literal returns of different kinds")
            ret = strong(*valued[0])
        else:
            ret = None
        declared = self.program.annotated_ret(self.fdef.name)
        if declared in ALL_SCALARS and ret in ALL_SCALARS:
            ret = declared  # a number return annotation converts the value returned (docs/frontend.md)
        if declared is not None and ret != declared:
            raise Undefined(f"{self.fdef.name} returns {ret}, annotated {declared}")  # not modelled
        self.typed.ret = ret
        return self.typed

    def block(self, stmts, env):
        for s in stmts:
            if env is None:
                raise Undefined("unreachable statement")
            handler = getattr(self, "s_" + type(s).__name__, None)
            if handler is None:
                raise Undefined(f"statement {type(s).__name__}")
            try:
                env = handler(s, env)
            except _Unknown:
                if not self.tolerant:
                    raise
            except Expected:
                # gpuc types a loop's body again until its header settles: an error in a round before that
                # (a variable with its entry's type only) is skipped like an unknown read, and raised by
                # the final round if it stays one (docs/frontend.md, loop headers)
                if not self.tolerant:
                    raise
        return env

    def s_Pass(self, s, env):
        return env

    def s_Expr(self, s, env):
        if isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
            return env
        self.expr(s.value, env)
        return env

    def s_Assign(self, s, env):
        self.store_rhs = s if any(isinstance(t, ast.Subscript) for t in s.targets) and len(s.targets) == 1 else None
        t, weak = self.expr(s.value, env)
        self.store_rhs = None
        for target in s.targets:
            self.bind(target, t, weak, self.typed.consts.get(id(s.value)), env, s.value)
        return env

    def s_AnnAssign(self, s, env):
        want = self.type_of(s.annotation)
        t, weak = self.expr(s.value, env)
        if not is_scalar(t) or not isinstance(s.target, ast.Name):
            raise Undefined("annotated non-scalar")
        if weak and not stores(self.typed.consts[id(s.value)], want):  # converted as a store converts it
            raise Expected("literal", f"{self.typed.consts[id(s.value)]!r} does not fit {want}")
        env[s.target.id] = want
        return env

    def s_AugAssign(self, s, env):
        target = s.target
        if isinstance(target, ast.Name):
            cur = self.read(target.id, env)
            self.typed.types[id(target)] = (cur, False)
            result = self.binop(s, s.op, (cur, False, None), self.operand(s.value, env), s.value)
            env[target.id] = result
        elif isinstance(target, ast.Subscript):
            elem = self.subscript(target, env)
            if isinstance(elem, Arr):  # `view op= x` (support.views)
                type_augmented(self, s, elem, env)
                return env
            result = self.binop(s, s.op, (elem, False, None), self.operand(s.value, env), s.value)
            if not is_scalar(result):
                raise Undefined("augmented store of a non-scalar")
            if is_complex(result) and not is_complex(elem):
                raise Expected("complex store", f"{elem} array element {type(s.op).__name__}= a complex value")
        else:
            raise Undefined("augmented assignment target")
        return env

    def bind(self, target, t, weak, value, env, value_node):
        if isinstance(target, ast.Name):
            env[target.id] = strong(t, weak, value)
        elif isinstance(target, ast.Subscript):
            elem = self.subscript(target, env)
            if isinstance(elem, Arr):  # a copy into a view
                type_copy(elem, t, weak, value)
                return
            if not is_scalar(t):
                raise Expected("store", "storing a non-scalar in an array")
            if is_complex(t) and not is_complex(elem):
                raise Expected("complex store", f"storing a {t} in a {elem} array")
            if weak and not stores(value, elem):
                raise Expected("literal", f"{value!r} stored in a {elem} array")
        elif isinstance(target, ast.Tuple):
            if not isinstance(t, Tup) or len(t.elts) != len(target.elts):
                raise Expected("unpack", "tuple unpacking needs a tuple of as many values")
            for sub, et in zip(target.elts, t.elts):
                self.bind(sub, et, False, None, env, None)
        else:
            raise Undefined("assignment target")

    def s_If(self, s, env):
        try:
            self.condition(s.test, env)
        except _Unknown:  # a test reading what a later round types: the branches are typed all the same
            if not self.tolerant:
                raise
        then = self.block(s.body, dict(env))
        other = self.block(s.orelse, dict(env))
        return join([then, other])

    def s_Return(self, s, env):
        if s.value is None:
            self.returns.append((None, False, None))
        else:
            t, weak = self.expr(s.value, env)
            if isinstance(t, Arr):
                raise Expected("return array")
            self.returns.append((t, weak, self.typed.consts.get(id(s.value))))
        return None

    def s_Break(self, s, env):
        self.loops[-1][0].append(dict(env))
        return None

    def s_Continue(self, s, env):
        self.loops[-1][1].append(dict(env))
        return None

    def s_While(self, s, env):
        if s.orelse:
            raise Undefined("while-else")

        def body(h):
            self.condition(s.test, h)
            return self.block(s.body, h)
        forever = isinstance(s.test, ast.Constant) and bool(s.test.value)  # `while True`: left by break only
        return self.loop(env, body, forever)

    def s_For(self, s, env):
        call = s.iter
        if (s.orelse or not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name)
                or call.func.id != "range" or not 1 <= len(call.args) <= 3 or not isinstance(s.target, ast.Name)):
            return self.for_each(s, env)  # arrays, tuples, enumerate, zip (support.iterables)
        operands = []
        for a in call.args:
            t, weak = self.expr(a, env)
            if not (is_int(t) or (weak and isinstance(self.typed.consts[id(a)], int)
                                  and not isinstance(self.typed.consts[id(a)], bool))):
                raise Undefined(f"range over {t}")
            operands.append((t, weak, self.typed.consts.get(id(a))))
        loop_t = self.range_type(operands)
        self.typed.optype[id(s)] = loop_t

        def body(h):
            h[s.target.id] = loop_t
            return self.block(s.body, h)
        return self.loop(env, body)

    def range_type(self, operands):
        """The loop variable's type and the docs' rules for literal range arguments."""
        padded = [(None, True, 0)] + operands if len(operands) == 1 else list(operands)
        start, stop, step = padded + [(None, True, 1)] * (3 - len(padded))
        typed = [o for o in (start, stop) if o[0] is not None] + ([step] if not step[1] else [])
        loop_t = common(typed, check=False) or "int64"
        if not is_int(loop_t):
            if loop_t == "bool":
                raise Undefined("range over bools")
            raise Expected("range types", f"range arguments with no common integer type ({loop_t})")
        lo, hi = int_range(loop_t)
        if step[1] and step[2] == 0:
            raise Expected("range step", "a literal step of 0")
        if step[1] and not (-hi if not signed(loop_t) else lo) <= step[2] <= hi:
            raise Expected("range literal", f"step {step[2]} for a {loop_t} loop")
        if start[1] and start[0] is not None and not lo <= start[2] <= hi:
            raise Expected("range literal", f"start {start[2]} for a {loop_t} loop")
        if stop[1]:
            up = step[2] > 0 if step[1] else None
            value = stop[2]
            if up is None and not lo - 1 <= value <= hi + 1:
                raise Undefined("a stop literal beyond the type with a runtime step")  # direction unknown
            if (up and value > hi + 1) or (up is False and value < lo - 1):
                raise Expected("range literal", f"stop {value} for a {loop_t} loop")
        return loop_t

    def loop(self, env, body, forever=False):
        """Type a loop to the fixpoint of its header; the environment after it joins the header's
        exit (none for `while True`) and the breaks."""
        header = dict(env)
        saved = self.tolerant
        try:
            for _ in range(64):  # types only move towards Conflict: the header settles
                self.tolerant = True
                self.loops.append(([], []))
                try:
                    end = body(dict(header))
                except _Unknown:  # the condition reads a variable not typed yet: this round stops
                    end = None
                _, continues = self.loops.pop()
                new = join([header, end, *continues])  # the header only grows: it settles
                if new == header:
                    break
                header = new
        finally:
            self.tolerant = saved
        self.loops.append(([], []))
        end = body(dict(header))
        breaks, continues = self.loops.pop()
        header = join([env, end, *continues])
        return join(breaks if forever else [header, *breaks])

    @staticmethod
    def join_envs(envs):
        return join(envs)

    def condition(self, node, env):
        t, _ = self.expr(node, env)
        if not is_scalar(t):
            raise Expected("condition", f"{t} as a condition")

    def read(self, name, env):
        state = env.get(name)
        if state is None or isinstance(state, Conflict):
            if self.tolerant:
                raise _Unknown(name)
            if state is None:
                raise Expected("unassigned", name)
            raise Expected("conflict", f"{name}: {sorted(map(str, state.types))}")
        return state

    def type_of(self, node):
        if isinstance(node, ast.Name) and node.id in BUILTIN_TYPES:
            return BUILTIN_TYPES[node.id]
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("gpuc", "np")
                and node.attr in TYPE_NAMES):
            return TYPE_NAMES[node.attr]
        raise Undefined(f"annotation {ast.dump(node)}")

    # -- expressions --------------------------------------------------------------------------
    def expr(self, node, env):
        handler = getattr(self, "e_" + type(node).__name__, None)
        if handler is None:
            raise Undefined(f"expression {type(node).__name__}")
        saved = self.store_rhs
        if saved is not None and node is not saved.value:
            self.store_rhs = None  # only the stored value itself may be inexact, not its operands
        try:
            t, weak = handler(node, env)
        finally:
            self.store_rhs = saved
        self.typed.types[id(node)] = (t, weak)
        return t, weak

    def operand(self, node, env):
        t, weak = self.expr(node, env)
        if not is_scalar(t):  # complex values are scalars too: support/complexes.py
            raise Undefined(f"{t} as an operand")
        return t, weak, self.typed.consts.get(id(node))

    def weak(self, node, value):
        self.typed.consts[id(node)] = value
        return default_type(value), True

    def e_Constant(self, node, env):
        if not isinstance(node.value, (bool, int, float)):
            raise Undefined("constant")
        return self.weak(node, node.value)

    def e_Name(self, node, env):
        if node.id not in env and node.id in self.program.globals:
            t, weak, value = self.program.globals[node.id]
            if weak:
                return self.weak(node, value)
            self.typed.consts[id(node)] = value  # a strong constant: evaluated as its value
            return t, False
        return self.read(node.id, env), False

    def e_BinOp(self, node, env):
        left, right = self.operand(node.left, env), self.operand(node.right, env)
        if left[1] and right[1]:
            return self.fold_binop(node, node.op, left, right)
        return self.binop(node, node.op, left, right, node.right), False

    def fold_binop(self, node, op, left, right):
        """`left op right` of two literals: a literal of Python's value (docs/frontend.md, NEP 50)."""
        lv, rv = left[2], right[2]
        if (isinstance(op, (ast.Pow, ast.LShift)) and isinstance(rv, int) and rv > 128
                and isinstance(lv, int) and abs(lv) > 1 - isinstance(op, ast.LShift)):
            raise Expected("literal", "a literal expression far beyond 64 bits")
        try:
            value = FOLD[type(op)](lv, rv)
        except (ZeroDivisionError, ValueError, OverflowError) as exc:
            raise Undefined(f"literal arithmetic: {exc}")
        if isinstance(value, complex) or (isinstance(value, float) and isinstance(op, ast.Pow)):
            raise Undefined("literal power")
        if isinstance(value, int) and not -(1 << 63) <= value < (1 << 64):
            raise Expected("literal", f"{value} does not fit in 64 bits")
        return self.weak(node, value)

    def binop(self, node, op, left, right, right_node):
        from .complexes import type_binop
        complex_type = type_binop(self, node, op, left, right)
        if complex_type is not None:
            return complex_type
        c = common([left, right])
        self.typed.optype[id(node)] = c
        if isinstance(op, ast.Div):
            return "float64" if not is_float(c) else c
        if isinstance(op, BITWISE + SHIFTS):
            if is_float(c):
                raise Expected("bitwise float", f"{type(op).__name__} on {c}")
            if c == "bool" and isinstance(op, SHIFTS):
                raise Undefined("shift of bools")
            return c
        if isinstance(op, ast.Pow):
            if right[1] and isinstance(right[2], int) and right[2] < 0 and not is_float(c):
                raise Expected("negative power")
            if is_float(c):
                self.inexact_here("float power")
        return "int64" if c == "bool" else c

    def inexact_here(self, what):
        if self.store_rhs is None:
            raise Undefined(f"{what} used other than as the value of an array store")
        self.typed.inexact.add(id(self.store_rhs))

    def e_UnaryOp(self, node, env):
        t, weak, value = self.operand(node.operand, env)
        if isinstance(node.op, ast.Not):
            if weak:
                return self.weak(node, not value)
            return "bool", False
        if weak and isinstance(node.op, (ast.USub, ast.UAdd)):
            return self.weak(node, -value if isinstance(node.op, ast.USub) else +value)
        if weak:
            raise Undefined("~ on a literal")
        if isinstance(node.op, ast.Invert):
            if is_float(t):
                raise Expected("bitwise float", "~ on a float")
            return t, False
        if t == "bool":
            raise Undefined("unary minus/plus on bool")
        return t, False

    def e_Compare(self, node, env):
        operands = [self.operand(n, env) for n in [node.left, *node.comparators]]
        if any(is_complex(t) for t, _, _ in operands):
            raise Undefined("a comparison of complex numbers")  # not generated
        if all(w for _, w, _ in operands):  # literals only: Python's answer, a weak bool
            values = [v for _, _, v in operands]
            return self.weak(node, all(COMPARE[type(op)](a, b) for op, a, b in zip(node.ops, values, values[1:])))
        types = []
        for a, b in zip(operands, operands[1:]):
            try:
                types.append(common([a, b]))
            except Expected:
                types.append(None)  # a literal beyond the integer type's range compares exactly (docs)
        self.typed.optype[id(node)] = types
        return "bool", False

    def e_BoolOp(self, node, env):
        operands = [self.operand(n, env) for n in node.values]
        if all(w for _, w, _ in operands):  # literals only: Python's operand, a weak literal
            stop = isinstance(node.op, ast.Or)
            chosen = next((v for _, _, v in operands[:-1] if bool(v) == stop), operands[-1][2])
            return self.weak(node, chosen)
        c = common(operands)
        self.typed.optype[id(node)] = c
        return c, False

    def e_IfExp(self, node, env):
        self.condition(node.test, env)
        ta, tb = self.expr(node.body, env)[0], self.expr(node.orelse, env)[0]
        if isinstance(ta, (Arr, FnPtr)) or isinstance(tb, (Arr, FnPtr)):
            if ta != tb:
                raise Expected("conflict", f"conditional expression of {ta} and {tb}")
            self.typed.optype[id(node)] = ta
            return ta, False
        a, b = self.operand(node.body, env), self.operand(node.orelse, env)
        if a[1] and b[1]:
            raise Undefined("literal-only conditional expression")
        c = common([a, b])
        self.typed.optype[id(node)] = c
        return c, False

    def e_Tuple(self, node, env):
        elts = []
        for e in node.elts:
            t, weak = self.expr(e, env)
            if isinstance(t, Arr):
                raise Undefined("array in a tuple")
            elts.append(strong(t, weak, self.typed.consts.get(id(e))))
        return Tup(tuple(elts)), False

    def e_Attribute(self, node, env):
        base = node.value
        if isinstance(base, ast.Name) and base.id == "math" and node.attr in MATH_CONSTANTS:
            return self.weak(node, MATH_CONSTANTS[node.attr])
        t, _ = self.expr(base, env)
        if isinstance(t, Arr):
            if node.attr == "shape":
                return Tup(("int64",) * t.ndim), False
            if node.attr in ("ndim", "size"):
                return "int64", False
        if is_complex(t) and node.attr in ("real", "imag"):
            return part_type(t), False
        raise Undefined(f"attribute {node.attr}")

    def e_Subscript(self, node, env):
        t = self.subscript(node, env)
        return t, False

    def subscript(self, node, env):
        if is_view(node):
            return type_view(self, node, env)
        base, _ = self.expr(node.value, env)
        if isinstance(base, Tup):
            t, weak = self.expr(node.slice, env)
            value = self.typed.consts.get(id(node.slice))
            if not weak or not isinstance(value, int) or isinstance(value, bool):
                return self.tuple_index(node, base, t, weak, value)
            if not -len(base.elts) <= value < len(base.elts):
                raise Expected("tuple index", "out of range")
            return base.elts[value]
        if not isinstance(base, Arr):
            raise Expected("index scalar", f"indexing a {base}")
        index = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if len(index) < base.ndim:  # `m[i]` of a 2-D array: a row, a view (docs: Views)
            return type_view(self, node, env)
        if len(index) != base.ndim:
            raise Expected("index count")
        for i in index:
            t, weak = self.expr(i, env)
            if weak and isinstance(self.typed.consts[id(i)], int) and not fits(self.typed.consts[id(i)], "int64"):
                raise Expected("literal", "an index literal beyond int64")
            if is_float(t):
                raise Expected("float index")
            if not is_int(t):
                raise Undefined(f"index of type {t}")
        return base.dtype

    def e_Call(self, node, env):
        if node.keywords:
            raise Undefined("keyword arguments")
        f = node.func
        folded = self.fold_call(node, env)
        if folded is not None:
            return folded
        if is_view_method(node):
            return type_method(self, node, env)
        if isinstance(f, ast.Name) and f.id in env or not isinstance(f, (ast.Name, ast.Attribute)):
            return self.call_pointer(node, env)
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "gpuc" \
                and f.attr == "deferred":
            return self.deferred(node, env)
        if isinstance(f, ast.Name):
            handler = getattr(self, "c_" + f.id, None)
            if handler is not None:
                return handler(node, env)
            if f.id in self.program.funcs:
                return self.call_func(node, f.id, env)
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            if f.value.id == "math":
                return self.call_math(node, f.attr, env)
            if f.value.id == "cmath":
                from .complexes import type_cmath
                return type_cmath(self, node, f.attr, env)
            if f.attr == "conjugate" and f.value.id in env:
                from .complexes import type_conjugate
                return type_conjugate(self, node, env)
            if f.value.id == "np" and f.attr not in TYPE_NAMES:
                return self.call_numpy(node, f.attr, env)
            if f.value.id in ("gpuc", "np") and f.attr in TYPE_NAMES:
                return self.convert_call(node, TYPE_NAMES[f.attr], env)
            if f.value.id == "gpuc" and f.attr in BIT_COUNTS:
                return self.bit_count(node, f.attr, env)
            if f.value.id == "gpuc" and f.attr in ("index", "ndrange") and all(
                    isinstance(a, ast.Constant) and a.value in (0, 1, 2) for a in node.args):
                return "int64", False
        raise Undefined(f"call {ast.dump(f)}")

    def fold_call(self, node, env):
        """Python's math functions and number builtins of literals are literals (docs/frontend.md, NEP 50)."""
        f, target = node.func, None
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "math" and (
                f.attr in FLOAT_MATH or f.attr in INT_MATH or f.attr in PRED_MATH):
            target = getattr(math, f.attr)
        elif isinstance(f, ast.Name) and f.id not in env and f.id not in self.program.funcs:
            target = {"abs": abs, "min": min, "max": max, "int": int, "float": float, "bool": bool}.get(f.id)
            if f.id == "round" and len(node.args) == 1:
                target = round
        if target is None or not node.args:
            return None
        operands = [self.expr(a, env) for a in node.args]
        if not all(weak for _, weak in operands):
            return None
        try:
            value = target(*(self.typed.consts[id(a)] for a in node.args))
        except (ArithmeticError, ValueError, TypeError):
            return None
        if type(value) not in (bool, int, float):
            return None
        if type(value) is int and not -(1 << 63) <= value < (1 << 64):
            raise Expected("literal", f"{value!r} beyond 64 bits")
        return self.weak(node, value)

    def args(self, node, env):
        out = [self.operand(a, env) for a in node.args]
        return out

    def c_min(self, node, env):
        operands = self.args(node, env)
        if len(operands) < 2 or all(w for _, w, _ in operands):
            raise Undefined("min/max arity or literal-only")
        c = common(operands)
        self.typed.optype[id(node)] = c
        return c, False

    c_max = c_min

    def c_complex(self, node, env):
        from .complexes import type_call
        return type_call(self, node, env)

    def c_abs(self, node, env):
        (t, weak, value), = self.args(node, env)
        if is_complex(t):  # hypot: libm's, or libmvec's where the loop vectorizes (an ulp or two)
            from .complexes import type_abs
            return type_abs(self, t)
        if weak or t == "bool":
            raise Undefined("abs of a literal or bool")
        return t, False

    def bit_count(self, node, name, env):
        if len(node.args) != 1:
            raise Expected("arity", f"gpuc.{name}")
        t, weak, value = self.args(node, env)[0]
        if not is_int(t):
            raise Expected("bit count", f"gpuc.{name} of a {t}")
        if weak and not fits(value, "int64"):
            raise Expected("literal", f"{value!r} does not fit int64")
        self.typed.optype[id(node)] = t
        return ("uint32" if name == "ffs" else t), False

    def convert_call(self, node, to, env):
        if len(node.args) != 1:
            raise Expected("arity")
        t, weak, value = self.args(node, env)[0]
        if is_complex(t) and not is_complex(to):
            raise Expected("complex conversion", f"converting a {t} to {to}")
        if weak and is_int(to) and not isinstance(value, bool):
            lo, hi = int_range(to)
            if not (lo <= value <= hi if isinstance(value, int) else math.isfinite(value) and lo <= int(value) <= hi):
                raise Expected("literal", f"{value!r} converted to {to}")
        return to, False

    def c_int(self, node, env):
        return self.convert_call(node, "int64", env)

    def c_float(self, node, env):
        return self.convert_call(node, "float64", env)

    def c_bool(self, node, env):
        return self.convert_call(node, "bool", env)

    def c_len(self, node, env):
        t, _ = self.expr(node.args[0], env)
        if not isinstance(t, Arr):
            raise Undefined("len of a non-array")
        return "int64", False

    def call_math(self, node, name, env):
        if name in PRED_MATH:
            self.args(node, env)
            return "bool", False
        if name in INT_MATH:  # int64: a float rounded (saturating), an integer as int(x) gives it
            self.args(node, env)
            return "int64", False
        arity = FLOAT_MATH.get(name)
        if name == "log" and len(node.args) == 2:
            arity = 2  # log(x, base): CPython's log(x) / log(base) (docs/frontend.md)
        if arity is None or len(node.args) != arity:
            raise Undefined(f"math.{name}")
        if name in TRANSCENDENTAL or name == "fma":
            self.inexact_here(f"math.{name}")
        operands = self.args(node, env)
        c = common(operands, check=False)
        t = "float64" if c is None or not is_float(c) else c
        self.typed.optype[id(node)] = t
        return t, False

    def call_func(self, node, name, env):
        argtypes = []
        for a in node.args:
            t, weak = self.expr(a, env)
            argtypes.append(strong(t, weak, self.typed.consts.get(id(a))))
        callee = self.program.typed(name, tuple(argtypes))
        if callee.ret is None:
            raise Expected("no value", f"{name} returns nothing")
        return callee.ret, False


    # -- function pointers (gpuc.deferred) --------------------------------------------------------
    def deferred(self, node, env):
        """`gpuc.deferred(f, *args)` or `gpuc.deferred(f, (types...))`: a pointer to the gpuc func `f`
        specialized for the (strong) argument types; `f` is typed (compiled) here, so its errors are
        this program's errors."""
        if len(node.args) < 1:
            raise Expected("arity", "gpuc.deferred needs a function")
        target, rest = node.args[0], node.args[1:]
        if not isinstance(target, ast.Name) or target.id not in self.program.gpu_funcs or target.id in env:
            raise Expected("deferred", f"{ast.unparse(target)} is not a @gpuc.func")
        if len(rest) == 1 and isinstance(rest[0], ast.Tuple) and rest[0].elts and all(
                _is_type_name(e) for e in rest[0].elts):
            argtypes = tuple(self.type_of(e) for e in rest[0].elts)
        else:
            argtypes = []
            for a in rest:
                t, weak = self.expr(a, env)
                argtypes.append(strong(t, weak, self.typed.consts.get(id(a))))
            argtypes = tuple(argtypes)
        self.typed.optype[id(node)] = (target.id, argtypes)
        return FnPtr(argtypes, self.program.pointer_ret(target.id, argtypes)), False

    def call_pointer(self, node, env):
        """`p(args)` for a pointer `p`: the arguments take the pointer's parameter types, as in a
        direct call of its function with those types."""
        t, _ = self.expr(node.func, env)
        if not isinstance(t, FnPtr):
            raise Expected("call", f"calling a {t}")
        if len(node.args) != len(t.params):
            raise Expected("arity", f"{len(node.args)} arguments for {t}")
        for a, want in zip(node.args, t.params):  # docs: the same type, or a literal NumPy 2 converts
            at, weak = self.expr(a, env)
            value = self.typed.consts.get(id(a))
            if not weak and at != want:
                raise Expected("pointer argument", f"{at} for a {want} parameter")
            if weak and not (is_scalar(want) and (default_type(value) == want or (
                    type(value) is int and (is_float(want) or (is_int(want) and fits(value, want)))))):
                raise Undefined(f"literal {value!r} for a {want} parameter")  # not modelled
        if t.ret is None:
            raise Expected("no value", f"{t} returns nothing")
        return t.ret, False


def _is_type_name(node) -> bool:
    return (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("gpuc", "np")
            and node.attr in TYPE_NAMES) or (isinstance(node, ast.Name) and node.id in BUILTIN_TYPES)


def check_scalars(types):
    for t in types:
        if not (is_scalar(t) or isinstance(t, (Arr, Tup))):
            raise Undefined(f"argument type {t}")
