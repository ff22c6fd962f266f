"""The disk cache (gpuc/compiler/cache.py): a hit across fresh processes, a miss for each part of the
key that changes, and safety (corrupted and truncated entries, entries others could have written,
an unwritable folder, two processes filling one entry, eviction)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import gpuc
from gpuc.compiler import cache

HELPERS = """
import gpuc

SCALE = {scale}

@gpuc.func
def axpy(a, x, y):
    return a * x + y * SCALE
"""

KERNELS = """
import gpuc
import helpers

@gpuc.kernel
def saxpy(a, x, y, out):
    i = gpuc.index()
    out[i] = helpers.axpy(a, x[i], y[i])
"""

RUN = """
import json, sys, warnings
import numpy as np
import gpuc
from kernels import saxpy
x = np.arange(8, dtype=np.{dtype})
out = np.zeros_like(x)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    saxpy[8](x.dtype.type(2), x, x, out)
    {extra}
info = gpuc.cache.info()
print(json.dumps({{"out": out.tolist(), "hits": info["hits"], "misses": info["misses"],
                  "entries": info["entries"], "warnings": [str(w.message) for w in caught]}}))
"""


@pytest.fixture
def project(tmp_path):
    """A folder with helpers.py and kernels.py, and `run(**env)`: a fresh process launching saxpy."""
    root = tmp_path / "project"
    root.mkdir()

    def write(scale=1.0, kernels=KERNELS):
        (root / "helpers.py").write_text(HELPERS.format(scale=scale))
        (root / "kernels.py").write_text(kernels)

    def run(dtype="float32", extra="pass", **env):
        environment = {**os.environ, "GPUC_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(root),
                       "PYTHONDONTWRITEBYTECODE": "1", **env}
        script = root / "run.py"
        script.write_text(RUN.format(dtype=dtype, extra=extra))
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=environment,
                              cwd=root, timeout=120)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.splitlines()[-1])

    write()
    run.write = write
    run.folder = tmp_path / "cache"
    return run


def test_a_second_process_hits_and_an_edited_callee_misses(project):
    first = project()
    assert (first["hits"], first["misses"]) == (0, 1) and first["out"] == [3.0 * i for i in range(8)]
    second = project()
    assert (second["hits"], second["misses"]) == (1, 0) and second["out"] == first["out"]
    project.write(scale=2.0)  # the called function's module changes a captured constant
    third = project()
    assert third["misses"] == 1 and third["out"] == [4.0 * i for i in range(8)]
    project.write(scale=2.0, kernels=KERNELS.replace("out[i] = ", "out[i] = 1 + "))
    fourth = project()
    assert fourth["misses"] == 1 and fourth["out"] == [1 + 4.0 * i for i in range(8)]
    assert project()["hits"] == 1


def test_argument_types_and_the_cache_switch(project):
    project()
    assert project(dtype="float64")["misses"] == 1  # another signature
    off = project(GPUC_CACHE="0")
    assert (off["hits"], off["misses"]) == (0, 0)


def test_a_corrupted_or_truncated_entry_is_a_miss_and_is_replaced(project):
    project()
    (entry,) = list(project.folder.rglob("*.entry"))
    data = bytearray(entry.read_bytes())
    data[-5] ^= 0xFF
    entry.write_bytes(bytes(data))
    again = project()
    assert again["misses"] == 1 and again["out"] == [3.0 * i for i in range(8)]
    entry.write_bytes(entry.read_bytes()[:100])
    assert project()["misses"] == 1
    assert project()["hits"] == 1


def test_entries_others_could_have_written_are_not_used(project):
    project()
    (entry,) = list(project.folder.rglob("*.entry"))
    entry.chmod(0o666)
    assert project()["misses"] == 1


def test_an_unwritable_folder_warns_once_and_compiles(project, tmp_path):
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the cache folder would be")
    result = project(GPUC_CACHE_DIR=str(blocked), extra="saxpy[8](x.dtype.type(2), x, x, out)")
    assert result["out"] == [3.0 * i for i in range(8)]
    assert sum("cannot store compiled code" in w for w in result["warnings"]) == 1


def test_two_processes_filling_one_entry(project, tmp_path):
    environment = {**os.environ, "GPUC_CACHE_DIR": str(project.folder), "PYTHONPATH": str(tmp_path / "project"),
                   "PYTHONDONTWRITEBYTECODE": "1"}
    script = tmp_path / "project" / "race.py"
    script.write_text(RUN.format(dtype="float32", extra="pass"))
    racers = [subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=environment) for _ in range(2)]
    for racer in racers:
        out, err = racer.communicate(timeout=120)
        assert racer.returncode == 0, err
        assert json.loads(out.splitlines()[-1])["out"] == [3.0 * i for i in range(8)]
    assert len(list(project.folder.rglob("*.entry"))) == 1
    assert project()["hits"] == 1


def test_eviction_keeps_the_folder_within_its_size(project):
    project()
    size = sum(p.stat().st_size for p in project.folder.rglob("*.entry"))
    # room for one entry (the float64 one may be a little larger), not two: the older goes
    first = project(dtype="float64", GPUC_CACHE_SIZE=str(size * 3 // 2))
    assert first["entries"] == 1
    assert project(dtype="float64")["hits"] == 1
    assert project(dtype="float32")["misses"] == 1


# -- the key, in-process -------------------------------------------------------------------------------

@gpuc.func
def halve(x):
    return x * 0.5


@gpuc.kernel
def halves(x, out):
    i = gpuc.index()
    out[i] = halve(x[i])


def _key(job, kind="asm"):
    return cache.key(job, kind)


def _job(target=None, **config):
    types = (gpuc.Array[gpuc.float64, 1],) * 2
    return gpuc.CompilerJob((halves, types), gpuc.CompilerConfig(target or gpuc.PTXTarget(), kernel=True, **config))


def test_every_part_of_the_key_counts(monkeypatch):
    base = _key(_job())
    assert base == _key(_job()) and base is not None
    assert _key(_job(gpuc.PTXTarget(cap="sm_80"))) != base
    assert _key(_job(opt_level=3)) != base
    assert _key(_job(whole_blocks=True)) != base
    assert _key(_job(), "obj") != base
    assert _key(_job(gpuc.NativeTarget())) != _key(_job(gpuc.NativeTarget(cpu_name="x86-64")))
    monkeypatch.setattr(cache, "_digest", "an edited gpuc")  # gpuc's own code counts by content
    assert _key(_job()) != base
    monkeypatch.undo()
    monkeypatch.setattr(cache, "_llvm_version", lambda: "23.0.0")
    assert _key(_job()) != base


def test_plugins_count_by_version_or_by_their_code():
    def one(state, marker, module):
        return False

    def two(state, marker, module):
        return bool(module)

    keys = []
    for callback, version in ((one, None), (two, None), (one, "1"), (two, "1"), (one, "2")):
        plugin = gpuc.make_plugin("my.plugin", early_callback=callback, version=version)
        types = (gpuc.Array[gpuc.float64, 1],) * 2
        keys.append(_key(gpuc.CompilerJob((halves, types), gpuc.CompilerConfig(gpuc.PTXTarget(), plugins=[plugin]))))
    assert len({keys[0], keys[1], keys[2], keys[4]}) == 4  # code changes count without a version
    assert keys[2] == keys[3]  # with one, the version identifies the plugin


def test_compile_reports_hits_and_a_hit_gives_the_same_output(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUC_CACHE_DIR", str(tmp_path / "c"))
    first = gpuc.compile(_job(), "asm")
    second = gpuc.compile(_job(), "asm")
    assert (first.trace.cache, second.trace.cache) == ("miss", "hit")
    assert first.output == second.output and first.entry == second.entry
    assert gpuc.cache.info()["entries"] == 1
    gpuc.cache.clear()
    assert gpuc.cache.info()["entries"] == 0


def test_ir_sources_are_cached_by_their_text(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUC_CACHE_DIR", str(tmp_path / "c"))
    ir = "define void @k(ptr %p) {\n  store i32 1, ptr %p\n  ret void\n}\n"
    job = gpuc.CompilerJob(gpuc.IRSource(ir, entry="k"), gpuc.CompilerConfig(gpuc.PTXTarget(), kernel=True))
    assert gpuc.compile(job, "asm").trace.cache == "miss"  # IR text is its own fingerprint
    assert gpuc.compile(job, "asm").trace.cache == "hit"


def test_storing_checks_the_folders_size_only_when_due(tmp_path, monkeypatch):
    # every store used to read every entry's size: 0.3 s per compile with 25,000 entries
    monkeypatch.setenv("GPUC_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("GPUC_CACHE_SIZE", "1M")
    checks = []
    monkeypatch.setattr(cache, "_evict", checks.append)
    monkeypatch.setattr(cache, "_written", 0)
    for k in range(5):
        cache.store(f"{k:064x}", {}, b"x" * 1000)
    assert checks == [1 << 20]  # the first store (no check yet), not the next four
    cache.store(f"{9:064x}", {}, b"x" * 120_000)  # a tenth of the bound written since: checked
    assert len(checks) == 2
    marker = tmp_path / ".checked"
    os.utime(marker, (marker.stat().st_atime, marker.stat().st_mtime - cache.CHECK_EVERY - 1))
    cache.store(f"{10:064x}", {}, b"x")  # no process checked for a while: checked
    assert len(checks) == 3


DERIVATIVES = """
x = np.arange(8, dtype=np.float64)
dx, y, dy = np.zeros(8), np.zeros(8), np.ones(8)
gpuc.adjoint(saxpy)[8](2.0, x, dx, x, dx, y, dy)
helpers_grad = gpuc.grad(helpers.axpy, 2.0, 3.0, 4.0)
assert helpers_grad == (3.0, 2.0, {scale}), helpers_grad
assert dx.tolist() == [2.0 + {scale}] * 8, dx
"""


# Adjoint kernels and the wrappers of gpuc.grad were generated under names numbered per process,
# and the adjoint's request had no description: neither was found by the next process.
def test_adjoints_and_derivative_wrappers_hit_in_a_fresh_process(project):
    extra = "import helpers; exec(" + repr(DERIVATIVES.format(scale=1.0)) + ")"
    first = project(dtype="float64", extra=extra)
    assert first["misses"] == 3 and first["hits"] == 0  # saxpy, its adjoint (one thread), the grad wrapper
    second = project(dtype="float64", extra=extra)
    assert (second["hits"], second["misses"]) == (3, 0)
    project.write(scale=2.0)  # the primal's callee changes: the adjoint and the gradient are compiled again
    third = project(dtype="float64", extra="import helpers; exec(" + repr(DERIVATIVES.format(scale=2.0)) + ")")
    assert third["misses"] == 3


def test_the_runtimes_own_code_is_generated_once_per_folder(tmp_path, monkeypatch):
    """cache.runtime_code: generated at the first call for a folder, read back after it; a corrupted file
    is generated again; neither an entry nor a hit or miss of the user's compiles; off with the cache."""
    from gpuc.targets import NativeTarget

    monkeypatch.setenv("GPUC_CACHE_DIR", str(tmp_path))
    calls = []

    def generate(text):
        def make():
            calls.append(text)
            return text.encode() * 3
        return make

    target, before = NativeTarget(), cache.info()
    assert cache.runtime_code("pool", "ir one", target, generate("ir one")) == b"ir oneir oneir one"
    assert cache.runtime_code("pool", "ir one", target, generate("ir one")) == b"ir oneir oneir one"
    assert cache.runtime_code("pool", "ir two", target, generate("ir two")) == b"ir twoir twoir two"
    assert calls == ["ir one", "ir two"]
    files = sorted(tmp_path.glob("gpuc-*.pool"))
    assert len(files) == 2
    after = cache.info()
    assert (after["entries"], after["hits"], after["misses"]) == (0, before["hits"], before["misses"])
    for file in files:
        file.write_bytes(file.read_bytes()[:-2] + b"xx")  # corrupted: not trusted, generated again
    assert cache.runtime_code("pool", "ir one", target, generate("ir one")) == b"ir oneir oneir one"
    assert calls == ["ir one", "ir two", "ir one"]
    monkeypatch.setenv("GPUC_CACHE", "0")
    assert cache.runtime_code("pool", "ir one", target, generate("ir one")) == b"ir oneir oneir one"
    assert calls == ["ir one", "ir two", "ir one", "ir one"]


POOL_RUN = """
import sys
import numpy as np
import gpuc
from gpuc.runtime import pool
if sys.argv[1] == "read":  # the scheduler's code must come from the folder
    def refuse(target):
        raise AssertionError("generated again")
    pool._generate = refuse
assert pool._native_scheduler() is not None
from kernels import saxpy
x = np.arange(1 << 16, dtype=np.float32)
out = np.zeros_like(x)
saxpy.launch(x.size, np.float32(2), x, x, out, threads=2)
assert np.array_equal(out, 3 * x), out
"""


def test_a_fresh_process_reads_the_launch_scheduler_from_the_folder(project, tmp_path):
    """The CPU's compiled launch scheduler (gpuc/runtime/pool.py) is generated by the first process and read,
    not generated, by the next one, which launches with it on two threads."""
    script = tmp_path / "project" / "pool_run.py"
    script.write_text(POOL_RUN)
    environment = {**os.environ, "GPUC_CACHE_DIR": str(project.folder), "PYTHONPATH": str(tmp_path / "project")}
    for mode in ("generate", "read"):
        done = subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True,
                              env=environment, timeout=120)
        assert done.returncode == 0, done.stderr
    assert len(list(project.folder.glob("gpuc-*.pool"))) == 1
