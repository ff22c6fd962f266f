"""result.trace: the fixed, timed stages, the pass segments, and every plugin callback invocation."""

import pytest

import gpuc
from gpuc.compiler import STAGES

from support.compiler_ir import SEED_IR, SINF_KERNEL, erase_unused_calls


@pytest.fixture(autouse=True)
def _every_stage_runs(no_disk_cache):
    """These tests look at the stages of compiles: no code from the disk cache."""


ALL_STAGES = ["irgen", "link", "finalize_module", "optimize", "validate", "finish", "codegen"]


@pytest.mark.parametrize("target, output", [(gpuc.NativeTarget(), "llvm"), (gpuc.NativeTarget(), "bc"),
                                            (gpuc.NativeTarget(), "asm"), (gpuc.NativeTarget(), "obj"),
                                            (gpuc.PTXTarget(), "llvm"), (gpuc.PTXTarget(), "asm"),
                                            (gpuc.GCNTarget(), "obj"), (gpuc.SPIRVTarget(), "obj")])
def test_stage_names_in_order(target, output, make_job):
    gpuc.register_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls)
    trace = gpuc.compile(make_job(SEED_IR, target=target), output).trace
    assert trace.stage_names == ALL_STAGES == list(STAGES)
    assert all(s.seconds >= 0 for s in trace.stages)
    assert trace.total_seconds == pytest.approx(sum(s.seconds for s in trace.stages))


def test_unoptimized_compile_skips_optimize_and_validate(make_job):
    trace = gpuc.compile(make_job(SEED_IR, optimize=False, validate=False)).trace
    assert trace.stage_names == ["irgen", "link", "finalize_module", "finish", "codegen"]
    assert trace.callbacks == [] and trace.segments == []


def test_unoptimized_compile_still_validates(make_job):
    # Without optimization the marker survives, and validation (still on) reports it.
    with pytest.raises(gpuc.ValidationError, match="unresolved marker @gpucompiler.mark called from @helper"):
        gpuc.compile(make_job(SEED_IR, optimize=False))


def test_unoptimized_compile_runs_the_early_point(make_job):
    # Plugins that must resolve markers before validation use an early callback; it runs even at optimize=False.
    gpuc.register_plugin("gpucompiler.mark", early_callback=erase_unused_calls)
    result = gpuc.compile(make_job(SEED_IR, optimize=False))
    assert result.trace.stage_names == ["irgen", "link", "finalize_module", "early", "validate", "finish", "codegen"]
    assert [(c.point, c.changed) for c in result.trace.callbacks] == [("early", True), ("early", False)]
    assert "gpucompiler.mark" not in result.output


def test_callbacks_are_recorded(make_job):
    gpuc.register_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls,
                         early_callback=lambda *a: False)
    trace = gpuc.compile(make_job(SEED_IR)).trace
    got = [(c.plugin, c.marker, c.point, c.round, c.changed) for c in trace.callbacks]
    assert got == [("gpucompiler.mark", "gpucompiler.mark", "early", 1, False),
                   ("gpucompiler.mark", "gpucompiler.mark", "optimized", 1, True),
                   ("gpucompiler.mark", "gpucompiler.mark", "optimized", 2, False)]
    assert all(c.seconds >= 0 for c in trace.callbacks)
    assert [c.round for c in trace.fired("optimized")] == [1, 2]
    assert trace.fired("last") == [] and len(trace.fired()) == 3


def test_segments_include_the_fixpoint_cleanup(make_job):
    gpuc.register_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls)
    trace = gpuc.compile(make_job(SEED_IR)).trace
    assert [s.name for s in trace.segments] == ["simplify", "optimize", "fixpoint@optimized", "cleanup"]
    assert [s.name for s in gpuc.compile(make_job(SEED_IR, opt_level=0)).trace.segments] == \
        ["simplify", "fixpoint@optimized"]


def test_str_of_trace(make_job):
    gpuc.register_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls)
    text = str(gpuc.compile(make_job(SEED_IR)).trace)
    for name in ALL_STAGES + ["simplify", "fixpoint@optimized", "total"]:
        assert name in text
    assert "callbacks (point, round, plugin, marker, changed)" in text
    assert "gpucompiler.mark @gpucompiler.mark  changed" in text
    assert "unchanged" in text  # round 2
    text = str(gpuc.compile(make_job("define void @kernel() {\n  ret void\n}\n")).trace)
    assert "callbacks: none fired" in text


def test_linked_libraries_are_traced(make_job):
    if gpuc.targets.find_libdevice() is None:
        pytest.skip("libdevice.10.bc not found (pip install nvidia-cuda-nvcc-cu12)")
    trace = gpuc.compile(make_job(SINF_KERNEL, target=gpuc.PTXTarget(), kernel=True)).trace
    assert trace.libraries == ["libdevice"]
    assert "linked: libdevice" in str(trace)
    plain = gpuc.compile(make_job(SINF_KERNEL.replace("__nv_sinf", "llvm.sqrt.f32"), target=gpuc.PTXTarget()))
    assert plain.trace.libraries == []


def test_result_carries_job_and_entry(make_job):
    gpuc.register_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls)
    job = make_job(SEED_IR, name="renamed_kernel")
    result = gpuc.compile(job)
    assert result.job is job and result.entry == "renamed_kernel"
    assert "define void @renamed_kernel(" in result.output


def test_compile_module_hands_over_the_module(make_job):
    gpuc.register_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls)
    with gpuc.compile_module(make_job(SEED_IR)) as built:
        assert built.entry == "kernel"
        assert built.trace.stage_names == ALL_STAGES[:-1]  # everything but codegen
        assert [f.name for f in built.module.functions if not f.is_declaration] == ["kernel"]
