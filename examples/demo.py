"""gpuc demo: an IR kernel with a marker resolved by a plugin (host and PTX), Python kernels, kernels
with blocks and barriers (on the CPU too), the language Numba users write (complex numbers, uint8
images, views) and a kernel compiled ahead of time, then gpuc's built-in plugins (function pointers
compiled on demand, derivatives).

The kernel calls `@gpucompiler.mark(i64)` through an internal helper.  A plugin registered for
that marker erases the (unused) marker calls at the `optimized` callback point, after the
helper has been inlined.  We print the trace of both compiles and run the host code through
the ORC JIT.
"""

from __future__ import annotations

import ctypes
import sys

import numpy as np

import gpuc
import blocks  # examples/blocks.py: blocks, shared memory, barriers and warp shuffles, on the CPU too
import builtin_plugins  # examples/builtin_plugins.py: deferred compilation and derivatives
import kernels  # examples/kernels.py: the Python-kernel part of the demo
import language  # examples/language.py: complex numbers, uint8 images, views, ahead-of-time libraries
from gpuc.runtime import load
from kernels import check_ptx, section

KERNEL = """
declare void @gpucompiler.mark(i64)

define internal void @scale_one(ptr %a, i64 %i, double %s) {
  call void @gpucompiler.mark(i64 %i)
  %p = getelementptr inbounds double, ptr %a, i64 %i
  %v = load double, ptr %p
  %w = fmul double %v, %s
  store double %w, ptr %p
  ret void
}

define void @scale(ptr %a, i64 %n, double %s) {
entry:
  %empty = icmp sle i64 %n, 0
  br i1 %empty, label %done, label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %next, %loop ]
  call void @scale_one(ptr %a, i64 %i, double %s)
  %next = add nuw nsw i64 %i, 1
  %more = icmp slt i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}
"""


def erase_unused_marker_calls(job, marker, module) -> bool:
    """The plugin: drop every call to the marker whose result nobody uses."""
    calls = [use.user for use in marker.uses if isinstance(use.user, gpuc.llvm.CallInst) and not use.user.uses]
    seen_in = sorted({call.function.name for call in calls})
    print(f"    [plugin] {len(calls)} marker call(s) at the optimized point, in {', '.join(seen_in) or '-'}")
    for call in calls:
        call.erase()
    return bool(calls)


def main() -> int:
    import gpuc.llvm  # noqa: F401  (for isinstance checks in the plugin)

    plugin = gpuc.make_plugin("gpucompiler.mark", pipeline_callback=erase_unused_marker_calls)
    source = gpuc.IRSource(KERNEL, entry="scale", filename="demo-kernel.ll")

    section("host: unoptimized IR still calls the marker")
    host = gpuc.CompilerJob(source, gpuc.CompilerConfig(gpuc.NativeTarget(), plugins=[plugin]))
    unoptimized = gpuc.code_llvm(host, optimize=False)
    print("\n".join(line for line in unoptimized.splitlines() if "gpucompiler.mark" in line))

    section("host: compile with the plugin, then run through the JIT")
    with load(host) as jitted:
        print(jitted.trace)
        fn = jitted.function(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_double)
        a = np.arange(8, dtype=np.float64)
        fn(a.ctypes.data, a.size, 2.5)
        expected = np.arange(8, dtype=np.float64) * 2.5
        print(f"  scale(arange(8), 2.5) -> {a.tolist()}")
        if not np.array_equal(a, expected):
            print("  MISMATCH: expected", expected.tolist())
            return 1
    print("  optimized IR mentions the marker:", "gpucompiler.mark" in gpuc.code_llvm(host))

    section("PTX (sm_90): the same kernel, marker resolved by the same plugin")
    ptx_job = gpuc.CompilerJob(source, gpuc.CompilerConfig(gpuc.PTXTarget(cap="sm_90"), kernel=True, plugins=[plugin]))
    result = gpuc.compile(ptx_job, output="asm")
    print(result.trace)
    entry_lines = [line for line in result.output.splitlines() if ".entry" in line or ".target" in line]
    print("  " + "\n  ".join(entry_lines))
    if not check_ptx(result.output):
        return 1

    section("without the plugin: a clear validation error")
    bare = gpuc.CompilerJob(source, gpuc.CompilerConfig(gpuc.NativeTarget(), plugins=()))
    try:
        gpuc.compile(bare)
    except gpuc.ValidationError as exc:
        print(f"  {exc}")

    # Part two: kernels written in Python (examples/kernels.py); part three: gpuc's own plugins for
    # function pointers and derivatives (examples/builtin_plugins.py).
    status = kernels.main()
    status = blocks.main() or status  # part four: the GPU programming model, on every target
    status = language.main() or status  # part five: the language Numba users write, compiled ahead of time too
    status = builtin_plugins.main() or status
    return jax_part() or status


def jax_part() -> int:
    """Part six: a gpuc kernel inside a jitted JAX loss, differentiated by jax.grad (examples/jax_fit.py)."""
    section("JAX: a spring-mass kernel in a jitted loss, jax.grad through its adjoint")
    try:
        import jax  # noqa: F401
    except ImportError:
        print("  skipped: jax is not installed (scripts/setup.sh installs it)")
        return 0
    import jax_fit
    return jax_fit.main()


if __name__ == "__main__":
    sys.exit(main())
