"""User errors: each names the problem, says what to do, and points at file:line:col with the line and a caret."""

from __future__ import annotations

import inspect
import dataclasses
import math

import pytest

import gpuc
from gpuc import Array, float64, int64

from support.located_errors import check, compile_error

GLOBAL_LIST = [1, 2, 3]


def plain_python(x):
    return x


def test_unsupported_construct_says_what_instead():
    @gpuc.func
    def f(n):
        xs = [1, 2, n]
        return n
    check(f, (int64,), "List is not supported", "[1, 2, n]", hint="use an array argument")


def test_comprehension_and_lambda_and_try():
    @gpuc.func
    def comp(n):
        xs = [i for i in range(n)]
        return n

    @gpuc.func
    def lam(n):
        g = lambda x: x  # noqa: E731
        return n

    @gpuc.func
    def exc(n):
        try:
            n += 1
        except ValueError:
            pass
        return n
    check(comp, (int64,), "ListComp is not supported", "[i for i", hint="write a for loop")
    check(lam, (int64,), "Lambda is not supported", "lambda x")
    check(exc, (int64,), "Try is not supported", "try:", hint="try/except is not supported")


def test_type_unstable_variable_after_if():
    @gpuc.func
    def f(c):
        if c > 0:
            x = 1
        else:
            x = (2.5, 1)
        return x
    err = check(f, (int64,), "variable 'x' has different types on different paths", "return |x")
    assert "int64" in err.message and "tuple[float64, int64]" in err.message
    # Regression (found by fuzzing): the assignments' lines counted from the def, not the file's top.
    lines, first = inspect.getsourcelines(f.__wrapped__)
    line_of = {frag: first + next(k for k, ln in enumerate(lines) if frag in ln) for frag in ("x = 1", "x = (2.5")}
    assert f"(assigned at line {line_of['x = 1']})" in err.message, err
    assert f"(line {line_of['x = (2.5']})" in err.message, err


def test_type_unstable_variable_in_loop():
    @gpuc.func
    def f(n):
        x = 0
        for i in range(n):
            x = (x, 0.5)[0]
            x = (x, x)
        return x
    check(f, (int64,), "variable 'x' has different types", "x = (|x, 0.5)[0]")


def test_wrong_argument_count():
    @gpuc.func
    def g(a, b):
        return a + b

    @gpuc.func
    def f(n):
        return g(n)
    check(f, (int64,), "takes 2 argument(s), but 1 were given", "g(n)")


def test_signature_arity():
    @gpuc.func
    def f(a, b):
        return a
    err = compile_error(f, (int64,))
    assert "takes 2 argument(s), but the signature has 1" in err.message


def test_unknown_name():
    @gpuc.func
    def f(n):
        return n + undefined_thing  # noqa: F821
    check(f, (int64,), "name 'undefined_thing' is not defined", "undefined_thing")


def test_indexing_a_scalar():
    @gpuc.func
    def f(n):
        return n[0]
    check(f, (int64,), "an int64 cannot be indexed", "n[0]", hint="only arrays and tuples")


def test_wrong_number_of_indices_and_slices():
    @gpuc.func
    def f(a):
        return a[0, 1, 2]

    @gpuc.func
    def g(a):
        return a[1:3:0]
    check(f, (Array[float64, 2],), "needs 2 indices, not 3", "a[|0, 1, 2]")
    check(g, (Array[float64, 1],), "slice step cannot be zero", "1:3:|0")


def test_float_index():
    @gpuc.func
    def f(a, x):
        return a[x]
    check(f, (Array[float64, 1], float64), "array indices must be integers, not float64", "a[|x]")


def test_kernel_returns_a_value():
    @gpuc.kernel
    def k(a):
        return a[0]
    check(k, (Array[float64, 1],), "kernels return nothing", "return a[0]")


def test_return_types_disagree():
    @gpuc.func
    def f(n, x):
        if n > 0:
            return n
        return (x, x)
    check(f, (int64, float64), "returns int64 (line", "return (x, x)", hint="return the same type everywhere")


def test_missing_return():
    @gpuc.func
    def f(n):
        if n > 0:
            return 1.5
        n += 1
    check(f, (int64,), "can reach its end without returning a value", "n += 1")


def test_value_and_no_value_returns():
    @gpuc.func
    def f(n):
        if n > 0:
            return
        return n
    check(f, (int64,), "returns a value on some paths and nothing on others", "return n")


def test_calling_a_plain_python_function():
    @gpuc.func
    def f(n):
        return plain_python(n)
    check(f, (int64,), "plain_python cannot be called", "plain_python(n)", hint="@gpuc.func")


def test_keyword_arguments():
    @gpuc.func
    def g(a):
        return a

    @gpuc.func
    def f(n):
        return g(a=n)
    check(f, (int64,), "keyword arguments are not supported", "g(a=|n)")


def test_for_over_the_rows_of_a_2d_array():
    @gpuc.func
    def f(a):
        s = 0.0
        for x in a:
            s += x
        return s
    # the rows are views (tests/frontend/test_views.py): adding one to a number is the error
    check(f, (Array[float64, 2],), "the right operand of + must be a number or bool, not Array[float64, 1]",
          "s += x")


def test_used_before_assignment():
    @gpuc.func
    def f(n):
        y = z + n
        z = 1
        return y
    check(f, (int64,), "variable 'z' is used before it is assigned", "z + n")


def test_recursion_needs_a_base_case_first():
    @gpuc.func
    def f(n):
        if n > 0:
            return f(n - 1) + 1
        return 0
    check(f, (int64,), "cannot infer what the recursive call", "f(n - 1)", hint="annotate the return type")


def test_recursion_with_annotation_works():
    @gpuc.func
    def f(n) -> int:
        if n > 0:
            return f(n - 1) + 1
        return 0
    assert "i64 @test_recursion_with_annotation_works.f.i64(i64 %n)" in gpuc.code_llvm(f, (int64,))


def test_annotation_mismatch():
    @gpuc.func
    def f(x: gpuc.float32):
        return x
    check(f, (float64,), "parameter x is annotated float32, but the argument type is float64", "gpuc.float32")


def test_non_constant_index_of_a_tuple_of_different_types():
    @gpuc.func
    def f(n):
        t = (1, 2.5)
        return t[n]
    check(f, (int64,), "a tuple of different types (int64, float64) can only be indexed with a constant", "t[|n]")


def test_bitwise_on_floats():
    @gpuc.func
    def f(x):
        return x & 1
    check(f, (float64,), "operator & needs integers or bools", "x & 1")


def test_context_intrinsic_needs_constant_dim():
    @gpuc.kernel
    def k(a, d):
        a[gpuc.index(d)] = 1.0
    check(k, (Array[float64, 1], int64), "needs a constant dim of 0, 1 or 2", "gpuc.index(|d)")


def test_literal_out_of_range():
    @gpuc.func
    def f(u):
        return u + -1
    check(f, (gpuc.uint32,), "the literal -1 does not fit in uint32", "u + -1")


def test_literal_too_big():
    @gpuc.func
    def f(n):
        return n + 100000000000000000000000
    check(f, (int64,), "does not fit in 64 bits", "100000000000000000000000")


def test_unknown_array_attribute():
    @gpuc.func
    def f(a):
        return a.strides
    check(f, (Array[float64, 1],), "arrays have no attribute 'strides'", "a.strides", hint="a.shape")


def test_negative_integer_power():
    @gpuc.func
    def f(n):
        return n ** -2
    check(f, (int64,), "integers cannot be raised to a negative power", "n ** -2")


def test_unsupported_global():
    @gpuc.func
    def f(n):
        return GLOBAL_LIST[n]
    check(f, (int64,), "list object [1, 2, 3] cannot be used", "GLOBAL_LIST")


def test_is_and_in_comparisons():
    @gpuc.func
    def f(n):
        return n is None
    check(f, (int64,), "comparison Is is not supported", "return |n is None")


def test_error_in_callee_points_into_callee():
    @gpuc.func
    def inner(x):
        return x.re

    @gpuc.func
    def outer(x):
        return inner(x)
    check(inner, (float64,), "numbers have no attribute 're'", "x.re")
    err = compile_error(outer, (float64,))
    assert "x.re" in str(err)


def test_math_unavailable_on_a_target_without_a_math_library():
    @dataclasses.dataclass(frozen=True, repr=False)
    class BareGCN(gpuc.GCNTarget):  # GCN as it was before libclc: only what AMDGPU expands itself
        math_library = None
        math_intrinsics = {32: frozenset({"sqrt"}), 64: frozenset({"sqrt"})}

    @gpuc.func
    def f(x):
        return math.sin(x)
    check(f, (float64,), "sin on float64 is not available on the gcn target", "math.sin(x)", target=BareGCN())


def test_tuple_unpack_count():
    @gpuc.func
    def f(n):
        a, b = n, n, n
        return a
    check(f, (int64,), "cannot unpack 3 values into 2 targets", "a, b")


def test_array_as_condition_and_return():
    @gpuc.func
    def f(a):
        if a:
            return 1
        return 0

    @gpuc.func
    def g(a):
        t = gpuc.local.array(3, gpuc.float64)
        return t
    check(f, (Array[float64, 1],), "cannot be used as a condition", "if |a:")
    check(g, (Array[float64, 1],), "functions cannot return gpuc.local arrays", "return t")


def test_calling_a_kernel_from_a_func():
    @gpuc.kernel
    def k(a):
        a[0] = 1.0

    @gpuc.func
    def f(a):
        k(a)
    check(f, (Array[float64, 1],), "kernel", "k(a)", hint="call a @gpuc.func")


def test_non_gpuc_sources_are_refused():
    def py(x):
        return x
    with pytest.raises(TypeError, match="decorate it with @gpuc.func"):
        gpuc.CompilerJob((py, (int64,)), gpuc.CompilerConfig(gpuc.NativeTarget()))
    with pytest.raises(TypeError, match="not a gpuc type"):
        gpuc.CompilerJob((gpuc.func(py), ("int64x",)), gpuc.CompilerConfig(gpuc.NativeTarget()))
