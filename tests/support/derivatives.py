"""Random derivatives, forward and reverse mode: `gpuc.derivative(f, x, *consts)`, `gpuc.jvp(f, primals,
tangents)`, `gpuc.grad(f, *args)`, `gpuc.value_and_grad(f, *args)` and `gpuc.vjp(f, primals, cotangent)`.

The reference cannot differentiate symbolically, so f's body is restricted to what dual numbers model
exactly: float arithmetic (+ - * /, denominators kept away from 0), `math.sin/cos/exp/tanh/sqrt/log`
of safe arguments, locals, a helper func called from f, an array constant read as `arr[0]`/`arr[1]`
(then no jvp or vjp: their primals are floats; grad and value_and_grad take the array as a constant)
and `if x > c` / `if x < c` on f's parameters (the derivative follows the branch taken). Each
generated f is a tree of statements and expressions that prints its source and evaluates itself on
`Dual`s in float64 (`Func.ev`). Arguments are float32 or float64 (x and the constants of one type, so
no promotion question arises); a branch test closer than a margin to a tie is undefined (the program
is regenerated), and nothing else non-differentiable (abs) is generated.

Loops (a quarter of the programs): f takes an int n (0..12, among its parameters after x; the
kernel reads it as `n = int(es[2])`, a constant of derivative, grad and value_and_grad) and runs
`for k in range(n)` (now and then `range(n - 1)`, `range(min(n, 5))`, ...), sometimes a nested `for j
in range(k)` / `range(n - k)` / ..., or a data-dependent `while a0 < c and i < 20:` moving a0 towards
c, over one or two float accumulators a0, a1 initialised from f's locals. Bodies update them with
generated expressions of f's parameters and locals, the loop variable as a float of the program's type
(`float(k)`, `gpuc.float32(k)`) and the accumulators before them: `a = a * G + H`, `a =
tanh(a * G + H)`, `a *= G`, `a -= H`, `a /= e * e + 1.0`, clamps `min(max(a, -c), c)`, where |G| <=
0.9 and |H| <= 1, so no update expands its accumulator and values and derivatives stay bounded.
Some updates run on some iterations only, under a test of the loop variable (`if k % 2 == 0:`, `if k % 3 == 0
or k % 3 == 1:`, `if k >= 2 and k < 5:`: the reverse sweep computes which way such a join was entered
from the counter, where that is sound). `if ...: break`, `continue` or `return ...` on an accumulator, a float expression or the loop
variable exit early; f's results then combine the accumulators. A comparison made on computed values
(`while` and `if` tests, min and max) within the margin of its tie, relative to the operands'
magnitudes, is undefined. jvp and vjp, whose primals are floats, differentiate `fq`, f with n passed
as a float q (`f(p0, int(q), p1)`): q's tangent must add nothing and its cotangent is 0. Loops are drawn
after everything else, so a program without them is the one the seed gave before loops existed.

The kernel stores the derivative in x; without an array constant, the jvp along random tangents and
the jvps along the other unit tangents (the Jacobian's columns); for f returning one float, grad and
value_and_grad (and f's value); without an array constant, vjp along a random cotangent (a float, or
a pair for tuple results). Now and then the grad or vjp call is made in a `@gpuc.func` the kernel
calls, and grad, value_and_grad and vjp are also called from Python. The reference for reverse mode
is one dual-number evaluation per parameter: grad[i] is the derivative along the unit tangent e_i,
vjp's cotangent[i] the cotangent-weighted sum over f's results. gpuc's forward results are a second witness, in the same
kernel: grad[i] must equal the derivative or the unit jvp in the same direction, value_and_grad's
value f's value, vjp's cotangent the cotangent-weighted sum of the unit jvps (`Case.relations`).

The same statements also make `block_kernel`, a kernel with blocks (a barrier before and after them),
launched on the CPU as one block of 3 work items on one thread and two blocks of 2 on two threads: every
item's results must equal the kernel's within a few ulp (derivatives taken inside kernels with blocks).

Nested derivatives (support.nested_derivatives, from a random stream of their own, so that a program
without them is the one the seed gave before): a fifth of the programs are followed by funcs h calling
derivative forms of f and a kernel `nested` applying derivative forms to them, checked against the
same calls made from Python and against hyper-dual numbers.

The compiled derivative may sum its terms in another order (and float32 code rounds every step), so
results are compared with a relative tolerance against the magnitude of the terms (`Dual.m`, the
derivative computed with every term's absolute value): RTOL64 = 1e-9 for float64, RTOL32 = 1e-4 for
float32 (relative to that magnitude, so cancellation does not cause false alarms). Two gpuc results
compared with each other get the tolerance of the reference value they should both equal.

    python -m support.derivatives --seed 3 --count 200     (from tests/)
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import math
import random
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from support.vectorize import item_by_item

RTOL64, RTOL32 = 1e-9, 1e-4
MARGIN = 1e-3  # relative distance of a branch test from its tie below which a program is undefined
NUM = "__number__"  # env's key for the number type expressions evaluate on: Dual, or support.nested_derivatives.Hyper


class Undefined(Exception):
    pass


@dataclass
class Dual:
    """v + d·ε; m and vm are the magnitudes (every term's absolute value) of d and v, for the tolerance."""
    v: float
    d: float
    m: float
    vm: float

    @staticmethod
    def const(v):
        return Dual(v, 0.0, 0.0, abs(v))

    def __add__(a, b):
        return Dual(a.v + b.v, a.d + b.d, a.m + b.m, a.vm + b.vm)

    def __sub__(a, b):
        return Dual(a.v - b.v, a.d - b.d, a.m + b.m, a.vm + b.vm)

    def __mul__(a, b):
        return Dual(a.v * b.v, a.d * b.v + a.v * b.d, abs(a.m * b.v) + abs(a.v * b.m) + abs(a.vm * b.m)
                    + abs(a.m * b.vm), a.vm * b.vm)

    def __truediv__(a, b):
        q = a.v / b.v
        return Dual(q, (a.d - q * b.d) / b.v, (a.m + abs(q) * b.m + a.vm * b.m / abs(b.v)) / abs(b.v)
                    + abs(a.d) * b.vm / b.v ** 2, a.vm / abs(b.v) + abs(q) * b.vm / abs(b.v))

    def chain(self, value, slope):
        return Dual(value, slope * self.d, abs(slope) * self.m + abs(self.d) * (abs(slope) + 1) * self.vm,
                    abs(value) + abs(slope) * self.vm)


def const(env, value):
    """A constant of the number type env evaluates on."""
    return env.get(NUM, Dual).const(value)


def dual_math(name, a: Dual) -> Dual:
    if name == "sin":
        return a.chain(math.sin(a.v), math.cos(a.v))
    if name == "cos":
        return a.chain(math.cos(a.v), -math.sin(a.v))
    if name == "exp":
        e = math.exp(a.v)
        return a.chain(e, e)
    if name == "tanh":
        t = math.tanh(a.v)
        return a.chain(t, 1 - t * t)
    if name == "sqrt":
        s = math.sqrt(a.v)
        return a.chain(s, 0.5 / s)
    if name == "log":
        return a.chain(math.log(a.v), 1 / a.v)
    raise AssertionError(name)


# -- expressions: source and dual evaluation ---------------------------------------------------

class Expr:
    def src(self) -> str: ...
    def ev(self, env) -> Dual: ...


@dataclass
class Var(Expr):
    name: str
    def src(self): return self.name
    def ev(self, env): return env[self.name]


@dataclass
class Lit(Expr):
    value: float
    def src(self): return repr(self.value)
    def ev(self, env): return const(env, self.value)


@dataclass
class Bin(Expr):
    op: str
    a: Expr
    b: Expr
    def src(self): return f"({self.a.src()} {self.op} {self.b.src()})"
    def ev(self, env):
        a, b = self.a.ev(env), self.b.ev(env)
        return {"+": a.__add__, "-": a.__sub__, "*": a.__mul__, "/": a.__truediv__}[self.op](b)


@dataclass
class Elem(Expr):
    """arr[i]: an element of f's array constant (strong, of the program's float type)."""
    i: int
    def src(self): return f"arr[{self.i}]"
    def ev(self, env): return const(env, env["arr"][self.i])


@dataclass
class SafeDen(Expr):
    """e * e + k (k >= 0.5): a denominator or sqrt/log argument that stays away from 0."""
    e: Expr
    k: float
    def src(self): return f"({self.e.src()} * {self.e.src()} + {self.k!r})"
    def ev(self, env):
        e = self.e.ev(env)
        return e * e + const(env, self.k)


@dataclass
class Math(Expr):
    name: str
    e: Expr
    def src(self): return f"math.{self.name}({self.e.src()})"
    def ev(self, env):
        a = self.e.ev(env)
        if self.name == "exp" and abs(a.v) > 30:
            raise Undefined("exp of a large argument")
        return dual_math(self.name, a) if isinstance(a, Dual) else a.math(self.name)


@dataclass
class Conv(Expr):
    """float(k), gpuc.float32(k), ...: an int loop variable as a float of the program's type (tangent 0)."""
    var: str
    fn: str
    def src(self): return f"{self.fn}({self.var})"
    def ev(self, env): return const(env, float(env[self.var]))


@dataclass
class MinMax(Expr):
    """min(a, b) / max(a, b): the operand chosen (Python's rule: b only when strictly smaller / larger)."""
    name: str
    a: Expr
    b: Expr
    def src(self): return f"{self.name}({self.a.src()}, {self.b.src()})"
    def ev(self, env):
        a, b = self.a.ev(env), self.b.ev(env)
        return b if compare(b, "<" if self.name == "min" else ">", a) else a


def compare(a: Dual, op: str, b: Dual) -> bool:
    """a < b or a > b on values computed by the program (in loops, from float32 arithmetic): a test within
    MARGIN of its tie, relative to the operands' magnitudes too, is undefined."""
    if abs(a.v - b.v) <= MARGIN * max(abs(a.v), abs(b.v), a.vm, b.vm, 1.0):
        raise Undefined("comparison near its tie")
    return a.v < b.v if op == "<" else a.v > b.v


def int_value(src: str, env) -> int:
    """An int expression of the program (`n`, `k + 1`, `n - k`, `min(n, 4)`, `k % 3 == 1`) on env's ints."""
    return eval(src, {"__builtins__": {}, "min": min}, {k: v for k, v in env.items() if type(v) is int})


@dataclass
class Call(Expr):
    func: "Func"
    args: list
    def src(self): return f"{self.func.name}({', '.join(a.src() for a in self.args)})"
    def ev(self, env): return self.func.ev([a.ev(env) for a in self.args])


@dataclass
class Func:
    """A @gpuc.func: its statements are tuples, run by `ev` on Duals (ints for int variables):
    ("let", name, expr), ("ret", expr or [exprs]), ("if", (a, op, b), then, else) on two float variables,
    and in loops ("for", k, stop, body) for `for k in range(stop)`, ("while", a, op, c, i, bound, body)
    for `while a < c and i < bound:`, ("when", cond, body) for an `if` without `else` whose cond is
    ("f", expr, op, c) or ("i", int source), ("aug", name, op, expr) for `name op= expr`, ("int", name,
    source), ("inc", name) for `name += 1`, ("break",) and ("continue",)."""
    name: str
    params: list
    body: list = field(default_factory=list)

    def src(self) -> str:
        lines = ["@gpuc.func", f"def {self.name}({', '.join(self.params)}):"]
        def emit(stmts, depth):
            pad = "    " * depth
            for s in stmts:
                if s[0] == "let":
                    lines.append(f"{pad}{s[1]} = {s[2].src()}")
                elif s[0] == "ret":
                    r = s[1]
                    lines.append(f"{pad}return {', '.join(e.src() for e in r) if isinstance(r, list) else r.src()}")
                elif s[0] == "if":
                    a, op, b = s[1]
                    lines.append(f"{pad}if {a} {op} {b}:")
                    emit(s[2], depth + 1)
                    lines.append(f"{pad}else:")
                    emit(s[3], depth + 1)
                elif s[0] == "for":
                    lines.append(f"{pad}for {s[1]} in range({s[2]}):")
                    emit(s[3], depth + 1)
                elif s[0] == "while":
                    _, a, op, c, i, bound, body = s
                    lines.append(f"{pad}while {a} {op} {c!r} and {i} < {bound}:")
                    emit(body, depth + 1)
                elif s[0] == "when":
                    cond = s[1]
                    test = f"{cond[1].src()} {cond[2]} {cond[3]!r}" if cond[0] == "f" else cond[1]
                    lines.append(f"{pad}if {test}:")
                    emit(s[2], depth + 1)
                elif s[0] == "aug":
                    lines.append(f"{pad}{s[1]} {s[2]}= {s[3].src()}")
                elif s[0] == "int":
                    lines.append(f"{pad}{s[1]} = {s[2]}")
                elif s[0] == "inc":
                    lines.append(f"{pad}{s[1]} += 1")
                else:  # break, continue
                    lines.append(f"{pad}{s[0]}")
        emit(self.body, 1)
        return "\n".join(lines) + "\n"

    def ev(self, args):
        env = dict(zip(self.params, args))
        env[NUM] = next((type(a) for a in args if hasattr(type(a), "const")), Dual)
        def run(stmts):  # None when the statements end, else ("ret", value), ("break",) or ("continue",)
            for s in stmts:
                if s[0] == "let":
                    env[s[1]] = s[2].ev(env)
                elif s[0] == "ret":
                    return ("ret", [e.ev(env) for e in s[1]] if isinstance(s[1], list) else s[1].ev(env))
                elif s[0] == "if":
                    a, op, b = (env[s[1][0]].v, s[1][1], env[s[1][2]].v)
                    if abs(a - b) <= MARGIN * max(abs(a), abs(b), 1.0):
                        raise Undefined("branch test near its tie")
                    r = run(s[2] if (a > b if op == ">" else a < b) else s[3])
                    if r is not None:
                        return r
                elif s[0] in ("for", "while"):
                    if s[0] == "for":
                        def steps(var=s[1], stop=int_value(s[2], env)):
                            for k in range(stop):
                                env[var] = k
                                yield
                        body = s[3]
                    else:
                        _, a, op, c, i, bound, body = s
                        def steps(a=a, op=op, c=const(env, c), i=i, bound=bound):
                            while compare(env[a], op, c) and env[i] < bound:
                                yield
                    for _ in steps():
                        r = run(body)
                        if r is not None and r[0] == "ret":
                            return r
                        if r is not None and r[0] == "break":
                            break
                elif s[0] == "when":
                    c = s[1]
                    if compare(c[1].ev(env), c[2], const(env, c[3])) if c[0] == "f" else int_value(c[1], env):
                        r = run(s[2])
                        if r is not None:
                            return r
                elif s[0] == "aug":
                    env[s[1]] = Bin(s[2], Var(s[1]), s[3]).ev(env)
                elif s[0] == "int":
                    env[s[1]] = int_value(s[2], env)
                elif s[0] == "inc":
                    env[s[1]] += 1
                else:
                    return (s[0],)
            return None
        r = run(self.body)
        assert r is not None and r[0] == "ret", "f falls off its end"
        return r[1]


# -- generation -----------------------------------------------------------------------------------

def has_var(e) -> bool:
    if isinstance(e, (Var, Elem)):
        return True
    if isinstance(e, Lit):
        return False
    if isinstance(e, Bin):
        return has_var(e.a) or has_var(e.b)
    if isinstance(e, Call):
        return any(has_var(a) for a in e.args)
    if isinstance(e, Conv):
        return True
    if isinstance(e, MinMax):
        return has_var(e.a) or has_var(e.b)
    return has_var(e.e)


MATH = ("sin", "cos", "exp", "tanh", "sqrt", "log")


class Gen:
    def __init__(self, rng: random.Random):
        self.r = rng
        self.funcs: list[Func] = []
        self.arr = False  # f takes an array constant `arr` (read as arr[0], arr[1])

    def expr(self, names, depth):
        e = self._expr(names, depth)
        if not has_var(e):  # a literal-only expression is float64 (a weak literal stored or passed becomes
            e = Bin("*", Var(self.r.choice(names)), e)  # float64), which would mix types in float32 programs
        return e

    def _expr(self, names, depth):
        r = self.r
        if depth <= 0 or r.random() < 0.25:
            if self.arr and r.random() < 0.25:
                return Elem(r.randint(0, 1))
            return Var(r.choice(names)) if r.random() < 0.8 else Lit(r.choice([0.5, 1.5, 2.0, 3.0, -1.25]))
        k = r.random()
        if k < 0.45:
            return Bin(r.choice("+-*"), self.expr(names, depth - 1), self.expr(names, depth - 1))
        if k < 0.6:
            return Bin("/", self.expr(names, depth - 1), SafeDen(self.expr(names, depth - 2), r.choice([0.5, 1.0, 2.0])))
        if k < 0.85:
            name = r.choice(MATH)
            arg = self.expr(names, depth - 1)
            if name in ("sqrt", "log"):
                arg = SafeDen(arg, r.choice([0.5, 1.0]))
            elif name == "exp":
                arg = Math("sin", arg)
            return Math(name, arg)
        if self.funcs:
            g = r.choice(self.funcs)
            return Call(g, [self.expr(names, depth - 2) for _ in g.params])
        return Var(r.choice(names))

    def func(self, name, nparams, allow_if=True, nout=1):
        r = self.r
        def result(names, depth):  # one float, or a tuple of nout floats
            return self.expr(names, depth) if nout == 1 else [self.expr(names, depth) for _ in range(nout)]
        params = [f"p{i}" for i in range(nparams)]
        f = Func(name, params + (["arr"] if self.arr else []))
        names = list(params)
        body = []
        for i in range(r.randint(0, 3)):
            body.append(("let", f"t{i}", self.expr(names, 3)))
            names.append(f"t{i}")
        if allow_if and nparams >= 2 and r.random() < 0.5:
            a, b = r.sample(params, 2)
            op = r.choice("<>")
            then = [("ret", result(names, 3))]
            other = []
            if r.random() < 0.5:
                other.append(("let", "u", self.expr(names, 3)))
                other.append(("ret", result(names + ["u"], 2)))
            else:
                other.append(("ret", result(names, 3)))
            body.append(("if", (a, op, b), then, other))
        else:
            body.append(("ret", result(names, 4)))
        f.body = body
        return f

    # -- loops: f given an int parameter n (the trip count) and accumulators carried through loops --

    def with_loops(self, f, nparams, nout, dtype):
        """f with n among its parameters (after p0) and loops inserted after its locals; f's results then
        combine the accumulators. Returns (f, n, position of n among the parameters)."""
        r = self.r
        self.nout = nout
        n = 0 if r.random() < 0.12 else r.randint(1, 12)
        npos = r.randint(1, nparams)
        params = [f"p{i}" for i in range(nparams)]
        split = next(i for i, s in enumerate(f.body) if s[0] != "let")
        names = params + [s[1] for s in f.body[:split]]
        self.conv = "gpuc.float32" if dtype is np.float32 else r.choice(["float", "gpuc.float64"])
        accs = [f"a{i}" for i in range(1 if r.random() < 0.6 else 2)]
        body = [("let", a, self.expr(names + accs[:i], 2)) for i, a in enumerate(accs)]
        body += self.loop(names, accs, 0)
        if r.random() < 0.2:
            body += self.loop(names, accs, 0)
        body = f.body[:split] + body + [self._use(s, accs) for s in f.body[split:]]
        return Func(f.name, params[:npos] + ["n"] + params[npos:] + (["arr"] if self.arr else []), body), n, npos

    def loop(self, names, accs, depth):
        """`for k in range(n)` (depth 0) or an inner loop over j, now and then a data-dependent `while`
        bounded by a counter; bodies update the accumulators, may break, continue or return."""
        r = self.r
        if r.random() < 0.15 + 0.15 * depth:
            return self.while_loop(names, accs, depth)
        var = "kj"[depth]
        if depth == 0:
            stop = "n" if r.random() < 0.8 else r.choice(["n - 1", "min(n, 5)", "n + 1"])
        else:
            stop = r.choice(["k", "n", "3", "k + 1", "n - k", "min(n, 4)"])
        body, inner = [], list(names)
        if r.random() < 0.75:  # the loop variable as a float of the program's type
            kf = Conv(var, self.conv)
            body.append(("let", f"{var}f", kf if r.random() < 0.5 else Bin("*", kf, Lit(r.choice([0.25, 0.5, -0.75])))))
            inner.append(f"{var}f")
        chunks = [[self.update(inner, accs)] for _ in range(r.randint(1, 2))]
        if depth == 0 and r.random() < 0.3:
            chunks.insert(r.randint(0, len(chunks)), self.loop(inner, accs, depth + 1))
        if r.random() < 0.3:  # an update on some iterations only, by a test of the counter (`or`: two ways in)
            test = r.choice([f"{var} % 2 == 0", f"{var} % 3 == 0 or {var} % 3 == 1", f"{var} == 1 or {var} >= 4",
                             f"{var} >= 2 and {var} < 5"])
            chunks.insert(r.randint(0, len(chunks)), [("when", ("i", test), [self.update(inner, accs)])])
        if r.random() < 0.35:
            chunks.insert(r.randint(0, len(chunks)), [self.exit([var, "n"], inner, accs)])
        return [("for", var, stop, body + [s for c in chunks for s in c])]

    def while_loop(self, names, accs, depth):
        """`i = 0; while a < c and i < 20: i += 1; a += 0.3 + ...` (moving a towards c) and more updates."""
        r = self.r
        a = r.choice(accs)
        up = r.random() < 0.5
        c = r.choice([0.5, 1.0, 2.0, 3.0]) * (1 if up else -1)
        step = Bin("+", Lit(0.3), Bin("*", Lit(0.25), Math("sin", self.expr(names + accs, 2))))
        body = [("inc", "i"), ("aug", a, "+" if up else "-", step)]
        for _ in range(r.randint(0, 1)):
            body.insert(r.randint(1, len(body)), self.update(names, accs))
        if r.random() < 0.25:
            body.insert(r.randint(1, len(body)), self.exit(["i", "n"] + (["k"] if depth else []), names, accs))
        return [("int", "i", "0"), ("while", a, "<" if up else ">", c, "i", r.choice([20, 10]), body)]

    def exit(self, ints, names, accs):
        """`if cond: break`, `continue` or `return ...`; cond on an accumulator or float expression, or on ints."""
        r = self.r
        k = r.random()
        if k < 0.5:
            e = Var(r.choice(accs)) if r.random() < 0.6 else self.term(names + accs)
            cond = ("f", e, r.choice("<>"), r.choice([-1.5, -0.5, 0.25, 0.5, 1.0, 2.0]))
        else:
            v = ints[0] if r.random() < 0.8 else r.choice(ints)
            cond = ("i", r.choice([f"{v} >= {r.randint(1, 6)}", f"{v} == {r.randint(0, 5)}", f"{v} % 3 == 1"]))
        k = r.random()
        if k < 0.6:
            return ("when", cond, [("break",)])
        if k < 0.85:
            return ("when", cond, [("continue",)])
        every = names + accs
        result = self.expr(every, 2) if self.nout == 1 else [self.expr(every, 2) for _ in range(self.nout)]
        return ("when", cond, [("ret", result)])

    def update(self, names, accs):
        """One update of an accumulator, contracting in it (so values and derivatives stay bounded): a_t
        depends on the accumulators before it only, through bounded terms."""
        r = self.r
        t = r.randrange(len(accs))
        a, ns = accs[t], names + accs[:t]
        k = r.random()
        if k < 0.3:
            return ("let", a, Bin("+", Bin("*", Var(a), self.factor(ns)), self.term(ns)))
        if k < 0.4:
            return ("let", a, Math("tanh", Bin("+", Bin("*", Var(a), self.factor(ns)), self.term(ns))))
        if k < 0.5:
            return ("let", a, Bin("*", Bin("+", Var(a), self.term(ns)), self.factor(ns)))
        if k < 0.6:
            return ("let", a, Bin("+", Bin("*", Math(r.choice(["sin", "tanh"]), Var(a)), Lit(r.choice([0.5, -0.75]))),
                                  self.term(ns)))
        if k < 0.7:
            return ("aug", a, "*", self.factor(ns))
        if k < 0.8:
            return ("aug", a, r.choice("+-"), self.term(ns))
        if k < 0.88:
            return ("aug", a, "/", SafeDen(self.expr(ns, 2), r.choice([1.0, 2.0])))
        if r.random() < 0.5:  # clamped
            c = r.choice([0.75, 1.5, 3.0])
            return ("let", a, MinMax("min", MinMax("max", Var(a), Lit(-c)), Lit(c)))
        step = Bin("+", Bin("*", Var(a), self.factor(ns)), self.term(ns))
        return ("let", a, MinMax(r.choice(["min", "max"]), step, Lit(r.choice([-0.5, 0.5, 1.0]))))

    def factor(self, names):
        """A multiplier of magnitude at most 0.9."""
        r = self.r
        k = r.random()
        if k < 0.2:
            return Lit(r.choice([0.5, 0.75, -0.5, 0.9]))
        e = self.expr(names, 2)
        if k < 0.45:
            return Bin("*", Lit(0.7), Math("tanh", e))
        if k < 0.65:
            return Bin("*", Math("cos", e), Lit(0.5))
        if k < 0.85:
            return Bin("/", Lit(0.75), SafeDen(e, 1.0))
        return Bin("*", Math("sin", e), Lit(-0.8))

    def term(self, names):
        """An added term of magnitude at most 1."""
        r = self.r
        k = r.random()
        e = self.expr(names, 2)
        if k < 0.5:
            return Math(r.choice(["sin", "tanh", "cos"]), e)
        if k < 0.7:
            return Bin("/", e, SafeDen(e, 1.0))
        if k < 0.85:
            return Bin("*", Lit(0.25), Math("sin", e))
        return Bin("*", Math("tanh", e), Math("cos", self.expr(names, 2)))

    def _use(self, s, accs):
        """f's results combined with the accumulators, each accumulator in one of them at least."""
        r = self.r
        if s[0] == "ret":
            es = list(s[1]) if isinstance(s[1], list) else [s[1]]
            order = r.sample(accs, len(accs))
            picks = [[order[i % len(order)]] for i in range(len(es))]
            for a in order[len(es):]:
                picks[r.randrange(len(es))].append(a)
            for i, names in enumerate(picks):
                for a in names:
                    es[i] = Bin(r.choice("+-*"), es[i], Var(a))
            return ("ret", es if isinstance(s[1], list) else es[0])
        if s[0] == "if":
            return ("if", s[1], [self._use(x, accs) for x in s[2]], [self._use(x, accs) for x in s[3]])
        return s


@dataclass
class Case:
    seed: int
    index: int
    source: str
    dtype: type
    xs: list          # f's float parameters: x (derivative's variable), then the other constants
    tangents: list    # for jvp: one per float parameter of f
    cs: list          # the array constant's two elements (passed whether f takes it or not)
    expected: list    # [(value, magnitude)] for out[...], named by `labels`
    labels: list = field(default_factory=list)     # what each out[...] holds
    relations: list = field(default_factory=list)  # (i, [(weight, j)]): out[i] = Σ weight·out[j] (gpuc vs gpuc)
    ws: list = field(default_factory=list)         # vjp's cotangent (its first nout elements)
    nout: int = 1
    arr: bool = False                               # f takes the array constant
    host: bool = False                              # also call grad/value_and_grad/vjp from Python
    host_expected: list = field(default_factory=list)  # [(value, magnitude)] for host_results(), flattened
    n: int | None = None                            # f's trip count (an int parameter), with loops
    npos: int | None = None                         # n's position among f's parameters
    nested: object = None                           # support.nested_derivatives.Nested, or None


COTANGENTS = (1.0, -0.5, 2.0, 0.75, -1.5, 0.25)


LOOPS = 0.25  # the share of programs given loops
LOOP_TRIES = 4


def generate(seed: int, index: int, attempts: int = 100) -> Case:
    from . import nested_derivatives  # which builds on this module
    for attempt in range(attempts):
        rng = random.Random(f"derivatives-{seed}-{index}-{attempt}")
        g = Gen(rng)
        if rng.random() < 0.5:
            g.funcs.append(g.func("g0", rng.randint(1, 2), allow_if=rng.random() < 0.5))
        nparams = rng.randint(1, 3)
        nout = 1 if rng.random() < 0.7 else 2  # f returns a float or a tuple of two floats
        g.arr = rng.random() < 0.3  # then f has an array constant: derivative, grad and value_and_grad apply
        f = g.func("f", nparams, nout=nout)
        dtype = rng.choice([np.float64, np.float32])
        xs = [float(dtype(rng.uniform(-2.0, 2.0))) for _ in range(nparams)]
        tangents = [float(dtype(rng.choice([1.0, 0.5, -2.0, 0.0, 0.25]))) for _ in range(nparams)]
        cs = [float(dtype(rng.uniform(-2.0, 2.0))) for _ in range(2)]
        ws = [rng.choice(COTANGENTS) for _ in range(2)]  # exact in float32
        via_func = rng.random() < 0.3  # the reverse call made in a @gpuc.func the kernel calls
        host = rng.random() < 0.15     # and made from Python as well
        built = _build(f, nparams, nout, g.arr, xs, tangents, cs, ws, via_func)
        if built is None:
            continue
        n = npos = None
        # loops are drawn after everything above, so a program without them is the one the seed always gave;
        # with them, it is that program with n among f's parameters, loops before its results, and results
        # combining the loops' accumulators
        if rng.random() < LOOPS:
            for _ in range(LOOP_TRIES):
                lf, ln, lpos = g.with_loops(f, nparams, nout, dtype)
                lbuilt = _build(lf, nparams, nout, g.arr, xs, tangents, cs, ws, via_func, ln, lpos)
                if lbuilt is not None:
                    f, built, n, npos = lf, lbuilt, ln, lpos
                    break
        kernel, expected, labels, relations, cols = built
        host_expected = _host_expected(cols, nout, g.arr, ws, npos is not None) if host else []
        source = ("import math\n\nimport gpuc\n\n\n" + "".join(h.src() + "\n\n" for h in g.funcs)
                  + f.src() + "\n\n" + kernel)
        # nested derivatives come from a random stream of their own, so the program above is the one the
        # seed always gave; with them, it is that program followed by funcs h and a kernel `nested`
        base = nested_derivatives.Base(f, nparams, nout, g.arr, dtype, n, npos, cs, tangents, ws)
        nested = nested_derivatives.draw(seed, index, base, g.funcs, xs, source + "\n\n")
        if nested is not None:
            source += "\n\n" + nested.src()
        return Case(seed, index, source, dtype, xs, tangents, cs, expected, labels, relations, ws[:nout], nout,
                    g.arr, host, host_expected, n, npos, nested)
    raise RuntimeError(f"no defined derivative program for seed {seed} index {index}")


def _build(f, nparams, nout, arr, xs, tangents, cs, ws, via_func, n=None, npos=None):
    """f evaluated on Duals and the kernel calling it: (kernel, expected, labels, relations, Jacobian
    columns), or None where f is undefined at xs or its results are not finite."""
    def args(floats):  # f's arguments: the floats, n at its position, the array constant
        if npos is not None:
            floats.insert(npos, n)
        return floats + ([cs] if arr else [])
    try:
        # one column of f's Jacobian per parameter (unit tangent); the first is derivative's
        cols = [f.ev(args([Dual(x, 1.0, 1.0, abs(x)) if k == i else Dual.const(x) for k, x in enumerate(xs)]))
                for i in range(nparams)]
        j = f.ev(args([Dual(x, t, abs(t), abs(x)) for x, t in zip(xs, tangents)]))
    except (Undefined, ZeroDivisionError, ValueError, OverflowError):
        return None
    cols = [c if nout == 2 else [c] for c in cols]
    js = j if nout == 2 else [j]
    kernel, expected, labels, relations = _kernel(f, nparams, nout, arr, via_func, cols, js, ws, npos)
    if not all(math.isfinite(v) and abs(v) < 1e30 for pair in expected for v in pair):
        return None
    return kernel, expected, labels, relations, cols


def _vjp_entry(col, ws):
    """The cotangent ws pulled back through one Jacobian column: Σ w·d, magnitude Σ |w|·m."""
    return (sum(w * x.d for w, x in zip(ws, col)), sum(abs(w) * x.m for w, x in zip(ws, col)))


def _kernel(f, nparams, nout, arr, via_func, cols, js, ws, npos=None):
    """The kernel's source, what each out[...] must hold, and the relations between out[...]s.

    Forward mode: derivative in xs[0], jvp along ts. Reverse mode: grad and value_and_grad (f returning
    one float; the array constant passed, a constant) and vjp along the cotangent ws (no array
    constant: vjp's primals are floats). gpuc's own forward results are the second witness: grad[i]
    equals the jvp with the unit tangent e_i (derivative for i = 0), vjp's cotangent[i] the
    ws-weighted sum of those jvps.

    With loops (npos not None) f takes the int n at position npos, read in the kernel as `n =
    int(es[2])`: a constant of derivative, grad and value_and_grad. jvp and vjp, whose primals are
    floats, differentiate `fq`, f with n passed as a float q (`f(..., int(q), ...)`): q's primal is
    es[2], its tangent es[1] along ts (it must add nothing) and es[0] along the unit tangents, and its
    cotangent must be 0."""
    lines, expected, labels, relations, helper = [], [], [], [], []

    def store(src, want, label):
        lines.append(f"    out[{len(expected)}] = {src}")
        expected.append(want)
        labels.append(label)
        return len(expected) - 1

    def fargs(floats, n="n", a="cs"):  # f's arguments in order
        out = list(floats)
        if npos is not None:
            out.insert(npos, n)
        return out + ([a] if arr else [])

    def tup(items):
        return ", ".join(items) + ("," if len(items) == 1 else "")

    if npos is not None:
        lines.append("    n = int(es[2])")
    names = [f"xs[{i}]" for i in range(nparams)]
    ps = [f"p{i}" for i in range(nparams)]
    looped = npos is not None
    jf, q = ("fq", ["es[2]"]) if looped else ("f", [])  # what jvp and vjp differentiate, q's primal
    primals = tup(names + q)
    tans = tup([f"ts[{i}]" for i in range(nparams)] + (["es[1]"] if looped else []))
    deriv = f"gpuc.derivative(f, {', '.join(fargs(names))})"
    if nout == 1:
        column0 = [store(deriv, (cols[0][0].d, cols[0][0].m), "derivative")]
    else:
        lines.append(f"    d0, d1 = {deriv}")
        column0 = [store(f"d{k}", (cols[0][k].d, cols[0][k].m), f"derivative[{k}]") for k in range(2)]
    values = None
    if not arr:  # jvp's primals are all active: floats only
        lines.append(f"    v, d = gpuc.jvp({jf}, ({primals}), ({tans}))")
        if nout == 1:
            values = [store("v", (js[0].v, js[0].vm), "jvp value")]
            store("d", (js[0].d, js[0].m), "jvp tangent")
        else:
            values = [store(f"v[{k}]", (js[k].v, js[k].vm), f"jvp value[{k}]") for k in range(2)]
            for k in range(2):
                store(f"d[{k}]", (js[k].d, js[k].m), f"jvp tangent[{k}]")
    # the Jacobian's columns computed by gpuc in forward mode: derivative, then unit-tangent jvps
    columns = [column0]
    if not arr:
        for i in range(1, nparams):
            unit = tup(["es[1]" if k == i else "es[0]" for k in range(nparams)] + (["es[0]"] if looped else []))
            lines.append(f"    v{i}, e{i} = gpuc.jvp({jf}, ({primals}), ({unit}))")
            columns.append([store(f"e{i}" if nout == 1 else f"e{i}[{k}]", (cols[i][k].d, cols[i][k].m),
                                  f"jvp e{i}" if nout == 1 else f"jvp e{i}[{k}]") for k in range(nout)])
    args = ", ".join(fargs(names))
    params = ", ".join(fargs(ps, "n", "arr"))
    if nout == 1:
        if via_func:
            helper = ["@gpuc.func", f"def rf({params}):", f"    return gpuc.grad(f, {params})"]
            lines.append(f"    g = rf({args})")
        else:
            lines.append(f"    g = gpuc.grad(f, {args})")
        for i in range(nparams):
            k = store(f"g[{i}]", (cols[i][0].d, cols[i][0].m), f"grad[{i}]")
            if i < len(columns):
                relations.append((k, [(1.0, columns[i][0])]))
        lines.append(f"    vg, gg = gpuc.value_and_grad(f, {args})")
        value = store("vg", (cols[0][0].v, cols[0][0].vm), "value_and_grad value")
        relations.append((value, [(1.0, store(f"f({args})", (cols[0][0].v, cols[0][0].vm), "f"))]))
        for i in range(nparams):
            store(f"gg[{i}]", (cols[i][0].d, cols[i][0].m), f"value_and_grad grad[{i}]")
    if not arr:
        cot = "ws[0]" if nout == 1 else "(ws[0], ws[1])"
        if via_func and nout == 2:
            vps = ps + (["q"] if looped else [])
            helper = ["@gpuc.func", f"def rf({', '.join(vps)}, w0, w1):",
                      f"    return gpuc.vjp({jf}, ({tup(vps)}), (w0, w1))"]
            lines.append(f"    vv, ct = rf({', '.join(names + q)}, ws[0], ws[1])")
        else:
            lines.append(f"    vv, ct = gpuc.vjp({jf}, ({primals}), {cot})")
        if nout == 1:
            relations.append((store("vv", (cols[0][0].v, cols[0][0].vm), "vjp value"), [(1.0, values[0])]))
        else:
            for k in range(2):
                relations.append((store(f"vv[{k}]", (cols[0][k].v, cols[0][k].vm), f"vjp value[{k}]"),
                                  [(1.0, values[k])]))
        for i in range(nparams):
            k = store(f"ct[{i}]", _vjp_entry(cols[i], ws[:nout]), f"vjp cotangent[{i}]")
            relations.append((k, [(w, j) for w, j in zip(ws, columns[i])]))
        if looped:
            store(f"ct[{nparams}]", (0.0, 0.0), "vjp cotangent[q]")
            qf = ["@gpuc.func", f"def fq({', '.join(ps + ['q'])}):", f"    return f({', '.join(fargs(ps, 'int(q)'))})"]
            helper = qf + ([""] * 2 + helper if helper else [])
    source = ("\n".join(helper) + "\n\n\n" if helper else "") + "@gpuc.kernel\ndef kernel(out, xs, ts, cs, ws, es):\n"
    source += "\n".join(lines) + "\n"
    # the same derivatives in a kernel with blocks, every work item computing them between barriers
    block = "\n".join(["    gpuc.barrier()", *lines, "    gpuc.barrier()"])
    return source + f"\n\n@gpuc.kernel\ndef block_kernel(out, xs, ts, cs, ws, es):\n{block}\n", expected, labels, relations


def _host_expected(cols, nout, arr, ws, looped=False):
    """What host_results() returns, flattened: grad, value_and_grad (f returning one float), vjp (no array;
    of fq with loops, whose q's cotangent is 0)."""
    want = []
    if nout == 1:
        grads = [(c[0].d, c[0].m) for c in cols]
        want += grads + [(cols[0][0].v, cols[0][0].vm)] + grads
    if not arr:
        want += [(x.v, x.vm) for x in cols[0]] + [_vjp_entry(c, ws[:nout]) for c in cols]
        want += [(0.0, 0.0)] if looped else []
    return want


def host_results(case: Case, f, fq=None) -> list:
    """gpuc.grad, value_and_grad and vjp of f (of fq with loops) called from Python, their results flattened."""
    import gpuc
    xs = [case.dtype(x) for x in case.xs]
    args = xs[:case.npos] + [case.n] + xs[case.npos:] if case.npos is not None else list(xs)
    args += [np.array(case.cs, case.dtype)] if case.arr else []
    got = []
    if case.nout == 1:
        got += list(gpuc.grad(f, *args))
        value, grads = gpuc.value_and_grad(f, *args)
        got += [value, *grads]
    if not case.arr:
        primals = tuple(xs) + ((case.dtype(case.n),) if case.npos is not None else ())
        value, cts = gpuc.vjp(f if case.npos is None else fq, primals, case.ws[0] if case.nout == 1 else tuple(case.ws))
        got += ([value] if case.nout == 1 else list(value)) + list(cts)
    return got


# -- running ----------------------------------------------------------------------------------------

@dataclass
class Finding:
    case: Case
    kind: str
    detail: str

    def describe(self) -> str:
        c = self.case
        rows = f"xr = {c.nested.rows} (the nested kernel's primals), ws = {c.nested.base.ws}\n" if c.nested else ""
        return (f"== derivatives seed {c.seed} program {c.index}: {self.kind} ==\n{c.source}\n"
                f"xs = {c.xs} ts = {c.tangents} cs = {c.cs} ws = {c.ws} ({np.dtype(c.dtype).name})\n{rows}"
                f"{self.detail}\n")


def load_source(source: str, path: Path):
    """The module of a program's source, written to path and imported."""
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"gpuc_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: The launches of `block_kernel`, the kernel's statements between barriers: (n, block, threads).
BLOCK_LAUNCHES = ((3, 3, 1), (4, 2, 2))

#: The located error of a reverse sweep whose loop keeps a tape in a recursive function, on a target without
#: an allocator (SPIR-V, where other tapes are a fixed buffer per work item): what an OpenCL device lacks, not
#: a finding there.
NO_HEAP = "kept on a tape in memory allocated at run time"


def _vector_differences(out, scalar) -> list[str]:
    """Where the launches with and without vectorization across work items differ by more than a few ulp.
    These programs are made of transcendental math, which is where the documented exception lies
    (docs/targets.md, "Vector math on the CPU"): LLVM folds math calls whose arguments it can compute (a
    loop counter, once a loop is unrolled) with libm's results, an ulp or so from libmvec's, and whether it
    unrolls differs between the two compiles."""
    eps = np.finfo(out.dtype).eps
    close = np.isclose(out, scalar, rtol=8 * eps, atol=0) | (np.isnan(out) & np.isnan(scalar))
    return [f"out[{i}]: vectorized {out[i]!r}, item by item {scalar[i]!r}" for i in np.flatnonzero(~close)]


def device_limit(device: str, exc: Exception) -> str | None:
    """What `device` lacks, if `exc` is the error naming it, else None: on OpenCL the located error for a
    heap (NO_HEAP), and the MemoryError of a tape that outgrew its fixed buffer (tape.HEAPLESS_BYTES per work
    item: loops of a few hundred iterations, which nested loops over n, or a gradient's forward and reverse
    loops taped again by an outer gradient, outgrow)."""
    if device != "cpu" and type(exc).__name__ == "CompilationError" and NO_HEAP in str(exc):
        return "a heap for the tape of a loop's gradient"
    if device != "cpu" and isinstance(exc, MemoryError) and "the reverse sweep's tape of" in str(exc):
        return "room for a tape larger than the work item's buffer"
    return None


def check(case: Case, workdir: Path, device: str = "cpu", limits: Counter | None = None) -> Finding | None:
    """Run the program's kernel on `device` (and its calls from Python, on the CPU) against the reference; a
    launch refused for what the device lacks (device_limit) is counted in `limits`, not a finding."""
    module = load_source(case.source, workdir / f"deriv_{case.seed}_{case.index}.py")
    out = np.zeros(len(case.expected), case.dtype)
    xs = np.array(case.xs, case.dtype)
    ts = np.array(case.tangents, case.dtype)
    cs = np.array(case.cs, case.dtype)
    ws = np.array(case.ws + [0.0] * (2 - len(case.ws)), case.dtype)
    es = np.array([0.0, 1.0, case.n or 0], case.dtype)  # es[2]: the trip count n, with loops
    try:
        module.kernel.launch(1, out, xs, ts, cs, ws, es, device=device, threads=1)
        host = host_results(case, module.f, getattr(module, "fq", None)) if case.host and device == "cpu" else []
        if device == "cpu":  # and without vectorization across work items (support/vectorize.py)
            scalar = np.zeros_like(out)
            item_by_item(module.kernel).launch(1, scalar, xs, ts, cs, ws, es, device=device, threads=1)
            blocks = {}  # and in a kernel with blocks: one block of 3 items, two blocks of 2 on two threads
            for n, block, threads in BLOCK_LAUNCHES:
                blocks[n, block, threads] = np.zeros_like(out)
                module.block_kernel.launch(n, blocks[n, block, threads], xs, ts, cs, ws, es, block=block,
                                           threads=threads)
    except Exception as exc:  # noqa: BLE001 — every error is a finding (the program is documented) but what
        limit = device_limit(device, exc)  # the device lacks
        if limit is not None:
            if limits is not None:
                limits[limit] += 1
            return None
        return Finding(case, type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
    rtol = RTOL32 if case.dtype is np.float32 else RTOL64
    floor = 1e-30 if case.dtype is np.float64 else 1e-6 * rtol

    def tolerance(want, mag):
        return rtol * max(mag, abs(want)) + floor

    got = out.tolist()
    labels = case.labels or [""] * len(got)
    bad = [] if device != "cpu" else _vector_differences(out, scalar)
    for (n, block, threads), got_block in (blocks.items() if device == "cpu" else ()):
        bad += [f"block_kernel[{n}, block={block}, threads={threads}]: {d}"
                for d in _vector_differences(got_block, out)]
    for i, (value, (want, mag)) in enumerate(zip(got, case.expected)):
        tol = tolerance(want, mag)
        if not (abs(value - want) <= tol):
            bad.append(f"out[{i}] ({labels[i]}): got {value!r}, expected {want!r} (tolerance {tol:.3g})")
    for i, terms in case.relations:  # gpuc's reverse results against its forward ones
        other = sum(w * got[j] for w, j in terms)
        tol = tolerance(*case.expected[i])
        if not (abs(got[i] - other) <= tol):
            bad.append(f"out[{i}] ({labels[i]}) = {got[i]!r} but "
                       + " + ".join(f"{w!r}·out[{j}] ({labels[j]})" for w, j in terms)
                       + f" = {other!r} (tolerance {tol:.3g})")
    for k, (value, (want, mag)) in enumerate(zip(host, case.host_expected)):
        tol = tolerance(want, mag)
        if not (abs(value - want) <= tol):
            bad.append(f"from Python, result {k}: got {value!r}, expected {want!r} (tolerance {tol:.3g})")
    if device == "cpu" and len(host) != len(case.host_expected):
        bad.append(f"from Python: {len(host)} results, expected {len(case.host_expected)}")
    if case.nested is not None:
        from . import nested_derivatives
        try:
            bad += nested_derivatives.check(case, module, device)
        except Exception as exc:  # noqa: BLE001
            limit = device_limit(device, exc)
            if limit is None:
                return Finding(case, type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
            if limits is not None:
                limits[f"{limit} (nested)"] += 1
    return Finding(case, "mismatch", "\n".join(bad)) if bad else None


def run(seed: int, count: int, start: int = 0, tally: Counter | None = None,
        device: str = "cpu") -> tuple[list[Finding], int]:
    """The findings of programs start.. of the seed launched on `device`; `tally` counts the nested
    derivatives checked and the launches refused for what the device lacks."""
    from . import nested_derivatives
    findings = []
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(start, start + count):
            case = generate(seed, index)
            finding = check(case, Path(tmp), device, tally)
            if finding:
                findings.append(finding)
            if tally is not None and case.nested is not None:
                nested_derivatives.tally(case.nested, tally)
    return findings, count


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--nested", type=float, default=None,
                        help="the share of programs given nested derivatives (a soak of them: 1)")
    parser.add_argument("--device", default="cpu", choices=("cpu", "opencl"), help="launch the kernels here")
    ns = parser.parse_args(argv)
    if ns.nested is not None:
        from . import nested_derivatives
        nested_derivatives.NESTED = ns.nested
    t0 = time.monotonic()
    tally = Counter()
    findings, n = run(ns.seed, ns.count, ns.start, tally, ns.device)
    for f in findings:
        print(f.describe())
    for key, k in sorted(tally.items()):
        print(f"{k:5d}  {key}")
    print(f"derivatives: {n} programs, {len(findings)} findings in {time.monotonic() - t0:.0f} s")
    return 1 if findings else 0


if __name__ == "__main__":  # as the package's module, whose classes support.nested_derivatives shares
    sys.exit(importlib.import_module(__spec__.name).main())
