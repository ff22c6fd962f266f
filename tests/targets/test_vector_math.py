"""Vector math on the CPU (gpuc/targets/vector_math.py): loops of math calls use libmvec's variants,
within the ulp bounds docs/targets.md gives, and NativeTarget(vector_math=False) keeps libm's calls."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import gpuc
from gpuc import Array, float32, float64
from gpuc.runtime import cpu
from gpuc.runtime.dispatch import KernelSignature, signature_spec, typeof
from gpuc.targets import vector_math

from support.ulp import samples as _samples, ulp_distance


def isa_of(target) -> str | None:
    """The letter of the libmvec ISA ("e", "d", "b") `target` calls, None when it calls none."""
    return target.vector_variants.get("sin", ("",))[0][4:5] or None


HOST = gpuc.NativeTarget()
SCALAR = gpuc.NativeTarget(vector_math=False)
WIDEST = isa_of(HOST)
needs_libmvec = pytest.mark.skipif(WIDEST is None, reason="the host has no libmvec (x86-64 glibc >= 2.35)")
needs_avx2 = pytest.mark.skipif(WIDEST not in ("d", "e"), reason="the host has no AVX2 or no libmvec")

#: The host's target for each libmvec ISA it runs (the widest is HOST's), to test each ISA's variants.
ISA_TARGETS = {isa_of(t): t for t in (gpuc.NativeTarget(feature_string=HOST.feature_string + off)
                                      for off in ("", ",-avx512f", ",-avx2,-avx512f")) if isa_of(t)}

#: The bound in ulp on the distance from glibc's scalar libm (docs/targets.md, "Vector math").
ULP_BOUND = {"float64": 4, "float32": 4}


def _unary(fn):
    @gpuc.kernel
    def k(a, out):
        i = gpuc.index()
        out[i] = fn(a[i])
    return k


def _binary(fn):
    @gpuc.kernel
    def k(a, b, out):
        i = gpuc.index()
        out[i] = fn(a[i], b[i])
    return k


KERNELS = {name: (_binary if arity == 2 else _unary)(getattr(math, name))
           for name, arity in vector_math.FUNCTIONS.items()}


def run(kernel, target, *arrays):
    """Launch `kernel` compiled for `target` over the arrays' length, one thread; returns the output."""
    out = np.empty_like(arrays[0])
    args = (*arrays, out)
    types = tuple(typeof(a, i) for i, a in enumerate(args))
    job = gpuc.CompilerJob((kernel, types), gpuc.CompilerConfig(target, kernel=True))
    cpu.JITModule(job, signature=KernelSignature(signature_spec(types))).launcher()(out.size, args, threads=1)
    return out


def ir(kernel, dtype, target=HOST, arity=1) -> str:
    t = Array[dtype, 1]
    return gpuc.code_llvm(kernel, (t,) * (arity + 1), target=target)


# -- the vectorized loop calls libmvec --------------------------------------------------------------------

@gpuc.kernel
def mix(a, out):
    i = gpuc.index()
    x = a[i]
    out[i] = math.sin(x) * math.exp(-x * x) + math.log(1.0 + x * x)


@needs_avx2
@pytest.mark.parametrize("dtype, lanes, suffix", [(float64, {"d": 4, "e": 8}, ""), (float32, {"d": 8, "e": 16}, "f")])
def test_loop_calls_vector_variants(filecheck, dtype, lanes, suffix):
    n, ty = lanes[WIDEST], "double" if dtype is float64 else "float"
    checks = "\n".join(f"CHECK-DAG: call <{n} x {ty}> @_ZGV{WIDEST}N{n}v_{name}{suffix}(<{n} x {ty}>"
                       for name in ("sin", "exp", "log"))
    filecheck(ir(mix, dtype), f"CHECK-LABEL: vector.body:\n{checks}\nCHECK-LABEL: middle.block:\n")


@needs_libmvec
def test_opt_out_keeps_scalar_calls(filecheck):
    text = ir(mix, float64, SCALAR)
    filecheck(text, "CHECK: call <{{[0-9]+}} x double> @llvm.sin.v{{[0-9]+}}f64(\n")
    assert "_ZGV" not in text and "vector-function-abi-variant" not in text
    assert repr(SCALAR).endswith("vector_math=False)") and SCALAR != HOST and not SCALAR.library_files()


@needs_libmvec
def test_cache_key_covers_vector_math():
    from gpuc.compiler import cache

    t = (Array[float64, 1],) * 2
    keys = {cache.key(gpuc.CompilerJob((mix, t), gpuc.CompilerConfig(target, kernel=True)), "jit")
            for target in (HOST, SCALAR)}
    assert len(keys) == 2 and None not in keys
    assert HOST.library_files() == [vector_math.host_libmvec()]


def test_other_targets_and_cross_triples():
    """No variants off x86-64 Linux glibc; a generic x86-64 CPU gets SSE2's (it links with -lmvec)."""
    assert vector_math.isas("aarch64-unknown-linux-gnu", "+neon") == ()
    assert vector_math.isas("x86_64-pc-windows-msvc", "+avx2") == ()
    assert vector_math.isas("x86_64-unknown-linux-gnu", "") == (("b", 128),)
    assert vector_math.isas("x86_64-unknown-linux-gnu", "+avx2,-avx512f") == (("d", 256), ("b", 128))
    assert vector_math.isas("x86_64-unknown-linux-gnu", "+avx2,+avx512f,-avx2") == (("b", 128),)
    generic = gpuc.NativeTarget(triple_name="x86_64-unknown-linux-gnu", cpu_name="x86-64", feature_string="")
    assert generic.vector_variants["llvm.sin.f64"] == ("_ZGVbN2v_sin", 2, 128)
    assert generic.vector_variants["powf"] == ("_ZGVbN4vv_powf", 4, 128)
    avx2 = gpuc.NativeTarget(triple_name="x86_64-unknown-linux-gnu", cpu_name="x86-64-v3", feature_string="+avx2")
    assert avx2.vector_variants["llvm.exp.f32"] == ("_ZGVdN8v_expf", 8, 256)


@gpuc.kernel
def recurrence(a, out, steps):
    i = gpuc.index()
    x = a[i]
    for _ in range(steps):  # a trip count known at run time only: the launch loop does not vectorize
        x = math.sin(x) + 0.5 * x
    out[i] = math.sin(x)


@gpuc.kernel
def sines(a, out):
    i = gpuc.index()
    out[i] = math.sin(a[i])


@needs_libmvec
def test_one_result_per_argument_wherever_the_call_is(filecheck):
    """libmvec's SSE, AVX2 and AVX-512 variants differ in the last bits: every call, in a vector lane,
    in a loop's scalar remainder or in code that is not vectorized, calls the same one, so results
    do not depend on the launch size, the thread count or on whether the loop vectorized."""
    x = np.random.default_rng(7).uniform(-50.0, 50.0, 1001)  # an odd size: a scalar remainder
    reference = run(mix, HOST, x)
    for size in (1, 3, 17, 1000):
        assert np.array_equal(run(mix, HOST, x[:size]), reference[:size])
    out = np.empty_like(x)
    mix.launch(x.size, x, out, device="cpu", threads=2)
    assert np.array_equal(out, reference)
    filecheck(ir(mix, float64), "CHECK-NOT: @llvm.sin.\nCHECK-NOT: @sin(\n")
    t = Array[float64, 1]
    filecheck(gpuc.code_llvm(recurrence, (t, t, gpuc.int64)), "CHECK-NOT: vector.body:\nCHECK-NOT: @llvm.sin.\n"
              "CHECK: call <{{[0-9]+}} x double> @_ZGV{{[bde]}}N{{[0-9]+}}v_sin(\n")
    recurrence.launch(x.size, x, out, 0, device="cpu", threads=1)
    assert np.array_equal(out, run(sines, HOST, x))
    assert ulp_distance(out, run(sines, SCALAR, x)).max() <= ULP_BOUND["float64"]


# -- accuracy against glibc's scalar libm -----------------------------------------------------------------

def test_ulp_distance():
    for dtype in (np.float64, np.float32):
        one = np.array([1.0], dtype)
        assert ulp_distance(one, np.nextafter(one, dtype(2))) == [1]
        assert ulp_distance(np.array([-0.0, np.nan, 0.0], dtype), np.array([0.0, np.nan, np.nan], dtype)).tolist() == \
            [0, 0, np.iinfo(np.uint64).max]
        tiny = np.array([np.finfo(dtype).smallest_subnormal], dtype)
        assert ulp_distance(tiny, -tiny) == [2]
        assert ulp_distance(np.array([np.inf], dtype), np.array([np.finfo(dtype).max], dtype)) == [1]


@needs_libmvec
@pytest.mark.parametrize("isa", ["e", "d", "b"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(vector_math.FUNCTIONS))
def test_accuracy_against_libm(name, dtype, isa):
    if isa not in ISA_TARGETS:
        pytest.skip(f"the host does not run libmvec's {isa!r} variants")
    target, arity, kernel = ISA_TARGETS[isa], vector_math.FUNCTIONS[name], KERNELS[name]
    gtype = float64 if dtype == np.float64 else float32
    # The loop does call libmvec's variant for this ISA.
    assert re.search(rf"call <\d+ x \w+> @_ZGV{isa}N", ir(kernel, gtype, target, arity=arity))
    x = _samples(dtype, 20000, seed=len(name))
    args = (x,) if arity == 1 else (x, np.random.default_rng(1).permutation(x))
    with np.errstate(all="ignore"):
        vector, scalar = run(kernel, target, *args), run(kernel, SCALAR, *args)
    distance = ulp_distance(vector, scalar)
    worst = int(np.argmax(distance))
    assert distance[worst] <= ULP_BOUND[np.dtype(dtype).name], (
        f"{name}{tuple(a[worst] for a in args)}: libmvec {vector[worst]!r}, libm {scalar[worst]!r}")
    # Exactly libm's where the result is special: NaN, infinities, zeros keep their sign.
    special = ~np.isfinite(scalar) | (scalar == 0)
    assert np.array_equal(vector[special], scalar[special], equal_nan=True)
    assert np.array_equal(np.signbit(vector[special & ~np.isnan(scalar)]), np.signbit(scalar[special & ~np.isnan(scalar)]))


# -- derivatives of vectorized math -----------------------------------------------------------------------

@gpuc.func
def wave(x):
    return math.sin(x) * math.exp(-x * x) + math.log(1.0 + x * x)


@gpuc.kernel
def wave_derivative(a, out):
    i = gpuc.index()
    out[i] = gpuc.derivative(wave, a[i])


@gpuc.kernel
def wave_kernel(a, out):
    i = gpuc.index()
    out[i] = wave(a[i])


def _wave_derivative(x):
    """d/dx of wave, and the size of its terms (the scale of rounding errors)."""
    e = np.exp(-x * x)
    terms = (np.cos(x) * e, -2.0 * x * np.sin(x) * e, 2.0 * x / (1.0 + x * x))
    return sum(terms), sum(np.abs(t) for t in terms)


@needs_avx2
def test_forward_derivative_is_vectorized_and_right(filecheck):
    # derivative kernels are vectorized across work items (gpuc/plugins/vectorize), their math through libmvec
    filecheck(ir(wave_derivative, float64), "CHECK-LABEL: define {{.*}}@wave_derivative{{.*}}.range(\n"
              "CHECK-DAG: call <{{[0-9]+}} x double> @_ZGV{{[de]}}N{{[0-9]+}}v_cos(\n"
              "CHECK-DAG: call <{{[0-9]+}} x double> @_ZGV{{[de]}}N{{[0-9]+}}v_sin(\n")
    x = np.random.default_rng(3).uniform(-4.0, 4.0, 4099)
    got = run(wave_derivative, HOST, x)
    want, scale = _wave_derivative(x)
    assert np.all(np.abs(got - want) <= 1e-14 * scale + 1e-300)
    assert np.all(np.abs(got - run(wave_derivative, SCALAR, x)) <= 1e-14 * scale + 1e-300)


@needs_libmvec
def test_adjoint_of_vectorized_math():
    x = np.random.default_rng(4).uniform(-4.0, 4.0, 4099)
    y, dx, dy = np.zeros_like(x), np.zeros_like(x), np.ones_like(x)
    gpuc.adjoint(wave_kernel).launch(x.size, x, dx, y, dy, device="cpu", threads=1)
    want, scale = _wave_derivative(x)
    assert np.all(np.abs(dx - want) <= 1e-14 * scale + 1e-300) and not dy.any()
    value = np.sin(x) * np.exp(-x * x) + np.log1p(x * x)
    assert np.allclose(y, value, rtol=1e-14, atol=1e-15)


@gpuc.func
def damped(x):
    acc = x
    for _ in range(16):
        acc = 0.9 * acc + math.sin(acc)
    return acc


@gpuc.kernel
def damped_derivative(a, out):
    i = gpuc.index()
    out[i] = gpuc.derivative(damped, a[i])


@gpuc.kernel
def damped_kernel(a, out):
    i = gpuc.index()
    out[i] = damped(a[i])


def _damped(x):
    acc, tangent = x.copy(), np.ones_like(x)
    for _ in range(16):
        acc, tangent = 0.9 * acc + np.sin(acc), (0.9 + np.cos(acc)) * tangent
    return acc, tangent


@needs_avx2
def test_unrolled_loop_derivative_is_vectorized_and_right(filecheck):
    # The tangent of the unrolled loop is larger than the inliner's threshold: it is inlined into the
    # launch loop all the same (the autodiff plugin's `_inline_for_loop`), or nothing would vectorize.
    checks = ("CHECK-LABEL: define {{.*}}@damped_derivative{{.*}}.range(\n"
              "CHECK: call <{{[0-9]+}} x double> @_ZGV{{[de]}}N{{[0-9]+}}v_{{sin|cos}}(\n")
    filecheck(ir(damped_derivative, float64), checks)
    x = np.random.default_rng(5).uniform(-3.0, 3.0, 2053)
    _, want = _damped(x)
    assert np.allclose(run(damped_derivative, HOST, x), want, rtol=1e-11, atol=1e-11)
    assert np.allclose(run(damped_derivative, SCALAR, x), want, rtol=1e-11, atol=1e-11)


@needs_avx2
def test_adjoint_of_unrolled_loop_is_vectorized_and_right(filecheck):
    t = Array[float64, 1]
    text = gpuc.code_llvm(gpuc.adjoint(damped_kernel), (t,) * 4)
    # the adjoint runs in the work-item vectorizer's lanes (its chunk loop), cos through libmvec
    filecheck(text, "CHECK-LABEL: vec.chunk:\nCHECK: call <{{[0-9]+}} x double> @_ZGV{{[de]}}N{{[0-9]+}}v_cos(\n")
    x = np.random.default_rng(6).uniform(-3.0, 3.0, 2053)
    y, dx, dy = np.zeros_like(x), np.zeros_like(x), np.ones_like(x)
    gpuc.adjoint(damped_kernel).launch(x.size, x, dx, y, dy, device="cpu", threads=1)
    value, want = _damped(x)
    assert np.allclose(dx, want, rtol=1e-11, atol=1e-11) and np.allclose(y, value, rtol=1e-13, atol=1e-13)


def test_option_from_the_command_line_and_pickling():
    import pickle

    assert gpuc.NativeTarget.from_cli({"vector-math": "off"}) == SCALAR
    assert gpuc.NativeTarget.from_cli({"vector-math": "on"}) == HOST
    with pytest.raises(ValueError, match="vector_math is on or off, not 'maybe'"):
        gpuc.NativeTarget(vector_math="maybe")
    again = pickle.loads(pickle.dumps(HOST))
    assert again == HOST and again.vector_variants == HOST.vector_variants
