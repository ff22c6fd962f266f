"""Shared helpers for the benchmark scripts: timing, statistics, tables, machine facts."""

from __future__ import annotations

import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as `python benchmarks/x.py` without installing gpuc
    sys.path.insert(0, str(ROOT))


def timed(fn, *args, **kwargs):
    """(seconds, result) of one call, after a garbage collection so GC pauses do not land inside."""
    gc.collect()
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return time.perf_counter() - start, result


def timed_cpu(fn, *args, **kwargs):
    """(wall seconds, CPU seconds of this thread, result) of one call, after a garbage collection.

    CPU time is less sensitive than wall time to other processes competing for the cores.
    """
    gc.collect()
    cpu, start = time.thread_time(), time.perf_counter()
    result = fn(*args, **kwargs)
    return time.perf_counter() - start, time.thread_time() - cpu, result


def paired_rounds(fns, reps: int, clock: int = 0) -> list[list[float]]:
    """Each function's times over `reps` rounds that call them one after another, after a warm-up call of
    each (which compiles): `clock` 0 is wall time, 1 the calling thread's CPU time. Round k of every
    function ran at nearly the same moment, so the machine's noise falls on all of them alike."""
    for fn in fns:
        fn()
    samples = [[] for _ in fns]
    for _ in range(reps):
        for fn, times in zip(fns, samples):
            times.append(timed_cpu(fn)[clock])
    return samples


def ratios(ours: list[float], theirs: list[float]) -> tuple[float, float]:
    """(best against best, median of the per-round ratios) of two functions' `paired_rounds` times."""
    return min(ours) / min(theirs), median([a / b for a, b in zip(ours, theirs)])


def against_numba(title: str, cpu: list[list[float]], results: dict) -> str:
    """The table of `paired_rounds` CPU times of gpuc (cpu[0]) and, when it ran, Numba (cpu[1]), with
    both ratios; the times and ratios also go into `results`."""
    rows = [["gpuc (threads=1)", ms(min(cpu[0])), "", ""]]
    results["gpuc_cpu_s"] = cpu[0]
    if len(cpu) == 2:
        best_ratio, median_ratio = ratios(cpu[0], cpu[1])
        rows.append(["numba.njit", ms(min(cpu[1])), "", ""])
        rows[0][2:] = [f"{best_ratio:.2f}x", f"{median_ratio:.2f}x"]
        results.update(numba_cpu_s=cpu[1], ratio=best_ratio, median_ratio=median_ratio)
    return table([title, "best CPU ms", "gpuc / numba (best)", "(median of rounds)"], rows)


def median(values) -> float:
    return statistics.median(values) if values else float("nan")


def spread(values) -> float:
    """Relative half-range between the 25th and 75th percentile: a robust noise estimate."""
    if len(values) < 4:
        return float("nan")
    q = statistics.quantiles(values, n=4)
    return (q[2] - q[0]) / 2 / statistics.median(values)


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:9.2f}"


def table(headers: list[str], rows: list[list], title: str | None = None, left: tuple[int, ...] = (0,)) -> str:
    """A plain-text table; columns in `left` are left-aligned, the others right-aligned."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    line = "  ".join("-" * w for w in widths)
    out = [title] if title else []
    def fmt(row):
        return "  ".join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip()
    out.append(fmt(headers))
    out.append(line)
    out += [fmt(r) for r in cells]
    return "\n".join(out)


def machine_facts() -> dict:
    facts = {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count()}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        for line in out.splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("Model name", "CPU family", "Model", "Hypervisor vendor", "L2 cache", "L3 cache"):
                facts[key.strip()] = value.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "gpuc"], capture_output=True,
                               text=True, timeout=10).stdout.strip()
        facts["gpuc_commit"] = commit + (" + uncommitted changes in gpuc/" if dirty else "") if commit else "unknown"
    except (OSError, subprocess.SubprocessError):
        facts["gpuc_commit"] = "unknown"
    try:
        from gpuc import llvm

        facts["llvm"] = ".".join(map(str, llvm.version()))
        facts["host_cpu"] = llvm.host_cpu()
    except Exception as exc:  # noqa: BLE001 - facts are best effort
        facts["llvm"] = f"unknown ({exc})"
    return facts


def banner(facts: dict) -> str:
    import gpuc

    return (f"gpuc {gpuc.__version__} ({facts.get('gpuc_commit')}), LLVM {facts.get('llvm')}, Python {facts['python']}, "
            f"{facts.get('Model name', '?')} ({facts.get('host_cpu', '?')}), {facts['cpus']} CPUs")


def write_json(path: str, data: dict) -> None:
    Path(path).write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    print(f"\nwrote {path}")
