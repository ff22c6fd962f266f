"""Random block kernels: work items exchange values through shared memory between barriers, count
predicates over the block, shuffle within warps, in loops and in funcs; a NumPy reference runs the
items of each block in lock-step.

`program(rng)` gives a `Program`: the kernel's source (a module with one `kernel(a, out)`) and
`reference(a, n, block)`, what `out` holds after `kernel[n](a, out, block=block)`. Values are int64,
wrapping as in kernels, so results compare exactly.
"""

from __future__ import annotations

import importlib.util
import random
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

#: Shared arrays are this large: block sizes go up to it.
SIZE = 64
WARP = 32


@dataclass
class Program:
    seed: int
    phases: list = field(default_factory=list)  # (kind, params)
    funcs: list = field(default_factory=list)   # source of helper funcs

    @property
    def source(self) -> str:
        body = "\n".join("    " + line for phase in self.phases for line in _lines(*phase))
        head = ["import gpuc", "", f"SIZE = {SIZE}", "", ""]
        for text in self.funcs:
            head += [text, "", ""]
        return "\n".join(head) + f"""@gpuc.kernel
def kernel(a, out, g):
    s = gpuc.shared.array(SIZE, gpuc.int64)
    loc = gpuc.local.array(3, gpuc.int64)
    t = gpuc.thread_index(0) + gpuc.block_dim(0) * gpuc.thread_index(1)
    bd = gpuc.block_dim(0) * gpuc.block_dim(1)
    x, y = gpuc.index(0), gpuc.index(1)
    inside = x < out.shape[1] and y < out.shape[0]
    gi = t + bd * (gpuc.block_index(0) + gpuc.grid_dim(0) * gpuc.block_index(1))
    v = a[y, x] if inside else x * 7 + y * 3 + 1
{body}
    if inside:
        out[y, x] = v
"""

    @property
    def grid_barriers(self) -> bool:
        return any(kind == "grid" for kind, _ in self.phases)

    def reference(self, a: np.ndarray, block: tuple) -> np.ndarray:
        """`out` after kernel[(nx, ny)](a, out, g, block=block), a of shape (ny, nx): every block's
        items in lock-step, and the whole grid in lock-step across grid barriers."""
        ny, nx = a.shape
        bx, by = block
        gx, gy = -(-nx // bx), -(-ny // by)
        size = bx * by
        t = np.arange(size, dtype=np.int64)
        blocks = [(bxi, byi) for byi in range(gy) for bxi in range(gx)]
        xs = [bxi * bx + t % bx for bxi, _ in blocks]
        ys = [byi * by + t // bx for _, byi in blocks]
        with np.errstate(all="ignore"):
            vs = [np.where((x < nx) & (y < ny), a[np.minimum(y, ny - 1), np.minimum(x, nx - 1)], x * 7 + y * 3 + 1)
                  for x, y in zip(xs, ys)]
            locs = [np.zeros((size, 3), np.int64) for _ in blocks]
            for kind, params in self.phases:
                if kind == "grid":
                    e, c = params
                    g = np.concatenate([_value(e, {"v": v, "t": t}) * np.ones_like(v) for v in vs])
                    total = len(g)
                    gi = np.arange(total, dtype=np.int64)
                    vs = [v ^ g[(gi[k * size:(k + 1) * size] + c) % total] for k, v in enumerate(vs)]
                    continue
                vs = [_run(kind, params, v, t, size, loc) for v, loc in zip(vs, locs)]
        out = np.zeros((ny, nx), np.int64)
        for x, y, v in zip(xs, ys, vs):
            inside = (x < nx) & (y < ny)
            out[y[inside], x[inside]] = v[inside]
        return out


def _expr(rng: random.Random, names) -> tuple:
    """A random expression tree over `names` and small constants: ("op", a, b) | name | int."""
    def leaf():
        return rng.choice(names) if rng.random() < 0.7 else rng.randint(-9, 9)

    def tree(depth):
        if depth == 0 or rng.random() < 0.3:
            return leaf()
        op = rng.choice(["+", "-", "*", "^", "&", "|", ">>"])
        right = rng.randint(0, 5) if op == ">>" else tree(depth - 1)
        return (op, tree(depth - 1), right)
    return tree(rng.randint(1, 3))


def _text(e) -> str:
    if isinstance(e, tuple):
        return f"({_text(e[1])} {e[0]} {_text(e[2])})"
    return str(e) if not isinstance(e, int) or e >= 0 else f"({e})"


def _value(e, env):
    if isinstance(e, tuple):
        x, y = _value(e[1], env), _value(e[2], env)
        op = e[0]
        if op == ">>":
            return np.right_shift(x, np.int64(y))
        return {"+": np.add, "-": np.subtract, "*": np.multiply, "^": np.bitwise_xor, "&": np.bitwise_and,
                "|": np.bitwise_or}[op](x, y)
    if isinstance(e, int):
        return np.int64(e)
    return env[e]


def program(rng: random.Random, seed: int = 0) -> Program:
    p = Program(seed)
    for _ in range(rng.randint(1, 4)):
        kind = rng.choice(["exchange", "exchange", "count", "loop", "shuffle", "func", "any_all", "vote",
                           "local", "grid"])
        if kind == "exchange":
            p.phases.append((kind, (_expr(rng, ["v", "t"]), _expr(rng, ["v", "u", "t"]), rng.randint(0, 5))))
        elif kind == "count":
            p.phases.append((kind, (_expr(rng, ["v", "t"]), rng.randint(1, 9))))
        elif kind == "any_all":
            p.phases.append((kind, (_expr(rng, ["v", "t"]),)))
        elif kind == "loop":
            p.phases.append((kind, (rng.randint(1, 3), _expr(rng, ["v", "r"]), rng.randint(0, 3))))
        elif kind == "shuffle":
            p.phases.append((kind, (rng.choice(["up", "down", "xor", "idx"]), rng.randint(0, 33))))
        elif kind == "vote":
            p.phases.append((kind, (rng.choice(["ballot", "any", "all"]), _expr(rng, ["v", "t"]))))
        elif kind == "local":
            p.phases.append((kind, (_expr(rng, ["v", "t"]), rng.randint(0, 2), rng.randint(0, 2))))
        elif kind == "grid":
            p.phases.append((kind, (_expr(rng, ["v", "t"]), rng.randint(0, 9))))
        else:
            name = f"phase{len(p.funcs)}"
            e1, e2, c = _expr(rng, ["v", "t"]), _expr(rng, ["v", "u", "t"]), rng.randint(0, 5)
            p.funcs.append(f"""@gpuc.func
def {name}(s, t, v, bd):
    s[t] = {_text(e1)}
    gpuc.barrier()
    u = s[(t + {c}) % bd]
    gpuc.barrier()
    return {_text(e2)}""")
            p.phases.append((kind, (name, e1, e2, c)))
    return p


def _lines(kind, params) -> list[str]:
    if kind == "exchange":
        e1, e2, c = params
        return [f"s[t] = {_text(e1)}", "gpuc.barrier()", f"u = s[(t + {c}) % bd]", "gpuc.barrier()",
                f"v = {_text(e2)}"]
    if kind == "count":
        e, k = params
        return [f"v = v + {k} * gpuc.barrier_count({_text(e)} > 0)"]
    if kind == "any_all":
        (e,) = params
        return [f"v = v + (2 if gpuc.barrier_all({_text(e)} > 0) else 0) + (1 if gpuc.barrier_any({_text(e)} < 0) "
                "else 0)"]
    if kind == "loop":
        count, e, c = params
        return [f"for r in range({count}):", f"    s[t] = {_text(e)}", "    gpuc.barrier()",
                f"    v = v ^ s[(bd - 1 - t + {c}) % bd]", "    gpuc.barrier()"]
    if kind == "shuffle":
        how, d = params
        return [f"v = v + gpuc.shfl_{how}(v, {d})"]
    if kind == "vote":
        how, e = params
        call = {"ballot": f"gpuc.int64(gpuc.ballot({_text(e)} > 0) & 0x7fffffffffffffff)",
                "any": f"(5 if gpuc.vote_any({_text(e)} > 0) else 0)",
                "all": f"(3 if gpuc.vote_all({_text(e)} > 0) else 0)"}[how]
        return [f"v = v + {call}"]
    if kind == "local":
        e, k, m = params
        return [f"loc[{k}] = loc[{k}] + {_text(e)}", "gpuc.barrier()", f"v = v ^ loc[{m}]"]
    if kind == "grid":
        e, c = params
        return [f"g[gi] = {_text(e)}", "gpuc.grid_barrier()", f"v = v ^ g[(gi + {c}) % len(g)]", "gpuc.grid_barrier()"]
    name = params[0]
    return [f"v = {name}(s, t, v, bd)"]


def _run(kind, params, v, t, block, loc):
    if kind in ("exchange", "func"):
        e1, e2, c = params if kind == "exchange" else params[1:]
        s = _value(e1, {"v": v, "t": t}) * np.ones_like(v)
        u = s[(t + c) % block]
        return _value(e2, {"v": v, "u": u, "t": t}) * np.ones_like(v)
    if kind == "count":
        e, k = params
        return v + k * np.int64(np.count_nonzero(_value(e, {"v": v, "t": t}) * np.ones_like(v) > 0))
    if kind == "any_all":
        (e,) = params
        x = _value(e, {"v": v, "t": t}) * np.ones_like(v)
        return v + (2 if np.all(x > 0) else 0) + (1 if np.any(x < 0) else 0)
    if kind == "loop":
        count, e, c = params
        for r in range(count):
            s = _value(e, {"v": v, "r": np.int64(r)}) * np.ones_like(v)
            v = v ^ s[(block - 1 - t + c) % block]
        return v
    if kind == "vote":
        how, e = params
        p = _value(e, {"v": v, "t": t}) * np.ones_like(v) > 0
        lane, warp = t % WARP, t // WARP
        result = np.zeros_like(v)
        for w in np.unique(warp):
            mine = warp == w
            if how == "ballot":
                bits = int(sum(1 << int(k) for k in lane[mine & p]))
                result[mine] = np.int64(bits & 0x7fffffffffffffff)
            elif how == "any":
                result[mine] = 5 if p[mine].any() else 0
            else:
                result[mine] = 3 if p[mine].all() else 0
        return v + result
    if kind == "local":
        e, k, m = params
        loc[:, k] = loc[:, k] + _value(e, {"v": v, "t": t}) * np.ones_like(v)
        return v ^ loc[:, m]
    how, d = params
    lane = t % WARP
    base = t - lane
    src = {"up": lane - d, "down": lane + d, "xor": lane ^ d, "idx": np.full_like(lane, d % WARP)}[how]
    ok = (src >= 0) & (src < WARP) & (base + src < block)
    other = v[np.where(ok, base + src, t)]
    return v + other


def load(p: Program, directory: Path):
    """The kernel of `p`, written to a file in `directory` and imported."""
    path = directory / f"gpuc_blocks_{p.seed}.py"
    path.write_text(p.source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kernel
