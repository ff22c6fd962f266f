"""Vectorization across work items on the CPU (gpuc/plugins/vectorize): one thread, side by side with
gpuc without it and with numba.njit.

    .venv/bin/python benchmarks/bench_vectorize.py [--quick] [--reps N] [--json OUT]

Kernels, each launched with threads=1 by gpuc as it compiles by default (vectorized), by the same kernel
compiled with CompilerConfig(vectorize=False) (item by item, as before), and by the same loops under
`numba.njit` (serial), alternating for --reps rounds after a warm-up (compile time excluded), timed as the
calling thread's CPU time; the ratios are best against best:
- the complex Mandelbrot example (examples/mandelbrot.py, Numba's `mandel`, 1000 x 1500, 20 and 256
  iterations): target vectorized <= 0.25x Numba;
- a divergent per-item Newton iteration in float64 (cube roots, a `while` with a per-item exit, 1M
  items): target <= 0.3x Numba;
- saxpy (10M float32), the 2-D 5-point stencil (2048^2 float64) and the uint8 box blur (examples/blur.py,
  1080 x 1920 x 3): not slower than item by item (their bodies have no loop of their own, so the plugin
  leaves them to LLVM's loop vectorizer; the column shows they cost nothing).
Every output is checked equal between the three.

First, on two threads (wall time, best of --reps rounds): saxpy, the stencil and the blur launched with
threads=2 against the same loops under `numba.njit(parallel=True)` with `prange` over the outer loop and
numba.set_num_threads(2) (target: gpuc <= Numba on every kernel).

Then, on one core (the process pinned to it, wall time, best of --reps rounds):
- AVX2 lanes on this host: the Mandelbrot and Newton kernels compiled for `NativeTarget(cpu_name=
  "haswell")` with AVX2 and FMA only (4 float64 lanes per register, where this host may have AVX-512's
  8), vectorized and item by item, against numba.njit: the plugin's speed-up where AVX-512 is missing;
- the Mandelbrot example against `jax.jit(jax.vmap(...))` with `lax.while_loop` (float64, complex128;
  target: gpuc <= 0.5x JAX) and against the same kernel launched through Intel's OpenCL CPU runtime
  (`device="opencl"`, gpuc's SPIR-V, which that runtime vectorizes across work items). Each anchor is
  skipped with a note where it is not installed.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

import _common  # noqa: F401 - puts the repository on sys.path
from _common import banner, machine_facts, paired_rounds, table, write_json

import gpuc
from examples.blur import blur as blur_kernel
from examples.mandelbrot import fractal, mandel
from bench_blur import numba_blur
from bench_kernels import saxpy, stencil


@gpuc.kernel
def newton(a, out, tol):
    i = gpuc.index()
    c = a[i]
    x = c if c > 1.0 else 1.0
    k = 0
    while abs(x * x * x - c) > tol * c and k < 100:
        x = x - (x * x * x - c) / (3.0 * x * x)
        k += 1
    out[i] = x


def item_by_item(kernel):
    """`kernel` as @gpuc.kernel(vectorize=False) makes it."""
    return type(kernel)(kernel.py_func, {**kernel.options, "vectorize": False})


def numba_loops():
    import numba

    mandel_nb = numba.njit(mandel.py_func)

    @numba.njit
    def fractal_nb(min_x, min_y, px, py, image, iters):
        height, width = image.shape
        for y in range(height):
            imag = min_y + y * py
            for x in range(width):
                image[y, x] = mandel_nb(min_x + x * px, imag, iters)

    @numba.njit
    def newton_nb(a, out, tol):
        for i in range(a.shape[0]):
            c = a[i]
            x = c if c > 1.0 else 1.0
            k = 0
            while abs(x * x * x - c) > tol * c and k < 100:
                x = x - (x * x * x - c) / (3.0 * x * x)
                k += 1
            out[i] = x

    @numba.njit
    def saxpy_nb(a, x, y, out):
        for i in range(x.shape[0]):
            out[i] = a * x[i] + y[i]

    @numba.njit
    def stencil_nb(u, v):
        n, m = u.shape
        for i in range(1, n - 1):
            for j in range(1, m - 1):
                v[i, j] = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]) - u[i, j]

    blur_nb = numba_blur()

    return {"mandelbrot": fractal_nb, "newton": newton_nb, "saxpy": saxpy_nb, "stencil": stencil_nb, "blur": blur_nb}


AVX2_FEATURES = "+sse2,+sse3,+ssse3,+sse4.1,+sse4.2,+popcnt,+avx,+avx2,+fma,+f16c,+bmi,+bmi2,+lzcnt,+movbe"


def avx2_launch(kernel, args, vectorize: bool):
    """`kernel` compiled for this host's triple as an AVX2 machine (haswell), as a function launching it
    over a grid with `args` on one thread."""
    from gpuc.abi import KernelSignature
    from gpuc.runtime import cpu
    from gpuc.runtime.dispatch import launch_job, signature_spec, typeof
    from gpuc.targets import NativeTarget

    types = tuple(typeof(a, i) for i, a in enumerate(args))
    job = launch_job(kernel, types, "cpu")
    target = NativeTarget(cpu_name="haswell", feature_string=AVX2_FEATURES)
    job = gpuc.CompilerJob(job.source, job.config.replace(target=target, vectorize=vectorize))
    launcher = cpu.JITModule(job, signature=KernelSignature(signature_spec(types))).launcher()
    return lambda grid: launcher(grid, args, threads=1)


def avx2_rows(quick: bool, reps: int, anchors: dict) -> list:
    """Mandelbrot (20 iterations) and Newton with AVX2 lanes: vectorized, item by item, numba.njit."""
    rows = []
    for title, kernel, grid, make, nb in cases(quick):
        if not title.startswith(("Mandelbrot", "Newton")) or title.endswith("256 iterations"):
            continue
        a_vec, a_scalar, a_nb = make(), make(), make()
        vec, scalar = avx2_launch(kernel, a_vec, True), avx2_launch(kernel, a_scalar, False)
        fns = [lambda: vec(grid), lambda: scalar(grid)]
        if nb in anchors:
            fns.append(lambda: anchors[nb](*a_nb))
        wall = paired_rounds(fns, reps, clock=0)
        outs = [[a for a in group if isinstance(a, np.ndarray)][-1] for group in (a_vec, a_scalar, a_nb)[:len(fns)]]
        if not all(np.array_equal(outs[0], o) for o in outs[1:]):
            raise SystemExit(f"{title} (AVX2): the outputs differ")
        best = [min(t) for t in wall]
        rows.append([title, f"{best[0] * 1e3:.2f}", f"{best[0] / best[1]:.2f}x",
                     f"{best[0] / best[2]:.3f}x" if len(best) > 2 else "-"])
    return rows


def jax_mandelbrot(h: int, w: int, px: float, py: float, iters: int):
    """Numba's `mandel` over every pixel as a JAX user writes it: jax.jit(jax.vmap(pixel)) with a
    lax.while_loop per pixel, in float64 and complex128."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    jax.config.update("jax_enable_x64", True)

    def pixel(x, y):
        c = (-2.0 + x * px) + 1j * (-1.0 + y * py)

        def cond(state):
            i, z, escaped = state
            return (i < iters) & (escaped < 0)

        def body(state):
            i, z, escaped = state
            z = z * z + c
            escaped = jnp.where(z.real * z.real + z.imag * z.imag >= 4, i, escaped)
            return i + 1, z, escaped

        _, _, escaped = lax.while_loop(cond, body, (0, jnp.complex128(0), -1))
        return jnp.where(escaped < 0, 255, escaped).astype(jnp.uint8)

    xs, ys = np.meshgrid(np.arange(w, dtype=np.float64), np.arange(h, dtype=np.float64))
    xs, ys = jnp.asarray(xs.ravel()), jnp.asarray(ys.ravel())
    run = jax.jit(jax.vmap(pixel))
    return lambda: np.asarray(run(xs, ys).block_until_ready()).reshape(h, w)


def anchor_rows(quick: bool, reps: int) -> tuple[list, list]:
    """The Mandelbrot example (20 iterations) against JAX and Intel's OpenCL CPU runtime, one core."""
    shape = (500, 750) if quick else (1000, 1500)
    h, w = shape
    px, py = 3.0 / w, 2.0 / h
    ours = np.zeros(shape, np.uint8)
    fns, names, outs, notes = [lambda: fractal.launch((w, h), -2.0, -1.0, px, py, ours, 20, threads=1)], ["gpuc"], [ours], []
    try:
        jax_run = jax_mandelbrot(h, w, px, py, 20)
        jax_out = {}
        fns.append(lambda: jax_out.__setitem__("image", jax_run()))
        names.append("jax.jit(jax.vmap(...)), lax.while_loop")
        outs.append(jax_out)
    except ImportError:
        notes.append("JAX: not installed")
    from gpuc.runtime import opencl
    if opencl.available():
        theirs = np.zeros(shape, np.uint8)
        fns.append(lambda: fractal.launch((w, h), -2.0, -1.0, px, py, theirs, 20, device="opencl"))
        names.append("gpuc's SPIR-V on Intel's OpenCL CPU runtime")
        outs.append(theirs)
    else:
        notes.append(f"OpenCL: {opencl.unavailable_reason()}")
    wall = paired_rounds(fns, reps, clock=0)
    best = [min(t) for t in wall]
    rows = []
    for name, out, t in zip(names, outs, best):
        image = out["image"] if isinstance(out, dict) else out
        same = np.mean(image == ours)
        rows.append([name, f"{t * 1e3:.2f}", f"{best[0] / t:.3f}x", f"{same * 100:.3f}%"])
    return rows, notes


def numba_prange_loops():
    """saxpy, the stencil and the blur with `prange` over the outer loop (Numba's own threads)."""
    import numba

    @numba.njit(parallel=True)
    def saxpy_nb(a, x, y, out):
        for i in numba.prange(x.shape[0]):
            out[i] = a * x[i] + y[i]

    @numba.njit(parallel=True)
    def stencil_nb(u, v):
        n, m = u.shape
        for i in numba.prange(1, n - 1):
            for j in range(1, m - 1):
                v[i, j] = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]) - u[i, j]

    @numba.njit(parallel=True)
    def blur_nb(src, dst, gain):
        height, width = src.shape[0], src.shape[1]
        for y in numba.prange(height):
            for x in range(width):
                for c in range(3):
                    total = np.int32(0)
                    for dy in range(-1, 2):
                        row = min(max(y + dy, 0), height - 1)
                        for dx in range(-1, 2):
                            column = min(max(x + dx, 0), width - 1)
                            total += src[row, column, c]
                    dst[y, x, c] = min(max((total * gain + 4) // 9, 0), 255)

    return {"saxpy": saxpy_nb, "stencil": stencil_nb, "blur": blur_nb}


def two_thread_rows(quick: bool, reps: int) -> list:
    """saxpy, stencil and blur: gpuc with threads=2 against Numba's prange on 2 threads."""
    import numba

    numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
    loops = numba_prange_loops()
    rows = []
    for title, kernel, grid, make, nb in cases(quick):
        if nb not in loops:
            continue
        ours, theirs = make(), make()
        wall = paired_rounds([lambda: kernel.launch(grid, *ours, threads=2), lambda: loops[nb](*theirs)], reps)
        if not np.array_equal(ours[-1] if nb != "blur" else ours[1], theirs[-1] if nb != "blur" else theirs[1]):
            raise SystemExit(f"{title} (two threads): the outputs differ")
        best = [min(t) for t in wall]
        rows.append([title, f"{best[0] * 1e3:.2f}", f"{best[1] * 1e3:.2f}", f"{best[0] / best[1]:.2f}x"])
    return rows


def cases(quick: bool):
    """(name, kernel, grid, make_args, numba name, numba args from the gpuc args) per benchmark."""
    rng = np.random.default_rng(0)
    shape = (500, 750) if quick else (1000, 1500)
    h, w = shape
    px, py = 3.0 / w, 2.0 / h
    n = 250_000 if quick else 1_000_000
    roots = rng.uniform(0.0, 1000.0, n)
    side = 1024 if quick else 2048
    u = rng.standard_normal((side, side))
    big = 2_500_000 if quick else 10_000_000
    x32, y32 = rng.standard_normal(big).astype(np.float32), rng.standard_normal(big).astype(np.float32)
    image = rng.integers(0, 256, size=(540, 960, 3) if quick else (1080, 1920, 3), dtype=np.uint8)
    out = []
    for iters in (20, 256):
        out.append((f"Mandelbrot {h}x{w}, {iters} iterations", fractal, (w, h),
                    lambda iters=iters: (-2.0, -1.0, px, py, np.zeros(shape, np.uint8), iters), "mandelbrot"))
    out.append((f"Newton cube roots, {n} float64", newton, n, lambda: (roots, np.zeros(n), 1e-12), "newton"))
    out.append((f"saxpy {big} float32", saxpy, big, lambda: (np.float32(2.5), x32, y32, np.zeros(big, np.float32)),
                "saxpy"))
    out.append((f"stencil {side}^2 float64", stencil, (side - 2, side - 2), lambda: (u, np.zeros_like(u)), "stencil"))
    out.append((f"blur {image.shape[0]}x{image.shape[1]}x3 uint8", blur_kernel, (image.shape[1], image.shape[0]),
                lambda: (image, np.zeros_like(image), np.int32(2)), "blur"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller inputs, 5 rounds")
    parser.add_argument("--reps", type=int, default=11)
    parser.add_argument("--json", help="write the samples and the machine facts here")
    parser.add_argument("--no-pin", action="store_true", help="do not pin the process to one core")
    args = parser.parse_args()
    reps = 5 if args.quick else args.reps

    facts = machine_facts()
    print(banner(facts))
    try:
        two = two_thread_rows(args.quick, reps)
        print(table(["two threads", "gpuc ms", "numba prange ms", "gpuc / numba"], two))
        print()
    except ImportError:
        two = []
    if not args.no_pin and hasattr(os, "sched_setaffinity"):
        # before JAX and OpenCL start their threads, which inherit the mask: they run on this core too
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    try:
        anchors = numba_loops()
    except ImportError:
        anchors = {}
    rows, results = [], {}
    for title, kernel, grid, make, nb in cases(args.quick):
        scalar = item_by_item(kernel)
        a_vec, a_scalar, a_nb = make(), make(), make()
        fns = [lambda: kernel.launch(grid, *a_vec, threads=1), lambda: scalar.launch(grid, *a_scalar, threads=1)]
        if nb in anchors:
            fns.append(lambda: anchors[nb](*a_nb))
        cpu = paired_rounds(fns, reps, clock=1)
        outs = [[a for a in group if isinstance(a, np.ndarray)][-1] for group in (a_vec, a_scalar, a_nb)[:len(fns)]]
        if not all(np.array_equal(outs[0], o) for o in outs[1:]):
            raise SystemExit(f"{title}: the outputs differ")
        line = [l.strip() for l in str(kernel.inspect(*make()).trace).splitlines() if "vectorized at" in l]
        best = [min(t) for t in cpu]
        row = [title, f"{best[0] * 1e3:.2f}", f"{best[0] / best[1]:.2f}x"]
        row.append(f"{best[0] / best[2]:.3f}x" if len(best) > 2 else "-")
        row.append(f"{best[1] / best[2]:.2f}x" if len(best) > 2 else "-")
        row.append("yes" if line and line[0].startswith("vectorized") else "no (LLVM's loop vectorizer)")
        rows.append(row)
        results[title] = {"cpu_s": cpu, "vectorized": line[0] if line else None}
    print(table(["kernel (threads=1)", "vectorized ms", "/ item by item", "/ numba.njit", "item by item / numba",
                 "plugin vectorized"], rows))
    avx2 = avx2_rows(args.quick, reps, anchors)
    print()
    print(table(["AVX2 lanes (haswell), one core", "vectorized ms", "/ item by item", "/ numba.njit"], avx2))
    anchored, notes = anchor_rows(args.quick, reps)
    print()
    print(table(["Mandelbrot, 20 iterations, one core", "ms", "gpuc / this", "pixels equal to gpuc's"], anchored))
    for note in notes:
        print("  skipped:", note)
    if args.json:
        write_json(args.json, {"results": results, "two_threads": two, "avx2": avx2, "anchors": anchored,
                               "machine": facts})


if __name__ == "__main__":
    main()
