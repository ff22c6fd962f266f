"""Where GPU code is generated: gpuc's own IR in-process, other IR in the helper pool, which recovers."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import gpuc
from gpuc.llvm import isolated


@pytest.fixture(autouse=True)
def _every_compile_runs(no_disk_cache):
    """These tests look at where code is generated: no code from the disk cache."""


IR = "define void @kernel(ptr %p, i32 %x) {\n  store i32 %x, ptr %p\n  ret void\n}\n"


@pytest.fixture
def helper_calls(monkeypatch):
    calls = []
    real = isolated.isolated_emit

    def spy(*args, **kwargs):
        calls.append(args[1])  # the triple
        return real(*args, **kwargs)

    monkeypatch.setattr(isolated, "isolated_emit", spy)
    return calls


@pytest.mark.parametrize("target", [gpuc.PTXTarget(), gpuc.GCNTarget()], ids=["ptx", "gcn"])
def test_ir_source_goes_to_the_helper(make_job, helper_calls, target):
    assert gpuc.compile(make_job(IR, target=target, kernel=True), "asm").output
    assert helper_calls == [target.triple()]


@pytest.mark.parametrize("target", [gpuc.PTXTarget(), gpuc.GCNTarget()], ids=["ptx", "gcn"])
def test_python_kernels_stay_in_process(helper_calls, target):
    @gpuc.kernel
    def fill(out):
        out[gpuc.index()] = 1.0

    job = gpuc.CompilerJob((fill, (gpuc.Array[gpuc.float32, 1],)), gpuc.CompilerConfig(target))
    assert gpuc.compile(job, "asm").output
    assert helper_calls == []


def test_native_code_is_generated_in_process(make_job, helper_calls):
    assert gpuc.compile(make_job(IR), "obj").output
    assert helper_calls == []


def test_helper_killed_between_compiles_is_replaced(make_job):
    job = make_job(IR, target=gpuc.PTXTarget(), kernel=True)
    first = gpuc.compile(job, "asm").output
    for helper in isolated.client()._idle:
        helper.proc.kill()
        helper.proc.wait()
    assert gpuc.compile(job, "asm").output == first


def test_concurrent_compiles_use_separate_helpers(make_job):
    job = make_job(IR, target=gpuc.PTXTarget(), kernel=True)
    expected = gpuc.compile(job, "asm").output
    results, errors = [], []

    def work():
        try:
            results.extend(gpuc.compile(job, "asm").output for _ in range(3))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and results == [expected] * 12


def test_helper_that_never_answers_is_abandoned(make_job, monkeypatch):
    # A backend stuck in a loop must not hang the caller: the request times out, the helper goes.
    import signal

    job = make_job(IR, target=gpuc.PTXTarget(), kernel=True)
    gpuc.compile(job, "asm")
    monkeypatch.setattr(isolated, "REQUEST_TIMEOUT_S", 1)
    isolated.client()._idle[-1].proc.send_signal(signal.SIGSTOP)  # the helper the next request takes
    with pytest.raises(gpuc.InternalCompilerError, match="did not answer within 1 s"):
        gpuc.compile(job, "asm")
    assert gpuc.compile(job, "asm").output


FORK = """
import os, gpuc
from gpuc.llvm import isolated

IR = {ir!r}
job = gpuc.CompilerJob(gpuc.IRSource(IR, entry="kernel"), gpuc.CompilerConfig(gpuc.PTXTarget(), kernel=True))
expected = gpuc.compile(job, "asm").output
parent_pool = isolated.client()
pid = os.fork()
if pid == 0:
    ok = isolated.client() is not parent_pool and gpuc.compile(job, "asm").output == expected
    isolated.client().close()
    os._exit(0 if ok else 1)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, "the forked process failed"
assert isolated.client() is parent_pool and gpuc.compile(job, "asm").output == expected
print("FORK-OK")
"""


def test_forked_process_gets_its_own_helpers(tmp_path):
    # Sharing the parent's helpers would interleave two processes' requests on one pipe. (In a
    # fresh interpreter: forking this multi-threaded test process could deadlock the child.)
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", FORK.format(ir=IR)], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(root)})
    assert "FORK-OK" in done.stdout, done.stdout + done.stderr
