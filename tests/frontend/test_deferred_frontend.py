"""gpuc.deferred in the frontend: pointer types, the IR the frontend hands the compiler (before any plugin),
the records it makes, located errors, and CPU results compared with the same code run by Python."""

from __future__ import annotations

import math
import re
import subprocess
import sys

import numpy as np
import pytest

import gpuc
from gpuc import Array, boolean, float64, int32, int64
from gpuc.frontend import FunctionPointerType, FunctionSource
from gpuc.frontend.core.functions import symbol_name
from gpuc.llvm import Context

F64_1 = Array[float64, 1]


def frontend_ir(fn, argtypes):
    """(IR text, compiled records) of what the frontend emits for fn(argtypes), before any plugin runs."""
    source = FunctionSource(fn, argtypes)
    job = gpuc.CompilerJob(source, gpuc.CompilerConfig(gpuc.NativeTarget()))
    context = Context()
    module, compiled = source.irgen(job, context)
    try:
        return str(module), compiled
    finally:
        module.close()


def compile_error(fn, argtypes) -> gpuc.CompilationError:
    with pytest.raises(gpuc.CompilationError) as info:
        gpuc.code_llvm(fn, argtypes, optimize=False)
    return info.value


def line_of(fn, text: str) -> int:
    """The file line of the first line of fn's source containing `text`."""
    import inspect
    lines, first = inspect.getsourcelines(fn.py_func)
    return first + next(k for k, line in enumerate(lines) if text in line)


# -- functions pointed to --------------------------------------------------------------------------

@gpuc.func
def scale(x, n):
    return x * n


@gpuc.func
def shift(x, n):
    return x + n


@gpuc.func
def helper_only_scaled(x):
    return x * 0.5


@gpuc.func
def uses_helper(x, n):
    return helper_only_scaled(x) + n


@gpuc.func
def flag_or(b, c):
    return b or c


@gpuc.func
def total(a):
    s = 0.0
    for i in range(len(a)):
        s += a[i]
    return s


@gpuc.func
def apply(p, x):
    return p(x, 3)


@gpuc.func
def choose(c):
    return gpuc.deferred(scale, (float64, int64)) if c else gpuc.deferred(shift, (float64, int64))


@gpuc.func
def countdown(n) -> int:
    """Recursion through a pointer to itself."""
    if n <= 0:
        return 0
    p = gpuc.deferred(countdown, n)
    return p(n - 1) + 1


@gpuc.func
def ping(n) -> int:
    if n <= 0:
        return 0
    return gpuc.deferred(pong, n)(n - 1) + 2


@gpuc.func
def pong(n) -> int:
    if n <= 0:
        return 0
    return gpuc.deferred(ping, n)(n - 1) + 1


@gpuc.kernel
def side_kernel(a):
    a[0] = 1.0


# -- the frontend's IR and records -------------------------------------------------------------------

@gpuc.func
def defers_scale(x):
    p = gpuc.deferred(scale, x, 2)
    return p(x, 2)


def test_unoptimized_ir_asks_gpuc_lookup_and_only_declares_the_target():
    text, compiled = frontend_ir(defers_scale, (float64,))
    assert "declare ptr @gpuc.lookup(ptr)" in text
    assert "call ptr @gpuc.lookup(ptr @scale.f64.i64)" in text
    assert "declare double @scale.f64.i64(double, i64)" in text
    assert "define internal double @scale.f64.i64" not in text
    record = compiled["scale.f64.i64"]
    assert (record.source, record.signature, record.kernel) == (scale, (float64, int64), False)
    where = record.requested_at
    assert (where.line, where.col) == (line_of(defers_scale, "gpuc.deferred(scale"), 9)
    assert "gpuc.deferred(scale, x, 2)" in where.text


@gpuc.func
def defers_uses_helper(x):
    return gpuc.deferred(uses_helper, x, 1)(x, 1)


def test_callees_reached_only_through_the_pointer_are_not_lowered():
    text, compiled = frontend_ir(defers_uses_helper, (float64,))
    assert "helper_only_scaled" not in text and "helper_only_scaled.f64" not in compiled
    assert "declare double @uses_helper.f64.i64(double, i64)" in text


@gpuc.func
def calls_and_defers(x):
    return scale(x, 2) + gpuc.deferred(scale, x, 2)(x, 2)


def test_a_function_also_called_directly_is_defined_and_pointed_to():
    text, compiled = frontend_ir(calls_and_defers, (float64,))
    assert "define internal double @scale.f64.i64" in text
    assert "call ptr @gpuc.lookup(ptr @scale.f64.i64)" in text


@gpuc.func
def defers_bools(b):
    return gpuc.deferred(flag_or, b, True)(b, False)


def test_bool_parameters_carry_zeroext_on_the_declaration_and_the_indirect_call():
    text, _ = frontend_ir(defers_bools, (boolean,))
    assert "declare zeroext i1 @flag_or.b.b(i1 zeroext, i1 zeroext)" in text
    assert "call zeroext i1 %" in text and "(i1 zeroext %" in text


@gpuc.func
def defers_total(a):
    return gpuc.deferred(total, a)(a)


def test_array_parameters_are_flattened_as_for_direct_calls():
    text, _ = frontend_ir(defers_total, (F64_1,))
    assert "declare double @total.A1f64(ptr noundef, i64, i64)" in text
    assert re.search(r"call double %\d+\(ptr noundef %\d+, i64 %\d+, i64 %\d+\)", text)


@gpuc.kernel
def keeps_side_kernel(a):
    p = gpuc.deferred(side_kernel, a, kernel=True)
    q = p
    a[0] = 2.0


def test_kernel_pointer_record_says_kernel():
    text, compiled = frontend_ir(keeps_side_kernel, (F64_1,))
    assert compiled["side_kernel.A1f64"].kernel is True
    assert "call ptr @gpuc.lookup(ptr @side_kernel.A1f64)" in text


def test_pointer_types_are_values_hashable_and_printed_readably():
    p = FunctionPointerType((float64, int64), float64)
    assert p == FunctionPointerType([float64, int], float) and hash(p) == hash(FunctionPointerType((float64, int64),
                                                                                                 float64))
    assert p != FunctionPointerType((float64, int64), float64, kernel=True)
    assert str(p) == "func(float64, int64) -> float64"
    assert str(FunctionPointerType((F64_1,), None, kernel=True)) == "kernel(Array[float64, 1]) -> None"
    assert symbol_name(apply, (p, float64)) == "apply.P2f64i64Rf64E.f64"


@gpuc.func
def two_pointers_one_type(x):
    return apply(gpuc.deferred(scale, x, 3), x) + apply(gpuc.deferred(shift, x, 3), x)


def test_a_func_taking_a_pointer_is_specialized_per_pointer_type_not_value():
    text, compiled = frontend_ir(two_pointers_one_type, (float64,))
    assert [s for s in compiled if s.startswith("apply")] == ["apply.P2f64i64Rf64E.f64"]
    assert {"scale.f64.i64", "shift.f64.i64"} <= set(compiled)


def test_recursion_and_cycles_through_pointers_type():
    _, compiled = frontend_ir(countdown, (int64,))
    assert list(compiled) == ["countdown.i64"]  # the pointer to itself needs nothing declared
    _, compiled = frontend_ir(ping, (int64,))
    assert compiled["pong.i64"].requested_at is not None


def test_symbols_are_the_same_in_a_fresh_process():
    code = ("import gpuc, sys; sys.path.insert(0, %r); import test_deferred_frontend as t; "
            "print(sorted(t.frontend_ir(t.two_pointers_one_type, (gpuc.float64,))[1]))") % str(
                __import__("pathlib").Path(__file__).parent)
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
            for _ in range(2)]
    assert runs[0] == runs[1] and "apply.P2f64i64Rf64E.f64" in runs[0]


# -- errors --------------------------------------------------------------------------------------

def plain_python(x):
    return x


@gpuc.func
def defers_python(x):
    return gpuc.deferred(plain_python, x)


@gpuc.func
def defers_builtin(x):
    return gpuc.deferred(math.sin, x)


@gpuc.func
def defers_number(x):
    return gpuc.deferred(3, x)


@gpuc.func
def defers_kernel_plainly(a):
    return gpuc.deferred(side_kernel, a)


@gpuc.func
def kernel_flag_on_func(x):
    return gpuc.deferred(scale, x, 2, kernel=True)


@gpuc.func
def wrong_count(x):
    return gpuc.deferred(scale, x)


@gpuc.func
def mixed_types(x):
    return gpuc.deferred(scale, (float64, plain_python))


@gpuc.func
def bare_types(x):
    return gpuc.deferred(scale, float64, int64)


@gpuc.func
def join_ifexp(x, c):
    p = gpuc.deferred(scale, x, 2) if c else gpuc.deferred(scale, x, 2.0)
    return p(x, 2)


@gpuc.func
def join_if(x, c):
    if c:
        p = gpuc.deferred(scale, x, 2)
    else:
        p = gpuc.deferred(scale, x, 2.0)
    return x


@gpuc.func
def join_read(x, c):
    if c:
        p = gpuc.deferred(scale, x, 2)
    else:
        p = gpuc.deferred(scale, x, 2.0)
    return p(x, 1)


@gpuc.func
def call_count(x):
    p = gpuc.deferred(scale, x, 2)
    return p(x)


@gpuc.func
def call_mismatch(x, y):
    p = gpuc.deferred(scale, x, 2)
    return p(x, y)


@gpuc.kernel
def calls_kernel_pointer(a):
    p = gpuc.deferred(side_kernel, a, kernel=True)
    p(a)


@gpuc.kernel
def takes_pointer(p, a):
    a[0] = p(1.0, 2)


@gpuc.kernel
def stores_pointer(a):
    a[0] = gpuc.deferred(scale, 1.0, 2)


@gpuc.func
def adds_pointers(x):
    p = gpuc.deferred(scale, x, 2)
    return p + 1


@gpuc.func
def compares_pointers(x):
    return gpuc.deferred(scale, x, 2) == gpuc.deferred(shift, x, 2)


@gpuc.func
def branches_on_pointer(x):
    if gpuc.deferred(scale, x, 2):
        return x
    return 0.0


@gpuc.func
def partly_bound(x, c):
    if c:
        p = gpuc.deferred(scale, x, 2)
    return p(x, 2)


@gpuc.func
def broken_target(x):
    return x + undefined_name  # noqa: F821 - the error under test


@gpuc.func
def defers_broken(x):
    return gpuc.deferred(broken_target, x)(x)


ERRORS = [  # (function, argument types, what the message says, the line it points at)
    (defers_python, (float64,), "not to the Python function plain_python", "deferred(plain_python"),
    (defers_builtin, (float64,), "gpuc.deferred points to @gpuc.func functions", "math.sin"),
    (defers_number, (float64,), "not to an int64 value", "deferred(3"),
    (defers_kernel_plainly, (F64_1,), "must say kernel=True", "side_kernel"),
    (kernel_flag_on_func, (float64,), "kernel=True needs a @gpuc.kernel", "kernel=True"),
    (wrong_count, (float64,), "scale takes 2 argument(s), but gpuc.deferred asks for a pointer taking 1",
     "deferred(scale, x)"),
    (mixed_types, (float64,), "a signature tuple holds gpuc types only", "plain_python"),
    (bare_types, (float64,), "not types one by one", "float64, int64"),
    (join_ifexp, (float64, boolean), "the two branches of this conditional expression have types "
     "func(float64, int64) -> float64 and func(float64, float64) -> float64", "if c else"),
    (join_read, (float64, boolean), "variable 'p' has different types on different paths", "return p(x, 1)"),
    (call_count, (float64,), "this function pointer takes 2 argument(s) (float64, int64), but 1 were given",
     "return p(x)"),
    (call_mismatch, (float64, int32), "argument 2 of this call through a func(float64, int64) -> float64 is an "
     "int32", "return p(x, y)"),
    (calls_kernel_pointer, (F64_1,), "cannot be called: kernels are launched", "p(a)"),
    (takes_pointer, (FunctionPointerType((float64, int64), float64), F64_1), "kernel parameter p has the "
     "function-pointer type", "def takes_pointer"),
    (stores_pointer, (F64_1,), "cannot store the function pointer", "a[0] ="),
    (adds_pointers, (float64,), "must be a number or bool, not the function pointer", "p + 1"),
    (compares_pointers, (float64,), "must be a number or bool, not the function pointer", "=="),
    (branches_on_pointer, (float64,), "cannot be used as a condition", "if gpuc.deferred"),
    (partly_bound, (float64, boolean), "holds a function pointer but is assigned on only some paths",
     "return p(x, 2)"),
    (defers_broken, (float64,), "name 'undefined_name' is not defined", "undefined_name"),
]


@pytest.mark.parametrize("fn, argtypes, message, line_text", ERRORS, ids=[e[0].__name__ for e in ERRORS])
def test_located_errors(fn, argtypes, message, line_text):
    source_fn = broken_target if fn is defers_broken else fn
    error = compile_error(fn, argtypes)
    assert message in error.message
    assert error.location is not None and error.location.line == line_of(source_fn, line_text)
    assert error.hint or fn in (defers_broken, join_if)


def test_join_without_a_read_is_no_error():
    gpuc.code_llvm(join_if, (float64, boolean), optimize=False)


def test_a_broken_target_names_the_deferred_call_that_asked_for_it():
    error = compile_error(defers_broken, (float64,))
    [(text, where)] = error.notes
    assert "requested here by gpuc.deferred" in text and where.line == line_of(defers_broken, "gpuc.deferred")
    assert "note:" in str(error)


def test_deferred_in_plain_python_is_a_located_compilation_error():
    with pytest.raises(gpuc.CompilationError, match="only works inside @gpuc.kernel and @gpuc.func") as info:
        gpuc.deferred(scale, 1.0, 2)
    assert info.value.location.file == __file__


def test_deferred_is_listed_among_what_kernels_offer():
    with pytest.raises(AttributeError, match="gpuc.deferred"):
        gpuc.defered  # noqa: B018 - the misspelling is the test


# -- CPU results, compared with the same code run by Python -------------------------------------------

@gpuc.func
def pick(c):
    if c:
        p = gpuc.deferred(scale, 1.0, 2)
    else:
        p = gpuc.deferred(shift, (float64, int64))
    return p


@gpuc.kernel
def pointer_kernel(a, out, flags):
    for i in range(len(a)):
        p = gpuc.deferred(scale, a[i], 2) if flags[i] else gpuc.deferred(shift, a[i], 2)
        q = choose(not flags[i])
        r = pick(flags[i])
        out[i] = apply(p, a[i]) + q(a[i], 4) + r(a[i], i) + countdown(i) + ping(i) + \
            gpuc.deferred(total, a)(a) * 0.5


def python_deferred(f, *args, kernel=False):
    """gpuc.deferred in plain Python: the function itself."""
    return f


@pytest.mark.devices("cpu", "opencl")
@pytest.mark.not_on("opencl", "the kernel calls through function pointers chosen at run time, which SPIR-V has no "
                              "calls through (a located error there)")
def test_cpu_results_match_python(monkeypatch):
    rng = np.random.default_rng(9)
    a = rng.standard_normal(16)
    flags = rng.integers(0, 2, 16).astype(bool)
    got = np.zeros(16)
    pointer_kernel[1](a, got, flags)
    monkeypatch.setattr(gpuc, "deferred", python_deferred)
    want = np.zeros(16)
    pointer_kernel.py_func(a, want, flags)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert np.all(got != 0)
