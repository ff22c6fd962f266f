"""Deterministic generator of target-independent LLVM IR modules for the benchmarks.

The modules look like what a frontend hands to the optimizer: unoptimized, alloca-based code
(so SROA/mem2reg have work), loops over arrays (loop rotation, LICM, the loop and SLP
vectorizers, unrolling), branches and a switch (simplifycfg, select formation, lookup
tables), small helper functions (the inliner) and kernels called from several drivers (calls
that stay calls, so codegen sees many functions).

Every function except the entry is `internal`: gpuc's `finish` stage (internalize everything
but the entry, then `globaldce`) is then a no-op, so gpuc's compile and one uninterrupted
`default<O2>` run see exactly the same IR and generate code for the same functions.

    python benchmarks/irgen.py medium > medium.ll     # print one module
    python -c "from benchmarks.irgen import generate; print(generate(100))"
"""

from __future__ import annotations

import argparse
import random
import sys

#: Approximate number of (unoptimized) instructions per preset.
SIZES = {"small": 100, "medium": 2_000, "large": 20_000}
ENTRY = "entry"

def count_instructions(text: str) -> int:
    """Instructions in LLVM IR text: indented lines inside function bodies, labels excluded."""
    n, inside = 0, False
    for line in text.splitlines():
        if line.startswith("define "):
            inside = True
        elif line.startswith("}"):
            inside = False
        elif inside and line.startswith("  ") and line.strip() and not line.strip().startswith(";"):
            n += 1
    return n


class _Fn:
    """Builds one function body with fresh SSA names."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.n = 0

    def v(self, prefix: str = "t") -> str:
        self.n += 1
        return f"%{prefix}{self.n}"

    def emit(self, text: str) -> None:
        self.lines.append(f"  {text}")

    def label(self, name: str) -> None:
        self.lines.append(f"{name}:")

    def body(self) -> str:
        return "\n".join(self.lines)


def _f(x: float) -> str:
    # Exactly representable float constants, printed the way LLVM accepts them.
    return f"{x:.6e}"


def _const(rng: random.Random) -> float:
    return rng.choice([0.5, 0.25, 1.5, 2.0, 0.75, 3.0, 1.25, 0.125, 4.0, 0.375])


# -- helpers: small, inlined everywhere --------------------------------------------------------

def _helper_poly(g: int, rng: random.Random) -> str:
    c1, c2, c3 = _const(rng), _const(rng), _const(rng)
    return (f"define internal float @h{g}_poly(float %x) {{\n"
            f"  %x2 = fmul float %x, %x\n"
            f"  %a = fmul float %x2, {_f(c1)}\n"
            f"  %b = fmul float %x, {_f(c2)}\n"
            f"  %s = fadd float %a, %b\n"
            f"  %r = fadd float %s, {_f(c3)}\n"
            f"  ret float %r\n}}\n")


def _helper_clamp(g: int, rng: random.Random) -> str:
    return (f"define internal float @h{g}_clamp(float %x, float %lo, float %hi) {{\n"
            f"entry:\n"
            f"  %r = alloca float\n"
            f"  store float %x, ptr %r\n"
            f"  %below = fcmp olt float %x, %lo\n"
            f"  br i1 %below, label %low, label %check\n"
            f"low:\n"
            f"  store float %lo, ptr %r\n"
            f"  br label %done\n"
            f"check:\n"
            f"  %above = fcmp ogt float %x, %hi\n"
            f"  br i1 %above, label %high, label %done\n"
            f"high:\n"
            f"  store float %hi, ptr %r\n"
            f"  br label %done\n"
            f"done:\n"
            f"  %v = load float, ptr %r\n"
            f"  ret float %v\n}}\n")


def _helper_imix(g: int, rng: random.Random) -> str:
    k1, k2, s = rng.randrange(3, 1 << 16) | 1, rng.randrange(3, 1 << 12), rng.randrange(1, 7)
    return (f"define internal i32 @h{g}_imix(i32 %a, i32 %b) {{\n"
            f"  %m = mul i32 %a, {k1}\n"
            f"  %x = xor i32 %m, %b\n"
            f"  %s = lshr i32 %a, {s}\n"
            f"  %y = add i32 %x, %s\n"
            f"  %z = add i32 %y, {k2}\n"
            f"  ret i32 %z\n}}\n")


def _helper_classify(g: int, rng: random.Random) -> str:
    vals = [rng.randrange(0, 64) for _ in range(5)]
    return (f"define internal i32 @h{g}_classify(i32 %v) {{\n"
            f"entry:\n"
            f"  %r = alloca i32\n"
            f"  %k = and i32 %v, 7\n"
            f"  switch i32 %k, label %other [\n"
            f"    i32 0, label %c0\n    i32 1, label %c1\n    i32 2, label %c2\n    i32 5, label %c3\n  ]\n"
            + "".join(f"c{i}:\n  store i32 {vals[i]}, ptr %r\n  br label %done\n" for i in range(4))
            + f"other:\n  store i32 {vals[4]}, ptr %r\n  br label %done\n"
            f"done:\n  %o = load i32, ptr %r\n  ret i32 %o\n}}\n")


# -- kernels: loops over arrays ------------------------------------------------------------------

def _kernel_map(g: int, rng: random.Random) -> str:
    lo, hi = -_const(rng), _const(rng) * 4
    f = _Fn()
    f.label("entry")
    f.emit("%i.addr = alloca i64")
    f.emit("%r.addr = alloca float")
    f.emit("store i64 0, ptr %i.addr")
    f.emit("br label %cond")
    f.label("cond")
    f.emit("%i = load i64, ptr %i.addr")
    f.emit("%c = icmp slt i64 %i, %n")
    f.emit("br i1 %c, label %body, label %exit")
    f.label("body")
    f.emit("%pa = getelementptr inbounds float, ptr %a, i64 %i")
    f.emit("%x = load float, ptr %pa")
    f.emit("%pb = getelementptr inbounds float, ptr %b, i64 %i")
    f.emit("%y = load float, ptr %pb")
    f.emit("%gt = fcmp ogt float %x, %y")
    f.emit("br i1 %gt, label %then, label %else")
    f.label("then")
    f.emit(f"%p = call float @h{g}_poly(float %x)")
    f.emit("%t = fmul float %p, %y")
    f.emit("store float %t, ptr %r.addr")
    f.emit("br label %join")
    f.label("else")
    f.emit(f"%cl = call float @h{g}_clamp(float %y, float {_f(lo)}, float {_f(hi)})")
    f.emit("%e = fadd float %cl, %x")
    f.emit("store float %e, ptr %r.addr")
    f.emit("br label %join")
    f.label("join")
    f.emit("%r = load float, ptr %r.addr")
    f.emit("%po = getelementptr inbounds float, ptr %out, i64 %i")
    f.emit("store float %r, ptr %po")
    f.emit("%i1 = add nsw i64 %i, 1")
    f.emit("store i64 %i1, ptr %i.addr")
    f.emit("br label %cond")
    f.label("exit")
    f.emit("ret void")
    return f"define internal void @k{g}_map(ptr noalias %out, ptr noalias %a, ptr noalias %b, i64 %n) {{\n{f.body()}\n}}\n"


def _kernel_dot(g: int, rng: random.Random) -> str:
    scale = _const(rng)
    return (f"define internal float @k{g}_dot(ptr %a, ptr %b, i64 %n) noinline {{\n"
            f"entry:\n"
            f"  %i.addr = alloca i64\n"
            f"  %s.addr = alloca float\n"
            f"  store i64 0, ptr %i.addr\n"
            f"  store float 0.0, ptr %s.addr\n"
            f"  br label %cond\n"
            f"cond:\n"
            f"  %i = load i64, ptr %i.addr\n"
            f"  %c = icmp slt i64 %i, %n\n"
            f"  br i1 %c, label %body, label %exit\n"
            f"body:\n"
            f"  %pa = getelementptr inbounds float, ptr %a, i64 %i\n"
            f"  %x = load float, ptr %pa\n"
            f"  %pb = getelementptr inbounds float, ptr %b, i64 %i\n"
            f"  %y = load float, ptr %pb\n"
            f"  %m = fmul reassoc contract float %x, %y\n"
            f"  %s = load float, ptr %s.addr\n"
            f"  %s1 = fadd reassoc contract float %s, %m\n"
            f"  store float %s1, ptr %s.addr\n"
            f"  %i1 = add nsw i64 %i, 1\n"
            f"  store i64 %i1, ptr %i.addr\n"
            f"  br label %cond\n"
            f"exit:\n"
            f"  %r = load float, ptr %s.addr\n"
            f"  %r1 = fmul float %r, {_f(scale)}\n"
            f"  ret float %r1\n}}\n")


def _kernel_hist(g: int, rng: random.Random) -> str:
    mask = rng.choice([15, 31, 63])
    return (f"define internal i32 @k{g}_hist(ptr %idx, ptr %cnt, i64 %n) noinline {{\n"
            f"entry:\n"
            f"  %i.addr = alloca i64\n"
            f"  %acc = alloca i32\n"
            f"  store i64 0, ptr %i.addr\n"
            f"  store i32 0, ptr %acc\n"
            f"  br label %cond\n"
            f"cond:\n"
            f"  %i = load i64, ptr %i.addr\n"
            f"  %c = icmp slt i64 %i, %n\n"
            f"  br i1 %c, label %body, label %exit\n"
            f"body:\n"
            f"  %pi = getelementptr inbounds i32, ptr %idx, i64 %i\n"
            f"  %v = load i32, ptr %pi\n"
            f"  %it = trunc i64 %i to i32\n"
            f"  %h = call i32 @h{g}_imix(i32 %v, i32 %it)\n"
            f"  %cls = call i32 @h{g}_classify(i32 %h)\n"
            f"  %b = and i32 %h, {mask}\n"
            f"  %bx = zext i32 %b to i64\n"
            f"  %pc = getelementptr inbounds i32, ptr %cnt, i64 %bx\n"
            f"  %old = load i32, ptr %pc\n"
            f"  %new = add i32 %old, %cls\n"
            f"  store i32 %new, ptr %pc\n"
            f"  %a0 = load i32, ptr %acc\n"
            f"  %a1 = add i32 %a0, %v\n"
            f"  store i32 %a1, ptr %acc\n"
            f"  %i1 = add nsw i64 %i, 1\n"
            f"  store i64 %i1, ptr %i.addr\n"
            f"  br label %cond\n"
            f"exit:\n"
            f"  %r = load i32, ptr %acc\n"
            f"  ret i32 %r\n}}\n")


def _kernel_mv(g: int, rng: random.Random) -> str:
    bias = _const(rng)
    return (f"define internal void @k{g}_mv(ptr noalias %y, ptr noalias %A, ptr noalias %x, i64 %rows, i64 %cols) noinline {{\n"
            f"entry:\n"
            f"  %r.addr = alloca i64\n"
            f"  %c.addr = alloca i64\n"
            f"  %s.addr = alloca float\n"
            f"  store i64 0, ptr %r.addr\n"
            f"  br label %rcond\n"
            f"rcond:\n"
            f"  %r = load i64, ptr %r.addr\n"
            f"  %rc = icmp slt i64 %r, %rows\n"
            f"  br i1 %rc, label %rbody, label %exit\n"
            f"rbody:\n"
            f"  store float {_f(bias)}, ptr %s.addr\n"
            f"  store i64 0, ptr %c.addr\n"
            f"  br label %ccond\n"
            f"ccond:\n"
            f"  %c = load i64, ptr %c.addr\n"
            f"  %cc = icmp slt i64 %c, %cols\n"
            f"  br i1 %cc, label %cbody, label %cexit\n"
            f"cbody:\n"
            f"  %rowoff = mul nsw i64 %r, %cols\n"
            f"  %k = add nsw i64 %rowoff, %c\n"
            f"  %pA = getelementptr inbounds float, ptr %A, i64 %k\n"
            f"  %av = load float, ptr %pA\n"
            f"  %px = getelementptr inbounds float, ptr %x, i64 %c\n"
            f"  %xv = load float, ptr %px\n"
            f"  %m = fmul fast float %av, %xv\n"
            f"  %s = load float, ptr %s.addr\n"
            f"  %s1 = fadd fast float %s, %m\n"
            f"  store float %s1, ptr %s.addr\n"
            f"  %c1 = add nsw i64 %c, 1\n"
            f"  store i64 %c1, ptr %c.addr\n"
            f"  br label %ccond\n"
            f"cexit:\n"
            f"  %sv = load float, ptr %s.addr\n"
            f"  %sq = call float @llvm.sqrt.f32(float %sv)\n"
            f"  %py = getelementptr inbounds float, ptr %y, i64 %r\n"
            f"  store float %sq, ptr %py\n"
            f"  %r1 = add nsw i64 %r, 1\n"
            f"  store i64 %r1, ptr %r.addr\n"
            f"  br label %rcond\n"
            f"exit:\n"
            f"  ret void\n}}\n")


def _kernel_axpy4(g: int, rng: random.Random) -> str:
    # Straight-line code over four adjacent elements: work for the SLP vectorizer.
    a = _const(rng)
    lines = []
    for j in range(4):
        lines += [f"  %px{j} = getelementptr inbounds double, ptr %x, i64 {j}",
                  f"  %x{j} = load double, ptr %px{j}",
                  f"  %py{j} = getelementptr inbounds double, ptr %y, i64 {j}",
                  f"  %y{j} = load double, ptr %py{j}",
                  f"  %m{j} = fmul double %x{j}, {_f(a)}",
                  f"  %s{j} = fadd double %m{j}, %y{j}",
                  f"  store double %s{j}, ptr %py{j}"]
    return (f"define internal void @k{g}_axpy4(ptr noalias %y, ptr noalias %x) {{\n"
            + "\n".join(lines) + "\n  ret void\n}\n")


KERNELS = ("map", "dot", "hist", "mv", "axpy4")


def _group(g: int, groups: int, rng: random.Random, lite: bool = False) -> tuple[str, str]:
    """One group: helpers, kernels and a driver calling its kernels and its neighbour's map.

    A `lite` group (for the small module) leaves out the integer helpers and the hist and mv kernels.
    """
    parts = [_helper_poly(g, rng), _helper_clamp(g, rng)]
    if not lite:
        parts += [_helper_imix(g, rng), _helper_classify(g, rng)]
    parts += [_kernel_map(g, rng), _kernel_dot(g, rng)]
    if not lite:
        parts += [_kernel_hist(g, rng), _kernel_mv(g, rng)]
    parts.append(_kernel_axpy4(g, rng))
    nb = (g + 1) % groups
    f = _Fn()
    f.emit(f"call void @k{g}_map(ptr %c, ptr %a, ptr %b, i64 %n)")
    if groups > 1:  # every map kernel is called from two drivers, so it stays a function
        f.emit(f"call void @k{nb}_map(ptr %b, ptr %c, ptr %a, i64 %n)")
    f.emit(f"%d = call float @k{g}_dot(ptr %a, ptr %c, i64 %n)")
    if lite:
        f.emit("%h = fptosi float %d to i32")
    else:
        f.emit(f"%h = call i32 @k{g}_hist(ptr %ia, ptr %ib, i64 %n)")
        f.emit(f"call void @k{g}_mv(ptr %c, ptr %a, ptr %b, i64 %n, i64 %n)")
    f.emit(f"call void @k{g}_axpy4(ptr %d2, ptr %d1)")
    f.emit("%hf = sitofp i32 %h to float")
    f.emit("%r = fadd float %d, %hf")
    f.emit("ret float %r")
    parts.append(f"define internal float @d{g}(ptr %a, ptr %b, ptr %c, ptr %ia, ptr %ib, ptr %d1, ptr %d2, "
                 f"i64 %n) noinline {{\n{f.body()}\n}}\n")
    return "\n".join(parts), f"d{g}"


def generate(instructions: int, seed: int = 0) -> str:
    """A module of about `instructions` unoptimized instructions, entry `@entry` (see ENTRY)."""
    per_group = count_instructions(_group(0, 2, random.Random(seed))[0])
    groups = max(1, round(instructions / per_group))
    lite = instructions < 0.75 * per_group
    rng = random.Random(seed)
    bodies, drivers = [], []
    for g in range(groups):
        body, driver = _group(g, groups, rng, lite)
        bodies.append(body)
        drivers.append(driver)
    f = _Fn()
    acc = "0.0"
    for d in drivers:
        v = f.v()
        f.emit(f"{v} = call float @{d}(ptr %a, ptr %b, ptr %c, ptr %ia, ptr %ib, ptr %d1, ptr %d2, i64 %n)")
        s = f.v()
        f.emit(f"{s} = fadd float {acc}, {v}")
        acc = s
    f.emit(f"ret float {acc}")
    entry = (f"define float @{ENTRY}(ptr %a, ptr %b, ptr %c, ptr %ia, ptr %ib, ptr %d1, ptr %d2, i64 %n) {{\n"
             f"{f.body()}\n}}\n")
    header = f"; gpuc benchmark module: {groups} group(s), seed {seed}\n\n"
    return header + "\n".join(bodies) + "\n" + entry + "\ndeclare float @llvm.sqrt.f32(float)\n"


def generate_preset(name: str, seed: int = 0) -> str:
    """`generate` for one of SIZES ("small", "medium", "large")."""
    return generate(SIZES[name], seed)


def main() -> int:
    ap = argparse.ArgumentParser(description="Print a generated benchmark module (LLVM IR text).")
    ap.add_argument("size", help=f"one of {', '.join(SIZES)}, or a number of instructions")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    n = SIZES[args.size] if args.size in SIZES else int(args.size)
    text = generate(n, args.seed)
    sys.stdout.write(text)
    print(f"; {count_instructions(text)} instructions", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
