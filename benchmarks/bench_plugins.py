"""Overhead of registered plugins whose markers a module does not have.

The medium generated module (benchmarks/irgen.py) is compiled with `CompilerConfig(plugins=())`
and with 100 plugins made by `gpuc.make_plugin(f"absent.marker{i}", ...)`, each with all four
callbacks (early, simplified, pipeline = optimized, last). No marker is present, so no callback
may fire (the script checks this); what remains is the cost of looking for the markers at the
four callback points. Runs of the two configs are interleaved (ABBA order) and the median total
compile time of each is reported, with the relative overhead (target: <= 2%).

Because the machine's noise is larger than the effect, the overhead is also measured directly:
the four callback points are run (gpuc.compiler.pipeline.run_point) on the optimized module,
many times, with and without the 100 plugins.

    python benchmarks/bench_plugins.py                # ~40 seconds
    python benchmarks/bench_plugins.py --quick        # ~15 seconds
    python benchmarks/bench_plugins.py --plugins 1000 --target ptx --json out.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import _common  # noqa: F401 - puts the repository on sys.path
from _common import banner, machine_facts, median, ms, spread, table, timed, timed_cpu, write_json
from irgen import ENTRY, SIZES, generate_preset

import gpuc
from gpuc import llvm
from gpuc.compiler.pipeline import run_point
from gpuc.compiler.plugins import POINTS
from gpuc.compiler.state import CompileState
from gpuc.compiler.trace import Trace

fired: list[str] = []


def _never(job, marker_function, module) -> bool:
    fired.append(marker_function.name)  # must not happen: the markers are absent
    return False


def make_plugins(n: int) -> list:
    return [gpuc.make_plugin(f"absent.marker{i}", pipeline_callback=_never, early_callback=_never,
                             simplified_callback=_never, last_callback=_never) for i in range(n)]


def make_target(name: str):
    # LLVM's default<O2> unchanged (NativeTarget leaves out the SLP vectorizer by default), so that
    # gpuc and the uninterrupted default<O2> run do the same work.
    if name == "native":
        return gpuc.NativeTarget(slp_vectorize=True)
    return gpuc.PTXTarget()


def compile_once(text: str, config, output: str) -> dict:
    job = gpuc.CompilerJob(gpuc.IRSource(text, entry=ENTRY), config)
    wall, cpu, result = timed_cpu(gpuc.compile, job, output=output)
    stages = {s.name: s.seconds for s in result.trace.stages}
    points = stages["optimize"] - sum(s.seconds for s in result.trace.segments)
    if result.trace.callbacks:
        raise AssertionError(f"callbacks fired: {result.trace.callbacks[:3]}")
    return {"total": wall, "total_cpu": cpu, "optimize": stages["optimize"], "points": points}


def direct_point_cost(text: str, target, configs: dict, reps: int) -> dict:
    """Seconds for the four callback points on the optimized module, per config (median of `reps`)."""
    tm = target.target_machine(2)
    context = llvm.Context()
    module = llvm.Module.parse(text, context)
    module.triple, module.data_layout = target.triple(), tm.data_layout
    llvm.run_passes(module, "default<O2>", tm)
    out = {}
    try:
        for label, config in configs.items():
            job = gpuc.CompilerJob(gpuc.IRSource(text, entry=ENTRY), config)

            def points():
                state = CompileState(job, module, tm, Trace(), {})
                for point in POINTS:
                    run_point(state, point)

            points()
            samples = []
            for _ in range(reps):
                start = time.perf_counter()
                points()
                samples.append(time.perf_counter() - start)
            out[label] = median(samples)
    finally:
        module.close()
        context.close()
        tm.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="native", choices=("native", "ptx"))
    ap.add_argument("--size", default="medium", choices=list(SIZES))
    ap.add_argument("--plugins", type=int, default=100, help="number of absent-marker plugins (default 100)")
    ap.add_argument("--reps", type=int, default=None, help="compiles per config (default 61; --quick 11)")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions (~15 s)")
    ap.add_argument("--json", metavar="OUT", help="write all samples and medians as JSON")
    args = ap.parse_args()
    reps = args.reps or (11 if args.quick else 61)

    facts = machine_facts()
    print(banner(facts))
    start_all = time.perf_counter()
    target = make_target(args.target)
    output = "asm" if target.name == "ptx" else "obj"
    text = generate_preset(args.size)
    plugins = make_plugins(args.plugins)
    # without gpuc's built-in plugins, so that "none" has none and "with" exactly the absent-marker ones
    config_s, with_plugins = timed(gpuc.CompilerConfig, target, plugins=plugins, builtin_plugins=False)
    configs = {"none": gpuc.CompilerConfig(target, plugins=(), builtin_plugins=False), "with": with_plugins}
    assert len(configs["with"].plugins) == args.plugins

    for config in configs.values():  # warm-up
        compile_once(text, config, output)
    samples = {"none": [], "with": []}
    for rep in range(reps):  # ABBA: neither config systematically runs first
        order = ("none", "with") if rep % 2 == 0 else ("with", "none")
        for label in order:
            samples[label].append(compile_once(text, configs[label], output))
    if fired:
        raise AssertionError(f"callbacks fired for markers that are absent: {fired[:5]}")

    med = {label: {k: median([s[k] for s in runs]) for k in ("total", "total_cpu", "optimize", "points")}
           for label, runs in samples.items()}
    for label, runs in samples.items():
        med[label]["noise"] = spread([s["total"] for s in runs])
    overhead = med["with"]["total"] / med["none"]["total"] - 1
    overhead_cpu = med["with"]["total_cpu"] / med["none"]["total_cpu"] - 1
    # Paired: each `with` run against the `none` run next to it.
    paired = statistics.median(w["total"] / n["total"] - 1 for w, n in zip(samples["with"], samples["none"]))
    direct = direct_point_cost(text, target, configs, reps=200 if not args.quick else 50)
    direct_overhead = (direct["with"] - direct["none"]) / med["none"]["total"]

    rows = [[label, len(configs[label].plugins), ms(m["total"]), ms(m["total_cpu"]), ms(m["optimize"]),
             f"{m['points'] * 1e3:9.3f}", f"{100 * m['noise']:.1f}"] for label, m in med.items()]
    print(table(["plugins", "n", "total", "total cpu", "optimize", "at points", "noise %"], rows,
                f"\n== {args.size} module on {args.target}, output {output!r}: {reps} compiles per config, "
                "interleaved (median ms) =="))
    print("  at points = optimize stage minus its LLVMRunPasses segments: the time spent at the 4 callback points")
    # The direct measurement decides: end-to-end medians of two identical workloads differ by noise
    # (see the noise column) that is usually larger than the effect being measured.
    verdict = "ok" if direct_overhead <= 0.02 else "OVER 2%"
    print(table(["measure", "overhead", ""], [
        ["median total (wall)", f"{100 * overhead:+.2f} %", "end to end; noise as above"],
        ["median total (thread CPU)", f"{100 * overhead_cpu:+.2f} %", "end to end"],
        ["median of paired ratios", f"{100 * paired:+.2f} %", "with/none of adjacent runs"],
        ["callback points, direct", f"{100 * direct_overhead:+.3f} %",
         f"{(direct['with'] - direct['none']) * 1e6:.1f} us per compile ({direct['none'] * 1e6:.1f} -> "
         f"{direct['with'] * 1e6:.1f} us for the 4 points)"],
    ], f"\n-- overhead of {args.plugins} absent-marker plugins (target <= 2%, judged on the direct row): {verdict} --",
        left=(0, 2)))
    print(f"  CompilerConfig(plugins=<{args.plugins} plugins>) itself: {config_s * 1e3:.3f} ms (once per config)")
    print(f"\nran in {time.perf_counter() - start_all:.1f} s")
    if args.json:
        write_json(args.json, {"machine": facts, "target": args.target, "size": args.size, "plugins": args.plugins,
                               "reps": reps, "samples": samples, "median": med, "overhead_wall": overhead,
                               "overhead_cpu": overhead_cpu, "overhead_paired": paired,
                               "direct_points_s": direct, "overhead_direct": direct_overhead,
                               "config_s": config_s})
    return 0


if __name__ == "__main__":
    sys.exit(main())
