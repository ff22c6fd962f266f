"""Cold start: the import and the first launch of a kernel in a fresh process, gpuc against Numba.

Every figure comes from a new Python process (one per measurement; the cases run round-robin, the
order rotating each round, after one discarded warm-up run of each; best and median reported):

- `import numpy` alone, and `import gpuc` / `import numba` after it (target: gpuc at most 0.15 s
  more than numpy alone);
- the first launch of two float32 kernels defined in a module file written to a temporary folder:
  saxpy over 1M elements and a 2-D 5-point stencil over the interior of 1024x1024. The figure is
  the time from the first launch call to its return minus that of the second launch in the same
  process (the kernel's own run time). gpuc runs on the CPU with one thread, uncached (a fresh
  empty GPUC_CACHE_DIR each run) and cached (the folder filled by an earlier process; target: at
  most 0.02 s). Numba runs the same kernels as serial `@numba.njit` loops (`range`, no `prange`,
  no `vectorize`): first call without `cache=True`, with `cache=True` and a fresh NUMBA_CACHE_DIR,
  and with `cache=True` and a filled one. Its columns are left out when Numba is not installed.

Each child checks the kernel's result against NumPy and reports its cache hits and misses; a
"cached" run that missed, or an "uncached" one that hit, stops the benchmark.

    python benchmarks/bench_cold_start.py             # ~2 min on 2 cores
    python benchmarks/bench_cold_start.py --quick     # ~40 s
    python benchmarks/bench_cold_start.py --profile   # also: -X importtime of `import gpuc` and
                                                      # cProfile of a cached first launch
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import pstats
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import _common  # noqa: F401 - puts the repository on sys.path
from _common import ROOT, banner, machine_facts, median, spread, table, write_json

SAXPY_N = 1 << 20
STENCIL_SIDE = 1024
IMPORT_TARGET = 0.15
CACHED_TARGET = 0.02
KERNELS = ("saxpy", "stencil")

GPUC_KERNELS = """\
import gpuc


@gpuc.kernel
def saxpy(a, x, y, out):
    i = gpuc.index()
    out[i] = a * x[i] + y[i]


@gpuc.kernel
def stencil(u, v):
    j = gpuc.index(0) + 1
    i = gpuc.index(1) + 1
    v[i, j] = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]) - u[i, j]
"""

NUMBA_KERNELS = """\
import numba


@numba.njit({options})
def saxpy(a, x, y, out):
    for i in range(x.shape[0]):
        out[i] = a * x[i] + y[i]


@numba.njit({options})
def stencil(u, v):
    n, m = u.shape
    for i in range(1, n - 1):
        for j in range(1, m - 1):
            v[i, j] = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]) - u[i, j]
"""

# argv: tool (gpuc | numba), kernel (or "-": the import only), kernel module, [pstats file]
CHILD = f"""\
import sys, time
t0 = time.perf_counter()
import numpy as np
t1 = time.perf_counter()
tool, kernel = sys.argv[1], sys.argv[2]
if tool == "gpuc":
    import gpuc
else:
    import numba
t2 = time.perf_counter()
import importlib, json
result = {{"numpy": t1 - t0, "import": t2 - t1}}
if kernel != "-":
    fn = getattr(importlib.import_module(sys.argv[3]), kernel)
    rng = np.random.default_rng(0)
    if kernel == "saxpy":
        x, y = rng.random({SAXPY_N}, dtype=np.float32), rng.random({SAXPY_N}, dtype=np.float32)
        a, out = np.float32(2.5), np.zeros_like(x)
        args, n, want = (a, x, y, out), x.size, a * x + y
    else:
        u = rng.random(({STENCIL_SIDE}, {STENCIL_SIDE}), dtype=np.float32)
        out = np.zeros_like(u)
        args, n, want = (u, out), (u.shape[1] - 2, u.shape[0] - 2), np.zeros_like(u)
        want[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]) - u[1:-1, 1:-1]
    if tool == "gpuc":
        call = lambda: fn.launch(n, *args, device="cpu", threads=1)
    else:
        call = lambda: fn(*args)
    if len(sys.argv) > 4:
        import cProfile
        profile = cProfile.Profile()
        profile.runcall(call)
        profile.dump_stats(sys.argv[4])
    p0, c0 = time.process_time(), time.perf_counter()
    call()
    p1, c1 = time.process_time(), time.perf_counter()
    call()
    p2, c2 = time.process_time(), time.perf_counter()
    result.update(first=c1 - c0, second=c2 - c1, first_cpu=p1 - p0, second_cpu=p2 - p1,
                  correct=bool(np.allclose(out, want, rtol=1e-5, atol=1e-6)))
    if tool == "gpuc":
        info = gpuc.cache.info()
        result.update(hits=info["hits"], misses=info["misses"])
    else:
        stats = fn.stats
        result.update(hits=sum(stats.cache_hits.values()), misses=sum(stats.cache_misses.values()))
print(json.dumps(result))
"""


def child_env(folder: Path, **settings: str) -> dict:
    """The environment of a child: gpuc from this checkout, and bytecode written and read under
    `folder` (the warm-up runs fill it), so that no child compiles a module's source again, also
    when PYTHONDONTWRITEBYTECODE is set here or a source is newer than its .pyc in the tree."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("GPUC_CACHE", "NUMBA_DISABLE_JIT", "PYTHONDONTWRITEBYTECODE")}
    env.update(PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               PYTHONPYCACHEPREFIX=str(folder / "pycache"), **settings)
    return env


class Case:
    """One kind of fresh process: a tool, a kernel (None: the import only) and the state of its disk
    cache: "off" (Numba without cache=True), "fresh" (a new empty folder each run) or "filled"."""

    def __init__(self, tool: str, kernel: str | None, cache: str = "off"):
        self.tool, self.kernel, self.cache = tool, kernel, cache
        self.module = {"gpuc": "cold_gpuc", "numba": "cold_numba_cache" if cache != "off" else "cold_numba"}[tool]
        self.samples: list[dict] = []

    @property
    def name(self) -> str:
        return f"{self.tool} {self.kernel or 'import'} {self.cache}"

    def run(self, folder: Path, filled: Path, profile: Path | None = None, check: bool = True) -> dict:
        fresh = Path(tempfile.mkdtemp(prefix="cache-", dir=folder))
        cache_dir = filled if self.cache == "filled" else fresh
        env = child_env(folder, GPUC_CACHE_DIR=str(cache_dir / "gpuc"), NUMBA_CACHE_DIR=str(cache_dir / "numba"))
        argv = [sys.executable, str(folder / "child.py"), self.tool, self.kernel or "-", self.module]
        try:
            proc = subprocess.run(argv + ([str(profile)] if profile else []), cwd=folder, env=env,
                                  capture_output=True, text=True, timeout=600)
        finally:
            shutil.rmtree(fresh, ignore_errors=True)
        if proc.returncode != 0:
            sys.exit(f"{self.name}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        if check:
            self._check(result)
        return result

    def _check(self, result: dict) -> None:
        if self.kernel is None:
            return
        if not result["correct"]:
            sys.exit(f"{self.name}: the kernel's result differs from NumPy's")
        if self.cache == "filled" and (result["hits"] < 1 or result["misses"]):
            sys.exit(f"{self.name}: expected a cache hit, got {result['hits']} hits, {result['misses']} misses "
                     "(was gpuc's code edited during the run?)")
        if self.cache == "fresh" and result["hits"]:
            sys.exit(f"{self.name}: a fresh cache folder gave {result['hits']} hits")

    def values(self, what: str) -> list[float]:
        if what == "launch":
            return [s["first"] - s["second"] for s in self.samples]
        if what == "launch cpu":
            return [s["first_cpu"] - s["second_cpu"] for s in self.samples]
        return [s[what] for s in self.samples]


def cases(numba: bool) -> list[Case]:
    out = [Case("gpuc", None)] + [Case("gpuc", k, c) for k in KERNELS for c in ("fresh", "filled")]
    if numba:
        out += [Case("numba", None)] + [Case("numba", k, c) for k in KERNELS for c in ("off", "fresh", "filled")]
    return out


def write_sources(folder: Path) -> None:
    (folder / "child.py").write_text(CHILD)
    (folder / "cold_gpuc.py").write_text(GPUC_KERNELS)
    (folder / "cold_numba.py").write_text(NUMBA_KERNELS.format(options=""))
    (folder / "cold_numba_cache.py").write_text(NUMBA_KERNELS.format(options="cache=True"))


def measure(all_cases: list[Case], folder: Path, filled: Path, reps: int) -> None:
    for case in all_cases:  # warm-up: fills the shared caches and the children's .pyc files
        case.run(folder, filled, check=False)
    for r in range(reps):
        shift = r % len(all_cases)
        for case in all_cases[shift:] + all_cases[:shift]:
            case.samples.append(case.run(folder, filled))
        print(f"\rround {r + 1}/{reps}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)


# -- report ------------------------------------------------------------------------------------------

def _ms(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds * 1e3:.1f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "" if a is None or b is None else f"{a / b:.2f}x"


def _best_median(by_name: dict, name: str | None, what: str) -> tuple[float | None, float | None]:
    case = by_name.get(name)
    if case is None:
        return None, None
    values = case.values(what)
    return min(values), median(values)


def _comparison(by_name: dict, have_numba: bool) -> tuple[list[str], list[list], dict]:
    """The main table: gpuc and Numba side by side, one row per measure."""
    numpy_values = [v for c in ("gpuc import off", "numba import off") if c in by_name
                    for v in by_name[c].values("numpy")]
    rows = [["import numpy alone", _ms(min(numpy_values)), _ms(median(numpy_values)), "", "", "", "", ""]]
    summary = {"import numpy alone": {"best": min(numpy_values), "median": median(numpy_values)}}
    measures = [("import gpuc beyond numpy", "gpuc import off", "import numba", "numba import off", "import",
                 f"gpuc <= {IMPORT_TARGET * 1e3:.0f}")]
    for k in KERNELS:
        measures += [(f"{k} first launch, uncached", f"gpuc {k} fresh", "njit", f"numba {k} off", "launch", ""),
                     (f"{k} first launch, uncached", f"gpuc {k} fresh", "njit(cache=True), empty dir",
                      f"numba {k} fresh", "launch", ""),
                     (f"{k} first launch, cached", f"gpuc {k} filled", "njit(cache=True), filled dir",
                      f"numba {k} filled", "launch", f"gpuc <= {CACHED_TARGET * 1e3:.0f}")]
    for label, gpuc_case, numba_label, numba_case, what, target in measures:
        if have_numba:
            label = f"{label} | {numba_label}"
        elif any(label == r[0] for r in rows):
            continue
        gb, gm = _best_median(by_name, gpuc_case, what)
        nb, nm = _best_median(by_name, numba_case, what)
        rows.append([label, _ms(gb), _ms(gm), _ms(nb), _ms(nm), _ratio(gb, nb), _ratio(gm, nm), target])
        summary[label] = {"gpuc_best": gb, "gpuc_median": gm, "numba_best": nb, "numba_median": nm}
    headers = ["ms (gpuc | Numba)", "gpuc best", "gpuc median", "numba best", "numba median", "ratio best",
               "ratio median", "target"]
    if not have_numba:
        headers, rows = [headers[0], *headers[1:3], headers[-1]], [[r[0], *r[1:3], r[-1]] for r in rows]
    return headers, rows, summary


def report(by_name: dict, have_numba: bool) -> tuple[str, dict]:
    headers, rows, summary = _comparison(by_name, have_numba)
    text = table(headers, rows, left=(0, len(headers) - 1))

    def noise(values):
        return f"{spread(values):.0%}" if len(values) >= 4 else ""

    run_rows = [[c.name, _ms(min(c.values("launch cpu"))), noise(c.values("launch")), _ms(min(c.values("second"))),
                 _ms(median(c.values("second")))] for c in by_name.values() if c.kernel]
    text += "\n\n" + table(["case", "first launch cpu best", "noise", "2nd launch best", "2nd median"], run_rows,
                           title="per case, ms: the first launch in process CPU time (less sensitive to other load), "
                                 "the noise of its wall time, and the kernel's own run time (the second launch)")

    verdicts = [(f"import gpuc beyond numpy <= {IMPORT_TARGET * 1e3:.0f} ms", "gpuc import off", "import",
                 IMPORT_TARGET)]
    verdicts += [(f"{k}, cached first launch <= {CACHED_TARGET * 1e3:.0f} ms", f"gpuc {k} filled", "launch",
                  CACHED_TARGET) for k in KERNELS]
    text += "\n\ntargets (judged on the best run):"
    for label, case, what, limit in verdicts:
        best, med = _best_median(by_name, case, what)
        text += f"\n  {label}: {'met' if best <= limit else 'NOT met'} (best {_ms(best)} ms, median {_ms(med)} ms)"
        summary[f"target: {label}"] = {"met": best <= limit, "best": best, "median": med}
    return text, summary


# -- where the time goes (--profile) -----------------------------------------------------------------

def _where(filename: str) -> str:
    path = Path(filename)
    for base in (ROOT, *(Path(p) for p in sys.path if "site-packages" in p), Path(sysconfig.get_paths()["stdlib"])):
        try:
            return str(path.relative_to(base))
        except ValueError:
            continue
    return filename


def _import_times(folder: Path) -> dict:
    """{module: (self us, cumulative us, importer)} of `import gpuc` after numpy, from -X importtime."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", "import numpy; import gpuc"], cwd=ROOT,
                          env=child_env(folder), capture_output=True, text=True, timeout=120, check=True)
    lines = [line[len("import time:"):].split("|") for line in proc.stderr.splitlines()
             if line.startswith("import time:") and "|" in line]
    lines = lines[next(i for i, (_, _, name) in enumerate(lines) if name.rstrip() == " numpy") + 1:]
    depth = [len(name) - len(name.lstrip()) for _, _, name in lines]
    out = {}
    for i, (own, total, name) in enumerate(lines):  # an importer's line comes after those of its imports
        parent = next((lines[j][2].strip() for j in range(i + 1, len(lines)) if depth[j] < depth[i]), "")
        out[name.strip()] = (int(own), int(total), parent)
    return out


def import_profile(folder: Path, top: int, runs: int = 7) -> str:
    """Where `import gpuc` spends its time: each module's least self and cumulative time over `runs`
    fresh processes (one run is too noisy on a shared machine)."""
    samples = [_import_times(folder) for _ in range(runs)]
    best = {name: (min(s[name][0] for s in samples if name in s), min(s[name][1] for s in samples if name in s),
                   samples[0][name][2]) for name in samples[0]}
    rows = [[name, parent, f"{own / 1e3:.1f}", f"{total / 1e3:.1f}"]
            for name, (own, total, parent) in sorted(best.items(), key=lambda item: -item[1][0])[:top]]
    direct = [[name, f"{total / 1e3:.1f}"] for name, (own, total, parent) in
              sorted(best.items(), key=lambda item: -item[1][1]) if parent == "gpuc"]
    return (table(["module", "imported by", "self ms", "cumulative ms"], rows,
                  title=f"\nimport gpuc after numpy, -X importtime, least of {runs} processes: "
                        f"the {top} largest self times")
            + "\n\n" + table(["module", "cumulative ms"], direct[:top], title="gpuc's direct imports"))


def _name(func: tuple) -> str:
    file, line, name = func
    return name if file == "~" else f"{_where(file)}:{line}:{name}"


def launch_profile(case: Case, folder: Path, filled: Path, top: int, runs: int = 3) -> str:
    """cProfile of a first launch in a fresh process (the quickest of `runs`): the functions with the
    most cumulative time (less those wrapping the whole launch) and those with the most time of their own."""
    profiles = []
    for r in range(runs):
        path = folder / f"launch{r}.pstats"
        case.run(folder, filled, profile=path)
        profiles.append(pstats.Stats(str(path)))
    stats = min(profiles, key=lambda p: p.total_tt)
    total = stats.total_tt
    title = (f"cProfile of the first {case.kernel} launch, cached, in a fresh process ({total * 1e3:.1f} ms profiled, "
             f"the quickest of {runs})")
    text = []
    for column, heading in ((3, "cumulative times, less the calls wrapping the whole launch"),
                            (2, "own times")):
        ranked = sorted((item for item in stats.stats.items() if item[1][3] < 0.9 * total),
                        key=lambda item: -item[1][column])[:top]
        rows = [[_name(func), nc, f"{tt * 1e3:.2f}", f"{ct * 1e3:.2f}"] for func, (_, nc, tt, ct, _) in ranked]
        text.append(table(["function", "calls", "own ms", "cumulative ms"], rows,
                          title=f"\n{title}: the {top} largest {heading}"))
    return "\n".join(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (5 instead of 15)")
    parser.add_argument("--reps", type=int, help="rounds of fresh processes (default 15, 5 with --quick)")
    parser.add_argument("--no-numba", action="store_true", help="leave out Numba even when it is installed")
    parser.add_argument("--profile", action="store_true",
                        help="also profile the import of gpuc and a cached first launch of each kernel")
    parser.add_argument("--top", type=int, default=20, help="rows of each profile table (default 20)")
    parser.add_argument("--json", metavar="OUT", help="write samples, best and median figures as JSON")
    args = parser.parse_args()
    reps = args.reps or (5 if args.quick else 15)
    have_numba = not args.no_numba and importlib.util.find_spec("numba") is not None
    facts = machine_facts()
    if have_numba:
        facts["numba"] = importlib.metadata.version("numba")
    print(banner(facts) + (f", Numba {facts['numba']}" if have_numba else ", Numba not installed"))

    with tempfile.TemporaryDirectory(prefix="gpuc-cold-") as tmp:
        folder = Path(tmp)
        filled = folder / "filled"
        write_sources(folder)
        all_cases = cases(have_numba)
        measure(all_cases, folder, filled, reps)
        by_name = {c.name: c for c in all_cases}
        text, summary = report(by_name, have_numba)
        print(f"\nfirst launch in a fresh process minus the second launch, and imports (ms, {reps} processes "
              f"each; gpuc on the CPU, 1 thread; Numba serial njit loops)")
        print(text)
        data = {"facts": facts, "reps": reps, "summary": summary,
                "samples": {c.name: c.samples for c in all_cases}}
        if args.profile:
            profiles = [import_profile(folder, args.top)]
            profiles += [launch_profile(by_name[f"gpuc {k} filled"], folder, filled, args.top) for k in KERNELS]
            print("\n".join(profiles))
            data["profiles"] = profiles
    if args.json:
        write_json(args.json, data)


if __name__ == "__main__":
    main()
