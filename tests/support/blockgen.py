"""Random block kernels: work items exchange values through shared memory between barriers, count
predicates over the block, shuffle and vote within warps, in loops and in funcs; a NumPy reference
runs the items of each block in lock-step.

`program(rng)` gives a `Program`: the kernel's source (a module with one `kernel(a, out, g)`) and
`reference(a, block, warp)`, what `out` holds after `kernel[nx, ny](a, out, g, block=block)` with warps
of `warp` lanes. Values are int64, wrapping as in kernels, so results compare exactly.
`check(case_seed, stream, directory)` runs one program with two random blocks on 1 and 2 threads
against it; `check(..., device="opencl")` runs it through OpenCL, where the warp is the sub-group the
device's compiler chose for the kernel (4 to 64 lanes) and grid barriers are a located error.

    cd tests && ../.venv/bin/python -m support.blockgen --seed 7 --count 2000 [--phases warploop vote] [--device opencl]

runs a soak (`--out FILE` writes the findings there too): it prints each finding (what differed and
the program) and a summary with the phases the programs chained.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from support.vectorize import item_by_item

#: Shared arrays are this large: block sizes go up to it.
SIZE = 64
WARP = 32
#: The phases a program chains, each as likely as its repetitions make it.
KINDS = ("exchange", "exchange", "count", "loop", "shuffle", "func", "any_all", "vote", "local", "grid",
         "warploop", "warploop", "uniform", "tail")
#: The phases of programs about warp operations in loops, and what they meet on their way.
WARP_KINDS = ("warploop", "warploop", "warploop", "shuffle", "vote", "exchange", "count")
#: Block shapes a program runs with: partial warps, 2-D blocks whose warps span rows.
BLOCKS = ((1, 1), (3, 1), (8, 1), (32, 1), (40, 1), (64, 1), (4, 4), (8, 5), (2, 16), (1, 7))


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

    def reference(self, a: np.ndarray, block: tuple, warp: int = WARP) -> np.ndarray:
        """`out` after kernel[(nx, ny)](a, out, g, block=block), a of shape (ny, nx), with warps of `warp`
        lanes: every block's items in lock-step, and the whole grid in lock-step across grid barriers."""
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
                vs = [_run(kind, params, v, t, size, loc, warp, bx) for v, loc in zip(vs, locs)]
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


def program(rng: random.Random, seed: int = 0, kinds=KINDS) -> Program:
    p = Program(seed)
    for _ in range(rng.randint(1, 4)):
        kind = rng.choice(kinds)
        if kind == "warploop":
            params = _warploop(rng)
            p.phases.append((kind, params))
            if params[0] == "lane":
                break  # lanes left its loop at different times: no warp may wait for them after it
            continue
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
        elif kind == "tail":
            p.phases.append((kind, (rng.choice(_TAILS), rng.choice("+^-"), rng.randint(0, 3), rng.randint(0, 1),
                                    rng.randint(0, 1), rng.randint(0, 1), rng.randint(0, 1), rng.randint(0, 5),
                                    rng.randint(0, 2))))
        elif kind == "uniform":
            # (an `if` on the item's index in the loop, and the loop's counters read after a barrier: from a
            # stream of their own, so that the programs of earlier seeds stay what they were)
            guard = random.Random(f"blockgen-uniform-guard:{seed}:{len(p.phases)}").randint(0, 3)
            p.phases.append((kind, (rng.randint(0, 5), rng.randint(0, 3), rng.randint(-20, 20), rng.randint(1, 4),
                                    rng.randint(0, 1), rng.randint(-3, 3), rng.randint(1, 2), guard)))
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
    if kind == "warploop":
        return _warploop_lines(params)
    if kind == "uniform":
        # values the same in every item of the block (a barrier loop's counter, a count, what they give),
        # read across barriers, and a barrier under a branch all items take alike
        # (guard: none, an `if` on the item's index inside the loop whose arms meet there, that and the
        # counters' values after the loop read across a barrier, an `if`/`else` and those reads)
        k, m, th, count, p, c, step, guard = params if len(params) == 8 else (*params, 0)
        lines = [f"q = {k} + bd * {m} + gpuc.barrier_count(v > {th})", "r = 0", f"while r < {count}:",
                 "    s[t] = v + q * r", "    gpuc.barrier()", f"    if (r + q) % 2 == {p}:",
                 "        v = v ^ s[(t + q + r) % bd]", "        gpuc.barrier()"]
        if guard in (1, 2):
            lines += ["    if t % 3 == 1:", "        v = v + q"]
        elif guard == 3:
            lines += ["    if t < bd // 2:", "        v = v - r", "    else:", "        v = v + 1"]
        lines += [f"    v = v + r * {c} + q", f"    r = r + {step}", "    q = q ^ r", "    gpuc.barrier()"]
        if guard >= 2:
            lines += ["gpuc.barrier()", "v = v ^ (q * 3 + r)"]
        return lines
    if kind == "tail":
        return _tail_lines(params)
    name = params[0]
    return [f"v = {name}(s, t, v, bd)"]


#: The guards of the tail phase, on x = the x thread index and the halving stride k (d: a shift); the
#: work side is the items for which the guard holds.
_TAILS = ("x < k", "k > x", "x <= k - 1", "not x >= k", "x < k - d")


def _tail_guard(form: str, x, k, d):
    return {"x < k": lambda: x < k, "k > x": lambda: k > x, "x <= k - 1": lambda: x <= k - 1,
            "not x >= k": lambda: ~(x >= k), "x < k - d": lambda: x < k - d}[form]()


def _tail_lines(params) -> list[str]:
    # a tree over each row of the block whose items past the stride have nothing to do until the next
    # barrier (the CPU's loops over items end there); sometimes work elsewhere that keeps them running:
    # a store of their own before the guard (a), under a branch that differs between items (b), on the
    # guard's idle side (c)
    form, op, d, a, b, c, flip, add, m = params
    guard = form.replace("x", "gpuc.thread_index(0)").replace(" d", f" {d}")
    lines = ["s[t] = v", "gpuc.barrier()", "k = gpuc.block_dim(0) // 2", "while k > 0:"]
    lines += ["    loc[0] = loc[0] + k"] * a + ["    if v % 2 == 0:", "        loc[1] = loc[1] + 1"] * b
    lines += [f"    if {guard}:", f"        s[t] = s[t] {op} s[t + k]"]
    lines += ["    else:", "        loc[2] = loc[2] ^ k"] * c
    lines += ["    gpuc.barrier()", "    k = k // 2"]
    lines += ["if gpuc.thread_index(0) != 0:", "    pass", "else:"] if flip else ["if gpuc.thread_index(0) == 0:"]
    return lines + [f"    s[t] = s[t] + {add}", "gpuc.barrier()", f"v = v ^ s[(t + {add}) % bd] ^ loc[{m}]",
                    "gpuc.barrier()"]


def _tail_run(params, v, t, block: int, loc, bx: int):
    form, op, d, a, b, c, flip, add, m = params
    x, s, k = t % bx, v.copy(), bx // 2
    while k > 0:
        loc[:, 0] += k * a
        loc[:, 1] += (v % 2 == 0) * b
        work = _tail_guard(form, x, k, d)
        other = s[np.where(work, t + k, t)]
        s = np.where(work, s + other if op == "+" else s ^ other if op == "^" else s - other, s)
        loc[:, 2] ^= np.where(work, 0, k * c)
        k //= 2
    s = s + add * (x == 0)
    return v ^ s[(t + add) % block] ^ loc[:, m]


def _run(kind, params, v, t, block, loc, warp=WARP, bx=None):
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
        lane, which = t % warp, t // warp
        result = np.zeros_like(v)
        for w in np.unique(which):
            mine = which == w
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
    if kind == "warploop":
        return _warploop_run(params, v, t, block, warp)
    if kind == "tail":
        return _tail_run(params, v, t, block, loc, bx)
    if kind == "uniform":
        k, m, th, count, p, c, step, guard = params if len(params) == 8 else (*params, 0)
        q, r = np.int64(k + block * m + np.count_nonzero(v > th)), np.int64(0)
        while r < count:
            s = v + q * r
            if (r + q) % 2 == p:
                v = v ^ s[(t + q + r) % block]
            if guard in (1, 2):
                v = np.where(t % 3 == 1, v + q, v)
            elif guard == 3:
                v = np.where(t < block // 2, v - r, v + 1)
            v = v + r * c + q
            r = r + step
            q = q ^ r
        if guard >= 2:
            v = v ^ (q * 3 + r)
        return v
    how, d = params
    lane = t % warp
    base = t - lane
    src = {"up": lane - d, "down": lane + d, "xor": lane ^ d, "idx": np.full_like(lane, d % warp)}[how]
    ok = (src >= 0) & (src < warp) & (base + src < block)
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


# -- warp operations in loops ------------------------------------------------------------------------
#
# A "warploop" phase: a loop of one to three statements, which carries `w` (a lane, distance or mask,
# 0..63, so also past the warp) and `m` (a mask ballots are xored into) from one iteration to the next.
# Statements: shuffles of every kind of `v`, `w`, `m` or a bool, with `w`, `r`, constants, `w ^ r`,
# `m & 63` or `w - 32` as lane, distance or mask; ballots into `m`; votes; `w` stepped or shuffled
# itself (pointer jumping); shared memory exchanged within the warp between two syncwarps; barrier
# counts, in loops the whole block runs as often. The loop runs a constant number of times
# ("const"), while any lane of the warp wants to ("vote", so warps of a block run it a different
# number of times), or a number of times of each lane's own ("lane"): a lane that has left that loop
# no longer takes part (no source, no vote), and since no warp operation may follow for such a warp,
# the phase is a program's last. Most bodies hold one warp operation: then the values it reads are
# defined again in the region that follows it on the CPU (the loop leads back to it without another
# synchronization).

_OPERANDS = ("w", "w", "r", "c", ("^", "w", "r"), ("&", "m", 63), ("-", "w", 32))
_STATEMENTS = ("shfl", "shfl", "shfl", "shfl", "wshfl", "wshfl", "wstep", "ballot", "any", "all", "bshfl", "sync",
               "count")
_NAMES = ["v", "w", "m", "r", "t", "ln"]


def _warploop(rng: random.Random) -> tuple:
    def operand():
        o = rng.choice(_OPERANDS)
        return rng.randint(0, 40) if o == "c" else o

    def predicate():
        return (rng.choice(["gt", "mask"]), _expr(rng, _NAMES))

    mode = rng.choice(["const", "vote", "lane"])

    def statement():
        allowed = _STATEMENTS if mode == "const" else _STATEMENTS[:-1]  # a barrier waits for the whole block
        what, kind = rng.choice(allowed), rng.choice(["idx", "up", "down", "xor"])
        if what == "shfl":
            return (what, kind, rng.choice(["v", "v", "w", "m"]), operand(), rng.choice(["+", "^", "-"]))
        if what == "wshfl":
            return (what, kind, operand())
        if what == "wstep":
            return (what, rng.randint(1, 5), rng.randint(0, 40))
        if what == "ballot":
            return (what, predicate())
        if what in ("any", "all", "count"):
            return (what, predicate(), rng.randint(1, 9))
        if what == "bshfl":
            return (what, kind, operand(), predicate(), rng.randint(1, 9))
        return (what, rng.randint(1, 31))

    body = [statement() for _ in range(rng.choice([1, 1, 1, 1, 2, 3]))]
    if not any(st[0] in ("wshfl", "wstep") for st in body):
        body.insert(rng.randint(0, len(body)), ("wstep", rng.randint(1, 5), rng.randint(0, 40)))
    # the trip count, lane and mask start from random expressions, mixed with t so that lanes differ
    limit = ("+", _expr(rng, ["v", "t"]), "t")
    w0, m0 = ("^", _expr(rng, ["v", "t"]), ("*", "t", rng.randint(0, 7))), ("^", _expr(rng, ["v", "t"]), "t")
    return (mode, rng.randint(1, 4), limit, w0, m0, tuple(body), rng.randint(1, 9))


def _predicate_text(pred) -> str:
    how, e = pred
    return f"({_text(e)} > 0)" if how == "gt" else f"(((m >> ln) & 1) == ({_text(e)} & 1))"


def _statement_lines(st) -> list[str]:
    what = st[0]
    if what == "shfl":
        _, kind, src, o, op = st
        return [f"v = v {op} gpuc.shfl_{kind}({src}, {_text(o)})"]
    if what == "wshfl":
        return [f"w = gpuc.shfl_{st[1]}(w, {_text(st[2])})"]
    if what == "wstep":
        return [f"w = (w * {st[1]} + r + {st[2]}) & 63"]
    if what == "ballot":
        return [f"m = m ^ gpuc.int64(gpuc.ballot({_predicate_text(st[1])}) & 0x7fffffffffffffff)"]
    if what in ("any", "all"):
        return [f"v = v + ({st[2]} if gpuc.vote_{what}({_predicate_text(st[1])}) else 0)"]
    if what == "count":
        return [f"v = v + {st[2]} * gpuc.barrier_count({_predicate_text(st[1])})"]
    if what == "bshfl":
        _, kind, o, pred, k = st
        return [f"v = v + ({k} if gpuc.shfl_{kind}({_predicate_text(pred)}, {_text(o)}) else 0)"]
    c = st[1]
    # the partner's slot, if it is in the warp (warps narrower than 32 lanes on OpenCL), else the item's own
    return ["gpuc.syncwarp()", f"p = t - ln + (ln ^ {c})",
            f"v = v ^ s[p if p < bd and (ln ^ {c}) < gpuc.warp_size() else t]", "gpuc.syncwarp()", "s[t] = v"]


def _warploop_lines(params) -> list[str]:
    mode, count, lim, w0, m0, body, k = params
    lines = ["ln = gpuc.lane_index()", f"w = {_text(w0)} & 63", f"m = {_text(m0)}"]
    if any(st[0] == "sync" for st in body):
        lines.append("s[t] = v")
    if mode == "const":
        lines.append(f"for r in range({count}):")
    elif mode == "lane":
        lines += [f"lim = {_text(lim)} & 3", "for r in range(lim):"]
    else:
        lines += [f"lim = {_text(lim)} & 3", "r = 0", "while gpuc.vote_any(r < lim):"]
    inner = [line for st in body for line in _statement_lines(st)] + (["r = r + 1"] if mode == "vote" else [])
    return lines + ["    " + line for line in inner] + [f"v = v ^ (w * {k} + m)"]


class _Warps:
    """The warps of `warp` lanes of a block of `block` items (t = 0..block-1): each item's lane, the first
    item of its warp and its warp's width."""

    def __init__(self, t, block: int, warp: int = WARP) -> None:
        self.t, self.warp = t, warp
        self.lane = t % warp
        self.base = t - self.lane
        self.width = np.minimum(warp, block - self.base)

    def shuffle(self, values, kind: str, operand, active):
        """Each item's shuffle of `values`: its own value where the source lane is outside its warp or
        not `active`."""
        source = {"idx": operand % self.warp, "up": self.lane - operand, "down": self.lane + operand,
                  "xor": self.lane ^ operand}[kind]
        inside = (source >= 0) & (source < self.width)
        item = np.where(inside, self.base + source, self.t)
        return np.where(inside & active[item], values[item], values)

    def ballot(self, pred, active):
        """Each item's ballot of `pred` over the active lanes of its warp."""
        bits = np.where(pred & active, np.int64(1) << self.lane, np.int64(0))
        out = np.zeros_like(bits)
        for base in np.unique(self.base):
            out[self.base == base] = np.bitwise_or.reduce(bits[self.base == base])
        return out


def _warploop_run(params, v, t, block: int, warp: int = WARP):
    mode, count, lim, w0, m0, body, k = params
    warps, ones = _Warps(t, block, warp), np.ones_like(v)
    state = {"v": v, "w": (_value(w0, {"v": v, "t": t}) * ones) & 63, "m": _value(m0, {"v": v, "t": t}) * ones,
             "s": v.copy()}
    limit = (_value(lim, {"v": v, "t": t}) * ones) & 3
    r = 0
    while True:
        if mode == "const":
            active = np.full(len(v), r < count)
        elif mode == "lane":
            active = limit > r
        else:  # the warp's vote in the loop's test, over all its lanes
            active = warps.ballot(r < limit, np.ones(len(v), bool)) != 0
        if not active.any():
            break
        for st in body:
            _statement_run(st, state, warps, active, r)
        r += 1
    return state["v"] ^ (state["w"] * k + state["m"])


def _statement_run(st, state, warps: _Warps, active, r: int) -> None:
    """One statement of a warploop's body for the `active` items of a block (in place on `state`)."""
    v, w, m = state["v"], state["w"], state["m"]
    env = {"v": v, "w": w, "m": m, "r": np.int64(r), "t": warps.t, "ln": warps.lane}
    ones = np.ones_like(v)

    def pred(p):
        how, e = p
        x = _value(e, env) * ones
        return x > 0 if how == "gt" else ((m >> warps.lane) & 1) == (x & 1)

    what = st[0]
    if what == "shfl":
        _, kind, src, o, op = st
        got = warps.shuffle(env[src], kind, _value(o, env) * ones, active)
        state["v"] = np.where(active, _value((op, "v", "x"), {"v": v, "x": got}), v)
    elif what == "wshfl":
        state["w"] = np.where(active, warps.shuffle(w, st[1], _value(st[2], env) * ones, active), w)
    elif what == "wstep":
        state["w"] = np.where(active, (w * st[1] + r + st[2]) & 63, w)
    elif what == "ballot":
        state["m"] = np.where(active, m ^ warps.ballot(pred(st[1]), active), m)
    elif what == "any":
        state["v"] = np.where(active & (warps.ballot(pred(st[1]), active) != 0), v + st[2], v)
    elif what == "all":
        state["v"] = np.where(active & (warps.ballot(~pred(st[1]), active) == 0), v + st[2], v)
    elif what == "count":  # in "const" loops only: every item of the block is active
        state["v"] = v + st[2] * np.int64(np.count_nonzero(pred(st[1])))
    elif what == "bshfl":
        _, kind, o, p, k = st
        state["v"] = np.where(active & warps.shuffle(pred(p), kind, _value(o, env) * ones, active), v + k, v)
    else:
        partner = warps.lane ^ st[1]
        s = state["s"]
        u = s[np.where(partner < warps.width, warps.base + partner, warps.t)]
        state["v"] = np.where(active, v ^ u, v)
        state["s"] = np.where(active, state["v"], s)


# -- running programs --------------------------------------------------------------------------------

def cases(count: int, seed: int) -> list[tuple[int, int]]:
    """`count` (program seed, random stream) pairs of the soak `seed`."""
    rng = random.Random(seed)
    return [(seed * 100003 + k, rng.getrandbits(32)) for k in range(count)]


#: What a device says of a grid barrier, which it cannot run (docs/targets.md, grid_barrier_missing).
NO_GRID_BARRIER = {"opencl": "gpuc.grid_barrier() needs every work-group of the launch running at once"}


def check(case_seed: int, stream: int, directory: Path, kinds=KINDS, device: str = "cpu",
          tally: Counter | None = None) -> str | None:
    """Run program `case_seed` with two random block shapes and sizes (its stream `stream`) on 1 and 2
    threads (once on a device that schedules its own work items): None when `out` equals the reference
    each time, or the launch of a program with grid barriers is the device's located refusal of them,
    else what differed and the program. `tally` counts the launches checked, refused and left unchecked
    because the device maps items to warps its own way (device_maps_warps)."""
    tally = Counter() if tally is None else tally
    rng = random.Random(stream)
    p = program(rng, case_seed, kinds)
    kernel = load(p, directory)
    for _ in range(2):
        block = rng.choice(BLOCKS)
        nx, ny = rng.randint(1, 2 * block[0] + 5), rng.randint(1, 2 * block[1] + 2)
        a = np.array([[rng.randint(-1000, 1000) for _ in range(nx)] for _ in range(ny)], dtype=np.int64)
        grid = -(-nx // block[0]) * -(-ny // block[1]) * block[0] * block[1]
        for threads in (1, 2) if device == "cpu" else (1,):
            out = np.zeros((ny, nx), np.int64)
            args = (a, out, np.zeros(grid, np.int64))
            if p.grid_barriers and device in NO_GRID_BARRIER:
                tally["grid barriers refused"] += 1
                return _refused_grid_barrier(kernel, (nx, ny), args, block, device, p)
            kernel.launch((nx, ny), *args, block=block, threads=threads, device=device)
            warp = warp_width(kernel, args, block, device)
            if device_maps_warps(p, block, warp, device):
                tally["warps the device maps its own way"] += 1
                continue
            tally["checked"] += 1
            want = p.reference(a, block, warp)
            if not np.array_equal(out, want):
                bad = np.argwhere(out != want)[0]
                return (f"block={block} n={(nx, ny)} threads={threads} device={device}: out[{tuple(bad)}] = "
                        f"{out[tuple(bad)]}, the lock-step reference says {want[tuple(bad)]}\n--- program (seed "
                        f"{case_seed}) ---\n{p.source}")
            if device == "cpu" and threads == 1:  # and without vectorization across work items: bit for bit
                again = (a, np.zeros((ny, nx), np.int64), np.zeros(grid, np.int64))
                item_by_item(kernel).launch((nx, ny), *again, block=block, threads=1, device=device)
                if not np.array_equal(again[1], out):
                    bad = np.argwhere(again[1] != out)[0]
                    return (f"block={block} n={(nx, ny)}: out[{tuple(bad)}] = {out[tuple(bad)]} vectorized, "
                            f"{again[1][tuple(bad)]} without vectorization\n--- program (seed {case_seed}) ---\n"
                            f"{p.source}")
    return None


def warp_width(kernel, args, block, device: str) -> int:
    """The lanes of a warp of `kernel` launched with `block` on `device`: 32 on the CPU; on OpenCL the
    sub-group size the driver's compiler chose for the kernel (what gpuc.warp_size() reads there)."""
    if device == "cpu":
        return WARP
    from gpuc.runtime import dispatch
    return dispatch.launcher_for(kernel, args, device, whole_blocks=True).opencl.sub_group_size(block)


#: Phases whose values depend on which items share a warp.
WARP_PHASES = frozenset({"shuffle", "vote", "warploop"})
DEVICE_LANES = ("OpenCL leaves the mapping of work items to sub-groups to the device: Intel's CPU runtime forms them "
                "along x, a row at a time, not from consecutive linear indices as gpuc's warps on the CPU")


def device_maps_warps(p: Program, block, warp: int, device: str) -> bool:
    """Whether `p`'s results in blocks of `block` depend on a mapping of items to warps that is the device's
    own (DEVICE_LANES): warp operations in a 2-D block whose rows are not whole sub-groups of `warp` lanes."""
    return (device != "cpu" and block[1] > 1 and block[0] % warp != 0
            and any(kind in WARP_PHASES for kind, _ in p.phases))


def _refused_grid_barrier(kernel, n, args, block, device: str, p: Program) -> str | None:
    import gpuc
    try:
        kernel.launch(n, *args, block=block, device=device)
    except gpuc.CompilationError as exc:
        if NO_GRID_BARRIER[device] in str(exc) and f"gpuc_blocks_{p.seed}.py:" in str(exc):  # located
            return None
        return f"device={device}: a grid barrier was refused with {exc}\n--- program (seed {p.seed}) ---\n{p.source}"
    return f"device={device}: a kernel with grid barriers ran\n--- program (seed {p.seed}) ---\n{p.source}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--phases", nargs="*", choices=sorted(set(KINDS)), help="only these phase kinds")
    parser.add_argument("--out", type=Path, help="write every finding here")
    parser.add_argument("--device", default="cpu", choices=("cpu", "opencl"), help="launch the kernels here")
    ns = parser.parse_args(argv)
    kinds = tuple(ns.phases) if ns.phases else KINDS
    t0, findings, phases, tally = time.monotonic(), [], Counter(), Counter()
    with tempfile.TemporaryDirectory() as directory:
        for k, (case_seed, stream) in enumerate(cases(ns.count, ns.seed)):
            phases.update(kind for kind, _ in program(random.Random(stream), case_seed, kinds).phases)
            try:
                message = check(case_seed, stream, Path(directory), kinds, ns.device, tally)
            except Exception:  # a compile or launch error is a finding of its program too
                message = f"program seed {case_seed} (stream {stream}):\n{traceback.format_exc()}"
            if message:
                findings.append(message)
                print(message, flush=True)
            if (k + 1) % 100 == 0:
                print(f"{k + 1} programs, {len(findings)} findings, {time.monotonic() - t0:.0f} s", flush=True)
    if ns.out:
        ns.out.write_text("\n\n".join(findings))
    print(f"{ns.count} programs on {ns.device}, {len(findings)} findings in {time.monotonic() - t0:.0f} s; launches: "
          + ", ".join(f"{what} {n}" for what, n in tally.most_common()) + "; "
          "phases: " + ", ".join(f"{kind} {n}" for kind, n in phases.most_common()))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
