"""Random adjoint kernels (support.adjoints): the shadows after `gpuc.adjoint(kernel).launch(...)` against
finite differences of the loss, several threads against one, the primal's effects against a plain launch.

CI runs a fixed sample; `pytest tests/fuzz --soak N` (or GPUC_SOAK=N) runs N // 4 adjoint programs too,
and `python -m support.adjoints --seed S --count N [--minimize]` (from tests/) prints reproducers. Soak
results are recorded in tests/README.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from support import adjoints

CI_SEED, CI_COUNT = 2026, 40
TESTS = Path(__file__).resolve().parents[1]

STENCIL = """import math

import gpuc


@gpuc.kernel
def kernel(x, y, c):
    i = gpuc.index()
    n = x.shape[0]
    t = x[i] * c
    if i > 0 and i < n - 1:
        t = t + x[i - 1] * x[i + 1]
    if t > 0.5:
        y[i] = math.sin(t) * t
    else:
        y[i] += t ** 3
"""


def _stencil_case(x, y, seed_x, seed_y, c=0.75):
    params = [adjoints.Arr("x", "in", x.shape), adjoints.Arr("y", "out", y.shape), adjoints.Arr("c", "c")]
    case = adjoints.Case(0, 0, STENCIL, np.float64, x.size, params, {"x": x, "y": y, "c": np.float64(c)},
                         {"x": seed_x, "y": seed_y})
    return case


def _by_hand(x, seed_x, seed_y, c=0.75):
    """dL/dx and dL/dy of the stencil kernel, L = seed_x · x + seed_y · y_after."""
    n = x.size
    gx, gy = seed_x.copy(), np.zeros(n)
    for i in range(n):
        inner = 0 < i < n - 1
        t = x[i] * c + (x[i - 1] * x[i + 1] if inner else 0.0)
        dt = {i: c, i - 1: x[i + 1], i + 1: x[i - 1]} if inner else {i: c}
        if t > 0.5:
            slope = np.cos(t) * t + np.sin(t)
        else:
            slope = 3 * t * t
            gy[i] = seed_y[i]  # y[i] += ...: the old value passes through
        for k, d in dt.items():
            gx[k] += seed_y[i] * slope * d
    return gx, gy


def test_differences_and_adjoint_agree_with_a_gradient_by_hand(tmp_path):
    rng = np.random.default_rng(4)
    x, y = rng.uniform(-1, 1.5, 12), rng.uniform(-1, 1, 12)
    seed_x, seed_y = rng.standard_normal(12), rng.standard_normal(12)
    case = _stencil_case(x, y, seed_x, seed_y)
    case.python = adjoints.probe(case.source, case)
    gx, gy = _by_hand(x, seed_x, seed_y)
    run = adjoints.execute(case, tmp_path)
    assert run.error is None, run.error
    np.testing.assert_allclose(run.fd["x"], gx, rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(run.fd["y"], gy, rtol=1e-8, atol=1e-9)
    assert adjoints.judge(case, run) == []
    np.testing.assert_allclose(run.adjoint[1][1]["x"], gx, rtol=1e-12, atol=1e-14)


def test_probe_refuses_ties_and_overflow():
    x = np.full(12, 0.5 / 0.75 + 1e-5)  # x[0] * c is within the margin of 0.5
    case = _stencil_case(x, np.zeros(12), np.zeros(12), np.ones(12))
    with pytest.raises(adjoints.Undefined, match="tie"):
        adjoints.probe(case.source, case)
    for text, why in (("min(x[i], x[i] + 1e-5)", "min"), ("abs(x[i] - x[i])", "abs"),
                      ("math.exp(x[i] * 1000.0)", "Overflow"), ("x[i] * int(x[i] * 2.0 + 0.19999)", "integer")):
        source = STENCIL.replace("t = x[i] * c\n", f"t = {text}\n")
        case = _stencil_case(np.full(12, 0.9), np.zeros(12), np.zeros(12), np.ones(12))
        with pytest.raises(adjoints.Undefined, match=why):
            adjoints.probe(source, case)


def test_judge_finds_wrong_shadows_schedules_and_primals(tmp_path):
    case = next(c for c in (adjoints.generate(CI_SEED, k) for k in range(40)) if c.dtype is np.float64)
    run = adjoints.execute(case, tmp_path)
    assert adjoints.judge(case, run) == []
    name = next(p.name for p in case.params if p.role == "in")
    scale = max(float(np.abs(g).max()) for g in run.fd.values())
    shadow = run.adjoint[1][1][name]
    shadow.flat[0] += 1e-4 * scale
    found = adjoints.judge(case, run)
    assert any(f.kind == "gradient" and f.array == name for f in found)
    assert any(f.kind == "schedule" and f.array == name for f in found)  # 2 and 3 threads now differ from 1
    shadow.flat[0] -= 1e-4 * scale
    run.adjoint[3][1][name].flat[-1] *= 1 + 1e-9
    run.adjoint[3][1][name].flat[-1] += 1e-9 * scale
    assert [(f.kind, f.array) for f in adjoints.judge(case, run)] == [("schedule", name)]
    run = adjoints.execute(case, tmp_path, "_again")
    out = case.arrays()[-1].name
    run.adjoint[1][0][out].flat[0] = np.nextafter(run.adjoint[1][0][out].flat[0], np.inf)
    # (the one-thread adjoint is also compared with the one without vectorization: both see it)
    assert [(f.kind, f.array) for f in adjoints.judge(case, run)] == [("vectorize", out), ("primal", out)]


def test_generator_is_deterministic_and_varied():
    cases = [adjoints.generate(CI_SEED, k) for k in range(200)]
    assert [c.source for c in cases[:30]] == [adjoints.generate(CI_SEED, k).source for k in range(30)]
    text = "".join(c.source for c in cases)
    for construct in ("i = gpuc.index()", "i, j = gpuc.index(0), gpuc.index(1)", "j, i = gpuc.index(0)", "if i > 0",
                      "[i - 1]", "[i + 1]", "[i - 2]", "[idx[i]]", "[n - 1 - i]", "% ", "for k", "in range(steps[i])",
                      "range(steps[i], 0, -1)", "range(int(", "while ", "break", "continue", "    return\n",
                      "gpuc.atomic_add(", "gpuc.atomic_sub(", "u[i] *=", "+= ", "math.exp(", "math.sqrt(",
                      "math.tanh(", "min(", "max(", "abs(", " ** ", " if ", "elif ", " or ", "@gpuc.func",
                      "def h0(a, k", "range(count)", "d - 1)", ", t", "if i >= n:", "[i, j + 1]"):
        assert construct in text, construct
    assert {c.dtype for c in cases} == {np.float32, np.float64}
    assert {v.dtype for c in cases for v in c.values.values() if isinstance(v, np.ndarray) and v.dtype.kind == "i"} \
        == {np.dtype(np.int32), np.dtype(np.int64)}
    assert {p.layout for c in cases for p in c.params} == {"C", "step2", "F", "cols"}
    assert any(any(p.role == "idx" for p in c.params) and len(set(c.values["idx"].flat)) < c.values["idx"].size
               for c in cases)  # gathers with repeats
    features = set().union(*(c.features for c in cases))
    assert {"nested loop", "return in a loop", "helper (recursive)", "helper (pair)", "transposed read",
            "mirrored write", "strided", "reads along the item's row", "reads along the item's column",
            "launch over a dimension the kernel does not read"} <= features
    assert any(isinstance(c.launch, tuple) and not ("i, j = gpuc.index(0)" in c.source or "j, i =" in c.source)
               for c in cases)  # a 1-D program over (n, 2) or (n, 3)


def test_reproducer_script_runs(tmp_path):
    case = next(c for c in (adjoints.generate(CI_SEED, k) for k in range(60))
                if any(p.layout != "C" for p in c.params))
    path = tmp_path / "reproducer.py"
    path.write_text(adjoints.script(case))
    again = adjoints.from_script(path.read_text())  # what --replay reads
    assert again.source == case.source and again.launch == case.launch and again.dtype is case.dtype
    assert [(p.name, p.shape, p.layout) for p in again.params] == [(p.name, p.shape, p.layout) for p in case.params]
    for name, v in case.values.items():
        assert np.array_equal(again.values[name], v) and again.values[name].dtype == np.asarray(v).dtype
    assert all(np.array_equal(again.seeds[name], v) for name, v in case.seeds.items())
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)])}
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    run = adjoints.execute(case, tmp_path)
    printed = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    for p in case.arrays():
        assert np.array_equal(np.array(eval(printed["d" + p.name]), case.dtype), run.adjoint[1][1][p.name])


def test_a_crash_is_blamed_on_its_program(tmp_path):
    case = adjoints.generate(CI_SEED, 0)
    text = adjoints.script(case).replace("import numpy as np\n", "import numpy as np\nimport os\nos.abort()\n", 1)
    with adjoints.Worker(tmp_path, timeout=120) as worker:
        (finding,), _ = worker.findings(case, {"script": text})
        assert finding.kind == "crash" and "signal" in finding.detail
        assert worker.findings(case, {"seed": CI_SEED, "index": 0})[0] == []  # a fresh process goes on
        assert worker.starts == 2


# A nested conditional expression choosing between array elements and a local, then a loop: the minimized
# program of the soak finding of seed 2031 in tests/README.md (a reverse sweep that was not valid IR,
# "Instruction does not dominate all uses!", or a crash in LLVM's optimizer on it).
NESTED_CONDITIONAL = """import numpy as np
import gpuc


@gpuc.kernel
def kernel(x, t, y):
    i = gpuc.index()
    v = x[i]
    y[i] += (t[0] if t[1] > v else v) if v < 0.4 else v
    while v < 0.5:
        v += 0.5


x, t = np.linspace(-1.0, 1.0, 8), np.array([0.3, 0.4, 0.5])
dx, dt = np.zeros(8), np.zeros(3)
gpuc.adjoint(kernel).launch(8, x, dx, t, dt, np.zeros(8), np.ones(8), threads=1)
print(dx.tolist())
print(dt.tolist())
"""


def test_nested_conditional_expression_before_a_loop(tmp_path):
    # in a process of its own: a crash in LLVM must not take the test run with it
    path = tmp_path / "nested_conditional.py"
    path.write_text(NESTED_CONDITIONAL)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)])}
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    dx, dt = map(eval, proc.stdout.strip().splitlines())
    x = np.linspace(-1.0, 1.0, 8)
    assert dx == [0.0 if v < 0.4 else 1.0 for v in x]  # below 0.4 (so below t[1]) y[i] gets t[0], else v
    assert dt == [float(np.sum(x < 0.4)), 0.0, 0.0]


def test_random_adjoints(tmp_path):
    report = adjoints.run(CI_SEED, CI_COUNT, workdir=tmp_path)
    print(report.summary())
    assert report.programs == CI_COUNT and len(report.rough) <= 2
    assert not report.findings, "\n".join(f.describe() for f in report.findings[:3])


def test_soak(soak, tmp_path):
    count, seed = soak
    report = adjoints.run(seed, max(1, count // 4), workdir=tmp_path)
    print(report.summary())
    assert not report.findings, "\n".join(f.describe() for f in report.findings[:5])
