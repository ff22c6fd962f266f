"""gpuc.atomic_*: every operation on every element type it has, on the CPU with two threads (and on the OpenCL
device's work items) racing for a few elements, against a sequential reference in plain Python; the PTX
(ptxas), GCN and SPIR-V (spirv-val) they compile to; and the located errors for what a type or a target does
not have."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pytest

import gpuc
from gpuc import Array
from gpuc.runtime import cpu

from support.located_errors import check

N, ELEMENTS = 3000, 6           # work items racing for few elements
BUSY = 3000                     # iterations of other work per item: a launch of ~15 ms, so both threads race
INTS, FLOATS = ("int32", "int64", "uint32", "uint64"), ("float32", "float64")
OPS = ("add", "sub", "min", "max", "exch", "and", "or", "xor", "inc", "dec", "cas")
# The tests that launch kernels run natively and through OpenCL.
ON_DEVICES = pytest.mark.devices("cpu", "opencl")


def ops_of(dtype: str) -> tuple:
    """The operations the language defines on `dtype` arrays (docs/frontend.md, Atomics)."""
    if dtype in FLOATS:
        return ("add", "sub", "min", "max", "exch", "cas")
    return OPS if dtype.startswith("u") else tuple(op for op in OPS if op not in ("inc", "dec"))


# -- the reference: one step in plain Python -------------------------------------------------------------


def step(op: str, dtype: str, old, v, w):
    """The value a[i] takes when atomic_<op> meets `old` (`v`: the value or bound, `w`: cas's new value)."""
    if dtype in FLOATS:
        t = np.dtype(dtype).type
        old, v, w = t(old), t(v), t(w)
        if op in ("min", "max"):  # IEEE minNum/maxNum: a NaN operand loses
            return v if math.isnan(old) else old if math.isnan(v) else (min if op == "min" else max)(old, v)
        return {"add": lambda: t(old + v), "sub": lambda: t(old - v), "exch": lambda: v,
                "cas": lambda: w if bits(old) == bits(v) else old}[op]()
    info = np.iinfo(dtype)
    wrap = lambda x: (x - info.min) % (1 << info.bits) + info.min  # noqa: E731
    old, v, w = int(old), int(v), int(w)
    return {"add": lambda: wrap(old + v), "sub": lambda: wrap(old - v), "min": lambda: min(old, v),
            "max": lambda: max(old, v), "exch": lambda: v, "and": lambda: wrap(old & v),
            "or": lambda: wrap(old | v), "xor": lambda: wrap(old ^ v),
            "inc": lambda: 0 if old >= v else old + 1,
            "dec": lambda: v if old == 0 or old > v else old - 1,
            "cas": lambda: w if old == v else old}[op]()


def bits(x) -> int:
    """A number's bit pattern, so that NaN equals NaN when counting states."""
    x = np.asarray(x)
    return int(x.view(f"u{x.dtype.itemsize}"))


# -- kernels: every operation behind a func, called with a 1-D and a 2-D array ------------------------------


@gpuc.func
def float_atomic(which, a, at, v, w):
    if which == 0:
        return gpuc.atomic_add(a, at, v)
    if which == 1:
        return gpuc.atomic_sub(a, at, v)
    if which == 2:
        return gpuc.atomic_min(a, at, v)
    if which == 3:
        return gpuc.atomic_max(a, at, v)
    if which == 4:
        return gpuc.atomic_exch(a, at, v)
    return gpuc.atomic_cas(a, at, v, w)


@gpuc.func
def int_atomic(which, a, at, v, w):
    if which < 6:
        return float_atomic(which, a, at, v, w)
    if which == 6:
        return gpuc.atomic_and(a, at, v)
    if which == 7:
        return gpuc.atomic_or(a, at, v)
    return gpuc.atomic_xor(a, at, v)


@gpuc.func
def uint_atomic(which, a, at, v, w):
    if which == 9:
        return gpuc.atomic_inc(a, at, v)
    if which == 10:
        return gpuc.atomic_dec(a, at, v)
    return int_atomic(which, a, at, v, w)


def _racing(apply):
    @gpuc.kernel
    def racing(which, a1, a2, v, w, old1, old2, busy):
        i = gpuc.index()
        e = i % 6
        old1[i] = apply(which, a1, e, v[i], w[i])
        t = 1.0
        for _ in range(len(busy)):  # other work, so that the launch lasts long enough for both threads to run
            t = t * 0.999 + 1.0
        busy[i % len(busy)] = t
        old2[i] = apply(which, a2, (e // 3, e % 3), v[i], w[i])  # a tuple index into a 2-D array
    return racing


KERNELS = {"float": _racing(float_atomic), "int": _racing(int_atomic), "uint": _racing(uint_atomic)}
WHICH = {op: k for k, op in enumerate(("add", "sub", "min", "max", "exch", "cas", "and", "or", "xor", "inc", "dec"))}


def kernel_for(dtype: str):
    return KERNELS["float" if dtype in FLOATS else "uint" if dtype.startswith("u") else "int"]


# -- inputs -----------------------------------------------------------------------------------------------


@dataclass
class Race:
    initial: np.ndarray   # ELEMENTS values
    v: np.ndarray         # per work item: the value, bound or expected value
    w: np.ndarray         # per work item: cas's new value


def race(op: str, dtype: str, rng) -> Race:
    dt, e = np.dtype(dtype), np.arange(N) % ELEMENTS
    if op == "cas":  # everyone expects the initial value: exactly one winner per element
        initial = (np.arange(ELEMENTS) * 7 + 1).astype(dt)
        if dt.kind == "f":
            initial[1] = np.nan  # a NaN is expected by its bits
        return Race(initial, initial[e], (np.arange(N) + 100).astype(dt))
    if op in ("inc", "dec"):  # one bound per element: the result does not depend on the order
        top = np.iinfo(dt).max
        bounds = np.array([0, 1, 5, 7, top, 3], dt)
        return Race(np.array([3, 0, 9, 2, top - 2, 3], dt), bounds[e], np.zeros(N, dt))
    if op == "exch":
        return Race(np.zeros(ELEMENTS, dt), (np.arange(N) + 1).astype(dt), np.zeros(N, dt))
    if dt.kind == "f":
        if op in ("min", "max"):
            v = rng.standard_normal(N).astype(dt)
            v[rng.random(N) < 0.2] = np.nan
            v[e == 5] = np.nan  # an element only NaNs reach keeps its value
            return Race(np.array([np.nan, 0.5, -0.5, 3.0, np.nan, 1.0], dt), v, np.zeros(N, dt))
        # small integers: every order of additions gives the same, exact sum
        return Race(rng.integers(-9, 9, ELEMENTS).astype(dt), rng.integers(-50, 50, N).astype(dt), np.zeros(N, dt))
    info = np.iinfo(dt)  # the whole range: sums wrap
    return Race(rng.integers(info.min, info.max, ELEMENTS, dtype=dt, endpoint=True),
                rng.integers(info.min, info.max, N, dtype=dt, endpoint=True), np.zeros(N, dt))


def sequential(op: str, dtype: str, r: Race) -> list:
    state = list(r.initial)
    for i in range(N):
        e = i % ELEMENTS
        state[e] = step(op, dtype, state[e], r.v[i], r.w[i])
    return state


def check_states_chain(op: str, dtype: str, r: Race, old: np.ndarray, final: np.ndarray) -> None:
    """Whatever the order, each returned old value is a state of the element: the olds and the final value
    are the initial value and every new value the operation made from an old one."""
    for e in range(ELEMENTS):
        items = range(e, N, ELEMENTS)
        seen = Counter(bits(old[i]) for i in items) + Counter([bits(final[e])])
        made = Counter(bits(np.dtype(dtype).type(step(op, dtype, old[i], r.v[i], r.w[i]))) for i in items)
        assert seen == made + Counter([bits(r.initial[e])]), (op, dtype, e)


@ON_DEVICES
@pytest.mark.parametrize("dtype", INTS + FLOATS)
def test_every_atomic_races_on_two_threads(dtype):
    rng = np.random.default_rng(2026)
    k = kernel_for(dtype)
    for op in ops_of(dtype):
        r = race(op, dtype, rng)
        a1, a2 = r.initial.copy(), r.initial.reshape(2, 3).copy()
        old1, old2 = np.zeros_like(r.v), np.zeros_like(r.v)
        k.launch(N, WHICH[op], a1, a2, r.v, r.w, old1, old2, np.zeros(BUSY), threads=2)
        for old, final in ((old1, a1), (old2, a2.reshape(-1))):
            check_states_chain(op, dtype, r, old, final)
            if op == "cas":
                for e in range(ELEMENTS):
                    olds = [bits(old[i]) for i in range(e, N, ELEMENTS)]
                    assert olds.count(bits(r.initial[e])) == 1, (dtype, e)  # one winner
                    winner = next(i for i in range(e, N, ELEMENTS) if bits(old[i]) == bits(r.initial[e]))
                    assert bits(final[e]) == bits(r.w[winner])
            elif op == "exch":
                assert sorted(map(bits, [*old, *final])) == sorted(map(bits, [*r.v, *r.initial]))
            else:  # the order does not change the result
                want = np.array(sequential(op, dtype, r), dtype)
                assert list(map(bits, final)) == list(map(bits, want)), (op, dtype)


@pytest.mark.parametrize("dtype", INTS + FLOATS)
def test_python_versions_follow_the_reference(dtype):
    # called from Python (a func in the interpreter), the atomics compute the same update
    rng = np.random.default_rng(7)
    for op in ops_of(dtype):
        r = race(op, dtype, rng)
        a = r.initial.copy()
        fn = getattr(gpuc, f"atomic_{op}")
        for i in range(0, N, 37):
            e, before = i % ELEMENTS, a[i % ELEMENTS]
            got = fn(a, e, r.v[i], r.w[i]) if op == "cas" else fn(a, e, r.v[i])
            assert bits(got) == bits(before)
            assert bits(a[e]) == bits(np.dtype(dtype).type(step(op, dtype, before, r.v[i], r.w[i]))), (op, i)


@gpuc.kernel
def bump_slots(a, out):
    i = gpuc.index()
    out[i] = gpuc.atomic_inc(a, 0, 9) + gpuc.atomic_dec(a, 1, 4)   # the old values, used in arithmetic


@ON_DEVICES
def test_inc_and_dec_wrap_like_numba():
    # inc: old >= bound ? 0 : old + 1; dec: (old == 0 or old > bound) ? bound : old - 1
    a, out = np.array([0, 0], np.uint32), np.zeros(25, np.uint32)
    bump_slots.launch(25, a, out, threads=2)
    assert list(a) == [25 % 10, (0 - 25) % 5]
    # which inc meets which dec depends on the order; the olds of each are 0..9, 0..9, 0..4 and 0, 4, 3, 2, 1, ...
    assert int(out.sum()) == sum(i % 10 for i in range(25)) + sum((-i) % 5 for i in range(25))


@dataclass(frozen=True, repr=False)
class LoopingCPU(gpuc.NativeTarget):
    """The host CPU computing inc and dec as a cmpxchg loop, as on SPIR-V."""
    atomic_loops = frozenset({"inc", "dec"})


@pytest.mark.parametrize("dtype", ["uint32", "uint64"])
@ON_DEVICES
@pytest.mark.not_on("opencl", "runs SPIR-V's compare-exchange loops on a CPU target (the OpenCL run of "
                              "the racing test runs SPIR-V's own)")
def test_inc_and_dec_as_compare_exchange_loops(dtype):
    k = kernel_for(dtype)
    argtypes = (gpuc.int64, Array[getattr(gpuc, dtype), 1], Array[getattr(gpuc, dtype), 2],
                *[Array[getattr(gpuc, dtype), 1]] * 4, Array[gpuc.float64, 1])
    job = gpuc.CompilerJob((k, argtypes), gpuc.CompilerConfig(LoopingCPU(), kernel=True))
    assert "cmpxchg" in gpuc.compile(job, "llvm").output
    signature = [("scalar", "i64"), ("array", dtype, 1), ("array", dtype, 2)] + [("array", dtype, 1)] * 4 + [
        ("array", "float64", 1)]
    module = cpu.load(job, signature)
    try:
        for op in ("inc", "dec"):
            r = race(op, dtype, None)
            a1, a2 = r.initial.copy(), r.initial.reshape(2, 3).copy()
            old1, old2 = np.zeros_like(r.v), np.zeros_like(r.v)
            cpu.launch(module, N, (WHICH[op], a1, a2, r.v, r.w, old1, old2, np.zeros(BUSY)), threads=2)
            want = list(map(bits, np.array(sequential(op, dtype, r), dtype)))
            assert list(map(bits, a1)) == want and list(map(bits, a2.reshape(-1))) == want
            check_states_chain(op, dtype, r, old1, a1)
    finally:
        module.close()


# -- code for the GPUs ------------------------------------------------------------------------------------


def _targets():
    return {"ptx": gpuc.PTXTarget(), "gcn": gpuc.GCNTarget(), "spirv": gpuc.SPIRVTarget()}


@gpuc.kernel
def direct(a, b, v):
    i = gpuc.index()
    v[i] = gpuc.atomic_add(a, i % 4, v[i]) + gpuc.atomic_sub(b, (i % 2, 1), v[i])


@pytest.mark.parametrize("dtype", INTS + FLOATS)
@pytest.mark.parametrize("target", ["ptx", "gcn", "spirv"])
def test_gpu_code(target, dtype, ptxas, spirv_val):
    t, dt = _targets()[target], getattr(gpuc, dtype)
    k = kernel_for(dtype)
    argtypes = (gpuc.int64, Array[dt, 1], Array[dt, 2], *[Array[dt, 1]] * 4, Array[gpuc.float64, 1])
    job = gpuc.CompilerJob((k, argtypes), gpuc.CompilerConfig(t))
    missing = [op for op in ops_of(dtype) if t.atomic_issue(op, dtype) is not None]
    if missing:  # the first operation the target lacks is the error
        with pytest.raises(gpuc.CompilationError, match=f"atomic_{missing[0]} on {dtype} arrays needs the SPIR-V"):
            gpuc.compile(job, "llvm")
        assert dtype in FLOATS and target == "spirv"
        return
    if target == "ptx":
        ptxas(gpuc.compile(job, "asm").output)
    elif target == "spirv":
        spirv_val(gpuc.compile(job, "obj").output)
    else:
        assert gpuc.compile(job, "obj").output


# SPIR-V refused float add, sub, min and max (they need extensions); they are compare-exchange loops now.
def test_spirv_has_every_float_atomic(spirv_val):
    @gpuc.kernel
    def swaps(a, v):
        i = gpuc.index()
        v[i] = gpuc.atomic_exch(a, i % 3, v[i]) + gpuc.atomic_cas(a, 0, 1.5, v[i]) + gpuc.atomic_max(a, 1, v[i])
    F = Array[gpuc.float32, 1]
    spirv_val(gpuc.compile(gpuc.CompilerJob((swaps, (F, F)), gpuc.CompilerConfig(gpuc.SPIRVTarget())), "obj").output)
    assert [op for op in OPS if gpuc.SPIRVTarget().atomic_issue(op, "float64")] == []


def test_lowering(filecheck):
    ir = gpuc.code_llvm(direct, (Array[gpuc.uint32, 1], Array[gpuc.uint32, 2], Array[gpuc.uint32, 1]),
                        optimize=False)
    filecheck(ir, "CHECK: atomicrmw add ptr {{.*}} monotonic\nCHECK: atomicrmw sub ptr {{.*}} monotonic\n")
    U, F = Array[gpuc.uint64, 1], Array[gpuc.float64, 1]  # F also for the kernels' busy-work array
    ir = gpuc.code_llvm(kernel_for("uint64"), (gpuc.int64, U, Array[gpuc.uint64, 2], U, U, U, U, F), optimize=False)
    for op in ("umin", "umax", "xchg", "and", "or", "xor", "uinc_wrap", "udec_wrap"):
        assert f"atomicrmw {op} ptr" in ir, op
    assert "cmpxchg ptr" in ir
    ir = gpuc.code_llvm(kernel_for("float64"), (gpuc.int64, F, Array[gpuc.float64, 2], F, F, F, F, F), optimize=False)
    for op in ("fadd", "fsub", "fmin", "fmax"):
        assert f"atomicrmw {op} ptr" in ir, op
    filecheck(ir, "CHECK: atomicrmw xchg ptr {{.*}}, i64\nCHECK-NEXT: bitcast i64 {{.*}} to double\n"
                  "CHECK: cmpxchg ptr {{.*}}, i64 {{.*}}, i64\n")  # on the bits
    I = Array[gpuc.int32, 1]
    ir = gpuc.code_llvm(kernel_for("int32"), (gpuc.int64, I, Array[gpuc.int32, 2], I, I, I, I, F), optimize=False)
    assert "atomicrmw min ptr" in ir and "atomicrmw max ptr" in ir


# -- errors ----------------------------------------------------------------------------------------------

F1, F2, I1, U1 = (Array[gpuc.float32, 1], Array[gpuc.float32, 2], Array[gpuc.int32, 1], Array[gpuc.uint32, 1])


@gpuc.kernel
def too_few(a):
    gpuc.atomic_add(a, 0)


@gpuc.kernel
def cas_too_few(a):
    gpuc.atomic_cas(a, 0, 1)


@gpuc.kernel
def on_scalar(a, x):
    a[0] = gpuc.atomic_max(x, 0, 1.0)


@gpuc.kernel
def float_bits(a):
    gpuc.atomic_and(a, 0, 1)


@gpuc.kernel
def signed_inc(a):
    gpuc.atomic_inc(a, 0, 5)


@gpuc.kernel
def float_index(a):
    gpuc.atomic_exch(a, 1.5, 2)


@gpuc.kernel
def flat_index(a):
    gpuc.atomic_min(a, 0, 2.0)


@gpuc.kernel
def array_value(a, b):
    gpuc.atomic_xor(a, 0, b)


@gpuc.kernel
def negative_bound(a):
    gpuc.atomic_dec(a, 0, -1)


@gpuc.kernel
def float_max(a):
    gpuc.atomic_max(a, gpuc.index(), 1.0)


@pytest.mark.parametrize("fn, argtypes, message, fragment", [
    (too_few, (I1,), "atomic_add() takes 3 argument(s), but 2 were given", "gpuc.atomic_add("),
    (cas_too_few, (I1,), "atomic_cas() takes 4 argument(s), but 3 were given", "gpuc.atomic_cas("),
    (on_scalar, (F1, gpuc.float32), "atomic_max needs an array as its first argument, not a float32",
     "atomic_max(|x"),
    (float_bits, (F1,), "atomic_and does not work on float32 arrays", "atomic_and(|a"),
    (signed_inc, (I1,), "atomic_inc does not work on int32 arrays", "atomic_inc(|a"),
    (float_index, (I1,), "atomic_exch on a 1-dimensional array needs 1 integer index(es)", "1.5"),
    (flat_index, (F2,), "atomic_min on a 2-dimensional array needs 2 integer index(es)", "atomic_min(a, |0"),
    (array_value, (I1, I1), "atomic_xor needs a number for v, not an Array[int32, 1]", "0, |b)"),
    (negative_bound, (U1,), "the literal -1 does not fit in uint32", "-1"),
], ids=lambda v: getattr(v, "__name__", None) if callable(v) else None)
def test_errors_are_located(fn, argtypes, message, fragment):
    check(fn, argtypes, message, fragment)


def test_float_bitwise_hint_lists_the_integer_types():
    check(float_bits, (F1,), "atomic_and does not work", "atomic_and(|a", hint="int32, int64, uint32, uint64")


@dataclass(frozen=True, repr=False)
class NoFloatMinMax(gpuc.SPIRVTarget):
    """SPIR-V as it was before float min/max became compare-exchange loops: a target lacking a pair."""

    atomics_missing = {("max", d): "needs the SPIR-V extension SPV_EXT_shader_atomic_float_min_max"
                       for d in ("float16", "float32", "float64")}


def test_what_a_target_lacks_is_a_located_error_naming_what_works():
    err = check(float_max, (F1,), "atomic_max on float32 arrays needs the SPIR-V extension "
                "SPV_EXT_shader_atomic_float_min_max", "gpuc.atomic_max(", target=NoFloatMinMax())
    assert "here atomic_max works on int32, int64, uint32, uint64" in err.hint
    assert "native" in err.hint and "ptx" in err.hint and "gcn" in err.hint
