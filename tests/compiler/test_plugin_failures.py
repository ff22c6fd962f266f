"""Plugin failures become PluginError naming plugin, marker and point, and leave no state behind."""

import pytest

import gpuc

from support.compiler_ir import SEED_IR, STORE_KERNEL_IR, erase_unused_calls

POINTS = [("early_callback", "early"), ("simplified_callback", "simplified"),
          ("pipeline_callback", "optimized"), ("last_callback", "last")]


def raises_runtime_error(job, marker, module):
    raise RuntimeError("the plugin blew up")


def breaks_the_ir(job, marker, module):
    # Erase the marker call and the terminator of its block: "does not have terminator".
    call = next(iter(marker.uses)).user
    block = call.parent
    call.erase()
    block.terminator.erase()
    return True


def never_settles(job, marker, module):
    return True


def returns_non_bool(job, marker, module):
    return 1


def raises_compiler_error(job, marker, module):
    raise gpuc.InternalCompilerError("nested compile failed", job)


def assert_process_still_compiles(make_job, filecheck):
    """After a failure the next compile in the same process works, on both a CPU and a GPU target."""
    plugin = gpuc.make_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls)
    out = gpuc.compile(make_job(SEED_IR, plugins=[plugin])).output
    filecheck(out, "CHECK-NOT: gpucompiler.mark\nCHECK: define void @kernel(\nCHECK: store i64 %x\n")
    ptx = gpuc.compile(make_job(STORE_KERNEL_IR, target=gpuc.PTXTarget(), kernel=True), "asm").output
    filecheck(ptx, "CHECK: .visible .entry kernel(\nCHECK: mul.lo.s32\nCHECK: st.global.b32\n")


def compile_with(make_job, keyword, callback, scoped=True):
    if scoped:
        plugin = gpuc.make_plugin("gpucompiler.mark", **{keyword: callback})
        return gpuc.compile(make_job(SEED_IR, plugins=[plugin]))
    gpuc.register_plugin("gpucompiler.mark", **{keyword: callback})
    return gpuc.compile(make_job(SEED_IR))


@pytest.mark.parametrize("keyword, point", POINTS)
def test_exception_in_callback(keyword, point, make_job, filecheck):
    with pytest.raises(gpuc.PluginError) as info:
        compile_with(make_job, keyword, raises_runtime_error)
    err = info.value
    assert (err.plugin, err.point, err.marker) == ("gpucompiler.mark", point, "gpucompiler.mark")
    assert isinstance(err.__cause__, RuntimeError) and str(err.__cause__) == "the plugin blew up"
    message = str(err)
    assert "plugin 'gpucompiler.mark'" in message and f"point {point!r}" in message
    assert "@gpucompiler.mark" in message and "RuntimeError: the plugin blew up" in message
    assert "entry=@kernel" in message  # names the job
    assert isinstance(err, gpuc.CompilerError)
    assert_process_still_compiles(make_job, filecheck)


@pytest.mark.parametrize("keyword, point", [POINTS[0], POINTS[2]])
def test_invalid_ir_left_by_callback(keyword, point, make_job, filecheck):
    with pytest.raises(gpuc.PluginError) as info:
        compile_with(make_job, keyword, breaks_the_ir, scoped=False)
    err = info.value
    assert (err.plugin, err.point, err.marker) == ("gpucompiler.mark", point, "gpucompiler.mark")
    assert "left invalid IR" in str(err) and "does not have terminator" in str(err)
    # early: the call is still in @helper; optimized: it was inlined into @kernel
    assert ("'helper'" if point == "early" else "'kernel'") in str(err)
    assert_process_still_compiles(make_job, filecheck)


@pytest.mark.parametrize("keyword, point", POINTS)
def test_callback_that_never_settles(keyword, point, make_job, filecheck):
    calls = []

    def callback(job, marker, module):
        calls.append(point)
        return never_settles(job, marker, module)

    with pytest.raises(gpuc.PluginError) as info:
        compile_with(make_job, keyword, callback)
    err = info.value
    assert (err.plugin, err.point, err.marker) == ("gpucompiler.mark", point, "gpucompiler.mark")
    assert "no fixpoint after 16 rounds" in str(err)
    assert len(calls) == 16
    assert_process_still_compiles(make_job, filecheck)


def test_fixpoint_bound_is_configurable(make_job):
    calls = []
    plugin = gpuc.make_plugin("gpucompiler.mark", early_callback=lambda *a: calls.append(1) or True)
    with pytest.raises(gpuc.PluginError, match="no fixpoint after 3 rounds"):
        gpuc.compile(make_job(SEED_IR, plugins=[plugin], fixpoint_rounds=3))
    assert len(calls) == 3


@pytest.mark.parametrize("value", [1, None, "yes", 0.0])
def test_callback_returning_non_bool(value, make_job, filecheck):
    plugin = gpuc.make_plugin("gpucompiler.mark", pipeline_callback=lambda *a: value)
    with pytest.raises(gpuc.PluginError) as info:
        gpuc.compile(make_job(SEED_IR, plugins=[plugin]))
    err = info.value
    assert (err.plugin, err.point, err.marker) == ("gpucompiler.mark", "optimized", "gpucompiler.mark")
    assert f"returned {value!r}" in str(err) and "must return True" in str(err)
    assert_process_still_compiles(make_job, filecheck)


def test_compiler_error_in_callback_is_wrapped(make_job, filecheck):
    with pytest.raises(gpuc.PluginError) as info:
        compile_with(make_job, "pipeline_callback", raises_compiler_error)
    assert isinstance(info.value.__cause__, gpuc.InternalCompilerError)
    assert info.value.point == "optimized"
    assert_process_still_compiles(make_job, filecheck)


def test_compilation_error_from_callback_passes_through(make_job):
    # A plugin may report a fault in the user's source; that stays a CompilationError.
    def callback(job, marker, module):
        raise gpuc.CompilationError("derivative of a non-differentiable function")

    plugin = gpuc.make_plugin("gpucompiler.mark", pipeline_callback=callback)
    with pytest.raises(gpuc.CompilationError, match="non-differentiable"):
        gpuc.compile(make_job(SEED_IR, plugins=[plugin]))


def test_failing_plugin_names_the_right_plugin(make_job):
    fine = gpuc.make_plugin("fine", markers="gpucompiler.mark", priority=1, pipeline_callback=lambda *a: False)
    bad = gpuc.make_plugin("bad", markers="gpucompiler.mark", pipeline_callback=raises_runtime_error)
    with pytest.raises(gpuc.PluginError) as info:
        gpuc.compile(make_job(SEED_IR, plugins=[fine, bad]))
    assert info.value.plugin == "bad" and info.value.marker == "gpucompiler.mark"


def test_finalize_module_failures(make_job, filecheck):
    def raising(job, compiled, module):
        raise ValueError("cannot finalize")

    def breaking(job, compiled, module):
        module.functions["kernel"].entry_block.terminator.erase()

    for callback, text in ((raising, "finalize_module raised ValueError: cannot finalize"),
                           (breaking, "finalize_module left invalid IR")):
        plugin = gpuc.make_plugin("finisher", finalize_module=callback)
        with pytest.raises(gpuc.PluginError) as info:
            gpuc.compile(make_job(SEED_IR, plugins=[plugin]))
        err = info.value
        assert (err.plugin, err.point, err.marker) == ("finisher", "finalize_module", None)
        assert text in str(err)
    assert_process_still_compiles(make_job, filecheck)


def test_many_failures_in_a_row_leave_no_state(make_job, filecheck):
    for callback in (raises_runtime_error, breaks_the_ir, never_settles, returns_non_bool) * 3:
        with pytest.raises(gpuc.PluginError):
            compile_with(make_job, "pipeline_callback", callback)
    assert_process_still_compiles(make_job, filecheck)


def test_callback_deleting_the_entry_is_a_plugin_error(make_job):
    def delete_entry(job, marker, module):
        for use in list(marker.uses):
            use.user.erase()
        module.functions["kernel"].delete_body()
        return True

    gpuc.register_plugin("gpucompiler.mark", pipeline_callback=delete_entry)
    with pytest.raises(gpuc.PluginError, match="deleted the entry function @kernel") as info:
        gpuc.compile(make_job(SEED_IR))
    assert info.value.plugin == "gpucompiler.mark" and info.value.point == "optimized"
