"""Cost of containing LLVM's fatal errors: GPU code generation in a helper process, and the checks before it.

PTX and GCN generate machine code for IR that gpuc did not produce itself (IRSource, third-party
plugins) in a pooled helper process (gpuc/llvm/isolated.py), so that an abort inside LLVM's
backend ("LLVM ERROR: Cannot select") kills the helper, not the caller; gpuc's own IR (Python
kernels), once validated, is generated in-process. For each GPU target and workload, whole
compiles (`gpuc.compile(job, "asm")`) are timed side by side, interleaved round-robin:

  IR inproc   the workload's unoptimized IR as an IRSource, for the target with
              `isolated_codegen = False`: code generation in this process always
  IR helper   the same for the target as shipped: the code is generated in the helper
  inproc      the workload itself (a Python kernel or IR), code generation in this process
  shipped     the workload itself for the target as shipped, by the route gpuc takes ("route")

IR helper / IR inproc is the price of containment; shipped / inproc must be 1.0 for Python
kernels. Times are milliseconds: IR inproc / IR helper the best wall time of the repetitions (the
helper works in another process; the machine's other load only ever adds time), inproc / shipped
the median CPU time of the compiling thread (all of the work, when code is generated in-process;
steadier than wall time on a busy machine). The ratio of the shipped route is shown for in-process
routes only, where the two columns measure the same kind of work. The "validate" column is the
validate stage of the shipped compiles (what the backend cannot lower is checked on every compile
that generates machine code). For the CPU target, whose code is generated in-process (the JIT must
be), the validate stage is set against the whole `compile_module` time. Run it on an older
checkout too (it needs only gpuc.compile) to compare with gpuc before containment.

    python benchmarks/bench_codegen_containment.py            # ~1 minute
    python benchmarks/bench_codegen_containment.py --quick    # ~15 seconds
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import _common  # noqa: F401 - puts the repository on sys.path
from _common import banner, machine_facts, median, ms, table, timed, timed_cpu, write_json
from irgen import ENTRY, generate_preset

import gpuc
try:
    from gpuc.llvm.isolated import client
except ImportError:  # an older gpuc, for comparison
    client = None


@gpuc.kernel
def saxpy(a, x, y, out):
    i = gpuc.index()
    out[i] = a * x[i] + y[i]


@dataclass(frozen=True, repr=False)
class InProcessPTX(gpuc.PTXTarget):
    isolated_codegen = False


@dataclass(frozen=True, repr=False)
class InProcessGCN(gpuc.GCNTarget):
    isolated_codegen = False


TARGETS = {"ptx": (InProcessPTX, gpuc.PTXTarget), "gcn": (InProcessGCN, gpuc.GCNTarget)}


def workloads(sizes) -> dict:
    f32 = gpuc.float32
    loads = {"saxpy (Python)": (saxpy, (f32, gpuc.Array[f32, 1], gpuc.Array[f32, 1], gpuc.Array[f32, 1]))}
    for size in sizes:
        loads[f"irgen {size}"] = gpuc.IRSource(generate_preset(size), entry=ENTRY)
    return loads


def stage_time(trace, name: str) -> float:
    return sum(stage.seconds for stage in trace.stages if stage.name == name)


def as_ir(source, target) -> gpuc.IRSource:
    """The unoptimized IR of `source` for `target`, as an IRSource (which gpuc treats as foreign IR)."""
    if isinstance(source, gpuc.IRSource):
        return source
    config = gpuc.CompilerConfig(target, optimize=False, validate=False)
    job = gpuc.CompilerJob(source, config)
    return gpuc.IRSource(gpuc.compile(job, "llvm").output, entry=gpuc.compile(job, "llvm").entry)


def gpu_rows(loads: dict, reps: int) -> list[list]:
    rows = []
    for tname, (inproc_cls, shipped_cls) in TARGETS.items():
        for lname, source in loads.items():
            ir = as_ir(source, shipped_cls())
            jobs = {"ir inproc": gpuc.CompilerJob(ir, gpuc.CompilerConfig(inproc_cls())),
                    "ir helper": gpuc.CompilerJob(ir, gpuc.CompilerConfig(shipped_cls())),
                    "inproc": gpuc.CompilerJob(source, gpuc.CompilerConfig(inproc_cls())),
                    "shipped": gpuc.CompilerJob(source, gpuc.CompilerConfig(shipped_cls()))}
            for job in jobs.values():
                gpuc.compile(job, "asm")  # warm: target machine, helper started, first-use costs
            times = {kind: [] for kind in jobs}
            cpu = {kind: [] for kind in jobs}
            validate = []
            for _ in range(reps):  # round-robin, so drift in the machine's speed hits all alike
                for kind, job in jobs.items():
                    seconds, cpu_seconds, result = timed_cpu(gpuc.compile, job, "asm")
                    times[kind].append(seconds)
                    cpu[kind].append(cpu_seconds)
                    if kind == "shipped":
                        validate.append(stage_time(result.trace, "validate"))
            t = {kind: min(values) for kind, values in times.items()}
            c = {kind: median(values) for kind, values in cpu.items()}
            own = getattr(jobs["shipped"].source, "generated_by_gpuc", False)
            rows.append([tname, lname, ms(t["ir inproc"]), ms(t["ir helper"]),
                         f"{t['ir helper'] / t['ir inproc']:5.2f}x", "in-process" if own else "helper",
                         ms(c["inproc"]), ms(c["shipped"]), f"{c['shipped'] / c['inproc']:5.2f}x" if own else "-",
                         ms(median(validate))])
    return rows


def native_rows(loads: dict, reps: int) -> list[list]:
    from gpuc.compiler.driver import compile_module

    rows = []
    for lname, source in loads.items():
        job = gpuc.CompilerJob(source, gpuc.CompilerConfig(gpuc.NativeTarget()))
        totals, validate = [], []
        for _ in range(reps):
            seconds, built = timed(compile_module, job)
            totals.append(seconds)
            validate.append(stage_time(built.trace, "validate"))
            built.close()
        share = median(validate) / median(totals)
        rows.append(["native", lname, ms(median(totals)), ms(median(validate)), f"{share:6.1%}"])
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions, no medium module")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args()
    reps = args.reps or (5 if args.quick else 11)
    loads = workloads(("small",) if args.quick else ("small", "medium"))
    facts = machine_facts()
    print(banner(facts))
    gpu = gpu_rows(loads, reps)
    print(table(["target", "workload", "IR inproc", "IR helper", "ratio", "route", "inproc CPU", "shipped CPU",
                 "ratio", "validate"], gpu, left=(0, 1, 5),
                title=f"\nWhole compile to assembly, {reps} repetitions"))
    cpu = native_rows(loads, reps)
    print(table(["target", "workload", "compile_module ms", "validate ms", "share"], cpu, left=(0, 1),
                title="\nCPU: the checks before in-process code generation"))
    if client is not None:
        client().close()
    if args.json:
        write_json(args.json, {"facts": facts, "gpu": gpu, "cpu": cpu, "reps": reps})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
