"""Cost of containing LLVM's fatal errors: GPU code generation in a helper process, and the checks before it.

PTX and GCN generate machine code in a pooled helper process (gpuc/llvm/isolated.py), so that an
abort inside LLVM's backend ("LLVM ERROR: Cannot select") kills the helper, not the caller. For
each GPU target and workload, whole compiles (`gpuc.compile(job, "asm")`) are timed side by side,
interleaved round-robin, in two ways that differ only in where code is generated:

  inproc    the target with `isolated_codegen = False`: code generation in this process, as
            gpuc did before containment
  helper    the target as shipped: the module goes to the helper as bitcode, the assembly comes back

The "validate" column is the median of the validate stage (what the backend cannot lower is
checked on every compile that generates machine code) within the helper compiles. For the CPU
target, whose code is generated in-process (the JIT must be), the validate stage is set against
the whole `compile_module` time.

    python benchmarks/bench_codegen_containment.py            # ~1 minute
    python benchmarks/bench_codegen_containment.py --quick    # ~15 seconds
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import _common  # noqa: F401 - puts the repository on sys.path
from _common import banner, machine_facts, median, ms, table, timed, write_json
from irgen import ENTRY, generate_preset

import gpuc
from gpuc.llvm.isolated import client


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


def gpu_rows(loads: dict, reps: int) -> list[list]:
    rows = []
    for tname, (inproc_cls, helper_cls) in TARGETS.items():
        for lname, source in loads.items():
            jobs = {kind: gpuc.CompilerJob(source, gpuc.CompilerConfig(cls())) for kind, cls in
                    (("inproc", inproc_cls), ("helper", helper_cls))}
            for job in jobs.values():
                gpuc.compile(job, "asm")  # warm: target machine, helper started, first-use costs
            times = {kind: [] for kind in jobs}
            validate = []
            for _ in range(reps):  # round-robin, so drift in the machine's speed hits both alike
                for kind, job in jobs.items():
                    seconds, result = timed(gpuc.compile, job, "asm")
                    times[kind].append(seconds)
                    if kind == "helper":
                        validate.append(stage_time(result.trace, "validate"))
            a, b = median(times["inproc"]), median(times["helper"])
            rows.append([tname, lname, ms(a), ms(b), f"{b / a:5.2f}x", ms(median(validate))])
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
    print(table(["target", "workload", "inproc ms", "helper ms", "ratio", "validate ms"], gpu, left=(0, 1),
                title=f"\nWhole compile to assembly, median of {reps}"))
    cpu = native_rows(loads, reps)
    print(table(["target", "workload", "compile_module ms", "validate ms", "share"], cpu, left=(0, 1),
                title="\nCPU: the checks before in-process code generation"))
    client().close()
    if args.json:
        write_json(args.json, {"facts": facts, "gpu": gpu, "cpu": cpu, "reps": reps})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
