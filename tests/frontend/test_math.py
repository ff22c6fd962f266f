"""The math module in kernels: every function against Python's math on the CPU, and compiled for each GPU target."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import gpuc
from gpuc.frontend.numeric import mathlib

ROOT = Path(__file__).resolve().parents[2]
# The tests that launch kernels run natively and through OpenCL.
ON_DEVICES = pytest.mark.devices("cpu", "opencl")

UNARY = ["sqrt", "cbrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin",
         "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "radians", "degrees", "erf", "erfc",
         "gamma", "lgamma", "fabs", "hypot"]
BINARY = ["atan2", "hypot", "pow", "copysign", "fmod"]
# Computed exactly (no rounding, or CPython's formula): compared bit for bit, sign of zero included.
EXACT = {"fabs", "copysign", "fmod", "radians", "degrees", "sqrt"}
# Python's own implementations (not libm's): a looser tolerance.
LOOSE = {"gamma", "lgamma"}

VALUES = [0.0, -0.0, 0.25, -0.25, 0.5, 0.75, 1.0, -1.0, 1.5, 2.0, -2.5, 3.0, 7.25, -9.5, 10.0, 33.3, -100.0,
          180.0, 700.0, 1e-300, -1e-5, 1e300, math.inf, -math.inf, math.nan]
PAIRS = [(y, x) for y in (0.0, -0.0, 1.0, -2.5, 7.0, 1e300, math.inf, math.nan)
         for x in (0.0, -0.0, 0.5, -3.0, 2.0, 1e-300, math.inf, -math.inf)]


def as_array(values, dtype):
    with np.errstate(over="ignore"):  # 1e300 becomes inf in float32, on purpose
        return np.array(values, dtype=np.float64).astype(dtype)


def kernel_of(name: str, arity: int):
    fn = getattr(math, name)
    if arity == 1:
        @gpuc.kernel
        def apply1(out, x):
            i = gpuc.index()
            out[i] = fn(x[i])
        return apply1

    @gpuc.kernel
    def apply2(out, x, y):
        i = gpuc.index()
        out[i] = fn(x[i], y[i])
    return apply2


def python(name, dtype, *args):
    """Python's result, rounded to `dtype`; None where Python raises (a domain or range error)."""
    try:
        value = getattr(math, name)(*(float(a) for a in args))
    except (ValueError, OverflowError):
        return None
    with np.errstate(over="ignore"):
        return float(dtype(value))


def check(name, dtype, got, want, args, exact):
    where = f"math.{name}{tuple(float(a) for a in args)} as {np.dtype(dtype).name}"
    if want is None:  # Python raises: the kernel gives C's IEEE result, never a finite number
        assert not math.isfinite(got), f"{where}: Python raises, gpuc gave the finite {got!r}"
        return
    if math.isnan(want) or exact:
        assert got == want and math.copysign(1, got) == math.copysign(1, want) or math.isnan(want) and \
            math.isnan(got), f"{where}: {got!r}, Python {want!r}"
        return
    eps = np.finfo(dtype).eps
    rel = (64 if name in LOOSE else 4) * eps
    assert math.isclose(got, want, rel_tol=rel, abs_tol=8 * eps * eps), f"{where}: {got!r}, Python {want!r}"


@ON_DEVICES
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", UNARY)
def test_unary_matches_python(name, dtype):
    x = as_array(VALUES, dtype)
    out = np.zeros_like(x)
    kernel_of(name, 1)[x.size](out, x)
    for a, got in zip(x, out):
        # float32 arguments keep float32; Python computes in float64 and the test rounds its result
        want = python(name, dtype, a)
        check(name, dtype, float(got), want, (a,), name in EXACT or name == "hypot")  # hypot(x) is |x|


@ON_DEVICES
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", BINARY)
def test_binary_matches_python(name, dtype):
    y = as_array([p[0] for p in PAIRS], dtype)
    x = as_array([p[1] for p in PAIRS], dtype)
    out = np.zeros_like(x)
    kernel_of(name, 2)[x.size](out, y, x)
    for a, b, got in zip(y, x, out):
        check(name, dtype, float(got), python(name, dtype, a, b), (a, b), name in EXACT)


@ON_DEVICES
def test_fmod_keeps_the_dividends_sign_and_is_exact():
    # math.fmod is C's fmod (sign of x), unlike %: exact even for huge quotients
    x = np.array([-7.0, 7.0, -1.0, 1e300, -1e300, 5e-324, 2.0**60 + 1.0, -0.0])
    y = np.array([3.0, -3.0, 1.0, 3.0, 7.0, 2.0, 3.0, 5.0])
    out = np.zeros_like(x)
    kernel_of("fmod", 2)[x.size](out, x, y)
    for a, b, got in zip(x, y, out):
        want = math.fmod(a, b)
        assert got == want and math.copysign(1, got) == math.copysign(1, want), (a, b, got, want)


@gpuc.kernel
def rounding(out, x):
    i = gpuc.index()
    out[0, i] = math.floor(x[i])
    out[1, i] = math.ceil(x[i])
    out[2, i] = math.trunc(x[i])


@ON_DEVICES
def test_floor_ceil_trunc_return_int64():
    x = np.array([-2.5, -0.5, -0.0, 0.5, 2.5, 3.0, -3.0, 2.0**62 + 2048.0, -9.9e15])
    out = np.zeros((3, x.size), dtype=np.int64)
    rounding[x.size](out, x)
    assert out.tolist() == [[math.floor(v) for v in x], [math.ceil(v) for v in x], [math.trunc(v) for v in x]]


@ON_DEVICES
def test_floor_of_nan_and_infinity_saturates():
    # Python raises; gpuc documents a saturating conversion (NaN -> 0), never an undefined value
    x = np.array([math.nan, math.inf, -math.inf, 1e300, -1e300])
    out = np.zeros((3, x.size), dtype=np.int64)
    rounding[x.size](out, x)
    big, small = 2**63 - 1, -2**63
    assert out.tolist() == [[0, big, small, big, small]] * 3


@gpuc.kernel
def of_integers(out, big, u, flags):
    out[0] = math.floor(big)       # exact: an integer is int(x), never a float on the way
    out[1] = math.trunc(big)
    out[2] = math.ceil(u) - 8      # int64 as in Python, not a wrapped uint32
    flags[0] = math.isfinite(big)
    flags[1] = math.isnan(u)
    flags[2] = math.isinf(big)


@ON_DEVICES
def test_rounding_and_classification_of_integers():
    out, flags = np.zeros(3, dtype=np.int64), np.zeros(3, dtype=np.bool_)
    big = 2**62 + 1  # not representable as a float64: must not go through one
    of_integers[1](out, big, np.uint32(7), flags)
    assert out.tolist() == [big, big, -1]
    assert flags.tolist() == [True, False, False]


@gpuc.kernel
def classify(out, x):
    i = gpuc.index()
    out[0, i] = math.isnan(x[i])
    out[1, i] = math.isinf(x[i])
    out[2, i] = math.isfinite(x[i])


@ON_DEVICES
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_classification(dtype):
    x = as_array(VALUES, dtype)
    out = np.zeros((3, x.size), dtype=np.bool_)
    classify[x.size](out, x)
    assert out.tolist() == [[f(float(v)) for v in x] for f in (math.isnan, math.isinf, math.isfinite)]


@gpuc.kernel
def mixed(out, u, x32, n):
    out[0] = math.atan2(u, -1)       # a weak literal next to a uint64: no wrap-around
    out[1] = math.hypot(n, 4)        # integers compute in float64
    out[2] = math.radians(n)
    out[3] = math.fmod(n, -4)
    out[4] = math.degrees(x32)       # float32: CPython's float64 result rounded to float32
    out[5] = math.hypot(x32, n, 12)


@ON_DEVICES
def test_mixed_argument_types():
    out = np.zeros(6)
    x32 = np.float32(0.7)
    mixed[1](out, np.uint64(5), x32, 3)
    assert out[:4].tolist() == [math.atan2(5, -1), math.hypot(3, 4), math.radians(3), math.fmod(3, -4)]
    assert out[4] == float(np.float32(math.degrees(float(x32))))
    assert math.isclose(out[5], math.hypot(float(x32), 3, 12), rel_tol=1e-15)


@ON_DEVICES
def test_hypot_with_one_argument_is_the_absolute_value():
    x = np.array([-2.5, 0.0, -0.0, math.inf, -math.inf, math.nan])
    out = np.zeros_like(x)
    kernel_of("hypot", 1)[x.size](out, x)
    for a, got in zip(x, out):
        want = math.hypot(a)
        assert got == want and math.copysign(1, got) == 1.0 or math.isnan(want) and math.isnan(got)


# -- errors --------------------------------------------------------------------------------------------


def test_unsupported_math_function_lists_the_supported_ones():
    @gpuc.func
    def f(n):
        return math.factorial(n)

    with pytest.raises(gpuc.CompilationError) as info:
        gpuc.compile(gpuc.CompilerJob((f, (gpuc.int64,)), gpuc.CompilerConfig(gpuc.NativeTarget())))
    text = str(info.value)
    assert "math.factorial is not supported" in text
    assert all(name in text for name in ("atan2", "hypot", "lgamma", "isfinite", "fmod"))
    assert info.value.location is not None and "return math.factorial(n)" in text


def test_every_python_math_function_is_known():
    # each callable of Python's math module is either compiled or refused with the list
    handlers = mathlib.math_calls()
    for name in dir(math):
        if not name.startswith("_") and callable(getattr(math, name)):
            assert getattr(math, name) in handlers, name


# -- the GPU targets ------------------------------------------------------------------------------------

ALL_MATH = """
@gpuc.kernel
def every(out, x, y):
    i = gpuc.index()
    out[i] = ({terms})
"""


def every_function_kernel(names) -> str:
    """The sum of one call of each named function, for the ALL_MATH template."""
    def call(name):
        arity = mathlib.MATH[name].params
        module = "gpuc" if name == "fma" else "math"  # math.fma needs Python 3.13
        return f"{module}.{name}(" + ", ".join(["x[i]", "y[i]", "x[i]"][:max(arity, 1)]) + ")"
    return " + ".join(call(n) for n in names)


@pytest.fixture
def every_kernel(tmp_path):
    """Write a kernel that calls every given math function to a module under tmp_path and import it."""
    import importlib.util

    def make(names):
        terms = every_function_kernel(names)
        path = tmp_path / f"every_{len(names)}_{abs(hash(terms))}.py"
        path.write_text("import math\nimport gpuc\n" + textwrap.dedent(ALL_MATH.format(terms=terms)))
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.every
    return make


ALL_NAMES = sorted(mathlib.MATH)


def job(kernel, dtype, target):
    t = gpuc.frontend.as_type(dtype)
    return gpuc.CompilerJob((kernel, (gpuc.Array[t, 1], gpuc.Array[t, 1], gpuc.Array[t, 1])),
                            gpuc.CompilerConfig(target))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_ptx_every_function_assembles(every_kernel, dtype, ptxas):
    ptx = gpuc.compile(job(every_kernel(ALL_NAMES), dtype, gpuc.PTXTarget()), "asm").output
    ptxas(ptx)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_spirv_every_function_validates(every_kernel, dtype, spirv_val):
    kernel = every_kernel(ALL_NAMES)
    text = gpuc.compile(job(kernel, dtype, gpuc.SPIRVTarget()), "asm").output
    for name in ("atan2", "hypot", "asinh", "expm1", "log1p", "cbrt", "erfc", "tgamma", "lgamma", "fmod"):
        assert f" {name} " in text, name  # an OpExtInst of the OpenCL extended instruction set
    spirv_val(gpuc.compile(job(kernel, dtype, gpuc.SPIRVTarget()), "obj").output)


GCN_CASE = """
import importlib.util
import gpuc
path = {path!r}
open(path, "w").write("import math\\nimport gpuc\\n" + {kernel!r})
spec = importlib.util.spec_from_file_location("gcn_every", path)
module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)
t = gpuc.float32 if {bits} == 32 else gpuc.float64
job = gpuc.CompilerJob((module.every, (gpuc.Array[t, 1],) * 3), gpuc.CompilerConfig(gpuc.GCNTarget()))
asm = gpuc.compile(job, "asm").output
assert "s_endpgm" in asm
print("GCN-OK")
"""


@pytest.mark.parametrize("bits", [32, 64])
def test_gcn_compiles_every_function_it_claims(tmp_path, bits):
    # in a subprocess: a wrong table entry would abort the process inside the AMDGPU backend
    terms = every_function_kernel(mathlib.supported_on(gpuc.GCNTarget(), bits))
    code = GCN_CASE.format(bits=bits, path=str(tmp_path / "gcn_every.py"),
                           kernel=textwrap.dedent(ALL_MATH.format(terms=terms)))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0 and "GCN-OK" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.parametrize("bits", [32, 64])
def test_gcn_math_compiles_through_libclc(every_kernel, bits):
    # libclc (Debian's libclc-22) gives GCN every math function in float32 and float64
    dtype = np.float32 if bits == 32 else np.float64
    asm = gpuc.compile(job(every_kernel(["atan2", "hypot", "asinh", "lgamma", "erf", "exp", "sin", "fmod", "radians"]),
                           dtype, gpuc.GCNTarget()), "asm").output
    assert "s_endpgm" in asm


# -- what gpuc has instead -----------------------------------------------------------------------------


@pytest.mark.parametrize("name, advice", [("syncthreads", "gpuc.barrier()"), ("threadIdx", "gpuc.thread_index(d)"),
                                          ("compare_and_swap", "gpuc.atomic_cas(a, i, expected, new)"),
                                          ("atomic_nanmax", "IEEE maxNum"), ("indx", "gpuc.index?"),
                                          ("nonsense", "the index space: gpuc.index, gpuc.ndrange; the types: gpuc.bool_")])
def test_missing_gpuc_attribute_says_what_gpuc_has(name, advice):
    with pytest.raises(AttributeError, match="module 'gpuc' has no attribute") as info:
        getattr(gpuc, name)
    assert advice in str(info.value)
    assert not hasattr(gpuc, name)


def test_missing_gpuc_attribute_in_a_kernel_is_a_located_error():
    @gpuc.kernel
    def k(out):
        out[gpuc.threadIdx.x] = 1

    with pytest.raises(gpuc.CompilationError) as info:
        gpuc.compile(gpuc.CompilerJob((k, (gpuc.Array[gpuc.int64, 1],)), gpuc.CompilerConfig(gpuc.NativeTarget())))
    text = str(info.value)
    assert "module 'gpuc' has no attribute 'threadIdx'" in text and "gpuc.thread_index(d)" in text
    assert info.value.location is not None and "gpuc.threadIdx.x" in text


@gpuc.func
def float_mod(x, y):
    return x % y, math.fmod(x, y)


@pytest.mark.parametrize("dtype", [gpuc.float64, gpuc.float32])
def test_float_remainders_use_an_exact_fmod_on_gpus(dtype, ptxas):
    # NVPTX expands frem as x - trunc(x/y)*y: 1e17 % 3.0 gave 4.0 there instead of 1.0
    def compiled(target, output):
        return gpuc.compile(gpuc.CompilerJob((float_mod, (dtype, dtype)), gpuc.CompilerConfig(target)), output).output

    ll = compiled(gpuc.PTXTarget(), "llvm")
    assert " frem " not in ll  # libdevice's __nv_fmod(f), linked and inlined
    ptxas(compiled(gpuc.PTXTarget(), "asm"))
    spirv = compiled(gpuc.SPIRVTarget(), "asm")
    assert " fmod " in spirv and "OpFRem" not in spirv


@gpuc.kernel
def big_literals(out, x):
    out[0] = math.atan2(x, 18446744073709551615)  # a literal beyond int64 becomes that float, as in Python
    out[1] = math.hypot(x, 2**63)
    out[2] = math.isfinite(2**63)


@ON_DEVICES
def test_literals_beyond_int64_are_used_as_floats():
    out = np.zeros(3)
    big_literals[1](out, 1.0)
    assert out.tolist() == [math.atan2(1.0, 18446744073709551615), math.hypot(1.0, 2**63), 1.0]


# LLVM's instcombine makes exp2(sitofp k) and pow(2.0, sitofp k) an llvm.ldexp, which the SPIR-V backend cannot
# lower: 2.0 ** k of an int32 k was a ValidationError there; SPIR-V now calls OpenCL's ldexp.
@gpuc.kernel
def powers_of_two(out, out32, k, k16):
    i = gpuc.index()
    out[0, i] = 2.0 ** k[i]
    out[1, i] = math.pow(2.0, k[i])
    out[2, i] = np.exp2(k[i])
    out32[i] = np.exp2(k16[i])  # float32, as in NumPy


POWERS = [-1100, -1075, -1074, -1023, -149, -127, -3, 0, 1, 5, 127, 128, 1023, 1024, 2000]


@ON_DEVICES
def test_powers_of_two_of_integers_are_exact():
    k = np.array(POWERS, np.int32)
    k16 = np.array(POWERS, np.int64).clip(-2**15, 2**15 - 1).astype(np.int16)
    out, out32 = np.zeros((3, k.size)), np.zeros(k.size, np.float32)
    powers_of_two[k.size](out, out32, k, k16)
    with np.errstate(over="ignore"):
        # the exact powers (NumPy's own float32 exp2 is 1 ulp off at 2**127 on hosts with AVX-512)
        assert (out == np.ldexp(1.0, k)).all()  # subnormals, overflow to inf, 0 below them
        assert (out32 == np.ldexp(np.float32(1.0), k16)).all()


def test_spirv_computes_powers_of_two_with_ldexp(spirv_val):
    types = (gpuc.Array[gpuc.float64, 2], gpuc.Array[gpuc.float32, 1], gpuc.Array[gpuc.int32, 1],
             gpuc.Array[gpuc.int16, 1])
    job = gpuc.CompilerJob((powers_of_two, types), gpuc.CompilerConfig(gpuc.SPIRVTarget(), kernel=True))
    assert " ldexp " in gpuc.compile(job, "asm").output  # an OpExtInst of the OpenCL extended instruction set
    spirv_val(gpuc.compile(job, "obj").output)
