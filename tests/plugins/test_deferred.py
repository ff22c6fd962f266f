"""Deferred compilation end to end: kernels that take pointers with gpuc.deferred, resolved by the gpuc.lookup
plugin (nesting, cycles, deduplication, entries, errors, plugin ordering), checked against NumPy and Python."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import gpuc
from gpuc import Array, float64, int64

F64 = Array[float64, 1]
I64 = Array[int64, 1]
# What OpenCL runs lack (a located error there).
NO_POINTERS = "SPIR-V has no function pointers chosen at run time (SPV_INTEL_function_pointers)"
ROOT = str(Path(gpuc.__file__).parent.parent)


@gpuc.func
def f(x):
    return x * x + 1.0


@gpuc.kernel
def apply_f(a, b):
    i = gpuc.index()
    p = gpuc.deferred(f, a[i])
    b[i] = p(a[i])


@gpuc.kernel
def call_f(a, b):
    i = gpuc.index()
    b[i] = f(a[i])


def without_plugins(fn, argtypes, target=None) -> str:
    """The IR the frontend hands the compiler: no plugin has run."""
    config = gpuc.CompilerConfig(target or gpuc.NativeTarget(), plugins=[], builtin_plugins=False,
                                 kernel=True, optimize=False, validate=False)
    return gpuc.compile(gpuc.CompilerJob((fn, argtypes), config)).output


def compile_for(fn, argtypes, target=None, output="llvm", **options) -> gpuc.CompileResult:
    config = gpuc.CompilerConfig(target or gpuc.NativeTarget(), kernel=True, **options)
    return gpuc.compile(gpuc.CompilerJob((fn, argtypes), config), output)


@pytest.mark.devices("cpu", "opencl")
def test_marker_in_frontend_ir_resolved_and_inlined_when_optimized(filecheck):
    filecheck(without_plugins(apply_f, (F64, F64)),
              "CHECK: call ptr @gpuc.lookup(ptr @f.f64)\nCHECK-DAG: declare ptr @gpuc.lookup(ptr)\n"
              "CHECK-DAG: declare double @f.f64(double)\n")
    optimized = gpuc.code_llvm(apply_f, (F64, F64))
    filecheck(optimized, "CHECK-NOT: gpuc.lookup\nCHECK-NOT: call double\nCHECK: fmul\nCHECK: fadd\n")
    a = np.linspace(-2.0, 2.0, 37)
    b = np.zeros_like(a)
    apply_f[a.size](a, b)
    np.testing.assert_array_equal(b, a * a + 1.0)


def test_deferred_then_called_compiles_to_the_direct_call():
    # after optimization a pointer to f called at once is f called directly: the same machine code
    def body(fn):
        asm = gpuc.code_native(fn, (F64, F64))
        return re.sub(r"(apply|call)_f", "K", asm)
    assert body(apply_f) == body(call_f)


# -- nesting -------------------------------------------------------------------------------------

@gpuc.func
def f8(x):
    return x + 8.0


@gpuc.func
def f7(x):
    return x + 7.0 + gpuc.deferred(f8, x)(x)


@gpuc.func
def f6(x):
    return x + 6.0 + gpuc.deferred(f7, x)(x)


@gpuc.func
def f5(x):
    return x + 5.0 + gpuc.deferred(f6, x)(x)


@gpuc.func
def f4(x):
    return x + 4.0 + gpuc.deferred(f5, x)(x)


@gpuc.func
def f3(x):
    return x + 3.0 + gpuc.deferred(f4, x)(x)


@gpuc.func
def f2(x):
    return x + 2.0 + gpuc.deferred(f3, x)(x)


@gpuc.func
def f1(x):
    return x + 1.0 + gpuc.deferred(f2, x)(x)


@gpuc.kernel
def chain(a, b):
    i = gpuc.index()
    b[i] = gpuc.deferred(f1, a[i])(a[i])


@pytest.mark.devices("cpu", "opencl")
def test_chain_of_depth_eight_compiles_each_once_and_computes():
    result = compile_for(chain, (F64, F64))
    symbols = [c.symbol for c in result.trace.compilations]
    assert symbols == [f"f{k}.f64" for k in range(1, 9)]
    assert [c.requested_by for c in result.trace.compilations][1:] == [f"f{k}.f64" for k in range(1, 8)]
    a = np.linspace(0.0, 1.0, 9)
    b = np.zeros_like(a)
    chain[a.size](a, b)
    np.testing.assert_allclose(b, 8 * a + 36.0)


def test_chain_passes_ptxas(ptxas):
    ptxas(compile_for(chain, (F64, F64), gpuc.PTXTarget(), "asm").output)


@gpuc.func
def is_even(n):
    if n == 0:
        return 1
    return gpuc.deferred(is_odd, n)(n - 1)


@gpuc.func
def is_odd(n):
    if n == 0:
        return 0
    return gpuc.deferred(is_even, n)(n - 1)


@gpuc.func
def factorial(n):
    if n <= 1:
        return 1
    return n * gpuc.deferred(factorial, n)(n - 1)


@gpuc.kernel
def cycles(a, even, fact):
    i = gpuc.index()
    even[i] = gpuc.deferred(is_even, a[i])(a[i])
    fact[i] = gpuc.deferred(factorial, a[i])(a[i])


@pytest.mark.devices("cpu", "opencl")
def test_cycle_and_recursion_through_pointers():
    a = np.arange(12, dtype=np.int64)
    even, fact = np.zeros_like(a), np.zeros_like(a)
    cycles[a.size](a, even, fact)
    np.testing.assert_array_equal(even, [1 - n % 2 for n in range(12)])
    np.testing.assert_array_equal(fact, [np.prod(np.arange(1, n + 1)) for n in range(12)])
    result = compile_for(cycles, (I64, I64, I64))
    assert sorted(c.symbol for c in result.trace.compilations) == ["factorial.i64", "is_even.i64", "is_odd.i64"]


# -- deduplication -------------------------------------------------------------------------------

@gpuc.func
def ten_from_a_callee(x):
    p = gpuc.deferred(f, x)
    return p(x) + p(x + 1.0) + gpuc.deferred(f, x)(x) + gpuc.deferred(f, (float64,))(x) + \
        gpuc.deferred(f, x)(x) + gpuc.deferred(f, x)(x) + gpuc.deferred(f, x)(x) + gpuc.deferred(f, x)(x) + \
        gpuc.deferred(f, x)(x) + gpuc.deferred(f, x)(x) + gpuc.deferred(f, x)(x)


@gpuc.kernel
def twenty_places(a, b):
    i = gpuc.index()
    x = a[i]
    b[i] = (ten_from_a_callee(x) + gpuc.deferred(f, x)(x) + gpuc.deferred(f, x)(x) + gpuc.deferred(f, x)(x)
            + gpuc.deferred(f, x)(x) + gpuc.deferred(f, x)(x) + gpuc.deferred(f, x)(x) + gpuc.deferred(f, x)(x)
            + gpuc.deferred(f, x)(x) + gpuc.deferred(f, x)(x) + gpuc.deferred(f, x)(x))


@pytest.mark.devices("cpu", "opencl")
def test_function_deferred_from_twenty_places_is_compiled_once():
    text = inspect.getsource(ten_from_a_callee.py_func) + inspect.getsource(twenty_places.py_func)
    assert text.count("gpuc.deferred(f,") == 20
    result = compile_for(twenty_places, (F64, F64))
    assert [c.symbol for c in result.trace.compilations] == ["f.f64"]
    a = np.linspace(0.0, 1.0, 5)
    b = np.zeros_like(a)
    twenty_places[a.size](a, b)
    y = a * a + 1.0
    np.testing.assert_allclose(b, 20 * y + ((a + 1.0) ** 2 + 1.0))


SYMBOLS_SCRIPT = """
import gpuc
from gpuc import Array, float64


@gpuc.func
def inner(x):
    return x * 3.0


@gpuc.func
def outer(x):
    return gpuc.deferred(inner, x)(x) + 1.0


@gpuc.kernel
def k(a):
    i = gpuc.index()
    a[i] = gpuc.deferred(outer, a[i])(a[i])


config = gpuc.CompilerConfig(gpuc.PTXTarget(), kernel=True)
result = gpuc.compile(gpuc.CompilerJob((k, (Array[float64, 1],)), config))
print(result.entries, [c.symbol for c in result.trace.compilations], sorted(result.compiled))
"""


def test_symbols_are_the_same_in_two_fresh_processes(tmp_path):
    script = tmp_path / "symbols.py"
    script.write_text(SYMBOLS_SCRIPT)
    outputs = []
    for seed in ("0", "12345"):  # a different hash seed each time
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                              env={"PYTHONPATH": ROOT, "PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"})
        assert proc.returncode == 0, proc.stderr
        outputs.append(proc.stdout)
    assert outputs[0] == outputs[1]
    assert "'outer.f64', 'inner.f64'" in outputs[0]


# -- pointers as values --------------------------------------------------------------------------

@gpuc.func
def g(x):
    return 2.0 * x - 3.0


@gpuc.func
def apply_twice(p, x):
    return p(p(x))


@gpuc.kernel
def through_a_func(a, b):
    i = gpuc.index()
    b[i] = apply_twice(gpuc.deferred(g, a[i]), a[i])


@gpuc.kernel
def chosen_at_run_time(a, b, use_f):
    i = gpuc.index()
    x = a[i]
    p = gpuc.deferred(f, x) if use_f[i] else gpuc.deferred(g, x)
    b[i] = p(x)


@pytest.mark.devices("cpu", "opencl")
def test_pointer_passed_into_a_func_and_called_there(ptxas):
    a = np.linspace(-1.0, 1.0, 11)
    b = np.zeros_like(a)
    through_a_func[a.size](a, b)
    np.testing.assert_allclose(b, 2.0 * (2.0 * a - 3.0) - 3.0)
    ptxas(compile_for(through_a_func, (F64, F64), gpuc.PTXTarget(), "asm").output)


@pytest.mark.devices("cpu", "opencl")
@pytest.mark.not_on("opencl", NO_POINTERS)
def test_pointer_chosen_at_run_time_matches_numpy(ptxas):
    rng = np.random.default_rng(7)
    a = rng.normal(size=1000)
    use_f = rng.integers(0, 2, size=a.size).astype(np.bool_)
    b = np.zeros_like(a)
    chosen_at_run_time[a.size](a, b, use_f)
    np.testing.assert_allclose(b, np.where(use_f, a * a + 1.0, 2.0 * a - 3.0))
    # reached only through the pointer, both functions stay, internal
    ir = gpuc.code_llvm(chosen_at_run_time, (F64, F64, Array[gpuc.boolean, 1]))
    assert "define internal double @f.f64(" in ir and "define internal double @g.f64(" in ir
    ptxas(compile_for(chosen_at_run_time, (F64, F64, Array[gpuc.boolean, 1]), gpuc.PTXTarget(), "asm").output)


def test_every_gpu_target_compiles_a_resolved_pointer(spirv_val):
    for target in (gpuc.GCNTarget(), gpuc.SPIRVTarget()):
        result = compile_for(apply_f, (F64, F64), target, "obj" if isinstance(target, gpuc.SPIRVTarget) else "asm")
        assert result.entries == [result.entry]
        if isinstance(target, gpuc.SPIRVTarget):
            spirv_val(result.output)
    # a pointer chosen at run time stays an indirect call, which GCN has
    gcn = compile_for(chosen_at_run_time, (F64, F64, Array[gpuc.boolean, 1]), gpuc.GCNTarget(), "asm")
    assert "s_swappc_b64" in gcn.output


def test_spirv_names_a_pointer_that_stays_a_value():
    # a pointer chosen at run time stays an indirect call: SPIR-V cannot express it
    with pytest.raises(gpuc.CompilationError, match=r"calls through a function pointer|takes the address of"):
        compile_for(chosen_at_run_time, (F64, F64, Array[gpuc.boolean, 1]), gpuc.SPIRVTarget(), "obj")


# -- entries, errors, ordering -------------------------------------------------------------------

@gpuc.kernel
def fill(a, x):
    a[0] = x


@gpuc.kernel
def with_a_second_entry(a):
    gpuc.deferred(fill, a, a[0], kernel=True)
    i = gpuc.index()
    a[i] = a[i] + 1.0


def test_deferred_kernel_is_a_further_entry_point(ptxas):
    result = compile_for(with_a_second_entry, (F64,), gpuc.PTXTarget(), "asm")
    assert result.entries == [result.entry, "fill_$_A1f64_$_f64"]
    assert ".visible .entry fill_$_A1f64_$_f64(" in result.output
    ptxas(result.output)
    native = compile_for(with_a_second_entry, (F64,))
    assert native.entries == [native.entry, "fill.A1f64.f64"]
    assert "define void @fill.A1f64.f64(" in native.output


@gpuc.func
def fails_later(x):
    return x.no_such_attribute


@gpuc.kernel
def asks_for_failing(a):
    i = gpuc.index()
    a[i] = gpuc.deferred(fails_later, a[i])(a[i])


def test_failing_deferred_function_reports_both_places():
    with pytest.raises(gpuc.CompilationError) as info:
        gpuc.code_llvm(asks_for_failing, (F64,))
    assert not isinstance(info.value, gpuc.PluginError)
    text = str(info.value)
    _, first = inspect.getsourcelines(fails_later.py_func)
    _, kernel_first = inspect.getsourcelines(asks_for_failing.py_func)
    assert f"test_deferred.py:{first + 2}:" in text            # return x.no_such_attribute
    assert f"note: {__file__}:{kernel_first + 3}:" in text or f"test_deferred.py:{kernel_first + 3}:" in text
    assert "gpuc.deferred(fails_later, a[i])" in text


SEEN = gpuc.marker("test.deferred.seen")


@gpuc.kernel
def seen_by_a_plugin(a):
    i = gpuc.index()
    SEEN()
    a[i] = gpuc.deferred(f8, a[i])(a[i]) + gpuc.deferred(f8, a[i])(a[i] + 1.0)


def test_user_plugins_see_the_deferred_functions_compiled(isolated_plugins):
    seen = {}

    def look(point):
        def callback(state, marker, module):
            fn = module.functions.get("f8.f64")
            seen[point] = ("gpuc.lookup" in module.functions, fn is not None and not fn.is_declaration,
                           [c.symbol for c in state.trace.compilations])
            if point == "optimized":
                for use in list(marker.uses):
                    use.user.erase()
                marker.erase()
                return True
            return False
        return callback

    gpuc.register_plugin("test.deferred.seen", early_callback=look("early"), pipeline_callback=look("optimized"))
    gpuc.code_llvm(seen_by_a_plugin, (F64,))
    assert seen["early"] == (False, True, ["f8.f64"])  # default priority: after gpuc.lookup at the same point
    assert seen["optimized"][0] is False and seen["optimized"][2] == ["f8.f64"]


# A function reading gpuc.index() behind a pointer kept in a local variable was refused at the early
# point ("used other than by a direct call": the pointer was still stored in the variable's slot).
@gpuc.func
def _plus_index(x):
    return x + gpuc.index()


@gpuc.func
def _twice_plus_index(x):
    return 2 * x + gpuc.index()


@gpuc.kernel
def _constant_pointer_to_index_reader(out):
    p = gpuc.deferred(_plus_index, 1)
    out[gpuc.index()] = p(2)


@gpuc.kernel
def _chosen_pointer_to_index_reader(out, c):
    p = gpuc.deferred(_plus_index, 1) if c else gpuc.deferred(_twice_plus_index, 1)
    out[gpuc.index()] = p(2)


@pytest.mark.devices("cpu", "opencl")
def test_constant_pointer_to_a_function_reading_the_index(ptxas):
    out = np.zeros(5, np.int64)
    _constant_pointer_to_index_reader[5](out)
    assert out.tolist() == [2, 3, 4, 5, 6]
    ptx = gpuc.compile(gpuc.CompilerJob((_constant_pointer_to_index_reader, (Array[int64, 1],)),
                                        gpuc.CompilerConfig(gpuc.PTXTarget(), kernel=True)), "asm")
    ptxas(ptx.output)


# A pointer chosen at run time to a function reading gpuc.index() was refused on the CPU ("used
# other than by a direct call"): pointers now pass the launch context.
@pytest.mark.devices("cpu", "opencl")
@pytest.mark.not_on("opencl", NO_POINTERS)
@pytest.mark.parametrize("c, want", [(True, [2, 3, 4, 5, 6]), (False, [4, 5, 6, 7, 8])])
def test_pointer_chosen_at_run_time_to_a_function_reading_the_index(c, want, ptxas):
    out = np.zeros(5, np.int64)
    _chosen_pointer_to_index_reader[5](out, c)
    assert out.tolist() == want
    ptx = gpuc.compile(gpuc.CompilerJob((_chosen_pointer_to_index_reader, (Array[int64, 1], gpuc.boolean)),
                                        gpuc.CompilerConfig(gpuc.PTXTarget(), kernel=True)), "asm")
    ptxas(ptx.output)
