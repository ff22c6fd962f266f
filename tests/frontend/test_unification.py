"""Where paths join, a variable's types unify as Numba unifies them (docs/frontend.md "Joins"): two scalar types
give their NumPy promotion (`int64` and `float64`: `float64`; `bool` and `int64`: `int64`; `int64` and `uint64`:
`float64`), tuples element by element, and each path's value is converted where the paths meet. The same
holds for the types of a func's several returns.

The reference is Numba's own unification: each function also runs under `numba.njit` where Numba is
installed, and gpuc's result has Numba's type and value. Without Numba, the expected type is NumPy's
`promote_types` of the paths' types (the rule Numba implements) and the value Python's, converted."""

from __future__ import annotations

import numpy as np
import pytest

import gpuc
from gpuc import boolean, float32, float64, int32, int64, uint32, uint64
from gpuc.frontend.passes.inference import Typing
from gpuc.runtime.dispatch import default_device

from support.joins import if_else_first_binding, if_no_else
from support.native import native

# The tests that launch kernels or run funcs (support.native) run natively and through OpenCL.
ON_DEVICES = pytest.mark.devices("cpu", "opencl")

try:
    import numba
except ImportError:  # pragma: no cover - numba is an optional anchor
    numba = None

NUMPY = {boolean: np.bool_, int32: np.int32, int64: np.int64, uint32: np.uint32, uint64: np.uint64,
         float32: np.float32, float64: np.float64}
VALUES = {boolean: [True, False], int32: [-3, 7], int64: [-5, 2**40], uint32: [3, 2**32 - 1],
          uint64: [2**64 - 1, 9], float32: [2.5, -0.0], float64: [0.25, -1e300]}
TYPES = list(VALUES)


def result_type(fn, argtypes):
    return Typing(gpuc.NativeTarget()).function(fn, tuple(argtypes)).return_type


def check(fn, argtypes, args, want_type):
    """`fn` returns `want_type`, with the value Python gives converted to it, and what Numba gives."""
    assert result_type(fn, argtypes) == want_type
    got = native(fn, argtypes)(*args)
    py_args = [NUMPY[t](a) for t, a in zip(argtypes, args)]
    with np.errstate(all="ignore"):
        want = NUMPY[want_type](fn.py_func(*py_args))
    assert np.asarray(got, NUMPY[want_type]).tobytes() == np.asarray(want).tobytes(), (got, want)
    if numba is not None and default_device.get() == "cpu":  # Numba's side does not depend on gpuc's device
        jitted = numba.njit(fn.py_func)
        nb = jitted(*py_args)
        nb_type = str(jitted.nopython_signatures[-1].return_type)
        assert nb_type == {"bool": "bool"}.get(want_type.name, want_type.name), (nb_type, want_type)
        assert np.asarray(nb, NUMPY[want_type]).tobytes() == np.asarray(got, NUMPY[want_type]).tobytes()


def unified(a, b):
    return gpuc.frontend.as_type(np.promote_types(NUMPY[a], NUMPY[b]).type)


@gpuc.func
def two_returns(x, y, c):
    if c > 0:
        return x
    return y


@gpuc.func
def loop_carried(x, y, n):
    v = x
    for i in range(n):
        v = y
    return v


@gpuc.func
def while_break(x, y, n):
    v = x
    i = 0
    while True:
        if i >= n:
            break
        v = y
        i += 1
    return v


@ON_DEVICES
@pytest.mark.parametrize("fn", [if_no_else, if_else_first_binding, two_returns, loop_carried, while_break],
                         ids=lambda f: f.py_func.__name__)
@pytest.mark.parametrize("a", TYPES, ids=str)
@pytest.mark.parametrize("b", TYPES, ids=str)
def test_two_scalar_types_unify_to_their_promotion(fn, a, b):
    want_type = unified(a, b)
    for x in VALUES[a]:
        for y in VALUES[b][:1]:
            for c in (0, 1, 2):
                check(fn, (a, b, int64), (x, y, c), want_type)


@gpuc.func
def accumulate(n):
    acc = 0
    for i in range(n):
        acc = acc + 0.5   # int64 at the entry, float64 around the back edge: float64 at the header
    return acc


@gpuc.func
def count_flags(n):
    seen = False
    for i in range(n):
        if i % 3 == 0:
            seen = seen + 1   # bool, then int64: the header unifies to int64
    return seen


@gpuc.func
def literal_paths(c):
    v = 7
    if c > 0:
        v = 2.5
    return v * 2


@ON_DEVICES
@pytest.mark.parametrize("fn, want_type", [(accumulate, float64), (count_flags, int64), (literal_paths, float64)],
                         ids=lambda v: getattr(getattr(v, "py_func", None), "__name__", str(v)))
def test_loops_and_literals_unify_like_numba(fn, want_type):
    for n in (0, 1, 4, 7):
        check(fn, (int64,), (n,), want_type)


@gpuc.func
def tuple_paths(x, c):
    t = (x, True)
    if c > 0:
        t = (2.5, 3)
    return t[0] + t[1]


@gpuc.func
def tuple_read(c):
    t = (1, False)
    if c > 0:
        t = (0.5, 2)
    a, b = t
    return a * 10 + b


@ON_DEVICES
def test_tuples_unify_element_by_element():
    for c in (0, 1):
        check(tuple_paths, (int32, int64), (np.int32(4), c), float64)
        check(tuple_read, (int64,), (c,), float64)


@gpuc.kernel
def stores_unified(out, flags, c):
    i = gpuc.index()
    v = i
    if flags[i] > c:
        v = flags[i] * 0.5
    out[i] = v


@ON_DEVICES
def test_a_kernel_storing_a_unified_variable():
    flags = np.arange(16, dtype=np.int64)
    out = np.zeros(16)
    stores_unified[16](out, flags, 7)
    want = np.where(flags > 7, flags * 0.5, np.arange(16))
    assert np.array_equal(out, want)


@gpuc.func
def scalar_or_tuple(c):
    v = 1
    if c > 0:
        v = (1, 2)
    return v


@gpuc.func
def tuple_lengths(c):
    v = (1, 2)
    if c > 0:
        v = (1, 2, 3)
    return v[0]


@pytest.mark.parametrize("fn", [scalar_or_tuple, tuple_lengths], ids=lambda f: f.py_func.__name__)
def test_types_without_a_unification_stay_a_located_error(fn):
    with pytest.raises(gpuc.CompilationError, match=r"'v' has different types on different paths") as info:
        gpuc.code_llvm(fn, (int64,))
    assert "test_unification.py:" in str(info.value)
