"""Plugins that compile: the compile state every callback gets, `compile_into` a module being compiled,
linking, recompilable `compiled` records and deterministic symbols."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import gpuc
from gpuc import Array, float64, int64
from gpuc.llvm import Builder, Context, Module

A1 = Array[float64, 1]
ROOT = str(Path(gpuc.__file__).parent.parent)  # the gpuc that this test imports, for subprocesses
TWICE = gpuc.marker("test.twice", float64, (float64,))


@gpuc.func
def square(x):
    return x * x


@gpuc.func
def twice_plus(x):
    return 2.0 * square(x) + math.exp(x)


@gpuc.func
def broken(x):
    return x + undefined_name  # noqa: F821 - the fault compile_into must report, located here


def replace_calls(module, marker, fn) -> bool:
    """Replace each call of `marker` with a call of `fn` on the same arguments; erase the marker."""
    for use in list(marker.uses):
        call = use.user
        with Builder(module.context) as b:
            b.position_before(call)
            new = b.call(fn, list(call.operands)[:-1])
        call.replace_all_uses_with(new)
        call.erase()
    marker.erase()
    return True


def compile_twice_plus(state, marker, module) -> bool:
    """The test plugin: compile a second @gpuc.func into the module and call it instead of the marker."""
    return replace_calls(module, marker, state.compile_into((twice_plus, (float64,))))


def config(target=None, **options):
    plugin = gpuc.make_plugin("test.twice", early_callback=options.pop("early", compile_twice_plus))
    return gpuc.CompilerConfig(target or gpuc.NativeTarget(), plugins=[plugin], **options)


@gpuc.kernel
def uses_twice(a, b):
    i = gpuc.index()
    b[i] = TWICE(a[i]) + square(a[i])


@pytest.mark.devices("cpu", "opencl")
def test_plugin_compiles_a_func_into_the_module_and_the_kernel_runs(ptxas):
    with gpuc.plugin_scope():
        gpuc.register_plugin("test.twice", early_callback=compile_twice_plus)
        a = np.linspace(-2.0, 2.0, 101)
        b = np.zeros_like(a)
        uses_twice[a.size](a, b)
        np.testing.assert_allclose(b, 3.0 * a * a + np.exp(a), rtol=1e-14)
        # on PTX the compiled func's exp needs libdevice, linked although the link stage has passed
        result = gpuc.compile(gpuc.CompilerJob((uses_twice, (A1, A1)), gpuc.CompilerConfig(gpuc.PTXTarget())), "asm")
    assert [c.plugin for c in result.trace.callbacks if c.plugin == "test.twice"] == ["test.twice"]
    assert "test.twice" not in result.output and "libdevice" in result.trace.libraries
    ptxas(result.output)


def test_compiled_is_visible_and_extendable_at_every_point():
    seen = []
    note = gpuc.CompiledFunction(square, (float64,))

    def visit(point):
        def callback(state, marker, module):
            seen.append((point, state.point, "uses_twice.A1f64.A1f64" in state.compiled, sorted(state.compiled)))
            state.compiled[f"noted.{point}"] = note
            if point != "last":
                return False
            return replace_calls(module, marker, state.compile_into((twice_plus, (float64,))))
        return callback

    def finalize(state, compiled, module):
        assert compiled is state.compiled and gpuc.CompileState.of(module) is state
        compiled["noted.finalize_module"] = note

    plugin = gpuc.make_plugin("test.twice", finalize_module=finalize, early_callback=visit("early"),
                              simplified_callback=visit("simplified"), pipeline_callback=visit("optimized"),
                              last_callback=visit("last"))
    job = gpuc.CompilerJob((uses_twice, (A1, A1)), gpuc.CompilerConfig(gpuc.NativeTarget(), plugins=[plugin]))
    result = gpuc.compile(job)
    # early runs twice: context propagation changed the module, so the point repeats
    assert list(dict.fromkeys((p, q, entry) for p, q, entry, _ in seen)) == [
        (p, p, True) for p in ("early", "simplified", "optimized", "last")]
    first_at = {p: names for p, _, _, names in reversed(seen)}
    assert "noted.finalize_module" in first_at["early"] and "noted.early" in first_at["simplified"]
    assert "noted.optimized" in first_at["last"]
    assert {"twice_plus.f64", "noted.last", "square.f64"} <= set(result.compiled)
    assert result.compiled["twice_plus.f64"] == gpuc.CompiledFunction(twice_plus, (float64,))
    assert "test.twice" not in result.output


def test_compile_into_deduplicates_by_symbol():
    got = {}

    def early(state, marker, module):
        first = state.compile_into((twice_plus, (float64,)), requested_by="uses_twice")
        again = state.compile_into((twice_plus, [float64]))
        got["same"] = first == again
        got["defined"] = sorted(f.name for f in module.functions if not f.is_declaration)
        return replace_calls(module, marker, first)

    result = gpuc.compile(gpuc.CompilerJob((uses_twice, (A1, A1)), config(early=early, optimize=False)))
    assert got["same"]
    # square.f64 is the kernel's own callee: twice_plus reuses it instead of defining a copy
    assert got["defined"] == ["square.f64", "twice_plus.f64", "uses_twice.A1f64.A1f64"]
    assert [(c.symbol, c.reused, c.requested_by) for c in result.trace.compilations] == [
        ("twice_plus.f64", False, "uses_twice"), ("twice_plus.f64", True, None)]
    assert "@twice_plus.f64 (func twice_plus(float64), for uses_twice)" in str(result.trace)


def test_a_declaration_of_the_symbol_gets_its_body():
    # how deferred compilation asks for a function: a declaration of its symbol, compiled later
    got = {}

    def early(state, marker, module):
        declared = module.add_function("twice_plus.f64", marker.function_type)
        state.compiled["twice_plus.f64"] = gpuc.CompiledFunction(twice_plus, (float64,))
        fn = state.compile_into((twice_plus, (float64,)))
        got["same"], got["defined"], got["linkage"] = fn == declared, not fn.is_declaration, fn.linkage
        return replace_calls(module, marker, fn)

    gpuc.compile(gpuc.CompilerJob((uses_twice, (A1, A1)), config(early=early)))
    assert got == {"same": True, "defined": True, "linkage": "internal"}


def scaled(c):
    @gpuc.func
    def times(x):
        return c * x
    return times


@pytest.mark.devices("cpu", "opencl")
def test_same_qualname_different_function_gets_a_distinct_symbol():
    first, second = scaled(2.0), scaled(3.0)

    @gpuc.kernel
    def kernel(a, b):
        i = gpuc.index()
        b[i] = first(a[i]) + TWICE(a[i])

    def early(state, marker, module):
        return replace_calls(module, marker, state.compile_into((second, (float64,))))

    result = gpuc.compile_module(gpuc.CompilerJob((kernel, (A1, A1)), config(early=early, optimize=False)))
    with result:
        assert result.compiled["scaled.times.f64"].source is first
        assert result.compiled["scaled.times.f64.1"].source is second
    with gpuc.plugin_scope():
        gpuc.register_plugin("test.twice", early_callback=early)
        a = np.arange(5.0)
        b = np.zeros_like(a)
        kernel[a.size](a, b)
    np.testing.assert_array_equal(b, 5.0 * a)


HALVE_IR = """\
define double @halve(double %x) {
  %y = fmul double %x, 5.000000e-01
  ret double %y
}
"""


def test_ir_source_compiled_into_the_module():
    source = gpuc.IRSource(HALVE_IR, entry="halve", filename="halve.ll")

    def early(state, marker, module):
        fn = state.compile_into(source)
        assert state.compile_into(source) == fn  # the same IR again is the same function
        return replace_calls(module, marker, fn)

    result = gpuc.compile(gpuc.CompilerJob((uses_twice, (A1, A1)), config(early=early)))
    assert result.compiled["halve"] == gpuc.CompiledFunction(source)
    assert "fmul" in result.output and "@halve" not in result.output  # inlined


def test_ir_source_clashing_with_the_module_is_a_located_error():
    clash = gpuc.IRSource("define double @square.f64(double %x) {\n  ret double %x\n}\n", entry="square.f64")

    def early(state, marker, module):
        return replace_calls(module, marker, state.compile_into(clash))

    with pytest.raises(gpuc.CompilationError, match=r"defines @square.f64, which the module being compiled "
                                                    r"already defines \(from square\(float64\)\)"):
        gpuc.compile(gpuc.CompilerJob((uses_twice, (A1, A1)), config(early=early)))


@pytest.mark.parametrize("as_bitcode", [False, True], ids=["module", "bitcode"])
def test_linking_a_module_from_another_context(as_bitcode):
    def early(state, marker, module):
        with Context() as other_context:
            other = Module.parse(HALVE_IR, other_context)
            assert state.link(other.to_bitcode() if as_bitcode else other) == ["halve"]
            other.close()  # a module of another context is copied, not consumed
        return replace_calls(module, marker, module.functions["halve"])

    out = gpuc.compile(gpuc.CompilerJob((uses_twice, (A1, A1)), config(early=early))).output
    assert "fmul" in out and "test.twice" not in out


def test_failing_compile_into_is_the_inner_sources_compilation_error():
    def early(state, marker, module):
        return replace_calls(module, marker, state.compile_into((broken, (float64,))))

    with pytest.raises(gpuc.CompilationError) as info:
        gpuc.compile(gpuc.CompilerJob((uses_twice, (A1, A1)), config(early=early)))
    assert not isinstance(info.value, gpuc.PluginError)
    location = info.value.location
    assert location.file == __file__ and "undefined_name" in location.text
    assert location.line == broken.py_func.__code__.co_firstlineno + 2
    # and the process compiles on: nothing of the failed compile is left behind
    assert gpuc.compile(gpuc.CompilerJob((uses_twice, (A1, A1)), config())).output


def test_compiled_records_compile_again():
    result = gpuc.compile(gpuc.CompilerJob((uses_twice, (A1, A1)), config()))
    record = result.compiled["twice_plus.f64"]
    assert record.source is twice_plus and record.signature == (float64,)
    again = gpuc.compile(gpuc.CompilerJob((record.source, record.signature), gpuc.CompilerConfig(gpuc.NativeTarget())))
    assert again.entry == "twice_plus.f64"
    ir = gpuc.IRSource(HALVE_IR, entry="halve")
    ir_record = gpuc.compile(gpuc.CompilerJob(ir, gpuc.CompilerConfig(gpuc.NativeTarget()))).compiled["halve"]
    assert ir_record.source == ir and ir_record.signature is None
    assert gpuc.compile(gpuc.CompilerJob(ir_record.as_source(), gpuc.CompilerConfig(gpuc.NativeTarget()))).entry \
        == "halve"


def test_jobs_accept_any_object_that_becomes_a_source():
    class Wrapper:
        def __gpuc_source__(self, argtypes):
            return gpuc.IRSource(HALVE_IR, entry="halve")

    job = gpuc.CompilerJob((Wrapper(), (float64,)), gpuc.CompilerConfig(gpuc.NativeTarget()))
    assert job.source.entry_name == "halve"
    with pytest.raises(TypeError, match="not a gpuc function; decorate it"):
        gpuc.CompilerJob((len, (int64,)), gpuc.CompilerConfig(gpuc.NativeTarget()))


SYMBOLS_SCRIPT = """\
import math
import gpuc
from gpuc import Array, float64

TWICE = gpuc.marker("test.twice", float64, (float64,))

def scaled(c):
    @gpuc.func
    def times(x):
        return c * math.sin(x)
    return times

first, second = scaled(2.0), scaled(3.0)

@gpuc.kernel
def kernel(a, b):
    i = gpuc.index()
    b[i] = first(a[i]) + TWICE(a[i])

def early(state, marker, module):
    fn = state.compile_into((second, (float64,)))
    for use in list(marker.uses):
        with gpuc.llvm.Builder(module.context) as b:
            b.position_before(use.user)
            use.user.replace_all_uses_with(b.call(fn, list(use.user.operands)[:-1]))
        use.user.erase()
    marker.erase()
    return True

plugin = gpuc.make_plugin("test.twice", early_callback=early)
job = gpuc.CompilerJob((kernel, (Array[float64, 1],) * 2),
                       gpuc.CompilerConfig(gpuc.PTXTarget(), plugins=[plugin], optimize=False))
with gpuc.compile_module(job) as result:
    print(sorted(result.compiled))
    print(sorted(f.name for f in result.module.functions if not f.is_declaration and f.linkage == "internal"
                 and not f.name.startswith("__nv")))
"""


def test_symbols_are_the_same_in_fresh_processes(tmp_path):
    script = tmp_path / "symbols.py"
    script.write_text(SYMBOLS_SCRIPT)
    outputs = []
    for seed in ("1", "2"):
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": ROOT})
        assert proc.returncode == 0, proc.stderr
        outputs.append(proc.stdout)
    assert outputs[0] == outputs[1]
    assert outputs[0].splitlines()[0] == str(
        ["kernel.A1f64.A1f64", "scaled.times.f64", "scaled.times.f64.1"])


def test_compiles_on_several_threads_each_get_their_own_state():
    states = []

    def early(state, marker, module):
        states.append(state)
        assert gpuc.CompileState.of(module) is state
        return compile_twice_plus(state, marker, module)

    def one(_):
        result = gpuc.compile(gpuc.CompilerJob((uses_twice, (A1, A1)), config(early=early)))
        return tuple(sorted(result.compiled)), result.output.count("define")

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(one, range(8)))
    assert len(set(results)) == 1 and len(states) == len(set(map(id, states))) == 8
