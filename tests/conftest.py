"""Fixtures shared by every test area: a temporary folder per run that must be empty at the end, plugin-registry
isolation, FileCheck, ptxas and spirv-val. Shared helpers are the package tests/support (`from support import ...`)."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import gpuc

from support.toolchain import find_ptxas, find_spirv_val

# The run's compiles (and its subprocesses') share a disk cache of their own, empty at the start (set
# before any test module compiles at import): a user's cache is never read or written, and nothing a
# run stores outlives it.
os.environ["GPUC_CACHE_DIR"] = tempfile.mkdtemp(prefix="gpuc-test-cache-")
atexit.register(shutil.rmtree, os.environ["GPUC_CACHE_DIR"], ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def _private_temp_folder(tmp_path_factory):
    """Send the temporary files of the run (this process and its subprocesses) to a folder of its own under
    pytest's base folder, and fail the run if the tests leave anything there: they write under tmp_path."""
    folder = tmp_path_factory.mktemp("tempfile")  # under the base folder, which pytest fixes on first use
    saved = tempfile.tempdir, os.environ.get("TMPDIR")
    tempfile.tempdir = os.environ["TMPDIR"] = str(folder)
    yield
    tempfile.tempdir = saved[0]
    if saved[1] is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = saved[1]
    left = sorted(p.name for p in folder.iterdir())
    if left:
        pytest.fail(f"the tests left these in the temporary folder {folder}: {', '.join(left)}", pytrace=False)


@pytest.fixture
def example(monkeypatch):
    """`example("blur")`: examples/blur.py as a fresh module, examples/ on sys.path for the whole test."""
    from support.examples import EXAMPLES, load_example
    monkeypatch.syspath_prepend(str(EXAMPLES))
    return load_example


@pytest.fixture
def no_disk_cache(monkeypatch):
    """Compiles run every stage: tests of the stages themselves must not get code from the disk cache."""
    monkeypatch.setenv("GPUC_CACHE", "0")


@pytest.fixture
def isolated_plugins():
    """Plugins the test registers or unregisters are restored afterwards, so no test leaks plugins."""
    with gpuc.plugin_scope():
        yield


@pytest.fixture
def filecheck(tmp_path):
    """`filecheck(text, checks, *args)`: run FileCheck (PyPI `filecheck`) with `checks` against `text`."""
    pytest.importorskip("filecheck", reason="install the PyPI package filecheck==1.0.6")
    counter = iter(range(1_000_000))
    script = Path(sys.executable).parent / "filecheck"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "filecheck"]

    def check(text: str, checks: str, *args: str) -> None:
        check_file = tmp_path / f"checks{next(counter)}.txt"
        check_file.write_text(checks)
        proc = subprocess.run([*command, *args, str(check_file)], input=text, capture_output=True, text=True,
                              timeout=60)
        if proc.returncode != 0:
            pytest.fail(f"FileCheck failed:\n{proc.stdout}{proc.stderr}\n--- checks ---\n{checks}"
                        f"\n--- input ---\n{text}", pytrace=False)
    return check


@pytest.fixture
def ptxas(tmp_path):
    """`ptxas(ptx_text, arch="sm_90")`: assemble with `ptxas -arch=ARCH`; fails the test with its output."""
    exe = find_ptxas()
    if exe is None:
        pytest.skip("ptxas not found (PATH, nvidia-cuda-nvcc-cu12 wheel, /usr/local/bin)")
    counter = iter(range(1_000_000))

    def run(ptx: str, arch: str = "sm_90") -> None:
        path = tmp_path / f"kernel{next(counter)}.{arch}.ptx"
        path.write_text(ptx)
        proc = subprocess.run([exe, f"-arch={arch}", str(path), "-o", os.devnull],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"ptxas -arch={arch} rejected the PTX:\n{proc.stderr}\n{ptx}"
    return run


@pytest.fixture
def spirv_val(tmp_path):
    """`spirv_val(binary)`: validate a SPIR-V binary; fails the test with the validator's output."""
    exe = find_spirv_val()
    if exe is None:
        pytest.skip("spirv-val not found (apt install spirv-tools)")
    counter = iter(range(1_000_000))

    def run(binary: bytes) -> None:
        path = tmp_path / f"module{next(counter)}.spv"
        path.write_bytes(binary)
        proc = subprocess.run([exe, str(path)], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, f"spirv-val rejected the module:\n{proc.stdout}{proc.stderr}"
    return run


# -- every kernel on every device ------------------------------------------------------------------
#
# A test module (or test) marked `pytest.mark.devices("cpu", "opencl")` runs once per device: launches
# on host arrays without `device=` go to that device (gpuc.runtime.dispatch.using_device), so the same
# kernels and the same assertions run natively and through OpenCL. `pytest.mark.not_on("opencl", why)`
# skips one device's run of a test, naming what that device lacks or what the test checks of another.
# Without an OpenCL device the OpenCL runs skip saying what to install, except in CI (CI=true), where
# the Intel OpenCL CPU runtime is installed and a missing device fails them.

DEVICES = ("cpu", "opencl")


def pytest_configure(config):
    config.addinivalue_line("markers", "devices(*names): run the test once per device (launches on host arrays "
                                       "go to it); names from " + ", ".join(DEVICES))
    config.addinivalue_line("markers", "not_on(device, reason): skip the test's run on `device`, saying why")


def pytest_generate_tests(metafunc):
    marker = metafunc.definition.get_closest_marker("devices")
    if marker is None:
        return
    params = []
    for name in marker.args or DEVICES:
        reasons = [m.args[1] for m in metafunc.definition.iter_markers("not_on") if m.args[0] == name]
        marks = [pytest.mark.skip(reason=f"not on {name}: {reasons[0]}")] if reasons else []
        params.append(pytest.param(name, marks=marks, id=name))
    metafunc.parametrize("gpuc_device", params, indirect=True)


@pytest.fixture(autouse=True)
def gpuc_device(request):
    """The device this run of the test launches on ("cpu" for tests not marked `devices`)."""
    from gpuc.runtime.dispatch import using_device

    device = getattr(request, "param", "cpu")
    if device == "opencl":
        from gpuc.runtime import opencl
        reason = opencl.unavailable_reason()
        if reason is not None:
            if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
                pytest.fail(f"CI runs every kernel on the Intel OpenCL CPU device, and there is none: {reason}")
            pytest.skip(reason)
    with using_device(device):
        yield device
