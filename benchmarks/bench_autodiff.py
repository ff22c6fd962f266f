"""What forward-mode differentiation costs: run time of derivative kernels, compile time per order.

1. Run time: for three functions (a polynomial, a transcendental mix, a Horner loop with a run-time
   trip count) a kernel computing `gpuc.derivative(f, a[i])` against the kernel computing `f(a[i])`,
   over 10M float64 on the CPU with one thread (target: derivative <= 1.5x primal).
2. Compile time of the orders 1-4 of one function (each order a func differentiating the previous),
   whole `gpuc.compile` to a native object, with the size of the order's optimized IR.
3. Compile time of a kernel with one `derivative` call against the primal kernel (target <= 2x).
Runs interleave (ABBA); medians of wall and process CPU time are reported.

    python benchmarks/bench_autodiff.py            # ~60 s
    python benchmarks/bench_autodiff.py --quick    # ~15 s
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

import _common  # noqa: F401 - puts the repository on sys.path
from _common import banner, machine_facts, median, ms, spread, table, timed, write_json

import gpuc
from gpuc import Array, float64, int64

F64 = Array[float64, 1]


@gpuc.func
def poly(x):
    return ((((0.5 * x - 1.25) * x + 2.0) * x - 0.75) * x + 3.0) * x - 1.0


@gpuc.func
def mix(x):
    return math.exp(-x * x) * math.sin(3.0 * x) + math.log(1.0 + x * x) + math.sqrt(1.0 + x * x)


@gpuc.func
def loop(x, n):
    acc = 0.0
    for i in range(n):
        acc = acc * x + (i + 1.0)
    return acc


@gpuc.kernel
def poly_primal(a, b):
    i = gpuc.index()
    b[i] = poly(a[i])


@gpuc.kernel
def poly_derivative(a, b):
    i = gpuc.index()
    b[i] = gpuc.derivative(poly, a[i])


@gpuc.kernel
def mix_primal(a, b):
    i = gpuc.index()
    b[i] = mix(a[i])


@gpuc.kernel
def mix_derivative(a, b):
    i = gpuc.index()
    b[i] = gpuc.derivative(mix, a[i])


@gpuc.kernel
def loop_primal(a, b, n):
    i = gpuc.index()
    b[i] = loop(a[i], n)


@gpuc.kernel
def loop_derivative(a, b, n):
    i = gpuc.index()
    b[i] = gpuc.derivative(loop, a[i], n)


CASES = {"polynomial": (poly_primal, poly_derivative, ()), "transcendental mix": (mix_primal, mix_derivative, ()),
         "loop (16 trips)": (loop_primal, loop_derivative, (16,))}


@gpuc.func
def order1(x):
    return gpuc.derivative(mix, x)


@gpuc.func
def order2(x):
    return gpuc.derivative(order1, x)


@gpuc.func
def order3(x):
    return gpuc.derivative(order2, x)


@gpuc.func
def order4(x):
    return gpuc.derivative(order3, x)


ORDERS = {0: mix, 1: order1, 2: order2, 3: order3, 4: order4}


def run_times(reps: int, n: int) -> dict:
    a = np.random.default_rng(0).uniform(-1.0, 1.0, size=n)
    data = {}
    for name, (primal, derivative, extra) in CASES.items():
        out = {"primal": np.zeros_like(a), "derivative": np.zeros_like(a)}
        kernels = {"primal": primal, "derivative": derivative}
        for which, kernel in kernels.items():  # compile and warm up
            kernel.launch(n, a, out[which], *extra, device="cpu", threads=1)
        samples = {"primal": [], "derivative": []}
        for r in range(reps):
            for which in (("primal", "derivative") if r % 2 == 0 else ("derivative", "primal")):
                seconds, _ = timed(kernels[which].launch, n, a, out[which], *extra, device="cpu", threads=1)
                samples[which].append(seconds)
        data[name] = samples
    return data


def compile_seconds(source, argtypes, kernel: bool) -> tuple[float, float, object]:
    job = gpuc.CompilerJob((source, argtypes), gpuc.CompilerConfig(gpuc.NativeTarget(), kernel=kernel))
    cpu = time.process_time()
    wall, result = timed(gpuc.compile, job, "obj")
    return wall, time.process_time() - cpu, result


def order_times(reps: int) -> dict:
    samples = {order: {"wall": [], "cpu": []} for order in ORDERS}
    for fn in ORDERS.values():
        compile_seconds(fn, (float64,), False)
    for r in range(reps):
        for order in (ORDERS if r % 2 == 0 else reversed(ORDERS)):
            wall, cpu, _ = compile_seconds(ORDERS[order], (float64,), False)
            samples[order]["wall"].append(wall)
            samples[order]["cpu"].append(cpu)
    return samples


def ir_size(fn) -> int:
    text = gpuc.code_llvm(fn, (float64,))
    return sum(1 for line in text.splitlines() if line.startswith("  ") and not line.startswith("  ;"))


def kernel_times(reps: int) -> dict:
    data = {}
    for name, (primal, derivative, extra) in CASES.items():
        types = (F64, F64, *(int64 for _ in extra))
        samples = {"primal": [], "derivative": []}
        for kernel in (primal, derivative):
            compile_seconds(kernel, types, True)
        for r in range(reps):
            for which in (("primal", "derivative") if r % 2 == 0 else ("derivative", "primal")):
                kernel = primal if which == "primal" else derivative
                _, cpu, _ = compile_seconds(kernel, types, True)
                samples[which].append(cpu)
        data[name] = samples
    return data


def check() -> None:
    x = np.linspace(-1.0, 1.0, 11)
    out = np.zeros_like(x)
    mix_derivative[x.size](x, out)
    want = (np.exp(-x * x) * (-2 * x * np.sin(3 * x) + 3 * np.cos(3 * x)) + 2 * x / (1 + x * x)
            + x / np.sqrt(1 + x * x))
    if not np.allclose(out, want, rtol=1e-12, atol=1e-14):
        sys.exit("the derivative kernel computes wrong values")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions, 1M elements")
    parser.add_argument("--reps", type=int, help="repetitions (default 10, 4 with --quick)")
    parser.add_argument("--json", metavar="OUT", help="write samples and medians as JSON")
    args = parser.parse_args()
    reps = args.reps or (4 if args.quick else 10)
    n = 1_000_000 if args.quick else 10_000_000
    facts = machine_facts()
    print(banner(facts))
    check()
    data = {"facts": facts, "n": n}

    runs = run_times(reps, n)
    rows = []
    for name, samples in runs.items():
        p, d = median(samples["primal"]), median(samples["derivative"])
        rows.append([name, ms(p), ms(d), f"{d / p:.2f}x",
                     f"{spread(samples['primal']):.1%} / {spread(samples['derivative']):.1%}"])
    print(table(["function", "primal ms", "derivative ms", "ratio", "noise"], rows,
                title=f"\nrun time on the CPU, one thread, {n} float64 (median of {reps}; target <= 1.5x)"))
    data["run"] = runs

    orders = order_times(reps * 2)
    rows = [[str(order), ms(median(s["wall"])), ms(median(s["cpu"])), str(ir_size(ORDERS[order]))]
            for order, s in orders.items()]
    print(table(["order", "wall ms", "cpu ms", "optimized IR instructions"], rows,
                title=f"\ncompile time of the orders of the transcendental mix (median of {reps * 2}, "
                      "whole gpuc.compile to a native object; order 0 is the function itself)"))
    data["orders"] = {str(k): v for k, v in orders.items()}

    kernels = kernel_times(reps * 2)
    rows = []
    for name, samples in kernels.items():
        p, d = median(samples["primal"]), median(samples["derivative"])
        rows.append([name, ms(p), ms(d), f"{d / p:.2f}x"])
    print(table(["kernel", "primal cpu ms", "derivative cpu ms", "ratio"], rows,
                title=f"\ncompile time of a kernel with one derivative call vs the primal kernel "
                      f"(median of {reps * 2}, process CPU time; target <= 2x)"))
    data["kernel_compile"] = kernels
    if args.json:
        write_json(args.json, data)


if __name__ == "__main__":
    main()
