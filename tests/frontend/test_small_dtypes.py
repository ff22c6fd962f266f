"""The small dtypes int8, uint8, int16, uint16 and float16 against NumPy 2: the dtype and the value of every
operation for every pair of dtypes (old and new), literals (weak, out of range), conversions, math on
float16 (computed in float32 and rounded, as NumPy does), arrays and scalars as kernel arguments."""

from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass

import numpy as np
import pytest

import gpuc
from gpuc.frontend.passes.inference import Typing
from gpuc.frontend.core.types import SCALARS, SMALL_SCALARS, as_type
from support.located_errors import check

SMALL = [t.name for t in SMALL_SCALARS]
ALL = [t.name for t in SCALARS if t.name != "bool"] + ["bool"]
PAIRS = sorted({(a, b) for a in SMALL for b in ALL} | {(b, a) for a in SMALL for b in ALL})
# The tests that launch kernels run natively and through OpenCL.
ON_DEVICES = pytest.mark.devices("cpu", "opencl")


def values(name: str) -> np.ndarray:
    """Edge values of a dtype: its limits, zero, small numbers of both signs, and for floats the specials."""
    dt = np.dtype(name)
    if dt.kind == "b":
        return np.array([False, True])
    if dt.kind == "f":
        big = float(np.finfo(dt).max)
        return np.array([0.0, -0.0, 0.5, 1.5, -2.25, 3.0, -7.0, 100.125, big, -big, 1e-7, math.inf, -math.inf,
                         math.nan], dtype=dt)
    info = np.iinfo(dt)
    picks = {int(info.min), int(info.max), 0, 1, -1, 2, 3, -7, 7, 100, -100, 200, 1000}
    return np.array(sorted(v for v in picks if info.min <= v <= info.max), dtype=dt)


def grid(x: str, y: str):
    """Every pair of edge values of dtypes `x` and `y`, as two arrays."""
    a, b = values(x), values(y)
    pairs = list(itertools.product(range(a.size), range(b.size)))
    return a[[i for i, _ in pairs]], b[[j for _, j in pairs]]


@gpuc.func
def _arith(x, y):
    return x + y, x - y, x * y, x / y, x // y, x % y


@gpuc.func
def _compare(x, y):
    return x < y, x <= y, x == y, x != y, min(x, y), max(x, y)


@gpuc.func
def _bits(x, y):
    return x & y, x | y, x ^ y, x << y, x >> y


POWER_PAIRS = [p for p in PAIRS if "bool" not in p]


@gpuc.func
def _power(x, y):
    return x ** y


def _result_types(fn, x: str, y: str) -> list[str]:
    t = Typing(gpuc.NativeTarget()).function(fn, (as_type(x), as_type(y))).return_type
    return [e.name for e in getattr(t, "elements", (t,))]


def _numpy(ops, a, b):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [np.asarray(op(a, b)) for op in ops]


ARITH = [np.add, np.subtract, np.multiply, np.true_divide, np.floor_divide, np.remainder]


def python_min(a, b):
    """Python's min(a, b) elementwise: b only where b < a (so a NaN first argument wins), in NumPy's type."""
    t = np.result_type(a, b)
    return np.where(b < a, b.astype(t), a.astype(t))


def python_max(a, b):
    t = np.result_type(a, b)
    return np.where(b > a, b.astype(t), a.astype(t))


COMPARE = [np.less, np.less_equal, np.equal, np.not_equal, python_min, python_max]
BITS = [np.bitwise_and, np.bitwise_or, np.bitwise_xor, np.left_shift, np.right_shift]


@gpuc.kernel
def _arith_kernel(a, b, o0, o1, o2, o3, o4, o5):
    i = gpuc.index()
    o0[i], o1[i], o2[i], o3[i], o4[i], o5[i] = _arith(a[i], b[i])


@gpuc.kernel
def _compare_kernel(a, b, o0, o1, o2, o3, o4, o5):
    i = gpuc.index()
    o0[i], o1[i], o2[i], o3[i], o4[i], o5[i] = _compare(a[i], b[i])


@gpuc.kernel
def _bits_kernel(a, b, o0, o1, o2, o3, o4):
    i = gpuc.index()
    o0[i], o1[i], o2[i], o3[i], o4[i] = _bits(a[i], b[i])


@gpuc.kernel
def _power_kernel(a, b, o):
    i = gpuc.index()
    o[i] = _power(a[i], b[i])


def _same(got: np.ndarray, want: np.ndarray, what: str, a, b, rtol: float = 0.0) -> None:
    assert got.dtype == want.dtype, f"{what}: gpuc gives {got.dtype}, NumPy {want.dtype}"
    if rtol:
        equal = np.isclose(got, want, rtol=rtol, atol=0.0, equal_nan=True)
    elif got.dtype.kind == "f":
        equal = (got == want) & (np.signbit(got) == np.signbit(want)) | (np.isnan(got) & np.isnan(want))
    else:
        equal = got == want
    bad = np.flatnonzero(~equal)
    assert bad.size == 0, f"{what}: at {a[bad[0]]!r}, {b[bad[0]]!r} gpuc gives {got[bad[0]]!r}, NumPy {want[bad[0]]!r}"


def _run(kernel, fn, ops, x, y, a, b, rtol: float = 0.0) -> None:
    want = _numpy(ops, a, b)
    types = _result_types(fn, x, y)
    names = [op.__name__ for op in ops]
    assert types == [w.dtype.name for w in want], f"{x} and {y}: {list(zip(names, types))}"
    outs = [np.zeros(a.size, w.dtype) for w in want]
    kernel[a.size](a, b, *outs)
    for name, got, w in zip(names, outs, want):
        _same(got, w, f"{name}({x}, {y})", a, b, rtol)


@ON_DEVICES
@pytest.mark.parametrize("x,y", PAIRS, ids=[f"{x}-{y}" for x, y in PAIRS])
def test_arithmetic_matches_numpy(x, y):
    a, b = grid(x, y)
    if "bool" in (x, y) and np.result_type(x, y) == np.bool_:
        pytest.skip("bool with bool is not a small dtype")
    _run(_arith_kernel, _arith, ARITH, x, y, a, b)


@ON_DEVICES
@pytest.mark.parametrize("x,y", PAIRS, ids=[f"{x}-{y}" for x, y in PAIRS])
def test_comparisons_and_min_max_match_numpy(x, y):
    a, b = grid(x, y)
    _run(_compare_kernel, _compare, COMPARE, x, y, a, b)


INTEGER_PAIRS = [(x, y) for x, y in PAIRS if np.dtype(x).kind in "iu" and np.dtype(y).kind in "iu"
                 and np.result_type(x, y).kind != "f"]


@ON_DEVICES
@pytest.mark.parametrize("x,y", INTEGER_PAIRS, ids=[f"{x}-{y}" for x, y in INTEGER_PAIRS])
def test_bitwise_and_shifts_match_numpy(x, y):
    a, b = grid(x, y)
    _run(_bits_kernel, _bits, BITS, x, y, a, b)


@ON_DEVICES
@pytest.mark.parametrize("x,y", POWER_PAIRS, ids=[f"{x}-{y}" for x, y in POWER_PAIRS])
def test_power_matches_numpy(x, y):
    a, b = grid(x, y)
    if np.result_type(x, y).kind in "iu":  # NumPy refuses negative integer powers
        with np.errstate(all="ignore"):
            b = (np.abs(b.astype(np.int64)) % 5).astype(y)
    # float32 and float64 powers come from the platform's pow, not NumPy's; a float16 power is that float32
    # pow rounded once, so where the two float32 results straddle a float16 midpoint they differ by an ulp
    rtol = {"float16": 2e-3, "float32": 1e-6, "float64": 1e-14}.get(np.result_type(x, y).name, 0.0)
    _run(_power_kernel, _power, [np.power], x, y, a, b, rtol)


# -- conversions ---------------------------------------------------------------------------------------------


@gpuc.kernel
def _to_half(out, x):
    i = gpuc.index()
    out[i] = np.float16(x[i])


@ON_DEVICES
def test_float64_to_float16_rounds_once():
    # float64 values just past a float16 midpoint: rounding through float32 first would land on the midpoint
    # and round to even, the wrong way; NumPy (and gpuc) round once
    ulp = 2.0 ** -10
    cases = [1 + ulp / 2 + 2.0 ** -40, 1 + ulp / 2 - 2.0 ** -40, 1 + ulp / 2, 1 + 3 * ulp / 2, -(1 + ulp / 2 + 2.0 ** -40),
             65504.0, 65519.99, 65520.0, 1e300, -1e300, 2.0 ** -25 + 2.0 ** -60, 2.0 ** -25, 2.0 ** -26, 1e-300,
             -1e-300, 0.0, -0.0, math.inf, -math.inf, math.nan, 3.0e-8, 6.0e-5, 0.1, 1 / 3]
    x = np.array(cases)
    out = np.zeros(x.size, np.float16)
    _to_half[x.size](out, x)
    with np.errstate(all="ignore"):
        want = x.astype(np.float16)
    _same(out, want, "float16(float64)", x, x)
    assert out[0] == np.float16(1 + ulp) and out[1] == np.float16(1.0)


# -- every target -----------------------------------------------------------------------------------------------


@gpuc.kernel
def _every_operation(out8, outu8, out16, outu16, outh, a8, au8, a16, au16, ah, s8, sh):
    i = gpuc.index()
    outu8[i] = min(max((au8[i] + au8[i + 1] + 2) // 3 + s8, 0), 255) >> 1
    out8[i] = -a8[i] % 7 + abs(a8[i]) * s8 - (a8[i] << 2)
    out16[i] = a16[i] // (a8[i] | 1) + au8[i] ^ a16[i]
    outu16[i] = au16[i] * au16[i] + gpuc.uint16(ah[i])
    h = ah[i] * sh + np.float16(au8[i]) / ah[i] - a8[i] % sh
    outh[i] = math.sqrt(abs(h)) + math.sin(h) + np.exp(h) + np.float16(h > sh) + h ** 2 + (h // sh)


SIGNATURE = (gpuc.Array[gpuc.int8, 1], gpuc.Array[gpuc.uint8, 1], gpuc.Array[gpuc.int16, 1], gpuc.Array[gpuc.uint16, 1],
             gpuc.Array[gpuc.float16, 1], gpuc.Array[np.int8, 1], gpuc.Array[np.uint8, 1], gpuc.Array[np.int16, 1],
             gpuc.Array[np.uint16, 1], gpuc.Array[np.float16, 1], gpuc.int8, np.float16)


def _job(target):
    return gpuc.CompilerJob((_every_operation, SIGNATURE), gpuc.CompilerConfig(target))


@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
def test_ptx(arch, ptxas):
    ptx = gpuc.compile(_job(gpuc.PTXTarget(cap=arch)), "asm").output
    assert ".f16" in ptx or ".b16" in ptx
    ptxas(ptx, arch=arch)


def test_gcn():
    asm = gpuc.compile(_job(gpuc.GCNTarget()), "asm").output
    assert "s_endpgm" in asm


def test_spirv(spirv_val):
    spirv_val(gpuc.compile(_job(gpuc.SPIRVTarget()), "obj").output)


# -- literals: weak, as NEP 50 says; out of range is an error, as NumPy's OverflowError -------------------------


@gpuc.func
def _with_literals(u, i, h):
    return u + 1, u * 2.5, i - 1, h + 1, h * 0.1, u < 300, i > -200, u == 256, u // 2, h + 70000


def test_literals_are_weak():
    args = (np.uint8(200), np.int8(-100), np.float16(1.5))
    types = [t.name for t in Typing(gpuc.NativeTarget()).function(
        _with_literals, tuple(as_type(a.dtype) for a in args)).return_type.elements]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        u, i, h = args
        want = [u + 1, u * 2.5, i - 1, h + 1, h * 0.1, u < 300, i > -200, u == 256, u // 2, h + np.float16(70000)]
    assert types == [np.asarray(w).dtype.name for w in want]
    assert types[:5] == ["uint8", "float64", "int8", "float16", "float16"]


@gpuc.kernel
def _literal_values(out_u, out_i, out_h, out_b, u, i, h):
    k = gpuc.index()
    out_u[k] = u[k] + 100          # wraps in uint8
    out_i[k] = i[k] * 2            # wraps in int8
    out_h[k] = h[k] * 0.1          # 0.1 rounded to float16 first
    out_b[k] = u[k] < 300


@ON_DEVICES
def test_literal_values_match_numpy():
    u, i, h = values("uint8"), values("int8")[:8], values("float16")[:8]
    n = min(u.size, i.size, h.size)
    u, i, h = u[:n], i[:n], h[:n]
    outs = [np.zeros(n, np.uint8), np.zeros(n, np.int8), np.zeros(n, np.float16), np.zeros(n, np.bool_)]
    _literal_values[n](*outs, u, i, h)
    with np.errstate(all="ignore"):
        want = [u + 100, i * 2, h * 0.1, u < 300]
    for got, w in zip(outs, want):
        _same(got, w, "literal", u, i)


@gpuc.func
def _too_big(u):
    return u + 300


@gpuc.func
def _too_small(i):
    return i * -129


@gpuc.func
def _bad_conversion(x):
    return np.uint8(x) + np.int8(200)


@pytest.mark.parametrize("fn, argtypes, message, fragment", [
    (_too_big, (gpuc.uint8,), "the literal 300 does not fit in uint8", "u + 300"),
    (_too_small, (gpuc.int8,), "the literal -129 does not fit in int8", "i * -129"),
    (_bad_conversion, (gpuc.int32,), "the literal 200 does not fit in int8", "np.int8(200)"),
])
def test_out_of_range_literals_are_located_errors(fn, argtypes, message, fragment):
    # NumPy 2 raises OverflowError for np.uint8(1) + 300: gpuc refuses it at compile time
    with pytest.raises(OverflowError):
        np.uint8(1) + 300
    check(fn, argtypes, message, fragment)


# -- conversions and unary operations ---------------------------------------------------------------------------


def _convert_kernel(np_type):
    @gpuc.kernel
    def convert(out, x):
        i = gpuc.index()
        out[i] = np_type(x[i])
    return convert


@ON_DEVICES
@pytest.mark.parametrize("source", ALL)
@pytest.mark.parametrize("target", SMALL)
def test_conversions_to_small_dtypes_match_numpy(target, source):
    x = values(source)
    if np.dtype(source).kind == "f" and np.dtype(target).kind in "iu":
        info = np.iinfo(target)  # NumPy's result is defined for values in range only; gpuc saturates
        wide = x.astype(np.float64)
        x = x[np.isfinite(wide) & (wide >= info.min) & (wide <= info.max)]
    out = np.zeros(x.size, target)
    _convert_kernel(np.dtype(target).type)[x.size](out, x)
    with np.errstate(all="ignore"):
        _same(out, x.astype(target), f"{target}({source})", x, x)


@ON_DEVICES
@pytest.mark.parametrize("source", SMALL)
@pytest.mark.parametrize("target", ALL)
def test_conversions_from_small_dtypes_match_numpy(target, source):
    x = values(source)
    if np.dtype(source).kind == "f" and np.dtype(target).kind in "iu":
        info = np.iinfo(target)
        wide = x.astype(np.float64)
        x = x[np.isfinite(wide) & (wide >= info.min) & (wide <= info.max)]
    out = np.zeros(x.size, target)
    _convert_kernel(np.dtype(target).type)[x.size](out, x)
    with np.errstate(all="ignore"):
        _same(out, x.astype(target), f"{target}({source})", x, x)


@gpuc.kernel
def _unary(o_neg, o_pos, o_abs, o_not, x):
    i = gpuc.index()
    o_neg[i], o_pos[i], o_abs[i], o_not[i] = -x[i], +x[i], abs(x[i]), not x[i]


@gpuc.kernel
def _invert(out, x):
    i = gpuc.index()
    out[i] = ~x[i]


@ON_DEVICES
@pytest.mark.parametrize("t", SMALL)
def test_unary_operations_match_numpy(t):
    x = values(t)
    n = x.size
    outs = [np.zeros(n, t), np.zeros(n, t), np.zeros(n, t), np.zeros(n, np.bool_)]
    _unary[n](*outs, x)
    with np.errstate(all="ignore"):
        want = [-x, +x, np.abs(x), np.logical_not(x)]
    for name, got, w in zip(["neg", "pos", "abs", "not"], outs, want):
        _same(got, w, f"{name}({t})", x, x)
    if np.dtype(t).kind != "f":
        out = np.zeros(n, t)
        _invert[n](out, x)
        _same(out, ~x, f"invert({t})", x, x)


@gpuc.kernel
def _half_math(out, x):
    i = gpuc.index()
    out[0, i] = math.sin(x[i])
    out[1, i] = math.exp(x[i])
    out[2, i] = math.sqrt(x[i])
    out[3, i] = math.log(x[i])
    out[4, i] = math.atan2(x[i], np.float16(0.75))
    out[5, i] = math.fmod(x[i], np.float16(0.75))
    out[6, i] = math.tanh(x[i])


@ON_DEVICES
def test_float16_math_is_float32_rounded():
    # NumPy computes float16 math in float32 and rounds to float16: gpuc's results are the float32
    # functions' (gpuc's own float32 results) rounded once
    x = np.array([0.0, -0.0, 0.1, 0.5, 1.0, 2.0, 3.140625, 10.5, 100.0, 65504.0, -1.5, math.inf, math.nan], np.float16)
    out = np.zeros((7, x.size), np.float16)
    _half_math[x.size](out, x)
    wide = np.zeros((7, x.size), np.float32)
    _half_math[x.size](wide, x.astype(np.float32))
    with np.errstate(all="ignore"):
        _same(out.ravel(), wide.astype(np.float16).ravel(), "math on float16", x, x)
        numpy = np.array([np.sin(x), np.exp(x), np.sqrt(x), np.log(x), np.arctan2(x, np.float16(0.75)),
                          np.fmod(x, np.float16(0.75)), np.tanh(x)])
    assert np.allclose(out.astype(np.float64), numpy.astype(np.float64), rtol=1e-3, atol=0, equal_nan=True)


# -- arguments ------------------------------------------------------------------------------------------------


@gpuc.kernel
def _scale(out, a, s):
    i = gpuc.index()
    out[i] = a[i] * s


@ON_DEVICES
@pytest.mark.parametrize("t", SMALL)
def test_arrays_and_scalars_as_arguments(t):
    a = values(t)
    s = np.dtype(t).type(3)
    out = np.zeros(a.size, t)
    _scale[a.size](out, a, s)
    with np.errstate(all="ignore"):
        _same(out, a * s, f"{t} * {t}", a, a)
    strided = np.zeros(2 * a.size, t)[::2]  # a strided view
    _scale[a.size](strided, a, s)
    _same(strided, out, "strided", a, a)
    assert as_type(np.dtype(t)) == getattr(gpuc, t) and gpuc.Array[np.dtype(t).type, 1].dtype == getattr(gpuc, t)


# -- atomics ---------------------------------------------------------------------------------------------------


@gpuc.kernel
def _atomic_sum(acc, v):
    i = gpuc.index()
    gpuc.atomic_add(acc, i % 2, v[i])


@gpuc.kernel
def _atomic_rest(acc, old, v):
    i = gpuc.index()
    old[0, i] = gpuc.atomic_max(acc, 0, v[i])
    old[1, i] = gpuc.atomic_min(acc, 1, v[i])
    old[2, i] = gpuc.atomic_cas(acc, 2, v[i], v[i])


@ON_DEVICES
@pytest.mark.parametrize("t", SMALL)
def test_atomics_on_small_dtypes(t):
    v = np.resize(values(t), 4000) if np.dtype(t).kind != "f" else np.resize(np.array([0.5, 1.0, 2.0], t), 1000)
    acc = np.zeros(2, t)
    _atomic_sum[v.size](acc, v)
    with np.errstate(all="ignore"):
        want = np.array([v[0::2].sum(dtype=t), v[1::2].sum(dtype=t)], t)  # wraps, as each atomic add
    if np.dtype(t).kind == "f":  # float16 sums of these halves are exact below 1024, in any order
        want = np.array([v[0::2].astype(np.float64).sum(), v[1::2].astype(np.float64).sum()]).astype(t)
        assert (want < 1024).all()
    _same(acc, want, f"atomic_add on {t}", v, v)
    acc = np.array([v.min(), v.max(), 0], t)
    old = np.zeros((3, v.size), t)
    _atomic_rest[v.size](acc, old, v)
    assert acc[0] == v.max() and acc[1] == v.min() and acc[2] == 0


@gpuc.kernel
def _atomic_small_sub(acc, v):
    i = gpuc.index()
    gpuc.atomic_sub(acc, 0, v[i])


@dataclass(frozen=True, repr=False)
class _NoFloatAtomics(gpuc.SPIRVTarget):
    """SPIR-V as it was before float atomics became compare-exchange loops."""

    float_atomics = False
    float_atomics_missing = "needs the SPIR-V extension SPV_EXT_shader_atomic_float_add"


def test_atomics_a_target_lacks_are_located_errors():
    # a target without float atomic add: the error names what works there
    err = check(_atomic_small_sub, (gpuc.Array[gpuc.float16, 1], gpuc.Array[gpuc.float16, 1]),
                "atomic_sub on float16 arrays needs the SPIR-V extension", "gpuc.atomic_sub(acc, 0, v[i])",
                target=_NoFloatAtomics())
    assert "int8" in err.hint and "float32" not in err.hint.split("works on")[1].split(";")[0]


def test_float16_atomics_compile_for_spirv(spirv_val):
    job = gpuc.CompilerJob((_atomic_small_sub, (gpuc.Array[gpuc.float16, 1], gpuc.Array[gpuc.float16, 1])),
                           gpuc.CompilerConfig(gpuc.SPIRVTarget()))
    spirv_val(gpuc.compile(job, "obj").output)


@pytest.mark.parametrize("target", [gpuc.PTXTarget(), gpuc.GCNTarget(), gpuc.SPIRVTarget()], ids=str)
def test_small_integer_atomics_compile_for_gpus(target, spirv_val):
    job = gpuc.CompilerJob((_atomic_rest, (gpuc.Array[gpuc.uint8, 1], gpuc.Array[gpuc.uint8, 2],
                                           gpuc.Array[gpuc.uint8, 1])), gpuc.CompilerConfig(target))
    if isinstance(target, gpuc.SPIRVTarget):
        spirv_val(gpuc.compile(job, "obj").output)
    else:
        assert gpuc.compile(job, "asm").output


# -- bit counts ------------------------------------------------------------------------------------------------


@gpuc.kernel
def _bit_counts(p, c, f, x):
    i = gpuc.index()
    p[i], c[i], f[i] = gpuc.popc(x[i]), gpuc.clz(x[i]), gpuc.ffs(x[i])


@ON_DEVICES
@pytest.mark.parametrize("t", [n for n in SMALL if n != "float16"])
def test_bit_counts_of_small_integers(t):
    # the counts of the type's own width (as gpuc.popc in Python computes them); ffs is a uint32
    x = values(t)
    p, c, f = np.zeros(x.size, t), np.zeros(x.size, t), np.zeros(x.size, np.uint32)
    _bit_counts[x.size](p, c, f, x)
    assert p.tolist() == [gpuc.popc(v) for v in x] and c.tolist() == [gpuc.clz(v) for v in x]
    assert f.tolist() == [gpuc.ffs(v) for v in x]
    assert gpuc.clz(np.uint8(1)) == 7 and gpuc.ffs(np.int8(-128)) == 8


# -- a CPU without F16C -------------------------------------------------------------------------------------------


@gpuc.kernel
def _half_round_trip(wide, narrow, h, f):
    i = gpuc.index()
    wide[i] = np.float32(h[i])
    narrow[i] = np.float16(f[i])


@ON_DEVICES
@pytest.mark.not_on("opencl", "checks the float16 conversions gpuc links for x86 CPUs without F16C")
def test_float16_on_a_cpu_without_f16c():
    # x86 without F16C converts through __extendhfsf2/__truncsfhf2, which gpuc links (gpuc/targets/half_runtime.py):
    # every float16 value, and floats rounding to every float16 (ties, subnormals, overflow, NaN), as NumPy
    from gpuc.runtime import KernelSignature, launch, load
    target = gpuc.NativeTarget(cpu_name="x86-64", feature_string="")
    types = (gpuc.Array[gpuc.float32, 1], gpuc.Array[gpuc.float16, 1], gpuc.Array[gpuc.float16, 1],
             gpuc.Array[gpuc.float32, 1])
    job = gpuc.CompilerJob((_half_round_trip, types), gpuc.CompilerConfig(target, kernel=True))
    assert "__truncsfhf2" in gpuc.compile(job, "asm").output  # the library calls are what is tested
    module = load(job)
    h = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    rng = np.random.default_rng(3)
    ties = (h[np.isfinite(h)].astype(np.float32).view(np.uint32) + np.uint32(1 << 12)).view(np.float32)
    f = np.concatenate([rng.integers(0, 1 << 32, 60000, dtype=np.uint64).astype(np.uint32).view(np.float32),
                        ties, np.nextafter(ties, np.float32(0)), np.nextafter(ties, np.float32(np.inf)),
                        np.array([65504, 65519.996, 65520, 1e-8, 2.0 ** -25, -(2.0 ** -25), 3e-8, np.inf, -np.inf,
                                  np.nan], np.float32)])
    n = f.size
    h = np.resize(h, n)  # every float16 value, then again
    wide, narrow = np.zeros(n, np.float32), np.zeros(n, np.float16)
    spec = [("array", np.float32, 1), ("array", np.float16, 1), ("array", np.float16, 1), ("array", np.float32, 1)]
    launch(module, n, (wide, narrow, h, f), signature=KernelSignature.from_spec(spec))
    with np.errstate(all="ignore"):
        _same(wide, h.astype(np.float32), "float32(float16)", h, h)
        _same(narrow, f.astype(np.float16), "float16(float32)", f, f)


# -- annotations and local arrays ----------------------------------------------------------------------------


@gpuc.func
def _annotated(x: np.uint8, h: gpuc.float16) -> gpuc.float16:
    return x + h


@gpuc.kernel
def _local_small(out, a):
    i = gpuc.index()
    tmp = gpuc.local.array(4, np.uint8)
    tmp[0] = a[i]
    tmp[1] = tmp[0] + 250          # wraps in uint8
    out[i] = _annotated(tmp[1], np.float16(0.5))


@ON_DEVICES
def test_annotations_and_local_arrays_take_numpy_dtypes():
    a = np.array([1, 10, 200], np.uint8)
    out = np.zeros(3, np.float16)
    _local_small[3](out, a)
    with np.errstate(over="ignore"):
        want = (a + np.uint8(250)) + np.float16(0.5)
    _same(out, want, "annotated", a, a)
    assert out.tolist() == [251.5, 4.5, 194.5]


# -- several operands -------------------------------------------------------------------------------------------


@gpuc.func
def _three(a, b, c):
    return max(a, b, c), np.clip(a, b, c), np.where(a > 0, b, c)


def test_several_operands_promote_as_numpy_result_type():
    # NumPy's result_type is not pairwise promotion: int8, uint8 and float16 meet in float16 (pairwise: float32)
    from gpuc.frontend.core.types import promote_sequence
    for n in (2, 3, 4):
        for types in itertools.product(SCALARS, repeat=n):
            assert promote_sequence(types).name == np.result_type(*[t.name for t in types]).name, types
    for types in [("int8", "uint8", "float16"), ("int16", "uint16", "float16"), ("uint16", "int8", "float16")]:
        typed = Typing(gpuc.NativeTarget()).function(_three, tuple(map(as_type, types)))
        got = [t.name for t in typed.return_type.elements]
        ones = [np.dtype(t).type(1) for t in types]
        assert got == [np.result_type(*types).name, np.clip(*ones).dtype.name, np.where(True, *ones[1:]).dtype.name]
