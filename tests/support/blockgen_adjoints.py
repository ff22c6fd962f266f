"""Random float64 block kernels whose adjoints (`gpuc.adjoint`) are checked against central finite
differences of the primal: the derivative mode of `support.blockgen`.

A program is a `@gpuc.kernel` over 2-D arrays with one or two float inputs (`x0`, `x1`), an output `y0`
written at each item's own index (`=` or `+=`) and, in most programs, a second output `z`: at own index,
one element per block written by the block's item 0, or a small array every item adds into with
`gpuc.atomic_add`. Work items carry two floats `v`, `w` (items past the arrays start from constants and
take part anyway) through one to four random phases: shared-memory exchanges between barriers, tree
reductions and prefix sums in shared memory, warp shuffles of every kind (`shfl_idx` with computed
lanes, `up`, `down`, `xor`; in loops of constant trip count with loop-carried lanes and masks), votes,
ballots and barrier counts steering control flow (block-uniform where a barrier follows), local-array
temporaries, atomic adds into shared memory and into `z`, and (a quarter of the programs, from a random
stream of their own) a tiled kernel's reads along the item's row of `x0` and its column of `x1` in loops over
the other coordinate, launched then over four to six blocks along each dimension, so that two threads take
the blockwise schedule (`cpu.block_phases`), and (a quarter, from a third stream) the shared array in
`gpuc.shared.dynamic` memory, launched with `shared=` of 64 to 67 float64 (the adjoint keeps its shadow past
the primal's bytes, from the next multiple of 16), and (a quarter, from a fourth stream) a phase taking
derivatives inside the kernel of a func with a loop of per-item trip count (`grad`, `value_and_grad`,
`derivative`, `jvp`, `vjp`, and `grad` or `derivative` of a forward `derivative`), which the adjoint
differentiates again, and (a quarter, from a fifth stream) a loop over tiles of `x0` through shared memory,
counting by a constant up or down (`_Gen.stiles`: what each round's store overwrote the reverse loads
again, keeping no tape for it), and (a quarter, from a sixth stream) a row of consecutive shared elements
every item reads alike (`_Gen.srows`); their expressions are smooth (+ - * /, sin,
cos, tanh, exp of bounded arguments, divisions by 1.5 + cos or 1 + b*b). No primal races by
construction (each element written by one item between barriers, atomics into memory read only after a
barrier).

Definedness: every float comparison (the predicates of votes, ballots and barrier counts) also lives in
a probe variant of the kernel, which records each item's smallest distance from the tie in an extra
array; arguments whose run comes within MARGIN of a tie, or whose outputs leave BOUND, are drawn again
(then the program). The probe variant is the primal the differences launch.

Checks, per program and each of two random block shapes and launch sizes (partial blocks and warps),
with a random seed in the shadow of every float array: the shadows after one adjoint launch on one
thread equal the gradient of L = Σ seed · arrays after by four-point central differences (within
RTOL_FD of the larger of the entry and a hundredth of the largest entry of the program, plus the
differences' rounding; where they disagree, smaller steps are taken until two agree, as in
`support.adjoints.refine`); two threads match one within RTOL_SCHEDULE of the array's largest shadow
entry; the arrays after the adjoint launch equal a plain launch's (one thread exactly); the launch on one
thread equals the same launch without vectorization across work items (`support.vectorize.item_by_item`),
arrays and shadows bit for bit (an item adds into its own elements of the arrays' shadows, and into shared
shadows in the items' order: `gpuc-serial-items`).

    cd tests && ../.venv/bin/python -m support.blockgen_adjoints --seed 7 --count 200 [--out FILE]

runs programs in a worker process (`support.adjoints.Worker`: a crash or hang is a finding of its program)
and prints each finding with a self-contained reproducer script.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import queue
import random
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from support import adjoints
from support.vectorize import differences as vector_differences, item_by_item

SIZE = 64
WARP = 32
BLOCKS = ((1, 1), (3, 1), (8, 1), (32, 1), (40, 1), (64, 1), (45, 1), (4, 4), (8, 5), (2, 16), (1, 7), (6, 7))
KINDS = ("exchange", "exchange", "reduce", "prefix", "shuffle", "shuffle", "warploop", "warploop", "count",
         "vote", "ballot", "local", "satomic", "gatomic")
#: The share of programs with a tiled kernel's reads (`_Gen.tile`).
TILED = 0.25
#: The share of programs that take derivatives inside the kernel (`_Gen.derivs`).
DERIVS = 0.25
#: The share of programs with a loop over tiles of x0 through shared memory (`_Gen.stiles`).
STILED = 0.25
#: The share of programs whose items read one row of shared elements alike (`_Gen.srows`).
SROWS = 0.25
#: The phases with warp operations.
_WARP_KINDS = frozenset({"shuffle", "warploop", "vote", "ballot"})
#: The funcs those derivatives are of: a loop of per-item trip count (the reverse keeps a tape).
DERIV_FUNCS = """@gpuc.func
def fd(a, b, n):
    r = a
    for q in range(n):
        r = 0.5 * r + 0.75 * math.sin(r * b)
    return r


@gpuc.func
def fd2(a, b):
    return fd(a, b, 3)


@gpuc.func
def fd_slope(a, b, n):
    return gpuc.derivative(fd, a, b, n) * b


"""
#: The share of programs whose shared array `s` is `gpuc.shared.dynamic` memory, launched with SIZE float64
#: and 0 to 3 more (sizes no multiple of 16 among them: the adjoint's shadow starts at the next one).
DYNAMIC = 0.25
MARGIN = 1e-3           # a float predicate this close to its tie makes the arguments undefined
BOUND = 1e3             # outputs beyond this too
STEP = 2.0 ** -17       # finite-difference step, relative to max(1, |x|)
RTOL_FD = 1e-6
RTOL_SCHEDULE = 1e-12
EPS64 = float(np.finfo(np.float64).eps)
LITERALS = (0.5, 1.5, 2.0, -0.75, 0.25, 3.0, -1.25, 0.3)
FORMS = ("({a} + {b})", "({a} - {b})", "({a} * {b})", "({a} / (1.5 + math.cos({b})))", "({a} / (1.0 + {b} * {b}))",
         "math.sin({a})", "math.cos({a})", "math.tanh({a})", "math.exp(0.5 * math.sin({a}))")


@dataclass
class Program:
    seed: int
    inputs: int = 1
    extra: str | None = None                    # the second output: None, "own", "block", "acc"
    acc: int = 1                                # the length of an "acc" output
    lines: list = field(default_factory=list)   # (depth, text, probe only)
    kinds: list = field(default_factory=list)
    sites: int = 0                              # float predicates (rows of the probe array)
    dynamic: bool = False                       # `s` in gpuc.shared.dynamic memory (launched with `shared=`)
    derivs: bool = False                        # derivatives taken inside (DERIV_FUNCS defined)

    def source(self, probe: bool = False) -> str:
        params = ["x0"] + ["x1"] * (self.inputs == 2) + ["y0"] + ["z"] * bool(self.extra) + ["probe"] * probe
        body = "\n".join("    " * (depth + 1) + text for depth, text, only in self.lines if probe or not only)
        return f"""import math

import gpuc

SIZE = {SIZE}


{DERIV_FUNCS if self.derivs else ""}@gpuc.kernel
def kernel({', '.join(params)}):
    s = {"gpuc.shared.dynamic(gpuc.float64)" if self.dynamic else "gpuc.shared.array(SIZE, gpuc.float64)"}
    loc = gpuc.local.array(3, gpuc.float64)
    t = gpuc.thread_index(0) + gpuc.block_dim(0) * gpuc.thread_index(1)
    bd = gpuc.block_dim(0) * gpuc.block_dim(1)
    ln = gpuc.lane_index()
    ix, iy = gpuc.index(0), gpuc.index(1)
    gi = t + bd * (gpuc.block_index(0) + gpuc.grid_dim(0) * gpuc.block_index(1))
    inside = ix < y0.shape[1] and iy < y0.shape[0]
    v = x0[iy, ix] if inside else 0.25 + 0.01 * t
    w = {"x1[iy, ix] if inside else 0.5 - 0.02 * t" if self.inputs == 2 else "math.cos(v)"}
{body}
"""


# -- generating --------------------------------------------------------------------------------------

class _Gen:
    def __init__(self, rng: random.Random, p: Program, pending=()) -> None:
        self.rng, self.p = rng, p
        # without "updown": shfl_up/down only at a lane-dependent distance (the loop over the warp)
        self.kinds = ["idx", "xor"] if "updown" in pending else ["idx", "up", "down", "xor"]
        # without "count": a plain barrier before each barrier_count/all/any
        self.count_barrier = "count" in pending

    def expr(self, names, depth=None) -> str:
        rng = self.rng
        depth = rng.randint(1, 3) if depth is None else depth
        if depth == 0 or rng.random() < 0.25:
            return rng.choice(names) if rng.random() < 0.85 else repr(rng.choice(LITERALS))
        form = rng.choice(FORMS)
        return form.format(a=self.expr(names, depth - 1), b=self.expr(names, depth - 1))

    def mix(self, target: str, e: str) -> str:
        form = self.rng.choice(["0.5 * {t} + 0.5 * math.sin({e})", "math.tanh({e})", "0.75 * {t} + 0.25 * {e}",
                                "{t} + 0.25 * math.cos({e})"])
        return f"{target} = " + form.format(t=target, e=e)

    def update(self, names) -> str:
        """`v` or `w` updated from `names`, using `u` (the value just exchanged) where it is one of them."""
        e = self.expr(names)
        if "u" in names and "u" not in e:
            e = f"({e} {self.rng.choice('+-*')} u)"
        return self.mix(self.rng.choice("vvw"), e)

    def predicate(self, depth: int, names=("v", "w")) -> tuple[list, str]:
        """Lines computing a float `q{k}` and the probe's record of its distance from the tie, and the
        predicate's text."""
        k = self.p.sites
        self.p.sites += 1
        c = self.rng.choice((0.0, 0.2, -0.3, 0.5))
        return ([(depth, f"q{k} = {self.expr(list(names))}", False),
                 (depth, f"probe[{k}, gi] = min(probe[{k}, gi], abs(q{k} - {c}))", True)], f"q{k} > {c}")

    def exchange(self, d: int) -> list:
        rng = self.rng
        read = rng.choice([f"(t + {rng.randint(0, 5)}) % bd", "bd - 1 - t", f"(t * {rng.randint(2, 5)} + 1) % bd"])
        return [(d, f"s[t] = {self.expr(['v', 'w'])}", False), (d, "gpuc.barrier()", False),
                (d, f"u = s[{read}]", False), (d, "gpuc.barrier()", False), (d, self.update(["v", "u", "w"]), False)]

    def reduce(self, d: int) -> list:
        return [(d, f"s[t] = {self.expr(['v', 'w'])}", False), (d, "gpuc.barrier()", False), (d, "k = 1", False),
                (d, "while k < bd:", False), (d + 1, "if t % (2 * k) == 0 and t + k < bd:", False),
                (d + 2, "s[t] += s[t + k]", False), (d + 1, "gpuc.barrier()", False), (d + 1, "k *= 2", False),
                (d, "u = 0.1 * s[0]", False), (d, "gpuc.barrier()", False), (d, self.update(["v", "u", "w"]), False)]

    def prefix(self, d: int) -> list:
        rng = self.rng
        if rng.random() < 0.5:  # one step at a constant distance
            dist = rng.randint(1, 4)
            body = [(d, f"p = s[t - {dist}] if t >= {dist} else 0.0", False), (d, "gpuc.barrier()", False),
                    (d, "s[t] += p", False), (d, "gpuc.barrier()", False)]
        else:
            body = [(d, "e = 1", False), (d, "while e < bd:", False),
                    (d + 1, "p = s[t - e] if t >= e else 0.0", False), (d + 1, "gpuc.barrier()", False),
                    (d + 1, "s[t] += p", False), (d + 1, "gpuc.barrier()", False), (d + 1, "e *= 2", False)]
        return ([(d, f"s[t] = {self.expr(['v', 'w'])}", False), (d, "gpuc.barrier()", False)] + body
                + [(d, "u = 0.1 * s[t]", False), (d, "gpuc.barrier()", False), (d, self.update(["v", "u", "w"]), False)])

    def lane_operand(self, kind: str) -> str:
        rng = self.rng
        if kind == "idx":
            return rng.choice([str(rng.randint(0, 40)), f"(ln * {rng.randint(2, 7)} + {rng.randint(0, 31)}) % 32",
                               f"ln ^ {rng.randint(1, 31)}", "31 - ln", "bd - 1 - t", f"(ln + {rng.randint(1, 33)}) % 64"])
        return str(rng.randint(0, 40) if kind == "xor" else rng.choice([1, 2, 3, 4, 8, 16, 31, 33]))

    def shuffle(self, d: int) -> list:
        kind = self.rng.choice(self.kinds)
        return [(d, f"u = gpuc.shfl_{kind}({self.expr(['v', 'w'], 1)}, {self.lane_operand(kind)})", False),
                (d, self.update(["v", "u", "w"]), False)]

    def warploop(self, d: int) -> list:
        rng = self.rng
        lines = [(d, f"lw = (ln * {rng.randint(1, 7)} + {rng.randint(0, 40)}) & 63", False),
                 (d, f"mk = (ln * {rng.randint(0, 3)} + {rng.randint(0, 31)}) & 31", False),
                 (d, f"for r in range({rng.randint(1, 4)}):", False)]
        for _ in range(rng.randint(1, 2)):
            kind = rng.choice(["idx", "up", "down", "xor"])
            op = rng.choice(["lw", "r + 1", "lw ^ r", "lw & 31", "mk", self.lane_operand(kind)])
            if kind not in self.kinds:
                op = "lw"
            if kind == "xor" and rng.random() < 0.5:
                op = "mk"
            lines += [(d + 1, f"u = gpuc.shfl_{kind}(v, {op})", False), (d + 1, self.update(["v", "u", "w"]), False)]
        step = rng.choice(["lw = (lw * {a} + r + {b}) & 63", "lw = gpuc.shfl_idx(lw, (ln + {a}) % 32) ^ {b}",
                           "mk = mk ^ gpuc.int64(gpuc.ballot({pred}) & 31)", "mk = (mk * {a} + {b}) & 31"])
        if "{pred}" in step:
            pre, text = self.predicate(d + 1)
            lines += pre
            step = step.format(pred=text)
        lines.append((d + 1, step.format(a=rng.randint(1, 5), b=rng.randint(0, 40)), False))
        return lines

    def count(self, d: int) -> list:
        """A barrier count (or barrier_all/any): the same for the whole block, so the branch or loop it
        steers may hold barriers."""
        rng = self.rng
        pre, text = self.predicate(d)
        if self.count_barrier:
            pre = [(d, "gpuc.barrier()", False)] + pre
        how = rng.choice(["count", "count", "all", "any"])
        if how == "count":
            lines = pre + [(d, f"c = gpuc.barrier_count({text})", False)]
            test = rng.choice(["c > bd // 2", "c % 2 == 0", "loop"])
        else:
            lines = pre + [(d, f"ca = 1 if gpuc.barrier_{how}({text}) else 0", False)]
            test = "ca == 1"
        inner = self.exchange(d + 1) if rng.random() < 0.6 else [(d + 1, self.update(["v", "w"]), False)]
        if test == "loop":
            return lines + [(d, "for r in range(c % 3):", False)] + inner
        return lines + [(d, f"if {test}:", False)] + inner + [(d, "else:", False), (d + 1, self.update(["v", "w"]), False)]

    def vote(self, d: int) -> list:
        rng = self.rng
        pre, text = self.predicate(d)
        inner = self.shuffle(d + 1) if rng.random() < 0.5 else [(d + 1, self.update(["v", "w"]), False)]
        return pre + [(d, f"if gpuc.vote_{rng.choice(['any', 'all'])}({text}):", False)] + inner + \
            [(d, "else:", False), (d + 1, self.update(["v", "w"]), False)]

    def ballot(self, d: int) -> list:
        rng = self.rng
        pre, text = self.predicate(d)
        lines = pre + [(d, f"m = gpuc.int64(gpuc.ballot({text}) & 0x7fffffffffffffff)", False)]
        if rng.random() < 0.5:  # one lane's bit: the same for the whole warp
            return lines + [(d, f"if (m >> {rng.randint(0, 31)}) & 1 == 1:", False)] + self.shuffle(d + 1)
        return lines + [(d, f"v = v + 0.125 * ((m >> ((ln + {rng.randint(0, 31)}) % 32)) & 1) * {self.expr(['w'], 1)}",
                         False)]

    def local(self, d: int) -> list:
        rng = self.rng
        if rng.random() < 0.5:
            return [(d, "for q in range(3):", False), (d + 1, f"loc[q] = {self.expr(['v', 'w', 'q'])}", False),
                    (d, self.mix(rng.choice("vw"), f"loc[0] * loc[1] + loc[2] * {self.expr(['v', 'w'], 1)}"), False)]
        k = rng.randint(0, 2)
        return [(d, f"loc[{k}] = {self.expr(['v', 'w'])}", False), (d, "gpuc.barrier()", False),
                (d, self.mix("v", f"loc[{k}] + {self.expr(['v', 'w'], 1)}"), False)]

    def satomic(self, d: int) -> list:
        k = self.rng.randint(1, 4)
        return [(d, "if t == 0:", False), (d + 1, f"for q in range({k}):", False), (d + 2, "s[q] = 0.0", False),
                (d, "gpuc.barrier()", False), (d, f"gpuc.atomic_add(s, t % {k}, {self.expr(['v', 'w'])})", False),
                (d, "gpuc.barrier()", False), (d, f"u = 0.1 * s[(t + 1) % {k}]", False), (d, "gpuc.barrier()", False),
                (d, self.update(["v", "u", "w"]), False)]

    def gatomic(self, d: int) -> list:
        return [(d, f"gpuc.atomic_add(z, gi % {self.p.acc}, {self.expr(['v', 'w'])})", False)]

    def derivs(self, d: int) -> list:
        """Derivatives of DERIV_FUNCS taken inside the kernel, at points computed from `v` and `w`, with a
        per-item trip count; `u` takes the result."""
        rng = self.rng
        a, b = self.expr(["v", "w"], 1), f"0.5 + 0.25 * math.sin({self.expr(['v', 'w'], 1)})"
        n = f"1 + t % {rng.randint(2, 4)}"
        form = rng.choice([f"g = gpuc.grad(fd, {a}, {b}, {n})|u = g[0] + 0.5 * g[1]",
                           f"vg = gpuc.value_and_grad(fd, {a}, {b}, {n})|u = vg[0] * vg[1][0]",
                           f"u = gpuc.derivative(fd, {a}, {b}, {n})",
                           f"jv = gpuc.jvp(fd2, ({a}, {b}), (0.5, -0.25))|u = jv[0] - jv[1]",
                           f"vj = gpuc.vjp(fd2, ({a}, {b}), 0.75)|u = vj[1][0] + vj[1][1]",
                           f"u = gpuc.grad(fd_slope, {a}, {b}, {n})[0]",
                           f"u = gpuc.derivative(fd_slope, {a}, {b}, {n})"])
        return [(d, line, False) for line in form.split("|")] + [(d, self.update(["v", "u", "w"]), False)]

    def tile(self, d: int) -> list:
        """A tiled kernel's reads: along the item's row of x0 and its column of x1 (or x0), in loops over the
        other coordinate. The blocks of one block row add into one row of x0's shadow, those of one block
        column into one column: on several threads blocks run in phases where that allows plain adds
        (the blockwise schedule, cpu.block_phases)."""
        rng = self.rng
        other = "x1" if self.p.inputs == 2 else "x0"
        lines = [(d, "if inside:", False), (d + 1, "for k in range(x0.shape[1]):", False),
                 (d + 2, self.mix("v", f"x0[iy, k] * {self.expr(['v', 'w'], 1)}"), False)]
        if rng.random() < 0.7:
            lines += [(d + 1, f"for k in range({other}.shape[0]):", False),
                      (d + 2, self.mix("w", f"{other}[k, ix] * {self.expr(['v', 'w'], 1)}"), False)]
        return lines

    def srows(self, d: int) -> list:
        """Every item of a block row reads the same row of k consecutive shared elements (a tiled matmul's
        `sa[ty, kk]` over kk), each times a value of its own and of the element's place: in the reverse the
        items' shares of those elements' cotangents are k sums that the loop over the row's items carries in
        vector lanes (LLVM finds the math calls worth vectors), their starts loaded from the shadow's row before
        it and stored back after it (gpuc/targets/ordered_sums.py, sum_rows.py). Item 0 first stores constants
        in the first 48 elements, so that blocks of fewer items read defined ones."""
        rng = self.rng
        k, start, c = rng.randint(4, 12), rng.randint(0, 3), rng.choice([0.25, 0.5, -0.75])
        row = f"{start} + q + 4 * (gpuc.thread_index(1) % 8)"
        return [(d, "if t == 0:", False), (d + 1, "for q in range(48):", False), (d + 2, "s[q] = 0.0625 * q", False),
                (d, "gpuc.barrier()", False), (d, f"s[t] = {self.expr(['v', 'w'])}", False), (d, "gpuc.barrier()", False),
                (d, "u = 0.0", False), (d, f"for q in range({k}):", False),
                (d + 1, f"u = u + s[{row}] * math.sin({self.expr(['v', 'w'], 1)} + {c} * q)", False),
                (d, self.update(["v", "u", "w"]), False), (d, "gpuc.barrier()", False)]

    def stiles(self, d: int) -> list:
        """A tiled kernel's loop over tiles through shared memory: each round reads another item's element of
        the tile before (the previous round's, or what was stored before the loop), then stores its own
        element of the next tile: a function of x0 alone where the item is inside and the tile within x0's
        width, else a constant. The loop counts by a constant, up or down: the reverse steps its counter
        back and loads each tile again from x0, which the kernel never writes (restore.py)."""
        rng = self.rng
        step = rng.choice([1, 2, 3, 5, -1, -2, -4])
        head = (f"for k0 in range({rng.randint(-2, 1)}, x0.shape[1], {step}):" if step > 0
                else f"for k0 in range(x0.shape[1] - {rng.randint(1, 2)}, {rng.randint(-3, 0)}, {step}):")
        value = self.expr(["xv"], rng.randint(1, 2))
        if "xv" not in value:
            value = f"(xv * {rng.choice(LITERALS)!r})"
        value = value.replace("xv", "x0[iy, k0 + t]")
        fill = repr(rng.choice(LITERALS))
        read = f"(t + {rng.randint(1, 5)}) % bd"
        return [(d, f"s[t] = {self.expr(['v', 'w'])}", False), (d, "gpuc.barrier()", False), (d, head, False),
                (d + 1, f"u = s[{read}]", False), (d + 1, self.update(["v", "u", "w"]), False),
                (d + 1, "gpuc.barrier()", False),
                (d + 1, f"s[t] = {value} if inside and 0 <= k0 + t < x0.shape[1] else {fill}", False),
                (d + 1, "gpuc.barrier()", False), (d, f"u = s[{read}]", False),
                (d, self.update(["v", "u", "w"]), False), (d, "gpuc.barrier()", False)]

def program(rng: random.Random, seed: int = 0, kinds=KINDS, pending=(), tiles: random.Random | None = None,
            dynamic: random.Random | None = None, derivs: random.Random | None = None,
            stiles: random.Random | None = None, srows: random.Random | None = None) -> Program:
    p = Program(seed, inputs=rng.choice([1, 2]), extra=rng.choice([None, "own", "block", "acc", "acc"]),
                acc=rng.randint(1, 3))
    # from a stream of their own too: the shared array in dynamic shared memory
    p.dynamic = dynamic is not None and dynamic.random() < DYNAMIC
    gen = _Gen(rng, p, pending)
    chosen = [rng.choice(kinds) for _ in range(rng.randint(1, 4))]
    # from a stream of their own (`tiles`), so that programs without them are the ones the seed gave before
    if tiles is not None and tiles.random() < TILED:
        chosen.insert(tiles.randint(0, len(chosen)), "tile")
    inside = derivs is not None and derivs.random() < DERIVS  # (and from a fourth, derivatives inside)
    if inside:
        p.derivs = True
        chosen.insert(derivs.randint(0, len(chosen)), "derivs")
    if stiles is not None and stiles.random() < STILED:  # (a fifth: a loop over tiles through shared memory)
        chosen.insert(stiles.randint(0, len(chosen)), "stiles")
    if srows is not None and srows.random() < SROWS:  # (a sixth: a row of shared elements every item reads)
        # without warp operations, whose kernels run their regions a warp at a time
        chosen = ["exchange" if kind in _WARP_KINDS else kind for kind in chosen]
        chosen.insert(srows.randint(0, len(chosen)), "srows")
    if p.extra == "acc" and "gatomic" not in chosen:
        chosen.insert(rng.randint(0, len(chosen)), "gatomic")
    elif p.extra != "acc":
        chosen = [k for k in chosen if k != "gatomic"] or ["exchange"]
    for kind in chosen:
        p.kinds.append(kind)
        own = {"derivs": derivs, "stiles": stiles, "srows": srows}.get(kind)
        p.lines += getattr(_Gen(own, p, pending) if own is not None else gen, kind)(0)
    out = "v" if rng.random() < 0.7 else gen.expr(["v", "w"], 1)
    p.lines += [(0, "if inside:", False), (1, f"y0[iy, ix] {rng.choice(['=', '+='])} {out}", False)]
    if p.extra == "own":
        p.lines.append((1, f"z[iy, ix] = {gen.expr(['v', 'w'], 1)}", False))
    elif p.extra == "block":
        p.lines += [(0, "if t == 0:", False), (1, "z[gpuc.block_index(1), gpuc.block_index(0)] = v", False)]
    return p


@dataclass
class Launch:
    """One launch of a program: its size, block and the arrays (by name) with their seeds."""
    n: tuple
    block: tuple
    arrays: dict
    seeds: dict
    primal: dict = field(default_factory=dict)   # the arrays after a launch of the primal
    shared: int = 0                              # dynamic shared memory (bytes)

    @property
    def items(self) -> int:
        return -(-self.n[0] // self.block[0]) * -(-self.n[1] // self.block[1]) * self.block[0] * self.block[1]


def launch(p: Program, rng: random.Random, tiles: random.Random | None = None,
           dynamic: random.Random | None = None) -> Launch:
    block = rng.choice(BLOCKS)
    nx = rng.randint(1, 2 * block[0] + 3) if block[0] > 1 else rng.randint(1, 5)
    ny = rng.randint(1, 2 * block[1] + 1) if block[1] > 1 else rng.randint(1, 3)
    if "tile" in p.kinds and tiles is not None and tiles.random() < 0.6:
        # four to six blocks along each dimension: enough for the blockwise schedule's phases on 2 threads
        block = tiles.choice(((1, 1), (2, 2), (4, 1), (1, 4), (3, 3)))
        nx = block[0] * tiles.randint(4, 6) - tiles.randint(0, block[0] - 1)
        ny = block[1] * tiles.randint(4, 6) - tiles.randint(0, block[1] - 1)
    data = np.random.default_rng(rng.getrandbits(32))
    arrays = {"x0": data.uniform(-1, 1, (ny, nx))}
    if p.inputs == 2:
        arrays["x1"] = data.uniform(-1, 1, (ny, nx))
    arrays["y0"] = data.uniform(-1, 1, (ny, nx))
    if p.extra == "own":
        arrays["z"] = data.uniform(-1, 1, (ny, nx))
    elif p.extra == "block":
        arrays["z"] = data.uniform(-1, 1, (-(-ny // block[1]), -(-nx // block[0])))
    elif p.extra == "acc":
        arrays["z"] = data.uniform(-1, 1, p.acc)
    seeds = {name: data.uniform(-1, 1, a.shape) for name, a in arrays.items()}
    shared = 8 * (SIZE + dynamic.randint(0, 3)) if p.dynamic and dynamic is not None else 0
    return Launch((nx, ny), block, arrays, seeds, shared=shared)


def load(source: str, path: Path):
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kernel


# -- checking ----------------------------------------------------------------------------------------

class Undefined(Exception):
    pass


def _primal(probe_kernel, p: Program, run: Launch, arrays: dict) -> dict:
    """The arrays after a launch of the probe variant (copies), and raises Undefined near a tie or beyond BOUND."""
    after = {k: a.copy() for k, a in arrays.items()}
    probe = np.full((max(1, p.sites), run.items), np.inf)
    probe_kernel.launch(run.n, *after.values(), probe, block=run.block, threads=1, shared=run.shared)
    if probe.min() < MARGIN:
        raise Undefined(f"a predicate within {probe.min():.2g} of its tie")
    if not all(np.all(np.abs(a) <= BOUND) for a in after.values()):
        raise Undefined("an output beyond the bound")
    return after


def differences(probe_kernel, p: Program, run: Launch, scale: float = 1.0, only=None):
    """dL/d(every element of every array) by four-point central differences of the primal, and each
    entry's rounding error estimate."""
    grads, noise = {}, {}
    for name, base in run.arrays.items():
        if only is not None and name not in only:
            continue
        g, r = np.zeros(base.shape), np.zeros(base.shape)
        for e in np.ndindex(*base.shape):
            x0 = float(base[e])
            h = scale * STEP * 2.0 ** math.floor(math.log2(max(1.0, abs(x0))))
            outs = {}
            for sgn in (1, -1, 2, -2):
                moved = dict(run.arrays)
                moved[name] = base.copy()
                moved[name][e] = x0 + sgn * h
                after = {k: a.copy() for k, a in moved.items()}
                probe_kernel.launch(run.n, *after.values(), np.full((max(1, p.sites), run.items), np.inf),
                                    block=run.block, threads=1, shared=run.shared)
                outs[sgn] = after
            num = mag = 0.0
            for k, seed in run.seeds.items():
                dd = 8.0 * (outs[1][k] - outs[-1][k]) - (outs[2][k] - outs[-2][k])
                size = 8.0 * (np.abs(outs[1][k]) + np.abs(outs[-1][k])) + np.abs(outs[2][k]) + np.abs(outs[-2][k])
                num += float(np.sum(seed * dd))
                mag += float(np.sum(np.abs(seed) * np.where(dd != 0, size, 0.0)))
            g[e], r[e] = num / (12.0 * h), 4.0 * EPS64 * mag / (12.0 * h)
        grads[name], noise[name] = g, r
    return grads, noise


def _adjoint(adjoint, run: Launch, threads: int):
    args, arrays, shadows = [], {}, {}
    for name, a in run.arrays.items():
        arrays[name], shadows[name] = a.copy(), run.seeds[name].copy()
        args += [arrays[name], shadows[name]]
    adjoint.launch(run.n, *args, block=run.block, threads=threads, shared=run.shared)
    return arrays, shadows


def _judge(p: Program, run: Launch, primal, adjoint, fd, noise, skip=(), scalar=None) -> list:
    """[(kind, array, detail, ratio)]; `scalar`: (arrays, shadows) after the adjoint launch without vectorization."""
    found = []
    for k, what in enumerate(("the array", "the shadow") if scalar else ()):
        for name, want in scalar[k].items():
            diffs = vector_differences([adjoint[1][k][name]], [want])
            if diffs:
                found.append(("vectorize", name, f"the adjoint launch (threads=1) and the one without vectorization "
                              f"leave {what} {name} different:\n" + "\n".join(diffs[:10]), math.inf))
    for threads, (arrays, _) in adjoint.items():
        for name, want in primal.items():
            got = arrays[name]
            tol = 0.0 if threads == 1 else RTOL_SCHEDULE * float(np.max(np.abs(want)))
            if not np.all(np.abs(got - want) <= tol):
                e = tuple(int(i) for i in np.argwhere(~(np.abs(got - want) <= tol))[0])
                found.append(("primal", name, f"after the adjoint launch (threads={threads}) {name}[{e}] = {got[e]!r}, "
                              f"after the primal launch {want[e]!r}", math.inf))
    top = max(float(np.max(np.abs(g))) for g in fd.values())
    serial = adjoint[1][1]
    for name, want in fd.items():
        if name in skip:
            continue
        tol = RTOL_FD * np.maximum(np.abs(want), 0.01 * top) + noise[name] + 1e-300
        ratio = float(np.max(np.abs(serial[name] - want) / tol))
        if not ratio <= 1.0:
            found.append(("gradient", name, adjoints._mismatch(name, serial[name], want, tol, "differences"), ratio))
    for name, want in serial.items():
        got = adjoint[2][1][name]
        tol = RTOL_SCHEDULE * float(np.max(np.abs(want))) + 1e-300
        ratio = float(np.max(np.abs(got - want) / tol))
        if not ratio <= 1.0:
            found.append(("schedule", name, adjoints._mismatch(name, got, want, np.full(want.shape, tol), "threads=1",
                                                               "threads=2"), ratio))
    return found


def _refine(probe_kernel, p: Program, run: Launch, fd: dict, noise: dict, name: str) -> bool:
    """Differences of `name` at smaller steps until two successive ones agree (the finer replacing fd's);
    False when they never do."""
    top = max(float(np.max(np.abs(g))) for g in fd.values())
    prev, prev_noise = fd[name], noise[name]
    for scale in (0.25, 0.25 ** 2, 0.25 ** 3, 0.25 ** 4):
        fine, fine_noise = differences(probe_kernel, p, run, scale, only={name})
        tol = RTOL_FD * np.maximum(np.abs(prev), 0.01 * top) + fine_noise[name] + prev_noise
        if np.all(np.abs(fine[name] - prev) <= 0.25 * tol):
            fd[name], noise[name] = fine[name], fine_noise[name]
            return True
        prev, prev_noise = fine[name], fine_noise[name]
    return False


def generate(case_seed: int, stream: int, workdir: Path | None = None, attempts: int = 20, pending=()):
    """Program `case_seed` of its random stream, two launches whose arguments are defined and the probe
    kernel (without `workdir`: the first program and one launch as drawn, nothing compiled or probed)."""
    rng = random.Random(stream)
    tiles, dynamic = random.Random(f"tiles-{stream}"), random.Random(f"dynamic-{stream}")
    derivs, stiles = random.Random(f"derivs-{stream}"), random.Random(f"stiles-{stream}")
    srows = random.Random(f"srows-{stream}")
    for attempt in range(attempts):
        p = program(rng, case_seed, pending=pending, tiles=tiles, dynamic=dynamic, derivs=derivs, stiles=stiles,
                    srows=srows)
        if workdir is None:
            return p, [launch(p, rng, tiles, dynamic)], None
        probe_kernel = load(p.source(probe=True), workdir / f"blockadj_{case_seed}_{attempt}_probe.py")
        runs = []
        for _ in range(2):
            for _ in range(8):
                run = launch(p, rng, tiles, dynamic)
                try:
                    run.primal = _primal(probe_kernel, p, run, run.arrays)
                except Undefined:
                    continue
                runs.append(run)
                break
        if len(runs) == 2:
            return p, runs, probe_kernel
    raise Undefined(f"no defined program in {attempts} attempts")


def check(case_seed: int, stream: int, workdir: Path, pending=()) -> dict:
    """{"findings": [(kind, array, detail, ratio, script)], "rough": [arrays], "kinds": [...], "worst": ratio}."""
    import gpuc
    p, runs, probe_kernel = generate(case_seed, stream, workdir, pending=pending)
    answer = {"findings": [], "rough": [], "kinds": p.kinds, "worst": 0.0}
    run = runs[0]
    try:
        kernel = load(p.source(), workdir / f"blockadj_{case_seed}.py")
        adjoint, by_item = gpuc.adjoint(kernel), gpuc.adjoint(item_by_item(kernel))
        for run in runs:
            result = {threads: _adjoint(adjoint, run, threads) for threads in (1, 2)}
            scalar = _adjoint(by_item, run, 1)
            fd, noise = differences(probe_kernel, p, run)
            rough = set()
            for kind, name, _, _ in _judge(p, run, run.primal, result, fd, noise):
                if kind == "gradient" and name not in rough and not _refine(probe_kernel, p, run, fd, noise, name):
                    rough.add(name)
            answer["rough"] += sorted(rough)
            for kind, name, detail, ratio in _judge(p, run, run.primal, result, fd, noise, rough, scalar):
                answer["findings"].append((kind, name, f"block={run.block} n={run.n}: {detail}", ratio, script(p, run)))
            top = max(float(np.max(np.abs(g))) for g in fd.values())
            for name, want in fd.items():
                if name not in rough:
                    err = np.abs(result[1][1][name] - want) / np.maximum(np.abs(want), 0.01 * top)
                    answer["worst"] = max(answer["worst"], float(np.max(err)))
            if answer["findings"]:
                break
    except Exception as exc:  # noqa: BLE001 -- every error on a defined program is a finding
        detail = f"{type(exc).__name__}: {exc}"[:3000] + "\n" + traceback.format_exc()[-1500:]
        answer["findings"].append(("exception", "", f"block={run.block} n={run.n}: {detail}", math.inf, script(p, run)))
    return answer


# -- reproducers --------------------------------------------------------------------------------------

def script(p: Program, run: Launch) -> str:
    """A self-contained script: the kernel, its arguments and seeds, the adjoint launch on 1 and 2 threads
    and the gradient by central differences of the kernel, printing each entry where they differ by more than
    1e-6 of the larger of 1 and the difference, and each entry where the launch on 1 thread and the one without
    vectorization leave different arrays or shadows."""
    lines = [p.source().rstrip(), "", "", "import numpy as np", "",
             f"n, block, shared = {run.n!r}, {run.block!r}, {run.shared!r}"]
    for name, a in run.arrays.items():
        lines.append(f"{name} = np.array({a.tolist()!r})")
        lines.append(f"d{name} = np.array({run.seeds[name].tolist()!r})  # the seed")
    names = list(run.arrays)
    lines += [f"arrays, seeds = [{', '.join(names)}], [{', '.join('d' + k for k in names)}]",
              f"names = {names!r}", "", "",
              "def loss(values):", "    values = [v.copy() for v in values]",
              "    kernel.launch(n, *values, block=block, threads=1, shared=shared)",
              "    return sum(float((s * v).sum()) for s, v in zip(seeds, values))", "", "",
              "after = {}",
              "for threads, kern in ((1, kernel), (2, kernel), (0, gpuc.kernel(vectorize=False)(kernel.py_func))):",
              "    args = [a.copy() for a in arrays]",
              "    shadows = [s.copy() for s in seeds]",
              "    gpuc.adjoint(kern).launch(n, *[x for pair in zip(args, shadows) for x in pair], block=block, "
              "threads=max(threads, 1), shared=shared)",
              "    after[threads] = args + shadows",
              "    if not threads:",
              "        for a, b, name in zip(after[1], after[0], names + ['d' + k for k in names]):",
              "            for e in map(tuple, np.argwhere(a.view(np.int64) != b.view(np.int64)).tolist()):",
              "                print(f'{name}{list(e)}: {float(a[e])!r} vectorized, {float(b[e])!r} without "
              "vectorization')",
              "        continue",
              "    h = 2.0 ** -17",
              "    for k, (a, g) in enumerate(zip(arrays, shadows)):",
              "        for e in np.ndindex(*a.shape):",
              "            def at(step):",
              "                moved = [b.copy() for b in arrays]",
              "                moved[k][e] += step",
              "                return loss(moved)",
              "            want = (8 * (at(h) - at(-h)) - (at(2 * h) - at(-2 * h))) / (12 * h)",
              "            if abs(g[e] - want) > 1e-6 * max(1.0, abs(want)):",
              f"                print(f'threads={{threads}} d{{\"{' '.join(names)}\".split()[k]}}[{{e}}]: "
              "adjoint {g[e]!r}, differences {want!r}')"]
    return "\n".join(lines) + "\n"


# -- worker processes ---------------------------------------------------------------------------------

def serve(workdir: Path) -> None:
    """A worker: answers each request line {"seed": S, "stream": K} with BEGIN and RESULT {check's answer}
    (or {"undefined": why})."""
    for line in sys.stdin:
        request = json.loads(line)
        print("BEGIN", flush=True)
        try:
            answer = check(request["seed"], request["stream"], workdir, request.get("pending", ()))
        except Undefined as exc:
            answer = {"undefined": str(exc)}
        print("RESULT " + json.dumps(answer), flush=True)


class Worker(adjoints.Worker):
    """support.adjoints' worker process (restarted after a crash, a hang blamed on its program), serving
    this module's programs."""

    def _start(self):
        self.starts += 1
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(adjoints.TESTS.parent), str(adjoints.TESTS)])}
        self.err = self.workdir / f"worker{self.starts}.err"
        with open(self.err, "w") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "support.blockgen_adjoints", "--serve",
                                          str(self.workdir)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                         text=True, env=env, cwd=adjoints.TESTS)
        self.lines: queue.Queue = queue.Queue()

        def read(proc=self.proc, lines=self.lines):
            for line in proc.stdout:
                lines.put(line)
            lines.put(None)
        threading.Thread(target=read, daemon=True).start()


def cases(count: int, seed: int) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    return [(seed * 100003 + k, rng.getrandbits(32)) for k in range(count)]


@dataclass
class Report:
    programs: int = 0
    undefined: int = 0
    rough: list = field(default_factory=list)
    findings: list = field(default_factory=list)   # (case seed, kind, array, detail, script)
    kinds: Counter = field(default_factory=Counter)
    worst: float = 0.0

    def summary(self) -> str:
        found = Counter(f[1] for f in self.findings)
        return (f"block adjoints: {self.programs} programs, {len(self.findings)} findings "
                f"({', '.join(f'{n} {k}' for k, n in found.most_common()) or 'none'}), {self.undefined} without a "
                f"defined draw, {len(self.rough)} not smooth enough for differences; worst gradient error "
                f"{self.worst:.2g} (relative); phases: "
                + ", ".join(f"{k} {n}" for k, n in self.kinds.most_common()))


def run(seed: int, count: int, workdir: Path | None = None, timeout: float = 300.0, progress=None,
        pending=()) -> Report:
    """Programs of soak `seed` checked in a worker process; `pending`: constructs left out ("updown": shfl_up
    and shfl_down at constant distances; "count": barrier_count/all/any in kernels without a plain barrier)."""
    report = Report()
    with tempfile.TemporaryDirectory(prefix="gpuc_blockadj_") as tmp:
        with Worker(Path(workdir or tmp), timeout) as worker:
            for case_seed, stream in cases(count, seed):
                answer = worker.ask({"seed": case_seed, "stream": stream, "pending": list(pending)})
                report.programs += 1
                found = []
                for kind in ("crash", "hang"):
                    if kind in answer:
                        p, (first,), _ = generate(case_seed, stream, pending=pending)
                        found.append((case_seed, kind, "", answer[kind], script(p, first)))
                if "undefined" in answer:
                    report.undefined += 1
                found += [(case_seed, kind, name, detail, text)
                          for kind, name, detail, _, text in answer.get("findings", [])]
                report.findings += found
                report.kinds.update(answer.get("kinds", []))
                report.worst = max(report.worst, answer.get("worst", 0.0))
                if answer.get("rough"):
                    report.rough.append((case_seed, answer["rough"]))
                if progress:
                    progress(case_seed, found)
    return report


def describe(finding) -> str:
    case_seed, kind, name, detail, text = finding
    return (f"== block adjoints program {case_seed}: {kind}" + (f" (array {name})" if name else "") + f" ==\n{detail}\n"
            f"-- reproducer --\n{text}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=50)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a program may take")
    parser.add_argument("--out", type=Path, help="write every finding here too")
    parser.add_argument("--without", nargs="*", default=[], choices=["updown", "count"],
                        help="leave out these constructs (PENDING in tests/fuzz/test_random_block_adjoints.py)")
    parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)  # a worker process (`serve`)
    ns = parser.parse_args(argv)
    if ns.serve:
        serve(ns.serve)
        return 0
    t0 = time.monotonic()

    def progress(case_seed, found):
        for f in found:
            print(describe(f), flush=True)

    report = run(ns.seed, ns.count, timeout=ns.timeout, progress=progress, pending=ns.without)
    if ns.out:
        ns.out.write_text("\n\n".join(describe(f) for f in report.findings))
    print(report.summary(), f"in {time.monotonic() - t0:.0f} s")
    return 1 if report.findings else 0


if __name__ == "__main__":
    sys.exit(main())
