"""The OpenCL runtime itself (gpuc/runtime/opencl.py): finding the device, device arrays, what is copied,
bad input refused before anything is written. Every kernel test of the suite also runs through it (the
`devices` mark, tests/conftest.py); these are the runtime's own behaviours."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import gpuc
from gpuc.runtime import opencl

from opencl_kernels import (big_shared, dynamic_reverse, fill_block_ids, fill_ids, linear_ids, nothing, row_sums, saxpy,
                            shift_add, warp_sizes)

pytestmark = pytest.mark.skipif(not opencl.available() and os.environ.get("CI", "").lower() not in ("1", "true"),
                                reason=str(opencl.unavailable_reason()))

HERE = Path(__file__).parent


def _run(code: str, env_update: dict | None = None, drop=()) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(env_update or {})
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                          timeout=300)


def test_devices_list_the_intel_cpu_device():
    found = opencl.devices()
    assert found, "no OpenCL device"
    spirv = [d for d in found if d.spirv]
    assert spirv and spirv[0].index == opencl.device_info().index
    info = opencl.device_info()
    assert info.max_work_group_size >= 256 and info.local_memory > 0
    assert "SPIR-V" in str(info)


def test_the_environment_s_driver_is_found_without_settings():
    # the ICD file of intel-opencl-rt names a path that does not exist: gpuc writes a vendors folder
    proc = _run("""
        import gpuc.opencl as o, os
        assert o.available(), o.unavailable_reason()
        print(os.environ["OCL_ICD_VENDORS"])
    """, drop=("OCL_ICD_VENDORS", "OCL_ICD_FILENAMES"))
    assert proc.returncode == 0, proc.stderr
    folder = Path(proc.stdout.strip())
    libraries = [p.read_text().strip() for p in folder.glob("*.icd")]
    assert libraries and all(Path(lib).exists() or "/" not in lib for lib in libraries)


@pytest.mark.parametrize("choice", ["0", "EPYC", "epyc"])
def test_gpuc_opencl_device_picks_by_index_or_name(choice):
    if choice != "0" and "epyc" not in opencl.device_info().name.lower():
        pytest.skip("the device is not the AMD EPYC CPU")
    proc = _run("import gpuc.opencl as o; print(o.device_info().index)", {"GPUC_OPENCL_DEVICE": choice})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "0"


def test_a_device_name_that_matches_nothing_is_a_clear_error():
    proc = _run("""
        import numpy as np, gpuc
        from opencl_kernels import saxpy
        saxpy[4](1.0, np.ones(4), np.ones(4), device="opencl")
    """, {"GPUC_OPENCL_DEVICE": "no such device"})
    assert proc.returncode != 0
    assert "GPUC_OPENCL_DEVICE='no such device' names no OpenCL device" in proc.stderr
    assert "AMD EPYC" in proc.stderr or "[0]" in proc.stderr  # the devices there are


def test_without_pyopencl_the_error_says_what_to_install():
    proc = _run("""
        import sys
        sys.modules["pyopencl"] = None  # as if not installed
        import numpy as np, gpuc, gpuc.opencl
        from opencl_kernels import saxpy
        assert gpuc.opencl.devices() == []
        y = np.ones(4)
        try:
            saxpy[4](1.0, np.ones(4), y, device="opencl")
        except gpuc.opencl.OpenCLUnavailableError as exc:
            print(exc)
        assert (y == 1).all()
    """)
    assert proc.returncode == 0, proc.stderr
    assert "pyopencl is not installed" in proc.stdout and "pip install 'gpuc[opencl]'" in proc.stdout


def test_numpy_arrays_are_copied_in_and_written_ones_back():
    x, y = np.arange(8.0), np.ones(8)
    x.flags.writeable = False  # only read: accepted, never written
    saxpy[8](2.0, x, y, device="opencl")
    np.testing.assert_array_equal(y, 2 * np.arange(8.0) + 1)


def test_a_strided_view_is_written_back_in_place():
    base = np.zeros(20)
    view = base[1::2]
    shift_add[10](np.arange(10.0), view, device="opencl")
    np.testing.assert_array_equal(base[1::2], np.arange(10.0))
    assert (base[0::2] == 0).all()


def test_the_same_array_twice_is_one_buffer():
    a = np.arange(6.0)
    shift_add[6](a, a, device="opencl")  # dst[i] = dst[i] + src[i] on the same memory
    np.testing.assert_array_equal(a, 2 * np.arange(6.0))


def test_overlapping_views_where_one_is_written_are_refused_untouched():
    base = np.arange(10.0)
    with pytest.raises(ValueError, match="arguments 0 and 1 overlap in memory"):
        shift_add[5](base[:5], base[2:7], device="opencl")
    np.testing.assert_array_equal(base, np.arange(10.0))


def test_device_arrays_stay_on_the_device():
    x = opencl.to_device(np.arange(1000.0))
    y = opencl.to_device(np.ones(1000))
    saxpy[1000](3.0, x, y)  # no device=: the arrays say where
    np.testing.assert_array_equal(opencl.copy_to_host(y), 3 * np.arange(1000.0) + 1)
    np.testing.assert_array_equal(x.get(), np.arange(1000.0))


def test_a_device_view_at_an_aligned_offset_runs_in_place():
    align = opencl.session().device.mem_base_addr_align // 8
    step = align // 8  # float64 elements per alignment
    y = opencl.to_device(np.zeros(4 * step))
    shift_add[step](opencl.to_device(np.ones(step)), y[step:2 * step])
    expected = np.zeros(4 * step)
    expected[step:2 * step] = 1
    np.testing.assert_array_equal(y.get(), expected)


def test_a_device_view_at_an_unaligned_offset_is_refused():
    y = opencl.to_device(np.zeros(16))
    with pytest.raises(ValueError, match="bytes into its buffer"):
        shift_add[4](opencl.to_device(np.ones(4)), y[1:5])
    assert (y.get() == 0).all()


def test_a_dtype_kernels_do_not_take_is_refused_before_anything_is_written():
    y = np.ones(4)
    with pytest.raises(TypeError, match="dtype complex256 is not supported|clongdouble"):
        shift_add[4](opencl.to_device(np.ones(4, np.clongdouble)), y, device="opencl")
    assert (y == 1).all()


def test_a_read_only_array_the_kernel_writes_is_refused():
    y = np.ones(4)
    y.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        shift_add[4](np.ones(4), y, device="opencl")


def test_blocks_and_dynamic_shared_memory():
    out = np.zeros(100, np.int64)
    fill_block_ids[100](out, block=32, device="opencl")
    i = np.arange(100)
    np.testing.assert_array_equal(out, (i // 32) * 1000 + i % 32)
    x = np.arange(64, dtype=np.float32)
    rev = np.zeros(64, np.float32)
    dynamic_reverse[64](x, rev, block=16, shared=16 * 4, device="opencl")
    np.testing.assert_array_equal(rev, x.reshape(4, 16)[:, ::-1].ravel())


def test_a_block_the_device_cannot_hold_is_refused():
    info = opencl.device_info()
    with pytest.raises(opencl.DeviceLacksError, match="larger than"):
        fill_block_ids[16](np.zeros(16, np.int64), block=info.max_work_group_size + 1, device="opencl")


def test_launch_and_block_of_different_ranks_are_padded_as_on_the_cpu():
    # (8, 5, 1) in blocks of (4, 5) and (6, 3) in blocks of (2, 3, 1): sizes of 1 add no rank
    for n, block in (((8, 5, 1), (4, 5)), ((6, 3), (2, 3, 1))):
        dims = n + (1,) * (3 - len(n))
        out = np.full(dims[::-1], -1, np.int64)
        linear_ids[n](out, block=block, device="opencl")
        z, y, x = np.indices(dims[::-1])
        b = block + (1,) * (3 - len(block))
        np.testing.assert_array_equal(out, x % b[0] + 10 * (y % b[1]) + 100 * (z % b[2]))


def test_shared_arrays_beyond_the_local_memory_are_refused_by_name():
    info = opencl.device_info()
    with pytest.raises(opencl.DeviceLacksError, match=r"big_shared.*shared arrays take 8388608 bytes.*local memory"):
        big_shared[64](np.zeros(64), block=32, device="opencl")
    assert info.local_memory < 1 << 23


def test_warp_size_is_the_sub_group_size_the_driver_reports():
    out = np.zeros(100, np.int64)
    warp_sizes[100](out, block=20, device="opencl")
    run = gpuc.runtime.dispatch.launcher_for(warp_sizes, (out,), "opencl", whole_blocks=True).opencl
    assert set(out.tolist()) == {run.sub_group_size(20)}


def test_empty_launches_and_empty_kernels():
    y = np.ones(0)
    saxpy[0](1.0, y, y, device="opencl")
    nothing[5](device="opencl")
    opencl.synchronize()


def test_a_device_without_float64_gets_a_named_error():
    from gpuc.compiler import CompilerConfig, CompilerJob, compile
    from gpuc.runtime.dispatch import typeof

    types = tuple(typeof(v) for v in (1.0, np.ones(2), np.ones(2)))
    spirv = compile(CompilerJob((saxpy, types), CompilerConfig(gpuc.SPIRVTarget(), kernel=True)), "obj").output
    lacking = dataclasses.replace(opencl.device_info(), fp64=False, name="a device")
    with pytest.raises(opencl.DeviceLacksError, match="a device has no float64"):
        opencl.check_device(lacking, spirv, saxpy)
    types32 = tuple(typeof(v) for v in (np.float32(1), np.ones(2, np.float32), np.ones(2, np.float32)))
    spirv32 = compile(CompilerJob((saxpy, types32), CompilerConfig(gpuc.SPIRVTarget(), kernel=True)), "obj").output
    opencl.check_device(lacking, spirv32, saxpy)  # no float64 in it: fine


def test_the_device_binary_is_cached_on_disk(monkeypatch):
    from gpuc.compiler import cache

    if not cache.enabled():
        pytest.skip("the disk cache is off")
    x, y = np.arange(4.0), np.ones(4)
    saxpy[4](2.0, x, y, device="opencl")
    s = opencl.session()
    s.programs.clear()  # as in a fresh process
    built_from_il = []
    real = s.cl.Program

    def counting(context, *args):
        if len(args) == 1:  # Program(context, il): built from SPIR-V, not from the cached binary
            built_from_il.append(args)
        return real(context, *args)
    monkeypatch.setattr(s.cl, "Program", counting)
    from gpuc.runtime import dispatch
    saxpy.__dict__.pop("_gpuc_launchers", None)
    y = np.ones(4)
    saxpy[4](2.0, x, y, device=dispatch.DEVICES[2])
    np.testing.assert_array_equal(y, 2 * x + 1)
    assert built_from_il == []


def test_float_sums_in_loops_keep_their_order_in_every_work_item():
    # Intel's CPU runtime vectorized the loop itself for the work items left over from whole vectors (4 of
    # each work-group of 100 here), adding 8 partial sums: those rows differed in the last bits
    a = np.random.default_rng(3).standard_normal((4100, 300)).astype(np.float32)
    out = np.zeros(len(a), np.float32)
    row_sums[len(a)](a, out, device="opencl")
    want = np.zeros(len(a), np.float32)
    for j in range(a.shape[1]):
        want = want + a[:, j] * a[:, j]
    np.testing.assert_array_equal(out, want)


def test_ordered_reductions_pass_float_recurrences_through_a_volatile_slot():
    types = (gpuc.Array[gpuc.float32, 2], gpuc.Array[gpuc.float32, 1])

    def spirv(target):
        job = gpuc.CompilerJob((row_sums, types), gpuc.CompilerConfig(target, kernel=True))
        return gpuc.compile(job, "asm").output

    assert "Volatile" in spirv(gpuc.SPIRVTarget(ordered_reductions=True))
    assert "Volatile" not in spirv(gpuc.SPIRVTarget())
    assert repr(gpuc.SPIRVTarget(ordered_reductions=True)) == "SPIRVTarget(ordered_reductions=True)"


def test_recurrences_that_are_no_reductions_keep_their_registers():
    # Mandelbrot's z = z * z + c reads z twice and tests it: no loop vectorizer reorders it, and a volatile
    # slot would keep Intel's compiler from running work items in vector lanes (3.5x slower)
    from opencl_kernels import escape_times
    types = (gpuc.Array[gpuc.float64, 1], gpuc.Array[gpuc.int64, 1])
    job = gpuc.CompilerJob((escape_times, types), gpuc.CompilerConfig(gpuc.SPIRVTarget(ordered_reductions=True),
                                                                       kernel=True))
    assert "Volatile" not in gpuc.compile(job, "asm").output
    cs = np.linspace(-2.0, 0.5, 257)
    out = np.zeros(257, np.int64)
    escape_times[257](cs, out, device="opencl")
    expected = np.zeros(257, np.int64)
    for i, c in enumerate(cs):
        z, k = 0.0, 0
        while k < 50 and abs(z) <= 2.0:
            z, k = z * z + c, k + 1
        expected[i] = k
    np.testing.assert_array_equal(out, expected)


@pytest.mark.filterwarnings("ignore::gpuc.errors.LaunchWarning")  # the 2-D launch of fill_ids
def test_index_spaces_of_2_to_the_62_work_items_are_refused_before_the_driver():
    # Intel's CPU runtime crashed (SIGSEGV) on a launch of 2**62 work items; gpuc's kernels assume fewer
    y = np.zeros(4)
    # (a kernel of the block model needs block=: fill_ids, which is not one, for the launches without)
    for n, block in (((2**62,), None), ((2**31, 2**31), None), ((2**62 - 1,), 2)):  # the last: in whole blocks
        with pytest.raises(ValueError, match=r"fewer than 2\*\*62 in all"):
            (fill_block_ids if block else fill_ids)[n](y, block=block, device="opencl")
    assert (y == 0).all()


def test_strided_views_keep_their_strides_and_only_their_elements_are_written():
    base = np.zeros((6, 8))
    view = base[:, 1::3]  # strided: copied with its gaps, so the kernel sees NumPy's strides
    from gpuc.runtime.opencl import _host_view
    assert _host_view(view).strides == (8, 3)
    assert _host_view(base[::-1]).strides == (8, 1)  # reversed: copied C-contiguous
    even, odd = np.zeros(20), np.zeros(20)
    both = np.zeros(40)
    shift_add[20](np.arange(20.0), both[0::2], device="opencl")
    shift_add[20](np.arange(20.0) + 100, both[1::2], device="opencl")
    even[:], odd[:] = both[0::2], both[1::2]
    np.testing.assert_array_equal(even, np.arange(20.0))
    np.testing.assert_array_equal(odd, np.arange(20.0) + 100)


def test_two_written_views_interleaved_in_one_array():
    from opencl_kernels import write_two
    both = np.zeros(40)
    write_two[20](both[0::2], both[1::2], device="opencl")  # each span holds the other's elements
    np.testing.assert_array_equal(both[0::2], np.arange(20.0))
    np.testing.assert_array_equal(both[1::2], -np.arange(20.0))
