"""examples/dask_heat.py on a local Dask cluster of two worker processes: results, cache use, located errors."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("dask.array", reason="install the dask extra: dask[distributed]")
pytest.importorskip("distributed", reason="install the dask extra: dask[distributed]")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dask_heat.py"
WORKER_LINE = re.compile(r"^    worker (\S+): compiled (\d+), found in the cache (\d+)  \(folder (\S+): ", re.M)


@pytest.fixture(scope="module")
def output():
    proc = subprocess.run([sys.executable, str(EXAMPLE), "--small", "--fail"], capture_output=True, text=True,
                          timeout=180, cwd=EXAMPLE.parent.parent)
    assert proc.returncode == 0, f"the example failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def phases(output: str) -> list[str]:
    return re.split(r"^\d\. ", output, flags=re.M)[1:]


def test_chunked_steps_equal_numpy(output):
    assert "all checks passed" in output and "WRONG" not in output
    agreements = re.findall(r"4 steps on 256 x 256 in chunks of 128: .* against NumPy: (.*)$", output, re.M)
    assert len(agreements) == 3, output
    for agreement in agreements:
        assert agreement == "identical" or float(agreement.split()[-1]) <= 1e-12


def test_workers_compile_once_per_cache_folder(output):
    shared, again, own = ([(int(compiled), int(found), folder) for _, compiled, found, folder in
                           WORKER_LINE.findall(phase)] for phase in phases(output)[:3])
    # one folder for the cluster: one worker compiles, the other finds the code
    assert sorted(compiled for compiled, _, _ in shared) == [0, 1] and len({f for _, _, f in shared}) == 1
    assert all(found > 0 for compiled, found, _ in shared if not compiled)
    # new worker processes, the same folder: no compile at all
    assert [compiled for compiled, _, _ in again] == [0, 0] and all(found > 0 for _, found, _ in again)
    # a folder per worker: each compiles once
    assert [compiled for compiled, _, _ in own] == [1, 1] and len({f for _, _, f in own}) == 2
    assert "client process: compiled 0" in output
    checks = [line.strip() for line in output.splitlines() if line.endswith((": ok", ": WRONG"))]
    assert checks[:3] == ["one compile in the cluster: ok", "no compile: ok", "one compile per worker: ok"]


def test_compile_error_on_a_worker_is_located_in_the_client(output):
    line = next(n for n, text in enumerate(EXAMPLE.read_text().splitlines(), 1) if "alpha * laplacian" in text)
    failure = phases(output)[3]
    assert "the client caught gpuc.CompilationError:" in failure and f"located at dask_heat.py:{line}: ok" in failure
    assert f"{EXAMPLE}:{line}:35: name 'laplacian' is not defined" in failure
    assert re.search(r"^ +\^$", failure, re.M), "the caret under the column"
