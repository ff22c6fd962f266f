"""The gpuc.lookup plugin at the IR level: hand-written modules ask for functions by symbol, and a test
plugin's finalize_module hook records what each symbol stands for, as the frontend does for gpuc.deferred."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import gpuc
from gpuc import float64
from gpuc.compiler import CompiledFunction, IRSource, SourceLocation


@gpuc.func
def square(x):
    return x * x


@gpuc.func
def broken(x):
    return x + missing_name  # noqa: F821 - the fault the error must locate here


SQUARE = "square.f64"
BROKEN = "broken.f64"
REQUESTED_AT = SourceLocation("user_kernel.py", 7, 9, "    p = gpuc.deferred(f, x)")


def asks_for(*symbols: str, name: str = "k", calls: int = 1) -> str:
    """IR of `double @name(double)`: summing f(x) over pointers to `symbols`, each asked for `calls` times."""
    lines = ["declare ptr @gpuc.lookup(ptr)"] + [f'declare double @"{s}"(double)' for s in symbols]
    lines.append(f'define double @"{name}"(double %x) {{')
    acc = "%x"
    for i, s in enumerate(s for s in symbols for _ in range(calls)):
        lines += [f'  %p{i} = call ptr @gpuc.lookup(ptr @"{s}")', f"  %r{i} = call double %p{i}(double %x)",
                  f"  %a{i} = fadd double {acc}, %r{i}"]
        acc = f"%a{i}"
    return "\n".join(lines + [f"  ret double {acc}", "}"]) + "\n"


def recording(records: dict[str, CompiledFunction]):
    """A plugin whose finalize_module records what each symbol stands for."""
    return gpuc.make_plugin("test.records", finalize_module=lambda state, compiled, module: compiled.update(records))


def job(ir: str, records: dict, *, target=None, entry: str = "k", **options) -> gpuc.CompilerJob:
    config = gpuc.CompilerConfig(target or gpuc.NativeTarget(), plugins=[recording(records)], **options)
    return gpuc.CompilerJob(IRSource(ir, entry=entry), config)


def ir_chain(n: int) -> dict[str, CompiledFunction]:
    """f0 -> f1 -> ... -> f<n-1>: each fi asks for f(i+1) and returns x + 1 + f(i+1)(x); the last x + 1."""
    records = {}
    for i in range(n):
        body = (f"  %y = fadd double %x, 1.0\n  ret double %y" if i == n - 1 else
                f'  %p = call ptr @gpuc.lookup(ptr @f{i + 1})\n  %r = call double %p(double %x)\n'
                f"  %y = fadd double %x, 1.0\n  %z = fadd double %y, %r\n  ret double %z")
        decl = f"declare ptr @gpuc.lookup(ptr)\ndeclare double @f{i + 1}(double)\n" if i < n - 1 else ""
        text = f"{decl}define double @f{i}(double %x) {{\n{body}\n}}\n"
        records[f"f{i}"] = CompiledFunction(IRSource(text, entry=f"f{i}", filename=f"f{i}.ll"))
    return records


def test_marker_resolved_to_the_function_then_inlined(filecheck):
    records = {SQUARE: CompiledFunction(square, (float64,))}
    early = gpuc.compile(job(asks_for(SQUARE), records, optimize=False)).output
    filecheck(early, "CHECK-NOT: gpuc.lookup\nCHECK: define internal double @square.f64\n"
                     "CHECK: define double @k\nCHECK: call double @square.f64(double %x)\n")
    result = gpuc.compile(job(asks_for(SQUARE), records))
    filecheck(result.output, "CHECK-NOT: gpuc.lookup\nCHECK: define double @k\nCHECK-NEXT: fmul double %x, %x\n"
                             "CHECK-NOT: call\nCHECK-NOT: square.f64\n")
    assert [(c.symbol, c.requested_by) for c in result.trace.compilations] == [(SQUARE, "k")]
    assert "compiled into the module at early: @square.f64" in str(result.trace)


def test_symbol_asked_for_from_many_places_is_compiled_once():
    # 20 requests, from the entry and from a callee it asks for in turn: one compile of square.f64
    callee = IRSource(asks_for(SQUARE, name="g", calls=10), entry="g", filename="g.ll")
    records = {SQUARE: CompiledFunction(square, (float64,)), "g": CompiledFunction(callee)}
    result = gpuc.compile(job(asks_for(SQUARE, "g", calls=10), records))
    assert [c.symbol for c in result.trace.compilations].count(SQUARE) == 1
    assert "gpuc.lookup" not in result.output


def test_chain_of_twenty_needs_one_round_of_the_fixpoint():
    # deeper than fixpoint_rounds: the worklist resolves it all in one callback
    result = gpuc.compile(job(asks_for("f0"), ir_chain(20), fixpoint_rounds=2))
    assert [c.symbol for c in result.trace.compilations] == [f"f{i}" for i in range(20)]
    assert [c.requested_by for c in result.trace.compilations] == ["k"] + [f"f{i}" for i in range(19)]
    assert [(c.point, c.round) for c in result.trace.fired() if c.plugin == "gpuc.lookup"] == [("early", 1)]
    assert "gpuc.lookup" not in result.output and "call" not in result.output  # all inlined


def countdown(name: str, *asks: str) -> str:
    """IR of `double @name(double %x)`: x > 0 ? x + ptr(x - 1) : 0 through a pointer to each of `asks`."""
    decls = "".join(f"declare double @{a}(double)\n" for a in asks if a != name)
    calls = "".join(f"  %p{i} = call ptr @gpuc.lookup(ptr @{a})\n  %r{i} = call double %p{i}(double %y)\n"
                    f"  %s{i} = fadd double %x, %r{i}\n" for i, a in enumerate(asks))
    return (f"declare ptr @gpuc.lookup(ptr)\n{decls}define double @{name}(double %x) {{\n"
            f"  %c = fcmp ogt double %x, 0.0\n  br i1 %c, label %more, label %done\nmore:\n"
            f"  %y = fsub double %x, 1.0\n{calls}  ret double %s{len(asks) - 1}\ndone:\n  ret double 0.0\n}}\n")


def test_cycle_and_recursion_through_pointers(filecheck):
    # f asks for g, g for f and for itself
    records = {"f": CompiledFunction(IRSource(countdown("f", "g"), entry="f")),
               "g": CompiledFunction(IRSource(countdown("g", "f", "g"), entry="g"))}
    outputs = []
    for optimize in (False, True):
        result = gpuc.compile(job(asks_for("f"), records, optimize=optimize))
        assert sorted(c.symbol for c in result.trace.compilations) == ["f", "g"]
        assert "gpuc.lookup" not in result.output
        outputs.append(result.output)
    filecheck(outputs[0], "CHECK-DAG: define internal double @f\nCHECK-DAG: define internal double @g\n"
                          "CHECK-DAG: call double @g\nCHECK-DAG: call double @f\n")
    # optimized, the pointers are direct calls: f is inlined, g keeps calling itself
    filecheck(outputs[1], "CHECK-NOT: call double %\nCHECK: define internal double @g\nCHECK: call double @g\n")


def test_symbol_without_record_names_the_caller():
    with pytest.raises(gpuc.CompilationError, match=r"@k asks for a pointer to @nowhere.f64, which the module"):
        gpuc.compile(job(asks_for("nowhere.f64"), {}))


@pytest.mark.parametrize("body, message", [
    ("%p = call ptr @gpuc.lookup(ptr null)", "must be called with one function and return ptr in @k"),
    ("store ptr @gpuc.lookup, ptr %slot", "is used other than by a direct call in @k"),
])
def test_malformed_marker_use_is_a_compilation_error(body, message):
    ir = (f"declare ptr @gpuc.lookup(ptr)\ndefine double @k(double %x) {{\n  %slot = alloca ptr\n  {body}\n"
          "  ret double %x\n}\n")
    with pytest.raises(gpuc.CompilationError, match=message):
        gpuc.compile(job(ir, {}))


def test_failing_target_reports_its_location_and_the_request():
    records = {BROKEN: CompiledFunction(broken, (float64,), requested_at=REQUESTED_AT)}
    with pytest.raises(gpuc.CompilationError) as info:
        gpuc.compile(job(asks_for(BROKEN), records))
    text = str(info.value)
    assert "test_deferred_ir.py:" in text and "missing_name" in text  # the deferred function's own fault
    assert "note: user_kernel.py:7:9: while compiling @broken.f64, asked for by gpuc.deferred here" in text
    assert "gpuc.deferred(f, x)" in text
    assert not isinstance(info.value, gpuc.PluginError)


def test_ordering_between_plugins_at_the_same_point(isolated_plugins):
    # gpuc.lookup runs at priority 100: a plugin of default priority at `early` sees the pointers
    # resolved, one of higher priority sees the marker calls; at `optimized`, the functions are compiled
    seen = {}

    def looking(point):
        def callback(state, marker, module):
            seen[point] = ("gpuc.lookup" in module.functions, SQUARE in module.functions)
            return False
        return callback

    records = {SQUARE: CompiledFunction(square, (float64,))}
    plugins = [recording(records),
               gpuc.make_plugin("test.before", early_callback=looking("before"), markers=["gpuc.lookup"],
                                priority=200),
               gpuc.make_plugin("test.after", early_callback=looking("after"), markers=["k"]),
               gpuc.make_plugin("test.optimized", pipeline_callback=looking("optimized"), markers=["k"])]
    config = gpuc.CompilerConfig(gpuc.NativeTarget(), plugins=plugins)
    gpuc.compile(gpuc.CompilerJob(IRSource(asks_for(SQUARE), entry="k"), config))
    assert seen["before"] == (True, True)      # the marker call, the declaration
    assert seen["after"] == (False, True)      # resolved: the definition
    assert seen["optimized"][0] is False


def test_spirv_rejects_a_call_through_a_pointer_that_stays_indirect(spirv_val):
    ir = ("define void @k(ptr addrspace(1) %a, ptr %f) {\n  %v = load double, ptr addrspace(1) %a\n"
          "  %r = call double %f(double %v)\n  store double %r, ptr addrspace(1) %a\n  ret void\n}\n")
    with pytest.raises(gpuc.CompilationError, match=r"@k calls through a function pointer .*SPV_INTEL_function_pointers"):
        gpuc.compile(job(ir, {}, target=gpuc.SPIRVTarget(), kernel=True), "obj")
    stored = ("declare ptr @gpuc.lookup(ptr)\ndeclare double @square.f64(double)\n"
              "define void @k(ptr addrspace(1) %out) {\n  %f = call ptr @gpuc.lookup(ptr @square.f64)\n"
              "  store ptr %f, ptr addrspace(1) %out\n  ret void\n}\n")
    records = {SQUARE: CompiledFunction(square, (float64,))}
    with pytest.raises(gpuc.CompilationError, match=r"@k takes the address of @square.f64 \(`store ptr @square"):
        gpuc.compile(job(stored, records, target=gpuc.SPIRVTarget(), kernel=True), "obj")
    # resolved to a constant, the call becomes direct and SPIR-V can express it
    ir = ("declare ptr @gpuc.lookup(ptr)\ndeclare double @square.f64(double)\n"
          "define void @k(ptr addrspace(1) %a) {\n  %f = call ptr @gpuc.lookup(ptr @square.f64)\n"
          "  %v = load double, ptr addrspace(1) %a\n  %r = call double %f(double %v)\n"
          "  store double %r, ptr addrspace(1) %a\n  ret void\n}\n")
    records = {SQUARE: CompiledFunction(square, (float64,))}
    spirv_val(gpuc.compile(job(ir, records, target=gpuc.SPIRVTarget(), kernel=True), "obj").output)


@gpuc.kernel
def fill(a, x):
    a[0] = x


def test_kernel_records_become_further_entry_points(ptxas, spirv_val):
    # kernel=True keeps the deferred kernel as an entry, named in result.entries after the target renames it
    symbol, signature = "fill.A1f64.f64", (gpuc.Array[float64, 1], float64)
    for target in (gpuc.NativeTarget(), gpuc.PTXTarget(), gpuc.GCNTarget(), gpuc.SPIRVTarget()):
        array = "ptr addrspace(1)" if target.array_address_space else "ptr"
        ir = (f"declare ptr @gpuc.lookup(ptr)\ndeclare void @{symbol}({array}, i64, i64, double)\n"
              f"define void @k() {{\n  %p = call ptr @gpuc.lookup(ptr @{symbol})\n  ret void\n}}\n")
        records = {symbol: CompiledFunction(fill, signature, kernel=True)}
        output = "obj" if isinstance(target, gpuc.SPIRVTarget) else "asm"
        result = gpuc.compile(job(ir, records, target=target, kernel=True), output)
        assert result.entry == "k"
        if isinstance(target, gpuc.PTXTarget):
            assert result.entries == ["k", "fill_$_A1f64_$_f64"]
            assert ".visible .entry fill_$_A1f64_$_f64(" in result.output
            ptxas(result.output)
        else:
            assert result.entries == ["k", symbol]
        if isinstance(target, gpuc.SPIRVTarget):
            spirv_val(result.output)


def test_an_entry_a_plugin_adds_must_stay_a_kernel():
    # add_entry names a function; a plugin that deletes it afterwards gets a clear validation error
    def finalize(state, compiled, module):
        g = module.functions["g"]
        state.add_entry(g)
        g.erase()

    ir = "define void @g() {\n  ret void\n}\ndefine void @k() {\n  call void @g()\n  ret void\n}\n"
    ir = ir.replace("  call void @g()\n", "")
    config = gpuc.CompilerConfig(gpuc.NativeTarget(), kernel=True,
                                 plugins=[gpuc.make_plugin("test.entries", finalize_module=finalize)])
    with pytest.raises(gpuc.ValidationError, match=r"the entry point @g that a plugin added"):
        gpuc.compile(gpuc.CompilerJob(IRSource(ir, entry="k"), config))


def test_the_documented_plugin_example_runs(tmp_path):
    root = Path(gpuc.__file__).parent.parent
    text = (root / "docs" / "deferred.md").read_text()
    example = text[text.index("## Writing a plugin that compiles on demand"):]
    code = re.search(r"```python\n(.*?)```", example, re.S).group(1)
    script = tmp_path / "deferred_example.py"  # gpuc reads a function's source from its file
    script.write_text(code + "\nprint('EXAMPLE-OK')\n")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(root)})
    assert proc.returncode == 0 and "EXAMPLE-OK" in proc.stdout, proc.stderr


HOSTILE_RECORDS = """
import gpuc
from gpuc.compiler import CompiledFunction, IRSource

def compile_with(ir, records):
    plugin = gpuc.make_plugin("test.records", finalize_module=lambda s, compiled, m: compiled.update(records))
    job = gpuc.CompilerJob(IRSource(ir, entry="k"), gpuc.CompilerConfig(gpuc.NativeTarget(), plugins=[plugin]))
    return gpuc.compile(job)

ASK = ("declare ptr @gpuc.lookup(ptr)\\ndeclare double @h(double)\\ndefine double @k(double %x) {\\n"
       "  %p = call ptr @gpuc.lookup(ptr @h)\\n  %q = call ptr @gpuc.lookup(ptr @h)\\n"
       "  %r = call double %p(double %x)\\n  %s = call double %q(double %r)\\n  ret double %s\\n}\\n")
# linking the record's IR replaces the declaration @h by a new function: nothing may use the old one
H = "define double @h(double %x) {\\n  %y = fmul double %x, 3.0\\n  ret double %y\\n}\\n"
result = compile_with(ASK, {"h": CompiledFunction(IRSource(H, entry="h"))})
assert "fmul double %x, 9.0" in result.output or result.output.count("fmul") == 2, result.output
# a record compiling to another name and type: a clear error, no invalid IR
I = "define i64 @i(i64 %x) {\\n  ret i64 %x\\n}\\n"
try:
    compile_with(ASK, {"h": CompiledFunction(IRSource(I, entry="i"))})
except gpuc.CompilationError as exc:
    assert "@h was asked for as double (double), but compiles to @i of type i64 (i64)" in str(exc), exc
else:
    raise AssertionError("no error")
"""


def test_records_that_replace_or_contradict_the_declaration_in_a_fresh_process(tmp_path):
    # linking the first record's IR once replaced the declaration @h under the plugin's feet (a segfault)
    script = tmp_path / "hostile_records.py"
    script.write_text(HOSTILE_RECORDS + "\nprint('CASE-OK')\n")
    root = Path(gpuc.__file__).parent.parent
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(root)})
    assert proc.returncode == 0 and "CASE-OK" in proc.stdout, proc.stderr
