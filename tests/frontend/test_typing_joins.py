"""Where control flow joins, each path keeps its own variable types: differential tests of every join kind
(if/elif/else, early returns, loop headers, break/continue, conditional expressions, and/or) over every scalar type."""

from __future__ import annotations

import numpy as np
import pytest

import gpuc
from gpuc import Array, boolean, float32, float64, int32, int64, uint32, uint64

from support.joins import if_else_first_binding, if_no_else
from support.native import assert_same, native, python_args

# The tests that launch kernels or run funcs (support.native) run natively and through OpenCL.
ON_DEVICES = pytest.mark.devices("cpu", "opencl")

VALUES = {boolean: [True, False], int32: [3, -5, 2**31 - 1], int64: [3, -5, 0], uint32: [3, 2**32 - 1, 0],
          uint64: [3, 2**64 - 1], float32: [2.5, -0.0], float64: [2.5, -0.0, float("nan")]}
TYPES = list(VALUES)
INTEGERS = [int32, int64, uint32, uint64]
COUNTS = [0, 1, 2, 3, 5]


def same(fn, argtypes, *args):
    """`fn` compiled for `argtypes` returns what the interpreter returns (and writes the same arrays)."""
    py_args, gpu_args = python_args(argtypes, args), python_args(argtypes, args)
    with np.errstate(all="ignore"):
        want = fn(*py_args)
    assert_same(native(fn, argtypes)(*gpu_args), want)
    for p, g in zip(py_args, gpu_args):
        if isinstance(p, np.ndarray):
            assert_same(g, p)


def pairs(t):
    values = VALUES[t]
    return [(x, y) for x in values for y in values[:2]]


# -- one function per join kind; x and y have one type, c steers the paths -------------------------

@gpuc.func
def elif_chain(x, y, c):
    v = x
    if c == 0:
        v = y
    elif c == 1:
        w = 0.5  # another variable, another type, on one path only
        v = x
    elif c == 2:
        v = 1.5  # v changes type on a path that leaves
        return y
    else:
        pass
    return v


@gpuc.func
def then_rebinds_and_returns(x, y, c):
    v = x
    if c > 0:
        v = 2.5
        return y
    return v


@gpuc.func
def else_rebinds_and_returns(x, y, c):
    v = x
    if c > 0:
        pass
    else:
        v = 2.5
        return y
    return v


@gpuc.func
def loop_header(x, y, c):
    v = x
    for i in range(c):
        v = y if i % 2 == 0 else x
    return v


@gpuc.func
def loop_rebinds_and_returns(x, y, c):
    v = x
    for i in range(c):
        if i == 2:
            v = 0.5
            return y
        v = y
    return v


@gpuc.func
def loop_break(x, y, c):
    v = x
    for i in range(c):
        w = 0.5
        if i == 1:
            v = y
            break
        w = w * 2.0
    return v


@gpuc.func
def loop_continue(x, y, c):
    v = x
    for i in range(c):
        u = y
        if i % 2 == 0:
            continue
        v = u
    return v


@gpuc.func
def while_break_continue(x, y, c):
    v = x
    i = 0
    while True:
        i += 1
        if i > c:
            break
        if i % 2 == 1:
            continue
        v = y
    return v


@gpuc.func
def conditional_expression(x, y, c):
    return x if c > 1 else y


@gpuc.func
def and_or(x, y, c):
    return (c > 1 and x) or y


@gpuc.func
def carried_from_later_in_the_body(x, y, c):
    t = y
    for j in range(c):
        if j > 0:
            t = v
        v = x
    return t


@gpuc.func
def carried_in_a_while_loop(x, y, c):
    t = y
    j = 0
    while j < c:
        if j > 0:
            t = v
        v = x
        j += 1
    return t


@gpuc.func
def carried_through_nested_loops(x, y, c):
    t = y
    for i in range(c):
        for j in range(2):
            if i > 0:
                t = v
        v = x
    return t


JOINS = [if_no_else, if_else_first_binding, elif_chain, then_rebinds_and_returns, else_rebinds_and_returns,
         loop_header, loop_rebinds_and_returns, loop_break, loop_continue, while_break_continue,
         conditional_expression, and_or, carried_from_later_in_the_body, carried_in_a_while_loop,
         carried_through_nested_loops]


@ON_DEVICES
@pytest.mark.parametrize("t", TYPES, ids=str)
@pytest.mark.parametrize("fn", JOINS, ids=lambda f: f.__name__)
def test_every_join_keeps_each_paths_types(fn, t):
    for x, y in pairs(t):
        for c in COUNTS:
            same(fn, (t, t, int64), x, y, c)


# -- the reproducers ------------------------------------------------------------------------------

@ON_DEVICES
@pytest.mark.parametrize("t", INTEGERS, ids=str)
def test_early_return_does_not_leak_into_the_other_path(t):
    # `v = 7; if c > 0: v = 2.5; return 1` then `return v * 2` returned 0.0 for c=0, and `v << 1` was refused
    @gpuc.func
    def twice(x, c):
        v = x
        if c > 0:
            v = 2.5
            return 1
        return v * 2

    @gpuc.func
    def shifted(x, c):
        v = x
        if c > 0:
            v = 2.5
            return 1
        return v << 1

    for c in (0, 1):
        same(twice, (t, int64), 7, c)
        same(shifted, (t, int64), 7, c)


@ON_DEVICES
def test_if_without_else_joining_two_types_unifies_them():
    # the then-branch's float64 used to leak into the other path, storing 0.0 where Python stores 7;
    # the paths' types now unify as Numba unifies them (tests/frontend/test_unification.py)
    @gpuc.kernel
    def k(out, c):
        v = 7
        if c > 0:
            v = 2.5
        out[0] = v

    for c in (0, 1):
        out = np.zeros(1)
        k[1](out, c)
        assert out[0] == (2.5 if c else 7.0)


@ON_DEVICES
def test_each_branch_starts_from_the_types_before_the_if():
    # the else-branch (and the code after an if without else) saw the then-branch's bindings
    @gpuc.func
    def f(x, c):
        v = x
        if c > 0:
            v = 0.5
            w = v * 3.0
            return w
        else:
            u = v << 2
        return float(u + v)

    for c in (0, 1):
        same(f, (int64, int64), 5, c)


@ON_DEVICES
def test_a_loop_carried_variable_assigned_later_in_the_body():
    # `if j > 0: t += v` then `v = 2.5` was refused as "used before it is assigned"; Python gives 5.0
    @gpuc.func
    def f(n):
        t = 0.0
        for j in range(n):
            if j > 0:
                t += v
            v = 2.5
        return t

    for n in (0, 1, 3):
        same(f, (int64,), n)


def test_a_variable_no_path_assigns_is_still_an_error():
    @gpuc.func
    def f(n):
        t = 0.0
        for j in range(n):
            while t < 10.0:
                t += v
        v = 2.5
        return t

    @gpuc.func
    def g(n):
        t = 0.0
        for i in range(n):
            for j in range(n):
                if j > 0:
                    t += w
        return t

    with pytest.raises(gpuc.CompilationError, match="'v' is used before it is assigned"):
        gpuc.code_llvm(f, (int64,))
    with pytest.raises(gpuc.CompilationError, match="name 'w' is not defined"):
        gpuc.code_llvm(g, (int64,))


@ON_DEVICES
def test_a_loop_header_joining_two_types_unifies_them():
    @gpuc.func
    def f(n):
        v = 1
        w = 0
        for j in range(n):
            w = v + 1
            v = 0.5
        return w

    assert gpuc.code_llvm(f, (int64,))  # v is float64 at the header: w is float64 in the loop
    for n, want in ((0, 0.0), (1, 2.0), (3, 1.5)):
        assert native(f, (int64,))(n) == want


def test_a_scalar_and_a_tuple_at_one_join_are_still_the_documented_error():
    @gpuc.func
    def f(c):
        v = 1
        if c > 0:
            v = (1, 2)
        return v

    with pytest.raises(gpuc.CompilationError, match="'v' has different types"):
        gpuc.code_llvm(f, (int64,))


# -- arrays are typed by dtype and ndim: a contiguous and a strided array join -----------------------

C1, A1 = Array[float64, 1, "C"], Array[float64, 1]


@gpuc.func
def pick_conditional(xs, ys, c):
    a = xs if c > 0 else ys
    return a[1]


@gpuc.func
def pick_if(xs, ys, c):
    a = xs
    if c > 0:
        a = ys
    return a[1] + a[0]


@gpuc.func
def pick_in_loop(xs, ys, c):
    a = xs
    t = 0.0
    for i in range(c):
        t += a[i % 2]
        a = ys
    return t


@gpuc.func
def pick_tuple(xs, ys, c):
    p = (xs, 1) if c > 0 else (ys, 2)
    return p[0][p[1]]


@ON_DEVICES
@pytest.mark.parametrize("fn", [pick_conditional, pick_if, pick_in_loop, pick_tuple], ids=lambda f: f.__name__)
@pytest.mark.parametrize("layouts", [(C1, A1), (A1, C1), (C1, C1), (A1, A1)], ids=str)
def test_contiguous_and_strided_arrays_join(fn, layouts):
    # `a = xs if c > 0 else ys` with one strided and one contiguous array was refused
    base = np.arange(12.0)
    for c in (0, 1, 3):
        xs = base[::3].copy() if layouts[0] is C1 else base[::3]
        ys = (base[1:5] * 10).copy() if layouts[1] is C1 else base[::-2]
        want = fn(xs, ys, c)
        assert_same(native(fn, layouts + (int64,))(xs, ys, c), want)


@gpuc.func
def settles_after_a_conflicted_round(n):
    t = 0.0
    for i in range(n):
        if i > 0:
            t = x
        x = 1
        if i > 0:
            x = v * 2.0
        else:
            x = 0.5
        v = 0.25 * i
    return t


@gpuc.func
def returns_a_carried_value(n):
    for i in range(n):
        if i > 1:
            return y
        y = 1.5 * i
    return -1.0


@gpuc.func
def carried_around_two_loops(n):
    t = 0
    for i in range(n):
        j = 0
        while j < i:
            if j > 0:
                t += a + b
            a = j
            j += 1
        b = i
    return t


@ON_DEVICES
@pytest.mark.parametrize("fn", [settles_after_a_conflicted_round, returns_a_carried_value, carried_around_two_loops],
                         ids=lambda f: f.__name__)
def test_loop_typing_keeps_only_the_settled_rounds_types(fn):
    # while a loop is typed, statements reading not-yet-typed variables are skipped; nothing of those rounds may stick
    for n in range(6):
        same(fn, (int64,), n)


# An array bound on only some paths once became a null array that LLVM then "optimized" into the other
# path's array: a silently wrong read where Python raises UnboundLocalError.
@pytest.mark.parametrize("body", [
    "if c > 0:\n        a = xs\n    return a[0]",
    "for i in range(c):\n        a = xs\n    return a[0]",
    "for i in range(c + 2):\n        if i > 0:\n            t += a[0]\n        a = xs\n    return t",
    "t = (xs, 1)\n    if c > 0:\n        u = t\n    return u[0][0]",
])
def test_an_array_bound_on_only_some_paths_is_an_error(body, tmp_path):
    path = tmp_path / "partial_array.py"
    path.write_text(f"import gpuc\n\n@gpuc.func\ndef f(xs, c):\n    t = 0.0\n    {body}\n")
    namespace = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    with pytest.raises(gpuc.CompilationError, match="holds an array but is assigned on only some paths") as info:
        gpuc.code_llvm(namespace["f"], (Array[float64, 1], int64))
    assert "partial_array.py:" in str(info.value)


@ON_DEVICES
def test_an_array_bound_on_every_path_joins():
    @gpuc.func
    def f(xs, ys, c):
        if c > 0:
            a = xs
        else:
            a = ys
        for i in range(2):
            b = a
            s = b[i]
        return a[0] + s

    xs, ys = np.array([1.0, 2.0]), np.array([3.0, 5.0])
    for c in (0, 1):
        same(f, (Array[float64, 1], Array[float64, 1], int64), xs, ys, c)


@gpuc.func
def _halve(x, n):
    return x * 0.5


@gpuc.func
def pointer_assigned_on_every_branch(x, n):
    # the elif reads v, which the body assigns later through a pointer every branch assigns: the first
    # round of the loop types both branches of the elif without its test (it used to skip the whole
    # if, leaving fp unbound)
    t = 0.0
    for j in range(n):
        if j > 5:
            fp = gpuc.deferred(_halve, x, n)
        elif min(0.0, v) >= 3:
            fp = gpuc.deferred(_halve, x, n)
        else:
            fp = gpuc.deferred(_halve, x, n)
        v = fp(x, n)
        t += v
    return t


@ON_DEVICES
def test_a_loop_carried_value_read_in_an_elif_before_a_pointer_call_assigns_it():
    for n in (0, 1, 4, 8):
        assert native(pointer_assigned_on_every_branch, (float64, int64))(3.0, n) == 1.5 * n


@gpuc.func
def read_before_a_later_binding_in_the_branch(p1):
    # the branch reads v8 (typed by a later statement of the body) before it binds v10: the round types
    # the rest of the branch, so v10 is bound where v8 = v10 reads it
    s = 0
    for j in range(3):
        if p1 > 0:
            s += v8
            v10 = 5
        v8 = v10
    return s


@ON_DEVICES
def test_a_branch_that_reads_a_later_typed_variable_still_binds_what_follows():
    f = native(read_before_a_later_binding_in_the_branch, (int64,))
    assert f(1) == 10  # v8 is 0 before any path assigns it (docs/frontend.md), then 5 twice
