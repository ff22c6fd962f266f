"""Cost of gpuc's split pipeline against one uninterrupted default<O2> run and against opt | llc.

For generated modules of three sizes (benchmarks/irgen.py) and each target, three ways of
doing the same optimize + codegen work are timed side by side in one process, interleaved
round-robin, and their medians compared:

  (a) gpuc     gpuc.compile(CompilerJob(IRSource(text, entry), CompilerConfig(target)), output)
               "opt+cg" = the `optimize` and `codegen` stages of result.trace; "total" = the
               wall time of the whole compile() call (target machine, context, parse, all stages).
  (b) inproc   parse into a fresh Context (not timed), set triple/data layout from a target
               machine, then time run_passes(module, "default<O2>", tm) + tm.emit(module, output).
  (c) opt|llc  `opt -O2 | llc -O2` as subprocesses (wall time), -mtriple/-mcpu/-mattr matching
               the target; the time `opt` needs just to start and parse the file is shown apart.
  (r) raw      like (b), but straight through the C API: LLVMRunPasses + LLVMTargetMachineEmitToMemoryBuffer,
               without what gpuc.llvm's wrappers add around them (verification, emitting from a clone).
               (b)/(r) is the cost of those wrappers, which (a) pays as well.
  (s) split    like (r), optimization only, but running gpuc's three segments (build_pipeline) as three
               raw LLVMRunPasses calls: (s)/(r) is the pure cost of splitting the pipeline (analyses
               recomputed at each segment boundary), free of gpuc's driver and wrappers.

Checks that (a) and (b) do the same work: the instruction and function counts of the optimized
module of each way are printed (for (c), of `opt -O2 -S`).

    python benchmarks/bench_pipeline.py                  # ~2-3 minutes on 2 cores
    python benchmarks/bench_pipeline.py --quick          # ~20 seconds
    python benchmarks/bench_pipeline.py --sizes large --targets native --reps 7 --json out.json
"""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common  # noqa: F401 - puts the repository on sys.path
from _common import banner, machine_facts, median, ms, spread, table, timed, timed_cpu, write_json
from irgen import ENTRY, SIZES, count_instructions, generate_preset

import gpuc
from gpuc import llvm
from gpuc.llvm import capi
from gpuc.llvm.capi import lib
from gpuc.compiler.pipeline import build_pipeline
from gpuc.llvm.target import FILE_TYPES

LLVM_BIN = Path(os.environ.get("LLVM_BIN", "/usr/lib/llvm-22/bin"))
DEFAULT_REPS = {"small": 15, "medium": 9, "large": 5}
QUICK_REPS = {"small": 7, "medium": 5, "large": 1}
QUICK_SIZES = ("small", "medium")


def make_target(name: str):
    # LLVM's default<O2> unchanged (NativeTarget leaves out the SLP vectorizer by default), so that
    # gpuc and the uninterrupted default<O2> run do the same work.
    if name == "native":
        return gpuc.NativeTarget(slp_vectorize=True)
    return gpuc.PTXTarget()


def output_kind(target) -> str:
    # NVPTX has no object-file emitter: PTX is its "object"; everything else emits an object file.
    return "asm" if target.name == "ptx" else "obj"


def module_counts(module) -> tuple[int, int]:
    insts = funcs = 0
    for fn in module.functions:
        if fn.is_declaration:
            continue
        funcs += 1
        insts += sum(1 for _ in fn.instructions())
    return insts, funcs


# -- the three ways ------------------------------------------------------------------------------

def run_gpuc(text: str, target, output: str) -> dict:
    job = gpuc.CompilerJob(gpuc.IRSource(text, entry=ENTRY), gpuc.CompilerConfig(target))
    wall, cpu, result = timed_cpu(gpuc.compile, job, output=output)
    stages = {s.name: s.seconds for s in result.trace.stages}
    segments = {}
    for seg in result.trace.segments:
        segments[seg.name] = segments.get(seg.name, 0.0) + seg.seconds
    return {"total": wall, "total_cpu": cpu, "opt_cg": stages.get("optimize", 0.0) + stages.get("codegen", 0.0),
            "stages": stages, "segments": segments, "trace_total": result.trace.total_seconds,
            "size": len(result.output)}


def run_inproc(text: str, target, tm, output: str) -> dict:
    parse_s, parse_cpu, (context, module) = timed_cpu(_parse, text, target, tm)
    try:
        opt_s, opt_cpu, _ = timed_cpu(llvm.run_passes, module, "default<O2>", tm)
        cpu, start = time.thread_time(), time.perf_counter()
        data = tm.emit(module, output)
        emit_s, emit_cpu = time.perf_counter() - start, time.thread_time() - cpu
    finally:
        start = time.perf_counter()
        module.close()
        context.close()
        dispose_s = time.perf_counter() - start
    return {"opt_cg": opt_s + emit_s, "optimize": opt_s, "codegen": emit_s, "parse": parse_s, "dispose": dispose_s,
            "total": parse_s + opt_s + emit_s, "total_cpu": parse_cpu + opt_cpu + emit_cpu, "size": len(data)}


def run_raw(text: str, target, tm, output: str) -> dict:
    """(b) without gpuc.llvm's wrappers: the two C calls and nothing else."""
    parse_s, parse_cpu, (context, module) = timed_cpu(_parse, text, target, tm)
    try:
        opt_s, opt_cpu, _ = timed_cpu(_raw_passes, module, tm)
        cpu, start = time.thread_time(), time.perf_counter()
        data = _raw_emit(module, tm, output)
        emit_s, emit_cpu = time.perf_counter() - start, time.thread_time() - cpu
    finally:
        module.close()
        context.close()
    return {"opt_cg": opt_s + emit_s, "optimize": opt_s, "codegen": emit_s, "parse": parse_s, "optimize_cpu": opt_cpu,
            "total": parse_s + opt_s + emit_s, "total_cpu": parse_cpu + opt_cpu + emit_cpu, "size": len(data)}


def run_split(text: str, target, tm, segments: list[str]) -> dict:
    context, module = _parse(text, target, tm)
    try:
        opt_s, opt_cpu, _ = timed_cpu(lambda: [_raw_passes(module, tm, seg) for seg in segments])
    finally:
        module.close()
        context.close()
    return {"opt_cg": opt_s, "optimize": opt_s, "total": opt_s, "total_cpu": opt_cpu}


def _raw_passes(module, tm, pipeline: str = "default<O2>") -> None:
    options = lib.LLVMCreatePassBuilderOptions()
    try:
        err = lib.LLVMRunPasses(module, pipeline.encode(), tm, options)
    finally:
        lib.LLVMDisposePassBuilderOptions(options)
    message = capi.consume_error(err)
    if message is not None:
        raise RuntimeError(message)


def _raw_emit(module, tm, output: str) -> bytes:
    out = capi.LLVMMemoryBufferRef()
    msg = capi.ErrorMessage()
    failed = lib.LLVMTargetMachineEmitToMemoryBuffer(tm, module, FILE_TYPES[output], msg.ref, ctypes.byref(out))
    text = msg.take()
    if failed:
        raise RuntimeError(f"emit failed: {text}")
    with llvm.MemoryBuffer(out) as buf:
        return buf.to_bytes()


def _parse(text: str, target, tm):
    context = llvm.Context()
    module = llvm.Module.parse(text, context, name="<bench>")
    module.triple = target.triple()
    module.data_layout = tm.data_layout
    return context, module


def tool_flags(target) -> list[str]:
    flags = [f"-mtriple={target.triple()}"]
    if target.cpu():
        flags.append(f"-mcpu={target.cpu()}")
    if target.features():
        flags.append(f"-mattr={target.features()}")
    return flags


def run_tools(path: Path, target, output: str, workdir: Path) -> dict:
    flags = tool_flags(target)
    out = workdir / f"out.{'o' if output == 'obj' else 's'}"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    opt = subprocess.Popen([str(LLVM_BIN / "opt"), "-O2", *flags, str(path), "-o", "-"], stdout=subprocess.PIPE)
    llc = subprocess.run([str(LLVM_BIN / "llc"), "-O2", *flags, f"-filetype={output}", "-", "-o", str(out)],
                         stdin=opt.stdout, capture_output=True)
    opt.stdout.close()
    opt_rc = opt.wait()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if opt_rc or llc.returncode:
        raise RuntimeError(f"opt | llc failed (rc {opt_rc}, {llc.returncode}): {llc.stderr.decode()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"opt_cg": wall, "total": wall, "total_cpu": cpu, "size": out.stat().st_size}


def tools_parse_overhead(path: Path, target) -> float:
    """Wall time of `opt` doing nothing but start, parse and verify the text."""
    cmd = [str(LLVM_BIN / "opt"), *tool_flags(target), "-passes=verify", "-disable-output", str(path)]
    return timed(subprocess.run, cmd, check=True)[0]


# -- same-work check --------------------------------------------------------------------------------

def counts_gpuc(text: str, target) -> tuple[int, int]:
    job = gpuc.CompilerJob(gpuc.IRSource(text, entry=ENTRY), gpuc.CompilerConfig(target))
    with gpuc.compile_module(job) as built:
        return module_counts(built.module)


def counts_inproc(text: str, target, tm) -> tuple[int, int]:
    context, module = _parse(text, target, tm)
    try:
        llvm.run_passes(module, "default<O2>", tm)
        return module_counts(module)
    finally:
        module.close()
        context.close()


def counts_tools(path: Path, target) -> tuple[int, int]:
    cmd = [str(LLVM_BIN / "opt"), "-O2", *tool_flags(target), "-S", str(path), "-o", "-"]
    text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return count_instructions(text), sum(1 for line in text.splitlines() if line.startswith("define "))


# -- one (target, size) cell -------------------------------------------------------------------------

def bench_cell(size: str, target_name: str, reps: int, use_tools: bool, workdir: Path) -> dict:
    target = make_target(target_name)
    output = output_kind(target)
    text = generate_preset(size)
    tm_s, tm = timed(target.target_machine, 2)
    path = workdir / f"{size}-{target_name}.ll"
    path.write_text(f'target triple = "{target.triple()}"\ntarget datalayout = "{tm.data_layout}"\n\n{text}')
    segments = [step.text for step in build_pipeline(target, 2).steps if step.kind == "passes"]
    cell = {"size": size, "target": target_name, "output": output, "reps": reps,
            "input_instructions": count_instructions(text), "tm_create_s": tm_s,
            "a": [], "b": [], "c": [], "r": [], "s": []}
    try:
        # Same work? (also serves as the warm-up run of each way)
        cell["counts"] = {"a": counts_gpuc(text, target), "b": counts_inproc(text, target, tm)}
        if use_tools:
            cell["counts"]["c"] = counts_tools(path, target)
            cell["tools_parse_s"] = median([tools_parse_overhead(path, target) for _ in range(3)])
        ways = [("a", lambda: run_gpuc(text, target, output)), ("b", lambda: run_inproc(text, target, tm, output)),
                ("r", lambda: run_raw(text, target, tm, output)),
                ("s", lambda: run_split(text, target, tm, segments))]
        if use_tools:
            ways.append(("c", lambda: run_tools(path, target, output, workdir)))
        for rep in range(reps):  # interleaved, rotating the order so no way always runs first
            k = rep % len(ways)
            for key, fn in ways[k:] + ways[:k]:
                cell[key].append(fn())
    finally:
        tm.close()
    summarize(cell)
    return cell


def summarize(cell: dict) -> None:
    med = {}
    for key in ("a", "b", "c", "r", "s"):
        runs = cell[key]
        if not runs:
            continue
        med[key] = {"opt_cg": median([r["opt_cg"] for r in runs]), "opt_cg_spread": spread([r["opt_cg"] for r in runs])}
        med[key]["total"] = median([r["total"] for r in runs])
        med[key]["total_cpu"] = median([r["total_cpu"] for r in runs])
    a = cell["a"]
    med["a"]["stages"] = {k: median([r["stages"].get(k, 0.0) for r in a]) for k in a[0]["stages"]}
    med["a"]["segments"] = {k: median([r["segments"].get(k, 0.0) for r in a]) for k in a[0]["segments"]}
    med["a"]["outside_trace"] = median([r["total"] - r["trace_total"] for r in a])
    med["b"]["optimize"] = median([r["optimize"] for r in cell["b"]])
    med["b"]["codegen"] = median([r["codegen"] for r in cell["b"]])
    med["b"]["parse"] = median([r["parse"] for r in cell["b"]])
    med["b"]["dispose"] = median([r["dispose"] for r in cell["b"]])
    cell["median"] = med
    cell["ratio_a_b_opt_cg"] = med["a"]["opt_cg"] / med["b"]["opt_cg"]
    cell["ratio_a_b_opt_cg_paired"] = median([x["opt_cg"] / y["opt_cg"] for x, y in zip(cell["a"], cell["b"])])
    cell["ratio_a_b_opt_cg_min"] = min(r["opt_cg"] for r in cell["a"]) / min(r["opt_cg"] for r in cell["b"])
    cell["ratio_a_b_optimize"] = med["a"]["stages"]["optimize"] / med["b"]["optimize"]
    cell["ratio_a_b_codegen"] = med["a"]["stages"]["codegen"] / med["b"]["codegen"]
    for key in ("optimize", "codegen", "parse"):
        med["r"][key] = median([r[key] for r in cell["r"]])
    cell["ratio_s_r_optimize"] = med["s"]["opt_cg"] / med["r"]["optimize"]
    cell["ratio_s_r_optimize_cpu"] = med["s"]["total_cpu"] / median([r["optimize_cpu"] for r in cell["r"]])
    cell["ratio_s_r_optimize_paired"] = median([x["optimize"] / y["optimize"] for x, y in zip(cell["s"], cell["r"])])
    cell["ratio_a_r_opt_cg"] = med["a"]["opt_cg"] / med["r"]["opt_cg"]
    cell["ratio_b_r_opt_cg"] = med["b"]["opt_cg"] / med["r"]["opt_cg"]
    cell["ratio_a_r_opt_cg_paired"] = median([x["opt_cg"] / y["opt_cg"] for x, y in zip(cell["a"], cell["r"])])
    cell["ratio_b_r_opt_cg_paired"] = median([x["opt_cg"] / y["opt_cg"] for x, y in zip(cell["b"], cell["r"])])
    cell["ratio_a_r_total_cpu"] = med["a"]["total_cpu"] / med["r"]["total_cpu"]
    cell["ratio_a_b_total"] = med["a"]["total"] / med["b"]["total"]
    cell["ratio_a_b_total_cpu"] = med["a"]["total_cpu"] / med["b"]["total_cpu"]
    if "c" in med:
        cell["ratio_a_c_total"] = med["a"]["total"] / med["c"]["total"]
        cell["ratio_a_c_total_cpu"] = med["a"]["total_cpu"] / med["c"]["total_cpu"]


# -- report ---------------------------------------------------------------------------------------------

def report(cells: list[dict], target_name: str) -> str:
    rows, raw, tools, breakdown, work = [], [], [], [], []
    for cell in cells:
        m = cell["median"]
        ok = "ok" if cell["size"] == "small" or cell["ratio_a_b_opt_cg"] <= 1.3 else "OVER 1.3x"
        rows.append([cell["size"], cell["input_instructions"], cell["reps"],
                     ms(m["a"]["opt_cg"]), ms(m["b"]["opt_cg"]), f"{cell['ratio_a_b_opt_cg']:.3f}x {ok}",
                     f"{cell['ratio_a_b_opt_cg_paired']:.3f}x", f"{cell['ratio_a_b_opt_cg_min']:.3f}x",
                     ms(m["a"]["total"]), ms(m["b"]["total"]), f"{cell['ratio_a_b_total']:.3f}x",
                     f"{cell['ratio_a_b_total_cpu']:.3f}x",
                     f"{100 * m['a']['opt_cg_spread']:.1f} / {100 * m['b']['opt_cg_spread']:.1f}"])
        raw.append([cell["size"], ms(m["r"]["optimize"]), ms(m["s"]["opt_cg"]), f"{cell['ratio_s_r_optimize']:.3f}x",
                    f"{cell['ratio_s_r_optimize_paired']:.3f}x", f"{cell['ratio_s_r_optimize_cpu']:.3f}x",
                    ms(m["r"]["codegen"]), ms(m["r"]["opt_cg"]),
                    f"{cell['ratio_a_r_opt_cg']:.3f}x", f"{cell['ratio_a_r_opt_cg_paired']:.3f}x",
                    f"{cell['ratio_b_r_opt_cg']:.3f}x", f"{cell['ratio_b_r_opt_cg_paired']:.3f}x",
                    f"{cell['ratio_a_r_total_cpu']:.3f}x", f"{100 * m['r']['opt_cg_spread']:.1f}"])
        if "c" in m:
            tools.append([cell["size"], ms(m["a"]["total"]), ms(m["a"]["total_cpu"]), ms(m["c"]["total"]),
                          ms(m["c"]["total_cpu"]), ms(cell["tools_parse_s"]), f"{cell['ratio_a_c_total']:.3f}x",
                          f"{cell['ratio_a_c_total_cpu']:.3f}x"])
        st, seg = m["a"]["stages"], m["a"]["segments"]
        breakdown.append([cell["size"], ms(st.get("irgen", 0)), ms(seg.get("simplify", 0)), ms(seg.get("optimize", 0)),
                          ms(seg.get("cleanup", 0)), ms(st["optimize"]), ms(m["b"]["optimize"]),
                          f"{cell['ratio_a_b_optimize']:.3f}", ms(st["codegen"]), ms(m["b"]["codegen"]),
                          f"{cell['ratio_a_b_codegen']:.3f}", ms(st.get("validate", 0)), ms(st.get("finish", 0)),
                          ms(m["a"]["outside_trace"]), ms(cell["tm_create_s"]), ms(m["b"]["parse"]),
                          ms(m["b"]["dispose"])])
        counts = cell["counts"]
        same = "same" if counts["a"] == counts["b"] else "DIFFERENT"
        work.append([cell["size"], cell["input_instructions"], f"{counts['a'][0]} / {counts['a'][1]}",
                     f"{counts['b'][0]} / {counts['b'][1]}",
                     f"{counts['c'][0]} / {counts['c'][1]}" if "c" in counts else "-", same])
    out = cells[0]["output"]
    text = [table(["size", "insts", "reps", "a opt+cg", "b opt+cg", "a/b opt+cg", "paired", "min", "a total",
                   "b total*", "a/b total", "a/b cpu", "noise % a / b"], rows,
                  f"\n== {target_name}: optimize + codegen to {out!r} (median ms; target a/b opt+cg <= 1.3x on "
                  "medium and large) =="),
            "  a = gpuc.compile (opt+cg: its optimize + codegen stages); b = run_passes(default<O2>) + tm.emit in-process",
            "  paired = median of the per-round a/b ratios; min = ratio of the fastest runs (both estimators are",
            "  more robust than the median when other processes compete for the cores)",
            "  b total* = parse + run_passes + emit; a/b cpu = a/b total in thread CPU time (less sensitive to other load)",
            "  noise = half the interquartile range of the opt+cg samples, in % of the median"]
    text += [table(["size", "r opt", "s opt", "s/r opt", "paired", "cpu", "r emit", "r opt+cg", "a/r", "paired", "b/r",
                    "paired", "a/r cpu", "noise %"], raw,
                   f"\n-- {target_name}: against r = raw LLVMRunPasses(default<O2>) + LLVMTargetMachineEmitToMemoryBuffer "
                   "and s = the three segments as raw LLVMRunPasses calls (median ms) --"),
             "  s/r opt = the pure cost of splitting default<O2> into three runs (cpu: the same in thread CPU time)",
             "  b/r = what gpuc.llvm's run_passes/emit wrappers add (verification, emitting from a clone); a/r = everything",
             "  gpuc adds over the bare LLVM calls (wrappers, split pipeline, driver); a/r cpu compares totals incl. parse",
             "  noise: of r's opt+cg samples"]
    if tools:
        text += [table(["size", "a total", "a cpu", "c opt|llc", "c cpu", "c parse", "a/c", "a/c cpu"], tools,
                       f"\n-- {target_name}: against c = `opt -O2 | llc -O2` subprocesses (median ms) --"),
                 "  c cpu = user+sys of opt and llc; c parse = `opt -passes=verify` on the same file (process start +",
                 "  parse + verify): part of c's time that (a) spends in irgen instead"]
    text += [table(["size", "irgen", "simplify", "optimize", "cleanup", "a opt", "b opt", "a/b", "a codegen", "b emit",
                    "a/b", "validate", "finish", "untraced", "tm create", "b parse", "b dispose"], breakdown,
                   f"\n-- {target_name}: where gpuc's time goes (median ms; segments are the three LLVMRunPasses calls) --"),
             "  untraced = compile() wall time outside the traced stages: target machine creation (first one: tm create)",
             "  and disposing of the module and context (b dispose: the same disposal in (b), not in b total*)",
             table(["size", "input insts", "a: insts / funcs", "b: insts / funcs", "c: insts / funcs", "a vs b"], work,
                   f"\n-- {target_name}: same work? optimized module (a after finish; b after default<O2>; c opt -O2 -S) --")]
    return "\n".join(text)


# -- fixed per-compile costs, measured directly -----------------------------------------------------------

TINY = "define void @f() {\n  ret void\n}\n"


def count_calls(target, output: str) -> tuple[int, int]:
    """How often one compile() of the medium module calls Module.verify and Module.clone."""
    cls = llvm.Module
    counts = {"verify": 0, "clone": 0}
    originals = {name: getattr(cls, name) for name in counts}

    def counting(name):
        def wrapper(self, *args, **kwargs):
            counts[name] += 1
            return originals[name](self, *args, **kwargs)
        return wrapper

    try:
        for name in counts:
            setattr(cls, name, counting(name))
        job = gpuc.CompilerJob(gpuc.IRSource(generate_preset("medium"), entry=ENTRY), gpuc.CompilerConfig(target))
        gpuc.compile(job, output=output)
    finally:
        for name, fn in originals.items():
            setattr(cls, name, fn)
    return counts["verify"], counts["clone"]


def fixed_costs(target_name: str, reps: int = 25) -> list[list]:
    """Costs gpuc pays per compile() regardless of module size, each timed on its own."""
    target = make_target(target_name)
    tm = target.target_machine(2)
    segments = [s.text for s in build_pipeline(target, 2).steps if s.kind == "passes"]
    rows = []

    def sample(label: str, fn, note: str = "") -> None:
        fn()
        rows.append([label, f"{median([timed(fn)[0] for _ in range(reps)]) * 1e3:8.3f}", note])

    def tm_cycle():
        target.target_machine(2).close()

    def ctx_cycle():
        llvm.Context().close()

    def on_tiny(pipelines):
        def run():
            context, module = _parse(TINY, target, tm)
            for p in pipelines:
                llvm.run_passes(module, p, tm)
            module.close()
            context.close()
        return run

    def fresh_tm():
        machine = target.target_machine(2)
        context, module = _parse(TINY, target, machine)
        llvm.run_passes(module, "default<O2>", machine)
        module.close()
        context.close()
        machine.close()

    def parse_only():
        context, module = _parse(TINY, target, tm)
        module.close()
        context.close()

    medium = generate_preset("medium")
    context, module = _parse(medium, target, tm)
    llvm.run_passes(module, "default<O2>", tm)
    try:
        sample("target machine: create + dispose", tm_cycle, "compile() creates one per call")
        sample("tm.data_layout (TargetData + string)", lambda: tm.data_layout, "prepare_module, per compile")
        sample("Context: create + dispose", ctx_cycle)
        sample("tiny module: parse only", parse_only, "baseline for the rows below")
        sample("tiny module: parse + default<O2>", on_tiny(["default<O2>"]), "one LLVMRunPasses")
        sample("tiny module: parse + 3 segments", on_tiny(segments), "three LLVMRunPasses, same passes")
        sample("tiny: new TM + parse + default<O2>", fresh_tm, "TM creation + first use (subtarget)")
        sample("tiny module: parse + globaldce", on_tiny(["globaldce"]), "finish stage's extra run")
        verifies, clones = count_calls(target, output_kind(target))
        sample("verify, optimized medium module", module.verify, f"compile() verifies {verifies} time(s)")
        sample("clone + dispose, optimized medium", lambda: module.clone().close(),
               f"compile() clones {clones} time(s) (emit)")
    finally:
        module.close()
        context.close()
        tm.close()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=None, help=f"comma-separated, from {', '.join(SIZES)} (default: all)")
    ap.add_argument("--targets", default="native,ptx", help="comma-separated: native, ptx")
    ap.add_argument("--reps", type=int, default=None,
                    help=f"repetitions per cell (default per size: {DEFAULT_REPS}; --quick: {QUICK_REPS})")
    ap.add_argument("--quick", action="store_true", help=f"sizes {', '.join(QUICK_SIZES)} only, fewer repetitions")
    ap.add_argument("--no-tools", action="store_true", help="skip (c), the opt | llc subprocesses")
    ap.add_argument("--no-fixed", action="store_true", help="skip the table of fixed per-compile costs")
    ap.add_argument("--json", metavar="OUT", help="write all samples and medians as JSON")
    args = ap.parse_args()

    sizes = args.sizes.split(",") if args.sizes else list(QUICK_SIZES if args.quick else SIZES)
    targets = args.targets.split(",")
    for s in sizes:
        if s not in SIZES:
            ap.error(f"unknown size {s!r}")
    use_tools = not args.no_tools and all((LLVM_BIN / t).exists() for t in ("opt", "llc"))
    if not args.no_tools and not use_tools:
        print(f"note: {LLVM_BIN}/opt or llc not found (set LLVM_BIN); skipping (c)", file=sys.stderr)

    facts = machine_facts()
    print(banner(facts))
    n = len(gpuc.CompilerConfig(make_target(targets[0])).plugins)
    print(f"(a) uses CompilerConfig(target), which captures the {n} globally registered plugin(s)")
    start = time.perf_counter()
    results = {"machine": facts, "cells": []}
    workdir = Path(tempfile.mkdtemp(prefix="gpuc-bench-"))
    try:
        for target_name in targets:
            cells = []
            for size in sizes:
                reps = args.reps or (QUICK_REPS if args.quick else DEFAULT_REPS)[size]
                print(f"  {target_name}/{size}: {reps} rep(s) ...", file=sys.stderr, flush=True)
                cells.append(bench_cell(size, target_name, reps, use_tools, workdir))
            print(report(cells, target_name), flush=True)
            results["cells"] += cells
            if not args.no_fixed:
                rows = fixed_costs(target_name)
                results.setdefault("fixed_costs", {})[target_name] = rows
                print(table(["what", "ms", "note"], rows,
                            f"\n-- {target_name}: fixed per-compile costs (median of 25, each timed alone) --", left=(0, 2)))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"\nran in {time.perf_counter() - start:.1f} s")
    if args.json:
        write_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
