"""The worked example of docs/frontend.md, "Adding a builtin": a toy builtin registered from outside
gpuc, typed, lowered and run, against the Python function it stands for."""

import numpy as np
import pytest

import gpuc
from gpuc.frontend.core import registry
from gpuc.frontend.core.plans import CallPlan, Handler
from gpuc.frontend.core.types import common_type, float64


def lerp(a, b, t):
    """a + t * (b - a): what Python runs, and what kernels compute."""
    return a + t * (b - a)


class Lerp(Handler):
    name = "lerp"

    def type(self, typer, node):
        types = self.scalars(typer, node, 3)  # three numbers, or a located error
        result = common_type(types, [typer.is_weak(a) for a in node.args])
        if not result.is_float:
            result = float64  # integers interpolate in float64
        for a in node.args:
            typer.fit(a, result)  # a literal must fit the result's type
        return CallPlan(result, tuple(types))

    def lower(self, lw, node, plan):
        a, b, t = (lw.operand(arg, plan.result) for arg in node.args)  # each converted to the result's type
        return lw.b.fadd(a, lw.b.fmul(t, lw.b.fsub(b, a)))


@pytest.fixture
def registered():
    registry.register(lerp, Lerp())
    yield
    registry.unregister(lerp)


@gpuc.kernel
def blend(a, b, t, out):
    i = gpuc.index()
    out[i] = lerp(a[i], b[i], t[i])


@gpuc.kernel
def blend_literal(a, out):
    i = gpuc.index()
    out[i] = lerp(a[i], 1.0, 0.25)


@gpuc.kernel
def blend_two(a, out):
    i = gpuc.index()
    out[i] = lerp(a[i], 1.0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_builtin_runs_as_python_computes_it(registered, dtype):
    rng = np.random.default_rng(5)
    a, b, t = (rng.normal(size=64).astype(dtype) for _ in range(3))
    out = np.zeros(64, dtype)
    blend[64](a, b, t, out, threads=1)
    want = np.array([lerp(x, y, s) for x, y, s in zip(a, b, t)], dtype)  # NumPy scalars: the same rounding
    np.testing.assert_array_equal(out, want)


def test_integers_interpolate_in_float64(registered):
    a, b, t = np.arange(8), np.arange(8) * 3, np.full(8, 2)
    out = np.zeros(8)
    blend[8](a, b, t, out)
    np.testing.assert_array_equal(out, [lerp(float(x), float(y), float(s)) for x, y, s in zip(a, b, t)])


def test_a_literal_takes_the_arrays_type(registered):
    a = np.linspace(-1, 1, 16, dtype=np.float32)
    out = np.zeros(16, np.float32)
    blend_literal[16](a, out)
    np.testing.assert_array_equal(out, [lerp(x, np.float32(1.0), np.float32(0.25)) for x in a])


def test_a_wrong_call_is_a_located_error(registered):
    with pytest.raises(gpuc.CompilationError, match=r"lerp\(\) takes 3 argument") as info:
        blend_two[4](np.zeros(4), np.zeros(4))
    assert "test_adding_a_builtin.py" in str(info.value)


def test_a_second_handler_is_refused_and_unregister_forgets_it(registered):
    with pytest.raises(ValueError, match="is registered"):
        registry.register(lerp, Lerp())
    registry.register(lerp, Lerp(), replace=True)
    assert isinstance(registry.lookup_call(lerp), Lerp)


def test_unregistered_it_is_an_unknown_call():
    assert registry.lookup_call(lerp) is None
    with pytest.raises(gpuc.CompilationError, match="lerp"):
        blend_literal[4](np.zeros(4), np.zeros(4))


def test_public_names_come_from_the_registry():
    public = registry.public_names()
    assert public["atomic_add"].obj is gpuc.atomic_add and public["atomic_add"].group == "atomics"
    assert set(public) <= set(gpuc.__all__)
    with pytest.raises(AttributeError, match="gpuc.shfl_xor"):
        gpuc.no_such_builtin
