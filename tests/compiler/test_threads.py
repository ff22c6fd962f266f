"""Compiles from several threads at once: independent LLVM contexts, per-thread target machines."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import gpuc

from support.compiler_ir import SEED_IR, erase_unused_calls


def test_parallel_compiles_match_sequential(make_job):
    plugin = gpuc.make_plugin("gpucompiler.mark", pipeline_callback=erase_unused_calls)
    jobs = [make_job(SEED_IR, target=target, plugins=[plugin])
            for target in (gpuc.NativeTarget(), gpuc.PTXTarget(), gpuc.GCNTarget(), gpuc.SPIRVTarget())]
    expected = [gpuc.compile(job, "asm").output for job in jobs]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda job: gpuc.compile(job, "asm").output, jobs * 8))
    assert got == expected * 8


def test_threads_keep_their_own_target_machines():
    target = gpuc.PTXTarget()
    mine = target.cached_target_machine(2)
    assert target.cached_target_machine(2) is mine
    with ThreadPoolExecutor(1) as pool:
        theirs = pool.submit(target.cached_target_machine, 2).result()
    assert theirs is not mine
