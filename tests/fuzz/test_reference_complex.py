"""The random-program reference's complex arithmetic and run-time slices (support.complexes, support.views)
against their definitions: Python's complex numbers (complex128: docs/frontend.md promises Python's value
bit for bit for `+ - * /` and integer powers), NumPy's complex64 parts, Python's slice.indices."""

from __future__ import annotations

import ast
import itertools
import math

import numpy as np
import pytest

from support.complexes import evaluate_binop
from support.fuzz import same
from support.reference import Program
from support.typer import unify

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # IEEE's inf and NaN, as intended

PARTS = [0.0, -0.0, 1.5, -2.25, 3e-310, 1e300, -7.0, math.inf, -math.inf, math.nan]
OPS = [ast.Add(), ast.Sub(), ast.Mult(), ast.Div()]


def bits(z) -> tuple:
    """The parts of z exactly: NaN as NaN, the sign of zero kept."""
    return tuple("nan" if math.isnan(p) else p.hex() for p in (float(z.real), float(z.imag)))


def test_complex128_arithmetic_is_pythons():
    values = [complex(a, b) for a, b in itertools.product(PARTS, repeat=2)]
    checked = 0
    for a, b in itertools.product(values[::3], values[::2]):
        for op in OPS:
            if isinstance(op, ast.Div) and b == 0:
                continue  # Python raises; the docs give each part divided by +0.0 (below)
            want = {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b, ast.Div: a / b if b else None}[type(op)]
            assert bits(evaluate_binop(op, a, b, "complex128")) == bits(want), (a, type(op).__name__, b)
            checked += 1
        for k in (0, 1, 2, 3, 5, -1, -2):
            try:
                want = a ** k
            except (ZeroDivisionError, OverflowError):
                continue  # Python raises; the docs give the IEEE value
            assert bits(evaluate_binop(ast.Pow(), a, None, "complex128", k)) == bits(want), (a, k)
    assert checked > 1000


def test_a_real_operand_becomes_complex_first_and_zero_divisors_divide_each_part():
    assert bits(evaluate_binop(ast.Mult(), math.inf, complex(1, 0), "complex128")) == bits(complex(math.inf, 0)
                                                                                         * complex(1, 0))
    z = evaluate_binop(ast.Div(), complex(1, -1), 0.0, "complex128")
    assert (z.real, z.imag) == (math.inf, -math.inf)
    z = evaluate_binop(ast.Div(), complex(0, 2), complex(-0.0, 0.0), "complex128")
    assert math.isnan(z.real) and z.imag == math.inf


def test_complex64_parts_round_like_numpys():
    rng = np.random.default_rng(3)
    for _ in range(300):
        a, b = (np.complex64(complex(*rng.normal(size=2) * 10.0 ** rng.integers(-3, 4, 2))) for _ in range(2))
        for op, f in ((ast.Add(), np.add), (ast.Sub(), np.subtract)):
            got = evaluate_binop(op, a, b, "complex64")
            assert type(got) is np.complex64 and bits(got) == bits(f(a, b))
        got = evaluate_binop(ast.Mult(), a, b, "complex64")
        re = np.float32(a.real * b.real) - np.float32(a.imag * b.imag)
        im = np.float32(a.real * b.imag) + np.float32(a.imag * b.real)
        assert bits(got) == bits(complex(re, im))


REALS = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64"]


def test_real_and_complex_unify_at_joins_as_numba_unifies_them():
    numba = pytest.importorskip("numba")
    from numba.core.typing import Context
    context = Context()
    for real, c in itertools.product(REALS, ["complex64", "complex128"]):
        want = str(context.unify_pairs(getattr(numba.types, "boolean" if real == "bool" else real),
                                       getattr(numba.types, c)))
        assert unify({real, c}) == want, (real, c)


@pytest.mark.parametrize("else_branch", [False, True])
def test_a_float64_joined_with_a_complex64_is_complex128(else_branch):
    source = ("import gpuc\n\n@gpuc.kernel\ndef kernel(o, x, z, c):\n    v = x\n    if c > 0:\n        v = z\n"
              if not else_branch else
              "import gpuc\n\n@gpuc.kernel\ndef kernel(o, x, z, c):\n    if c > 0:\n        v = z\n    else:\n"
              "        v = x\n")
    program = Program(source + "    o[0] = v\n    o[1] = v * 3\n")
    for c, want in ((0, complex(0.1, 0.0)), (1, complex(np.complex64(1.1 - 2j)))):
        o = np.zeros(2, np.complex128)
        program.run([o, np.float64(0.1), np.complex64(1.1 - 2j), np.int64(c)])
        # in complex128: 0.1 is not rounded to float32, and 0.1 * 3 is float64's product
        assert bits(o[0]) == bits(want) and bits(o[1]) == bits(want * 3), (c, o)
    o = np.zeros(2, np.complex128)
    program.run([o, np.float64(-0.0), np.complex64(1), np.int64(0)])
    assert bits(o[0]) == bits(complex(-0.0, 0.0))  # the real path's imaginary part is +0.0


def test_run_time_slices_follow_slice_indices():
    source = "import gpuc\n\n@gpuc.kernel\ndef kernel(o, a, lo, hi, st):\n    o[0] = len(a[lo:hi:st])\n    o[1] = a[lo:hi:st].sum()\n"
    program = Program(source)
    a = np.arange(1, 7, dtype=np.int64)
    for lo, hi, st in itertools.product([-100, -3, 0, 2, 5, 100], [-7, -1, 0, 4, 100], [-3, -1, 0, 1, 2, 7]):
        o = np.zeros(2, np.int64)
        program.run([o, a, np.int64(lo), np.int64(hi), np.int64(st)])
        want = a[lo:hi:st] if st else a[0:0]
        assert o.tolist() == [len(want), int(want.sum())], (lo, hi, st)
    o = np.zeros(2, np.int64)
    program.run([o, a, np.uint64(2**64 - 2), np.uint64(1), np.uint64(2**64 - 1)])  # huge: clipped
    assert o.tolist() == [0, 0]


def test_complex_results_compare_by_parts():
    want = np.array([complex(1, -0.0), complex(math.nan, 2)], np.complex128)
    exact = np.zeros(2)
    assert same(want.copy(), want, exact) == []
    assert same(np.array([complex(1, 0.0), complex(math.nan, 2)]), want, exact) != []  # the sign of zero
    near = want + np.array([1e-14j, 0])
    assert same(near, want, exact) != []
    assert same(near, want, np.full(2, 1e-13)) == []
