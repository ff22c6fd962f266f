"""Random adjoint kernels (`gpuc.adjoint`), checked against central finite differences of the loss.

Each program is a `@gpuc.kernel` (float64, or float32 in a quarter of the programs) with one to three
float input arrays, one or two float output arrays, sometimes int arrays (int64 or int32: gather indices
with repeats, per-item trip counts) and a float scalar constant `c`, and up to three small `@gpuc.func`
helpers. Work items are `i = gpuc.index()` (in a fifth of the programs a 2-D launch, `i, j =
gpuc.index(0), gpuc.index(1)` or `j, i = ...`, over 2-D arrays and row, column and table vectors), now
and then over more items than the arrays have (`if i >= n: return` first). The body reads own elements
(`x[i]`), a row or column of a 2-D input (`x[i, k]` for every k, in half the 2-D programs: such arrays
are partitioned by an index and take plain adds where the schedule allows), neighbours at distance 1 and
2 (`x[i - 1]`, `x[i + 2]`, `a[i, j + 1]`, ...) under bounds
guards (`if i > 0 and i < n - 1:`), gathers (`t[idx[i]]`), mirrored and transposed elements (`x[n - 1 -
i]`, `a[j, i]`), elements many items read (`t[0]`, `t[i % t.shape[0]]`, row and column vectors); it
computes random smooth expressions (+ - * /, `math.sin/cos/tanh`, `exp` of bounded arguments, `sqrt` of
positive ones, `min`/`max`, `abs`, `** 2`, `** 3`, conditional expressions, calls of helpers: of floats,
with a loop (a constant or a run-time trip count), of an array and an index, returning a pair,
recursive), runs local loops (`for k in range(steps[i])`, `range(steps[i], 0, -1)`, a trip count
converted from a float with `int(...)`, nested loops, `break`, `continue`, `return`) whose loop-carried
floats stay bounded (`a = a * G + H` with |G| <= 0.9 and |H| <= 1, `tanh`, clamps), a `while` that a
counter bounds, `if`/`elif`/`else` on computed floats (with `and`/`or`), early `return`s, swaps; it
writes outputs at its own index (`y[i] = ...`, `y[i] += ...`, `y[i] *= ...`) or at the mirrored one,
adds into reduction arrays (`gpuc.atomic_add(z, idx[i] % z.shape[0], v)`, `atomic_sub`), and updates in
place an array it reads only at its own index (`u[i] *= ...`). Some arrays are passed as strided views
(every other element, a Fortran-ordered or column-sliced 2-D array), their shadows with the same strides.

A program is defined when nothing it computes is near a point where it is not differentiable: the
generated source, rewritten so that every comparison, `min`, `max`, `abs` and `int` reports how far it is
from its tie (`int`: from an integer), runs in Python (float64, `probe`); a float closer than MARGIN
(relative to the operands' magnitudes) to its tie, an overflow, an output beyond BOUND or an argument
of sin, cos, tanh or exp beyond ARGUMENT_BOUND makes the program undefined, and it is regenerated.
Races are ruled out by construction: an output element is written by one work item only, atomics go to
arrays nothing reads, an array updated in place is read and written at its own index only, arrays read
at other indices are never written. One exception: a 1-D program that only writes its outputs, with `=`
(`only_written`), is launched now and then over (n, 2) or (n, 3), a dimension it does not read: each
element is then written by two or three work items at once, all with the same value, and its seed must
reach the derivative once (one of them takes it); atomics add two or three times as much.

Checks, per program, with a seed (the incoming gradient) in the shadow of every float array:
- the shadows after `gpuc.adjoint(kernel).launch(n, ..., threads=1)` against the gradient of
  L = Σ_B seed_B · B_after over every float array B, taken by four-point central differences of the
  primal kernel on float64 arguments (differences taken per element before the seeds weigh them),
  within RTOL_FD of the larger of the entry and a hundredth of the largest entry of the program, plus
  the differences' own rounding. Where they do not match, the differences are taken again at a quarter
  of the step, a sixteenth, ... until two successive ones agree, the finer being the reference; when they
  never do, the program is not smooth enough at its arguments for differences to judge that array, and
  it is counted, not reported;
- float32 programs: the kernel is generic in its float type, so the shadows of a float64 launch are
  the ones compared with the differences, and the float32 shadows are compared with those, within
  RTOL_FLOAT32 of the same magnitudes plus four times as far as the float64 shadows move when the
  arguments move by a relative JITTER (a few float32 ulps: ill-conditioned programs get what float32
  rounding costs them);
- `threads=2` and `threads=3` (two-phase schedule, atomics where any item may touch an element; the adds
  of every item into one element, `t[0]`'s shadow and atomics into `z[0]`, summed per chunk of items:
  gpuc/plugins/autodiff/sums.py, in about a quarter of the programs) against `threads=1`: within
  RTOL_SCHEDULE of the largest shadow entry of that array (sums reordered);
- the arrays after the adjoint launches against a plain primal launch: equal with `threads=1`, within
  RTOL_SCHEDULE with more threads (reordered atomic sums);
- the primal against the Python run of the program (within 1e-9 for float64, 1e-3 for float32 in
  float64 Python, plus four times as far as a float64 launch's arrays move when the arguments move by
  JITTER), a check of the generator;
- the primal launch against the same launch without vectorization across work items
  (CompilerConfig(vectorize=False), support/vectorize.py): every array equal bit for bit; and the
  adjoint launch on one thread likewise, its shadows within the tolerance of the threads' (the adds of
  several items into one element run in lanes in another order).
- `gpuc.adjoint(kernel, primal_writes=False)` on 1 and 2 threads, the arrays its trace says it leaves as they
  are (those the compiled kernel only stores into) holding NaN: they still do after it, and every other
  array and every shadow is as after `gpuc.adjoint(kernel)` on as many threads (bit for bit on one thread,
  within RTOL_SCHEDULE of the array's largest entry on two);
- the tangent kernel (`gpuc.tangent(kernel)`, float64 arguments, random directions d in the tangents of
  every float array): Σ_B seed_B · tangent_B after it, the derivative of L along d, against the adjoint's
  Σ_B shadow_B · d_B within RTOL_TANGENT of the sum of the terms' magnitudes; and (float64 programs) its
  arrays after it bit for bit those of the primal launch.

Programs run in a worker process (`Worker`): one that crashes or hangs is a finding of the program it
had begun, and the next program starts a fresh process. Findings are grouped by kind and by the role of
the array (an input read at its own index and around it, a table, an output, ...) or by the first line
of gpuc's message; each prints a self-contained script that reproduces it, `--replay SCRIPT` checks
such a script again, and `--minimize` deletes statements (`support.fuzz.shrink`) while a finding of
the same group remains.

    python -m support.adjoints --seed 3 --count 200 [--minimize] [--out FILE]     (from tests/)
    python -m support.adjoints --replay reproducer.py [--minimize]
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import math
import os
import queue
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from support.vectorize import differences as vector_differences, item_by_item

MARGIN = 2e-3           # a float comparison this close to its tie (relative) makes a program undefined
BOUND = 1e4             # outputs beyond this make a program undefined
ARGUMENT_BOUND = 1e3    # and arguments of sin, cos, tanh and exp beyond this (float32 would lose them)
STEP = 2.0 ** -17       # finite-difference step, relative to max(1, |x|)
RTOL_FD = 1e-6          # float64 shadows against the differences
RTOL_FLOAT32 = 1e-3     # float32 shadows against float64 ones (plus how far those move, see `judge`)
JITTER = 8.0 * float(np.finfo(np.float32).eps)
RTOL_SCHEDULE = {np.float64: 1e-12, np.float32: 1e-4}
RTOL_PYTHON = {np.float64: 1e-9, np.float32: 1e-3}
RTOL_TANGENT = 1e-9     # the tangent kernel's directional derivative against the adjoint's, both float64
EPS64 = float(np.finfo(np.float64).eps)
ROLES = ("in", "table", "row", "col", "inplace", "out", "mirror", "acc")
FLOAT_ROLES = set(ROLES)


class Undefined(Exception):
    pass


# -- the program --------------------------------------------------------------------------------------

@dataclass
class Arr:
    """A kernel parameter: a float array (role in ROLES), an int array ("idx", "steps") or the scalar "c"."""
    name: str
    role: str
    shape: tuple = ()
    layout: str = "C"   # "C", "step2" (every other element of a larger array), "F" (Fortran order), "cols"
    how: str = ""       # a reduction array: the element an item adds to ("mod", "zero", "idx", "i", "j")

    @property
    def is_float(self):
        return self.role in FLOAT_ROLES


@dataclass
class Case:
    seed: int
    index: int
    source: str
    dtype: type
    launch: object                 # int or (R, C)
    params: list                   # [Arr] in the kernel's order
    values: dict                   # name -> np.ndarray (the program's float dtype, int64 or int32) or c
    seeds: dict                    # name -> np.ndarray: the incoming gradient of every float array
    features: set = field(default_factory=set)
    python: dict = field(default_factory=dict)   # name -> the arrays after the launch, run in Python

    @property
    def name(self):
        return f"{self.seed}:{self.index}"

    def arrays(self):
        return [p for p in self.params if p.is_float]


# -- generation ---------------------------------------------------------------------------------------

LITERALS = (0.5, 1.5, 2.0, -0.75, 0.25, 3.0, -1.25)


@dataclass
class Helper:
    name: str
    kind: str          # "plain", "loop", "array", "pair", "recursive"
    nparams: int
    source: str = ""
    counted: bool = False   # a loop helper whose trip count is its last parameter


@dataclass
class Scope:
    floats: list                   # float locals defined on every path to here
    near: frozenset = frozenset()  # (dimension, offset) of the neighbours the enclosing guards allow
    loop: int = 0                  # loop depth
    ints: tuple = ()               # int variables for int conditions
    helper: Helper | None = None   # generating a helper's body
    array_param: bool = False      # the helper reads a[k]

    def child(self, **kw):
        d = dict(floats=list(self.floats), near=self.near, loop=self.loop, ints=self.ints, helper=self.helper,
                 array_param=self.array_param)
        d.update(kw)
        return Scope(**d)


class Gen:
    def __init__(self, rng: random.Random, stream: str = ""):
        self.r = rng
        # A stream of its own for stencil lines, so that a program without one is the one the seed gave before.
        self.r_lines = random.Random(f"{stream}-stencil-lines")
        # ... and for reads along the item's row (`row_reads`)
        self.r_rows = random.Random(f"{stream}-row-reads")
        self.helpers: list[Helper] = []
        self.counter = 0
        self.features: set = set()

    def fresh(self, prefix):
        self.counter += 1
        return f"{prefix}{self.counter}"

    # -- the arrays --

    def layout_program(self):
        r = self.r
        self.dtype = np.float64 if r.random() < 0.75 else np.float32
        self.int_type = np.int64 if r.random() < 0.8 else np.int32
        self.two_d = r.random() < 0.2
        params = []
        if self.two_d:
            self.R = r.randint(3, 9)
            self.C = self.R if r.random() < 0.35 else r.randint(3, 8)
            self.swapped = r.random() < 0.3  # j = index(0) varies fastest: the launch is (C, R)
            self.launch = (self.C, self.R) if self.swapped else (self.R, self.C)
            self.n = None
            self.extra = 0
            item = (self.R, self.C)
        else:
            self.n = r.randint(5, 40)
            self.extra = r.choice([0, 0, 0, 0, 0, 1, 3])
            self.launch = self.n + self.extra
            item = (self.n,)
        nin, nout = r.randint(1, 3), r.randint(1, 2)
        for k in range(nin):
            if k == 0:
                role = "in"
            elif self.two_d:
                role = r.choice(["in", "in", "row", "col", "table"])
            else:
                role = r.choice(["in", "in", "table"])
            shape = {"in": item, "table": (r.randint(2, 8),), "row": (item[0],),
                     "col": (item[-1],)}[role]
            params.append(Arr(f"x{k}", role, shape))
        if r.random() < 0.3:
            params.append(Arr("u", "inplace", item))
        for k in range(nout):
            w = r.random()
            if w < 0.55:
                role = "out"
            elif w < 0.85 or self.two_d:
                role = "acc"
            else:
                role = "mirror"
            if role == "acc":
                self.features.add("atomic")
                if self.two_d:
                    how = r.choice(["i", "j", "mod", "zero"])
                    size = {"i": self.R, "j": self.C, "mod": r.randint(1, 5), "zero": r.randint(1, 3)}[how]
                else:
                    how = r.choice(["mod", "zero", "idx"])
                    size = r.randint(1, 5) if how != "zero" else r.randint(1, 3)
                a = Arr(f"y{k}", role, (size,), how=how)
            else:
                a = Arr(f"y{k}", role, item)
            params.append(a)
        self.tables = [p for p in params if p.role == "table"]
        has_idx = r.random() < (0.6 if self.tables else 0.3) or any(p.how == "idx" for p in params)
        if has_idx:
            params.append(Arr("idx", "idx", item))
        if r.random() < 0.45:
            params.append(Arr("steps", "steps", item))
        params.append(Arr("c", "c"))
        for p in params:  # strided views
            if p.is_float and r.random() < 0.08:
                if len(p.shape) == 1:
                    p.layout = "step2"
                else:
                    p.layout = r.choice(["F", "cols"])
                self.features.add("strided")
        if r.random() < 0.5:
            r.shuffle(params)
            self.features.add("shuffled parameters")
        self.params = params
        self.by_role = {}
        for p in params:
            self.by_role.setdefault(p.role, []).append(p)
        for acc in self.by_role.get("acc", []):
            if acc.how == "idx" and "idx" not in self.by_role:
                acc.how = "mod"
        self.idx = "idx" in self.by_role
        self.steps = "steps" in self.by_role
        # gathers read item arrays (1-D) and tables through idx: its values fit the smallest of them
        if self.two_d:
            sizes = [t.shape[0] for t in self.tables]
        else:
            sizes = [self.n] + [t.shape[0] for t in self.tables]
        self.gmax = min(sizes) if sizes else 1
        self.first = next(p for p in params if p.role == "in")  # its shape gives n (nr, nc)

    def I(self):  # the index of the item's own element
        return "i, j" if self.two_d else "i"

    # -- expressions --

    def read(self, scope: Scope):
        """An array element the kernel may read here, or None."""
        r = self.r
        if scope.helper is not None:
            return "a[k]" if scope.array_param else None
        opts = []
        for p in self.params:
            if p.role == "in":
                opts.append(f"{p.name}[{self.I()}]")
                opts.append(f"{p.name}[{self.I()}]")
                for dim, off in sorted(scope.near):
                    shifted = ["i", "j"][:2 if self.two_d else 1]
                    shifted[dim] += f" {'+-'[off < 0]} {abs(off)}"
                    opts += [f"{p.name}[{', '.join(shifted)}]"] * (1 if self.two_d else 2)
                if self.two_d:
                    if self.R == self.C and r.random() < 0.3:
                        opts.append(f"{p.name}[j, i]")
                else:
                    if r.random() < 0.3:
                        opts.append(f"{p.name}[n - 1 - i]")
                    if self.idx and r.random() < 0.4:
                        opts.append(f"{p.name}[idx[i]]")
            elif p.role == "table":
                opts.append(f"{p.name}[{r.choice([0, 1, p.shape[0] - 1])}]")
                opts.append(f"{p.name}[{'(i + j)' if self.two_d else 'i'} % {p.name}.shape[0]]")
                if self.idx:
                    opts += [f"{p.name}[idx[{self.I()}]]"] * 2
            elif p.role == "row":
                opts.append(f"{p.name}[i]")
            elif p.role == "col":
                opts.append(f"{p.name}[j]")
            elif p.role == "inplace":
                opts.append(f"{p.name}[{self.I()}]")
            elif p.role == "out" and r.random() < 0.3:
                opts.append(f"{p.name}[{self.I()}]")
        if not opts:
            return None
        s = r.choice(opts)
        for tag, what in (("[i - ", "neighbours"), ("[i + ", "neighbours"), ("j - 1]", "neighbours"),
                          ("j + 1]", "neighbours"), (" 2]", "neighbours at 2"), (" 2, j]", "neighbours at 2"),
                          ("[idx[", "gather"), ("[n - 1 - i]", "mirrored read"),
                          ("[j, i]", "transposed read"), (".shape[0]]", "modular read")):
            if tag in s:
                self.features.add(what)
        return s

    def stencil_line(self, scope: Scope) -> str:
        """`y[i] = w * p[i - 1] + w * p[i] + w * p[i + 1]` (or `+=`, or a new variable): every neighbour the guard allows along one dimension
        and the item's own element of one input, in order; its reverse adds into consecutive elements of p's
        shadow one after another (a window in lanes: gpuc/plugins/vectorize/windows.py)."""
        r = self.r_lines
        p = r.choice([q for q in self.params if q.role == "in"])
        dim = r.choice(sorted({d for d, _ in scope.near}))
        terms = []
        for off in sorted({o for d, o in scope.near if d == dim} | {0}):
            shifted = ["i", "j"][:2 if self.two_d else 1]
            if off:
                shifted[dim] += f" {'+-'[off < 0]} {abs(off)}"
            terms.append(f"{r.choice(['c', *map(repr, LITERALS)])} * {p.name}[{', '.join(shifted)}]")
        if r.random() < 0.3:
            terms.reverse()
        self.features.add("stencil line")
        outs = self.by_role.get("out")
        if outs and r.random() < 0.7:  # written: the reverse needs it (an unused value is no code at all)
            return f"{r.choice(outs).name}[{self.I()}] {r.choice(['=', '+='])} {' + '.join(terms)}"
        name = self.fresh("t")
        scope.floats.append(name)
        return f"{name} = {' + '.join(terms)}"

    def row_reads(self, scope: Scope) -> list:
        """In half the 2-D programs: a float folded over the item's row of an input, `x[i, k]` for every k
        (its shadow partitioned by i: plain adds where the items that run at once differ in i,
        gpuc.plugins.autodiff.access.partition), or its column `x[k, j]`."""
        r = self.r_rows
        inputs = [p for p in self.params if p.role == "in"]
        if not self.two_d or not inputs or r.random() < 0.5:
            return []
        p = r.choice(inputs)
        t, k = self.fresh("t"), self.fresh("k")
        along_row = r.random() < 0.6
        bound, element = ("nc", f"{p.name}[i, {k}]") if along_row else ("nr", f"{p.name}[{k}, j]")
        scope.floats.append(t)
        self.features.add("reads along the item's row" if along_row else "reads along the item's column")
        return [f"{t} = 0.0", f"for {k} in range({bound}):",
                f"    {t} = {r.choice(['0.5', '0.75'])} * {t} + {r.choice(['0.25', '0.5', 'c'])} * {element}"]

    def atom(self, scope: Scope, literal: bool = False):
        """A variable, an array element, c, or (where `literal`) a weak literal."""
        r = self.r
        k = r.random()
        if literal and k < 0.25:
            return repr(r.choice(LITERALS))
        if k < 0.45 and scope.floats:
            return r.choice(scope.floats)
        if k < 0.85:
            s = self.read(scope)
            if s is not None:
                return s
        if scope.helper is None and (k < 0.95 or not scope.floats):
            return "c"
        if scope.floats:
            return r.choice(scope.floats)
        s = self.read(scope)
        return s if s is not None else "c"

    def expr(self, scope: Scope, depth: int, literal: bool = False) -> str:
        """A float expression. Every subexpression but bare literals has a variable or an array element in
        it: computed from literals only, it would be a float64 (`math.sin(0.5)`), another type in float32
        programs; a bare literal is weak and takes the other operand's type."""
        r = self.r
        if depth <= 0 or r.random() < 0.2:
            return self.atom(scope, literal)
        k = r.random()
        if k < 0.36:
            lit = r.random() < 0.3
            a, b = self.expr(scope, depth - 1, lit), self.expr(scope, depth - 1)
            if r.random() < 0.5:
                a, b = b, a
            return f"({a} {r.choice('+-*')} {b})"
        if k < 0.44:
            d = self.expr(scope, depth - 2)
            return f"({self.expr(scope, depth - 1, True)} / ({d} * {d} + {r.choice([0.5, 1.0, 2.0])}))"
        if k < 0.66:
            name = r.choice(["sin", "cos", "tanh", "exp", "sqrt"])
            a = self.expr(scope, depth - 1)
            if name == "exp":
                a = r.choice([f"math.sin({a})", f"math.tanh({a})", f"-({a} * {a})"])
                self.features.add("exp")
            elif name == "sqrt":
                a = f"{a} * {a} + {r.choice([0.5, 1.0])}"
                self.features.add("sqrt")
            return f"math.{name}({a})"
        if k < 0.71:
            self.features.add("power")
            return f"({self.expr(scope, depth - 2)}) ** {r.choice([2, 2, 3])}"
        if k < 0.77:
            self.features.add("min/max")
            a, b = self.expr(scope, depth - 1), self.expr(scope, depth - 1, r.random() < 0.3)
            if a == b:  # always a tie
                b = f"({b} + {r.choice([0.5, -0.5])})"
            return f"{r.choice(['min', 'max'])}({a}, {b})"
        if k < 0.81:
            self.features.add("abs")
            return f"abs({self.expr(scope, depth - 1)})"
        if k < 0.85:
            self.features.add("conditional expression")
            a, b = self.expr(scope, depth - 1), self.expr(scope, depth - 1, r.random() < 0.3)
            if r.random() < 0.5:
                a, b = b, a
            return f"({a} if {self.fcond(scope, 1)} else {b})"
        callable_ = [h for h in self.helpers if h.kind != "pair" and (scope.helper is None or h.kind != "array")]
        if callable_ and (scope.helper is None or scope.helper.kind != "array"):
            h = r.choice(callable_)
            return self.call(h, scope, depth)
        return self.atom(scope, literal)

    def call(self, h: Helper, scope: Scope, depth: int) -> str:
        args = [self.expr(scope, depth - 2) for _ in range(h.nparams)]
        self.features.add(f"helper ({h.kind})")
        if h.kind == "array":
            arrays = [p for p in self.params if p.role in ("in", "table", "inplace")]
            if self.two_d:
                arrays = [p for p in arrays if p.role in ("table",)] + [p for p in self.params if p.role == "row"]
            if not arrays:
                return self.atom(scope)
            p = self.r.choice(arrays)
            if p.role == "table":
                k = f"idx[{self.I()}]" if self.idx else f"{'(i + j)' if self.two_d else 'i'} % {p.name}.shape[0]"
            elif p.role == "row":
                k = "i"
            else:
                k = "i" if (not self.idx or p.role == "inplace" or self.r.random() < 0.5) else "idx[i]"
            args = [p.name, k] + args
        if h.kind == "recursive" or h.counted:
            opts = ["0", "1", "3"]
            if scope.helper is None:
                opts += [f"steps[{self.I()}]"] * 2 if self.steps else []
                opts += [f"idx[{self.I()}] % 4"] if self.idx else []
            args.append(self.r.choice(opts))
        return f"{h.name}({', '.join(args)})"

    def fcond(self, scope: Scope, depth: int) -> str:
        """A comparison of floats (its distance from the tie is checked when the program runs)."""
        r = self.r
        op = r.choice("<>")
        if r.random() < 0.5:
            return f"{self.expr(scope, depth)} {op} {self.expr(scope, depth)}"
        return f"{self.expr(scope, depth)} {op} {r.choice([-0.5, 0.0, 0.25, 0.5, 1.0])}"

    def icond(self, scope: Scope) -> str:
        r = self.r
        opts = [f"i == {r.randint(0, 4)}", f"i % {r.randint(2, 4)} == {r.randint(0, 1)}"]
        if self.two_d:
            opts.append(f"j == {r.randint(0, 2)}")
        if self.steps:
            opts.append(f"steps[{self.I()}] > {r.randint(1, 4)}")
        if self.idx:
            opts.append(f"idx[{self.I()}] == {r.randint(0, 2)}")
        for v in scope.ints:
            opts += [f"{v} == {r.randint(0, 2)}", f"{v} >= {r.randint(1, 3)}"]
        return r.choice(opts)

    def cond(self, scope: Scope) -> str:
        r = self.r
        if r.random() < 0.15:
            self.features.add("and/or")
            return f"{self.cond(scope)} {r.choice(['and', 'or'])} {self.cond(scope)}"
        return self.fcond(scope, 2) if r.random() < 0.65 else self.icond(scope)

    # -- bounded updates (loops) --

    def factor(self, scope):
        """A multiplier of magnitude at most 0.9."""
        r = self.r
        k = r.random()
        if k < 0.2:
            return repr(r.choice([0.5, 0.75, -0.5, 0.9]))
        e = self.expr(scope, 2)
        if k < 0.45:
            return f"0.7 * math.tanh({e})"
        if k < 0.65:
            return f"math.cos({e}) * 0.5"
        if k < 0.85:
            return f"0.75 / ({e} * {e} + 1.0)"
        return f"math.sin({e}) * -0.8"

    def term(self, scope):
        """An added term of magnitude at most 1."""
        r = self.r
        k = r.random()
        e = self.expr(scope, 2)
        if k < 0.5:
            return f"math.{r.choice(['sin', 'tanh', 'cos'])}({e})"
        if k < 0.7:
            return f"{e} / ({e} * {e} + 1.0)"
        if k < 0.85:
            return f"0.25 * math.sin({e})"
        return f"math.tanh({e}) * math.cos({self.expr(scope, 2)})"

    def update(self, scope: Scope, a: str) -> str:
        """`a` updated so that it stays bounded however often the update runs."""
        r = self.r
        k = r.random()
        if k < 0.3:
            return f"{a} = {a} * {self.factor(scope)} + {self.term(scope)}"
        if k < 0.42:
            return f"{a} = math.tanh({a} * {self.factor(scope)} + {self.term(scope)})"
        if k < 0.52:
            return f"{a} = ({a} + {self.term(scope)}) * {self.factor(scope)}"
        if k < 0.64:
            return f"{a} *= {self.factor(scope)}"
        if k < 0.76:
            return f"{a} {r.choice('+-')}= {self.term(scope)}"
        if k < 0.84:
            return f"{a} /= ({self.expr(scope, 1)}) ** 2 + {r.choice([1.0, 2.0])}"
        self.features.add("min/max")
        if r.random() < 0.5:
            cap = r.choice([0.75, 1.5, 3.0])
            return f"{a} = min(max({a}, {-cap}), {cap})"
        which = r.choice(["min", "max"])
        step = f"{a} * {self.factor(scope)} + {self.term(scope)}"
        return f"{a} = {which}({step}, {r.choice([-0.5, 0.5, 1.0])})"

    # -- statements --

    def block(self, scope: Scope, count: int, depth: int) -> list:
        lines = []
        for _ in range(count):
            lines += self.statement(scope, depth)
        return lines or ["pass"]

    def statement(self, scope: Scope, depth: int) -> list:
        r = self.r
        in_loop = scope.loop > 0
        kinds = [("let", 3), ("set", 2 if scope.floats else 0), ("if", 1.5 if depth < 2 else 0),
                 ("near", 1.5 if depth < 2 and not scope.near and self.first.role == "in" else 0),
                 ("for", 1.5 if depth < 2 and scope.loop < 2 else 0),
                 ("while", 0.7 if depth < 2 and scope.floats else 0),
                 ("return", 0.5), ("write", 2 if self.by_role.get("out") or self.by_role.get("mirror") else 0),
                 ("atomic", 1.2 if self.by_role.get("acc") else 0),
                 ("inplace", 1.2 if self.by_role.get("inplace") else 0),
                 ("pair", 0.6 if any(h.kind == "pair" for h in self.helpers) else 0),
                 ("exit", 1.0 if in_loop else 0)]
        kind = r.choices([k for k, _ in kinds], [w for _, w in kinds])[0]
        if kind == "let":
            name = self.fresh("t")
            line = f"{name} = {self.expr(scope, 3)}"
            scope.floats.append(name)
            return [line]
        if kind == "set":
            a = r.choice(scope.floats)
            if len(scope.floats) > 1 and r.random() < 0.1:
                self.features.add("swap")
                b = r.choice([f for f in scope.floats if f != a])
                return [f"{a}, {b} = {b}, {a}"]
            if in_loop:
                return [self.update(scope, a)]
            if r.random() < 0.5:
                return [f"{a} = {self.expr(scope, 3)}"]
            return [f"{a} {r.choice('+-*')}= {self.expr(scope, 2)}"]
        if kind == "if":
            self.features.add("if/else")
            c = self.cond(scope)
            then = self.block(scope.child(), r.randint(1, 2), depth + 1)
            lines = [f"if {c}:"] + ["    " + l for l in then]
            if r.random() < 0.25:
                self.features.add("elif")
                lines += [f"elif {self.cond(scope)}:"] + ["    " + l for l in self.block(scope.child(), 1, depth + 1)]
            if r.random() < 0.7:
                other = self.block(scope.child(), r.randint(1, 2), depth + 1)
                lines += ["else:"] + ["    " + l for l in other]
            return lines
        if kind == "near":
            self.features.add("neighbours")
            if self.two_d:
                inside = ("i > 0 and i < nr - 1 and j > 0 and j < nc - 1", {(0, -1), (0, 1), (1, -1), (1, 1)})
                guard, near = r.choice([inside, inside,
                                        ("i > 0 and i < nr - 1", {(0, -1), (0, 1)}), ("j < nc - 1", {(1, 1)}),
                                        ("j > 1", {(1, -1), (1, -2)})])
            else:
                guard, near = r.choice([("i > 0 and i < n - 1", {(0, -1), (0, 1)}), ("i > 0", {(0, -1)}),
                                        ("i < n - 1", {(0, 1)}), ("i >= 1 and i + 1 < n", {(0, -1), (0, 1)}),
                                        ("i > 1 and i < n - 2", {(0, -2), (0, -1), (0, 1), (0, 2)}),
                                        ("i >= 2", {(0, -2)})])
            inner = scope.child(near=frozenset(near))
            lead = [self.stencil_line(inner)] if self.r_lines.random() < 0.5 else []
            body = lead + self.block(inner, r.randint(1, 3), depth + 1)
            lines = [f"if {guard}:"] + ["    " + l for l in body]
            if r.random() < 0.3:
                lines += ["else:"] + ["    " + l for l in self.block(scope.child(), 1, depth + 1)]
            return lines
        if kind == "for":
            return self.for_loop(scope, depth)
        if kind == "while":
            return self.while_loop(scope, depth)
        if kind == "return":
            self.features.add("early return")
            return [f"if {self.cond(scope)}:", "    return"]
        if kind == "exit":
            what = r.choice(["break", "break", "continue", "return"])
            self.features.add(what if what != "return" else "return in a loop")
            return [f"if {self.cond(scope)}:", f"    {what}"]
        if kind == "write":
            return [self.write(scope, in_loop)]
        if kind == "atomic":
            return [self.atomic(scope, in_loop)]
        if kind == "inplace":
            return [self.inplace(scope, in_loop)]
        if kind == "pair":
            h = r.choice([h for h in self.helpers if h.kind == "pair"])
            a, b = self.fresh("t"), self.fresh("t")
            line = f"{a}, {b} = {self.call(h, scope, 3)}"
            scope.floats += [a, b]
            return [line]
        raise AssertionError(kind)

    def write(self, scope: Scope, in_loop: bool) -> str:
        r = self.r
        p = r.choice(self.by_role.get("out", []) + self.by_role.get("mirror", []))
        target = f"{p.name}[{self.I()}]" if p.role == "out" else f"{p.name}[n - 1 - i]"
        if p.role == "mirror":
            self.features.add("mirrored write")
        if in_loop:
            k = r.random()
            if k < 0.6:
                return f"{target} += {self.term(scope)}"
            if k < 0.85 and p.role == "out":
                return f"{target} *= {self.factor(scope)}"
            return f"{target} -= {self.term(scope)}"
        k = r.random()
        if k < 0.55:
            return f"{target} = {self.expr(scope, 3)}"
        if k < 0.8:
            return f"{target} += {self.expr(scope, 3)}"
        if k < 0.9:
            return f"{target} -= {self.expr(scope, 2)}"
        return f"{target} *= {self.expr(scope, 2)}"

    def atomic(self, scope: Scope, in_loop: bool) -> str:
        r = self.r
        p = r.choice(self.by_role["acc"])
        where = {"mod": f"{'(i + j)' if self.two_d else 'i'} % {p.name}.shape[0]", "zero": "0", "i": "i", "j": "j",
                 "idx": f"idx[i] % {p.name}.shape[0]"}[p.how]
        if p.how == "zero" and p.shape[0] > 1:
            where = str(r.randrange(p.shape[0]))
        v = self.term(scope) if in_loop else self.expr(scope, 3)
        op = "atomic_add" if r.random() < 0.85 else "atomic_sub"
        self.features.add(op)
        return f"gpuc.{op}({p.name}, {where}, {v})"

    def inplace(self, scope: Scope, in_loop: bool) -> str:
        r = self.r
        p = self.by_role["inplace"][0]
        target = f"{p.name}[{self.I()}]"
        self.features.add("in-place update")
        k = r.random()
        if in_loop:
            if k < 0.5:
                return f"{target} *= {self.factor(scope)}"
            if k < 0.8:
                return f"{target} += {self.term(scope)}"
            return f"{target} = {target} * {self.factor(scope)} + {self.term(scope)}"
        if k < 0.4:
            return f"{target} *= {self.expr(scope, 2)}"
        if k < 0.7:
            return f"{target} += {self.expr(scope, 3)}"
        if k < 0.85:
            return f"{target} = {self.expr(scope, 3)}"
        return f"{target} /= ({self.expr(scope, 1)}) ** 2 + 1.0"

    def for_loop(self, scope: Scope, depth: int) -> list:
        r = self.r
        var = self.fresh("k")
        opts = ["3", "2"]
        if self.steps:
            opts += [f"steps[{self.I()}]"] * 4 + [f"steps[{self.I()}] + 1", f"steps[{self.I()}], 0, -1",
                                                   f"1, steps[{self.I()}] + 1"]
            self.features.add("run-time trip count")
        if r.random() < 0.15:
            opts = [f"int(2.0 + 2.0 * math.sin({self.expr(scope, 2)}))"]
            self.features.add("trip count from a float")
        if self.idx:
            opts.append(f"idx[{self.I()}] % 3 + 1")
        if scope.ints:
            opts += [scope.ints[-1], f"{scope.ints[-1]} + 1"]
        stop = r.choice(opts)
        if scope.loop:
            self.features.add("nested loop")
        lines = []
        # loop-carried floats: new accumulators before the loop, and the locals already there
        for _ in range(r.randint(0, 2)):
            a = self.fresh("a")
            lines.append(f"{a} = {self.expr(scope, 2)}")
            scope.floats.append(a)
        inner = scope.child(loop=scope.loop + 1, ints=scope.ints + (var,))
        if r.random() < 0.25:
            s = self.fresh("s")
            lines.append(f"{s} = c * 0.0")
            inner.floats.append(s)
            scope.floats.append(s)
            body = [f"{s} += 0.25"]
        else:
            body = []
        carried = list(scope.floats)
        chunks = []
        for _ in range(r.randint(1, 3)):
            if carried and r.random() < 0.6:
                chunks.append([self.update(inner, r.choice(carried))])
            else:
                chunks.append(self.statement(inner, depth + 1))
        if scope.loop == 0 and depth < 2 and r.random() < 0.2:
            chunks.insert(r.randint(0, len(chunks)), self.for_loop(inner.child(), depth + 1))
        if r.random() < 0.4:
            what = r.choice(["break", "break", "continue", "return"])
            self.features.add(what if what != "return" else "return in a loop")
            chunks.insert(r.randint(0, len(chunks)), [f"if {self.cond(inner)}:", f"    {what}"])
        body += [l for c in chunks for l in c]
        lines.append(f"for {var} in range({stop}):")
        lines += ["    " + l for l in body]
        self.features.add("for loop")
        return lines

    def while_loop(self, scope: Scope, depth: int) -> list:
        r = self.r
        a = r.choice(scope.floats)
        w = self.fresh("w")
        up = r.random() < 0.5
        limit = r.choice([0.5, 1.0, 2.0, 3.0]) * (1 if up else -1)
        bound = r.choice([4, 6, 8])
        inner = scope.child(loop=scope.loop + 1, ints=scope.ints + (w,))
        step = f"0.3 + 0.25 * math.sin({self.expr(inner, 2)})"
        body = [f"{w} += 1", f"{a} {'+' if up else '-'}= {step}"]
        for _ in range(r.randint(0, 2)):
            extra = self.update(inner, r.choice(scope.floats)) if r.random() < 0.5 else self._simple(inner)
            body.insert(r.randint(1, len(body)), extra)
        self.features.add("while loop")
        return [f"{w} = 0", f"while {a} {'<' if up else '>'} {limit} and {w} < {bound}:"] + ["    " + l for l in body]

    def _simple(self, scope):
        """A one-line statement for a while body."""
        opts = []
        if self.by_role.get("out") or self.by_role.get("mirror"):
            opts.append(lambda: self.write(scope, True))
        if self.by_role.get("acc"):
            opts.append(lambda: self.atomic(scope, True))
        if self.by_role.get("inplace"):
            opts.append(lambda: self.inplace(scope, True))
        if not opts:
            return self.update(scope, self.r.choice(scope.floats))
        return self.r.choice(opts)()

    # -- helpers --

    def helper(self, name: str, kind: str) -> Helper:
        r = self.r
        nparams = r.randint(1, 3) if kind != "array" else r.randint(0, 2)
        h = Helper(name, kind, nparams)
        params = [f"p{k}" for k in range(nparams)]
        scope = Scope(floats=list(params), helper=h, array_param=(kind == "array"))
        lines = []
        for k in range(r.randint(0, 2)):
            lines.append(f"q{k} = {self.expr(scope, 2)}")
            scope.floats.append(f"q{k}")
        if kind == "recursive":
            # a return before the recursive call: gpuc types it without an annotation; it stays a call
            # (not inlined), whose gradient function the reverse sweep calls
            lines.append("if d <= 0:")
            lines.append(f"    return {self.expr(scope, 2)}")
            args = [r.choice([p, f"{p} * 0.9", f"math.tanh({self.expr(scope, 1)})"]) for p in params]
            lines.append(f"return {name}({', '.join(args + ['d - 1'])}) * {self.factor(scope)} + {self.term(scope)}")
        elif kind == "loop":
            acc = "acc"
            lines.append(f"acc = {self.expr(scope, 2)}")
            inner = scope.child(loop=1, ints=("m",))
            if r.random() < 0.5:
                h.counted = True
                lines.append("for m in range(count):")
            else:
                lines.append(f"for m in range({r.choice([2, 3, 4])}):")
            lines.append("    " + self.update(inner, acc))
            if r.random() < 0.4:
                lines.append(f"    if {self.fcond(inner.child(floats=inner.floats + [acc]), 1)}:")
                lines.append("        break")
            scope.floats.append(acc)
            lines.append(f"return {acc} * {self.expr(scope, 1)}" if r.random() < 0.5 else f"return {acc}")
        else:
            if r.random() < 0.4 and scope.floats:
                self.features.add("helper with early return")
                lines.append(f"if {self.fcond(scope, 1)}:")
                lines.append(f"    return {self.result(scope, kind)}")
            lines.append(f"return {self.result(scope, kind)}")
        head = ", ".join((["a", "k"] if kind == "array" else []) + params + (["d"] if kind == "recursive" else [])
                         + (["count"] if h.counted else []))
        h.source = "@gpuc.func\n" + f"def {name}({head}):\n" + "".join("    " + l + "\n" for l in lines)
        return h

    def result(self, scope, kind):
        if kind == "pair":
            return f"{self.expr(scope, 2)}, {self.expr(scope, 2)}"
        return self.expr(scope, 3)

    # -- the kernel --

    def kernel(self) -> str:
        r = self.r
        for k in range(r.choice([0, 0, 1, 1, 2, 3])):
            kind = r.choice(["plain", "plain", "loop", "array", "pair", "recursive"])
            if kind == "array" and self.two_d and not any(p.role in ("table", "row") for p in self.params):
                kind = "plain"
            self.helpers.append(self.helper(f"h{k}", kind))
        if self.two_d:
            lines = ["j, i = gpuc.index(0), gpuc.index(1)" if self.swapped else "i, j = gpuc.index(0), gpuc.index(1)"]
            if self.swapped:
                self.features.add("2-D launch, index(0) along the rows")
        else:
            lines = ["i = gpuc.index()"]
        if self.two_d:
            lines += [f"nr = {self.first.name}.shape[0]", f"nc = {self.first.name}.shape[1]"]
        else:
            lines.append(f"n = {self.first.name}.shape[0]")
            if self.extra:
                lines.append("if i >= n:")
                lines.append("    return")
                self.features.add("more items than elements")
        scope = Scope(floats=[])
        for _ in range(r.randint(1, 2)):
            lines += self.statement_let(scope)
        lines += self.row_reads(scope)
        lines += self.block(scope, r.randint(2, 6), 0)
        # every output is written at least once, at the top level
        for p in self.params:
            if p.role in ("out", "mirror"):
                target = f"{p.name}[{self.I()}]" if p.role == "out" else f"{p.name}[n - 1 - i]"
                lines.append(f"{target} {r.choice(['=', '=', '+='])} {self.expr(scope, 3)}")
            elif p.role == "acc":
                self.by_role["acc"] = [p]
                lines.append(self.atomic(scope, False))
                self.by_role["acc"] = [q for q in self.params if q.role == "acc"]
        if self.by_role.get("inplace") and not any(l.startswith("u[") for l in lines) and r.random() < 0.7:
            lines.append(self.inplace(scope, False))
        params = ", ".join(p.name for p in self.params)
        body = "".join("    " + l + "\n" for l in lines)
        if self.two_d:
            self.features.add("2-D launch")
        self.features.add(np.dtype(self.dtype).name)
        return ("import math\n\nimport gpuc\n\n\n" + "".join(h.source + "\n\n" for h in self.helpers)
                + f"@gpuc.kernel\ndef kernel({params}):\n" + body)

    def statement_let(self, scope):
        name = self.fresh("t")
        line = f"{name} = {self.expr(scope, 3)}"
        scope.floats.append(name)
        return [line]

    # -- the data --

    def data(self, nrng: np.random.Generator):
        values, seeds = {}, {}
        dt = self.dtype
        for p in self.params:
            if p.role == "c":
                values["c"] = dt(nrng.uniform(0.3, 1.3))
                continue
            shape = (self.R, self.C) if self.two_d else (self.n,)
            if p.role == "idx":
                top = self.gmax if nrng.random() < 0.7 else min(self.gmax, 3)
                values[p.name] = nrng.integers(0, top, shape).astype(self.int_type)
                continue
            if p.role == "steps":
                values[p.name] = nrng.integers(0, 6, shape).astype(self.int_type)
                continue
            lo, hi = {"in": (-1.5, 1.5) if nrng.random() < 0.5 else (0.2, 1.5)}.get(p.role, (-1.0, 1.0))
            values[p.name] = nrng.uniform(lo, hi, p.shape).astype(dt)
            zero = p.role in ("in", "table", "row", "col") and nrng.random() < 0.3
            seeds[p.name] = np.zeros(p.shape, dt) if zero else nrng.standard_normal(p.shape).astype(dt)
        return values, seeds


def generate(seed: int, index: int, attempts: int = 200) -> Case:
    """Program `index` of stream `seed` (deterministic), defined at its arguments."""
    for attempt in range(attempts):
        rng = random.Random(f"adjoints-{seed}-{index}-{attempt}")
        g = Gen(rng, f"adjoints-{seed}-{index}-{attempt}")
        g.layout_program()
        source = g.kernel()
        values, seeds = g.data(np.random.default_rng(rng.getrandbits(64)))
        launch = g.launch
        # from a stream of its own, so that the other programs are the ones the seed gave before
        spread = random.Random(f"adjoints-{seed}-{index}-{attempt}-spread")
        if not g.two_d and spread.random() < 0.7 and only_written(source, g.params):
            launch = (g.launch, spread.choice([2, 3]))
            g.features.add("launch over a dimension the kernel does not read")
        case = Case(seed, index, source, g.dtype, launch, g.params, values, seeds, set(g.features))
        try:
            case.python = probe(source, case)
        except Undefined:
            continue
        return case
    raise RuntimeError(f"no defined adjoint program for seed {seed} index {index}")


def only_written(source: str, params) -> bool:
    """Whether the kernel only writes its outputs, with `=` (no `+=`, no read, no in-place array): work items
    that differ only along a dimension the kernel does not read then write the same values, and a launch
    over such a dimension (the 1-D program launched over (n, m)) is defined. Each output element is written
    by m work items at once, and its seed must reach the derivative once."""
    if any(p.role == "inplace" for p in params):
        return False
    names = {p.name for p in params if p.role in ("out", "mirror")}
    tree = ast.parse(source)
    written = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Subscript) \
                and isinstance(node.target.value, ast.Name) and node.target.value.id in names:
            return False
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                    written.add(id(target.value))
    return not any(isinstance(node, ast.Name) and node.id in names and id(node) not in written
                   for node in ast.walk(tree))


# -- the Python run: ties, overflow, bounds ----------------------------------------------------------------

class _Probe(ast.NodeTransformer):
    """Comparisons become `_cmp(a, "op", b)`; min, max, abs and int calls `_min`, `_max`, `_abs`, `_int`;
    imports go."""

    def visit_Import(self, node):
        return None

    def visit_Compare(self, node):
        self.generic_visit(node)
        if len(node.ops) != 1:
            raise Undefined("chained comparison")
        op = {ast.Lt: "<", ast.Gt: ">", ast.LtE: "<=", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}[type(node.ops[0])]
        return ast.Call(ast.Name("_cmp", ast.Load()), [node.left, ast.Constant(op), node.comparators[0]], [])

    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in ("min", "max", "abs", "int"):
            node.func = ast.Name("_" + node.func.id, ast.Load())
        return node


def _is_float(v):
    return isinstance(v, (float, np.floating))


def _near(a, b):
    return abs(a - b) <= MARGIN * max(abs(a), abs(b), 1.0)


def _cmp(a, op, b):
    if _is_float(a) or _is_float(b):
        if op in ("==", "!="):
            raise Undefined("float equality")
        if _near(float(a), float(b)):
            raise Undefined("comparison near its tie")
    return {"<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b, "==": a == b, "!=": a != b}[op]


def _min(a, b):
    if _near(float(a), float(b)):
        raise Undefined("min near its tie")
    return min(a, b)


def _max(a, b):
    if _near(float(a), float(b)):
        raise Undefined("max near its tie")
    return max(a, b)


def _abs(a):
    if _near(float(a), 0.0):
        raise Undefined("abs near 0")
    return abs(a)


def _int(a):
    if _is_float(a) and _near(float(a), float(round(a))):
        raise Undefined("int() near an integer")
    return int(a)


def _bounded(fn):
    def call(x):
        if abs(x) > ARGUMENT_BOUND:
            raise Undefined(f"{fn.__name__} of a large argument")
        return fn(x)
    return call


_MATH = types.SimpleNamespace(**{k: getattr(math, k) for k in dir(math) if not k.startswith("_")})
for _name in ("sin", "cos", "tanh", "exp"):
    setattr(_MATH, _name, _bounded(getattr(math, _name)))


class _Items:
    """gpuc as the Python run of a kernel sees it."""

    def __init__(self):
        self.at = (0, 0)

    def index(self, dim=0):
        return self.at[dim]

    @staticmethod
    def func(f):
        return f

    kernel = func

    @staticmethod
    def atomic_add(a, k, v):
        old = a[k]
        a[k] = old + v
        return old

    @staticmethod
    def atomic_sub(a, k, v):
        old = a[k]
        a[k] = old - v
        return old


def probe(source: str, case: Case) -> dict:
    """Run the program in Python on float64 copies of its arguments; raises Undefined where it comes near a
    point where it is not differentiable, overflows or leaves an output beyond BOUND. Returns the float
    arrays after the launch."""
    try:
        tree = _Probe().visit(ast.parse(source))
    except SyntaxError as exc:
        raise Undefined(f"syntax: {exc}") from exc
    items = _Items()
    ns = {"gpuc": items, "math": _MATH, "_cmp": _cmp, "_min": _min, "_max": _max, "_abs": _abs, "_int": _int}
    exec(compile(ast.fix_missing_locations(tree), "<probe>", "exec"), ns)
    kernel = ns["kernel"]
    args = []
    for p in case.params:
        v = case.values[p.name]
        if p.role == "c":
            args.append(float(v))
        elif p.is_float:
            args.append(v.astype(np.float64))
        else:
            args.append(v.copy())
    launch = case.launch if isinstance(case.launch, tuple) else (case.launch,)
    try:
        with np.errstate(all="raise"):
            for at in np.ndindex(*launch[::-1]):  # dimension 0 fastest
                items.at = tuple(int(x) for x in at[::-1]) + (0,)
                kernel(*args)
    except (OverflowError, FloatingPointError, ZeroDivisionError, ValueError) as exc:
        raise Undefined(f"{type(exc).__name__}: {exc}") from exc
    except (NameError, UnboundLocalError, TypeError, IndexError, RecursionError) as exc:
        raise Undefined(f"not a program: {type(exc).__name__}: {exc}") from exc
    out = {}
    for p, a in zip(case.params, args):
        if p.is_float:
            if not np.all(np.isfinite(a)) or np.max(np.abs(a), initial=0.0) > BOUND:
                raise Undefined("an output beyond the bound")
            out[p.name] = a
    return out


# -- running gpuc -----------------------------------------------------------------------------------------

def _make(values: np.ndarray, layout: str) -> np.ndarray:
    """`values` as an array of the given layout (same shape, values and dtype)."""
    if layout == "step2":
        base = np.zeros((values.shape[0] * 2,), values.dtype)
        view = base[::2]
    elif layout == "F":
        view = np.zeros(values.shape, values.dtype, order="F")
    elif layout == "cols":
        base = np.zeros((values.shape[0], values.shape[1] * 2), values.dtype)
        view = base[:, 1::2]
    else:
        view = np.zeros(values.shape, values.dtype)
    view[...] = values
    return view


def _args(case: Case, dtype=None, adjoint=False, jitter=None):
    """The launch arguments (fresh copies): with the shadows (holding the seeds) after float arrays for the
    adjoint; float arrays and c in `dtype` (default the program's); float array values moved by a relative
    JITTER at random where `jitter` (a NumPy generator) is given."""
    dtype = dtype or case.dtype
    out = []
    for p in case.params:
        v = case.values[p.name]
        if p.role == "c":
            out.append(dtype(v))
        elif p.is_float:
            v = v.astype(dtype)
            if jitter is not None:
                v = v * (1.0 + JITTER * jitter.uniform(-1.0, 1.0, v.shape))
            out.append(_make(v, p.layout))
            if adjoint:
                out.append(_make(case.seeds[p.name].astype(dtype), p.layout))
        else:
            out.append(v.copy())
    return out


@dataclass
class Run:
    primal: dict = field(default_factory=dict)       # name -> array after a plain launch
    adjoint: dict = field(default_factory=dict)      # threads -> (arrays after, shadows after), by name
    fd: dict = field(default_factory=dict)           # name -> gradient by differences
    adjoint64: dict = field(default_factory=dict)    # float32 programs: name -> shadow after a float64 launch
    wobble: dict = field(default_factory=dict)       # name -> how far those move with the arguments (JITTER)
    primal_wobble: dict = field(default_factory=dict)  # name -> how far a float64 primal launch's arrays move so
    fd_noise: dict = field(default_factory=dict)     # name -> the differences' rounding, per element
    error: str | None = None
    item_by_item: dict = field(default_factory=dict)  # name -> array after a launch without vectorization
    adjoint_item_by_item: tuple = ()  # (arrays after, shadows after) of the adjoint without vectorization, 1 thread
    tangent: tuple = ()  # (arrays after, tangents after, directions) of gpuc.tangent(kernel) on float64 arguments
    kept: dict = field(default_factory=dict)  # threads -> (arrays after, shadows after) of gpuc.adjoint(kernel,
    #                                           primal_writes=False), the arrays it leaves as they are holding NaN
    kept_names: tuple = ()  # those arrays, as the compiled adjoint's trace names them


def load(case: Case, workdir: Path, tag: str = ""):
    path = workdir / f"adjoint_{case.seed}_{case.index}{tag}.py"
    path.write_text(case.source)
    spec = importlib.util.spec_from_file_location(f"gpuc_adjoint_{case.seed}_{case.index}{tag}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kernel


def execute(case: Case, workdir: Path, tag: str = "") -> Run:
    """Launch the program's primal, its adjoint with 1, 2 and 3 threads, and the differences."""
    import gpuc
    run = Run()
    names = [p.name for p in case.params]
    try:
        kernel = load(case, workdir, tag)
        args = _args(case)
        kernel.launch(case.launch, *args, device="cpu", threads=1)
        run.primal = dict(zip(names, args))
        if case.dtype is np.float32:
            # how far the float64 primal's arrays move when the arguments move by a few float32 ulps: the float32
            # launch differs from the float64 Python run by as much where the program is ill-conditioned (the
            # sine of a cube near 5, updated in a loop), for reasons of precision alone
            plain = _args(case, np.float64)
            kernel.launch(case.launch, *plain, device="cpu", threads=1)
            jitter = np.random.default_rng(case.index + 1)
            for _ in range(2):
                moved = _args(case, np.float64, jitter=jitter)
                kernel.launch(case.launch, *moved, device="cpu", threads=1)
                for name, before, after in zip(names, plain, moved):
                    if isinstance(before, np.ndarray) and before.dtype == np.float64:
                        run.primal_wobble[name] = max(run.primal_wobble.get(name, 0.0),
                                                      float(np.max(np.abs(after - before), initial=0.0)))
        scalar_args = _args(case)
        item_by_item(kernel).launch(case.launch, *scalar_args, device="cpu", threads=1)
        run.item_by_item = dict(zip(names, scalar_args))
        adjoint = gpuc.adjoint(kernel)
        for threads in (1, 2, 3):
            run.adjoint[threads] = _adjoint(adjoint, case, threads)
        run.adjoint_item_by_item = _adjoint(gpuc.adjoint(item_by_item(kernel)), case, 1)
        kept = gpuc.adjoint(kernel, primal_writes=False)
        run.kept_names = _kept_names(kept, case)
        for threads in (1, 2):
            run.kept[threads] = _adjoint(kept, case, threads, nan=run.kept_names)
        if case.dtype is np.float32:
            # the kernel is generic in its float type: the float64 adjoint is compared with the differences,
            # the float32 one with it, within how far it moves when the arguments move by a few float32 ulps
            run.adjoint64 = _adjoint(adjoint, case, 1, np.float64)[1]
            jitter = np.random.default_rng(case.index)
            for _ in range(2):
                moved = _adjoint(adjoint, case, 1, np.float64, jitter)[1]
                for name, g in moved.items():
                    run.wobble[name] = np.maximum(run.wobble.get(name, 0.0), np.abs(g - run.adjoint64[name]))
        run.tangent = _tangent(gpuc.tangent(kernel), case)
        run.fd, run.fd_noise = differences(kernel, case)
    except Exception as exc:  # noqa: BLE001 -- every error on a defined program is a finding
        first = str(exc).strip().splitlines()
        run.error = f"{type(exc).__name__}: {first[0] if first else ''}"
        run.error_full = f"{type(exc).__name__}: {exc}"
    return run


def _adjoint(adjoint, case: Case, threads: int, dtype=None, jitter=None, nan=()):
    """The arrays and the shadows after an adjoint launch, by name; the arrays named in `nan` hold NaN before it."""
    full = _args(case, dtype, True, jitter)
    for name in nan:
        _by_name(case, full)[0][name][...] = np.nan
    adjoint.launch(case.launch, *full, device="cpu", threads=threads)
    return _by_name(case, full)


def _kept_names(adjoint, case: Case) -> tuple:
    """The arrays `gpuc.adjoint(kernel, primal_writes=False)` leaves as they are, as its trace names them."""
    result = adjoint.inspect(*_args(case, None, True), device="cpu", threads=1)
    found = [dict(r.details).get("outputs kept") for r in result.trace.transformations]
    return next((k for k in found if k is not None), ())


def _by_name(case: Case, full: list):
    """The arrays of a launch with a shadow after each float array, and the shadows, by name."""
    arrays, shadows, k = {}, {}, 0
    for p in case.params:
        arrays[p.name] = full[k]
        k += 1
        if p.is_float:
            shadows[p.name] = full[k]
            k += 1
    return arrays, shadows


def _tangent(tangent, case: Case):
    """The arrays and the tangents after a tangent kernel launch on float64 arguments (one thread), and the
    directions the tangents started from (random, one per element of every float array), by name."""
    rng = np.random.default_rng(case.index + 1)
    full, directions = [], {}
    for p, value in zip(case.params, _args(case, np.float64)):
        full.append(value)
        if p.is_float:
            d = rng.standard_normal(value.shape)
            directions[p.name] = d
            full.append(_make(d, p.layout))
    tangent.launch(case.launch, *full, device="cpu", threads=1)
    return (*_by_name(case, full), directions)


def differences(kernel, case: Case, scale: float = 1.0, only=None):
    """dL/d(every element of every float array) by four-point central differences of the primal kernel on
    float64 arguments, L = Σ seed · arrays after; and each entry's rounding error estimate."""
    base = _args(case, np.float64)
    floats = [k for k, p in enumerate(case.params) if p.is_float]
    seeds = [case.seeds[case.params[k].name].astype(np.float64) for k in floats]
    grads, noise = {}, {}

    def after(args):
        copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        kernel.launch(case.launch, *copies, device="cpu", threads=1)
        return [copies[k] for k in floats]

    for k in floats:
        name = case.params[k].name
        if only is not None and name not in only:
            continue
        g = np.zeros(base[k].shape)
        r = np.zeros(base[k].shape)
        for e in np.ndindex(*base[k].shape):
            x0 = float(base[k][e])
            h = scale * STEP * 2.0 ** math.floor(math.log2(max(1.0, abs(x0))))
            outs = {}
            for s in (1, -1, 2, -2):
                args = list(base)
                args[k] = base[k].copy()
                args[k][e] = x0 + s * h
                outs[s] = after(args)
            num, mag = 0.0, 0.0
            for q, seed in enumerate(seeds):
                d = 8.0 * (outs[1][q] - outs[-1][q]) - (outs[2][q] - outs[-2][q])
                num += float(np.sum(seed * d))
                size = 8.0 * (np.abs(outs[1][q]) + np.abs(outs[-1][q])) + np.abs(outs[2][q]) + np.abs(outs[-2][q])
                mag += float(np.sum(np.abs(seed) * np.where(d != 0, size, 0.0)))
            g[e] = num / (12.0 * h)
            r[e] = 4.0 * EPS64 * mag / (12.0 * h)
        grads[name], noise[name] = g, r
    return grads, noise


# -- judging ------------------------------------------------------------------------------------------------

@dataclass
class Finding:
    case: Case
    kind: str          # "exception", "gradient", "schedule", "primal", "python", "vectorize", "tangent", "kept"
    array: str         # the array it is about ("" for exceptions)
    detail: str
    ratio: float = 0.0

    @property
    def role(self):
        p = next((p for p in self.case.params if p.name == self.array), None)
        return p.role if p is not None else ""

    def bucket(self) -> str:
        if self.kind in ("exception", "crash", "hang"):
            first = re.sub(r"^\S+\.py:\d+:\d+: ", "", self.detail.splitlines()[0])
            first = re.sub(r"@\S+", "@_", first)
            first = re.sub(r"'[^']*'|\b[a-z]+\d+\b|\d+", "_", first)
            return f"{self.kind}: {first[:100]}"
        return f"{self.kind}: {self.role}"

    def describe(self) -> str:
        c = self.case
        return (f"== adjoints seed {c.seed} program {c.index}: {self.kind}"
                + (f" (array {self.array}, {self.role})" if self.array else "") + " ==\n"
                + f"{self.detail}\n-- reproducer --\n{script(c)}")


@dataclass
class Stats:
    """The worst agreement seen, as a fraction of the tolerance and as a relative error."""
    worst: dict = field(default_factory=lambda: Counter())

    def note(self, key, value):
        if value > self.worst.get(key, -1.0):  # (a check that ran shows, 0 where all was equal)
            self.worst[key] = value


def _where(e):
    return list(e) if len(e) > 1 else e[0]


def judge(case: Case, run: Run, stats: Stats | None = None, skip=()) -> list[Finding]:
    """The findings on one program's run; the arrays in `skip` are not compared with the differences."""
    stats = stats or Stats()
    if run.error is not None:
        return [Finding(case, "exception", "", getattr(run, "error_full", run.error))]
    dt = case.dtype
    findings = []
    floats = case.arrays()
    # the primal with and without vectorization across work items: bit for bit
    for name, want in run.item_by_item.items():
        diffs = vector_differences([run.primal[name]], [want])
        if diffs:
            findings.append(Finding(case, "vectorize", name, "the vectorized primal launch and the one without "
                                    "vectorization differ:\n" + "\n".join(diffs[:10])))
    # the adjoint with and without vectorization across work items, on one thread: the arrays after it bit for
    # bit; the shadows as closely as other schedules (adds of several items into one element, in lanes, in
    # another order: gpuc/plugins/vectorize/memory.py)
    if run.adjoint_item_by_item:
        arrays, shadows = run.adjoint[1]
        for name, want in run.adjoint_item_by_item[0].items():
            diffs = vector_differences([arrays[name]], [want])
            if diffs:
                findings.append(Finding(case, "vectorize", name, f"the vectorized adjoint launch and the one without "
                                        f"vectorization leave {name} different:\n" + "\n".join(diffs[:10])))
        for name, want in run.adjoint_item_by_item[1].items():
            got, want = shadows[name].astype(np.float64), want.astype(np.float64)
            tol = RTOL_SCHEDULE[dt] * np.maximum(np.abs(want), float(np.max(np.abs(want), initial=0.0))) + 1e-300
            ratio = float(np.max(np.abs(got - want) / tol, initial=0.0))
            stats.note(f"vectorized adjoint {np.dtype(dt).name}", ratio * RTOL_SCHEDULE[dt])
            if not ratio <= 1.0:
                findings.append(Finding(case, "vectorize", name, _mismatch(
                    name, got, want, tol, "the launch without vectorization", "vectorized, threads=1"), ratio))
    # the primal: the Python run
    for p in floats:
        got, want = run.primal[p.name].astype(np.float64), case.python[p.name]
        scale = max(float(np.max(np.abs(want), initial=0.0)), 1.0)
        err = float(np.max(np.abs(got - want), initial=0.0)) / scale
        stats.note(f"python {np.dtype(dt).name}", err)
        if not err <= RTOL_PYTHON[dt] + 4.0 * run.primal_wobble.get(p.name, 0.0) / scale:
            e = np.unravel_index(int(np.argmax(np.abs(got - want))), got.shape)
            findings.append(Finding(case, "python", p.name, f"the primal launch left {p.name}[{_where(e)}] = "
                                    f"{got[e]!r}, Python computes {want[e]!r}", err / RTOL_PYTHON[dt]))
    # the arrays after the adjoint launches against the plain primal launch
    for threads, (arrays, _) in run.adjoint.items():
        for p in case.params:
            if p.role == "c":
                continue
            got, want = arrays[p.name], run.primal[p.name]
            if threads == 1 or not p.is_float:
                bad = ~((got == want) | (np.isnan(got) & np.isnan(want))) if p.is_float else got != want
                if np.any(bad):
                    e = tuple(int(x) for x in np.argwhere(bad)[0])
                    findings.append(Finding(case, "primal", p.name, f"after the adjoint launch (threads={threads}) "
                                            f"{p.name}[{_where(e)}] = {got[e]!r}, after the primal launch {want[e]!r}",
                                            math.inf))
            else:
                scale = float(np.max(np.abs(want), initial=0.0)) + 1e-300
                err = float(np.max(np.abs(got.astype(np.float64) - want), initial=0.0)) / scale
                stats.note(f"primal threads {np.dtype(dt).name}", err)
                if not err <= RTOL_SCHEDULE[dt]:
                    e = np.unravel_index(int(np.argmax(np.abs(got - want))), got.shape)
                    findings.append(Finding(case, "primal", p.name, f"after the adjoint launch (threads={threads}) "
                                            f"{p.name}[{_where(e)}] = {got[e]!r}, after the primal launch {want[e]!r}",
                                            err / RTOL_SCHEDULE[dt]))
    # shadows with one thread against the differences (float32 programs: the float64 launch's)
    serial = run.adjoint[1][1]
    top = max((float(np.max(np.abs(g), initial=0.0)) for g in run.fd.values()), default=0.0)
    float32 = dt is np.float32
    for p in floats:
        if p.name in skip:
            continue
        got = (run.adjoint64 if float32 else serial)[p.name]
        want, noise = run.fd[p.name], run.fd_noise[p.name]
        tol = RTOL_FD * np.maximum(np.abs(want), 0.01 * top) + noise + 1e-300
        ratio = float(np.max(np.abs(got - want) / tol, initial=0.0))
        stats.note("gradient", ratio * RTOL_FD)
        if not ratio <= 1.0:
            who = "float64 arguments, threads=1" if float32 else "threads=1"
            findings.append(Finding(case, "gradient", p.name, _mismatch(p.name, got, want, tol, "differences", who),
                                    ratio))
    if float32:  # the float32 shadows against the float64 ones
        top64 = max(float(np.max(np.abs(g), initial=0.0)) for g in run.adjoint64.values())
        for p in floats:
            got, want = serial[p.name].astype(np.float64), run.adjoint64[p.name]
            tol = RTOL_FLOAT32 * np.maximum(np.abs(want), 0.01 * top64) + 4.0 * run.wobble[p.name] + 1e-300
            ratio = float(np.max(np.abs(got - want) / tol, initial=0.0))
            stats.note("float32", ratio * RTOL_FLOAT32)
            if not ratio <= 1.0:
                findings.append(Finding(case, "float32", p.name, _mismatch(p.name, got, want, tol, "float64 launch"),
                                        ratio))
    # the tangent kernel: along directions d, Σ seed · (tangents after) is the derivative of L along d, which
    # the adjoint gives as Σ (shadows after) · d; its arrays after are the primal's (float64 programs: bit for bit)
    if run.tangent:
        arrays, tangents, directions = run.tangent
        shadows = run.adjoint64 if dt is np.float32 else serial  # the float64 adjoint
        along = sum(float(np.sum(case.seeds[p.name].astype(np.float64) * tangents[p.name])) for p in floats)
        pulled = sum(float(np.sum(shadows[p.name] * directions[p.name])) for p in floats)
        size = sum(float(np.sum(np.abs(case.seeds[p.name] * tangents[p.name]))) + float(np.sum(np.abs(
                   shadows[p.name] * directions[p.name]))) for p in floats)
        ratio = abs(along - pulled) / (RTOL_TANGENT * size + 1e-300)
        stats.note("tangent", ratio * RTOL_TANGENT)
        if not ratio <= 1.0:
            findings.append(Finding(case, "tangent", "", f"the tangent kernel's derivative along random directions, "
                                    f"Σ seed · tangents = {along!r}, differs from the adjoint's Σ shadows · directions "
                                    f"= {pulled!r} (tolerance {RTOL_TANGENT * size:.3g})", ratio))
        if dt is np.float64:
            for p in floats:
                diffs = vector_differences([arrays[p.name]], [run.primal[p.name]])
                if diffs:
                    findings.append(Finding(case, "primal", p.name, "after the tangent kernel's launch the arrays "
                                            "differ from the primal launch's:\n" + "\n".join(diffs[:10]), math.inf))
    # gpuc.adjoint(kernel, primal_writes=False): the arrays it leaves out keep the NaN they held (and it reaches
    # nothing else); every other array and every shadow as after gpuc.adjoint(kernel) on as many threads
    for threads, (arrays, shadows) in run.kept.items():
        base_arrays, base_shadows = run.adjoint[threads]
        who = f"gpuc.adjoint(kernel, primal_writes=False), threads={threads}"
        for name in run.kept_names:
            if not np.isnan(arrays[name]).all():
                findings.append(Finding(case, "kept", name, f"{who} wrote into {name}, an array it leaves as it is "
                                        f"(its trace says so)", math.inf))
        for name, got in list(arrays.items()) + [(f"the shadow of {n}", g) for n, g in shadows.items()]:
            if name in run.kept_names or not isinstance(got, np.ndarray):
                continue
            want = base_shadows[name[len("the shadow of "):]] if name.startswith("the shadow of ") else base_arrays[name]
            if threads == 1 or got.dtype.kind != "f":
                bad = ~((got == want) | (np.isnan(got) & np.isnan(want))) if got.dtype.kind == "f" else got != want
                ratio = math.inf if np.any(bad) else 0.0
            else:
                w = want.astype(np.float64)
                tol = RTOL_SCHEDULE[dt] * float(np.max(np.abs(w), initial=0.0)) + 1e-300
                bad = ~(np.abs(got.astype(np.float64) - w) <= tol)
                ratio = float(np.max(np.abs(got.astype(np.float64) - w), initial=0.0)) / tol
            if np.any(bad):
                e = tuple(int(x) for x in np.argwhere(bad)[0])
                findings.append(Finding(case, "kept", name, f"after {who}, {name}[{_where(e)}] = {got[e]!r}; after "
                                        f"gpuc.adjoint(kernel) {want[e]!r}", ratio))
    # more threads against one
    for threads in (2, 3):
        shadows = run.adjoint[threads][1]
        for p in floats:
            got, want = shadows[p.name].astype(np.float64), serial[p.name].astype(np.float64)
            tol = RTOL_SCHEDULE[dt] * np.maximum(np.abs(want), float(np.max(np.abs(want), initial=0.0))) + 1e-300
            ratio = float(np.max(np.abs(got - want) / tol, initial=0.0))
            stats.note(f"schedule {np.dtype(dt).name}", ratio * RTOL_SCHEDULE[dt])
            if not ratio <= 1.0:
                findings.append(Finding(case, "schedule", p.name,
                                        _mismatch(p.name, got, want, tol, "threads=1", f"threads={threads}"), ratio))
    return findings


def _mismatch(name, got, want, tol, what, who="threads=1"):
    bad = np.argwhere(~(np.abs(got - want) <= tol))
    lines = [f"shadow of {name} after the adjoint launch ({who}) against {what}, {len(bad)} of {got.size} entries "
             f"differ:"]
    for e in bad[:8]:
        e = tuple(int(x) for x in e)
        lines.append(f"  [{_where(e)}]: got {got[e]!r}, expected {want[e]!r} (tolerance {tol[e]:.3g})")
    return "\n".join(lines)


def refine(case: Case, run: Run, array: str, workdir: Path) -> bool:
    """Differences for `array` at smaller and smaller steps until two successive ones agree, the finer then
    replacing run.fd[array]; False when they never do (the program is not smooth enough at its arguments
    for differences to judge it)."""
    kernel = load(case, workdir, "_refine")
    top = max(float(np.max(np.abs(g), initial=0.0)) for g in run.fd.values())
    prev, prev_noise = run.fd[array], run.fd_noise[array]
    for scale in (0.25, 0.25 ** 2, 0.25 ** 3, 0.25 ** 4):
        fine, noise = differences(kernel, case, scale, only={array})
        tol = RTOL_FD * np.maximum(np.abs(prev), 0.01 * top) + noise[array] + prev_noise
        if np.all(np.abs(fine[array] - prev) <= 0.25 * tol):
            run.fd[array], run.fd_noise[array] = fine[array], noise[array]
            return True
        prev, prev_noise = fine[array], noise[array]
    return False


def check(case: Case, workdir: Path, stats: Stats | None = None, tag: str = "") -> tuple[list[Finding], list]:
    """(findings, the arrays differences could not judge). Where the shadow of an array does not match the
    differences, they are taken again at smaller steps (`refine`)."""
    run = execute(case, workdir, tag)
    rough = set()
    for f in judge(case, run):
        if f.kind == "gradient" and f.array not in rough and not refine(case, run, f.array, workdir):
            rough.add(f.array)
    return judge(case, run, stats, skip=rough), sorted(rough)


# -- reproducers and minimizing -------------------------------------------------------------------------

def _literal(a: np.ndarray, layout: str) -> str:
    dt = f"np.{a.dtype.name}"
    text = f"np.array({a.tolist()!r}, {dt})"
    return text if layout == "C" else f"make({text}, {layout!r})"


def script(case: Case) -> str:
    """A self-contained script: the program, its arguments and seeds, the adjoint launch and the shadows
    the differences give."""
    dt = f"np.{np.dtype(case.dtype).name}"
    lines = [case.source.rstrip(), "", "", "import numpy as np", ""]
    if any(p.layout != "C" for p in case.params):
        lines += ["def make(values, layout):  # a strided view holding values",
                  "    if layout == 'step2':",
                  "        view = np.zeros(values.shape[0] * 2, values.dtype)[::2]",
                  "    elif layout == 'F':",
                  "        view = np.zeros(values.shape, values.dtype, order='F')",
                  "    else:",
                  "        view = np.zeros((values.shape[0], values.shape[1] * 2), values.dtype)[:, 1::2]",
                  "    view[...] = values",
                  "    return view", ""]
    args = []
    for p in case.params:
        v = case.values[p.name]
        if p.role == "c":
            lines.append(f"c = {dt}({float(v)!r})")
            args.append("c")
        else:
            lines.append(f"{p.name} = {_literal(v, p.layout if p.is_float else 'C')}")
            args.append(p.name)
            if p.is_float:
                lines.append(f"d{p.name} = {_literal(case.seeds[p.name], p.layout)}  # the seed")
                args.append(f"d{p.name}")
    lines += [f"gpuc.adjoint(kernel).launch({case.launch!r}, {', '.join(args)}, threads=1)"]
    lines += [f"print('d{p.name}', d{p.name}.tolist())" for p in case.arrays()]
    return "\n".join(lines) + "\n"


def from_script(text: str) -> Case:
    """The Case a reproducer script (`script`) holds: its program, arguments and seeds (array roles from their
    names: x* inputs, u updated in place, y* outputs)."""
    source, _, rest = text.partition("\n\n\nimport numpy as np\n")
    data, _, launch = rest.partition("gpuc.adjoint(kernel).launch(")
    ns: dict = {"np": np}
    exec(data, ns)
    call = ast.parse("f(" + launch.splitlines()[0]).body[0].value
    params = [a.arg for a in next(n for n in ast.walk(ast.parse(source))
                                  if isinstance(n, ast.FunctionDef) and n.name == "kernel").args.args]
    arrays, values, seeds = [], {}, {}
    for name in params:
        v = ns[name]
        if not isinstance(v, np.ndarray):
            arrays.append(Arr(name, "c"))
            values[name] = v
            continue
        if v.dtype.kind != "f":
            arrays.append(Arr(name, "idx" if name == "idx" else "steps", v.shape))
            values[name] = v.copy()
            continue
        role = {"x": "in", "u": "inplace"}.get(name[0], "out")
        layout = "C"
        if not v.flags.c_contiguous:
            layout = "step2" if v.ndim == 1 else ("F" if v.flags.f_contiguous else "cols")
        arrays.append(Arr(name, role, v.shape, layout))
        values[name] = np.ascontiguousarray(v)
        seeds[name] = np.ascontiguousarray(ns["d" + name])
    dtype = next((type(v.flat[0]) for v in seeds.values()), np.float64)
    case = Case(0, 0, source + "\n", dtype, ast.literal_eval(call.args[0]), arrays, values, seeds)
    case.python = probe(case.source, case)
    return case


def minimize(finding: Finding, workdir: Path, timeout: float = 300.0) -> Finding:
    """The finding on the program with statements deleted (`support.fuzz.shrink`) while a finding of the same
    bucket remains, on the same arguments; each candidate runs in a worker process (a crash is a finding)."""
    from .fuzz import shrink
    case = finding.case
    found: dict = {}

    with Worker(workdir, timeout) as worker:
        def first_failing(sources):
            for text in sources:
                try:
                    compile(text, "<candidate>", "exec")
                except SyntaxError:
                    continue
                candidate = Case(case.seed, case.index, text, case.dtype, case.launch, case.params, case.values,
                                 case.seeds, case.features)
                for f in worker.findings(candidate, {"script": script(candidate)})[0]:
                    if f.bucket() == finding.bucket():
                        found[text] = f
                        return text
            return None

        text = shrink(case.source, first_failing)
    return found.get(text, finding)


# -- worker processes ------------------------------------------------------------------------------------

TESTS = Path(__file__).resolve().parents[1]


def serve(workdir: Path) -> None:
    """A worker: reads requests, JSON lines {"seed": S, "index": K} or {"script": reproducer}, and answers each
    with a line BEGIN and then a line RESULT {"findings": [[kind, array, detail, ratio]], "rough": [arrays],
    "stats": ..., "features": ...} (or {"undefined": why} for a script whose program is not defined)."""
    for number, line in enumerate(sys.stdin):
        request = json.loads(line)
        print("BEGIN", flush=True)
        stats = Stats()
        try:
            if "script" in request:
                case = from_script(request["script"])
            else:
                case = generate(request["seed"], request["index"])
        except Exception as exc:  # noqa: BLE001 -- a candidate of the minimizer that is not a defined program
            print("RESULT " + json.dumps({"undefined": f"{type(exc).__name__}: {exc}"}), flush=True)
            continue
        findings, rough = check(case, workdir, stats, tag=f"_w{number}")
        print("RESULT " + json.dumps({"findings": [[f.kind, f.array, f.detail, f.ratio] for f in findings],
                                      "rough": rough, "stats": dict(stats.worst),
                                      "features": sorted(case.features)}), flush=True)


class Worker:
    """A process running `serve`, restarted after it dies; a request it does not answer within `timeout`
    seconds, or dies on, is a "hang" or "crash" finding of that program."""

    def __init__(self, workdir: Path, timeout: float = 300.0):
        self.workdir, self.timeout = Path(workdir), timeout
        self.proc = None
        self.starts = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _start(self):
        self.starts += 1
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)])}
        self.err = self.workdir / f"worker{self.starts}.err"
        with open(self.err, "w") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "support.adjoints", "--serve", str(self.workdir)],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                                         env=env, cwd=TESTS)
        self.lines: queue.Queue = queue.Queue()

        def read(proc=self.proc, lines=self.lines):
            for line in proc.stdout:
                lines.put(line)
            lines.put(None)
        threading.Thread(target=read, daemon=True).start()

    def close(self):
        if self.proc is not None:
            try:
                self.proc.stdin.close()
                self.proc.wait(30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def ask(self, request: dict) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        except OSError:
            pass
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.proc.kill()
                self.proc.wait()
                self.proc = None
                return {"hang": f"no result after {self.timeout:.0f} s"}
            if line is None:
                code = self.proc.wait()
                self.proc = None
                how = f"signal {-code}" if code < 0 else f"exit status {code}"
                tail = self.err.read_text()[-3000:] if self.err.exists() else ""
                return {"crash": f"the process ended with {how}" + (f":\n{tail}" if tail.strip() else "")}
            if line.startswith("RESULT "):
                return json.loads(line[len("RESULT "):])

    def findings(self, case: Case, request: dict, stats: Stats | None = None) -> tuple[list[Finding], dict]:
        """The findings on `case` (the program the request names), and the worker's answer."""
        answer = self.ask(request)
        if stats is not None:
            for key, value in answer.get("stats", {}).items():
                stats.note(key, value)
        return _findings(case, answer), answer


# -- running many -------------------------------------------------------------------------------------------

@dataclass
class Report:
    programs: int = 0
    rough: list = field(default_factory=list)  # (index, arrays) differences could not judge
    findings: list = field(default_factory=list)
    stats: Stats = field(default_factory=Stats)
    features: Counter = field(default_factory=Counter)

    def summary(self) -> str:
        kinds = Counter(f.kind for f in self.findings)
        worst = ", ".join(f"{k} {v:.2g}" for k, v in sorted(self.stats.worst.items()))
        return (f"adjoints: {self.programs} programs, {len(self.findings)} findings "
                f"({', '.join(f'{n} {k}' for k, n in kinds.most_common()) or 'none'}), {len(self.rough)} not smooth "
                f"enough for differences; worst relative errors: {worst}")


def run(seed: int, count: int, start: int = 0, workdir: Path | None = None, progress=None,
        timeout: float = 300.0) -> Report:
    """Programs start .. start + count - 1 of stream `seed`, checked in a worker process."""
    report = Report()
    with tempfile.TemporaryDirectory(prefix="gpuc_adjoints_") as tmp:
        with Worker(Path(workdir or tmp), timeout) as worker:
            for index in range(start, start + count):
                answer = worker.ask({"seed": seed, "index": index})
                findings = []
                if any(k in answer for k in ("crash", "hang")) or answer.get("findings"):
                    findings = _findings(generate(seed, index), answer)  # the same program, for the reproducers
                for key, value in answer.get("stats", {}).items():
                    report.stats.note(key, value)
                report.features.update(answer.get("features", []))
                report.programs += 1
                if answer.get("rough"):
                    report.rough.append((index, answer["rough"]))
                report.findings += findings
                if progress:
                    progress(index, findings)
    return report


def _findings(case: Case, answer: dict) -> list[Finding]:
    for kind in ("crash", "hang"):
        if kind in answer:
            return [Finding(case, kind, "", answer[kind])]
    return [Finding(case, kind, array, detail, ratio) for kind, array, detail, ratio in answer.get("findings", [])]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--minimize", action="store_true", help="minimize one finding per group")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a program may take")
    parser.add_argument("--out", type=Path, help="write the findings here")
    parser.add_argument("--replay", type=Path, help="check the program of a reproducer script (minimized with "
                        "--minimize)")
    parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)  # a worker process (`serve`)
    ns = parser.parse_args(argv)
    if ns.serve:
        serve(ns.serve)
        return 0
    t0 = time.monotonic()
    if ns.replay:
        with tempfile.TemporaryDirectory(prefix="gpuc_adjoints_") as tmp:
            text = ns.replay.read_text()
            case = from_script(text)
            with Worker(Path(tmp), ns.timeout) as worker:
                findings, _ = worker.findings(case, {"script": text})
            for f in findings[:1] if ns.minimize else findings:
                print((minimize(f, Path(tmp), ns.timeout) if ns.minimize else f).describe())
            print(f"{len(findings)} findings")
        return 1 if findings else 0

    def progress(index, findings):
        for f in findings:
            print(f"program {index}: {f.kind} ({f.bucket()})", file=sys.stderr, flush=True)

    report = run(ns.seed, ns.count, ns.start, progress=progress, timeout=ns.timeout)
    text = [f.describe() for f in report.findings]
    if ns.minimize:
        seen = set()
        with tempfile.TemporaryDirectory(prefix="gpuc_adjoints_min_") as tmp:
            for f in report.findings:
                if f.bucket() in seen:
                    continue
                seen.add(f.bucket())
                text.append("== minimized ==\n" + minimize(f, Path(tmp), ns.timeout).describe())
    if ns.out:
        ns.out.write_text("\n".join(text))
    else:
        print("\n".join(text))
    for key, n in Counter(f.bucket() for f in report.findings).most_common():
        print(f"{n:5d}  {key}")
    if report.rough:
        print("not smooth enough for differences: "
              + ", ".join(f"program {k} ({', '.join(arrays)})" for k, arrays in report.rough))
    print(report.summary(), f"in {time.monotonic() - t0:.0f} s")
    return 1 if report.findings else 0


if __name__ == "__main__":
    sys.exit(main())
