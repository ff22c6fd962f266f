"""NumPy's functions on scalars in kernels, against NumPy on NumPy scalars: result types, values, special values,
weak literals, errors, and compiles for the GPU targets."""

from __future__ import annotations

import importlib.util
import itertools
import math
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import gpuc
from gpuc.frontend.constructs import numpy_math
from gpuc.frontend.numeric import mathlib
from gpuc.frontend.passes.inference import Typing
from support.located_errors import check
from support.native import native

ROOT = Path(__file__).resolve().parents[2]
# The tests that launch kernels run natively and through OpenCL.
ON_DEVICES = pytest.mark.devices("cpu", "opencl")
TYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "int64", "uint32", "uint64", "float16", "float32",
         "float64"]
NP = {t: np.dtype(t).type for t in TYPES}

UNARY = ["sqrt", "cbrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "arcsin",
         "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "deg2rad", "rad2deg", "degrees",
         "radians", "absolute", "fabs", "sign", "square", "reciprocal", "negative", "positive", "floor", "ceil",
         "trunc", "rint", "round", "isnan", "isinf", "isfinite", "signbit", "logical_not"]
BINARY = ["hypot", "arctan2", "copysign", "power", "float_power", "fmod", "remainder", "floor_divide", "maximum",
          "minimum", "fmax", "fmin", "add", "subtract", "multiply", "divide", "logaddexp", "logaddexp2", "heaviside",
          "logical_and", "logical_or", "logical_xor"]
# Results of the math library (NumPy's own, gpuc's the target's): within a few ulp. Everything else is exact.
TRANSCENDENTAL = {"cbrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "arcsin",
                  "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "hypot", "arctan2",
                  "power", "float_power", "logaddexp", "logaddexp2"}
ULPS = 4

FLOATS = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 1.5, 2.5, -2.5, 3.0, 0.1, -7.25, 10.0, 100.0, 88.5, 709.5, 1e-300, 1e-40,
          1e300, math.inf, -math.inf, math.nan]
FLOATS2 = [0.0, -0.0, 1.5, -2.5, 3.0, 1e300, math.inf, -math.inf, math.nan]
INTS = [0, 1, -1, 2, 3, 5, -7, 100, 2**31 - 1, -2**31, 2**32 - 1, 2**53 + 1, 2**63 - 1, -2**63, 2**64 - 1]
INTS2 = [0, 1, -1, 2, 3, -7, 2**31 - 1, -2**31, 2**63 - 1, -2**63, 2**64 - 1]


def values(t: str, pairs: bool = False) -> np.ndarray:
    """Special and ordinary values of type `t` (those of FLOATS that overflow float32 become inf)."""
    if t == "bool":
        return np.array([False, True])
    if t.startswith("float"):
        with np.errstate(over="ignore"):
            return np.array(FLOATS2 if pairs else FLOATS).astype(t)
    info = np.iinfo(t)
    return np.array([v for v in (INTS2 if pairs else INTS) if info.min <= v <= info.max], dtype=t)


def reference(name: str, *args):
    """NumPy's result on NumPy scalars (np.round is a function, the others ufuncs); None where NumPy raises."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            return np.asarray(getattr(np, name)(*args))[()]
        except (ValueError, TypeError):
            return None


def numpy_type(name: str, *types: str) -> str | None:
    """The type NumPy gives np.<name> of NumPy scalars of `types`, or None where NumPy has no loop or
    its loop's type has no gpuc type (float16, int8)."""
    result = reference(name, *(NP[t](1) for t in types))
    return result.dtype.name if result is not None and result.dtype.name in TYPES else None


def documented(name: str, args, want):
    """gpuc's result where NumPy's is platform-defined or an exception (docs/frontend.md, NumPy functions)."""
    t = np.asarray(args[0]).dtype
    if name == "reciprocal" and want is not None and want.dtype.kind in "iu" and args[0] == 0:
        return want.dtype.type(np.iinfo(want.dtype).max)  # NumPy converts 1.0 / 0 to an integer: gpuc saturates
    if name == "power" and want is None:
        return NP[np.result_type(*args).name](1)  # NumPy raises for negative integer powers: gpuc gives 1
    return want


def same(name: str, got, want, args) -> bool:
    if want.dtype.kind != "f":
        return got == want
    got, want, info = float(got), float(want), np.finfo(want.dtype)
    if math.isnan(want) or math.isnan(got):
        return math.isnan(want) and math.isnan(got)
    if name in TRANSCENDENTAL and math.isfinite(want):
        return math.isclose(got, want, rel_tol=ULPS * float(info.eps), abs_tol=ULPS * float(info.smallest_subnormal))
    # which zero fmax/fmin give for -0.0 and 0.0 is NumPy's platform's (float32 and float64 differ on x86)
    zeros_tie = name in ("fmax", "fmin") and args[0] == 0 and args[1] == 0
    return got == want and (zeros_tie or math.copysign(1, got) == math.copysign(1, want))


# -- generated kernels: every function of a type (or pair of types) in one kernel ---------------------------


def load(folder: Path, name: str, source: str):
    path = folder / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def program(calls) -> str:
    """A kernel storing each call (name, result type) of x[i] (and y[i]) into row k of the output array of its
    type, and a func returning all of them as a tuple (typed, never run: gpuc's result types)."""
    rows, stores, texts = {t: 0 for t in TYPES}, [], []
    for name, rt, arity in calls:
        texts.append(f"np.{name}({'x, y' if arity == 2 else 'x'})")
        stores.append(f"    o_{rt}[{rows[rt]}, i] = np.{name}({'x[i], y[i]' if arity == 2 else 'x[i]'})")
        rows[rt] += 1
    params = ", ".join(f"o_{t}" for t in TYPES)
    return "\n".join(["import numpy as np", "import gpuc", "", "", "@gpuc.kernel", f"def every({params}, x, y):",
                      "    i = gpuc.index()", *stores, "", "", "@gpuc.func", "def types(x, y):",
                      f"    return ({', '.join(texts)},)", ""])


def run_every(folder, module_name, calls, x, y):
    """Run the generated kernel on x, y: for each call, its results and gpuc's type of it."""
    module = load(folder, module_name, program(calls))
    outs = {t: np.zeros((max(1, sum(rt == t for _, rt, _ in calls)), x.size), dtype=t) for t in TYPES}
    module.every[x.size](*outs.values(), x, y)
    argtypes = (gpuc.frontend.as_type(x.dtype), gpuc.frontend.as_type(y.dtype))
    types = Typing(gpuc.NativeTarget()).function(module.types, argtypes).return_type.elements
    rows, results = {t: 0 for t in TYPES}, []
    for (name, rt, _), gt in zip(calls, types):
        results.append((name, rt, outs[rt][rows[rt]], gt.name))
        rows[rt] += 1
    return results


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("numpy_math")


@ON_DEVICES
@pytest.mark.parametrize("t", TYPES)
def test_unary_functions_match_numpy(folder, t):
    x = values(t)
    calls = [(name, rt, 1) for name in UNARY if (rt := numpy_type(name, t)) is not None]
    assert len(calls) >= (9 if t == "bool" else 40)
    for name, rt, got, gpuc_type in run_every(folder, f"unary_{t}", calls, x, x):
        assert gpuc_type == rt, f"np.{name} of {t}: gpuc types it {gpuc_type}, NumPy {rt}"
        for a, g in zip(x, got):
            want = documented(name, (a,), reference(name, a))
            assert same(name, g, want, (a,)), f"np.{name}({a!r}) as {t}: gpuc {g!r}, NumPy {want!r}"


@ON_DEVICES
@pytest.mark.parametrize("t", TYPES)
def test_binary_functions_match_numpy(folder, t):
    # one kernel per pair of types, on each pair of their values
    for u in TYPES:
        pairs = list(itertools.product(values(t, True), values(u, True)))
        x, y = np.array([p[0] for p in pairs], dtype=t), np.array([p[1] for p in pairs], dtype=u)
        calls = [(name, rt, 2) for name in BINARY if (rt := numpy_type(name, t, u)) is not None]
        for name, rt, got, gpuc_type in run_every(folder, f"binary_{t}_{u}", calls, x, y):
            assert gpuc_type == rt, f"np.{name} of {t}, {u}: gpuc types it {gpuc_type}, NumPy {rt}"
            for a, b, g in zip(x, y, got):
                want = documented(name, (a, b), reference(name, a, b))
                assert same(name, g, want, (a, b)), f"np.{name}({a!r}, {b!r}): gpuc {g!r}, NumPy {want!r}"


def test_what_numpy_refuses_is_a_compile_error(folder):
    # every function and type (pair) NumPy has no loop for (np.negative of a bool, np.subtract of two)
    refused = [(name, (t,)) for name in UNARY for t in TYPES if numpy_type(name, t) is None]
    refused += [(name, (t, u)) for name in BINARY for t in TYPES for u in TYPES if numpy_type(name, t, u) is None]
    assert len(refused) >= 4
    source = ["import numpy as np", "import gpuc", ""]
    for k, (name, types) in enumerate(refused):
        params = ", ".join("xy"[:len(types)])
        source += ["", "@gpuc.func", f"def f{k}({params}):", f"    return np.{name}({params})", ""]
    module = load(folder, "refused", "\n".join(source))
    for k, (name, types) in enumerate(refused):
        with pytest.raises(gpuc.CompilationError) as info:
            Typing(gpuc.NativeTarget()).function(getattr(module, f"f{k}"), tuple(map(gpuc.frontend.as_type, types)))
        assert not isinstance(info.value, gpuc.InternalCompilerError)
        assert f"numpy.{name}" in str(info.value) and info.value.location is not None, (name, types)


# -- np.clip and np.where -----------------------------------------------------------------------------------


def test_clip_and_where_types_match_numpy(folder):
    # every combination of types, typed in one func
    params = [f"p_{t}" for t in TYPES]
    combos = list(itertools.product(TYPES, repeat=3))
    calls = [f"np.clip(p_{a}, p_{b}, p_{c})" for a, b, c in combos] + [f"np.where(p_{a}, p_{b}, p_{c})"
                                                                       for a, b, c in combos]
    module = load(folder, "clip_where_types", "\n".join([
        "import numpy as np", "import gpuc", "", "", "@gpuc.func", f"def types({', '.join(params)}):",
        f"    return ({', '.join(calls)},)", ""]))
    argtypes = tuple(gpuc.frontend.as_type(t) for t in TYPES)
    got = [t.name for t in Typing(gpuc.NativeTarget()).function(module.types, argtypes).return_type.elements]
    ones = {t: NP[t](1) for t in TYPES}
    want = [np.clip(ones[a], ones[b], ones[c]).dtype.name for a, b, c in combos]
    want += [np.where(ones[a], ones[b], ones[c]).dtype.name for a, b, c in combos]
    assert got == want


@gpuc.kernel
def clipped(out, x, lo, hi):
    i = gpuc.index()
    out[0, i] = np.clip(x[i], lo[i], hi[i])
    out[1, i] = np.clip(x[i], lo[i], None)   # np.maximum(x, lo)
    out[2, i] = np.clip(x[i], None, hi[i])   # np.minimum(x, hi)
    out[3, i] = np.where(x[i], lo[i], hi[i])


@ON_DEVICES
@pytest.mark.parametrize("t", ["float32", "float64", "int32", "uint64", "bool"])
def test_clip_and_where_values_match_numpy(t):
    # signed zeros, NaN in any place, bounds in the wrong order
    special = {"float32": [-0.0, 0.0, math.nan, 1.0, -1.0, 2.0], "float64": [-0.0, 0.0, math.nan, 1.0, -1.0, 2.0],
               "int32": [-2**31, -1, 0, 1, 5, 2**31 - 1], "uint64": [0, 1, 5, 2**64 - 1], "bool": [False, True]}[t]
    x, lo, hi = (np.array(column, dtype=t) for column in zip(*itertools.product(special, repeat=3)))
    out = np.zeros((4, x.size), dtype=t)
    clipped[x.size](out, x, lo, hi)
    for k, (a, b, c) in enumerate(zip(x, lo, hi)):
        for row, want in enumerate([np.clip(a, b, c), np.clip(a, b, None), np.clip(a, None, c), np.where(a, b, c)]):
            want = np.asarray(want)[()]
            assert same("clip", out[row, k], want, (a,)), f"row {row} of {a!r}, {b!r}, {c!r}: {out[row, k]!r}, {want!r}"


# -- literals: NEP 50's weak Python scalars, against the same func run by Python on NumPy scalars -----------


@gpuc.func
def with_literals(x32, u, i, x64):
    return (np.hypot(x32, 2.0), np.maximum(u, 1), np.power(i, 2), np.sqrt(2), np.clip(x32, 0.0, 1.0),
            np.clip(u, -1, 3), np.clip(i, 0, 2**31 - 1), np.where(u > 3, x32, 2.0), np.where(i, 1, 2.5),
            np.round(x32, 2), np.arctan2(1, x32), np.copysign(3, x64), np.fmax(u, 2.5), np.add(u, 7),
            np.floor_divide(i, -2), np.round(i, -1), np.round(x64), np.heaviside(x32, 0.5), np.remainder(x64, 2),
            np.float_power(x32, 2), np.sign(-3), np.square(x32), np.reciprocal(2.0), np.fmod(u, 4),
            np.logical_and(x32, 0), np.minimum(2**63, x64), np.deg2rad(90), np.isnan(x32), np.absolute(i),
            np.power(u, 3), np.round(1234.5678, -2), np.clip(2.5, x32, x32), np.clip(7, u, 9), np.clip(x32, 0, None),
            np.where(2**63, u, 1), np.round(x32, decimals=1), np.clip(i, -2**31, 2**31), np.maximum(True, u))


@ON_DEVICES
def test_literals_are_weak_as_in_numpy():
    args = (np.float32(0.7), np.uint32(5), np.int32(-7), 2.5)
    want = [np.asarray(v)[()] for v in with_literals(*args)]
    argtypes = (gpuc.float32, gpuc.uint32, gpuc.int32, gpuc.float64)
    types = Typing(gpuc.NativeTarget()).function(with_literals, argtypes).return_type.elements
    assert [t.name for t in types] == [w.dtype.name for w in want]
    got = native(with_literals, argtypes)(*args)
    library = {0: "hypot", 10: "arctan2", 19: "float_power"}  # the results of math library functions
    for k, (g, w) in enumerate(zip(got, want)):
        assert same(library.get(k, "exact"), w.dtype.type(g), w, (0, 0)), f"result {k}: gpuc {g!r}, NumPy {w!r}"


@ON_DEVICES
def test_round_is_numpys():
    # NumPy's formula in the value's own type: float32(2.675) * 100 is 267.5 in float32, which rounds to even
    @gpuc.func
    def rounded(x32, x64, n):
        return np.round(x32, 2), np.around(x64, 1), np.round(x64, -3), np.round(n, -2), np.round(x64, 400)

    args = (np.float32(2.675), 0.25, np.int64(-1250))
    with np.errstate(invalid="ignore"):
        want = [np.asarray(v)[()] for v in rounded(*args)]
    got = native(rounded, (gpuc.float32, gpuc.float64, gpuc.int64))(*args)
    assert want[0] == np.float32(2.68) and math.isnan(want[4])  # NumPy's inf / inf
    for g, w in zip(got, want):
        assert same("round", w.dtype.type(g), w, (0,)), (g, w)


# -- errors ---------------------------------------------------------------------------------------------


def test_other_numpy_functions_are_located_errors_listing_the_supported_ones():
    @gpuc.func
    def total(x):
        return np.cumsum(x)

    err = check(total, (gpuc.float64,), "numpy.cumsum is not supported in gpuc functions", "np.cumsum(x)")
    assert all(name in err.hint for name in ("sqrt", "maximum", "clip", "where", "arctan2", "abs", "mod"))


def test_every_public_numpy_function_is_known():
    from gpuc.frontend.core.registry import lookup_call
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in dir(np):
            value = getattr(np, name, None)
            if not name.startswith("_") and callable(value) and not isinstance(value, type):
                assert lookup_call(value) is not None, name



LAZY_CASE = """
import sys
import numpy as np
import gpuc
from gpuc.frontend.core.registry import lookup_call
before = set(sys.modules)
assert lookup_call(np.sin) is not None and lookup_call(np.cumsum) is not None
print(sorted(m for m in set(sys.modules) - before if m.startswith("numpy")))
"""


def test_the_call_table_imports_no_numpy_submodule():
    # Built with dir(np) and getattr, the table imported NumPy's lazily loaded submodules (np.char,
    # np.ctypeslib, np.f2py, np.testing, ...): 80-140 ms of a fresh process's first compile.
    proc = subprocess.run([sys.executable, "-c", LAZY_CASE], capture_output=True, text=True, cwd=ROOT, check=True)
    assert proc.stdout.strip() == "[]", proc.stdout

@gpuc.func
def rounded_bool(b):
    return np.round(b, 1)


@gpuc.func
def difference(a, b):
    return np.subtract(a, b)


@gpuc.func
def negative_power(n):
    return np.power(n, -1)


@gpuc.func
def unsigned_maximum(u):
    return np.maximum(u, -1)


@gpuc.func
def with_out(x):
    return np.sqrt(x, out=x)


@gpuc.func
def indices(c):
    return np.where(c)


@gpuc.func
def variable_decimals(x, n):
    return np.round(x, n)


@gpuc.func
def of_an_array(a):
    return np.exp(a)


@pytest.mark.parametrize("fn, argtypes, message, fragment", [
    (rounded_bool, (gpuc.boolean,), "numpy.round of a bool with decimals is an error in NumPy", "np.round(b, 1)"),
    (difference, (gpuc.boolean, gpuc.boolean), "numpy.subtract is not defined for bool, bool", "np.subtract(a, b)"),
    (negative_power, (gpuc.int32,), "integers cannot be raised to a negative power", "power(n, |-1)"),
    (unsigned_maximum, (gpuc.uint32,), "the literal -1 does not fit in uint32", "maximum(u, |-1)"),
    (with_out, (gpuc.float64,), "keyword arguments are not supported", "out=|x)"),
    (indices, (gpuc.boolean,), "numpy.where() takes 3 arguments", "np.where(c)"),
    (variable_decimals, (gpuc.float64, gpuc.int64), "needs decimals as a constant integer", "round(x, |n)"),
    (of_an_array, (gpuc.Array[gpuc.float64, 1],), "numpy.exp() needs numbers, not a", "exp(|a)"),
])
def test_refused_calls_are_located_errors(fn, argtypes, message, fragment):
    check(fn, argtypes, message, fragment)


# -- the GPU targets ------------------------------------------------------------------------------------

# A representative subset: library math, NumPy's own formulas, integer loops, np.clip/where/round.
SUBSET = ["sqrt", "exp", "log1p", "sin", "arctan2", "hypot", "power", "maximum", "fmin", "sign", "floor", "rint",
          "remainder", "fmod", "logaddexp", "deg2rad", "reciprocal", "isfinite", "signbit", "heaviside", "clip",
          "where", "round"]
TARGET_KERNEL = """
import numpy as np
import gpuc


@gpuc.kernel
def every(out, x, y, n):
    i = gpuc.index()
    out[i] = ({terms})
"""


SPECIAL_TERMS = {"clip": "np.clip(x[i], y[i], 2.0)", "where": "np.where(n[i] > 2, x[i], y[i])",
                 "round": "np.round(x[i], 2)", "reciprocal": "np.reciprocal(x[i]) + np.reciprocal(n[i])",
                 "fmod": "np.fmod(x[i], y[i]) + np.fmod(n[i], n[i])"}  # the integer loops too


def target_terms(names) -> str:
    """The sum of one call of each named function, for TARGET_KERNEL."""
    def call(name):
        return SPECIAL_TERMS.get(name) or f"np.{name}(" + ", ".join(["x[i]", "y[i]"][:1 + (name in BINARY)]) + ")"
    return " + ".join(call(n) for n in names)


def target_job(folder, names, dtype, target):
    module = load(folder, f"target_{abs(hash(tuple(names)))}", TARGET_KERNEL.format(terms=target_terms(names)))
    t = gpuc.frontend.as_type(dtype)
    return gpuc.CompilerJob((module.every, (gpuc.Array[t, 1],) * 3 + (gpuc.Array[gpuc.int32, 1],)),
                            gpuc.CompilerConfig(target))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_ptx_compiles_and_assembles(folder, dtype, ptxas):
    ptx = gpuc.compile(target_job(folder, SUBSET, dtype, gpuc.PTXTarget()), "asm").output
    ptxas(ptx)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_spirv_compiles_and_validates(folder, dtype, spirv_val):
    job = target_job(folder, SUBSET, dtype, gpuc.SPIRVTarget())
    text = gpuc.compile(job, "asm").output
    for name in ("atan2", "hypot", "log1p", "rint", "fmod"):
        assert f" {name} " in text, name  # an OpExtInst of the OpenCL extended instruction set
    spirv_val(gpuc.compile(job, "obj").output)


GCN_CASE = """
import importlib.util
import gpuc
spec = importlib.util.spec_from_file_location("gcn_every", {path!r})
module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)
t = gpuc.{dtype}
job = gpuc.CompilerJob((module.every, (gpuc.Array[t, 1],) * 3 + (gpuc.Array[gpuc.int32, 1],)),
                       gpuc.CompilerConfig(gpuc.GCNTarget()))
assert "s_endpgm" in gpuc.compile(job, "asm").output
print("GCN-OK")
"""


def gcn_names(bits: int) -> list[str]:
    """SUBSET's functions GCN claims; without a math library on this machine, those it computes without one."""
    target = gpuc.GCNTarget()
    names = [n for n in SUBSET if n in numpy_math.supported_on(target, bits)]
    library = getattr(gpuc.targets, "libclc", None)
    if target.math_library is None or library is not None and library.find_libclc() is not None:
        return names
    needs = {n: numpy_math.UFUNCS[n].needs if n in numpy_math.UFUNCS else ("rint",) * (n == "round") for n in names}
    return [n for n in names if all(target.math_lowering(mathlib.OPS[f], bits).kind != "call" for f in needs[n])]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gcn_compiles_what_it_supports(folder, dtype):
    # in a subprocess: a wrong table entry would abort the process inside the AMDGPU backend
    names = gcn_names(int(dtype[-2:]))
    assert {"sqrt", "maximum", "clip", "remainder", "floor"} <= set(names)
    path = folder / f"gcn_{dtype}.py"
    path.write_text(TARGET_KERNEL.format(terms=target_terms(names)))
    proc = subprocess.run([sys.executable, "-c", GCN_CASE.format(path=str(path), dtype=dtype)], capture_output=True,
                          text=True, timeout=300, cwd=folder, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0 and "GCN-OK" in proc.stdout, proc.stdout + proc.stderr


class LibraryFree(gpuc.GCNTarget):
    """GCN without a math library, computing only a few functions by their intrinsics."""

    math_library = None
    math_intrinsics = {32: frozenset({"sqrt", "floor", "fabs", "copysign"}),
                       64: frozenset({"sqrt", "floor", "fabs", "copysign"})}


@pytest.mark.parametrize("name, dtype", [("arctan2", "float32"), ("sin", "float64"), ("logaddexp", "float64"),
                                         ("rint", "float32"), ("round", "float64")])
def test_a_target_without_the_function_gives_mathlibs_located_error(folder, name, dtype):
    with pytest.raises(gpuc.CompilationError) as info:
        gpuc.compile(target_job(folder, [name], dtype, LibraryFree()), "asm")
    text = str(info.value)
    assert f"numpy.{name} on {dtype} is not available on the gcn target (gpuc links no device math library" in text
    assert "there it supports: " in text and "maximum" in text and "sqrt" in text
    assert info.value.location is not None and f"np.{name}(" in text
