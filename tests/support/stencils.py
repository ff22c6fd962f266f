"""Random stencil kernels with clamped neighbour indices, for the CPU's clamp split
(gpuc/plugins/clamp_split.py, docs/targets.md "Stencils on the CPU").

A kernel reads `src[min(max(i + d, lo), hi)]` and its variants (max and min in either order and
nested, one-sided clamps where one side cannot be passed, bounds from the shape or from int
arguments, `lo > hi` and `lo == hi` included, offsets -3..3 written in place, through a local or a
loop over the offsets), a fifth of them less the extent (`src[int(min(i + 1, n - 1)) - n]`: counting from
the end, as Python does), now and then inside an `if` (on data, or on the index: interior and one-sided tests
against the shape or lo and hi, which the clamp split runs without where they hold), over `i = gpuc.index()` or, in 2-D,
`x, y = gpuc.index(0), gpuc.index(1)` over a (rows, columns) source; it writes `out[i]` (`out[y, x]`)
only, so items never race. Each program is launched on 1 to 5 threads over sizes whose chunks start
and end inside rows (7x13 on 3 threads, ...), some items past the data (`if i >= n: return`).

The reference is Python: the kernel's own source runs for each item with `gpuc.index` giving the
item, on float64 values (`+ - *`, exactly IEEE, as gpuc computes them) or on integers read with
`int(...)` from uint8 or int32 images; every index is in `[-n, n)` by construction, which the reference
checks (a program that reads out of range is regenerated). `launches` are `GridLaunch`es: argument
specs with the launch's grid and thread count, which support.fuzz_worker passes to `launch`.
"""

from __future__ import annotations

import random
import types

import numpy as np

from .launches import ArgSpec, build_args
from .numeric import Undefined

OFFSETS = range(-3, 4)
SIZES_1D = [1, 2, 3, 4, 5, 7, 8, 17, 33, 100]
SHAPES_2D = [(1, 1), (3, 1), (1, 4), (2, 2), (4, 5), (7, 13), (5, 9), (16, 33), (3, 17)]
THREADS = [1, 1, 2, 3, 5]


class GridLaunch(list):
    """A launch's argument specs, with the launch's grid (an int or a tuple) and thread count."""

    def __init__(self, specs, grid=1, threads=1) -> None:
        super().__init__(specs)
        self.grid, self.threads = grid, threads


class StencilGen:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.ends: random.Random | None = None
        self.guards: random.Random | None = None
        self.lines: list[str] = []
        self.indent = 1
        self.counter = 0

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    @staticmethod
    def moved(x: str, d) -> str:
        if isinstance(d, str):
            return f"{x} + {d}"
        return x if d == 0 else f"{x} + {d}" if d > 0 else f"{x} - {-d}"

    def clamp(self, x: str, top: str, d=None) -> str:
        """An index within [0, top] for every x in [0, top]: a clamp of x + d (d from -3 to 3, or a loop
        variable `d` in that range), to the shape's bounds or to the arguments lo and hi (in [0, top])."""
        d = self.rng.choice(OFFSETS) if d is None else d
        v = self.moved(x, d)
        lo, hi = self.rng.choice([("0", top), ("0", top), ("lo", "hi"), ("0", "hi"), ("lo", top)])
        r = self.rng.random()
        if r < 0.3:
            return f"min(max({v}, {lo}), {hi})"
        if r < 0.5:
            return f"max(min({v}, {hi}), {lo})"
        if r < 0.6:
            return f"min({hi}, max({lo}, {v}))"
        if r < 0.7:
            return f"max({lo}, min({hi}, {v}))"
        if r < 0.8:  # nested: both bounds of the shape around both of the arguments
            return f"min(max(min(max({v}, lo), hi), 0), {top})"
        if r < 0.9 and not isinstance(d, str):  # one side only, where the other cannot be passed
            return f"min({v}, {top})" if d >= 0 else f"max({v}, 0)"
        return f"max(min({v}, {top}), 0)"

    def term(self, read: str, kind: str) -> str:
        coef = self.rng.choice(["2.0", "0.25", "-1.5", "3", "0.5"]) if kind == "float" else str(self.rng.randint(1, 3))
        value = read if kind == "float" else f"int({read})"
        return f"{value} * {coef}" if self.rng.random() < 0.7 else value

    def read(self, dims, kind, d=None):
        if len(dims) == 1:
            return f"src[{self.from_end(self.clamp('i', 'n - 1', d), 'n')}]"
        (y, h), (x, w) = dims
        row = self.clamp(y, h, d if self.rng.random() < 0.5 else None)
        return f"src[{self.from_end(row, f'{h} - 1')}, {self.from_end(self.clamp(x, w, d), f'{w} - 1')}]"

    def from_end(self, index: str, extent: str) -> str:
        """Now and then (a stream of its own, `ends`, so the rest of the program is what it was) the index
        less its extent: it counts from the end, as in Python, a sum with a negative term that the
        lowering's sign test must see (docs/frontend.md)."""
        if self.ends is None or self.ends.random() >= 0.2:
            return index
        # int(...): a clamp to a uint32 bound is that bound's type in Python (max returns it), int64 in gpuc
        return f"int({index}) - {extent}" if extent == "n" else f"int({index}) - ({extent})"

    def guard(self, dims) -> str:
        """A test of the item's index against the shape's bounds or lo and hi, which the clamp split runs
        without where it holds (or fails, as its branch asks): interior, one-sided, either operand first,
        an item left out (`!=`), a negated `or`."""
        x, top = dims[-1][0], "n - 1" if len(dims) == 1 else dims[-1][1]
        k, j = self.guards.randint(0, 2), self.guards.randint(0, 2)
        return self.guards.choice([
            f"{x} > {k} and {x} < {top} - {j}", f"{x} >= lo and {x} <= hi", f"{x} != lo", f"{x} != {top}",
            f"not ({x} < lo or {x} > hi)", f"{top} - {j} > {x}", f"lo <= {x}", f"{x} + {k} >= hi",
            f"{x} - {k} < lo", f"{x} >= {k} and hi - {j} >= {x}"])

    def body(self, dims, kind, budget):
        for _ in range(budget):
            guarded = self.guards is not None and self.guards.random() < 0.3
            if guarded:
                self.emit(f"if {self.guard(dims)}:")
                self.indent += 1
            self.statement(dims, kind)
            if guarded:
                self.indent -= 1
                if self.guards.random() < 0.25:
                    self.emit("else:")
                    self.emit("    acc += 1")

    def statement(self, dims, kind):
        r = self.rng.random()
        if r < 0.45:
            self.emit(f"acc {self.rng.choice(['+', '+', '-'])}= {self.term(self.read(dims, kind), kind)}")
        elif r < 0.65:
            d = self.fresh("d")
            lo = self.rng.randint(-3, 0)
            self.emit(f"for {d} in range({lo}, {self.rng.randint(lo + 1, 4)}):")
            self.indent += 1
            self.emit(f"acc += {self.term(self.read(dims, kind, d), kind)}")
            self.indent -= 1
        elif r < 0.8 and len(dims) == 2:  # a clamped row in a local, then its columns
            (y, h), (x, w) = dims
            row = self.fresh("r")
            self.emit(f"{row} = {self.clamp(y, h)}")
            self.emit(f"acc += {self.term(f'src[{row}, {self.clamp(x, w)}]', kind)}")
        elif r < 0.8:
            k = self.fresh("k")
            self.emit(f"{k} = {self.clamp('i', 'n - 1')}")
            self.emit(f"acc += {self.term(f'src[{k}]', kind)}")
        else:
            own = "src[i]" if len(dims) == 1 else "src[y, x]"
            test = self.rng.choice([f"{own} > {'0.5' if kind == 'float' else '100'}",
                                    f"{dims[-1][0]} % 3 == 0", f"{dims[-1][0]} > lo"])
            self.emit(f"if {test}:")
            self.indent += 1
            self.emit(f"acc += {self.term(self.read(dims, kind), kind)}")
            self.indent -= 1
            if self.rng.random() < 0.5:
                self.emit("else:")
                self.emit(f"    acc -= {self.term(self.read(dims, kind), kind)}")


def generate(seed: int, index) -> tuple[str, list]:
    """Stencil program `index` of stream `seed`: (source, [GridLaunch, ...])."""
    rng = random.Random(f"stencil:{seed}:{index}")
    g = StencilGen(rng)
    g.ends = random.Random(f"stencil-ends:{seed}:{index}")
    g.guards = random.Random(f"stencil-guards:{seed}:{index}")
    two = rng.random() < 0.4
    kind = "float" if rng.random() < 0.7 else "int"
    dtype = "float64" if kind == "float" else rng.choice(["uint8", "int32"])
    guard = rng.random() < 0.3
    g.lines = ["import gpuc", "", "", "@gpuc.kernel", "def kernel(src, out, lo, hi):"]
    if two:
        g.emit(rng.choice(["x = gpuc.index(0)\n    y = gpuc.index(1)", "y = gpuc.index(1)\n    x = gpuc.index(0)"]))
        g.emit("h, w = src.shape[0] - 1, src.shape[1] - 1")
        if guard:
            g.emit("if x > w or y > h:\n        return")
        dims = [("y", "h"), ("x", "w")]
    else:
        g.emit(rng.choice(["i = gpuc.index()", "i = gpuc.index(0)"]))
        g.emit("n = src.shape[0]")
        if guard:
            g.emit("if i >= n:\n        return")
        dims = [("i", "n")]
    g.emit("acc = 0.0" if kind == "float" else "acc = 0")
    g.body(dims, kind, rng.randint(1, 5))
    target = "out[i]" if not two else "out[y, x]"
    g.emit(f"{target} = acc" if kind == "float" else f"{target} = acc % 256")
    source = "\n".join(g.lines) + "\n"

    launches = []
    for _ in range(rng.randint(2, 4)):
        shape = (rng.choice(SIZES_1D),) if not two else rng.choice(SHAPES_2D)
        top = (shape[0] - 1) if not two else min(shape) - 1  # lo and hi index either axis
        values = (np.array([rng.uniform(0, 1) for _ in range(int(np.prod(shape)))]) if kind == "float"
                  else np.array([rng.randrange(256) for _ in range(int(np.prod(shape)))])).reshape(shape)
        lo, hi = rng.randint(0, top), rng.randint(0, top)
        if rng.random() < 0.3:
            lo, hi = max(lo, hi), min(lo, hi)  # lo > hi: no clamp-free range
        bound_t = rng.choice(["int64", "int64", "int32", "uint32"])
        specs = [ArgSpec("array", dtype, values.astype(dtype)),
                 ArgSpec("array", "float64" if kind == "float" else "int64", np.full(shape, -7.0 if kind == "float" else -7)
                         .astype("float64" if kind == "float" else "int64")),
                 ArgSpec("scalar", bound_t, lo, numpy=bound_t != "int64" or rng.random() < 0.5),
                 ArgSpec("scalar", bound_t, hi, numpy=bound_t != "int64" or rng.random() < 0.5)]
        if two:
            grid = (shape[1] + (rng.randint(0, 2) if guard else 0), shape[0] + (rng.randint(0, 1) if guard else 0))
        else:
            grid = shape[0] + (rng.randint(0, 3) if guard else 0)
            if rng.random() < 0.05:
                grid = 0
        launches.append(GridLaunch(specs, grid, rng.choice(THREADS)))
    return source, launches


class _Checked:
    """An array whose reads check their indices: in [-n, n), as Python's (where it would also take those past
    the ends of a view)."""

    def __init__(self, array: np.ndarray) -> None:
        self.array, self.shape = array, array.shape

    def _key(self, key):
        key = key if isinstance(key, tuple) else (key,)
        for k, n in zip(key, self.shape):
            if not -n <= int(k) < n:
                raise Undefined(f"index {k} out of range {n}")
        return tuple(int(k) for k in key)  # negative ones count from the end, as NumPy's do

    def __getitem__(self, key):
        return self.array[self._key(key)]

    def __setitem__(self, key, value):
        self.array[self._key(key)] = value


def reference(source: str, launch: GridLaunch):
    """The arrays after the launch, by Python: the kernel's source run for every item."""
    args, _ = build_args(launch)
    item = [0, 0]
    fake = types.SimpleNamespace(kernel=lambda f: f, func=lambda f: f,
                                 index=lambda d=0: item[d])
    names = {"gpuc": fake}
    exec(compile(source.replace("import gpuc\n", "", 1), "<stencil>", "exec"), names)  # the stand-in gpuc
    grid = launch.grid if isinstance(launch.grid, tuple) else (launch.grid, 1)
    wrapped = [_Checked(a) if isinstance(a, np.ndarray) else a for a in args]
    for y in range(grid[1]):
        for x in range(grid[0]):
            item[:] = [x, y]
            names["kernel"](*wrapped)
    return [a for a in args if isinstance(a, np.ndarray)]


def sample(seed: int, index: int, attempts: int = 50):
    """A defined stencil program: (source, launches, expected arrays per launch)."""
    for attempt in range(attempts):
        source, launches = generate(seed, index if attempt == 0 else f"{index}.{attempt}")
        try:
            return source, launches, [reference(source, launch) for launch in launches]
        except Undefined:
            continue
    raise RuntimeError(f"no defined stencil program for {seed}:{index}")


def describe(name, source, launch, k, expected, actual) -> str:
    grid = launch.grid
    lines = [f"== stencil {name}, launch {k}: kernel.launch({grid!r}, ..., threads={launch.threads}) ==",
             source.rstrip(), "-- arguments (src, out, lo, hi) --"]
    lines += [f"  {s.describe()}" for s in launch]
    lines += ["-- expected --", expected, "-- actual --", actual, ""]
    return "\n".join(lines)


def run(seed: int, count: int, start: int = 0, timeout: float = 60.0):
    """Stencil programs `start .. start + count - 1` through gpuc (in a worker process) against Python;
    returns the findings' descriptions."""
    from .fuzz import run_batch

    cases = {}
    for index in range(start, start + count):
        source, launches, expected = sample(seed, index)
        cases[f"s{seed}_{index}"] = (source, launches, expected)
    results = run_batch([(name, source, launches) for name, (source, launches, _) in cases.items()], timeout)
    findings = []
    for name, (source, launches, expected) in cases.items():
        got = results.get(name, ("crash", "no result"))
        if isinstance(got, tuple) and got[0] in ("crash", "hang"):
            findings.append(describe(name, source, launches[0], 0, "the launches complete", f"{got[0]}: {got[1]}"))
            continue
        for k, (launch, want, (kind, payload)) in enumerate(zip(launches, expected, got)):
            if kind != "ok":
                findings.append(describe(name, source, launch, k, "values", f"{kind}: {payload}"))
                continue
            for j, (g, w) in enumerate(zip(payload, want)):
                if g.shape != w.shape or not np.array_equal(g, w):
                    bad = np.argwhere(g != w)[:10].tolist() if g.shape == w.shape else "shape"
                    findings.append(describe(name, source, launch, k, repr(w), f"{g!r}\n  differs at {bad} "
                                             f"(array argument {j})"))
    return findings
