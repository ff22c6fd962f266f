"""Random forward-mode derivatives: `gpuc.derivative(f, x, *consts)` and `gpuc.jvp(f, primals, tangents)`.

The reference cannot differentiate symbolically, so f's body is restricted to what dual numbers model
exactly: float arithmetic (+ - * /, denominators kept away from 0), `math.sin/cos/exp/tanh/sqrt/log`
of safe arguments, locals, a helper func called from f, an array constant read as `arr[0]`/`arr[1]`
(then only `derivative`: jvp's primals are floats), and `if x > c` / `if x < c` on f's parameters
(the derivative follows the branch taken). Each generated f is an expression tree that prints its
source and evaluates itself on `Dual`s in float64. Arguments are float32 or float64 (x and the constants
of one type, so no promotion question arises); a branch test closer than a margin to a tie is
undefined (the program is regenerated), and nothing non-differentiable (abs, min, max) is generated.

The compiled derivative may sum its terms in another order (and float32 code rounds every step), so
results are compared with a relative tolerance against the magnitude of the terms (`Dual.m`, the
derivative computed with every term's absolute value): RTOL64 = 1e-9 for float64, RTOL32 = 1e-4 for
float32 (relative to that magnitude, so cancellation does not cause false alarms).

    python -m support.derivatives --seed 3 --count 200     (from tests/)
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

RTOL64, RTOL32 = 1e-9, 1e-4
MARGIN = 1e-3  # relative distance of a branch test from its tie below which a program is undefined


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
    def ev(self, env): return Dual.const(self.value)


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
    def ev(self, env): return Dual.const(env["arr"][self.i])


@dataclass
class SafeDen(Expr):
    """e * e + k (k >= 0.5): a denominator or sqrt/log argument that stays away from 0."""
    e: Expr
    k: float
    def src(self): return f"({self.e.src()} * {self.e.src()} + {self.k!r})"
    def ev(self, env):
        e = self.e.ev(env)
        return e * e + Dual.const(self.k)


@dataclass
class Math(Expr):
    name: str
    e: Expr
    def src(self): return f"math.{self.name}({self.e.src()})"
    def ev(self, env):
        a = self.e.ev(env)
        if self.name == "exp" and abs(a.v) > 30:
            raise Undefined("exp of a large argument")
        return dual_math(self.name, a)


@dataclass
class Call(Expr):
    func: "Func"
    args: list
    def src(self): return f"{self.func.name}({', '.join(a.src() for a in self.args)})"
    def ev(self, env): return self.func.ev([a.ev(env) for a in self.args])


@dataclass
class Func:
    name: str
    params: list
    body: list = field(default_factory=list)  # ("let", name, expr) | ("if", (a, op, b), then, else) | ("ret", expr)

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
                else:
                    a, op, b = s[1]
                    lines.append(f"{pad}if {a} {op} {b}:")
                    emit(s[2], depth + 1)
                    lines.append(f"{pad}else:")
                    emit(s[3], depth + 1)
        emit(self.body, 1)
        return "\n".join(lines) + "\n"

    def ev(self, args):
        env = dict(zip(self.params, args))
        def run(stmts):
            for s in stmts:
                if s[0] == "let":
                    env[s[1]] = s[2].ev(env)
                elif s[0] == "ret":
                    return [e.ev(env) for e in s[1]] if isinstance(s[1], list) else s[1].ev(env)
                else:
                    a, op, b = (env[s[1][0]].v, s[1][1], env[s[1][2]].v)
                    if abs(a - b) <= MARGIN * max(abs(a), abs(b), 1.0):
                        raise Undefined("branch test near its tie")
                    r = run(s[2] if (a > b if op == ">" else a < b) else s[3])
                    if r is not None:
                        return r
            return None
        return run(self.body)


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


@dataclass
class Case:
    seed: int
    index: int
    source: str
    dtype: type
    xs: list          # x, then the constants
    tangents: list    # for jvp: one per parameter of f
    cs: list          # the array constant's two elements (passed whether f takes it or not)
    expected: list    # [(value, magnitude)] for out[...]: derivative(s), jvp value(s), jvp tangent(s)


def generate(seed: int, index: int, attempts: int = 100) -> Case:
    for attempt in range(attempts):
        rng = random.Random(f"derivatives-{seed}-{index}-{attempt}")
        g = Gen(rng)
        if rng.random() < 0.5:
            g.funcs.append(g.func("g0", rng.randint(1, 2), allow_if=rng.random() < 0.5))
        nparams = rng.randint(1, 3)
        nout = 1 if rng.random() < 0.7 else 2  # f returns a float or a tuple of two floats
        g.arr = rng.random() < 0.3  # then f has an array constant, and only derivative applies
        f = g.func("f", nparams, nout=nout)
        dtype = rng.choice([np.float64, np.float32])
        xs = [float(dtype(rng.uniform(-2.0, 2.0))) for _ in range(nparams)]
        tangents = [float(dtype(rng.choice([1.0, 0.5, -2.0, 0.0, 0.25]))) for _ in range(nparams)]
        cs = [float(dtype(rng.uniform(-2.0, 2.0))) for _ in range(2)]
        arr = [cs] if g.arr else []
        try:
            d = f.ev([Dual(xs[0], 1.0, 1.0, abs(xs[0]))] + [Dual.const(c) for c in xs[1:]] + arr)
            j = f.ev([Dual(x, t, abs(t), abs(x)) for x, t in zip(xs, tangents)] + arr)
        except (Undefined, ZeroDivisionError, ValueError, OverflowError):
            continue
        ds, js = (d, j) if nout == 2 else ([d], [j])
        expected = [(x.d, x.m) for x in ds]
        if not g.arr:  # jvp's primals are all active: floats only
            expected += [(x.v, x.vm) for x in js] + [(x.d, x.m) for x in js]
        if not all(math.isfinite(v) and abs(v) < 1e30 for pair in expected for v in pair):
            continue
        consts = ", ".join([f"xs[{i}]" for i in range(1, nparams)] + (["cs"] if g.arr else []))
        primals = ", ".join(f"xs[{i}]" for i in range(nparams)) + ("," if nparams == 1 else "")
        tans = ", ".join(f"ts[{i}]" for i in range(nparams)) + ("," if nparams == 1 else "")
        deriv = f"gpuc.derivative(f, xs[0]{', ' + consts if consts else ''})"
        kernel = ("@gpuc.kernel\ndef kernel(out, xs, ts, cs):\n"
                  + (f"    out[0] = {deriv}\n" if nout == 1 else f"    d0, d1 = {deriv}\n    out[0] = d0\n    out[1] = d1\n"))
        if not g.arr:
            kernel += (f"    v, d = gpuc.jvp(f, ({primals}), ({tans}))\n"
                       + ("    out[1] = v\n    out[2] = d\n" if nout == 1 else
                          "    out[2] = v[0]\n    out[3] = v[1]\n    out[4] = d[0]\n    out[5] = d[1]\n"))
        source = ("import math\n\nimport gpuc\n\n\n" + "".join(h.src() + "\n\n" for h in g.funcs)
                  + f.src() + "\n\n" + kernel)
        return Case(seed, index, source, dtype, xs, tangents, cs, expected)
    raise RuntimeError(f"no defined derivative program for seed {seed} index {index}")


# -- running ----------------------------------------------------------------------------------------

@dataclass
class Finding:
    case: Case
    kind: str
    detail: str

    def describe(self) -> str:
        c = self.case
        return (f"== derivatives seed {c.seed} program {c.index}: {self.kind} ==\n{c.source}\n"
                f"xs = {c.xs} ts = {c.tangents} cs = {c.cs} ({np.dtype(c.dtype).name})\n{self.detail}\n")


def check(case: Case, workdir: Path) -> Finding | None:
    import gpuc
    path = workdir / f"deriv_{case.seed}_{case.index}.py"
    path.write_text(case.source)
    spec = importlib.util.spec_from_file_location(f"gpuc_deriv_{case.seed}_{case.index}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = np.zeros(len(case.expected), case.dtype)
    xs = np.array(case.xs, case.dtype)
    ts = np.array(case.tangents, case.dtype)
    cs = np.array(case.cs, case.dtype)
    try:
        module.kernel.launch(1, out, xs, ts, cs, device="cpu", threads=1)
    except Exception as exc:  # noqa: BLE001 — every error is a finding: the program is documented
        return Finding(case, type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
    rtol = RTOL32 if case.dtype is np.float32 else RTOL64
    bad = []
    for i, (got, (want, mag)) in enumerate(zip(out.tolist(), case.expected)):
        tol = rtol * max(mag, abs(want)) + (1e-30 if case.dtype is np.float64 else 1e-6 * rtol)
        if not (abs(got - want) <= tol):
            bad.append(f"out[{i}]: got {got!r}, expected {want!r} (tolerance {tol:.3g})")
    return Finding(case, "mismatch", "\n".join(bad)) if bad else None


def run(seed: int, count: int, start: int = 0) -> tuple[list[Finding], int]:
    findings = []
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(start, start + count):
            finding = check(generate(seed, index), Path(tmp))
            if finding:
                findings.append(finding)
    return findings, count


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--start", type=int, default=0)
    ns = parser.parse_args(argv)
    t0 = time.monotonic()
    findings, n = run(ns.seed, ns.count, ns.start)
    for f in findings:
        print(f.describe())
    print(f"derivatives: {n} programs, {len(findings)} findings in {time.monotonic() - t0:.0f} s")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
