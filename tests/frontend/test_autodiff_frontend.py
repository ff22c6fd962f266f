"""gpuc.derivative and gpuc.jvp in the frontend: typing, the marker calls the frontend hands the compiler
(before any plugin), located errors, and values on the CPU against analytic derivatives, in kernels and
called from Python."""

from __future__ import annotations

import inspect
import math
import re

import numpy as np
import pytest

import gpuc
from gpuc import Array, float32, float64, int64
from gpuc.frontend import FunctionSource
from gpuc.llvm import Context
from gpuc.runtime import derivatives

F64_1 = Array[float64, 1]
# The tests that launch kernels run natively and through OpenCL.
ON_DEVICES = pytest.mark.devices("cpu", "opencl")


def frontend_ir(fn, argtypes) -> str:
    """The IR the frontend emits for fn(argtypes), before any plugin runs."""
    source = FunctionSource(fn, argtypes)
    module, _ = source.irgen(gpuc.CompilerJob(source, gpuc.CompilerConfig(gpuc.NativeTarget())), Context())
    try:
        return str(module)
    finally:
        module.close()


def markers(ir: str) -> list[str]:
    """The marker declarations: `<return type> @<name>(<params>)`."""
    return re.findall(r"^declare (.*@gpuc\.autodiff\.fwd\..*)$", ir, re.M)


def compile_error(fn, argtypes) -> gpuc.CompilationError:
    with pytest.raises(gpuc.CompilationError) as info:
        gpuc.code_llvm(fn, argtypes, optimize=False)
    return info.value


def line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn.py_func)
    return first + next(k for k, line in enumerate(lines) if text in line)


# -- functions differentiated ------------------------------------------------------------------------

@gpuc.func
def cube(x):
    return x * x * x + 2.0 * x


@gpuc.func
def weighted(x, a, n):
    return x * a[0] * n + x * x


@gpuc.func
def both(x, y):
    return (x * y, math.sin(x) + y)


@gpuc.func
def on_pair(p, s):
    return p[0] * p[1] * s


@gpuc.func
def counts(x):
    return int(x)


def plain(x):
    return x


# -- the IR the frontend emits -----------------------------------------------------------------------

@gpuc.func
def d_weighted(x, a):
    return gpuc.derivative(weighted, x, a, 3)


def test_derivative_marker_shape():
    ir = frontend_ir(d_weighted, (float64, F64_1))
    # x active, the array's three flattened parameters and n constant; the tangent of x is 1.0
    assert markers(ir) == ["{ double, double } @gpuc.autodiff.fwd.10000.SddE_pdpi64i64i64d"
                           "(ptr, double, ptr, i64, i64, i64, double)"]
    assert re.search(r"(%\S+) = call ptr @gpuc\.lookup\(ptr @weighted\.f64\.A1f64\.i64\)", ir)
    call = re.search(r"= call \{ double, double \} @gpuc\.autodiff\.fwd\.10000\.\S+\(ptr (%\S+), double %x\S*, "
                     r"ptr .*, i64 3, double 1\.0+e\+00\)", ir)
    assert call, ir
    assert re.search(r"extractvalue \{ double, double \} %\S+, 1", ir)
    assert "declare double @weighted.f64.A1f64.i64(" in ir  # compiled on demand, like a gpuc.deferred target


@gpuc.func
def j_both(x, y):
    return gpuc.jvp(both, (x, y), (1.0, 0))


@gpuc.func
def j_pair(x, y):
    return gpuc.jvp(on_pair, ((x, y), 2.0), ((1.0, 0.0), 0.0))


def test_jvp_marker_shape():
    (decl,) = markers(frontend_ir(j_both, (float64, float64)))
    assert decl == ("{ { double, double }, { double, double } } @gpuc.autodiff.fwd.11.SSddESddEE_pdddd"
                    "(ptr, double, double, double, double)")
    ir = frontend_ir(j_pair, (float64, float64))
    (decl,) = markers(ir)  # a tuple parameter is one struct parameter, and its tangent one struct too
    assert decl == ("{ double, double } @gpuc.autodiff.fwd.11.SddE_pSddEdSddEd"
                    "(ptr, { double, double }, double, { double, double }, double)")


@gpuc.func
def d_cube_f32(x):
    return gpuc.derivative(cube, x)


@gpuc.func
def d_cube_literal():
    return gpuc.derivative(cube, 2)


def test_marker_names_follow_the_types():
    (f32,) = markers(frontend_ir(d_cube_f32, (float32,)))
    (f64,) = markers(frontend_ir(d_cube_f32, (float64,)))
    assert f32 == "{ float, float } @gpuc.autodiff.fwd.1.SffE_pff(ptr, float, float)"
    assert f64 == "{ double, double } @gpuc.autodiff.fwd.1.SddE_pdd(ptr, double, double)"
    # an int literal is the float64 it converts to, as Python's and NumPy's arithmetic would make it
    ir = frontend_ir(d_cube_literal, ())
    assert re.search(r"@gpuc\.autodiff\.fwd\.1\.SddE_pdd\(ptr %\S+, double 2\.0+e\+00, double 1\.0+e\+00\)", ir)


@gpuc.func
def d_cube(x):
    return gpuc.derivative(cube, x)


@gpuc.func
def dd_cube(x):
    return gpuc.derivative(d_cube, x)


def test_nested_derivative_types_and_lowers():
    ir = frontend_ir(dd_cube, (float64,))
    assert "call ptr @gpuc.lookup(ptr @d_cube.f64)" in ir and "declare double @d_cube.f64(double)" in ir
    assert len(markers(ir)) == 1  # the inner request is in d_cube's body, compiled on demand


# -- located errors ----------------------------------------------------------------------------------

@gpuc.func
def e_int_x(n):
    return gpuc.derivative(cube, n)


@gpuc.func
def e_int_result(x):
    return gpuc.derivative(counts, x)


@gpuc.func
def e_python_f(x):
    return gpuc.derivative(plain, x)


@gpuc.func
def e_arity(x):
    return gpuc.derivative(weighted, x)


@gpuc.func
def e_tangent_structure(x, y):
    return gpuc.jvp(on_pair, ((x, y), 2.0), (1.0, 0.0))


@gpuc.func
def e_tangent_type(x, y):
    return gpuc.jvp(both, (x, y), (gpuc.float32(1.0), 0.0))


@gpuc.func
def e_primals(x):
    return gpuc.jvp(cube, x, 1.0)


@gpuc.func
def e_vjp_int_primal(x, n):
    return gpuc.vjp(both, (x, n), 1.0)


@gpuc.func
def e_missing_x():
    return gpuc.derivative(cube)


@gpuc.kernel
def k_noop(out):
    out[0] = 1.0


@gpuc.func
def e_kernel_f(x):
    return gpuc.derivative(k_noop, x)


@pytest.mark.parametrize("fn, argtypes, words, hint, at", [
    (e_int_x, (int64,), "must be a float (float32 or float64), not an int64", "float(n)", "derivative(cube, n)"),
    (e_int_result, (float64,), "counts(float64) returns an int64", "return a float", "derivative(counts"),
    (e_python_f, (float64,), "not the Python function plain", "@gpuc.func", "derivative(plain"),
    (e_arity, (float64,), "weighted takes 3 argument(s), but gpuc.derivative passes it 1", "constant", "weighted, x"),
    (e_tangent_structure, (float64, float64), "this tangent is a float64, but its primal is a tuple[float64, float64]",
     "structure", "jvp(on_pair"),
    (e_tangent_type, (float64, float64), "this tangent is a float32, but its primal is a float64", "float32",
     "jvp(both"),
    (e_primals, (float64,), "the primals of gpuc.jvp must be a tuple, not a float64", "(x,)", "jvp(cube"),
    (e_vjp_int_primal, (float64, int64), "a primal of gpuc.vjp must be a float (float32 or float64), not an int64",
     "float(n)", "vjp(both"),
    (e_missing_x, (), "takes the function and the point x, but 1 argument(s) were given", "derivative(f, x)",
     "derivative(cube)"),
    (e_kernel_f, (float64,), "not the kernel k_noop", "@gpuc.func", "derivative(k_noop"),
])
def test_errors_are_located(fn, argtypes, words, hint, at):
    err = compile_error(fn, argtypes)
    assert words in str(err) and hint in (err.hint or "")
    assert err.location.line == line_of(fn, at) and err.location.file.endswith("test_autodiff_frontend.py")


def test_python_level_errors_point_at_the_caller():
    with pytest.raises(gpuc.CompilationError, match="must be a float") as info:
        gpuc.derivative(cube, "2.0")
    assert info.value.location.line == inspect.currentframe().f_lineno - 1
    with pytest.raises(gpuc.CompilationError, match="differentiates @gpuc.func functions"):
        gpuc.derivative(plain, 2.0)
    with pytest.raises(gpuc.CompilationError, match="takes 3 argument"):
        gpuc.derivative(weighted, 2.0)
    with pytest.raises(gpuc.CompilationError, match="structure of its primal"):
        gpuc.jvp(on_pair, ((1.0, 2.0), 3.0), (1.0, 0.0))
    with pytest.raises(gpuc.CompilationError, match="returns an int64"):
        gpuc.derivative(counts, 2.0)
    with pytest.raises(gpuc.CompilationError, match="for tuples of floats use gpuc.jvp"):
        gpuc.derivative(on_pair, (1.0, 2.0), 3.0)



@gpuc.func
def e_grad(x):
    return gpuc.grad(cube)(x)


def test_names_from_other_libraries_point_to_derivatives():
    with pytest.raises(AttributeError, match=r"gpuc\.vjp\(f, primals, cotangent\)"):
        gpuc.jacrev
    with pytest.raises(AttributeError, match=r"gpuc\.grad\(f, \*args\)"):
        gpuc.hessian
    # jax.grad(f)(x) written the JAX way: gpuc.grad takes the point too
    err = compile_error(e_grad, (float64,))
    assert "gpuc.grad(f, x)" in str(err) and "jax.grad" in str(err)
    assert err.location.line == line_of(e_grad, "gpuc.grad")


# -- values on the CPU -------------------------------------------------------------------------------

@gpuc.func
def rational(x):
    return (x * x + 1.0) / (x - 3.0)


@gpuc.func
def mix(x):
    return math.exp(math.sin(x)) * math.log(x) + math.sqrt(x) * math.tanh(x)


@gpuc.func
def power(x, n):
    return x ** n + math.atan(x)


@gpuc.func
def horner(x, c):
    y = 0.0
    for k in range(len(c)):
        y = y * x + c[k]
    return y


COEFFS = np.array([2.0, -1.0, 0.5, 3.0])


def horner_slope(x):
    n = len(COEFFS) - 1
    return sum(COEFFS[k] * (n - k) * x ** (n - k - 1) for k in range(n))


@pytest.mark.parametrize("f, consts, slope", [
    (cube, (), lambda x: 3 * x * x + 2),
    (rational, (), lambda x: (2 * x * (x - 3) - (x * x + 1)) / (x - 3) ** 2),
    (mix, (), lambda x: (math.exp(math.sin(x)) * (math.cos(x) * math.log(x) + 1 / x)
                         + 0.5 / math.sqrt(x) * math.tanh(x) + math.sqrt(x) * (1 - math.tanh(x) ** 2))),
    (power, (3,), lambda x: 3 * x * x + 1 / (1 + x * x)),
    (weighted, (np.array([1.5]), 2), lambda x: 3.0 + 2 * x),
    (horner, (COEFFS,), horner_slope),
])
@ON_DEVICES
@pytest.mark.not_on("opencl", "derivatives called from Python run on the CPU runtime")
def test_python_level_derivatives_match_analytic(f, consts, slope):
    for x in (0.7, 1.3, 2.9):
        assert gpuc.derivative(f, x, *consts) == pytest.approx(slope(x), rel=1e-12)


@ON_DEVICES
@pytest.mark.not_on("opencl", "derivatives called from Python run on the CPU runtime")
def test_float32_derivative():
    got = gpuc.derivative(mix, np.float32(1.3))
    assert got == pytest.approx(gpuc.derivative(mix, 1.3), rel=1e-5)
    assert gpuc.derivative(cube, 2) == 14.0  # an int is the float64 it converts to


@ON_DEVICES
@pytest.mark.not_on("opencl", "derivatives called from Python run on the CPU runtime")
def test_python_level_jvp_with_two_arguments_and_tuples():
    value, tangent = gpuc.jvp(both, (2.0, 3.0), (1.0, 0.5))
    assert value == pytest.approx((6.0, math.sin(2.0) + 3.0), rel=1e-15)
    assert tangent == pytest.approx((3.0 + 2.0 * 0.5, math.cos(2.0) + 0.5), rel=1e-15)
    value, tangent = gpuc.jvp(on_pair, ((2.0, 5.0), 3.0), ((1.0, 0.0), 0))
    assert (value, tangent) == pytest.approx((30.0, 15.0), rel=1e-15)
    value, tangent = gpuc.jvp(on_pair, ((2.0, 5.0), 3.0), ((0.0, 1.0), 1.0))
    assert tangent == pytest.approx(2.0 * 3.0 + 10.0, rel=1e-15)


@ON_DEVICES
@pytest.mark.not_on("opencl", "derivatives called from Python run on the CPU runtime")
def test_python_level_calls_compile_once_per_signature():
    gpuc.derivative(rational, 1.0)
    size = len(derivatives._CACHE)
    gpuc.derivative(rational, 2.0)
    assert len(derivatives._CACHE) == size
    gpuc.derivative(rational, np.float32(2.0))
    assert len(derivatives._CACHE) == size + 1


@gpuc.func
def ddd_sin(x):
    return gpuc.derivative(dd_sin, x)


@gpuc.func
def dd_sin(x):
    return gpuc.derivative(d_sin, x)


@gpuc.func
def d_sin(x):
    return gpuc.derivative(sin2, x)


@gpuc.func
def sin2(x):
    return math.sin(2.0 * x) - x * x * x


@ON_DEVICES
@pytest.mark.not_on("opencl", "derivatives called from Python run on the CPU runtime")
def test_second_and_third_order_by_nesting():
    for x in (0.3, 1.7):
        assert gpuc.derivative(d_cube, x) == pytest.approx(6 * x, rel=1e-12)
        assert gpuc.derivative(d_sin, x) == pytest.approx(-4 * math.sin(2 * x) - 6 * x, rel=1e-12)
        assert gpuc.derivative(dd_sin, x) == pytest.approx(-8 * math.cos(2 * x) - 6, rel=1e-12)
        assert gpuc.derivative(ddd_sin, x) == pytest.approx(16 * math.sin(2 * x), rel=1e-12)


@gpuc.kernel
def slopes(out, xs, c):
    i = gpuc.index()
    out[i] = gpuc.derivative(horner, xs[i], c) + gpuc.jvp(both, (xs[i], 2.0), (0.0, 1.0))[1][1]


@ON_DEVICES
def test_derivative_in_a_kernel_over_an_array():
    xs = np.linspace(-2.0, 3.0, 101)
    out = np.zeros_like(xs)
    slopes[len(xs)](out, xs, COEFFS)
    np.testing.assert_allclose(out, [horner_slope(x) + 1.0 for x in xs], rtol=1e-12, atol=1e-14)
    ir = gpuc.code_llvm(slopes, (F64_1, F64_1, F64_1))
    assert "gpuc.autodiff" not in ir and "gpuc.lookup" not in ir


@gpuc.func
def scaled_exp(x, y):
    return math.exp(x) * y


@gpuc.func
def jvp_of_variables(x, y):
    primals, tangents = (x, y), (1.0, 2.0)
    return gpuc.jvp(scaled_exp, primals, tangents)[1]


@gpuc.kernel
def exp_slopes(out, xs):
    i = gpuc.index()
    out[i] = gpuc.derivative(scaled_exp, xs[i], 3.0) + jvp_of_variables(xs[i], 1.0)


@ON_DEVICES
def test_tuple_variables_as_primals_and_tangents():
    xs = np.array([-1.0, 0.5, 2.0])
    out = np.zeros_like(xs)
    exp_slopes[len(xs)](out, xs)
    np.testing.assert_allclose(out, np.exp(xs) * 3.0 + np.exp(xs) * (1.0 + 2.0), rtol=1e-14)


@gpuc.func
def jvp_sin2(x):
    return gpuc.jvp(sin2, (x,), (1.0,))[1]


@gpuc.kernel
def second_slopes(out, xs):
    i = gpuc.index()
    out[i] = gpuc.derivative(jvp_sin2, xs[i]) + gpuc.derivative(mix, xs[i])


@ON_DEVICES
def test_derivative_of_a_jvp_in_float32_and_float64():
    for dtype, rtol in ((np.float64, 1e-12), (np.float32, 1e-5)):
        xs = np.linspace(0.25, 2.5, 19, dtype=dtype)
        out = np.zeros_like(xs)
        second_slopes[len(xs)](out, xs)
        want = [-4 * math.sin(2 * x) - 6 * x + gpuc.derivative(mix, x) for x in xs.astype(float)]
        np.testing.assert_allclose(out, want, rtol=rtol, atol=rtol)
