"""Random kernels for vectorization across work items: many items per launch, each diverging (loops
with per-item trip counts and exits, branches on per-item values, break, continue, early returns,
gathers, math, integer division), launched with and without vectorization; the arrays after must be
equal bit for bit. No reference is needed: the item-by-item launch is the reference.

    cd tests && ../.venv/bin/python -m support.vector_programs --seed 5 --count 300

Each program is launched over 1 to 70 items on one and on two threads; a finding prints the program,
the launch and the first differing elements. Odd programs stream their stores in every launch
(CompilerConfig(streaming_bytes=0), gpuc/plugins/vectorize/streaming.py), with `out` and `iout` laid
out at one random alignment; the summary counts those whose vector loop has streaming stores. Programs run in this process. The loop counter `k` starts
at a run-time value: LLVM folds math calls of constants with libm's results (docs/targets.md, "Vector
math on the CPU"), and a loop it unrolls in one version but not in the other would fold `sin(k)` in one
only (seed 1208's program 89 did, 1 ulp apart).

A quarter of the programs (drawn from a random stream of their own: the others are the programs the seeds
gave before) also take gradients that keep a tape (`TAPED`: a loop of per-item trip count through a clamp,
so that each item tapes other branches): 1 to 6 of `grad`, `value_and_grad`, `vjp` and `grad` of a forward
`derivative`, at random places of the body (inside its loops too). In lanes each item keeps its own tape,
and six tapes' first buffers fill the stack copies' budget (docs/targets.md): the lanes halve.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

from support.vectorize import differences, item_by_item, streaming

HEADER = "import math\n\nimport gpuc\n\n\n@gpuc.kernel\ndef kernel(a, b, idx, out, iout):\n"


class Gen:
    def __init__(self, rng: random.Random):
        self.rng = rng
        self.loops = 0  # counters in scope, for bounds
        self.depth = 0

    def fexpr(self, d=0):
        r = self.rng
        if d > 2 or r.random() < 0.3:
            return r.choice(["x", "y", "1.5", "-0.25", "a[i]", "float(n)", "float(k)", "b[n % b.shape[0]]",
                             "a[(n + k) % a.shape[0]]"])
        op = r.choice(["+", "-", "*", "/", "min", "max", "sin", "sqrt", "tanh", "exp", "cond", "floor"])
        x, y = self.fexpr(d + 1), self.fexpr(d + 1)
        if op in "+-*":
            return f"({x} {op} {y})"
        if op == "/":
            return f"({x} / (abs({y}) + 0.5))"
        if op in ("min", "max"):
            return f"{op}({x}, {y})"
        if op == "sqrt":
            return f"math.sqrt(abs({x}))"
        if op == "exp":
            return f"math.exp(min({x}, 5.0))"
        if op == "floor":
            return f"float(math.floor({x}))"
        if op == "cond":
            return f"({x} if {self.fcond(d + 1)} else {y})"
        return f"math.{op}({x})"

    def iexpr(self, d=0):
        r = self.rng
        if d > 2 or r.random() < 0.35:
            return r.choice(["n", "k", "i", "idx[i]", "3", "-2", "idx[(i + n) % idx.shape[0]]"])
        op = r.choice(["+", "-", "*", "//", "%", "min", "int", "&", ">>"])
        x, y = self.iexpr(d + 1), self.iexpr(d + 1)
        if op in ("+", "-", "*", "&"):
            return f"({x} {op} {y})"
        if op in ("//", "%"):
            return f"({x} {op} (abs({y}) % 5 + 1))"
        if op == ">>":
            return f"({x} >> (abs({y}) % 8))"
        if op == "min":
            return f"min({x}, {y})"
        return f"int(min(max({self.fexpr(d + 1)}, -1000.0), 1000.0))"

    def fcond(self, d=0):
        r = self.rng
        if r.random() < 0.5:
            return f"{self.fexpr(d + 1)} {r.choice(['<', '>', '<=', '>='])} {self.fexpr(d + 1)}"
        return f"{self.iexpr(d + 1)} % 3 {r.choice(['==', '!='])} {r.randint(0, 2)}"

    def block(self, indent, count, in_loop):
        lines = []
        for _ in range(count):
            lines += self.statement(indent, in_loop)
        return lines or [indent + "pass"]

    def statement(self, indent, in_loop):
        r = self.rng
        kinds = ["fassign", "fassign", "iassign", "if"]
        if self.depth < 3:
            kinds += ["while", "for", "forconst"]
        if in_loop:
            kinds += ["break", "continue"]
        kinds.append("return")
        kind = r.choice(kinds)
        if kind == "fassign":
            return [f"{indent}{r.choice(['x', 'y'])} = {self.fexpr()}"]
        if kind == "iassign":
            return [f"{indent}n = ({self.iexpr()}) % 1000"]
        if kind == "break":
            return [f"{indent}if {self.fcond()}:", f"{indent}    break"]
        if kind == "continue":
            return [f"{indent}if {self.fcond()}:", f"{indent}    continue"]
        if kind == "return":
            return [f"{indent}if {self.fcond()}:", f"{indent}    return"]
        self.depth += 1
        try:
            if kind == "if":
                out = [f"{indent}if {self.fcond()}:"] + self.block(indent + "    ", r.randint(1, 3), in_loop)
                if r.random() < 0.5:
                    out += [f"{indent}else:"] + self.block(indent + "    ", r.randint(1, 2), in_loop)
                return out
            c = f"c{self.depth}_{r.randint(0, 999)}"
            if kind == "while":
                return ([f"{indent}{c} = 0", f"{indent}while {self.fcond()} and {c} < {r.randint(1, 12)}:",
                         f"{indent}    {c} += 1", f"{indent}    k = k + 1"]
                        + self.block(indent + "    ", r.randint(1, 3), True))
            if kind == "for":
                return ([f"{indent}for {c} in range(abs(n) % {r.randint(2, 9)}):", f"{indent}    k = k + {c}"]
                        + self.block(indent + "    ", r.randint(1, 3), True))
            return ([f"{indent}for {c} in range({r.randint(1, 4)}):", f"{indent}    k = k + 1"]
                    + self.block(indent + "    ", r.randint(1, 3), True))
        finally:
            self.depth -= 1


def program(seed: int, index: int) -> str:
    rng = random.Random(seed * 1_000_003 + index)
    g = Gen(rng)
    body = ["    i = gpuc.index()", "    if i >= out.shape[0]:", "        return", "    x = a[i]", "    y = b[i % b.shape[0]]",
            "    n = idx[i]", "    k = idx[i] % 2"]  # never a constant LLVM could fold math of (see the module doc)
    body += g.block("    ", rng.randint(2, 5), False)
    taped = random.Random(f"tapes-{seed}-{index}")
    header = HEADER
    if taped.random() < TAPES:
        header = HEADER.replace("@gpuc.kernel", TAPED + "\n\n\n@gpuc.kernel")
        body = _with_gradients(body, taped)
    body += ["    out[i] = x + 0.5 * y", "    iout[i] = n * 1000 + k"]
    return header + "\n".join(body) + "\n"


#: The share of programs that take gradients keeping a tape (see the module doc).
TAPES = 0.25
TAPED = """@gpuc.func
def taped(x, n):
    s = x
    for j in range(abs(n) % 7 + 1):
        s = min(s * 0.75 + math.sin(s), 0.8)
        if s < -0.5:
            s = s * s
    return s


@gpuc.func
def taped_q(x, q):
    return taped(x, int(q)) * q


@gpuc.func
def taped_slope(x, n):
    return gpuc.derivative(taped, x, n) + x"""
_GRADIENTS = ("{v} = {v} + 0.125 * gpuc.grad(taped, {w}, n)[0]",
              "{v} = gpuc.value_and_grad(taped, {w}, n)[1][0] - {v} * 0.5",
              "{v} = {v} + gpuc.vjp(taped_q, ({w}, float(n % 5)), 0.25)[1][1]",
              "{v} = {v} * 0.5 + gpuc.grad(taped_slope, {w}, k + 2)[0]")


def _with_gradients(body: list[str], rng: random.Random) -> list[str]:
    """`body` with 1 to 6 gradient statements inserted before random statements past the set-up lines
    (at their indentation; never before an `else:`)."""
    body = list(body)
    for _ in range(rng.randint(1, 6)):
        places = [p for p in range(7, len(body) + 1) if p == len(body) or not body[p].lstrip().startswith("else")]
        place = rng.choice(places)
        line = body[place] if place < len(body) else "    "
        indent = line[:len(line) - len(line.lstrip())]
        v, w = rng.choice((("x", "y"), ("y", "x"), ("x", "x")))
        body.insert(place, indent + rng.choice(_GRADIENTS).format(v=v, w=w))
    return body


def arguments(seed: int, items: int, lay: int | None = None):
    """The arrays of a launch over `items`; with `lay`, `out` and `iout` start `lay` elements past a
    multiple of 64 bytes, so that streaming stores into them can start aligned together."""
    r = np.random.default_rng(seed)
    out, iout = np.zeros(items), np.zeros(items, np.int64)
    if lay is not None:
        out, iout = _laid(out, lay), _laid(iout, lay)
    return (r.uniform(-4.0, 4.0, items + 3), r.uniform(-4.0, 4.0, 11), r.integers(-50, 50, items + 2), out, iout)


def _laid(array, lay: int):
    buffer = np.zeros(array.size + 16, array.dtype)
    skip = (-buffer.ctypes.data % 64) // array.itemsize + lay
    return buffer[skip:skip + array.size]


def check(seed: int, index: int, directory: Path) -> str | None:
    source = program(seed, index)
    path = directory / f"vector_{seed}_{index}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"gpuc_vector_{seed}_{index}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kernel, twin = module.kernel, item_by_item(module.kernel)
    rng = random.Random(index)
    # odd programs stream every launch's stores (CompilerConfig(streaming_bytes=0)), their outputs laid out
    # at one alignment
    stream = index % 2 == 1
    if stream:
        kernel = streaming(kernel)
    for _ in range(2):
        items, threads = rng.randint(1, 70), rng.choice((1, 2))
        lay = rng.randrange(8) if stream else None
        got, want = arguments(index, items, lay), arguments(index, items, lay)
        kernel.launch(items, *got, threads=threads)
        twin.launch(items, *want, threads=threads)
        diffs = differences(got, want)
        if diffs:
            return (f"n={items} threads={threads} streaming={stream} lay={lay}:\n" + "\n".join(diffs[:10])
                    + f"\n--- program ---\n{source}")
    if stream and "streaming store" in str(kernel.inspect(*arguments(index, 8, 0)).trace):
        STREAMED.append(index)
    return None


#: The programs (of this process's runs) whose vector loop streamed its stores.
STREAMED: list = []


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=100)
    ns = parser.parse_args(argv)
    start, findings, vectorized = time.time(), 0, 0
    with tempfile.TemporaryDirectory(prefix="gpuc_vector_") as tmp:
        for index in range(ns.count):
            try:
                found = check(ns.seed, index, Path(tmp))
            except Exception:  # noqa: BLE001 - every failure is a finding
                found = f"exception:\n{traceback.format_exc()[-2000:]}\n--- program ---\n{program(ns.seed, index)}"
            if found:
                findings += 1
                print(f"== finding: seed {ns.seed}, program {index} ==\n{found}", flush=True)
    print(f"vector programs: {ns.count} programs ({len(STREAMED)} with streaming stores), {findings} findings "
          f"in {time.time() - start:.0f} s")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
