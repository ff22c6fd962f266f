"""Global NumPy arrays read in gpuc functions: frozen into the module as constants (as Numba does),
read-only, keyed by their contents in the disk cache, placed where each target keeps constants."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import gpuc
from gpuc import Array, float64, int64

from support.located_errors import check
from support.native import native

# The tests that launch kernels or run funcs (support.native) run natively and through OpenCL.
ON_DEVICES = pytest.mark.devices("cpu", "opencl")

F32 = np.array([[1.5, 2.5, -3.5], [4.0, 5.25, 6.0]], dtype=np.float32)
I64 = np.array([7, -2, 2**40, 0], dtype=np.int64)
U32 = np.array([1, 2**32 - 1, 5], dtype=np.uint32)
FLAGS = np.array([True, False, True])
CUBE = np.arange(24.0).reshape(2, 3, 4)
STRIDED = np.arange(20.0)[::-3]          # not contiguous: frozen in its logical order
FORTRAN = np.asfortranarray(np.arange(6.0).reshape(2, 3))
EMPTY = np.zeros(0)
TEXT = np.array(["ab", "c"])
LIST = [1.0, 2.0]


@gpuc.func
def pick(t, j):
    return t[j]


@gpuc.func
def reads(i):
    s = F32[1, i] + F32[0][i] + pick(F32[:, ::-1][0], i) + I64[i] + U32[i % 3] + FLAGS[i % 3]
    s += CUBE[1, i % 3, ::-1][0] + CUBE.sum() + STRIDED[i] + FORTRAN[1, i % 3] + len(EMPTY) + F32.shape[1]
    for v in STRIDED[1:]:
        s += v
    for r in FORTRAN:
        s += r.max()
    return s


@ON_DEVICES
def test_global_arrays_read_like_numpy():
    fn = native(reads, (int64,))
    for i in range(3):
        assert fn(i) == reads(i)
    for i in (-1, -3):
        assert fn(i) == reads(i)


def test_the_constant_is_frozen_once_per_content_and_read_only_in_the_ir(filecheck):
    filecheck(gpuc.code_llvm(reads, (int64,), optimize=False), """
CHECK: @gpuc.global_array.{{[0-9a-f]+}} = {{.*}}constant [24 x i8]
CHECK-NOT: @gpuc.global_array.{{[0-9a-f]+}} = {{.*}}constant [24 x i8]
CHECK-LABEL: define {{.*}}@reads.i64(
""")


@pytest.mark.parametrize("target", [gpuc.PTXTarget(), gpuc.GCNTarget(), gpuc.SPIRVTarget()], ids=lambda t: t.name)
def test_every_target_keeps_the_constant_in_its_global_memory(target):
    # where array data lives (Target.array_address_space): PTX's generic pointers reach a .global array
    # (its 64 KiB constant bank would not hold every array), GCN's and SPIR-V's global address space
    @gpuc.kernel
    def k(out):
        i = gpuc.index()
        out[i] = F32[1, i] + pick(F32[0], i) + CUBE[0, 0, ::-1].sum()

    job = gpuc.CompilerJob((k, (Array[float64, 1],)), gpuc.CompilerConfig(target))
    text = gpuc.compile(job, "llvm").output
    space = target.array_address_space
    assert ("unnamed_addr " if space == 0 else f"addrspace({space}) ") + "constant [24 x i8]" in text, text[:2000]
    output = gpuc.compile(job, "asm" if target.name != "spirv" else "obj").output
    if target.name == "ptx":
        assert ".global .align 16 .b8 gpuc_$_global_array_$_" in output


@ON_DEVICES
def test_a_kernel_reads_a_global_array():
    @gpuc.kernel
    def k(out):
        i = gpuc.index()
        out[i] = F32[1, i] * 2 + F32[:, i].sum()

    out = np.zeros(3, np.float32)
    k[3](out)
    assert out.tolist() == (F32[1] * 2 + F32.sum(axis=0)).tolist()


@gpuc.func
def write_global(i):
    F32[0, i] = 1.0


@gpuc.func
def write_view_of_global(i):
    F32[0, :] = 1.0


@gpuc.func
def store(a, i):
    a[i] = 1


@gpuc.func
def write_through_func(i):
    store(I64, i)


@gpuc.func
def atomic_on_global(i):
    return gpuc.atomic_add(I64, i, 1)


@gpuc.func
def text_global(i):
    return TEXT[i]


@gpuc.func
def list_global(i):
    return LIST[i]


@pytest.mark.parametrize("fn, message, fragment", [
    (write_global, "a global NumPy array is a compile-time constant and cannot be assigned to", "F32[0, i] ="),
    (write_view_of_global, "cannot be assigned to", "F32[0, :] ="),
    (atomic_on_global, "cannot be changed by atomic_add", "return |gpuc.atomic_add"),
    (text_global, "the global array has dtype <U2", "return |TEXT"),
    (list_global, "list object", "return |LIST"),
], ids=lambda v: getattr(v, "__name__", None))
def test_writes_and_unsupported_globals_are_located_errors(fn, message, fragment):
    check(fn, (int64,), message, fragment)


def test_a_write_through_a_func_is_located_in_the_func():
    with pytest.raises(gpuc.CompilationError, match="cannot be assigned to") as info:
        gpuc.code_llvm(write_through_func, (int64,))
    assert "a[i] = 1" in str(info.value) and info.value.location.line == store.__wrapped__.__code__.co_firstlineno + 2


KERNELS = """
import numpy as np
import gpuc
TABLE = np.arange(4, dtype=np.float64) * {scale}

@gpuc.kernel
def k(out):
    i = gpuc.index()
    out[i] = TABLE[i] + TABLE[::-1].sum()
"""

RUN = """
import json
import numpy as np
import gpuc
from kernels import k
out = np.zeros(4)
k[4](out)
info = gpuc.cache.info()
print(json.dumps({"out": out.tolist(), "hits": info["hits"], "misses": info["misses"]}))
"""


def test_the_disk_cache_keys_on_the_arrays_contents(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    (root / "run.py").write_text(RUN)

    def run(scale):
        (root / "kernels.py").write_text(KERNELS.format(scale=scale))
        env = {**os.environ, "GPUC_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(root),
               "PYTHONDONTWRITEBYTECODE": "1"}
        done = subprocess.run([sys.executable, str(root / "run.py")], capture_output=True, text=True, env=env,
                              cwd=root, timeout=120)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.splitlines()[-1])

    first, second = run(1.0), run(1.0)
    assert (first["misses"], second["hits"]) == (1, 1) and first["out"] == second["out"] == [6.0, 7.0, 8.0, 9.0]
    changed = run(2.0)  # same source text but for the array's values
    assert changed["misses"] == 1 and changed["out"] == [12.0, 14.0, 16.0, 18.0]


def test_the_fingerprint_covers_bytes_dtype_and_shape():
    from gpuc.frontend.program import _value
    base = np.arange(6.0)
    digests = {_value(a, []) for a in (base, base + 1, base.astype(np.float32), base.reshape(2, 3), base[::-1])}
    assert len(digests) == 5
