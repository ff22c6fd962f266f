"""What deferred compilation costs: compile time of a chain of deferred functions, and the code it makes.

1. Compile time: a kernel reaching f1 -> f2 -> ... -> f8 through `gpuc.deferred` pointers (each fi asks
   for a pointer to f(i+1) and calls it), against the same eight functions calling one another
   directly. Both compile to native objects (and PTX); runs interleave (ABBA) and the median wall
   time of a whole `gpuc.compile` is reported with the ratio (target: <= 1.3x).
2. Code: a kernel calling `gpuc.deferred(f, x)(x)` against one calling `f(x)`: the native assembly,
   kernel names made equal, must be identical after optimization (the diff is printed), and so
   must the run time on the CPU.

    python benchmarks/bench_deferred.py                 # ~20 s
    python benchmarks/bench_deferred.py --quick         # ~5 s
    python benchmarks/bench_deferred.py --targets ptx   # compile time on PTX only

Compiles are timed with the disk cache off (GPUC_CACHE=0), as a cache hit skips every stage.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
import time

import numpy as np

import _common  # noqa: F401 - puts the repository on sys.path
from _common import banner, machine_facts, median, ms, spread, table, timed, write_json

import gpuc
from gpuc import Array, float64

F64 = Array[float64, 1]


# -- the depth-8 chain, deferred and direct --------------------------------------------------------

@gpuc.func
def d8(x):
    return x * 1.125 + 8.0


@gpuc.func
def d7(x):
    return x * 1.5 + gpuc.deferred(d8, x)(x - 7.0)


@gpuc.func
def d6(x):
    return x * 1.5 + gpuc.deferred(d7, x)(x - 6.0)


@gpuc.func
def d5(x):
    return x * 1.5 + gpuc.deferred(d6, x)(x - 5.0)


@gpuc.func
def d4(x):
    return x * 1.5 + gpuc.deferred(d5, x)(x - 4.0)


@gpuc.func
def d3(x):
    return x * 1.5 + gpuc.deferred(d4, x)(x - 3.0)


@gpuc.func
def d2(x):
    return x * 1.5 + gpuc.deferred(d3, x)(x - 2.0)


@gpuc.func
def d1(x):
    return x * 1.5 + gpuc.deferred(d2, x)(x - 1.0)


@gpuc.kernel
def deferred_chain(a, b):
    i = gpuc.index()
    b[i] = gpuc.deferred(d1, a[i])(a[i])


@gpuc.func
def c8(x):
    return x * 1.125 + 8.0


@gpuc.func
def c7(x):
    return x * 1.5 + c8(x - 7.0)


@gpuc.func
def c6(x):
    return x * 1.5 + c7(x - 6.0)


@gpuc.func
def c5(x):
    return x * 1.5 + c6(x - 5.0)


@gpuc.func
def c4(x):
    return x * 1.5 + c5(x - 4.0)


@gpuc.func
def c3(x):
    return x * 1.5 + c4(x - 3.0)


@gpuc.func
def c2(x):
    return x * 1.5 + c3(x - 2.0)


@gpuc.func
def c1(x):
    return x * 1.5 + c2(x - 1.0)


@gpuc.kernel
def direct_chain(a, b):
    i = gpuc.index()
    b[i] = c1(a[i])


# -- one deferred-then-called function against the direct call -------------------------------------

@gpuc.func
def f(x):
    return x * x + 1.0


@gpuc.kernel
def deferred_call(a, b):
    i = gpuc.index()
    b[i] = gpuc.deferred(f, a[i])(a[i])


@gpuc.kernel
def direct_call(a, b):
    i = gpuc.index()
    b[i] = f(a[i])


def compile_seconds(kernel, target, output: str) -> tuple[float, float]:
    """(wall, CPU) seconds of one compile. CPU time is the whole process's (the frontend runs on a
    thread of its own), and less sensitive than wall time to other processes on the machine."""
    job = gpuc.CompilerJob((kernel, (F64, F64)), gpuc.CompilerConfig(target, kernel=True))
    cpu = time.process_time()
    wall, _ = timed(gpuc.compile, job, output)
    return wall, time.process_time() - cpu


def compile_times(target, output: str, reps: int) -> dict:
    samples = {"deferred": [], "direct": [], "deferred cpu": [], "direct cpu": []}
    for kernel in (deferred_chain, direct_chain):  # warm up: typing caches, target machines
        compile_seconds(kernel, target, output)
    for r in range(reps):
        order = ("deferred", "direct") if r % 2 == 0 else ("direct", "deferred")
        for name in order:
            wall, cpu = compile_seconds(deferred_chain if name == "deferred" else direct_chain, target, output)
            samples[name].append(wall)
            samples[f"{name} cpu"].append(cpu)
    return samples


def check_chain() -> None:
    a = np.linspace(-1.0, 1.0, 101)
    b1, b2 = np.zeros_like(a), np.zeros_like(a)
    deferred_chain[a.size](a, b1)
    direct_chain[a.size](a, b2)
    if not np.array_equal(b1, b2):
        sys.exit("the deferred and the direct chain compute different values")


def assembly(kernel) -> str:
    text = gpuc.code_native(kernel, (F64, F64))
    return re.sub(r"\b(deferred|direct)_call\b", "kernel", text)


def run_times(reps: int, n: int) -> dict:
    a = np.random.default_rng(0).normal(size=n)
    out = {"deferred": np.zeros_like(a), "direct": np.zeros_like(a)}
    kernels = {"deferred": deferred_call, "direct": direct_call}
    for name, kernel in kernels.items():  # compile and warm up
        kernel.launch(n, a, out[name], device="cpu", threads=1)
    samples = {"deferred": [], "direct": []}
    for r in range(reps):
        for name in (("deferred", "direct") if r % 2 == 0 else ("direct", "deferred")):
            seconds, _ = timed(kernels[name].launch, n, a, out[name], device="cpu", threads=1)
            samples[name].append(seconds)
    if not np.array_equal(out["deferred"], out["direct"]):
        sys.exit("the deferred and the direct call compute different values")
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--reps", type=int, help="compile repetitions per kernel (default 40, 10 with --quick)")
    parser.add_argument("--targets", default="native,ptx",
                        help="comma-separated targets of the compile-time part: native, ptx (default both)")
    parser.add_argument("--json", metavar="OUT", help="write samples and medians as JSON")
    args = parser.parse_args()
    targets = {"native": (gpuc.NativeTarget, "obj"), "ptx": (gpuc.PTXTarget, "asm")}
    chosen = [t.strip() for t in args.targets.split(",") if t.strip()]
    if not chosen or any(t not in targets for t in chosen):
        parser.error(f"--targets takes a comma-separated list of {', '.join(targets)}, not {args.targets!r}")
    os.environ["GPUC_CACHE"] = "0"  # a cache hit would time a file read, not a compile
    reps = args.reps or (10 if args.quick else 40)
    facts = machine_facts()
    print(banner(facts))
    check_chain()

    rows, data = [], {"facts": facts, "compile": {}, "run": {}}
    for name in chosen:
        make, output = targets[name]
        target = make()
        samples = compile_times(target, output, reps)
        d, c = median(samples["deferred"]), median(samples["direct"])
        dc, cc = median(samples["deferred cpu"]), median(samples["direct cpu"])
        rows.append([target.name, ms(d), ms(c), f"{d / c:.2f}x", ms(dc), ms(cc), f"{dc / cc:.2f}x",
                     f"{spread(samples['deferred']):.1%} / {spread(samples['direct']):.1%}"])
        data["compile"][target.name] = {"samples": samples, "deferred": d, "direct": c, "ratio": d / c,
                                        "deferred_cpu": dc, "direct_cpu": cc, "ratio_cpu": dc / cc}
    print(table(["target", "deferred ms", "direct ms", "ratio", "deferred cpu", "direct cpu", "cpu ratio",
                 "wall noise"], rows,
                title=f"\ncompile time of the depth-8 chain (median of {reps}, whole gpuc.compile; target <= 1.3x)"))

    deferred_asm, direct_asm = assembly(deferred_call), assembly(direct_call)
    diff = list(difflib.unified_diff(direct_asm.splitlines(), deferred_asm.splitlines(), "direct_call.s",
                                     "deferred_call.s", lineterm=""))
    print(f"\nnative assembly, deferred-then-called vs direct call ({len(direct_asm.splitlines())} lines): "
          + ("identical" if not diff else "DIFFERENT"))
    print("\n".join(diff) if diff else "(empty diff)")
    data["assembly_identical"] = not diff

    n = 1 << (20 if args.quick else 22)
    samples = run_times(max(reps // 2, 5), n)
    d, c = median(samples["deferred"]), median(samples["direct"])
    print(table(["kernel", "median ms", "noise"],
                [["deferred", ms(d), f"{spread(samples['deferred']):.1%}"],
                 ["direct", ms(c), f"{spread(samples['direct']):.1%}"]],
                title=f"\nrun time on the CPU, one thread, {n} float64 (ratio {d / c:.3f})"))
    data["run"] = {"n": n, "samples": samples, "deferred": d, "direct": c, "ratio": d / c}
    if args.json:
        write_json(args.json, data)


if __name__ == "__main__":
    main()
