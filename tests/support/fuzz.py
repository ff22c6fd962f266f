"""The random-program differential harness: generate, predict with the reference, run gpuc, judge.

`run_programs(seed, count, workers)` generates programs `seed:0 … seed:count-1`, runs them in
batches in worker processes (support.fuzz_worker) with a per-program timeout, and returns a
`Report` whose findings are ready reproducers (`finding.describe()`). A process that hangs or dies
is blamed on the program it had begun, and the rest of its batch runs in a fresh process.
`device="opencl"` launches the kernels through OpenCL instead of on the CPU, against the same
reference; there a refusal naming what the device lacks (`DEVICE_LIMITS`) is counted, not a finding.

    python -m support.fuzz --seed 1 --count 2000 --workers 2 [--minimize] [--features ...] [--device opencl]
"""

from __future__ import annotations

import argparse
import ast
import os
import pickle
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import derivatives, progen
from .launches import build_args
from .numeric import Expected, Undefined
from .reference import Program

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
KINDS = ("mismatch", "missed error", "unexpected refusal", "internal error", "exception", "crash", "hang",
         "vectorize mismatch")
#: Per device, refusals that name what it lacks: (a part of gpuc's message, the feature). A launch the docs
#: define may be refused so there (docs/targets.md); it is counted by feature, not a finding.
DEVICE_LIMITS = {"opencl": (("cannot call through a function pointer", "function pointers chosen at run time"),)}


def device_limit(device: str, message: str) -> str | None:
    """The feature `device` lacks that gpuc's refusal `message` names, or None."""
    return next((what for text, what in DEVICE_LIMITS.get(device, ()) if text in message), None)


@dataclass
class Outcome:
    """What the docs say one launch does: `arrays` (with tolerance masks), or a required compile error."""
    arrays: list | None = None
    masks: list | None = None
    error: str | None = None


@dataclass
class Finding:
    kind: str
    case: progen.Case
    launch: int
    expected: str
    actual: str

    def describe(self) -> str:
        args = self.case.launches[self.launch]
        lines = [f"== {self.kind}: program {self.case.name} (seed {self.case.seed}, index {self.case.index}), "
                 f"launch {self.launch} ==", self.case.source.rstrip(), "-- arguments --"]
        params = _params(self.case.source)
        lines += [f"  {p} = {a.describe()}" for p, a in zip(params, args)]
        lines += ["-- expected --", self.expected, "-- actual --", self.actual, ""]
        return "\n".join(lines)


def bucket(finding: Finding) -> str:
    """A rough cause of a finding, for grouping: its kind and the first line of gpuc's message
    with locations, numbers and names blurred."""
    import re

    first = next((l for l in finding.actual.splitlines() if l.strip() and not l.startswith("gpuc compiled")), "")
    first = re.sub(r"^\S+\.py:\d+:\d+: ", "", first)
    first = re.sub(r"@\S+", "@_", first)  # LLVM symbols (name and mangled signature)
    first = re.sub(r"'[^']*'|\b[a-z]+\d+\b|\d+", "_", first)
    return f"{finding.kind}: {first[:100]}"


@dataclass
class Report:
    programs: int = 0
    launches: int = 0
    expected_errors: int = 0
    discarded: int = 0
    findings: list = field(default_factory=list)
    limits: Counter = field(default_factory=Counter)  # launches refused for what the device lacks, by feature

    def counts(self) -> Counter:
        return Counter(f.kind for f in self.findings)

    def summary(self) -> str:
        counts = self.counts()
        parts = ", ".join(f"{counts.get(k, 0)} {k}" for k in KINDS)
        limits = "".join(f"; {n} refused for lack of {what}" for what, n in sorted(self.limits.items()))
        return (f"{self.programs} programs, {self.launches} launches ({self.expected_errors} documented errors, "
                f"{self.discarded} undefined candidates regenerated): {parts}{limits}")


def _params(source: str):
    line = next(l for l in source.splitlines() if l.startswith("def kernel("))
    return [p.strip() for p in line[len("def kernel("):-2].split(",")]


# -- the reference ---------------------------------------------------------------------------

def predict(source: str, specs) -> Outcome:
    """The documented outcome of launching the kernel of `source` with `specs` (raises Undefined)."""
    program = Program(source)
    args, masks = build_args(specs)
    try:
        program.run(args, masks)
    except Expected as exc:
        return Outcome(error=str(exc))
    return Outcome(_bases(args), _bases(masks))


def _bases(arrays):
    return [a if a.base is None else a.base for a in arrays if isinstance(a, np.ndarray)]


def sample(seed: int, index: int, features=progen.FEATURES, attempts: int = 200):
    """Program `index` of stream `seed` whose every launch is defined, with its predicted outcomes,
    and how many undefined candidates were skipped."""
    for attempt in range(attempts):
        case = progen.generate(seed, index if attempt == 0 else f"{index}.{attempt}", features)
        case.index = index
        try:
            return case, [predict(case.source, specs) for specs in case.launches], attempt
        except (Undefined, RecursionError, MemoryError):
            continue
    raise RuntimeError(f"no defined program for {seed}:{index} in {attempts} attempts")


# -- judging ---------------------------------------------------------------------------------

def same(got: np.ndarray, want: np.ndarray, tolerance: np.ndarray):
    """Indices where `got` differs from `want`: exact (sign of zero included) where `tolerance` is 0,
    else within that relative tolerance (plus as much absolute, for results near zero)."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return [("shape/dtype", f"{got.dtype}{got.shape}", f"{want.dtype}{want.shape}")]
    if want.dtype.kind == "c":  # each part as a float, the tolerance relative to the complex magnitude
        bad = set()
        for part in ("real", "imag"):
            w = getattr(want, part)
            with np.errstate(all="ignore"):
                scale = (np.abs(want.astype(np.complex128)) + 1.0) / (np.abs(w.astype(np.float64)) + 1.0)
            scale = np.where(np.isfinite(scale), scale, 1.0)
            bad |= {idx for idx, _, _ in same(getattr(got, part), w, tolerance * scale)}
        return [(idx, got[idx].item(), want[idx].item()) for idx in sorted(bad)]
    if want.dtype.kind != "f":
        bad = got != want
    else:
        both_nan = np.isnan(got) & np.isnan(want)
        exact = (got == want) & (np.signbit(got) == np.signbit(want))
        with np.errstate(all="ignore"):
            error = np.abs(got.astype(np.float64) - want)
            close = (error <= tolerance * (np.abs(want.astype(np.float64)) + 1.0)) | (got == want)
        bad = ~(both_nan | np.where(tolerance > 0, close, exact))
    return [(tuple(int(i) for i in idx), got[idx].item(), want[idx].item()) for idx in zip(*np.nonzero(bad))]


def _values_differ(outcome: Outcome, arrays):
    diffs = []
    for k, (g, w, m) in enumerate(zip(arrays, outcome.arrays, outcome.masks)):
        for idx, gv, wv in same(g, w, m):
            diffs.append(f"  array argument {k}{list(idx)}: expected {wv!r}, got {gv!r}")
    return diffs


def judge(case: progen.Case, outcomes, results) -> list[Finding]:
    findings = []
    for k, (outcome, (kind, payload)) in enumerate(zip(outcomes, results)):
        want = f"compile error ({outcome.error})" if outcome.error else "values as below"
        if kind == "vectorize":  # the launch without vectorization across work items gave other arrays
            findings.append(Finding("vectorize mismatch", case, k, "the same arrays with and without vectorization",
                                    payload))
        elif kind in ("internal", "exception"):
            findings.append(Finding("internal error" if kind == "internal" else "exception", case, k, want, payload))
        elif outcome.error:
            if kind == "refused":
                continue
            findings.append(Finding("missed error", case, k, want, "gpuc compiled and ran it, arrays:\n"
                                    + "\n".join(f"  {a!r}" for a in payload)))
        elif kind == "refused":
            findings.append(Finding("unexpected refusal", case, k, "it compiles and runs", payload))
        else:
            diffs = _values_differ(outcome, payload)
            if diffs:
                findings.append(Finding("mismatch", case, k, "arrays:\n" + "\n".join(f"  {a!r}" for a in outcome.arrays),
                                        "differences:\n" + "\n".join(diffs[:20])))
    return findings


# -- running gpuc in worker processes ----------------------------------------------------------

def run_batch(programs, timeout: float, device: str = "cpu") -> dict:
    """{name: results | ("crash", message) | ("hang", message)} for [(name, source, launches)], launched
    on `device`."""
    out: dict = {}
    pending = list(programs)
    while pending:
        with tempfile.TemporaryDirectory(prefix="gpuc_fuzz_") as tmp:
            batch = Path(tmp) / "batch.pkl"
            batch.write_bytes(pickle.dumps(pending))
            begun, status = _run_worker(batch, Path(tmp), timeout, device)
            for name, _, _ in pending:
                result = Path(tmp) / f"{name}.pkl"
                if result.exists():
                    out[name] = pickle.loads(result.read_bytes())
        if begun is not None and begun not in out:
            out[begun] = (status[0], status[1])
        done = set(out)
        pending = [p for p in pending if p[0] not in done]
        if begun is None and pending:  # the worker died before it began a program
            for name, _, _ in pending:
                out[name] = ("crash", f"the worker failed to start: {status[1]}")
            break
    return out


def _run_worker(batch: Path, outdir: Path, timeout: float, device: str = "cpu"):
    gpuc_root = os.environ.get("GPUC_FUZZ_ROOT", str(ROOT))  # another checkout of gpuc to test
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([gpuc_root, str(TESTS)])}
    proc = subprocess.Popen([sys.executable, "-m", "support.fuzz_worker", str(batch), str(outdir), device],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=outdir)
    state = {"begun": None, "since": time.monotonic(), "ended": set()}

    def read():
        for line in proc.stdout:
            word, _, name = line.strip().partition(" ")
            if word == "BEGIN":
                state["begun"], state["since"] = name, time.monotonic()
            elif word == "END":
                state["ended"].add(name)
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    stderr_chunks = []
    err_reader = threading.Thread(target=lambda: stderr_chunks.append(proc.stderr.read()), daemon=True)
    err_reader.start()
    while proc.poll() is None:
        if state["begun"] not in state["ended"] and time.monotonic() - state["since"] > timeout:
            proc.kill()
            proc.wait()
            reader.join(5)
            return state["begun"], ("hang", f"no result after {timeout:.0f} s")
        time.sleep(0.05)
    reader.join(5)
    err_reader.join(5)
    begun = state["begun"] if state["begun"] not in state["ended"] else None
    stderr = "".join(stderr_chunks)[-3000:]
    if proc.returncode != 0:
        how = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit status {proc.returncode}"
        return begun, ("crash", f"the process ended with {how}:\n{stderr}")
    return begun, ("crash", f"the process ended early:\n{stderr}")


def run_programs(seed: int, count: int, workers: int = 2, timeout: float = 60.0, features=progen.FEATURES,
                 batch_size: int = 25, start: int = 0, device: str = "cpu") -> Report:
    report = Report()
    cases, outcomes = {}, {}
    for index in range(start, start + count):
        case, predicted, skipped = sample(seed, index, features)
        cases[case.name], outcomes[case.name] = case, predicted
        report.discarded += skipped
    report.programs = len(cases)
    report.launches = sum(len(c.launches) for c in cases.values())
    report.expected_errors = sum(1 for o in outcomes.values() for x in o if x.error)
    programs = [(c.name, c.source, c.launches) for c in cases.values()]
    batches = [programs[i:i + batch_size] for i in range(0, len(programs), batch_size)]
    results: dict = {}
    lock = threading.Lock()

    def work():
        while True:
            with lock:
                if not batches:
                    return
                batch = batches.pop(0)
            found = run_batch(batch, timeout, device)
            with lock:
                results.update(found)
    threads = [threading.Thread(target=work) for _ in range(max(1, workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name, case in cases.items():
        got = results.get(name, ("crash", "no result"))
        if isinstance(got, tuple) and got[0] in ("crash", "hang"):
            report.findings.append(Finding(got[0], case, 0, "the launches complete", got[1]))
        else:
            for f in judge(case, outcomes[name], got):
                limit = device_limit(device, f.actual) if f.kind == "unexpected refusal" else None
                if limit is None:
                    report.findings.append(f)
                else:
                    report.limits[limit] += 1
    return report


# -- minimizing ------------------------------------------------------------------------------

def minimize(finding: Finding, timeout: float = 60.0, device: str = "cpu") -> Finding:
    """The finding on a program with statements deleted (delta debugging) while a failure of the
    same kind remains on the same launch arguments."""
    specs = finding.case.launches[finding.launch]
    found: dict = {}

    def first_failing(sources):
        candidates = []
        for text in sources:
            try:
                candidates.append((text, predict(text, specs)))
            except (Undefined, SyntaxError, RecursionError, KeyError):
                continue
        named = [(f"m{k}", text, [specs]) for k, (text, _) in enumerate(candidates)]
        results = run_batch(named, timeout, device) if named else {}
        for (name, text, _), (_, outcome) in zip(named, candidates):
            case = progen.Case(finding.case.seed, finding.case.index, text, [specs])
            got = results.get(name, ("crash", "no result"))
            if got[0] in ("crash", "hang"):
                failures = [Finding(got[0], case, 0, "the launches complete", got[1])]
            else:
                failures = judge(case, [outcome], got)
            for f in failures:
                if f.kind == finding.kind:
                    found[text] = f
                    return text
        return None

    text = shrink(finding.case.source, first_failing)
    return found.get(text, finding)


def shrink(source: str, first_failing, rounds: int = 200) -> str:
    """Delta debugging over statements: `first_failing(sources)` returns the first of the candidate
    sources that still fails (or None); repeat from it until no single deletion fails."""
    for _ in range(rounds):
        smaller = first_failing(_deletions(source))
        if smaller is None:
            return source
        source = smaller
    return source


def _deletions(source: str):
    """Sources with one statement removed (bodies left empty get `pass`; at module level, helper
    functions and constants but not imports or the kernel), shortest first."""
    tree = ast.parse(source)
    spots = []
    for node in ast.walk(tree):
        for attr in ("body", "orelse"):
            body = getattr(node, attr, None)
            if isinstance(body, list):
                for i, stmt in enumerate(body):
                    if not isinstance(node, ast.Module) or not (
                            isinstance(stmt, (ast.Import, ast.ImportFrom))
                            or getattr(stmt, "name", None) == "kernel"):
                        spots.append((node, attr, i))
    texts = []
    for node, attr, i in spots:
        body = getattr(node, attr)
        removed = body[i]
        if isinstance(removed, ast.Expr) and isinstance(removed.value, ast.Constant):
            continue
        replacement = body[:i] + body[i + 1:]
        if not replacement and attr == "body" and not isinstance(node, ast.Module):
            replacement = [ast.Pass()]
        setattr(node, attr, replacement)
        texts.append(ast.unparse(tree) + "\n")
        setattr(node, attr, body)
    # unwrap compound statements too: an if/for/while replaced by its body
    for node, attr, i in spots:
        if isinstance(node, ast.Module):
            continue
        body = getattr(node, attr)
        inner = body[i]
        if isinstance(inner, (ast.If, ast.For, ast.While)) and not any(
                isinstance(n, (ast.Break, ast.Continue)) for n in ast.walk(inner)):
            setattr(node, attr, body[:i] + inner.body + body[i + 1:])
            texts.append(ast.unparse(tree) + "\n")
            setattr(node, attr, body)
    return sorted(set(texts), key=len)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--minimize", action="store_true")
    parser.add_argument("--without", nargs="*", default=[], help="features to switch off")
    parser.add_argument("--with", dest="extra", nargs="*", default=[], help="extra features to switch on")
    parser.add_argument("--out", type=Path, help="write every finding here")
    parser.add_argument("--gpuc", type=Path, help="test the gpuc package under this directory instead")
    parser.add_argument("--device", default="cpu", choices=("cpu", "opencl"),
                        help="launch the programs here (derivative and stencil programs run on the CPU only)")
    ns = parser.parse_args(argv)
    features = (set(progen.FEATURES) | set(ns.extra)) - set(ns.without)
    if ns.gpuc:
        os.environ["GPUC_FUZZ_ROOT"] = str(ns.gpuc.resolve())
    t0 = time.monotonic()
    report = run_programs(ns.seed, ns.count, ns.workers, ns.timeout, features, start=ns.start, device=ns.device)
    text = [f.describe() for f in report.findings]
    derivative_findings = []
    if ns.gpuc:  # derivative programs run in this process, against the gpuc it imports
        ns.without.append("derivatives")
    if ns.device != "cpu":
        ns.without += ["derivatives", "stencils"]
    if "derivatives" not in ns.without:  # derivative, jvp, grad, value_and_grad, vjp programs (support.derivatives)
        derivative_count = max(1, ns.count // 4)
        derivative_findings, _ = derivatives.run(ns.seed, derivative_count, ns.start)
        text += [f.describe() for f in derivative_findings]
    stencil_findings = []
    if "stencils" not in ns.without:  # clamped-neighbour stencils on several threads (support.stencils)
        from . import stencils
        stencil_count = max(1, ns.count // 4)
        stencil_findings = stencils.run(ns.seed, stencil_count, ns.start, ns.timeout)
        text += stencil_findings
    if ns.minimize:
        seen = set()
        for f in report.findings:  # one reproducer per rough cause
            key = bucket(f)
            if key in seen:
                continue
            seen.add(key)
            text.append("== minimized ==\n" + minimize(f, ns.timeout, ns.device).describe())
    if ns.out:
        ns.out.write_text("\n".join(text))
    else:
        print("\n".join(text))
    for key, n in Counter(bucket(f) for f in report.findings).most_common():
        print(f"{n:5d}  {key}")
    if "derivatives" not in ns.without:
        print(f"derivatives: {derivative_count} programs, {len(derivative_findings)} findings")
    if "stencils" not in ns.without:
        print(f"stencils: {stencil_count} programs, {len(stencil_findings)} findings")
    print(report.summary(), f"in {time.monotonic() - t0:.0f} s")
    return 1 if report.findings or derivative_findings or stencil_findings else 0


if __name__ == "__main__":
    sys.exit(main())
