"""gpuc's CUDA runtime through the real cuda-bindings, against a stub libcuda.so.1 built here with gcc.

The stub implements the few driver entry points gpuc uses (and cuGetProcAddress, through which
cuda-bindings finds them), treats host memory as device memory, and records what it was handed:
the bytes cuLaunchKernel copies from kernelParams (with the PTX's .param sizes), the JIT options and
log buffers, the streams. It checks the Python call shapes against the bindings without a GPU.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("cuda.bindings.driver")

ROOT = Path(__file__).resolve().parents[2]

FAKE_LIBCUDA = r"""// A fake libcuda.so.1: enough of the driver API to run gpuc's runtime through the real cuda-bindings.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
typedef int CUresult; typedef int CUdevice; typedef unsigned long long CUdeviceptr;
typedef void *CUcontext, *CUmodule, *CUfunction, *CUstream, *CUevent;
#define OK 0
// recorded state, read back from Python with ctypes
int fake_nparams = 0; int fake_sizes[64]; unsigned char fake_params[64 * 32];
unsigned int fake_dims[6]; unsigned int fake_shared; uintptr_t fake_stream; uintptr_t fake_extra; int fake_launches = 0;
uintptr_t fake_current_ctx = 0; int fake_ctx_sets = 0; int fake_jit_nopts = 0; int fake_jit_opts[16]; uintptr_t fake_jit_vals[16];
char fake_image[256]; uintptr_t fake_last_stream_sync = 12345; int fake_allocs = 0, fake_frees = 0;
char fake_func_name[256];
static int ctx_obj = 42;
CUresult cuInit(unsigned int f) { return f ? 1 : OK; }
CUresult cuDriverGetVersion(int *v) { *v = 13000; return OK; }
CUresult cuDeviceGetCount(int *c) { *c = 1; return OK; }
CUresult cuDeviceGet(CUdevice *d, int o) { if (o) return 101; *d = 0; return OK; }
CUresult cuDeviceGetAttribute(int *pi, int attr, CUdevice d) {
  *pi = attr == 75 ? 9 : attr == 76 ? 0 : attr == 16 ? 132 : -1; return OK; }
CUresult cuDeviceGetName(char *name, int len, CUdevice d) { snprintf(name, len, "Fake H200"); return OK; }
CUresult cuDeviceTotalMem_v2(size_t *b, CUdevice d) { *b = (size_t)1 << 30; return OK; }
CUresult cuDeviceTotalMem(size_t *b, CUdevice d) { return cuDeviceTotalMem_v2(b, d); }
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) { *c = &ctx_obj; return OK; }
CUresult cuCtxSetCurrent(CUcontext c) { fake_current_ctx = (uintptr_t)c; fake_ctx_sets++; return OK; }
CUresult cuCtxGetCurrent(CUcontext *c) { *c = (CUcontext)fake_current_ctx; return OK; }
static CUresult need_ctx(void) { return fake_current_ctx == (uintptr_t)&ctx_obj ? OK : 201; }  // INVALID_CONTEXT
CUresult cuCtxSynchronize(void) { return need_ctx(); }
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) { if (!n) return 1; if (need_ctx()) return 201; *p = (CUdeviceptr)malloc(n); fake_allocs++; return OK; }
CUresult cuMemAlloc(CUdeviceptr *p, size_t n) { return cuMemAlloc_v2(p, n); }
CUresult cuMemFree_v2(CUdeviceptr p) { if (need_ctx()) return 201; free((void *)p); fake_frees++; return OK; }
CUresult cuMemFree(CUdeviceptr p) { return cuMemFree_v2(p); }
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) { if (need_ctx()) return 201; memcpy((void *)d, s, n); return OK; }
CUresult cuMemcpyHtoD(CUdeviceptr d, const void *s, size_t n) { return cuMemcpyHtoD_v2(d, s, n); }
CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) { if (need_ctx()) return 201; memcpy(d, (void *)s, n); return OK; }
CUresult cuMemcpyDtoH(void *d, CUdeviceptr s, size_t n) { return cuMemcpyDtoH_v2(d, s, n); }
CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) { memcpy((void *)d, (void *)s, n); return OK; }
CUresult cuMemcpyDtoD(CUdeviceptr d, CUdeviceptr s, size_t n) { return cuMemcpyDtoD_v2(d, s, n); }
CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char c, size_t n) { memset((void *)d, c, n); return OK; }
CUresult cuMemsetD8(CUdeviceptr d, unsigned char c, size_t n) { return cuMemsetD8_v2(d, c, n); }
static int module_obj = 7, function_obj = 8;
CUresult cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned int n, int *opts, void **vals) {
  if (need_ctx()) return 201;
  fake_jit_nopts = n; strncpy(fake_image, (const char *)image, 255);
  char *errbuf = 0, *infobuf = 0; size_t errsz = 0, infosz = 0;
  for (unsigned i = 0; i < n && i < 16; i++) {
    fake_jit_opts[i] = opts[i]; fake_jit_vals[i] = (uintptr_t)vals[i];
    if (opts[i] == 5) errbuf = vals[i]; if (opts[i] == 6) errsz = (uintptr_t)vals[i];
    if (opts[i] == 3) infobuf = vals[i]; if (opts[i] == 4) infosz = (uintptr_t)vals[i];
  }
  if (strstr((const char *)image, "frobnicate")) {
    if (errbuf && errsz) snprintf(errbuf, errsz, "ptxas application ptx input, line 5; error   : Unknown symbol 'frobnicate'");
    return 218;  // CUDA_ERROR_INVALID_PTX
  }
  if (infobuf && infosz) snprintf(infobuf, infosz, "info    : 0 bytes gmem");
  *m = &module_obj; return OK;
}
CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
  strncpy(fake_func_name, name, 255);
  if (m != &module_obj) return 400;
  if (!strstr(fake_image, name)) return 500;  // CUDA_ERROR_NOT_FOUND
  *f = &function_obj; return OK;
}
CUresult cuModuleUnload(CUmodule m) { return m == &module_obj ? OK : 400; }
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, CUstream s, void **params, void **extra) {
  if (need_ctx()) return 201;
  if (f != &function_obj) return 400;
  fake_dims[0] = gx; fake_dims[1] = gy; fake_dims[2] = gz; fake_dims[3] = bx; fake_dims[4] = by; fake_dims[5] = bz;
  fake_shared = shared; fake_stream = (uintptr_t)s; fake_extra = (uintptr_t)extra; fake_launches++;
  memset(fake_params, 0, sizeof fake_params);
  for (int i = 0; i < fake_nparams; i++) memcpy(fake_params + 32 * i, params[i], fake_sizes[i]);  // as the driver does
  return OK;
}
CUresult cuStreamSynchronize(CUstream s) { fake_last_stream_sync = (uintptr_t)s; return OK; }
static int event_obj;
CUresult cuEventCreate(CUevent *e, unsigned f) { *e = &event_obj; return OK; }
CUresult cuEventRecord(CUevent e, CUstream s) { return OK; }
CUresult cuEventSynchronize(CUevent e) { return OK; }
CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b) { *ms = 1.0f; return OK; }
CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b) { *ms = 1.0f; return OK; }
CUresult cuEventDestroy_v2(CUevent e) { return OK; }
CUresult cuEventDestroy(CUevent e) { return OK; }
CUresult cuGetErrorName(CUresult e, const char **s) {
  switch (e) { case 0: *s = "CUDA_SUCCESS"; return OK; case 201: *s = "CUDA_ERROR_INVALID_CONTEXT"; return OK;
  case 218: *s = "CUDA_ERROR_INVALID_PTX"; return OK; case 500: *s = "CUDA_ERROR_NOT_FOUND"; return OK;
  case 400: *s = "CUDA_ERROR_INVALID_HANDLE"; return OK; default: *s = 0; return 1; } }
CUresult cuGetErrorString(CUresult e, const char **s) { *s = "fake description"; return OK; }
CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags, int *status) {
  static void *self; if (!self) self = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  *pfn = dlsym(self, sym);
  if (status) *status = *pfn ? 0 : 1;
  return *pfn ? OK : 500;
}
CUresult cuGetProcAddress(const char *sym, void **pfn, int ver, unsigned long long flags) { return cuGetProcAddress_v2(sym, pfn, ver, flags, 0); }
"""

PROBE = r"""
import ctypes, re, threading
import numpy as np
import gpuc.cuda as cuda
from support.cuda_kernels import SCALARS, SCALARS_SIGNATURE, ptx_for
lib = ctypes.CDLL("libcuda.so.1")
g = lambda name, t: t.in_dll(lib, name)
info = cuda.device_info()
assert (info.name, info.cap, info.total_memory, info.multiprocessors, info.driver_version) == \
    ("Fake H200", "sm_90", 1 << 30, 132, "13.0"), info
ptx = ptx_for(SCALARS, "scalars", "sm_90")
sizes = [{"8": 1, "16": 2, "32": 4, "64": 8}[b]
         for b in re.findall(r"\.param \.[usbf](\d+)", ptx.split(".entry", 1)[1].split(")", 1)[0])]
g("fake_nparams", ctypes.c_int).value = len(sizes)
for i, s in enumerate(sizes):
    (ctypes.c_int * 64).in_dll(lib, "fake_sizes")[i] = s
module = cuda.CudaModule.from_ptx(ptx, "scalars")
assert module.info_log == "info    : 0 bytes gmem"
assert list((ctypes.c_size_t * 16).in_dll(lib, "fake_jit_vals"))[1] == 65536  # sizes go by value
out = cuda.to_device(np.arange(5.0))
kernel = module.launcher(cuda.KernelSignature(SCALARS_SIGNATURE, launch="sizes"))
errors = []
def run():
    try:
        kernel[1](out, -7, 2**40 + 3, 1.25, True, 0.5)
    except BaseException as exc:
        errors.append(exc)
thread = threading.Thread(target=run)
thread.start()
thread.join()
assert not errors, errors
raw = bytes((ctypes.c_ubyte * (64 * 32)).in_dll(lib, "fake_params"))
params = [raw[32 * i:32 * i + s] for i, s in enumerate(sizes)]
i64 = lambda v: v.to_bytes(8, "little", signed=True)
assert params == [out.ptr.to_bytes(8, "little"), i64(5), i64(1), (-7).to_bytes(4, "little", signed=True),
                  i64(2**40 + 3), bytes(ctypes.c_double(1.25)), b"\1", bytes(ctypes.c_float(0.5)),
                  i64(1), i64(1), i64(1)], params
assert list((ctypes.c_uint * 6).in_dll(lib, "fake_dims")) == [1, 1, 1, 256, 1, 1]
assert (g("fake_stream", ctypes.c_size_t).value, g("fake_extra", ctypes.c_size_t).value) == (0, 0)
assert cuda.copy_to_host(out).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
class Foreign:
    def __init__(self, base, stream):
        self.__cuda_array_interface__ = dict(base.__cuda_array_interface__, stream=stream)
kernel[1](Foreign(out, 0xABC), -7, 2**40 + 3, 1.25, True, 0.5)
assert g("fake_last_stream_sync", ctypes.c_size_t).value == 0xABC
try:
    cuda.CudaModule.from_ptx(".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry broken() {\n"
                             "  frobnicate;\n}\n", "broken")
    raise AssertionError("no error")
except cuda.CudaError as exc:
    assert exc.log == "ptxas application ptx input, line 5; error   : Unknown symbol 'frobnicate'", exc.log
    assert "CUDA_ERROR_INVALID_PTX" in str(exc) and exc.log in str(exc)
try:
    cuda.CudaModule.from_ptx(ptx, "nope")
    raise AssertionError("no error")
except cuda.CudaError as exc:
    assert "no kernel 'nope'" in str(exc) and "CUDA_ERROR_NOT_FOUND" in str(exc), str(exc)
del out
import gc
gc.collect()
assert (g("fake_allocs", ctypes.c_int).value, g("fake_frees", ctypes.c_int).value) == (1, 1)
module.close()
print("fake libcuda: all checks passed")
"""


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build the stub libcuda")
def test_the_runtime_against_a_stub_libcuda(tmp_path):
    (tmp_path / "fake.c").write_text(FAKE_LIBCUDA)
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(tmp_path / "libcuda.so.1"), str(tmp_path / "fake.c"),
                    "-ldl"], check=True)
    (tmp_path / "probe.py").write_text(PROBE)
    env = dict(os.environ, LD_LIBRARY_PATH=f"{tmp_path}:{os.environ.get('LD_LIBRARY_PATH', '')}",
               PYTHONPATH=f"{ROOT}:{ROOT / 'tests'}:{os.environ.get('PYTHONPATH', '')}")  # gpuc, tests/support
    done = subprocess.run([sys.executable, str(tmp_path / "probe.py")], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all checks passed" in done.stdout


TUPLE_PROBE = r"""
import ctypes, re
import numpy as np
import gpuc, gpuc.cuda as cuda
lib = ctypes.CDLL("libcuda.so.1")

@gpuc.kernel
def shifted(out, t):
    i = gpuc.index()
    a, (flag, b) = t
    out[i] = a * i + (b if flag else -b)

captured = {}
original = cuda.CudaModule.from_ptx.__func__
def from_ptx(cls, ptx, entry=None):  # size the stub's parameter copies from the PTX, as the driver does
    head = ptx.split(".entry", 1)[1].split(")", 1)[0]
    sizes = [int(m.group(2)) if m.group(2) else int(m.group(1)) // 8
             for m in re.finditer(r"\.param \.(?:[usbf](\d+)|align \d+ \.b8 \S+\[(\d+)\])", head)]
    ctypes.c_int.in_dll(lib, "fake_nparams").value = len(sizes)
    for i, s in enumerate(sizes):
        (ctypes.c_int * 64).in_dll(lib, "fake_sizes")[i] = s
    captured["sizes"] = sizes
    return original(cls, ptx, entry)
cuda.CudaModule.from_ptx = classmethod(from_ptx)

out = cuda.to_device(np.zeros(4))
shifted[4](out, (np.int32(-3), (True, 2.5)))
raw = bytes((ctypes.c_ubyte * (64 * 32)).in_dll(lib, "fake_params"))
sizes = captured["sizes"]
assert sizes == [8, 8, 8, 24, 8, 8, 8], sizes
params = [raw[32 * i:32 * i + s] for i, s in enumerate(sizes)]
assert params[3] == (-3).to_bytes(4, "little", signed=True) + bytes(4) + b"\1" + bytes(7) + bytes(ctypes.c_double(2.5)), params[3]
assert params[4:] == [(4).to_bytes(8, "little"), (1).to_bytes(8, "little"), (1).to_bytes(8, "little")], params
print("fake libcuda: tuple checks passed")
"""


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build the stub libcuda")
def test_a_tuple_argument_reaches_cuLaunchKernel_with_the_ptx_layout(tmp_path):
    (tmp_path / "fake.c").write_text(FAKE_LIBCUDA)
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(tmp_path / "libcuda.so.1"), str(tmp_path / "fake.c"),
                    "-ldl"], check=True)
    (tmp_path / "probe.py").write_text(TUPLE_PROBE)
    env = dict(os.environ, LD_LIBRARY_PATH=f"{tmp_path}:{os.environ.get('LD_LIBRARY_PATH', '')}",
               PYTHONPATH=f"{ROOT}:{os.environ.get('PYTHONPATH', '')}")
    done = subprocess.run([sys.executable, str(tmp_path / "probe.py")], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "tuple checks passed" in done.stdout


NAME_PROBE = r"""
import ctypes
import numpy as np
import gpuc, gpuc.cuda as cuda
from gpuc.targets.ptx import ptx_symbol
lib = ctypes.CDLL("libcuda.so.1")

@gpuc.kernel
def заполнить(out, x):
    out[gpuc.index()] = x

out = cuda.to_device(np.zeros(4))
заполнить[4](out, 2.5)
name = ctypes.c_char_p(ctypes.addressof(ctypes.c_char.in_dll(lib, "fake_func_name"))).value.decode()
assert name.startswith(ptx_symbol("заполнить")) and name.isascii(), name
assert ctypes.c_int.in_dll(lib, "fake_launches").value == 1
print("fake libcuda: name checks passed")
"""


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build the stub libcuda")
def test_a_kernel_named_in_cyrillic_is_launched_by_its_ptx_name(tmp_path):
    # NVPTX aborted on the name; now PTX names it `$437_...` and the launcher looks that name up.
    (tmp_path / "fake.c").write_text(FAKE_LIBCUDA)
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(tmp_path / "libcuda.so.1"), str(tmp_path / "fake.c"),
                    "-ldl"], check=True)
    (tmp_path / "probe.py").write_text(NAME_PROBE)
    env = dict(os.environ, LD_LIBRARY_PATH=f"{tmp_path}:{os.environ.get('LD_LIBRARY_PATH', '')}",
               PYTHONPATH=f"{ROOT}:{os.environ.get('PYTHONPATH', '')}")
    done = subprocess.run([sys.executable, str(tmp_path / "probe.py")], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "name checks passed" in done.stdout
