"""Python kernels with gpuc: saxpy, an atomic reduction and a 2-D stencil on the CPU, their PTX, and a plugin.

Each kernel is one Python source for every target: `gpuc.index()` asks for the work item's
index wherever it is called (here also inside a device function), and the built-in
context-propagation plugin makes that work on the CPU (a context argument and a generated loop)
and on GPUs (thread/block registers).
"""

from __future__ import annotations

import numpy as np

import gpuc
from gpuc.llvm import CallInst


@gpuc.func
def axpy(a, x, y):
    return a * x + y


@gpuc.kernel
def saxpy(a, x, y, out):
    i = gpuc.index()
    out[i] = axpy(a, x[i], y[i])


@gpuc.kernel
def total(x, result):
    gpuc.atomic_add(result, 0, x[gpuc.index()])


@gpuc.kernel
def stencil(u, v):
    # launched over the interior; dimension 0 varies fastest, so it walks the contiguous columns
    j = gpuc.index(0) + 1
    i = gpuc.index(1) + 1
    v[i, j] = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]) - u[i, j]


# A marker: calls to it are resolved by a plugin, like instrumentation a library would add.
trace = gpuc.marker("demo.trace", None, (gpuc.int64,))


@gpuc.kernel
def traced_copy(x, out):
    i = gpuc.index()
    trace(i)
    out[i] = x[i]


def drop_trace(job, marker, module) -> bool:
    calls = [use.user for use in marker.uses if isinstance(use.user, CallInst)]
    for call in calls:
        call.erase()
    return bool(calls)


def section(title: str) -> None:
    print(f"\n=== {title} " + "=" * max(0, 70 - len(title)))


def main() -> int:
    ok = True
    rng = np.random.default_rng(0)

    section("saxpy on the CPU (10M float32, all cores)")
    x = rng.random(10_000_000, dtype=np.float32)
    y = rng.random(10_000_000, dtype=np.float32)
    out = np.empty_like(x)
    saxpy[x.size](np.float32(2.5), x, y, out)
    ok &= _report("saxpy", np.allclose(out, 2.5 * x + y))

    section("reduction with atomic_add")
    values = rng.random(100_000)
    result = np.zeros(1)
    total[values.size](values, result)
    ok &= _report(f"sum = {result[0]:.6f} (NumPy {values.sum():.6f})", np.isclose(result[0], values.sum()))

    section("2-D 5-point stencil (1024 x 1024)")
    u = rng.random((1024, 1024))
    v = np.zeros_like(u)
    stencil[(1022, 1022)](u, v)
    want = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]) - u[1:-1, 1:-1]
    ok &= _report("stencil", np.allclose(v[1:-1, 1:-1], want))

    section("the same kernels as PTX (sm_90): the index comes from %ctaid/%ntid/%tid")
    F32, F64 = gpuc.Array[gpuc.float32, 1], gpuc.Array[gpuc.float64, 1]
    F64x2 = gpuc.Array[gpuc.float64, 2]
    for kernel, argtypes in ((saxpy, (gpuc.float32, F32, F32, F32)), (total, (F64, F64)), (stencil, (F64x2, F64x2))):
        ptx = gpuc.code_native(kernel, argtypes, target=gpuc.PTXTarget(cap="sm_90"))
        lines = ptx.splitlines()
        entry = next(line for line in lines if ".entry" in line)
        body = [line.strip() for line in lines if any(k in line for k in ("%ctaid", "%tid", "atom.", "fma.rn"))]
        print(f"  {kernel.__name__}: {entry.strip()} {len(lines)} lines")
        print("      " + "\n      ".join(body[:4]))
        ok &= check_ptx(ptx)

    section("a plugin resolving a marker in a Python kernel")
    plugin = gpuc.make_plugin("demo.trace", pipeline_callback=drop_trace)
    I64 = gpuc.Array[gpuc.int64, 1]
    before = gpuc.code_llvm(traced_copy, (I64, I64), optimize=False)
    print("  unoptimized IR calls the marker:", "call void @demo.trace" in before)
    gpuc.register_plugin("demo.trace", pipeline_callback=drop_trace)
    try:
        src = np.arange(16)
        dst = np.zeros_like(src)
        traced_copy[src.size](src, dst)
        ok &= _report("traced_copy with the plugin registered", np.array_equal(src, dst))
        after = gpuc.code_llvm(gpuc.CompilerJob((traced_copy, (I64, I64)),
                                                gpuc.CompilerConfig(gpuc.NativeTarget(), plugins=[plugin])))
        print("  optimized IR calls the marker:", "call void @demo.trace" in after)
    finally:
        gpuc.unregister_plugin("demo.trace")
    return 0 if ok else 1


def check_ptx(ptx: str) -> bool:
    """Assemble with ptxas -arch=sm_90 when ptxas is installed (nvidia-cuda-nvcc-cu12); True if fine."""
    import shutil
    import subprocess
    import tempfile

    ptxas = shutil.which("ptxas")
    if ptxas is None:
        print("      (ptxas not found; install nvidia-cuda-nvcc-cu12 to check the PTX)")
        return True
    with tempfile.NamedTemporaryFile("w", suffix=".ptx") as f:
        f.write(ptx)
        f.flush()
        check = subprocess.run([ptxas, "-arch=sm_90", "-o", "/dev/null", f.name], capture_output=True, text=True)
    print(f"      ptxas -arch=sm_90: {'ok' if check.returncode == 0 else 'FAILED ' + check.stderr}")
    return check.returncode == 0


def _report(what: str, good: bool) -> bool:
    print(f"  {what}: {'ok' if good else 'WRONG'}")
    return bool(good)


if __name__ == "__main__":
    raise SystemExit(main())
