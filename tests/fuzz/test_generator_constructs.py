"""The random-program generator emits the newer constructs, and the reference states their rules:
augmented assignment to views (NumPy's in-place ufunc, 'same_kind' failures as compile errors), the
reductions `np.sum/prod/max/amax/min/amin/mean` and the methods (float sums NumPy's bit for bit),
`math.log(x, base)` (CPython's value), Python's `pow`, `divmod`, `sum` and `round`, and stencils with
clamped neighbour indices (support.stencils)."""

from __future__ import annotations

import ast
import math
import re

import numpy as np
import pytest

from support import fuzz, progen, stencils
from support.numeric import Expected
from support.reference import Program
from support.views import is_view

SEED, COUNT = 2026, 120
HEADER = "import math\n\nimport numpy as np\n\nimport gpuc\n\n\n"


@pytest.fixture(scope="module")
def sampled():
    """The first programs of the CI stream, with their predicted outcomes."""
    return [fuzz.sample(SEED, k)[:2] for k in range(COUNT)]


def run(body: str, *args, params="out, a, b"):
    lines = "\n".join("    " + line for line in body.strip().splitlines())
    Program(HEADER + f"@gpuc.kernel\ndef kernel({params}):\n{lines}\n").run(list(args))
    return args


def _view_augmentations(source: str):
    return [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.AugAssign)
            and isinstance(n.target, ast.Subscript) and (is_view(n.target) or ast.unparse(n.target).count(",") == 0
                                                         and ast.unparse(n.target).startswith("a"))]


def _base(node):
    while isinstance(node, ast.Subscript):
        node = node.value
    return ast.unparse(node)


def test_view_augmented_assignments_are_generated_valid_and_refused(sampled):
    found = [n for case, _ in sampled for n in _view_augmentations(case.source)]
    assert len(found) >= 20
    ops = {type(n.op).__name__ for n in found}
    assert {"Add", "Sub", "Mult", "FloorDiv"} <= ops and ops & {"BitAnd", "BitOr", "BitXor"}
    texts = [ast.unparse(n) for n in found]
    assert any(isinstance(n.value, ast.Subscript) and _base(n.value) == _base(n.target) for n in found)  # overlapping
    assert any(re.search(r"= a\d\[", t) for t in texts)                          # array operands
    errors = [o.error for _, outs in sampled for o in outs if o.error]
    assert any(e.startswith("in place") for e in errors)                         # 'same_kind' refusals


def test_the_reference_runs_numpys_in_place_ufunc_on_overlapping_views():
    x = np.arange(8.0) * 1.5 - 2
    y = np.arange(5, dtype=np.uint8) * 60
    want_x, want_y = x.copy(), y.copy()
    want_x[1:] += want_x[:-1]
    want_x[::-2] *= want_x[::2]
    want_y[:] += 200
    run("a[1:] += a[:-1]\na[::-2] *= a[::2]\nb[:] += 200", np.zeros(1), x, y)
    assert x.tolist() == want_x.tolist() and y.tolist() == want_y.tolist()
    with pytest.raises(Expected, match="in place"):
        run("b[1:] += 1.5", np.zeros(1), x, y)
    with pytest.raises(Expected, match="literal"):
        run("b[1:] += 300", np.zeros(1), x, y)


def test_numpy_reduction_functions_and_float_sums_are_generated(sampled):
    sources = "\n".join(case.source for case, _ in sampled)
    for name in ("sum", "prod", "max", "amax", "min", "amin", "mean"):
        assert re.search(rf"np\.{name}\(", sources), name
    assert re.search(r"\.(mean|prod)\(\)", sources)
    kernels = [case for case, _ in sampled if re.search(r"\.sum\(\)|np\.sum\(", case.source)]
    float_sums = [c for c in kernels if any(s.kind == "array" and s.dtype.startswith("float") for s in c.launches[0])]
    assert float_sums


def test_the_reference_sums_floats_in_numpys_order():
    a = np.random.default_rng(3).random(1000).astype(np.float32) * 1e3
    out = np.zeros(4, np.float32)
    run("out[0] = a.sum()\nout[1] = np.sum(a[::-3])\nout[2] = np.mean(a[1:])\nout[3] = a[::2].prod()",
        out, a, np.zeros(1))
    with np.errstate(over="ignore"):
        assert out.tolist() == [a.sum(), a[::-3].sum(), a[1:].mean(), a[::2].prod()]
    naive = np.float32(0)
    for v in a:
        naive += v
    assert naive != a.sum()  # so the check above tells NumPy's order from a plain loop


def test_math_log_with_a_base_is_generated_and_folded_with_pythons_value(sampled):
    assert sum("math.log(" in case.source and re.search(r"math\.log\([^()]*, ", case.source) is not None
               for case, _ in sampled) >= 1
    out = np.zeros(3)
    run("out[0] = math.log(0.5, 2.5)\nout[1] = math.log(a[0], 10)\nout[2] = math.log(a[1], a[2])",
        out, np.array([1000.0, 8.0, 2.0]), np.zeros(1))
    assert out[0] == math.log(0.5, 2.5)
    assert out[1:].tolist() == pytest.approx([math.log(1000.0, 10), math.log(8.0, 2.0)], rel=1e-15)


def test_pythons_pow_divmod_sum_and_round_are_generated_and_refused(sampled):
    sources = "\n".join(case.source for case, _ in sampled)
    for form in (r"(?<![\w.])pow\(", r"divmod\([^\n]*\)\[-?\d\]", r"\w+, \w+ = divmod\(", r"(?<![\w.])sum\(\(",
                 r"(?<![\w.])sum\(\w+\.shape", r"(?<![\w.])round\(", r"= pow\("):
        assert re.search(form, sources), form
    errors = {o.error.split(":")[0] for _, outs in sampled for o in outs if o.error}
    assert errors & {"round ndigits", "pow modulus", "sum of an array", "negative power"}


def test_the_reference_gives_pythons_builtins_the_documented_values():
    out = np.zeros(8)
    run("q, r = divmod(a[0], a[1])\nout[0] = q\nout[1] = r\nout[2] = round(a[2])\nout[3] = round(a[3])\n"
        "out[4] = round(a[4])\nout[5] = sum((a[5],))\nout[6] = pow(a[0], 2)\nout[7] = divmod(a[0], 0.0)[1]",
        out, np.array([7.5, -2.0, 2.5, math.nan, -math.inf, -0.0]), np.zeros(1))
    assert out[:6].tolist() == [-4.0, -0.5, 2.0, 0.0, -2.0**63, 0.0] and not np.signbit(out[5])
    assert out[6] == 56.25 and math.isnan(out[7])
    ints = np.zeros(6, np.int64)  # by 0: 0 and 0 (NumPy); a negative run-time power: 1
    run("ints[0], ints[1] = divmod(a[0], b)\nints[2] = sum((a[0], a[1]), 5)\nints[3] = pow(a[1], a[0])\n"
        "ints[4] = round(a[0])\nints[5] = divmod(-7, 2)[0]", ints, np.array([-7, 3], np.int32), np.uint32(0),
        params="ints, a, b")
    assert ints.tolist() == [0, 0, 1, 1, -7, -4]
    small = np.zeros(2, np.float32)
    run("out[0] = a + pow(2, 3)\nout[1] = sum((a, a), 0.1)", small, np.float32(0.1), 0, params="out, a, b")
    assert small.tolist() == [np.float32(0.1) + np.float32(8), np.float32(0.1) * 2 + np.float32(0.1)]
    for bad, kind in (("round(a, 2)", "round ndigits"), ("pow(b, 2, 5)", "pow modulus"),
                      ("sum(out)", "sum of an array"), ("pow(b, -1)", "negative power")):
        with pytest.raises(Expected) as info:
            run(f"out[0] = {bad}", np.zeros(1), 1.5, 3)
        assert info.value.kind == kind


def test_stencils_are_generated_with_every_clamp_form():
    programs = [stencils.generate(SEED, k) for k in range(60)]
    sources = "\n".join(s for s, _ in programs)
    for form in (r"min\(max\([^()]*, 0\), n - 1\)", r"max\(min\(", r"min\(max\(min\(max\(", r"gpuc\.index\(1\)",
                 r"min\(max\(\w+ [+-] \d, lo\), hi\)", r"\n +if .*:\n +acc", r"for d\d+ in range"):
        assert re.search(form, sources), form
    launches = [l for _, ls in programs for l in ls]
    assert any(l.threads > 1 for l in launches)
    assert any(isinstance(l.grid, tuple) and l.threads > 1 and l.grid[0] * l.grid[1] % l.threads for l in launches)
    assert any(l[2].value > l[3].value for l in launches)  # lo > hi


def test_a_few_stencils_equal_python():
    assert stencils.run(SEED, 6) == []


def test_a_function_refused_in_a_loops_first_round_is_refused_when_typed_again():
    # seed 2305 (OpenCL), program 304: r(uint64) failed to type in a loop's first round, and later rounds read
    # its annotation as if a pointer cycle were typing it, so the reference expected the program to compile
    source = HEADER + '''@gpuc.func
def r(p) -> gpuc.float64:
    if p <= 0:
        return 0
    fp = gpuc.deferred(r, p)
    v = fp(p - 1)
    for j in range(2):
        j <<= (p & 63)
    return v


@gpuc.kernel
def kernel(out, n):
    k = 0
    while k < 2:
        k += 1
        fp = gpuc.deferred(r, n)
'''
    Program(source).run([np.zeros(1), np.int64(1)])
    with pytest.raises(Expected, match="bitwise float"):
        Program(source).run([np.zeros(1), np.uint64(1)])
