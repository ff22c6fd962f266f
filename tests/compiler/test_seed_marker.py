"""The seed scenario: a pipeline_callback erases marker calls; where each callback point sees them."""

import pytest

import gpuc

from support.compiler_ir import SEED_IR, callers_of, erase_unused_calls

TARGETS = [pytest.param(gpuc.NativeTarget(), id="native"), pytest.param(gpuc.PTXTarget(), id="ptx")]


@pytest.mark.parametrize("target", TARGETS)
def test_pipeline_callback_erases_marker(target, make_job, filecheck):
    gpuc.register_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls)
    job = make_job(SEED_IR, target=target)

    filecheck(gpuc.code_llvm(job, optimize=False), """\
CHECK: declare void @gpucompiler.mark(i64)
CHECK-LABEL: define internal void @helper(i64 %x)
CHECK-NEXT: call void @gpucompiler.mark(i64 %x)
CHECK-LABEL: define void @kernel(
CHECK: call void @helper(i64 %x)
""")
    filecheck(gpuc.code_llvm(job), """\
CHECK-NOT: gpucompiler.mark
CHECK-NOT: @helper
CHECK-LABEL: define void @kernel(
CHECK: store i64 %x
CHECK-NOT: gpucompiler.mark
""")


@pytest.mark.parametrize("target", TARGETS)
def test_plugin_without_its_marker_is_never_invoked(target, make_job, filecheck):
    calls = []
    gpuc.register_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls)
    gpuc.register_plugin("gpucompiler.absent", early_callback=lambda *a: calls.append("early") or False,
                         simplified_callback=lambda *a: calls.append("simplified") or False,
                         pipeline_callback=lambda *a: calls.append("optimized") or False,
                         last_callback=lambda *a: calls.append("last") or False)
    result = gpuc.compile(make_job(SEED_IR, target=target))
    assert calls == []
    assert {c.plugin for c in result.trace.callbacks} == {"gpucompiler.mark"}
    filecheck(result.output, "CHECK-NOT: gpucompiler.mark\n")


def test_callback_points_see_the_inliner_at_work(make_job):
    seen: dict[str, list[str]] = {}

    def recorder(point, resolve=False):
        def callback(job, marker, module):
            seen.setdefault(point, callers_of(marker))  # round 1 only
            return erase_unused_calls(job, marker, module) if resolve else False
        return callback

    gpuc.register_plugin("gpucompiler.mark", early_callback=recorder("early"),
                         simplified_callback=recorder("simplified"),
                         pipeline_callback=recorder("optimized", resolve=True))
    result = gpuc.compile(make_job(SEED_IR))
    assert seen["early"] == ["helper"]      # before any optimization: the helper is not inlined yet
    assert seen["simplified"] == ["kernel"]  # the CGSCC inliner has run
    assert seen["optimized"] == ["kernel"]
    rounds = [(c.point, c.round, c.changed) for c in result.trace.callbacks]
    assert rounds == [("early", 1, False), ("simplified", 1, False),
                      ("optimized", 1, True), ("optimized", 2, False)]


def test_callback_receives_state_marker_and_module(make_job):
    got = []

    def callback(state, marker, module):
        got.append((state.job, state.config, state.source, state.target, state.describe(), state.module is module,
                    state.point, marker.name, marker.is_declaration, module.functions.get("kernel") is not None))
        return False

    gpuc.register_plugin("gpucompiler.mark", early_callback=callback)
    job = make_job(SEED_IR)
    with pytest.raises(gpuc.ValidationError):  # nothing resolves the marker
        gpuc.compile(job)
    assert got == [(job, job.config, job.source, job.target, job.describe(), True, "early", "gpucompiler.mark",
                    True, True)]


def test_one_plugin_with_several_markers(make_job):
    ir = SEED_IR.replace("declare void @gpucompiler.mark(i64)",
                         "declare void @gpucompiler.mark(i64)\ndeclare void @my.other(i64)")
    ir = ir.replace("  ret void\n}\n\ndefine void @kernel",
                    "  call void @my.other(i64 %x)\n  ret void\n}\n\ndefine void @kernel")
    seen = []

    def callback(job, marker, module):
        seen.append(marker.name)
        return erase_unused_calls(job, marker, module)

    gpuc.register_plugin("multi", markers=["gpucompiler.mark", "my.other"], pipeline_callback=callback)
    out = gpuc.compile(make_job(ir)).output
    assert "gpucompiler.mark" not in out and "my.other" not in out
    assert seen[:2] == ["gpucompiler.mark", "my.other"]  # markers in the order the plugin lists them


def test_finalize_module_runs_once_per_compile_with_compiled_map(make_job):
    calls = []

    def finalize(state, compiled, module):
        assert state.compiled is compiled and state.point == "finalize_module"
        calls.append((state.job, dict(compiled), module.functions.get("helper") is not None))

    gpuc.register_plugin("finalizer", finalize_module=finalize)  # no marker in the module: still runs
    gpuc.register_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls)
    job = make_job(SEED_IR)
    gpuc.compile(job)
    assert len(calls) == 1
    got_job, compiled, helper_present = calls[0]
    assert got_job is job and helper_present
    assert {"kernel", "helper"} <= set(compiled)
    assert "gpucompiler.mark" not in compiled  # only definitions map to a source
    assert compiled["kernel"].source == job.source
    gpuc.compile(make_job(SEED_IR, target=gpuc.PTXTarget()), "asm")
    assert len(calls) == 2


def test_finalize_module_runs_before_the_early_point(make_job):
    order = []
    gpuc.register_plugin("gpucompiler.mark", finalize_module=lambda *a: order.append("finalize_module"),
                         early_callback=lambda *a: order.append("early") or False,
                         pipeline_callback=erase_unused_calls)
    gpuc.compile(make_job(SEED_IR))
    assert order == ["finalize_module", "early"]



def test_fixpoint_resolves_markers_introduced_by_a_rewrite(make_job):
    # "outer" rewrites its marker calls into calls to another plugin's marker, which runs first in
    # every round; the point repeats until neither changes anything (nested deferral / nested AD).
    def outer(job, marker, module):
        calls = [use.user for use in list(marker.uses)]
        if not calls:
            return False
        inner = module.get_or_insert_function("gpuc.inner", marker.function_type)
        with gpuc.llvm.Builder(module.context) as builder:
            for call in calls:
                builder.position_before(call)
                builder.call(inner, call.args)
                call.erase()
        return True

    gpuc.register_plugin("gpuc.outer", early_callback=outer)
    gpuc.register_plugin("gpuc.inner", early_callback=erase_unused_calls, priority=1)
    result = gpuc.compile(make_job(SEED_IR.replace("gpucompiler.mark", "gpuc.outer")))
    assert "gpuc.inner" not in result.output and "gpuc.outer" not in result.output
    got = [(c.round, c.plugin, c.changed) for c in result.trace.fired("early")]
    assert got == [(1, "gpuc.outer", True),
                   (2, "gpuc.inner", True), (2, "gpuc.outer", False),
                   (3, "gpuc.inner", False), (3, "gpuc.outer", False)]
