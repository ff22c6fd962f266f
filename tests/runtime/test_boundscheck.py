"""Bounds checks (docs/debugging.md, "Bounds checks"): with @gpuc.kernel(boundscheck=True),
@gpuc.func(boundscheck=True) or GPUC_BOUNDSCHECK=1, an index out of range stops a CPU launch with an
IndexError naming the site, the index, the axis and the shape; in-range programs compute exactly what
they compute unchecked; the process and the next launch are unharmed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import gpuc
from gpuc.abi import KernelSignature
from gpuc.compiler import cache
from gpuc.runtime import cpu
from gpuc.runtime.dispatch import launch_job, signature_spec, typeof
from support.device_debug_kernels import (count, diagonal_plus, from_the_end, local_window, row_sums, runaway,
                                          shared_reverse, shift, store_past, weighted_gradients)
from support.user_programs import PROGRAMS

HERE = "device_debug_kernels.py"  # where the kernels are (shared with the OpenCL and CUDA tests)


@pytest.mark.parametrize("threads", [1, 2])
def test_an_index_past_the_end_is_an_index_error(threads):
    a, out = np.arange(10.0), np.zeros(10)
    with pytest.raises(IndexError) as info:
        shift[10](a, out, threads=threads)
    message = str(info.value)
    assert re.search(rf"{HERE}:\d+:\d+: index 10 is out of bounds for axis 0 with size 10 in a\[i \+ 1\] in shift",
                     message), message
    assert "shape (10,)" in message


def test_in_range_the_checked_kernel_computes_what_numpy_does():
    a, out = np.arange(10.0), np.zeros(9)
    shift[9](a, out)
    np.testing.assert_array_equal(out, a[1:])


def test_negative_indices_wrap_as_in_python_until_they_pass_the_start():
    a, out = np.arange(5.0), np.zeros(5)
    from_the_end[5](a, out, 5)  # a[i - 5]: -5 .. -1, every one in range
    np.testing.assert_array_equal(out, [a[i - 5] for i in range(5)])
    with pytest.raises(IndexError, match=r"index -6 is out of bounds for axis 0 with size 5"):
        from_the_end[5](a, out, 6)


def test_a_store_past_the_end_writes_nothing_outside_the_array():
    guard = np.full(12, 7.0)
    out = guard[:6]  # a view: what lies after it must stay as it was
    with pytest.raises(IndexError, match=r"index 6 is out of bounds .* in out\[2 \* i\] in store_past"):
        store_past[6](out, threads=1)
    np.testing.assert_array_equal(guard[6:], 7.0)


def test_a_checked_func_names_its_own_site_and_the_shape():
    a = np.arange(16.0).reshape(4, 4)
    with pytest.raises(IndexError, match=r"index 4 is out of bounds for axis 1 with size 4 in a\[i, j\] in at "
                                         r"\(an array of shape \(4, 4\)\)"):
        diagonal_plus[4](a, np.zeros(4), 2)
    out = np.zeros(2)
    diagonal_plus[2](a, out, 2)
    np.testing.assert_array_equal(out, [a[0, 2], a[1, 3]])


def test_an_atomic_at_an_index_out_of_range():
    hits = np.zeros(3, np.int64)
    with pytest.raises(IndexError, match=r"index 5 is out of bounds for axis 0 with size 3 in "
                                         r"gpuc.atomic_add\(hits, a\[i\], 1\)"):
        count[1](np.array([5]), 0, hits)
    assert hits.tolist() == [0, 0, 0]


def test_an_integer_index_of_a_view():
    a = np.arange(6.0).reshape(2, 3)
    out = np.zeros(2)
    row_sums[2](a, out, 0)
    np.testing.assert_array_equal(out, a.sum(axis=1))
    with pytest.raises(IndexError, match=r"index 2 is out of bounds for axis 0 with size 2 in a\[i \+ k, :\]"):
        row_sums[2](a, out, 1)


def test_a_loop_spoiled_by_a_failed_check_stops():
    with pytest.raises(IndexError, match=r"index 10 is out of bounds .* in a\[k\] in runaway"):
        runaway[4](np.arange(10.0), np.zeros(4))


def test_shared_and_local_arrays_are_checked():
    x = np.arange(16.0)
    out = np.zeros(16)
    shared_reverse[16](x, out, 0, block=8)
    np.testing.assert_array_equal(out, np.concatenate([x[7::-1], x[:7:-1]]))
    with pytest.raises(IndexError, match=r"index 8 is out of bounds for axis 0 with size 8 in buf\[7 - t \+ skew\]"):
        shared_reverse[16](x, out, 1, block=8)
    local_window[4](x, out, 4)
    with pytest.raises(IndexError, match=r"index 4 is out of bounds for axis 0 with size 4 in w\[k\]"):
        local_window[4](x, out, 5)


def test_the_next_launch_after_a_failed_one_is_unharmed():
    a, out = np.arange(10.0), np.zeros(10)
    for _ in range(3):
        with pytest.raises(IndexError):
            shift[10](a, out, threads=2)
        out9 = np.zeros(9)
        shift[9](a, out9, threads=2)  # no stale record from the failed launch
        np.testing.assert_array_equal(out9, a[1:])


def test_unchecked_kernels_compile_no_checks_and_the_cache_keys_on_it(monkeypatch):
    monkeypatch.setenv("GPUC_CACHE", "1")
    @gpuc.kernel
    def plain(a, out):
        i = gpuc.index()
        out[i] = a[i + 1]

    args = (np.zeros(4), np.zeros(3))
    assert "gpuc.boundscheck" not in plain.inspect(*args).llvm
    assert "gpuc_boundscheck_record" in shift.inspect(*args).llvm
    types = tuple(typeof(a, i) for i, a in enumerate(args))
    job = launch_job(plain, types, "cpu")
    checked = gpuc.CompilerJob(job.source, job.config.replace(boundscheck=True))
    assert cache.key(job, "jit") != cache.key(checked, "jit")


def test_targets_without_a_record_warn_that_they_compile_without_checks():
    # SPIR-V and PTX keep the record in the module (tests/runtime/test_device_debug.py); GCN has no runtime here
    types = (gpuc.Array[gpuc.float64, 1],) * 2
    job = gpuc.CompilerJob((shift, types), gpuc.CompilerConfig(gpuc.GCNTarget(), kernel=True))
    with pytest.warns(gpuc.errors.LaunchWarning, match=r"bounds checks run on the CPU, OpenCL \(spirv\) and CUDA"):
        llvm = gpuc.compile(job, "llvm").output
    assert "gpuc_boundscheck_record" not in llvm


def test_bad_option_values_are_refused():
    with pytest.raises(ValueError, match=r"@gpuc.func\(boundscheck=...\) is True or False"):
        gpuc.func(boundscheck="yes")


def test_the_environment_switch_checks_everything(tmp_path):
    script = tmp_path / "k.py"
    script.write_text(textwrap.dedent("""
        import numpy as np, gpuc

        @gpuc.kernel
        def shift(a, out):
            i = gpuc.index()
            out[i] = a[i + 1]

        try:
            shift[4](np.zeros(4), np.zeros(4))
        except IndexError as exc:
            print("IndexError", exc)
    """))
    env = {**os.environ, "GPUC_BOUNDSCHECK": "1", "GPUC_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "IndexError" in done.stdout and "k.py:7:" in done.stdout and "index 4 is out of bounds" in done.stdout


def _checked_launcher(kernel, args):
    types = tuple(typeof(a, i) for i, a in enumerate(args))
    job = launch_job(kernel, types, "cpu")
    job = gpuc.CompilerJob(job.source, job.config.replace(boundscheck=True))
    return cpu.JITModule(job, signature=KernelSignature(signature_spec(types))).launcher()


@pytest.mark.parametrize("p", PROGRAMS, ids=[p.id for p in PROGRAMS])
def test_in_range_programs_compute_the_same_with_checks(p):
    want, got = p.make(), p.make()
    p.kernel.launch(p.n, *want, threads=1)
    _checked_launcher(p.kernel, got)(p.n, got, threads=1)
    for w, g in zip(want, got):
        if isinstance(w, np.ndarray):
            np.testing.assert_array_equal(g, w, strict=True)


def test_derivatives_of_checked_funcs():
    # the call a failed check makes is transparent to the autodiff plugin: it writes only the runtime's record
    xs, w, out = np.linspace(-1, 1, 8), np.array([0.5, 1.5, 2.0]), np.zeros(8)
    weighted_gradients[8](xs, w, 3, out)
    np.testing.assert_allclose(out, 2 * (2 * w.sum() * xs), rtol=1e-14)
    with pytest.raises(IndexError, match=r"index 3 is out of bounds for axis 0 with size 3 in w\[k\] in weighted"):
        weighted_gradients[8](xs, w, 4, out)
