"""Compiling many jobs in one process keeps memory bounded: contexts, modules and machines are freed."""

import gc
import os
import time

import pytest

import gpuc
import gpuc.runtime

from support.compiler_ir import SEED_IR, erase_unused_calls

WARMUP, JOBS, LIMIT_MB = 100, 1000, 40


def rss_bytes() -> int:
    try:
        import psutil
    except ImportError:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return psutil.Process().memory_info().rss


def compile_one(i: int, plugin) -> None:
    # Each job is different IR (no caching can hide a leak); even jobs: native IR, odd: PTX assembly.
    ir = SEED_IR.replace("store i64 %x", f"%y = mul i64 %x, {i + 3}\n  store i64 %y")
    if i % 2 == 0:
        config = gpuc.CompilerConfig(gpuc.NativeTarget(), plugins=[plugin])
        out = gpuc.compile(gpuc.CompilerJob(gpuc.IRSource(ir, entry="kernel"), config), "llvm").output
        assert f"mul i64 %x, {i + 3}" in out and "gpucompiler.mark" not in out
    else:
        config = gpuc.CompilerConfig(gpuc.PTXTarget(), kernel=True, plugins=[plugin])
        out = gpuc.compile(gpuc.CompilerJob(gpuc.IRSource(ir, entry="kernel"), config), "asm").output
        assert ".entry kernel" in out


def test_rss_stays_bounded_over_many_compiles():
    plugin = gpuc.make_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls)
    for i in range(WARMUP):
        compile_one(i, plugin)
    gc.collect()
    before = rss_bytes()
    start = time.perf_counter()
    for i in range(WARMUP, WARMUP + JOBS):
        compile_one(i, plugin)
    elapsed = time.perf_counter() - start
    gc.collect()
    growth_mb = (rss_bytes() - before) / 2**20
    assert growth_mb < LIMIT_MB, f"RSS grew by {growth_mb:.1f} MB over {JOBS} compiles ({elapsed:.1f} s)"


def test_every_llvm_owner_is_closed_after_compile(monkeypatch):
    # Owners created while tracking is on are recorded; after a compile (or a failed one) none may be open.
    monkeypatch.setattr("gpuc.llvm._base._TRACK", True)
    plugin = gpuc.make_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls)
    for i in range(4):
        compile_one(i, plugin)
    failing = gpuc.make_plugin("gpucompiler.mark", pipeline_callback=lambda *a: 1 / 0)
    config = gpuc.CompilerConfig(gpuc.PTXTarget(), plugins=[failing])
    job = gpuc.CompilerJob(gpuc.IRSource(SEED_IR, entry="kernel"), config)
    with pytest.raises(gpuc.PluginError):
        gpuc.compile(job)
    with pytest.raises(gpuc.CompilationError):
        gpuc.compile(gpuc.CompilerJob(gpuc.IRSource("define void @kernel(", entry="kernel"), config))
    with pytest.raises(gpuc.ValidationError):
        gpuc.compile(gpuc.CompilerJob(job.source, config.replace(plugins=[])))
    native = gpuc.CompilerConfig(gpuc.NativeTarget(), plugins=[plugin])
    with gpuc.runtime.load(gpuc.CompilerJob(job.source, native)) as jit:
        assert jit.lookup() != 0
    open_owners = [(name, origin) for name, origin in gpuc.llvm.live_owners() if origin]
    assert open_owners == [], "".join(f"{name} created at\n{origin}" for name, origin in open_owners)
