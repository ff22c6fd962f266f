"""The tangent transformation (gpuc.plugins.autodiff) on IR gpuc's frontend makes: derivatives of
@gpuc.func functions through the CPU JIT against analytic ones, first to fourth order."""

from __future__ import annotations

import math

import pytest
from tangent_cases import BINARY, CASES, MATH_BINARY, MATH_UNARY, UNARY, fact_pow, m_exp, m_log, m_sin, poly
from tangent_helpers import Jitted, close, derivative_chain, tangent

import gpuc
import gpuc.llvm as llvm

F64, F32 = gpuc.float64, gpuc.float32
REL = {"double": 1e-12, "float": 1e-5}


def _ir(fn, argtypes, **kw) -> str:
    return gpuc.code_llvm(fn, argtypes, **kw)


def _entry(module: llvm.Module) -> llvm.Function:
    (fn,) = [f for f in module.functions if not f.is_declaration and f.linkage == "external"]
    return fn


def _tangent_of(fn, argtypes, *, optimize=True):
    """(jit, call) for the tangent of @gpuc.func `fn` on `argtypes` in x (its first parameter)."""
    ir = _ir(fn, argtypes, optimize=optimize)
    module = llvm.Module.parse(ir)
    name = _entry(module).name
    module.close()
    return tangent(ir, name, [True] + [False] * (len(argtypes) - 1))


def _argtypes(extra, ftype):
    return (ftype,) + tuple(gpuc.int64 if isinstance(v, int) else ftype for v in extra)


@pytest.mark.parametrize("ftype", [F64, F32], ids=["f64", "f32"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_frontend_functions(case, ftype):
    name, fn, extra, derivative, points = case
    jit, call = _tangent_of(fn, _argtypes(extra, ftype))
    rel = 1e-12 if ftype is F64 else 1e-5
    try:
        for x in points:
            value, dvalue = call(x, *extra, 1.0)
            assert close(value, fn(x, *extra), rel)  # the primal result is intact
            assert close(dvalue, derivative(x, *extra), rel), (name, x, dvalue, derivative(x, *extra))
            # the tangent is linear in the seed
            assert close(call(x, *extra, -2.5)[1], -2.5 * dvalue, rel)
    finally:
        jit.close()


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_unoptimized_frontend_functions(case):
    # Before optimization the frontend's variables live in stack slots: their shadows carry the tangents.
    name, fn, extra, derivative, points = case
    jit, call = _tangent_of(fn, _argtypes(extra, F64), optimize=False)
    try:
        for x in points:
            assert close(call(x, *extra, 1.0)[1], derivative(x, *extra), 1e-12), (name, x)
    finally:
        jit.close()


@pytest.mark.parametrize("ftype", [F64, F32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_math_unary(name, ftype):
    # m_<name>(x) = math.<name>(2x) - x
    derivative, points = UNARY[name]
    jit, call = _tangent_of(MATH_UNARY[name], (ftype,))
    rel = 1e-12 if ftype is F64 else 1e-5
    try:
        for p in points:
            value, dvalue = call(p / 2, 1.0)
            assert close(dvalue, 2 * derivative(p) - 1, rel), (name, p, dvalue)
    finally:
        jit.close()


@pytest.mark.parametrize("ftype", [F64, F32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_math_binary(name, ftype):
    (c_a, d_a), (c_b, d_b), points = BINARY[name]
    rel = 1e-12 if ftype is F64 else 1e-5
    for fn, c, derivative in ((MATH_BINARY[name][0], c_a, d_a), (MATH_BINARY[name][1], c_b, d_b)):
        jit, call = _tangent_of(fn, (ftype, ftype))
        try:
            for x in points:
                assert close(call(x, c, 1.0)[1], derivative(x, c), rel), (fn, x)
        finally:
            jit.close()


def _chain(fn, argtypes, order):
    module = llvm.Module.parse(_ir(fn, argtypes))
    g = derivative_chain(module, _entry(module), order)
    module.verify()
    name = g.name
    g.linkage = "external"
    llvm.run_passes(module, "default<O2>")
    jit = Jitted(module, name)
    return jit, jit.function(name)


# (function, extra arguments, n-th derivative in x, points)
HIGHER = [
    ("poly", poly, (), lambda n, x: [9 * x * x - 4 * x + 1, 18 * x - 4, 18.0, 0.0][n - 1], (0.3, -1.2)),
    ("sin2x", m_sin, (), lambda n, x: 2 ** n * math.sin(2 * x + n * math.pi / 2) - (n == 1), (0.3, 1.1)),
    ("exp2x", m_exp, (), lambda n, x: 2 ** n * math.exp(2 * x) - (n == 1), (0.3, -0.4)),
    ("log2x", m_log, (), lambda n, x: (-1) ** (n - 1) * math.factorial(n - 1) / x ** n - (n == 1), (0.3, 1.4)),
    ("recursion", fact_pow, (6,), lambda n, x, k: math.perm(k, n) * x ** (k - n), (0.7, 1.3)),
]


@pytest.mark.parametrize("order", [2, 3, 4])
@pytest.mark.parametrize("case", HIGHER, ids=[c[0] for c in HIGHER])
def test_higher_orders(case, order):
    name, fn, extra, derivative, points = case
    jit, call = _chain(fn, _argtypes(extra, F64), order)
    try:
        for x in points:
            expected = derivative(order, x, *extra)
            assert close(call(x, *extra), expected, 1e-11), (name, order, x, call(x, *extra), expected)
    finally:
        jit.close()


def test_higher_orders_in_float32():
    jit, call = _chain(m_sin, (F32,), 3)
    try:
        assert close(call(0.3), -8 * math.cos(0.6), 1e-5)
    finally:
        jit.close()


def _chain_size(fn, order: int, optimize_between: bool) -> int:
    """Instructions in the module once the order-th derivative of `fn` is built."""
    module = llvm.Module.parse(_ir(fn, (F64,)))
    derivative_chain(module, _entry(module), order, optimize_between=optimize_between)
    size = sum(len(list(f.instructions())) for f in module.functions)
    module.close()
    return size


@pytest.mark.parametrize("fn", [m_sin, m_log, poly], ids=["sin", "log", "poly"])
def test_nested_orders_cost_linear_when_inner_tangents_are_optimized(fn):
    # Nested dual numbers double per order (2**n components) unless each inner tangent is optimized
    # before the outer one is built, as the plugin's fixpoint does: then the IR grows linearly.
    sizes = {n: _chain_size(fn, n, True) for n in range(1, 7)}
    assert all(sizes[n] <= 3 * n * sizes[1] for n in sizes), sizes
