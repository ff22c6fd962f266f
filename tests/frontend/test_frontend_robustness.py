"""Regressions found by fuzzing the frontend with mutated versions of the differential functions and kernels."""

from __future__ import annotations

import inspect
import math

import gpuc
from gpuc import Array, float64, int64

from support.located_errors import check


def _file_line(fn, fragment: str) -> int:
    lines, first = inspect.getsourcelines(fn.__wrapped__)
    return first + next(k for k, line in enumerate(lines) if fragment in line)


def test_return_mismatch_message_names_file_lines():
    # the same function-relative line number leaked into "returns int64 (line 3) and float64 here".
    @gpuc.func
    def f(c, x):
        if c > 0:
            return c
        return (x, x)
    err = check(f, (int64, float64), "returns int64", "return (x, x)")
    assert f"(line {_file_line(f, 'return c')})" in err.message, err


def test_missing_module_attribute_is_named_plainly():
    # math.fma on Python < 3.13 printed the module's repr (a .so path) and gave no way out.
    @gpuc.func
    def f(x):
        return math.fma(x, x, x) + math.no_such_function(x)
    if hasattr(math, "fma"):
        check(f, (float64,), "module 'math' has no attribute 'no_such_function'", "math.no_such_function")
    else:
        check(f, (float64,), "module 'math' has no attribute 'fma'", "math.fma", hint="use gpuc.fma")


def test_marker_created_inside_a_function():
    # gpuc.marker(...) inside a gpuc function said "decorate it with @gpuc.func", which cannot help.
    @gpuc.func
    def f(x):
        return gpuc.marker("my.probe", float64, (float64,))(x)
    check(f, (float64,), "gpuc.marker(...) cannot be called inside gpuc functions", "gpuc.marker",
          hint="at module level")


def test_host_side_gpuc_api_is_not_decorated_advice():
    # other host-side gpuc functions (gpuc.code_llvm, gpuc.func, ...) got the same misleading hint.
    @gpuc.func
    def f(a):
        return gpuc.code_llvm(a)
    err = check(f, (Array[float64, 1],), "code_llvm cannot be called from gpuc functions", "gpuc.code_llvm",
                hint="host-side")
    assert "decorate" not in (err.hint or "")


def test_literal_expression_out_of_range():
    # `x + 2**64` compiled to `x`: the literal power was computed in int64 and wrapped to 0, while
    # the literal 18446744073709551616 itself was rejected. Literal expressions are now folded first.
    @gpuc.func
    def f(x):
        return x + 2**64
    check(f, (int64,), "18446744073709551616 does not fit in 64 bits", "2**64")


def test_literal_expressions_still_fold_and_run():
    @gpuc.func
    def f(x):
        return x ** (1 + 2) + 2**62 + (7 // 2) * 1.5
    got = gpuc.runtime.load(gpuc.CompilerJob((f, (float64,)), gpuc.CompilerConfig(gpuc.NativeTarget())))
    import ctypes
    assert got.function(ctypes.c_double, ctypes.c_double)(2.0) == 2.0 ** 3 + 2**62 + 4.5
