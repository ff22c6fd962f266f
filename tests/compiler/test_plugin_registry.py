"""The plugin registry: ordering, unique names, unregistering, and configs that scope their plugin set."""

import pytest

import gpuc
from gpuc.compiler.driver import own_plugins_only

from support.compiler_ir import SEED_IR, erase_unused_calls


def registered(name):
    return next((p for p in gpuc.registered_plugins() if p.name == name), None)


def recording(log, label, result=False):
    def callback(job, marker, module):
        log.append(label)
        return result
    return callback


def test_priority_then_registration_order(make_job):
    log = []
    for name, priority in (("a", 0), ("b", 5), ("c", 0), ("d", -1), ("e", 5)):
        gpuc.register_plugin(name, markers="gpucompiler.mark", priority=priority,
                             early_callback=recording(log, name))
    gpuc.register_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls)
    gpuc.compile(make_job(SEED_IR))
    assert log == ["b", "e", "a", "c", "d"]
    mine = {"a", "b", "c", "d", "e", "gpucompiler.mark"}
    names = [p.name for p in gpuc.registered_plugins() if p.name in mine]
    assert names == ["b", "e", "a", "c", "gpucompiler.mark", "d"]


def test_order_is_deterministic_across_compiles(make_job):
    log = []
    for name in ("x", "y", "z"):
        gpuc.register_plugin(name, markers="gpucompiler.mark", pipeline_callback=recording(log, name))
    gpuc.register_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls, priority=-10)
    for _ in range(3):
        gpuc.compile(make_job(SEED_IR))
    # each compile: x, y, z, then the eraser changes the module, the point repeats: x, y, z again
    assert log == ["x", "y", "z"] * 6


def test_scoped_plugins_keep_priority_order(make_job):
    log = []
    low = gpuc.make_plugin("low", markers="gpucompiler.mark", early_callback=recording(log, "low"))
    high = gpuc.make_plugin("high", markers="gpucompiler.mark", early_callback=recording(log, "high"),
                            priority=1)
    eraser = gpuc.make_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls)
    gpuc.compile(make_job(SEED_IR, plugins=[eraser, low, high]))
    assert log == ["high", "low"]


def test_duplicate_name_raises_unless_replace():
    first = gpuc.register_plugin("dup.plugin", pipeline_callback=erase_unused_calls)
    with pytest.raises(ValueError, match="dup.plugin.*already registered"):
        gpuc.register_plugin("dup.plugin", early_callback=erase_unused_calls)
    assert registered("dup.plugin") is first
    second = gpuc.register_plugin("dup.plugin", early_callback=erase_unused_calls, replace=True)
    assert second is not first and registered("dup.plugin") is second
    assert second.callback("early") is erase_unused_calls and second.callback("optimized") is None


def test_replaced_plugin_is_the_one_that_runs(make_job):
    log = []
    gpuc.register_plugin("gpucompiler.mark", pipeline_callback=recording(log, "old"))
    gpuc.register_plugin("gpucompiler.mark", replace=True,
                         pipeline_callback=lambda *a: log.append("new") or erase_unused_calls(*a))
    gpuc.compile(make_job(SEED_IR))
    assert "old" not in log and log[0] == "new"


def test_unregister(make_job):
    plugin = gpuc.register_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls)
    assert registered("gpucompiler.mark") is plugin
    assert gpuc.unregister_plugin("gpucompiler.mark") is plugin
    assert registered("gpucompiler.mark") is None
    assert plugin not in gpuc.registered_plugins()
    with pytest.raises(gpuc.ValidationError, match="no plugin is registered"):
        gpuc.compile(make_job(SEED_IR))
    with pytest.raises(KeyError, match="gpucompiler.mark"):
        gpuc.unregister_plugin("gpucompiler.mark")


def test_unregister_unknown_name_is_keyerror():
    with pytest.raises(KeyError, match="no plugin named 'never.registered'"):
        gpuc.unregister_plugin("never.registered")


def test_config_scopes_plugins_without_touching_registry(make_job, filecheck):
    before = gpuc.registered_plugins()
    plugin = gpuc.make_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls)
    job = make_job(SEED_IR, plugins=[plugin], builtin_plugins=False)
    assert gpuc.registered_plugins() == before
    assert job.config.plugins == (plugin,)
    # by default gpuc's own plugins (deferred compilation, context propagation, ...) stay in a scoped set
    names = [p.name for p in make_job(SEED_IR, plugins=[plugin]).config.plugins]
    assert sorted(names) == ["gpuc.autodiff", "gpuc.autodiff.sums", "gpuc.cpu.split_clamps", "gpuc.cpu.vectorize", "gpuc.ctx", "gpuc.lookup",
                            "gpucompiler.mark"]
    result = gpuc.compile(job)
    filecheck(result.output, "CHECK-NOT: gpucompiler.mark\nCHECK: define void @kernel\n")
    assert gpuc.registered_plugins() == before
    assert [c.plugin for c in result.trace.callbacks] == ["gpucompiler.mark"] * 2


def test_scoped_set_ignores_global_plugins(make_job):
    log = []
    gpuc.register_plugin("global.watcher", markers="gpucompiler.mark",
                         pipeline_callback=recording(log, "global"))
    scoped = gpuc.make_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls)
    job = make_job(SEED_IR, plugins=[scoped])
    gpuc.compile(job)
    assert log == []


def test_empty_scoped_set(make_job):
    gpuc.register_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls)
    assert make_job(SEED_IR, plugins=[], builtin_plugins=False).config.plugins == ()
    with pytest.raises(gpuc.ValidationError):
        gpuc.compile(make_job(SEED_IR, plugins=[]))


def test_config_plugins_by_registered_name(make_job):
    plugin = gpuc.register_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls)
    assert make_job(SEED_IR, plugins=["gpucompiler.mark"], builtin_plugins=False).config.plugins == (plugin,)
    with pytest.raises(ValueError, match="no registered plugin named 'nope'"):
        make_job(SEED_IR, plugins=["nope"])
    with pytest.raises(ValueError, match="more than once"):
        make_job(SEED_IR, plugins=[plugin, "gpucompiler.mark"])
    with pytest.raises(TypeError):
        make_job(SEED_IR, plugins=[42])


def test_config_created_before_registration_does_not_see_it(make_job):
    early_job = make_job(SEED_IR)
    gpuc.register_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls)
    late_job = make_job(SEED_IR)
    assert "gpucompiler.mark" not in gpuc.compile(late_job).output
    with pytest.raises(gpuc.ValidationError, match="registered globally but was not when the config was"):
        gpuc.compile(early_job)


def test_config_created_before_unregistration_keeps_its_snapshot(make_job):
    gpuc.register_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls)
    job = make_job(SEED_IR)
    gpuc.unregister_plugin("gpucompiler.mark")
    assert "gpucompiler.mark" not in gpuc.compile(job).output


@pytest.mark.parametrize("kwargs, error", [
    (dict(name=""), ValueError),
    (dict(name="p", markers=[""]), ValueError),
    (dict(name="p", markers=[3]), ValueError),
    (dict(name="p", pipeline_callback="not callable"), TypeError),
    (dict(name="p", finalize_module=1), TypeError),
    (dict(name="p", priority="high"), TypeError),
])
def test_make_plugin_rejects_bad_arguments(kwargs, error):
    with pytest.raises(error):
        gpuc.make_plugin(**kwargs)
    with pytest.raises(error):
        gpuc.register_plugin(**kwargs)
    assert registered("p") is None


def test_plugin_markers_default_to_name():
    assert gpuc.make_plugin("a.b").markers == ("a.b",)
    assert gpuc.make_plugin("a.b", markers="c").markers == ("c",)
    assert gpuc.make_plugin("a.b", markers=["c", "d"]).markers == ("c", "d")


def test_plugin_scope_undoes_registrations_and_unregistrations():
    kept = gpuc.register_plugin("scope.kept", pipeline_callback=erase_unused_calls)
    before = gpuc.registered_plugins()
    with gpuc.plugin_scope():
        gpuc.register_plugin("scope.added", pipeline_callback=erase_unused_calls)
        gpuc.unregister_plugin("scope.kept")
        gpuc.register_plugin("scope.kept", early_callback=erase_unused_calls)  # replaced inside
        assert registered("scope.added") is not None and registered("scope.kept") is not kept
    assert gpuc.registered_plugins() == before and registered("scope.kept") is kept
    with pytest.raises(RuntimeError, match="inside"), gpuc.plugin_scope():
        gpuc.register_plugin("scope.raised", pipeline_callback=erase_unused_calls)
        raise RuntimeError("inside")
    assert registered("scope.raised") is None


def test_builtin_plugins_stay_in_scoped_sets_and_count_as_gpucs_own(make_job):
    mine = gpuc.register_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls, builtin=True)
    assert mine.builtin and not gpuc.make_plugin("other").builtin
    scoped = make_job(SEED_IR, plugins=[]).config.plugins
    assert mine in scoped and "gpuc.ctx" in [p.name for p in scoped]
    assert mine not in make_job(SEED_IR, plugins=[], builtin_plugins=False).config.plugins
    # IR a builtin plugin changed is still trusted as gpuc's own; another plugin's is not
    result = gpuc.compile(make_job(SEED_IR, plugins=[]))
    assert own_plugins_only(result.job, result.trace)
    other = gpuc.make_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls)
    result = gpuc.compile(make_job(SEED_IR, plugins=[other], builtin_plugins=False))
    assert not own_plugins_only(result.job, result.trace)
