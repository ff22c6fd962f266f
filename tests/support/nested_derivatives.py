"""Nested derivatives for support.derivatives: a derivative form applied to a func that calls another form of f.

A program of support.derivatives is given (now and then, from a random stream of its own, so that the
programs a seed gave before stay as they were) one to three funcs `h0`, `h1`, ... Each h takes f's
parameters (p0.., n, arr; with loops and an outer jvp or vjp, a float q in place of n, passed on as
`int(q)`), calls one or two derivative forms of f — `gpuc.derivative`, `gpuc.jvp`, `gpuc.grad`,
`gpuc.value_and_grad`, `gpuc.vjp` (of `fq` with loops: their primals are floats) — at arguments that
are its parameters or expressions of them, with tangents and cotangents that are literals or its
parameters, and returns a float (or a pair) of the results: sums and products of them, sin or tanh of
them, times an expression of its parameters. A kernel `nested` applies a derivative form to each h
(reverse over forward, forward over reverse, reverse over reverse, forward over forward), and now
and then a first-order grad, value_and_grad or vjp of f itself beside them: with loops, a gradient
that keeps a tape next to the nested ones. Work item i reads its own row of primals, `xr[i]`, and
writes its row of results, `out[i]`.

Two checks. (a) `nested_host`, in the program's source, is the work item's body run from Python:
every outer form called from Python (`gpuc.grad(h0, ...)`); the kernel launched over its rows on one
thread and on two must give what Python gives, within RTOL_SAME (1e-12 for float64, 1e-6 for float32)
of the reference's magnitude: both are the same computation compiled twice, so only contraction,
vector math and the order of independent sums may differ, each by a few roundings of the terms.
(b) The reference is hyper-dual numbers (`Hyper`, v + a·ε1 + b·ε2 + ab·ε1ε2): f evaluated with the
inner direction in ε1 and the outer in ε2 has the second derivative in ab, and the ε2 parts of
whatever h computes are the outer derivative, so no result of gpuc enters the reference. Results
are compared with support.derivatives' RTOL64 / RTOL32 against the magnitude of the terms, which
`Hyper` carries for every component.

An h whose gradient of f keeps a tape of a loop over an array (grad or value_and_grad of f with a loop and
an array constant) is differentiated again by rule: gradients of f's tangent function, the array read as
a constant (gpuc/plugins/autodiff/nested.py); no h is left out.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import numpy as np

from .derivatives import COTANGENTS, NUM, RTOL32, RTOL64, Bin, Expr, Func, Gen, Math, Undefined, Var

NESTED = 0.2  # the share of programs given nested derivatives
ROWS = 2       # work items of the nested kernel, each with its own primals
ATTEMPTS = 20
RTOL_SAME64, RTOL_SAME32 = 1e-12, 1e-6  # the kernel against the same calls made from Python

FORMS = ("derivative", "jvp", "grad", "value_and_grad", "vjp")


# -- the reference: hyper-dual numbers with magnitudes --------------------------------------------

def _series(name, v):
    """g(v) and its first three derivatives, for the math functions the generator writes and 1/v."""
    if name == "sin":
        s, c = math.sin(v), math.cos(v)
        return s, c, -s, -c
    if name == "cos":
        s, c = math.sin(v), math.cos(v)
        return c, -s, -c, s
    if name == "exp":
        e = math.exp(v)
        return e, e, e, e
    if name == "tanh":
        t = math.tanh(v)
        u = 1 - t * t
        return t, u, -2 * t * u, u * (6 * t * t - 2)
    if name == "sqrt":
        s = math.sqrt(v)
        return s, 0.5 / s, -0.25 / s ** 3, 0.375 / s ** 5
    if name == "log":
        return math.log(v), 1 / v, -1 / v ** 2, 2 / v ** 3
    if name == "recip":
        return 1 / v, -1 / v ** 2, 2 / v ** 3, -6 / v ** 4
    raise AssertionError(name)


class Hyper:
    """v + a·ε1 + b·ε2 + ab·ε1ε2 with ε1² = ε2² = 0: f at x + u·ε1 + w·ε2 holds f(x), its derivatives
    along u (a) and w (b) and the second derivative uᵀ·H·w (ab). Each component has a magnitude (vm, am,
    bm, abm), a bound on how far a float computation of it may be off, in roundings: sums add
    magnitudes, products multiply them, and the k-th derivative of a function at v has magnitude
    |g_k(v)| + |g_k+1(v)|·vm (v itself is off by vm), plus the terms that cancel in tanh's 1 - tanh²."""
    __slots__ = ("v", "a", "b", "ab", "vm", "am", "bm", "abm")

    def __init__(self, v, a, b, ab, vm, am, bm, abm):
        self.v, self.a, self.b, self.ab = v, a, b, ab
        self.vm, self.am, self.bm, self.abm = vm, am, bm, abm

    @staticmethod
    def const(v):
        return Hyper(v, 0.0, 0.0, 0.0, abs(v), 0.0, 0.0, 0.0)

    @staticmethod
    def primal(x, w):
        """x moving along w in ε2 (an outer direction)."""
        return Hyper(x, 0.0, w, 0.0, abs(x), 0.0, abs(w), 0.0)

    def __repr__(self):
        return f"Hyper({self.v!r}, {self.a!r}, {self.b!r}, {self.ab!r})"

    def __add__(x, y):
        return Hyper(x.v + y.v, x.a + y.a, x.b + y.b, x.ab + y.ab, x.vm + y.vm, x.am + y.am, x.bm + y.bm,
                     x.abm + y.abm)

    def __sub__(x, y):
        return Hyper(x.v - y.v, x.a - y.a, x.b - y.b, x.ab - y.ab, x.vm + y.vm, x.am + y.am, x.bm + y.bm,
                     x.abm + y.abm)

    def __mul__(x, y):
        return Hyper(x.v * y.v, x.a * y.v + x.v * y.a, x.b * y.v + x.v * y.b,
                     x.ab * y.v + x.a * y.b + x.b * y.a + x.v * y.ab,
                     x.vm * y.vm, x.am * y.vm + x.vm * y.am, x.bm * y.vm + x.vm * y.bm,
                     x.abm * y.vm + x.am * y.bm + x.bm * y.am + x.vm * y.abm)

    def __truediv__(x, y):
        return x * y.math("recip")

    def math(self, name):
        g0, g1, g2, g3 = _series(name, self.v)
        m0, m1, m2 = (abs(g0) + abs(g1) * self.vm, abs(g1) + abs(g2) * self.vm, abs(g2) + abs(g3) * self.vm)
        if name == "tanh":  # its slopes are computed from y = tanh(v): 1 - y², whose terms cancel where |y| ~ 1
            m1, m2 = m1 + 1 + g0 * g0, m2 + 2 * abs(g0) * (1 + g0 * g0)
        return Hyper(g0, g1 * self.a, g1 * self.b, g1 * self.ab + g2 * self.a * self.b,
                     m0, m1 * self.am, m1 * self.bm, m1 * self.abm + m2 * self.am * self.bm)


def _seed(x: Hyper, t: Hyper) -> Hyper:
    """An inner call's argument: x (moving in ε2) with tangent t (which may move in ε2 too) in ε1."""
    return Hyper(x.v, t.v, x.b, t.b, x.vm, t.vm, x.bm, t.bm)


def _value(x: Hyper) -> Hyper:
    """What an inner call returns for f's value: the value and its outer derivative."""
    return Hyper(x.v, 0.0, x.b, 0.0, x.vm, 0.0, x.bm, 0.0)


def _slope(x: Hyper) -> Hyper:
    """What an inner call returns for a derivative: the ε1 part, with its outer derivative."""
    return Hyper(x.a, 0.0, x.ab, 0.0, x.am, 0.0, x.abm, 0.0)


# -- the program: funcs h calling derivative forms of f, a kernel differentiating them ------------

@dataclass
class TLit(Expr):
    """A literal of the program's float type, as a tangent or cotangent (`gpuc.float32(0.5)` or `0.5`)."""
    value: float
    fn: str
    def src(self): return f"{self.fn}({self.value!r})" if self.fn else repr(self.value)
    def ev(self, env): return env[NUM].const(self.value)


@dataclass
class Base:
    """What the nested part needs of its program."""
    f: Func
    nparams: int
    nout: int
    arr: bool
    dtype: type
    n: int | None
    npos: int | None
    cs: list
    ts: list
    ws: list

    @property
    def looped(self):
        return self.npos is not None

    def fargs(self, floats, n, arr="arr"):
        """f's arguments in order: the floats, n, the array constant."""
        it = iter(floats)
        return [n if p == "n" else arr if p == "arr" else next(it) for p in self.f.params]

    def call(self, floats: list[Hyper]) -> list[Hyper]:
        """f on Hypers (n and the array constant as the program passes them); its results as a list."""
        it = iter(floats)
        r = self.f.ev([self.n if p == "n" else self.cs if p == "arr" else next(it) for p in self.f.params])
        return r if isinstance(r, list) else [r]


@dataclass
class Inner:
    """One derivative form of f called in h: `df0 = gpuc.derivative(f, ...)`, `vf0, tf0 = gpuc.jvp(...)`, ..."""
    form: str
    c: int           # its number in h, in the names it binds
    args: list       # f's float arguments, expressions of h's parameters
    extra: list      # jvp: one tangent per primal (q's last); vjp: the cotangent's floats
    names: list      # the floats it makes available to h's result: "df0", "gf0[1]", ...
    slopes: list     # those names that are derivatives (not f's value)

    def src(self, base: Base, qmode: bool, conv: str) -> str:
        floats = [a.src() for a in self.args]
        c = self.c
        if self.form in ("jvp", "vjp"):
            fn, prims = ("fq", floats + ["q" if qmode else f"{conv}(n)"]) if base.looped else ("f", floats)
            prims = _tup(prims)
            if self.form == "jvp":
                return f"vf{c}, tf{c} = gpuc.jvp({fn}, ({prims}), ({_tup([e.src() for e in self.extra])}))"
            cot = self.extra[0].src() if base.nout == 1 else f"({_tup([e.src() for e in self.extra])})"
            return f"vf{c}, cf{c} = gpuc.vjp({fn}, ({prims}), {cot})"
        args = ", ".join(base.fargs(floats, "int(q)" if qmode else "n"))
        lhs = {"derivative": f"df{c}", "grad": f"gf{c}", "value_and_grad": f"vf{c}, gf{c}"}[self.form]
        return f"{lhs} = gpuc.{self.form}(f, {args})"

    def ev(self, base: Base, env):
        """Binds the names to Hypers: the results' values and their ε2 (outer) derivatives."""
        xs = [a.ev(env) for a in self.args]
        zero, one = Hyper.const(0.0), Hyper.const(1.0)
        def along(ts):
            return base.call([_seed(x, t) for x, t in zip(xs, ts)])
        def unit(i):
            return along([one if k == i else zero for k in range(len(xs))])
        c, P = self.c, len(xs)
        if self.form == "derivative":
            got = {f"df{c}": [_slope(r) for r in unit(0)]}
        elif self.form == "jvp":
            rs = along([e.ev(env) for e in self.extra[:P]])
            got = {f"vf{c}": [_value(r) for r in rs], f"tf{c}": [_slope(r) for r in rs]}
        elif self.form == "vjp":
            ws = [e.ev(env) for e in self.extra]
            cols = [unit(i) for i in range(P)]
            cts = [sum((w * _slope(r) for w, r in zip(ws, col)), zero) for col in cols]
            got = {f"vf{c}": [_value(r) for r in cols[0]], f"cf{c}": cts + ([zero] if base.looped else [])}
        else:
            cols = [unit(i)[0] for i in range(P)]
            got = {f"gf{c}": [_slope(r) for r in cols]}
            if self.form == "value_and_grad":
                got[f"vf{c}"] = [_value(cols[0])]
        for name, values in got.items():
            tuple_ = name[0] in "gc" or base.nout == 2
            for k, v in enumerate(values):
                env[f"{name}[{k}]" if tuple_ else name] = v


@dataclass
class H:
    """`@gpuc.func def hK(...)`: calls `inners`, returns `ret` (an Expr, or a list of two)."""
    name: str
    params: list     # as printed: p0.., n or q, arr
    qmode: bool      # takes q (a float) in place of n
    inners: list
    ret: object

    @property
    def nret(self):
        return len(self.ret) if isinstance(self.ret, list) else 1

    def src(self, base: Base, conv: str) -> str:
        lines = ["@gpuc.func", f"def {self.name}({', '.join(self.params)}):"]
        lines += [f"    {i.src(base, self.qmode, conv)}" for i in self.inners]
        r = self.ret
        lines.append(f"    return {', '.join(e.src() for e in r) if isinstance(r, list) else r.src()}")
        return "\n".join(lines) + "\n"

    def ev(self, base: Base, floats: list[Hyper]) -> list[Hyper]:
        env = {f"p{i}": x for i, x in enumerate(floats)}
        env.update({"n": base.n, "arr": base.cs, NUM: Hyper})
        for inner in self.inners:
            inner.ev(base, env)
        return [e.ev(env) for e in (self.ret if isinstance(self.ret, list) else [self.ret])]


@dataclass
class Outer:
    """A derivative form the nested kernel applies to h (or, target None, to f: a first-order derivative
    beside the nested ones). `want[row]`: (value, magnitude) for each result it stores."""
    form: str
    c: int
    target: H | None
    labels: list = field(default_factory=list)
    want: list = field(default_factory=list)

    def name(self, base):
        if self.target is not None:
            return self.target.name
        return "fq" if base.looped and self.form in ("jvp", "vjp") else "f"

    def nret(self, base):
        return self.target.nret if self.target is not None else base.nout

    def qmode(self, base):
        """Takes q, a float, in place of n: fq, or an h made for jvp or vjp."""
        return self.target.qmode if self.target is not None else base.looped and self.form in ("jvp", "vjp")

    def lines(self, base: Base, first: int) -> list[str]:
        """The work item's statements storing this call's results from o[first] on (labels filled)."""
        name, P, c, nret = self.name(base), base.nparams, self.c, self.nret(base)
        qmode = self.qmode(base)
        floats = [f"x[{j}]" for j in range(P)]
        if qmode:
            prims, args = floats + ["es[2]"], None
        else:
            args = ", ".join(base.fargs(floats, "n", "cs")) if self.target is None else ", ".join(
                {"n": "n", "arr": "cs"}.get(p) or f"x[{p[1:]}]" for p in self.target.params)
            prims = floats
        out, stores = [], []
        def pair(v):
            return [v] if nret == 1 else [f"{v}[0]", f"{v}[1]"]
        what = f"{self.form} of {name}"
        if self.form == "derivative":
            out.append(f"r{c} = gpuc.derivative({name}, {args})")
            stores += [(s, what) for s in pair(f"r{c}")]
        elif self.form == "jvp":
            tans = [f"ts[{j}]" for j in range(P)] + (["es[1]"] if qmode else [])
            out.append(f"v{c}, t{c} = gpuc.jvp({name}, ({_tup(prims)}), ({_tup(tans)}))")
            stores += [(s, what + " value") for s in pair(f"v{c}")] + [(s, what + " tangent") for s in pair(f"t{c}")]
        elif self.form == "vjp":
            cot = "ws[0]" if nret == 1 else "(ws[0], ws[1])"
            out.append(f"v{c}, ct{c} = gpuc.vjp({name}, ({_tup(prims)}), {cot})")
            stores += [(s, what + " value") for s in pair(f"v{c}")]
            stores += [(f"ct{c}[{j}]", f"{what} cotangent[{j}]") for j in range(P)]
            stores += [(f"ct{c}[{P}]", f"{what} cotangent[q]")] if qmode else []
        else:
            lhs = f"gr{c}" if self.form == "grad" else f"v{c}, gr{c}"
            out.append(f"{lhs} = gpuc.{self.form}({name}, {args})")
            stores += [(f"v{c}", what + " value")] if self.form == "value_and_grad" else []
            stores += [(f"gr{c}[{j}]", f"{what}[{j}]") for j in range(P)]
        self.labels = [label for _, label in stores]
        return out + [f"o[{first + k}] = {s}" for k, (s, _) in enumerate(stores)]

    def reference(self, base: Base, row: list) -> list:
        """(value, magnitude) of each stored result at the primals `row`, from Hypers."""
        P, nret = base.nparams, self.nret(base)
        def column(w):  # every result moving along the outer direction w
            floats = [Hyper.primal(x, d) for x, d in zip(row, w)]
            return self.target.ev(base, floats) if self.target is not None else base.call(floats)
        units = [column([1.0 if k == j else 0.0 for k in range(P)])
                 for j in range(1 if self.form == "derivative" else P)]
        if self.form == "derivative":
            return [(r.b, r.bm) for r in units[0]]
        if self.form == "jvp":
            col = column(base.ts)
            return [(r.v, r.vm) for r in col] + [(r.b, r.bm) for r in col]
        if self.form == "vjp":
            ws = base.ws[:nret]
            cts = [(sum(w * r.b for w, r in zip(ws, col)), sum(abs(w) * r.bm for w, r in zip(ws, col)))
                   for col in units]
            return [(r.v, r.vm) for r in units[0]] + cts + ([(0.0, 0.0)] if self.qmode(base) else [])
        grads = [(col[0].b, col[0].bm) for col in units]
        return ([(units[0][0].v, units[0][0].vm)] if self.form == "value_and_grad" else []) + grads


def _tup(items):
    return ", ".join(items) + ("," if len(items) == 1 else "")


@dataclass
class Nested:
    base: Base
    hs: list
    outers: list
    rows: list            # the primals of each work item (f's floats)
    conv: str             # the program's float conversion: float or gpuc.float32
    prefix: str = ""      # the program's source before the nested part

    def width(self, outers=None):
        return sum(len(o.labels) for o in (outers or self.outers))

    def src(self, outers=None) -> str:
        """The hs, the nested kernel and nested_host for `outers` (all of them by default)."""
        outers = self.outers if outers is None else outers
        body, first = [], 0
        if self.base.looped and not all(o.qmode(self.base) for o in outers):
            body.append("n = int(es[2])")
        for o in outers:
            lines = o.lines(self.base, first)
            first += len(o.labels)
            body += lines
        used = {o.target.name for o in outers if o.target is not None}
        hs = "".join(h.src(self.base, self.conv) + "\n\n" for h in self.hs if h.name in used)
        block = "\n".join("    " + line for line in body)
        return (hs + "@gpuc.kernel\ndef nested(out, xr, ts, cs, ws, es):\n    i = gpuc.index()\n"
                "    o = out[i]\n    x = xr[i]\n" + block + "\n\n\n"
                "def nested_host(o, x, ts, cs, ws, es):\n    # the nested kernel's work item, from Python\n"
                + block + "\n")


# -- generation ----------------------------------------------------------------------------------

class NestedGen:
    def __init__(self, rng: random.Random, base: Base, funcs: list):
        self.r, self.base = rng, base
        self.g = Gen(rng)
        self.g.funcs, self.g.arr = funcs, base.arr
        self.lit = "gpuc.float32" if base.dtype is np.float32 else ""
        self.floats = [f"p{i}" for i in range(base.nparams)]

    def inner_forms(self):
        b = self.base
        return [f for f in FORMS if not (b.arr and f in ("jvp", "vjp")) and not (b.nout == 2 and "grad" in f)]

    def outer_forms(self):
        return [f for f in FORMS if not (self.base.arr and f in ("jvp", "vjp"))]

    def arg(self):
        r = self.r
        return Var(r.choice(self.floats)) if r.random() < 0.6 else self.g.expr(self.floats, 1)

    def inner(self, c, qmode):
        r, b, P = self.r, self.base, self.base.nparams
        form = r.choice(self.inner_forms())
        args = [Var(p) for p in self.floats] if r.random() < 0.6 else [self.arg() for _ in range(P)]
        extra, names, slopes = [], [], []
        pair = (lambda v: [v]) if b.nout == 1 else (lambda v: [f"{v}[0]", f"{v}[1]"])
        if form == "derivative":
            slopes = pair(f"df{c}")
        elif form == "jvp":
            extra = [Var(r.choice(self.floats)) if r.random() < 0.3 else
                     TLit(r.choice([1.0, 0.5, -2.0, 0.0, 0.25]), self.lit) for _ in range(P)]
            extra += [TLit(r.choice([0.0, 1.0]), self.lit)] if b.looped else []
            names, slopes = pair(f"vf{c}"), pair(f"tf{c}")
        elif form == "vjp":
            extra = [Var(r.choice(self.floats)) if r.random() < 0.25 else TLit(r.choice(COTANGENTS), self.lit)
                     for _ in range(b.nout)]
            names = pair(f"vf{c}") + ([f"cf{c}[{P}]"] if b.looped else [])
            slopes = [f"cf{c}[{j}]" for j in range(P)]
        else:
            names = [f"vf{c}"] if form == "value_and_grad" else []
            slopes = [f"gf{c}[{j}]" for j in range(P)]
        return Inner(form, c, args, extra, names + slopes, slopes)

    def result(self, inners):
        """A float of the inner results (a derivative of each inner call among them) and h's parameters."""
        r = self.r
        picks = [r.choice(i.slopes) for i in inners]
        others = [n for i in inners for n in i.names if n not in picks]
        if others and r.random() < 0.4:
            picks.append(r.choice(others))
        terms = []
        for name in picks:
            k = r.random()
            terms.append(Var(name) if k < 0.6 else Math(r.choice(["sin", "tanh"]), Var(name)) if k < 0.8
                         else Bin("*", Var(name), Var(r.choice(picks))))
        e = terms[0]
        for t in terms[1:]:
            e = Bin(r.choice("+-*"), e, t)
        if r.random() < 0.5:
            e = Bin(r.choice("+*"), e, self.g.expr(self.floats, 2))
        return e

    def h(self, k, outer):
        r, b = self.r, self.base
        qmode = b.looped and outer in ("jvp", "vjp")
        params = list(self.floats)
        if b.looped:
            params = params + ["q"] if qmode else params[:b.npos] + ["n"] + params[b.npos:]
        params += ["arr"] if b.arr else []
        inners = [self.inner(c, qmode) for c in range(1 if r.random() < 0.7 else 2)]
        two = outer in ("derivative", "jvp", "vjp") and r.random() < 0.25
        ret = [self.result(inners) for _ in range(2)] if two else self.result(inners)
        return H(f"h{k}", params, qmode, inners, ret)

    def draw(self) -> tuple[list, list]:
        r = self.r
        hs, outers = [], []
        for k in range(r.choices([1, 2, 3], [0.4, 0.4, 0.2])[0]):
            form = r.choice(self.outer_forms())
            hs.append(self.h(k, form))
            outers.append(Outer(form, k, hs[-1]))
        forms = [f for f in ("grad", "value_and_grad", "vjp") if f in self.inner_forms()]
        if forms and r.random() < 0.5:  # a first-order derivative of f beside them (with loops, one keeping a tape)
            outers.insert(r.randint(0, len(outers)), Outer(r.choice(forms), len(outers), None))
        return hs, outers


def draw(seed: int, index: int, base: Base, funcs: list, xs: list, source: str) -> Nested | None:
    """The nested part of program `index`, or None (most programs, and where none is defined)."""
    rng = random.Random(f"derivatives-nested-{seed}-{index}")
    if rng.random() >= NESTED:
        return None
    gen = NestedGen(rng, base, funcs)
    conv = "gpuc.float32" if base.dtype is np.float32 else "float"
    for _ in range(ATTEMPTS):
        hs, outers = gen.draw()
        rows = [list(xs)] + [[float(base.dtype(rng.uniform(-2.0, 2.0))) for _ in xs] for _ in range(ROWS - 1)]
        nested = Nested(base, hs, outers, rows, conv, source)
        nested.src()  # fills the labels
        try:
            for o in outers:
                o.want = [o.reference(base, row) for row in rows]
        except (Undefined, ZeroDivisionError, ValueError, OverflowError):
            continue
        if all(math.isfinite(v) and math.isfinite(m) and abs(v) < 1e30 for o in outers for w in o.want for v, m in w):
            return nested
    return None


# -- checking --------------------------------------------------------------------------------------

def check(case, module, device: str = "cpu") -> list[str]:
    """The nested kernel of `module` (the case's program) on one and two threads (once on a device that
    schedules its own work items) against nested_host and against the reference: what disagrees."""
    nested, base = case.nested, case.nested.base
    dt = case.dtype
    outers = list(nested.outers)
    args = [np.array(v, dt) for v in (base.ts, base.cs, base.ws, [0.0, 1.0, base.n or 0])]
    xr = np.array(nested.rows, dt)
    width = nested.width(outers)
    got = []
    for threads in (1, 2) if device == "cpu" else (1,):
        out = np.zeros((ROWS, width), dt)
        module.nested.launch(ROWS, out, xr, *args, device=device, threads=threads)
        got.append(out)
    host = np.zeros((ROWS, width), dt)
    for row in range(ROWS):
        module.nested_host(host[row], xr[row], *args)
    rtol, same = (RTOL32, RTOL_SAME32) if dt is np.float32 else (RTOL64, RTOL_SAME64)
    floor = 1e-30 if dt is np.float64 else 1e-10
    labels = [label for o in outers for label in o.labels]
    bad = []
    for row in range(ROWS):
        want = [w for o in outers for w in o.want[row]]
        for k, (value, mag) in enumerate(want):
            scale = max(mag, abs(value))
            cell, python, tol = f"nested out[{row}, {k}] ({labels[k]})", float(host[row, k]), rtol * scale + floor
            if not abs(float(got[0][row, k]) - value) <= tol:
                bad.append(f"{cell}: got {float(got[0][row, k])!r}, expected {value!r} (tolerance {tol:.3g})")
            for threads, out in zip((1, 2), got):
                if not abs(float(out[row, k]) - python) <= same * scale + floor:
                    bad.append(f"{cell} on {threads} thread(s): got {float(out[row, k])!r}, from Python {python!r}"
                               f" (tolerance {same * scale + floor:.3g})")
    return bad


def tally(nested: Nested, counter) -> None:
    """Counts the program, and each outer form by what it differentiates: `grad of jvp` (an h calling jvp
    of f), `... (loop)` where f has a loop."""
    counter["nested programs"] += 1
    loop = " (loop)" if nested.base.looped else ""
    for o in nested.outers:
        inner = "f" if o.target is None else "+".join(i.form for i in o.target.inners)
        counter[f"{o.form} of {inner}{loop}"] += 1
