"""Random stencil kernels whose adjoints add into neighbouring elements of a shadow, for the windows of
vectorization across work items (gpuc/plugins/vectorize/windows.py): a chunk's read-modify-writes of
`dx[i - 2]` .. `dx[i + 3]` kept in registers, one load and one store per chunk.

    cd tests && ../.venv/bin/python -m support.window_programs --seed 5 --count 300

A kernel reads one to three float arrays at offsets from -3 to 3 under the guard those offsets need
(sometimes a tighter one, sometimes an `else` writing elsewhere), multiplies neighbours, applies
`sin`/`tanh`, and writes or adds into one or two outputs at its own index, in float64 or float32. Its
adjoint runs on one thread over 1 to 140 items (chunks of 32 lanes start and end anywhere), with and
without vectorization (support/vectorize.py), from the same seeds and starting shadows:
- the primal arrays and the consumed seeds must be equal bit for bit;
- the input shadows within 1e-12 (float64) or 1e-5 (float32) of their magnitude: in lanes the adds of
  several items into one element come in another order than item by item (adds in any order,
  gpuc/plugins/vectorize/memory.py), so they may differ in the last bits;
- and each against the gradient the kernel's own Python source gives by central differences would be
  the generic check (support/adjoints.py does it); here the item-by-item adjoint is the reference.
The run counts the programs whose adjoint got a window (its trace line says so): most should.
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

from support.vectorize import differences, item_by_item

import gpuc
from gpuc.frontend.constructs.reverse import SERIAL
from gpuc.runtime.dispatch import typeof

WEIGHTS = ("0.25", "-0.5", "1.5", "c", "2.0", "-1.25")
TOLERANCE = {np.float64: 1e-12, np.float32: 1e-5}


class Program:
    def __init__(self, seed: int, index: int) -> None:
        r = self.r = random.Random(f"windows-{seed}-{index}")
        self.dtype = np.float64 if r.random() < 0.7 else np.float32
        # one input mostly: the adds into two arrays' shadows interleave, and a window holds one array's run
        self.inputs = [f"x{k}" for k in range(r.choice((1, 1, 1, 2, 3)))]
        self.outputs = [f"y{k}" for k in range(r.randint(1, 2))]
        self.n = r.choice((r.randint(1, 40), r.randint(30, 100), r.randint(60, 140)))
        self.data_seed = r.randint(0, 2 ** 32)
        offsets = sorted(set(r.sample(range(-3, 4), r.randint(2, 5))) | {0})
        lo, hi = -min(offsets), max(offsets)
        lo, hi = lo + (r.random() < 0.2), hi + (r.random() < 0.2)  # now and then a tighter guard
        self.offsets = offsets
        lines = ["    i = gpuc.index()", "    n = x0.shape[0]", f"    if i >= {lo} and i < n - {hi}:"]
        for _ in range(r.randint(1, 3)):
            lines.append(f"        {r.choice(self.outputs)}[i] {r.choice(['=', '+='])} {self.expr()}")
        if r.random() < 0.3:
            lines += ["    else:", f"        {r.choice(self.outputs)}[i] = {self.term(0, own=True)}"]
        params = ", ".join(self.inputs + self.outputs + ["c"])
        self.source = f"import math\n\nimport gpuc\n\n\n@gpuc.kernel\ndef kernel({params}):\n" + "\n".join(lines) + "\n"

    def term(self, off: int | None = None, own: bool = False) -> str:
        """A read at `off` (any allowed offset if None), maybe under sin/tanh or times another term; with
        `own`, every read at the item's own element (outside the guard)."""
        r = self.r
        off = (0 if own else r.choice(self.offsets)) if off is None else off
        read = f"{r.choice(self.inputs)}[i{f' + {off}' if off > 0 else f' - {-off}' if off < 0 else ''}]"
        k = r.random()
        if k < 0.15:
            return f"math.sin({read})"
        if k < 0.25:
            return f"math.tanh({read})"
        if k < 0.45:
            return f"{read} * {self.term(own=own)}"
        return read

    def expr(self) -> str:
        r = self.r
        terms = [f"{r.choice(WEIGHTS)} * {self.term(off)}" for off in self.offsets if r.random() < 0.9]
        terms = terms or [self.term()]
        if r.random() < 0.3:
            r.shuffle(terms)
        return " + ".join(terms)

    def arguments(self):
        rng = np.random.default_rng(self.data_seed)
        arrays = [rng.uniform(-1.0, 1.0, self.n).astype(self.dtype) for _ in self.inputs + self.outputs]
        seeds = [rng.uniform(0.5, 1.5, self.n).astype(self.dtype) for _ in self.outputs]
        starts = [rng.uniform(-1.0, 1.0, self.n).astype(self.dtype) for _ in self.inputs]
        args = []
        for k, name in enumerate(self.inputs):
            args += [arrays[k], starts[k]]
        for k, name in enumerate(self.outputs):
            args += [arrays[len(self.inputs) + k], seeds[k]]
        return args + [self.dtype(0.75)]


def check(seed: int, index: int, directory: Path) -> tuple[str | None, bool]:
    """(a finding or None, whether the adjoint got a window)."""
    p = Program(seed, index)
    path = directory / f"window_{seed}_{index}.py"
    path.write_text(p.source)
    spec = importlib.util.spec_from_file_location(f"gpuc_window_{seed}_{index}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    adjoint, twin = gpuc.adjoint(module.kernel), gpuc.adjoint(item_by_item(module.kernel))
    got, want = p.arguments(), p.arguments()
    adjoint.launch(p.n, *got, threads=1)
    twin.launch(p.n, *want, threads=1)
    flags = adjoint._layout([typeof(a, k) for k, a in enumerate(got)])
    trace = str(adjoint._kernel(flags, SERIAL).inspect(*got).trace)
    windowed = any("window" in line for line in trace.splitlines() if "vectorized at" in line)
    shadows = [2 * k + 1 for k in range(len(p.inputs))]
    exact = [k for k in range(len(got) - 1) if k not in shadows]
    found = differences([got[k] for k in exact], [want[k] for k in exact])
    for k in shadows:
        scale = max(1.0, float(np.max(np.abs(want[k]))) if want[k].size else 1.0)
        worst = float(np.max(np.abs(got[k].astype(np.float64) - want[k]))) if want[k].size else 0.0
        if worst > TOLERANCE[p.dtype] * scale:
            found.append(f"  shadow of {p.inputs[k // 2]}: {worst:.3g} from the item-by-item adjoint")
    if found:
        return f"n={p.n}:\n" + "\n".join(found[:10]) + f"\n--- program ---\n{p.source}", windowed
    return None, windowed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=100)
    ns = parser.parse_args(argv)
    start, findings, windows = time.time(), 0, 0
    with tempfile.TemporaryDirectory(prefix="gpuc_window_") as tmp:
        for index in range(ns.count):
            try:
                found, windowed = check(ns.seed, index, Path(tmp))
            except Exception:  # noqa: BLE001 - every failure is a finding
                found, windowed = (f"exception:\n{traceback.format_exc()[-2000:]}\n--- program ---\n"
                                   f"{Program(ns.seed, index).source}"), False
            windows += windowed
            if found:
                findings += 1
                print(f"== finding: seed {ns.seed}, program {index} ==\n{found}", flush=True)
    print(f"window programs: {ns.count} programs, {windows} with a window, {findings} findings in "
          f"{time.time() - start:.0f} s")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
