"""Random programs inside the documented language, run by gpuc on the CPU and by a typed reference.

The generator (support.progen) writes kernels with helper funcs, branches that change variable
types, early returns, loops over range with negative and runtime steps over every integer type and
over arrays, tuples, enumerate and zip, while/break/continue, tuples (indexed at run time too),
augmented assignment, every scalar type as arrays and scalars, weak literals next to strong NumPy
values (some out of range), comparisons/min/max/conditional
expressions/and/or across types, strided arrays, math, and launches each kernel with several
argument types. The reference (support.reference) types each launch as docs/frontend.md says and
interprets it with wrapping integers, float32 rounding and Python's // % rules; integers and floats
must agree exactly (sign of zero included), transcendental math within a relative tolerance. A
documented compile error is accepted only where the docs require one. Each batch of programs runs
in its own process with a per-program timeout; hangs and crashes are blamed on their program. The
same programs run through OpenCL (the devices mark), where a refusal naming what SPIR-V lacks
(function pointers chosen at run time) is counted, not a finding.

CI runs a fixed sample; `pytest tests/fuzz --soak 5000` (or GPUC_SOAK=5000) runs a soak, and
`python -m support.fuzz --seed S --count N --minimize` (from tests/) prints minimized reproducers.
Soak results are recorded in tests/README.md.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
import signal
import warnings

import numpy as np
import pytest

from support import fuzz, progen
from support.emulate import emulate
from support.launches import ArgSpec, build_args
from support.numeric import Expected
from support.reference import Program

CI_SEED, CI_COUNT = 2026, 400
CI_DERIVATIVES = 200  # gpuc.derivative / jvp / grad / value_and_grad / vjp programs (support.derivatives)

# Constructs left out of the CI sample while gpuc cannot handle them yet, feature -> why (the soak keeps
# them).
PENDING: dict[str, str] = {}
CI_FEATURES = progen.FEATURES - set(PENDING)

HEADER = "import math\n\nimport numpy as np\n\nimport gpuc\n\n\n"


def reference(body: str, *args, params="out, a, b"):
    """Run a kernel with `body` in the reference; returns the first array argument afterwards."""
    lines = "\n".join("    " + line for line in body.strip().splitlines())
    program = Program(HEADER + f"@gpuc.kernel\ndef kernel({params}):\n{lines}\n")
    args = list(args)
    program.run(args)
    return args[0]


# -- the reference knows the documented rules ----------------------------------------------------

def test_reference_wraps_and_promotes():
    out = np.zeros(6, np.int64)
    reference("""
out[0] = a + 1
out[1] = (-7) // b
out[2] = (-7) % b
out[3] = True + True
out[4] = a * b
out[5] = gpuc.int32(a) + gpuc.int32(2147483647)
""", out, np.uint32(4294967295), 2)
    # uint32 + weak 1 wraps to 0; floor division and modulo follow Python; int32 wraps at 2**31
    assert out.tolist() == [0, -4, 1, 2, 2 * 4294967295, 2147483646]


def test_reference_float32_rounding_and_signed_zero():
    out = np.zeros(3, np.float32)
    reference("out[0] = a * a + b\nout[1] = (-0.0) % b\nout[2] = a / 3", out, np.float32(0.1), np.float32(5.0))
    x = np.float32(0.1)
    assert out[0] == x * x + np.float32(5.0) and out[1] == 0.0 and not np.signbit(out[1])
    assert out[2] == x / np.float32(3)


def test_reference_unifies_types_at_joins_as_numba():
    for b, want in ((0, 7.0), (1, 2.5)):
        out = np.zeros(2)
        reference("v = 7\nif b > 0:\n    v = 2.5\nout[0] = v\nout[1] = v / 2", out, 0.0, b)
        assert out[0] == want and out[1] == want / 2
    out = np.zeros(1)  # int64 and uint64 unify to float64, so the division is a float division
    reference("v = b\nif b > 0:\n    v = a\nout[0] = v // 2", out, np.uint64(2**64 - 1), 1)
    assert out[0] == float(2**64 - 1) // 2


def test_reference_type_conflict_after_if_without_else_is_an_error():
    with pytest.raises(Expected) as info:
        reference("v = 7\nif b > 0:\n    v = (2.5, 1)\nout[0] = v[0]", np.zeros(1), 0.0, 0)
    assert info.value.kind == "conflict"


def test_reference_literal_out_of_range():
    with pytest.raises(Expected) as info:
        reference("out[0] = a + -1", np.zeros(1), np.uint32(3), 0)
    assert info.value.kind == "literal"
    # a float takes any integer literal: x + 2**63 is a float64 sum
    assert reference("out[0] = a + 2**63", np.zeros(1), 1.0, 0)[0] == 1.0 + 2.0**63


def test_reference_bit_counts():
    out = reference("out[0] = gpuc.popc(a)\nout[1] = gpuc.clz(a)\nout[2] = gpuc.ffs(a)\nout[3] = gpuc.clz(0)\n"
                    "out[4] = gpuc.ffs(b) + gpuc.popc(b)", np.zeros(5, np.int64), np.int32(-8), np.uint64(0))
    # CUDA's semantics: the bits of a's two's complement; clz of the literal 0 (an int64) is 64; ffs(0) is 0
    assert out.tolist() == [29, 0, 4, 64, 0]
    for bad in ("gpuc.popc(2.5)", "gpuc.clz(a > 0)", "gpuc.ffs(2**63)"):
        with pytest.raises(Expected):
            reference(f"out[0] = {bad}", np.zeros(1, np.int64), np.int32(1), 0)


STORED_FLOATS = ["2.5", "-2.5", "-0.7", "0.999", "300.7", "-128.9", "255.5", "-1.5", "2147483647.5", "1e20", "-1e20",
                 "9223372036854775808.0", "1.8446744073709552e19", "math.nan", "math.inf", "-math.inf", "-0.0",
                 "(7.75 * -3.0)"]
STORE_DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "bool"]
ANNOTATED = {"int32", "uint32", "int64", "uint64", "bool"}  # the reference's annotations (not the small dtypes)


def numpy_stores(text, dtype):
    """What NumPy leaves in a zeroed array of four when a Python float goes to element 0 and view [1:3]
    (setitem) and, converted to the dtype (`np.int32(2.5)`), to element 3; None where NumPy raises."""
    want, value = np.zeros(4, dtype), eval(text, {"math": math})
    try:
        want[0] = want[1:3] = value
        if dtype in ANNOTATED:
            want[3] = np.dtype(dtype).type(value)
    except (ValueError, OverflowError):
        return None
    return want


def store_body(text, dtype, out="out", var="x"):
    """The kernel lines storing `text` as numpy_stores does: an element, a view, an annotated variable."""
    body = f"{out}[0] = {text}\n{out}[1:3] = {text}\n"
    if dtype in ANNOTATED:
        body += f"{var}: gpuc.{'bool_' if dtype == 'bool' else dtype} = {text}\n{out}[3] = {var}\n"
    return body


@pytest.mark.parametrize("dtype", STORE_DTYPES)
def test_reference_stores_float_literals_as_numpy_does(dtype):
    """A float literal stored into an integer (or bool) array, into an element or a view, or assigned to an
    annotated variable: NumPy's setitem (and conversion) truncates it toward zero, and raises where the result
    does not fit (NaN and infinities never do); the reference stores NumPy's value and calls the others
    documented errors."""
    for text in STORED_FLOATS:
        want = numpy_stores(text, dtype)
        try:
            got = reference(store_body(text, dtype), np.zeros(4, dtype), 0, 0)
        except Expected as exc:
            assert want is None and exc.kind == "literal", (text, dtype, want)
        else:
            assert want is not None and got.tolist() == want.tolist(), (text, dtype, got, want)


@pytest.mark.devices("cpu", "opencl")
def test_gpuc_stores_float_literals_as_numpy_does(gpuc_device):
    """gpuc against the reference (which the test above holds to NumPy): each literal into every dtype that
    takes it in one program, and into each dtype that does not in a program of its own (a compile error)."""
    programs, outcomes = [], {}
    for k, text in enumerate(STORED_FLOATS):
        taken = [d for d in STORE_DTYPES if numpy_stores(text, d) is not None]
        groups = [taken] + [[d] for d in STORE_DTYPES if d not in taken]
        for g, dtypes in enumerate(groups):
            params = ", ".join(f"o{j}" for j in range(len(dtypes)))
            body = "".join(store_body(text, d, f"o{j}", f"x{j}") for j, d in enumerate(dtypes))
            source = HEADER + f"@gpuc.kernel\ndef kernel({params}):\n" + "".join("    " + line + "\n"
                                                                               for line in body.splitlines())
            specs = [[ArgSpec("array", d, np.zeros(4, d)) for d in dtypes]]
            name = f"store{k}_{g}"
            programs.append((name, source, specs))
            outcomes[name] = (progen.Case(0, name, source, specs), [fuzz.predict(source, specs[0])])
    results = fuzz.run_batch(programs, timeout=60, device=gpuc_device)
    findings = [f for name, (case, want) in outcomes.items() for f in fuzz.judge(case, want, results[name])]
    assert not findings, "\n".join(f.describe() for f in findings[:5])


def test_reference_small_dtypes():
    # uint8 + uint8 wraps in uint8; with int8 it is int16; int8, uint8 and float16 meet in float16 (NumPy's
    # result_type, not pairwise); float16 arithmetic rounds each operation to float16
    out = reference("out[0] = a + a\nout[1] = a + b\nout[2] = max(a, b, c)\nout[3] = c * c + 1",
                    np.zeros(4), np.uint8(200), np.int8(-100), np.float16(0.1), params="out, a, b, c")
    h = np.float16(0.1)
    assert out.tolist() == [144.0, 100.0, 200.0, float(h * h + np.float16(1))]
    with pytest.raises(Expected) as info:
        reference("out[0] = a + 300", np.zeros(1), np.uint8(3), 0)
    assert info.value.kind == "literal"


def test_reference_unsigned_count_down_and_loop_carried_variable():
    out = reference("n = 0\nfor j in range(a, 0, -1):\n    n += j\nout[0] = n", np.zeros(1, np.int64),
                    np.uint32(3), 0)
    assert out[0] == 6
    out = reference("t = 0.0\nfor j in range(b):\n    if j > 0:\n        t += v\n    v = 2.5\nout[0] = t",
                    np.zeros(1), 0.0, 3)
    assert out[0] == 5.0


def test_reference_loops_over_sequences():
    out = reference("""
s = 0
for v in (1, 2.5):
    s += v
out[0] = s
for i, x in enumerate(a, 1):
    out[i] = x * i
for x, y in zip(a, (10, 20)):
    out[5] += x + y
t = (7, 8, 9)
out[6] = t[b]
out[7] = t[b - 10]
out[8] = t[b - 7]
""", np.zeros(9), np.array([1.0, 2.0, 3.0]), 5)
    # unrolled per element type; enumerate from its start; zip stops at the shortest; a run-time tuple
    # index wraps once from the end and is clamped beyond (docs: never an IndexError)
    assert out.tolist() == [3.5, 1.0, 4.0, 9.0, 0.0, 33.0, 9.0, 7.0, 8.0]
    out = reference("for row in c:\n    out[0] += row.sum() * 10 + row[-1]\n    out[1] = len(row)",
                    np.zeros(2), np.zeros(3), 5, np.arange(6.0).reshape(3, 2)[::-1], params="out, a, b, c")
    assert out.tolist() == [10 * 15.0 + 5 + 3 + 1, 2.0]  # the rows (views) in order: [4, 5], [2, 3], [0, 1]
    for body, kind in [("t = (1, 2.5)\nout[0] = t[b]", "tuple index"),
                       ("for i, v in enumerate(a, gpuc.uint64(1)):\n    pass", "enumerate start"),
                       ("for v in (1, 2.5):\n    if v > 2:\n        out[0] = w\n    w = v", "unassigned")]:
        with pytest.raises(Expected) as info:
            reference(body, np.zeros(1), np.zeros(3), 5, np.zeros((2, 2)), params="out, a, b, c")
        assert info.value.kind == kind, body


def test_reference_copies_into_views_and_reduces_them():
    out = np.arange(8.0)
    reference("""
out[1:4] = out[:3]
out[5:] = a[::-2]
out[0] = a[1:].sum() + a[::2].max() * 10
out[4:2:-1] = b
""", out, np.array([1, 5, 2, 7, 3, 4], np.int32), 0.5, params="out, a, b")
    # the overlapping copy reads its source first, as NumPy does
    assert out.tolist() == [21 + 30, 0.0, 1.0, 0.5, 0.5, 4.0, 7.0, 5.0]


def test_generator_writes_views():
    sources = "\n".join(progen.generate(4, k).source for k in range(150))
    assert re.search(r"\]\.(sum|max|min)\(\)", sources), "no reduction of a view"
    assert re.search(r"o\d\[[-\d:]+\] = o\d\[", sources), "no copy between views of one output"
    assert re.search(r"o\d\[[-\d:]+\] = a\d\[", sources), "no copy from an argument's view"


def test_generator_stores_float_literals_into_integer_outputs():
    stored = []
    for k in range(150):
        case = progen.generate(4, k)
        params = re.search(r"def kernel\((.*?)\)", case.source).group(1).split(", ")
        args, _ = build_args(case.launches[0])
        dtypes = {p: a.dtype for p, a in zip(params, args) if p.startswith("o")}
        for out, text in re.findall(r"^\s*(o\d+)\[-?\d+\] = (.*)$", case.source, re.M):
            try:
                value = eval(text, {"math": math})
            except Exception:  # noqa: BLE001 - not an expression of literals
                continue
            if isinstance(value, float) and np.issubdtype(dtypes[out], np.integer):
                stored.append((value, dtypes[out]))
    assert any(v < 0 and v != int(v) for v, _ in stored), "no negative fraction stored into an integer output"
    assert len(stored) > 10


def test_generator_writes_every_kind_of_loop():
    sources = "\n".join(progen.generate(4, k).source for k in range(150))
    for text in (" in enumerate(", " in zip(", ".shape:", "start=", " in (", "zip(range("):
        assert text in sources, text
    assert re.search(r"for \w+ in a\d:", sources), "no loop over an array"
    assert re.search(r"\[\(?\w+ % \d\]", sources), "no run-time tuple index"


POINTERS = HEADER + """
@gpuc.func
def h0(p0, p1):
    return p0 * 2 + p1


@gpuc.func
def h1(p0, p1):
    return p0 - p1


@gpuc.func
def r0(p0, p1) -> gpuc.float64:
    if p0 <= 0:
        return p1
    q = gpuc.deferred(r1, p0, p1)
    return q(p0 - 1, p1) + 1.0


@gpuc.func
def r1(p0, p1) -> gpuc.float64:
    if p0 <= 0:
        return p1 * 2.0
    q = gpuc.deferred(r0, (gpuc.int64, gpuc.float64))
    return q(p0 - 1, p1) * 3.0


@gpuc.func
def apply(fp, x):
    return fp(x, 1.5)


@gpuc.func
def choose(c):
    if c > 0:
        return gpuc.deferred(h0, (gpuc.float64, gpuc.float64))
    return gpuc.deferred(h1, (gpuc.float64, gpuc.float64))


def plain(p0, p1):
    return p0


@gpuc.kernel
def kernel(out, s, n):
    fp = gpuc.deferred(h0, s, 2.0) if n > 1 else gpuc.deferred(h1, (gpuc.float64, gpuc.float64))
    out[0] = fp(s, 0.5)
    out[1] = apply(fp, 3.0)
    out[2] = choose(n)(1.0, 2.0)
    out[3] = gpuc.deferred(r0, n, s)(n, s)
"""


def run_pointers(source, n):
    out = np.zeros(4)
    Program(source).run([out, np.float64(1.25), np.int64(n)])
    return out.tolist()


def test_reference_function_pointers():
    # a pointer is its function: chosen at run time, passed to and returned from funcs, and deferring
    # functions that defer each other (a cycle through annotated returns)
    assert run_pointers(POINTERS, 0) == [0.75, 1.5, -1.0, 1.25]
    assert run_pointers(POINTERS, 3) == [3.0, 7.5, 4.0, 11.5]


@pytest.mark.parametrize("change, kind", [
    ("gpuc.deferred(h1, (gpuc.float64, gpuc.float64))\n    out[0]", "conflict"),
    ("fp(s, 0.5)", "arity"),
    ("gpuc.deferred(r0, n, s)(n, s)", "deferred"),
])
def test_reference_function_pointer_errors(change, kind):
    # pointers of two signatures meeting at a join, a wrong argument count, deferring a Python function
    wrong = {"conflict": "gpuc.deferred(h1, (gpuc.float64, gpuc.float32))\n    out[0]", "arity": "fp(s)",
             "deferred": "gpuc.deferred(plain, n, s)(n, s)"}[kind]
    assert change in POINTERS
    with pytest.raises(Expected) as info:
        run_pointers(POINTERS.replace(change, wrong), 3)
    assert info.value.kind == kind


def test_generator_writes_every_kind_of_pointer_use():
    sources = "\n".join(progen.generate(3, k).source for k in range(150))
    for text in ("gpuc.deferred(h", "(gpuc.", "def r0_0(p0", ") -> gpuc.", "def choose", "def plain_helper",
                 "= gpuc.deferred(h0_0", " if ", "elif "):
        assert text in sources, text
    chains = [s for s in sources.split("import math") if "def h0_7(" in s]
    assert chains, "no chain of 8 deferred functions"
    programs = [progen.generate(3, k) for k in range(150)]
    assert sum("gpuc.deferred" in p.source for p in programs) > 30


def test_generated_pointer_programs_are_python(tmp_path):
    # under the emulation's shim (gpuc.deferred(f, ...) is f) a generated program runs as Python code:
    # pointers are called with the arguments their functions take (Python's own arithmetic may differ)
    allowed = (ArithmeticError, ValueError, UnboundLocalError, IndexError, _Slow)
    ran = 0
    previous = signal.signal(signal.SIGALRM, _slow)
    try:
        for k in range(60):
            case, outcomes, _ = fuzz.sample(31, k)
            if "gpuc.deferred" not in case.source:
                continue
            path = tmp_path / f"m{k}.py"
            path.write_text(case.source)
            spec = importlib.util.spec_from_file_location(f"pointer_program_{k}", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            for specs, outcome in zip(case.launches, outcomes):
                if outcome.error:
                    continue
                signal.alarm(2)
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        emulate(module.kernel, 1, *build_args(specs)[0])
                    ran += 1
                except allowed:
                    pass
                except TypeError as exc:  # NumPy refuses `-` on bools, which gpuc computes as int64
                    if "numpy boolean" not in str(exc) and "numpy.bool" not in str(exc):  # enumerate(.., start=b)
                        raise
                finally:
                    signal.alarm(0)
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert ran >= 3


class _Slow(Exception):
    pass


def _slow(*_):
    raise _Slow


# -- the harness ----------------------------------------------------------------------------

def test_judge_finds_wrong_values_and_signed_zeros():
    case = progen.Case(0, 0, HEADER + "@gpuc.kernel\ndef kernel(out):\n    out[0] = -0.0\n", [[]])
    want = fuzz.Outcome([np.array([-0.0, 1.0])], [np.zeros(2)])
    assert not fuzz.judge(case, [want], [("ok", [np.array([-0.0, 1.0])])])
    found = fuzz.judge(case, [want], [("ok", [np.array([0.0, 1.0])])])
    assert [f.kind for f in found] == ["mismatch"] and "array argument 0[0]" in found[0].actual
    error = fuzz.Outcome(error="conflict: v")
    assert [f.kind for f in fuzz.judge(case, [error], [("ok", [])])] == ["missed error"]
    assert [f.kind for f in fuzz.judge(case, [want], [("refused", "x")])] == ["unexpected refusal"]
    assert [f.kind for f in fuzz.judge(case, [want], [("internal", "x")])] == ["internal error"]


def test_hangs_and_crashes_are_blamed_on_their_program():
    good = HEADER + "@gpuc.kernel\ndef kernel(out):\n    out[0] = 7\n"
    spec = [[ArgSpec("array", "int64", np.zeros(2, np.int64))]]
    programs = [("g1", good, spec), ("hang", "while True:\n    pass\n", spec),
                ("g2", good, spec), ("crash", "import os\nos.abort()\n", spec), ("g3", good, spec)]
    results = fuzz.run_batch(programs, timeout=20)
    assert results["hang"][0] == "hang" and results["crash"][0] == "crash"
    for name in ("g1", "g2", "g3"):
        (kind, arrays), = results[name]
        assert kind == "ok" and arrays[0].tolist() == [7, 0]


def test_generator_is_deterministic_and_varied():
    a, b = progen.generate(5, 1), progen.generate(5, 1)
    assert a.source == b.source and len(a.launches) == len(b.launches)
    sources = {progen.generate(5, k).source for k in range(20)}
    assert len(sources) == 20


def test_shrink_deletes_what_the_failure_does_not_need():
    body = "v = 1\nw = v + 2\nif w > 1:\n    out[1] = w\n    out[2] = v\nout[0] = w\n"
    text = HEADER + "@gpuc.kernel\ndef kernel(out):\n" + "".join("    " + l + "\n" for l in body.splitlines())

    def first_failing(sources):  # the "failure": storing w to out[1]
        return next((s for s in sources if all(x in s for x in ("v = 1", "w = v + 2", "out[1] = w"))), None)
    small = fuzz.shrink(text, first_failing)
    kernel = small[small.index("def kernel"):]
    assert kernel.split() == "def kernel(out): v = 1 w = v + 2 out[1] = w".split()


# -- random programs ------------------------------------------------------------------------

def _check(report: fuzz.Report) -> None:
    print(report.summary())
    if report.findings:
        shown = "\n".join(f.describe() for f in report.findings[:10])
        pytest.fail(f"{report.summary()}\n\n{shown}", pytrace=False)


@pytest.mark.devices("cpu", "opencl")
def test_random_programs(gpuc_device):
    # Intel's OpenCL runtime builds some programs slowly: p2026_282 takes 13 s on a quiet 2-core Xeon (9 s of it
    # one long expression of shifts and wrapped indices, the rest a pow), past 60 s on a loaded one
    timeout = 180 if gpuc_device == "opencl" else 60
    _check(fuzz.run_programs(CI_SEED, CI_COUNT, workers=2, timeout=timeout, features=CI_FEATURES, device=gpuc_device))


@pytest.mark.devices("cpu", "opencl")
def test_soak(soak, gpuc_device):
    count, seed = soak
    _check(fuzz.run_programs(seed, count, workers=os.cpu_count() or 2, timeout=120, features=progen.FEATURES,
                             device=gpuc_device))


# -- derivatives, forward and reverse mode (support.derivatives): dual numbers are the reference ---

def test_dual_numbers_differentiate_what_the_generator_writes():
    from support.derivatives import Dual, dual_math
    x = Dual(0.7, 1.0, 1.0, 0.7)
    y = dual_math("sin", x * x) / (x * x + Dual.const(2.0))  # d/dx sin(x²)/(x²+2)
    want = (2 * 0.7 * math.cos(0.49) * 2.49 - math.sin(0.49) * 2 * 0.7) / 2.49 ** 2
    assert abs(y.d - want) < 1e-15 and y.m >= abs(y.d)
    for name, slope in (("exp", math.exp(0.7)), ("tanh", 1 - math.tanh(0.7) ** 2), ("log", 1 / 0.7),
                        ("sqrt", 0.5 / math.sqrt(0.7)), ("cos", -math.sin(0.7))):
        assert dual_math(name, x).d == slope


def test_derivative_checker_finds_wrong_values(tmp_path):
    from support import derivatives
    case = derivatives.generate(CI_SEED, 0)
    assert derivatives.check(case, tmp_path) is None
    value, magnitude = case.expected[0]
    case.expected[0] = (value + 1e-3 * max(abs(value), magnitude, 1.0), magnitude)
    finding = derivatives.check(case, tmp_path)
    assert finding is not None and finding.kind == "mismatch" and "out[0]" in finding.detail


def test_derivative_checker_finds_wrong_gradients(tmp_path):
    from support import derivatives
    # a grad entry against the reference, and against gpuc's own jvp with the unit tangent
    case = next(c for c in (derivatives.generate(CI_SEED, k) for k in range(60))
                if c.dtype is np.float64 and "jvp e1" in c.labels and "grad[1]" in c.labels
                and abs(c.expected[c.labels.index("grad[1]")][0]) > 0.1)
    k = case.labels.index("grad[1]")
    assert f"out[{k}] = g[1]\n" in case.source
    case.source = case.source.replace(f"out[{k}] = g[1]\n", f"out[{k}] = g[1] * 1.01\n")
    finding = derivatives.check(case, tmp_path)
    assert finding is not None and f"out[{k}] (grad[1]): got" in finding.detail
    assert f"out[{k}] (grad[1]) = " in finding.detail and "(jvp e1)" in finding.detail
    # the results of grad, value_and_grad and vjp called from Python
    case = next(c for c in (derivatives.generate(CI_SEED, k) for k in range(60)) if c.host and not c.arr)
    value, magnitude = case.host_expected[-1]
    case.host_expected[-1] = (value + 1e-3 * max(abs(value), magnitude, 1.0), magnitude)
    finding = derivatives.check(case, tmp_path)
    assert finding is not None and "from Python" in finding.detail


def test_derivative_checker_runs_the_block_kernel(tmp_path):
    from support import derivatives
    case = derivatives.generate(CI_SEED, 0)
    head, tail = case.source.split("def block_kernel(")
    assert "gpuc.barrier()" in tail and "out[1] = v\n" in tail and abs(case.expected[1][0]) > 0.1
    case.source = head + "def block_kernel(" + tail.replace("out[1] = v\n", "out[1] = v * 1.001\n", 1)
    finding = derivatives.check(case, tmp_path)
    assert finding is not None and "block_kernel[3, block=3, threads=1]: out[1]" in finding.detail
    assert "block_kernel[4, block=2, threads=2]: out[1]" in finding.detail


def test_derivative_generator_is_deterministic_and_varied():
    from support import derivatives
    cases = [derivatives.generate(CI_SEED, k) for k in range(100)]
    assert [c.source for c in cases] == [derivatives.generate(CI_SEED, k).source for k in range(100)]
    text = "".join(c.source for c in cases)
    for construct in ("d0, d1 = gpuc.derivative", "gpuc.jvp(f, (xs[0],), (ts[0],))", "if p", "def g0(", "math.", "arr[",
                      ", cs)\n", "g = gpuc.grad(f, ", "gpuc.grad(f, xs[0], xs[1], cs)", "gpuc.value_and_grad(f, ",
                      "gpuc.vjp(f, (xs[0],), ws[0])", "(ws[0], ws[1]))", "(es[0], es[1]", "return gpuc.grad(f, ",
                      "return gpuc.vjp(f, ", "n = int(es[2])", "for k in range(n):", "for j in range(", "while a",
                      "break\n", "continue\n", " *= ", " -= ", "min(max(", "gpuc.vjp(fq, ", "gpuc.float32(k)",
                      " % 2 == 0:", " % 3 == 0 or "):
        assert construct in text
    assert {c.dtype for c in cases} == {np.float32, np.float64}
    assert {0, 12} <= {c.n for c in cases}  # trip counts, 0 included


def test_derivative_checker_runs_the_trip_count(tmp_path):
    from support import derivatives
    # a loop program run for one iteration less than its reference disagrees with it
    case = next(c for c in (derivatives.generate(CI_SEED, k) for k in range(60))
                if c.n and c.n > 1 and c.dtype is np.float64 and "for k in range(n):" in c.source
                and not any(w in c.source for w in ("while", "min(", "max(")))
    assert derivatives.check(case, tmp_path) is None
    case.n -= 1
    finding = derivatives.check(case, tmp_path)
    assert finding is not None and finding.kind == "mismatch"


# -- nested derivatives (support.nested_derivatives): hyper-dual numbers are the reference -------

def test_hyper_duals_give_second_derivatives():
    from support.derivatives import Dual, dual_math
    from support.nested_derivatives import Hyper
    # f(x, y) = sin(x·y) / (x² + 2), x moving in ε1 and y in ε2: ab is ∂²f/∂x∂y
    x0, y0 = 0.7, -1.3
    x, y = Hyper(x0, 1.0, 0.0, 0.0, x0, 1.0, 0.0, 0.0), Hyper(y0, 0.0, 1.0, 0.0, -y0, 0.0, 1.0, 0.0)
    h = (x * y).math("sin") / (x * x + Hyper.const(2.0))
    s, c, u = math.sin(x0 * y0), math.cos(x0 * y0), x0 * x0 + 2.0
    assert abs(h.a - (y0 * c / u - 2 * x0 * s / u ** 2)) < 1e-15 and abs(h.b - x0 * c / u) < 1e-15
    assert abs(h.ab - ((c - x0 * y0 * s) / u - 2 * x0 * x0 * c / u ** 2)) < 1e-15
    assert all(m >= abs(v) for v, m in ((h.v, h.vm), (h.a, h.am), (h.b, h.bm), (h.ab, h.abm)))
    # each function's second derivative against central differences of its first (Dual's rules)
    for name in ("sin", "cos", "exp", "tanh", "sqrt", "log"):
        v, e = 0.7, 1e-5
        second = Hyper(v, 1.0, 1.0, 0.0, v, 1.0, 1.0, 0.0).math(name).ab
        slope = [dual_math(name, Dual(w, 1.0, 1.0, w)).d for w in (v - e, v + e)]
        assert abs(second - (slope[1] - slope[0]) / (2 * e)) < 1e-8 * max(1.0, abs(second)), name
    # tanh's slope is computed as 1 - tanh², whose terms cancel: float32 makes it 0 at 12, where it is 1.5e-10
    big = Hyper(12.0, 1.0, 1.0, 0.0, 12.0, 1.0, 1.0, 0.0).math("tanh")
    assert big.am >= 1.0 and big.abm >= 1.0


def test_nested_derivatives_extend_the_programs(monkeypatch):
    from support import derivatives, nested_derivatives
    cases = [derivatives.generate(CI_SEED, k) for k in range(CI_DERIVATIVES)]
    nested = [c for c in cases if c.nested is not None]
    assert 0.1 * len(cases) < len(nested) < 0.35 * len(cases)
    # drawn from a stream of their own: without them, each program is the one the seed gave before
    monkeypatch.setattr(nested_derivatives, "NESTED", 0.0)
    for c in nested[:10]:
        assert c.nested.prefix == derivatives.generate(CI_SEED, c.index).source + "\n\n"
        assert c.source.startswith(c.nested.prefix)
    outers = [o for c in nested for o in c.nested.outers]
    pairs = {(o.form, i.form) for o in outers if o.target for i in o.target.inners}
    assert pairs == {(o, i) for o in nested_derivatives.FORMS for i in nested_derivatives.FORMS}  # every form over every
    text = "".join(c.source[len(c.nested.prefix):] for c in nested)
    for construct in ("def h2(", "int(q)", "gpuc.jvp(fq, ", "gpuc.vjp(fq, ", "float(n)", "gpuc.float32(n)",
                      "es[2]), (ts[0]", "gr1 = gpuc.grad(f, x[0]", "= gpuc.vjp(h", "(ws[0], ws[1]))", "return (",
                      "def nested_host("):
        assert construct in text, construct
    assert any(o.target is None and c.npos is not None for c in nested for o in c.nested.outers)  # a tape beside
    assert any(h.nret == 2 for c in nested for h in c.nested.hs)
    assert {c.dtype for c in nested} == {np.float32, np.float64} and any(c.npos is not None for c in nested)


def test_nested_checker_finds_wrong_values(tmp_path):
    from support import derivatives
    def case():
        return next(c for c in (derivatives.generate(CI_SEED, k) for k in range(60))
                    if c.nested and c.dtype is np.float64 and c.npos is None and len(c.nested.rows[0]) > 1
                    and any(abs(v) > 0.1 for o in c.nested.outers for v, _ in o.want[1]))
    assert derivatives.check(case(), tmp_path) is None
    # against the reference, on the second work item
    c = case()
    outer, k = next((o, k) for o in c.nested.outers for k, (v, _) in enumerate(o.want[1]) if abs(v) > 0.1)
    value, magnitude = outer.want[1][k]
    outer.want[1][k] = (value * (1 + 1e-6), magnitude)
    finding = derivatives.check(c, tmp_path)
    assert finding is not None and "nested out[1, " in finding.detail and "expected" in finding.detail
    # against the same calls made from Python
    c = case()
    kernel, host = c.source.split("def nested_host(")
    c.source = kernel + "def nested_host(" + host.replace("    o[0] = ", "    o[0] = (1 + 1e-9) * ", 1)
    finding = derivatives.check(c, tmp_path)
    assert finding is not None and "from Python" in finding.detail


# Through OpenCL a kernel's gradient of a loop keeps its tape in a fixed buffer per work item (SPIR-V has no
# allocator), which the programs' loops fit: they are checked. A refusal for a heap (a recursive func's
# tape) would be counted, not checked; the generator writes none.
@pytest.mark.devices("cpu", "opencl")
def test_random_derivatives(gpuc_device):
    from collections import Counter
    from support import derivatives
    if "derivatives" in PENDING:
        pytest.skip(PENDING["derivatives"])
    tally = Counter()
    findings, count = derivatives.run(CI_SEED, CI_DERIVATIVES, tally=tally, device=gpuc_device)
    assert not findings, "\n".join(f.describe() for f in findings[:5])
    refused = sum(n for what, n in tally.items() if what.startswith("a heap"))
    assert refused == 0, tally
