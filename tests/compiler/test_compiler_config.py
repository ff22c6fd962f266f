"""CompilerConfig and CompilerJob: validation, immutability, hashing, and every optimization level."""

import dataclasses

import pytest

import gpuc
from gpuc.compiler import POINTS, build_pipeline

from support.compiler_ir import SEED_IR, STORE_KERNEL_IR, erase_unused_calls

ALL_TARGETS = [gpuc.NativeTarget(), gpuc.PTXTarget(), gpuc.GCNTarget(), gpuc.SPIRVTarget()]


@pytest.mark.parametrize("opt_level", [4, -1, "2", None, 2.5])
def test_bad_opt_level(opt_level):
    with pytest.raises(ValueError, match="opt_level must be 0, 1, 2 or 3"):
        gpuc.CompilerConfig(gpuc.NativeTarget(), opt_level=opt_level)


@pytest.mark.parametrize("target", ["native", None, gpuc.NativeTarget, object()])
def test_target_must_be_a_gpuc_target(target):
    with pytest.raises(TypeError, match="CompilerConfig needs a gpuc target"):
        gpuc.CompilerConfig(target)


@pytest.mark.parametrize("kwargs", [dict(name="1abc"), dict(name="has space"), dict(fixpoint_rounds=0),
                                    dict(fixpoint_rounds=2.0)])
def test_other_bad_settings(kwargs):
    with pytest.raises(ValueError):
        gpuc.CompilerConfig(gpuc.NativeTarget(), **kwargs)


def test_config_is_immutable():
    config = gpuc.CompilerConfig(gpuc.NativeTarget())
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.opt_level = 3


def test_config_is_hashable_and_equal_configs_hash_equal():
    plugin = gpuc.make_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls)
    a = gpuc.CompilerConfig(gpuc.PTXTarget(cap="sm_90"), kernel=True, plugins=[plugin])
    b = gpuc.CompilerConfig(gpuc.PTXTarget("sm_90", ptx_version=80), kernel=1, plugins=(plugin,))
    assert a == b and hash(a) == hash(b)
    assert {a: "cached"}[b] == "cached"
    assert a != a.replace(opt_level=3)
    assert a != gpuc.CompilerConfig(gpuc.PTXTarget(cap="sm_80"), kernel=True, plugins=[plugin])
    assert a != gpuc.CompilerConfig(gpuc.PTXTarget(cap="sm_90"), kernel=True, plugins=[])
    # Plugins compare by identity: an equal-looking plugin is another plugin.
    twin = gpuc.make_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls)
    assert a != gpuc.CompilerConfig(gpuc.PTXTarget(cap="sm_90"), kernel=True, plugins=[twin])
    n1, n2 = gpuc.CompilerConfig(gpuc.NativeTarget()), gpuc.CompilerConfig(gpuc.NativeTarget())
    assert n1 == n2 and hash(n1) == hash(n2)


def test_replace_keeps_other_fields():
    plugin = gpuc.make_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls)
    config = gpuc.CompilerConfig(gpuc.GCNTarget("gfx942"), kernel=True, plugins=[plugin], opt_level=1,
                                 builtin_plugins=False)
    changed = config.replace(opt_level=3)
    assert (changed.opt_level, changed.kernel, changed.plugins) == (3, True, (plugin,))
    assert changed.target == config.target
    with pytest.raises(ValueError):
        config.replace(opt_level=7)


def test_jobs_are_hashable_cache_keys():
    config = gpuc.CompilerConfig(gpuc.NativeTarget())
    j1 = gpuc.CompilerJob(gpuc.IRSource(SEED_IR, entry="kernel"), config)
    j2 = gpuc.CompilerJob(gpuc.IRSource(SEED_IR, entry="kernel", filename="other.ll"), config)
    assert j1 == j2 and hash(j1) == hash(j2)  # the same IR, whatever its file name
    assert j1 != gpuc.CompilerJob(gpuc.IRSource(SEED_IR, entry="helper"), config)
    assert j1 != gpuc.CompilerJob(gpuc.IRSource(SEED_IR + "\n", entry="kernel"), config)
    assert j1 != gpuc.CompilerJob(j1.source, config.replace(kernel=True))


def test_target_validation_and_defaults():
    with pytest.raises(ValueError):
        gpuc.PTXTarget(cap="sm90")
    with pytest.raises(ValueError):
        gpuc.GCNTarget(arch="mi300")
    assert gpuc.PTXTarget("sm_80").ptx_version == 70
    assert gpuc.PTXTarget("sm_90").ptx_version == 80
    assert gpuc.PTXTarget("sm_90").features() == "+ptx80"
    assert gpuc.NativeTarget() == gpuc.NativeTarget()
    assert hash(gpuc.SPIRVTarget()) == hash(gpuc.SPIRVTarget())


@pytest.mark.parametrize("opt_level", [0, 1, 2, 3])
@pytest.mark.parametrize("target", ALL_TARGETS, ids=["native", "ptx", "gcn", "spirv"])
def test_every_opt_level_compiles(opt_level, target, make_job):
    plugin = gpuc.make_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls)
    seed = SEED_IR.replace("ptr %p", "ptr addrspace(1) %p")
    result = gpuc.compile(make_job(seed, target=target, opt_level=opt_level, plugins=[plugin]))
    assert "gpucompiler.mark" not in result.output and "define void @kernel" in result.output
    assert [c.point for c in result.trace.callbacks if c.changed] == ["optimized"]
    asm = gpuc.compile(make_job(STORE_KERNEL_IR, target=target, opt_level=opt_level, kernel=True), "asm")
    assert "kernel" in asm.output


@pytest.mark.parametrize("opt_level", [0, 1, 2, 3])
def test_pipeline_has_the_four_points_in_order(opt_level):
    for target in ALL_TARGETS:
        pipeline = build_pipeline(target, opt_level)
        assert pipeline.points == list(POINTS) == ["early", "simplified", "optimized", "last"]
        text = str(pipeline)
        assert text.startswith("[early]") and text.endswith("[last]")
        if opt_level:
            assert "simplify: " in text and "optimize: " in text and "cleanup: " in text


@pytest.mark.parametrize("kwargs", [{"opt_level": True}, {"opt_level": 2.0}, {"fixpoint_rounds": True}])
def test_config_rejects_non_int_levels(kwargs):
    with pytest.raises(ValueError):
        gpuc.CompilerConfig(gpuc.NativeTarget(), **kwargs)
