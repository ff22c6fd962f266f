"""print() and bounds checks on GPU targets (docs/debugging.md): through OpenCL here (SPIR-V's printf, the
program's bounds record read after each launch), compared with what the CPU prints and raises; PTX compiled
and checked with ptxas; the CUDA runtime's reading of the record against a stub libcuda."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import gpuc
from gpuc import abi
from gpuc.runtime import opencl
from gpuc.targets.ptx import find_ptxas

from support import device_debug_kernels as K

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
F64 = gpuc.Array[gpuc.float64, 1, "C"]

needs_opencl = pytest.mark.skipif(not opencl.available() and os.environ.get("CI", "").lower() not in ("1", "true"),
                                  reason=str(opencl.unavailable_reason()))
needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="needs ptxas (pip install 'gpuc[ptx]')")


def _run(code: str, env_update: dict | None = None) -> subprocess.CompletedProcess:
    """A script in a fresh process: OpenCL's printf writes to the process's C stdout, not sys.stdout."""
    env = dict(os.environ, **(env_update or {}))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tests"), str(ROOT), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                          timeout=600)


def _cpu_output(capsys, kernel, args) -> str:
    capsys.readouterr()
    kernel[1](*args, device="cpu", threads=1)
    return capsys.readouterr().out


# -- print() through OpenCL --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def opencl_prints() -> dict:
    """What each of K.print_cases() prints through OpenCL, by name (one process for all of them)."""
    done = _run("""
        import gpuc, gpuc.opencl
        from support import device_debug_kernels as K
        for k, (name, kernel, args) in enumerate(K.print_cases()):
            K.marker[1](k, device="opencl")
            kernel[1](*args, device="opencl")
        gpuc.opencl.synchronize()
    """)
    assert done.returncode == 0, done.stderr
    parts = re.split(r"^=== case (\d+)\n", done.stdout, flags=re.M)
    assert parts[0] == "", parts[0]
    names = [name for name, _, _ in K.print_cases()]
    return {names[int(k)]: text for k, text in zip(parts[1::2], parts[2::2])}


@needs_opencl
@pytest.mark.parametrize("case", K.print_cases(), ids=[name for name, _, _ in K.print_cases()])
def test_opencl_prints_what_the_cpu_prints(case, opencl_prints, capsys):
    name, kernel, args = case
    assert opencl_prints[name] == _cpu_output(capsys, kernel, args)


@needs_opencl
def test_opencl_prints_floats_as_python_does_where_printf_can(opencl_prints):
    lines = opencl_prints["float64"].splitlines()[::2]
    assert lines == ["0.5", "-2.5", "3.0", "0.375", "1e+30", "9.5367431640625e-07", "inf", "-inf", "nan", "-0.0",
                     "123456789.0"]
    assert opencl_prints["numpy scalars"] == "(np.float32(0.5), np.int8(-3)) 0.5 100% %d %s\n"


@needs_opencl
def test_opencl_prints_with_printf_s_digits_where_python_has_fewer():
    # documented: %.17g reads back as the same float, but is not always the shortest such text; and past
    # four complex numbers in one print() each keeps its parentheses and real part
    done = _run("""
        import numpy as np, gpuc, gpuc.opencl
        from support import device_debug_kernels as K
        K.print_values[1](np.array([0.1]), device="opencl")
        K.print_many_complex[1](np.array([2j, 1 + 1j, 3j, 4j, 5j]), device="opencl")
        gpuc.opencl.synchronize()
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ("0.10000000000000001\nk = 0 twice: 0.20000000000000001;\n"
                           "(0+2j) (1+1j) (0+3j) (0+4j) (0+5j)\n")
    assert float("0.10000000000000001") == 0.1


def test_print_of_complex_numbers_branches_between_their_forms():
    ptx = _ptx(K.print_many_complex, (gpuc.Array[gpuc.complex128, 1, "C"],))
    assert ptx.count("vprintf,") + len(re.findall(r"call\.uni[^;]*vprintf", ptx)) >= 1
    job = gpuc.CompilerJob((K.print_complex_tuples, (gpuc.Array[gpuc.complex128, 1, "C"],)),
                           gpuc.CompilerConfig(gpuc.SPIRVTarget(), kernel=True, optimize=False))
    llvm = gpuc.compile(job, "llvm").output
    assert llvm.count("call spir_func i32 (ptr addrspace(2), ...) @printf") == 8  # three complex numbers, 2**3 lines


@needs_opencl
def test_each_work_item_s_line_is_whole():
    done = _run("""
        import numpy as np, gpuc, gpuc.opencl
        from support import device_debug_kernels as K
        out = np.zeros(300)
        K.print_per_item[300](out, device="opencl")
        assert (out == np.arange(300)).all()
    """)
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.splitlines()) == sorted(f"work item {i} of 300" for i in range(300))


# -- print() on PTX and the targets without printf ----------------------------------------------------

def _ptx(kernel, types, boundscheck: bool = False) -> str:
    config = gpuc.CompilerConfig(gpuc.PTXTarget(), kernel=True, boundscheck=boundscheck)
    return gpuc.compile(gpuc.CompilerJob((kernel, types), config), "asm").output


@needs_ptxas
def test_ptx_prints_through_vprintf_and_passes_ptxas():
    assert gpuc.PTXTarget().assemble(_ptx(K.print_first, (F64,)))
    ptx = _ptx(K.print_tuples, (F64,))
    assert re.search(r"call\.uni \(retval0\),\s*vprintf", ptx) or "vprintf," in ptx, ptx
    # the format strings, as bytes of global constants
    text = "".join(chr(int(b)) for b in re.findall(r"\d+", " ".join(re.findall(r"\{([\d, ]+)\}", ptx))))
    assert "item | %lld | (%.17g%s, %lld, (%s, %.17g%s)) | %.17g%s | %s" in text, text  # constants as values
    assert gpuc.PTXTarget().assemble(ptx)


def test_print_on_gcn_is_a_located_error():
    job = gpuc.CompilerJob((K.print_values, (F64,)), gpuc.CompilerConfig(gpuc.GCNTarget(), kernel=True))
    with pytest.raises(gpuc.CompilationError, match=r"runs on the CPU, OpenCL \(spirv\) and CUDA \(ptx\), not on gcn") \
            as info:
        gpuc.compile(job, "llvm")
    assert "device_debug_kernels.py:11:" in str(info.value)


# -- bounds checks through OpenCL ---------------------------------------------------------------------

def _cpu_and_opencl_errors(launch) -> tuple[str, str]:
    messages = []
    for device in ("cpu", "opencl"):
        with pytest.raises(IndexError) as info:
            launch(device)
        messages.append(str(info.value))
    return tuple(messages)


@needs_opencl
@pytest.mark.parametrize("what, launch", [
    ("shift", lambda d: K.shift[10](np.arange(10.0), np.zeros(10), device=d)),
    ("store", lambda d: K.store_past[8](np.zeros(8), device=d)),
    ("negative", lambda d: K.from_the_end[5](np.arange(5.0), np.zeros(5), 6, device=d)),
    ("func", lambda d: K.diagonal_plus[4](np.zeros((4, 4)), np.zeros(4), 1, device=d)),
    ("shared", lambda d: K.shared_reverse[16](np.arange(16.0), np.zeros(16), 1, block=8, device=d)),
    ("local", lambda d: K.local_window[4](np.arange(4.0), np.zeros(4), 5, device=d)),
    ("atomic", lambda d: K.count[1](np.array([0, 9], np.int64), 1, np.zeros(4, np.int64), device=d)),
    ("view", lambda d: K.row_sums[3](np.ones((3, 4)), np.zeros(3), 1, device=d)),
])
def test_opencl_raises_the_cpu_s_index_error(what, launch):
    cpu_message, opencl_message = _cpu_and_opencl_errors(launch)
    assert "device_debug_kernels.py:" in opencl_message and "is out of bounds for axis" in opencl_message
    if what in ("shift", "func", "local", "atomic"):  # one work item can fail: the same one on every device
        assert opencl_message == cpu_message
    else:  # several can: the first is the device's to choose
        pattern = re.sub(r"index -?\d+", r"index -?\\d+", re.escape(cpu_message))
        assert re.fullmatch(pattern, opencl_message), (cpu_message, opencl_message)


@needs_opencl
def test_opencl_in_range_computes_what_numpy_does_and_a_failed_launch_leaves_no_record():
    a = np.arange(10.0)
    with pytest.raises(IndexError):
        K.shift[10](a, np.zeros(10), device="opencl")
    out = np.zeros(9)
    K.shift[9](a, out, device="opencl")  # the record was cleared
    np.testing.assert_array_equal(out, a[1:])
    out = np.zeros(5)
    K.from_the_end[5](np.arange(5.0), out, 5, device="opencl")  # -5 .. -1 wrap, as in Python
    np.testing.assert_array_equal(out, [np.arange(5.0)[i - 5] for i in range(5)])
    x, out = np.arange(16.0), np.zeros(16)
    K.shared_reverse[16](x, out, 0, block=8, device="opencl")
    np.testing.assert_array_equal(out, np.concatenate([x[7::-1], x[:7:-1]]))


@needs_opencl
def test_a_runaway_loop_stops_at_its_failed_check():
    with pytest.raises(IndexError, match=r"index 6 is out of bounds for axis 0 with size 6 in a\[k\] in runaway"):
        K.runaway[4](np.zeros(6), np.zeros(4), device="opencl")


@needs_opencl
def test_kernels_from_the_disk_cache_still_check(tmp_path):
    script = """
        import numpy as np, gpuc, gpuc.opencl
        from support import device_debug_kernels as K
        try:
            K.shift[4](np.zeros(4), np.zeros(4), device="opencl")
        except IndexError as exc:
            print("IndexError", exc)
    """
    env = {"GPUC_CACHE": "1", "GPUC_CACHE_DIR": str(tmp_path / "cache")}
    for _ in range(2):  # compiled, then from the cache
        done = _run(script, env)
        assert done.returncode == 0, done.stderr
        assert "IndexError" in done.stdout and "index 4 is out of bounds" in done.stdout, done.stdout


def test_spirv_and_ptx_compile_checks_without_a_warning():
    for target in (gpuc.SPIRVTarget(), gpuc.PTXTarget()):
        job = gpuc.CompilerJob((K.shift, (F64, F64)), gpuc.CompilerConfig(target, kernel=True))
        with warnings.catch_warnings():
            warnings.simplefilter("error", gpuc.LaunchWarning)
            llvm = gpuc.compile(job, "llvm").output
        assert re.search(rf"@{abi.BOUNDS_RECORD} = (addrspace\(1\) )?global \[{abi.BOUNDS_DEVICE_RECORD_WORDS} x i64\] "
                         "zeroinitializer", llvm), llvm
        assert ("define spir_kernel void @" + abi.BOUNDS_READER in llvm) == (target.name == "spirv")


# -- bounds checks on PTX and the CUDA runtime --------------------------------------------------------

@needs_ptxas
def test_ptx_keeps_the_record_visible_and_passes_ptxas():
    for kernel, types in ((K.shift, (F64, F64)), (K.shared_reverse, (F64, F64, gpuc.int64)),
                          (K.local_window, (F64, F64, gpuc.int64))):
        ptx = _ptx(kernel, types)
        size = 8 * abi.BOUNDS_DEVICE_RECORD_WORDS
        assert re.search(rf"\.visible \.global \.align 8 \.b8 {abi.BOUNDS_RECORD}\[{size}\];", ptx), ptx
        assert "atom.relaxed.sys.global.cas.b64" in ptx or "atom.global.cas.b64" in ptx
        assert gpuc.PTXTarget().assemble(ptx)


FAKE_GLOBAL = r"""
unsigned char fake_global[4096]; char fake_global_name[256]; int fake_global_lookups = 0;
CUresult cuModuleGetGlobal_v2(CUdeviceptr *p, size_t *n, CUmodule m, const char *name) {
  if (m != &module_obj) return 400;
  strncpy(fake_global_name, name, 255); fake_global_lookups++;
  if (!strstr(fake_image, name)) return 500;
  *p = (CUdeviceptr)fake_global; *n = %d; return OK;
}
CUresult cuModuleGetGlobal(CUdeviceptr *p, size_t *n, CUmodule m, const char *name) { return cuModuleGetGlobal_v2(p, n, m, name); }
""" % (8 * abi.BOUNDS_DEVICE_RECORD_WORDS)

BOUNDS_PROBE = r"""
import ctypes, re
import numpy as np
import gpuc, gpuc.cuda as cuda
from gpuc import abi
from support import device_debug_kernels as K
lib = ctypes.CDLL("libcuda.so.1")
record = (ctypes.c_int64 * abi.BOUNDS_DEVICE_RECORD_WORDS).in_dll(lib, "fake_global")

original = cuda.CudaModule.from_ptx.__func__
def from_ptx(cls, ptx, entry=None):  # size the stub's parameter copies from the PTX, as the driver does
    head = ptx.split(".entry", 1)[1].split(")", 1)[0]
    sizes = [int(m.group(1)) // 8 for m in re.finditer(r"\.param \.[usbf](\d+)", head)]
    ctypes.c_int.in_dll(lib, "fake_nparams").value = len(sizes)
    for i, s in enumerate(sizes):
        (ctypes.c_int * 64).in_dll(lib, "fake_sizes")[i] = s
    return original(cls, ptx, entry)
cuda.CudaModule.from_ptx = classmethod(from_ptx)

a, out = cuda.to_device(np.arange(10.0)), cuda.to_device(np.zeros(10))
K.shift[9](a, out)  # nothing in the record: no error
name = ctypes.c_char_p(ctypes.addressof(ctypes.c_char.in_dll(lib, "fake_global_name"))).value.decode()
assert name == abi.BOUNDS_RECORD, name
# what the failing work item writes (the stub runs no kernel): state, site 0, axis, index, ndim, shape, text
site = b"kernels.py:7:14: a[i + 1] in shift"
words = [1, 0, 0, 10, 1, 10, 0, 0, 0]
for k, w in enumerate(words):
    record[k] = w
ctypes.memmove(ctypes.addressof(record) + 8 * abi.BOUNDS_RECORD_WORDS, site + b"\0", len(site) + 1)
try:
    K.shift[10](a, out)
    raise AssertionError("no IndexError")
except IndexError as exc:
    assert str(exc) == ("kernels.py:7:14: index 10 is out of bounds for axis 0 with size 10 in a[i + 1] in shift "
                        "(an array of shape (10,)); the launch stopped at the first work item whose index failed "
                        "its check"), str(exc)
assert list(record) == [0] * abi.BOUNDS_DEVICE_RECORD_WORDS  # cleared for the next launch
K.shift[9](a, out)
assert ctypes.c_int.in_dll(lib, "fake_global_lookups").value == 1  # looked up once, when the kernel was loaded
print("fake libcuda: bounds checks passed")
"""


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build the stub libcuda")
def test_the_cuda_runtime_reads_and_clears_the_record(tmp_path):
    pytest.importorskip("cuda.bindings.driver")
    from test_cuda_fake_libcuda import FAKE_LIBCUDA

    # the stub finds names in the image's first 255 bytes: the record's declaration comes before the entry
    fake = FAKE_LIBCUDA.replace("fake_image[256]", "fake_image[1 << 16]").replace("image, 255)", "image, 65535)")
    (tmp_path / "fake.c").write_text(fake + FAKE_GLOBAL)
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(tmp_path / "libcuda.so.1"), str(tmp_path / "fake.c"),
                    "-ldl"], check=True)
    (tmp_path / "probe.py").write_text(BOUNDS_PROBE)
    env = dict(os.environ, LD_LIBRARY_PATH=f"{tmp_path}:{os.environ.get('LD_LIBRARY_PATH', '')}",
               PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests"), str(HERE), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, str(tmp_path / "probe.py")], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "bounds checks passed" in done.stdout


# -- in range, checks change nothing ------------------------------------------------------------------

def _programs():
    from support.user_programs import PROGRAMS
    return [p for p in PROGRAMS if p.spirv_error is None]


@needs_opencl
@pytest.mark.parametrize("p", _programs(), ids=[p.id for p in _programs()])
def test_in_range_programs_compute_the_same_with_checks_through_opencl(p):
    checked = gpuc.kernel(boundscheck=True)(p.kernel.py_func)
    want, got = p.make(), p.make()
    p.kernel[p.n](*want, device="opencl")
    checked[p.n](*got, device="opencl")
    from gpuc.runtime.dispatch import launcher_for
    assert launcher_for(checked, got, "opencl").opencl.bounds is not None  # it did compile the checks
    for w, g in zip(want, got):
        if isinstance(w, np.ndarray):
            np.testing.assert_allclose(g, w, rtol=p.rtol, atol=p.atol, strict=True)


@needs_opencl
def test_derivatives_of_checked_funcs_through_opencl():
    # the failure call, which on GPU targets also copies its site's text, stays transparent to the autodiff plugin
    xs, w, out = np.linspace(-1, 1, 8), np.array([0.5, 1.5, 2.0]), np.zeros(8)
    K.weighted_slopes[8](xs, w, 3, out, device="opencl")
    np.testing.assert_allclose(out, 2 * w.sum() * xs, rtol=1e-14)
    with pytest.raises(IndexError, match=r"index 3 is out of bounds for axis 0 with size 3 in w\[k\] in weighted"):
        K.weighted_slopes[8](xs, w, 4, out, device="opencl")


@needs_ptxas
def test_checked_reverse_mode_passes_ptxas():
    ptx = _ptx(K.weighted_gradients, (F64, F64, gpuc.int64, F64))
    assert abi.BOUNDS_RECORD in ptx
    assert gpuc.PTXTarget().assemble(ptx)


@needs_opencl
def test_a_device_without_program_scope_variables_says_so(monkeypatch):
    class Device:  # an OpenCL 1.2 device: pyopencl raises for the attribute it does not know
        @property
        def max_global_variable_size(self):
            raise opencl.session().cl.Error("CL_INVALID_VALUE")

    s = opencl.session()
    program = opencl.build(gpuc.compile(gpuc.CompilerJob((K.shift, (F64, F64)), gpuc.CompilerConfig(
        gpuc.SPIRVTarget(), kernel=True)), "obj").output)
    monkeypatch.setattr(s, "device", Device())
    with pytest.raises(opencl.DeviceLacksError, match="no program-scope global variables"):
        opencl._BoundsReader(s, program)
