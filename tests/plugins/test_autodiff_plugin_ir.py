"""The autodiff plugin at the IR level: hand-written modules call gpuc.autodiff.fwd.* markers with a
function pointer, as the frontend does; the plugin resolves them at the optimized point, inner first."""

from __future__ import annotations

import math

import pytest
from tangent_helpers import Jitted

import gpuc
import gpuc.llvm as llvm
from gpuc.compiler import IRSource
from gpuc.targets import find_libdevice

D = "gpuc.autodiff.fwd.1.d_d"
X_SIN_X = ["define internal double @f0(double %x) {", "  %s = call double @llvm.sin.f64(double %x)",
           "  %m = fmul double %s, %x", "  ret double %m", "}"]
# d^n/dx^n of x sin x, n = 0..4
ANALYTIC = [lambda x: x * math.sin(x), lambda x: math.sin(x) + x * math.cos(x),
            lambda x: 2 * math.cos(x) - x * math.sin(x), lambda x: -3 * math.sin(x) - x * math.cos(x),
            lambda x: -4 * math.cos(x) + x * math.sin(x)]


def nested(order: int, body=X_SIN_X) -> str:
    """@k(x) = d^order f0 / dx^order, each order a function asking for the derivative of the previous."""
    lines = [f'declare {{double, double}} @"{D}"(ptr, double, double)', "declare double @llvm.sin.f64(double)",
             *body]
    for i in range(1, order + 1):
        lines += [f"define internal double @f{i}(double %x) {{",
                  f'  %r = call {{double, double}} @"{D}"(ptr @f{i - 1}, double %x, double 1.0)',
                  "  %d = extractvalue {double, double} %r, 1", "  ret double %d", "}"]
    lines += ["define double @k(double %x) {", f"  %r = call double @f{order}(double %x)", "  ret double %r", "}"]
    return "\n".join(lines) + "\n"


def compiled(ir: str, target=None, output: str = "llvm", **options):
    config = gpuc.CompilerConfig(target or gpuc.NativeTarget(), **options)
    return gpuc.compile(gpuc.CompilerJob(IRSource(ir, entry="k"), config), output)


def run_k(ir_text: str, *args: float) -> float:
    jit = Jitted(llvm.Module.parse(ir_text), "k")
    try:
        return jit.function("k")(*args)
    finally:
        jit.close()


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_nested_orders_match_analytic(order):
    result = compiled(nested(order))
    assert "gpuc.autodiff" not in result.output
    for x in (-1.3, 0.2, 0.7, 2.5):
        assert run_k(result.output, x) == pytest.approx(ANALYTIC[order](x), rel=1e-12, abs=1e-14)


def test_inner_requests_are_resolved_and_optimized_first():
    # Nested tangents built without optimizing in between double per order; the plugin stays linear.
    sizes = []
    for order in range(1, 5):
        text = compiled(nested(order)).output
        body = text[text.index("define double @k"):]
        sizes.append(body[:body.index("\n}")].count("\n"))
    growth = [b - a for a, b in zip(sizes, sizes[1:])]
    assert max(growth) <= sizes[0], sizes
    trace = compiled(nested(3)).trace
    assert [t.symbol for t in trace.transformations] == ["f0.tangent.1", "f1.tangent.1", "f2.tangent.1"]
    assert [t.requested_by for t in trace.transformations] == ["f1", "f2", "k"]  # f3 was inlined into k


def test_five_requests_build_one_tangent():
    # derivative(f0, ...) asked for in five places (with different constants) builds f0.tangent.1 once.
    lines = [f'declare {{double, double}} @"{D}"(ptr, double, double)', "declare double @llvm.sin.f64(double)",
             *X_SIN_X, "define double @k(double %x) {"]
    acc = "%x"
    for i in range(5):
        lines += [f"  %x{i} = fadd double %x, {float(i)}",
                  f'  %r{i} = call {{double, double}} @"{D}"(ptr @f0, double %x{i}, double 1.0)',
                  f"  %d{i} = extractvalue {{double, double}} %r{i}, 1", f"  %a{i} = fadd double {acc}, %d{i}"]
        acc = f"%a{i}"
    result = compiled("\n".join(lines + [f"  ret double {acc}", "}"]) + "\n")
    records = result.trace.transformations
    assert [(t.symbol, t.reused) for t in records] == [("f0.tangent.1", False)] + [("f0.tangent.1", True)] * 4
    assert "derived at optimized: @f0.tangent.1" in str(result.trace)
    x = 0.3
    assert run_k(result.output, x) == pytest.approx(x + sum(ANALYTIC[1](x + i) for i in range(5)), rel=1e-12)


def test_directional_derivative_with_a_constant():
    # jvp of f(x, y, c) = x*y + c*sin(x) in the direction (dx, dy), c constant: mask 110.
    marker = "gpuc.autodiff.fwd.110.d_ddd"
    ir = f"""declare {{double, double}} @"{marker}"(ptr, double, double, double, double, double)
declare double @llvm.sin.f64(double)
define internal double @f(double %x, double %y, double %c) {{
  %xy = fmul double %x, %y
  %s = call double @llvm.sin.f64(double %x)
  %cs = fmul double %c, %s
  %r = fadd double %xy, %cs
  ret double %r
}}
define double @k(double %x, double %y, double %c, double %dx, double %dy) {{
  %r = call {{double, double}} @"{marker}"(ptr @f, double %x, double %y, double %c, double %dx, double %dy)
  %t = extractvalue {{double, double}} %r, 1
  ret double %t
}}
"""
    x, y, c, dx, dy = 0.4, -1.5, 3.0, 0.25, 2.0
    expected = (y + c * math.cos(x)) * dx + x * dy
    assert run_k(compiled(ir).output, x, y, c, dx, dy) == pytest.approx(expected, rel=1e-12)


def test_prefix_markers_fire_once_per_round(isolated_plugins):
    seen = []

    def resolve(state, marker, module):
        seen.append(marker.name)
        for fn in [f for f in module.functions if f.name.startswith("demo.family.")]:
            for use in list(fn.uses):
                use.user.replace_all_uses_with(use.user.args[0])
                use.user.erase()
            fn.erase()
        return True

    gpuc.register_plugin("demo.family", pipeline_callback=resolve, markers=("demo.family.*",))
    ir = """declare double @demo.family.b(double)
declare double @demo.family.a(double)
define double @k(double %x) {
  %a = call double @demo.family.a(double %x)
  %b = call double @demo.family.b(double %a)
  ret double %b
}
"""
    assert "demo.family" not in compiled(ir).output
    assert seen == ["demo.family.a"]


@pytest.mark.parametrize("markers", [("*",), ("a*b",), ("a**",)])
def test_malformed_marker_prefixes_are_refused(markers):
    with pytest.raises(ValueError, match="marker prefix"):
        gpuc.make_plugin("demo.bad", pipeline_callback=lambda *a: False, markers=markers)


def test_pointer_chosen_at_run_time_is_a_located_error():
    ir = f"""declare {{double, double}} @"{D}"(ptr, double, double)
define double @k(ptr %f, double %x) {{
  %r = call {{double, double}} @"{D}"(ptr %f, double %x, double 1.0)
  %d = extractvalue {{double, double}} %r, 1
  ret double %d
}}
"""
    with pytest.raises(gpuc.CompilationError, match=r"in @k .*pointer chosen at run time"):
        compiled(ir)


def test_malformed_call_names_the_caller():
    ir = f"""declare {{double, double}} @"{D}"(ptr, double, double)
define internal double @f(double %x, double %y) {{
  %r = fmul double %x, %y
  ret double %r
}}
define double @k(double %x) {{
  %r = call {{double, double}} @"{D}"(ptr @f, double %x, double 1.0)
  %d = extractvalue {{double, double}} %r, 1
  ret double %d
}}
"""
    with pytest.raises(gpuc.CompilationError, match=r"request in @k is malformed: @f has 2 parameters"):
        compiled(ir)


def test_requests_in_a_cycle_are_an_error():
    # f asks for the derivative of g and g for that of f: neither can be resolved first.
    ir = f"""declare {{double, double}} @"{D}"(ptr, double, double)
define internal double @f(double %x) {{
  %r = call {{double, double}} @"{D}"(ptr @g, double %x, double 1.0)
  %d = extractvalue {{double, double}} %r, 1
  ret double %d
}}
define internal double @g(double %x) {{
  %r = call {{double, double}} @"{D}"(ptr @f, double %x, double 1.0)
  %d = extractvalue {{double, double}} %r, 1
  ret double %d
}}
define double @k(double %x) {{
  %a = call double @f(double %x)
  ret double %a
}}
"""
    with pytest.raises(gpuc.CompilationError, match="cycle"):
        compiled(ir)


def test_what_cannot_be_differentiated_is_a_compilation_error_not_a_plugin_error():
    # f stores a float through its pointer argument: its tangent would be silently lost.
    marker = "gpuc.autodiff.fwd.10.d_dp"
    ir = f"""declare {{double, double}} @"{marker}"(ptr, double, ptr, double)
define internal double @f(double %x, ptr %out) {{
  %y = fmul double %x, %x
  store volatile double %y, ptr %out
  ret double %y
}}
define double @k(double %x, ptr %out) {{
  %r = call {{double, double}} @"{marker}"(ptr @f, double %x, ptr %out, double 1.0)
  %d = extractvalue {{double, double}} %r, 1
  ret double %d
}}
"""
    with pytest.raises(gpuc.CompilationError) as info:
        compiled(ir)
    assert not isinstance(info.value, gpuc.PluginError)
    message = str(info.value)
    assert "cannot differentiate f" in message and "store" in message and "asked for here (in @k)" in message


def test_ptx_differentiates_libdevice_calls_and_assembles(ptxas):
    # On PTX, libdevice is inlined only after the optimized point: the tangent sees __nv_sin as a call.
    body = ["declare double @__nv_sin(double)", "define internal double @f0(double %x) {",
            "  %s = call double @__nv_sin(double %x)", "  %m = fmul double %s, %x", "  ret double %m", "}"]
    if find_libdevice() is None:
        pytest.skip("libdevice not found")
    target = gpuc.PTXTarget()
    result = compiled(nested(4, body), target)
    assert "gpuc.autodiff" not in result.output and "call double @__nv_" not in result.output
    assert "libraries" in [s.name for s in result.trace.segments]
    ptxas(compiled(nested(4, body), target, "asm").output)


def test_math_function_with_a_changed_signature_is_an_error():
    # A function named like libdevice's hypot but taking one argument: no rule applies to it.
    ir = f"""declare {{double, double}} @"{D}"(ptr, double, double)
define internal double @__nv_hypot(double %x) noinline {{
  %r = fmul double %x, 2.0
  ret double %r
}}
define internal double @f(double %x) {{
  %r = call double @__nv_hypot(double %x)
  ret double %r
}}
define double @k(double %x) {{
  %r = call {{double, double}} @"{D}"(ptr @f, double %x, double 1.0)
  %d = extractvalue {{double, double}} %r, 1
  ret double %d
}}
"""
    with pytest.raises(gpuc.CompilationError, match=r"__nv_hypot is called with 1 argument\(s\); hypot takes 2"):
        compiled(ir)
