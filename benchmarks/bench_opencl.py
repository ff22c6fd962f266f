"""The OpenCL runtime on the CPU: gpuc kernels on Intel's OpenCL CPU device against gpuc's native CPU runtime.

    .venv/bin/python benchmarks/bench_opencl.py [--quick] [--reps N] [--launches N] [--json OUT]

The same kernels, imported from examples/ and the other benchmarks, run side by side in one process, the two
alternating round by round (`paired_rounds`, wall time, after a warm-up launch of each that compiles):

- saxpy (examples/kernels.py) over 10M float32;
- the 2-D 5-point stencil (examples/kernels.py) over the interior of 2048x2048 float64;
- Mandelbrot with complex numbers (examples/mandelbrot.py), 1000x1500 pixels, 20 iterations;
- the 3x3 box blur of a 1080x1920x3 uint8 image (examples/blur.py);
- the 16x16 tiled matmul in shared memory, two barriers per tile (bench_blocks.py), 512x512 float32.

OpenCL runs on device arrays made with `gpuc.opencl.to_device`, so no copy is timed, and each timed launch
ends with `gpuc.opencl.synchronize()`. The OpenCL CPU device runs work-groups on every core; the native runtime
runs with its default thread count (GPUC_NUM_THREADS, else every core), which the header prints. Before timing,
each OpenCL result is compared with the native one (equal, or the closeness printed) and with a reference.

Launch overhead: warm launches of an empty kernel (bench_kernels.py's `empty`, one array argument) in batches
of --launches, the OpenCL batch ended by one synchronize(); beside it, the launch of saxpy over 16 elements, and
pyopencl's own set_args + enqueue_nd_range_kernel of the same built kernels (what the driver costs without gpuc).

Ratios: OpenCL / native (below 1: Intel's runtime is faster), best against best and the median of the rounds'
ratios. `--quick`: smaller problems (1M, 1024x1024, 500x750, 540x960, 256x256), fewer rounds.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import _common  # noqa: F401 - puts the repository on sys.path
from _common import banner, machine_facts, median, paired_rounds, ratios, table, write_json

import gpuc
import gpuc.opencl
from gpuc.runtime.cpu import default_threads
from gpuc.runtime.dispatch import launcher_for

from bench_blocks import TILE, matmul_tiled
from bench_kernels import empty
from examples.blur import box_blur, reference as blur_reference
from examples.kernels import saxpy, stencil
from examples.mandelbrot import create_fractal

PLANE = (-2.0, 1.0, -1.0, 1.0)


class Case:
    """One kernel on both runtimes: `native()` and `opencl()` launch it, `results()` reads both outputs back."""

    def __init__(self, name, size, native, opencl, results, check):
        self.name, self.size, self.native, self.opencl, self.results, self.check = (name, size, native, opencl,
                                                                                    results, check)


def _opencl(launch):
    def run():
        launch()
        gpuc.opencl.synchronize()
    return run


def cases(quick: bool) -> list:
    cl = gpuc.opencl
    rng = np.random.default_rng(0)
    out = []

    n = 1_000_000 if quick else 10_000_000
    x, y, a = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32), np.float32(2.5)
    xd, yd = cl.to_device(x), cl.to_device(y)
    got, got_d = np.empty_like(x), cl.device_array(n, np.float32)
    out.append(Case("saxpy", f"{n:,} float32", lambda: saxpy[n](a, x, y, got),
                    _opencl(lambda: saxpy[n](a, xd, yd, got_d)), lambda: (got, got_d.get()),
                    lambda native, device: _closeness(device, native, a * x + y)))

    side = 1024 if quick else 2048
    u = rng.random((side, side))
    ud = cl.to_device(u)
    v, vd = np.zeros_like(u), cl.zeros((side, side), np.float64)
    want = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]) - u[1:-1, 1:-1]
    out.append(Case("2-D stencil", f"{side}x{side} float64", lambda: stencil[(side - 2, side - 2)](u, v),
                    _opencl(lambda: stencil[(side - 2, side - 2)](ud, vd)), lambda: (v, vd.get()),
                    lambda native, device: _closeness(device[1:-1, 1:-1], native[1:-1, 1:-1], want)))

    shape = (500, 750) if quick else (1000, 1500)
    image, image_d = np.zeros(shape, np.uint8), cl.zeros(shape, np.uint8)
    out.append(Case("Mandelbrot (complex)", f"{shape[0]}x{shape[1]}, 20 iterations",
                    lambda: create_fractal(*PLANE, image, 20), _opencl(lambda: create_fractal(*PLANE, image_d, 20)),
                    lambda: (image, image_d.get()), _equality))

    shape = (540, 960, 3) if quick else (1080, 1920, 3)
    picture = rng.integers(0, 256, size=shape, dtype=np.uint8)
    picture_d = cl.to_device(picture)
    blurred, blurred_d = np.empty_like(picture), cl.device_array(shape, np.uint8)
    want_blur = blur_reference(picture, 2)
    out.append(Case("3x3 box blur (uint8)", "x".join(map(str, shape)), lambda: box_blur(picture, 2, blurred),
                    _opencl(lambda: box_blur(picture_d, 2, blurred_d)), lambda: (blurred, blurred_d.get()),
                    lambda native, device: _equality(native, device) + (
                        "" if np.array_equal(device, want_blur) else "; DIFFERS from NumPy")))

    m = 256 if quick else 512
    ma, mb = rng.standard_normal((m, m), np.float32), rng.standard_normal((m, m), np.float32)
    mad, mbd = cl.to_device(ma), cl.to_device(mb)
    mc, mcd = np.zeros((m, m), np.float32), cl.zeros((m, m), np.float32)
    out.append(Case(f"tiled matmul ({TILE}x{TILE} shared)", f"{m}x{m} float32",
                    lambda: matmul_tiled.launch((m, m), ma, mb, mc, block=(TILE, TILE)),
                    _opencl(lambda: matmul_tiled.launch((m, m), mad, mbd, mcd, block=(TILE, TILE))),
                    lambda: (mc, mcd.get()),
                    lambda native, device: _closeness(device, native, ma.astype(np.float64) @ mb)))
    return out


def _equality(native, device) -> str:
    if np.array_equal(native, device):
        return "equal"
    raise SystemExit(f"the OpenCL result differs from the native one in {int(np.sum(native != device))} elements")


def _closeness(device, native, want) -> str:
    """'equal' when bit for bit the native result, else the largest difference relative to the reference's scale;
    stops the benchmark when either is not close to the reference."""
    scale = float(np.abs(want).max()) or 1.0
    errors = [float(np.abs(r.astype(np.float64) - want).max()) / scale for r in (native, device)]
    if max(errors) > 1e-5:
        raise SystemExit(f"a result is not close to the reference: native {errors[0]:.1e}, OpenCL {errors[1]:.1e}")
    if np.array_equal(native, device):
        return "equal"
    return f"close: max |OpenCL - native| / max |ref| = {float(np.abs(device - native).max()) / scale:.1e}"


def run_cases(chosen: list, reps: int) -> list:
    rows = []
    for case in chosen:
        case.native()
        case.opencl()  # compiles both (the timed rounds' warm-up runs them once more)
        agreement = case.check(*case.results())
        native, opencl = paired_rounds([case.native, case.opencl], reps)
        best, median_ratio = ratios(opencl, native)
        rows.append({"kernel": case.name, "size": case.size, "native_s": native, "opencl_s": opencl,
                     "ratio": best, "median_ratio": median_ratio, "agreement": agreement})
        print(f"  {case.name}: native {min(native) * 1e3:.2f} ms, OpenCL {min(opencl) * 1e3:.2f} ms", flush=True)
    return rows


# -- launch overhead ------------------------------------------------------------------------------

def _per_launch(fn, launches: int, rounds: int, finish=None) -> list:
    """Seconds per launch of `launches` calls of `fn` (then `finish()`), for each of `rounds` batches."""
    out = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(launches):
            fn()
        if finish is not None:
            finish()
        out.append((time.perf_counter() - start) / launches)
    return out


def launch_overhead(launches: int, rounds: int) -> list:
    cl = gpuc.opencl
    sync = cl.synchronize
    host, dev = np.zeros(16, np.float32), cl.zeros(16, np.float32)
    a = np.float32(2.5)
    raw = {}
    for name, kernel, args in (("empty", empty, (dev,)), ("saxpy", saxpy, (a, dev, dev, dev))):
        kernel[1 if name == "empty" else 16](*args)
        sync()
        run = launcher_for(kernel, args).opencl  # the built kernel gpuc launches, and its argument list
        n = 1 if name == "empty" else 16
        flat = [a] if name == "saxpy" else []
        for _ in range(1 if name == "empty" else 3):
            flat += [dev.base_data, 16, 1]
        if run.sizes:  # the kernel reads its launch size: three trailing i64 parameters
            flat += [n, 1, 1]
        raw[name] = (run.kernel, flat, (n,))
    queue, enqueue = cl.session().queue, cl.session().cl.enqueue_nd_range_kernel

    def raw_launch(name):
        kernel, flat, size = raw[name]

        def go():
            kernel.set_args(*flat)
            enqueue(queue, kernel, size, None)
        return go

    cases_ = [
        ("empty kernel, 1 array", lambda: empty[1](host), lambda: empty[1](dev), raw_launch("empty")),
        ("saxpy over 16 elements", lambda: saxpy[16](a, host, host, host), lambda: saxpy[16](a, dev, dev, dev),
         raw_launch("saxpy")),
    ]
    rows = []
    for name, native, opencl, direct in cases_:
        for fn in (native, opencl, direct):
            fn()
        sync()
        times = {"native": [], "opencl": [], "pyopencl": []}
        for _ in range(rounds):  # alternating, as paired_rounds does
            times["native"] += _per_launch(native, launches, 1)
            times["opencl"] += _per_launch(opencl, launches, 1, sync)
            times["pyopencl"] += _per_launch(direct, launches, 1, sync)
        best, median_ratio = ratios(times["opencl"], times["native"])
        rows.append({"kernel": name, **{k + "_s": v for k, v in times.items()}, "ratio": best,
                     "median_ratio": median_ratio})
    return rows


def report(rows: list, overhead: list, threads: int) -> None:
    body = []
    for r in rows:
        faster = "OpenCL" if r["ratio"] < 1 else "native"
        body.append([r["kernel"], r["size"], f"{min(r['native_s']) * 1e3:.2f}", f"{min(r['opencl_s']) * 1e3:.2f}",
                     f"{r['ratio']:.2f}x", f"{r['median_ratio']:.2f}x", faster, r["agreement"]])
    print(table(["kernel", "size", "native ms", "OpenCL ms", "OpenCL/native (best)", "(median)", "faster",
                 "results"], body, left=(0, 1, 6, 7),
                title=f"== gpuc kernels: Intel's OpenCL CPU device against the native runtime on {threads} threads "
                      "(wall time, best of rounds) =="))
    print()
    body = []
    for r in overhead:
        body.append([r["kernel"], f"{min(r['native_s']) * 1e6:.1f}", f"{min(r['opencl_s']) * 1e6:.1f}",
                     f"{min(r['pyopencl_s']) * 1e6:.1f}", f"{r['ratio']:.2f}x", f"{r['median_ratio']:.2f}x",
                     f"{median(r['opencl_s']) / median(r['pyopencl_s']):.1f}x"])
    print(table(["warm launch", "native us", "OpenCL us", "pyopencl enqueue us", "OpenCL/native (best)", "(median)",
                 "OpenCL/pyopencl"], body,
                title="== launch overhead per warm launch (device arrays on OpenCL; best of batches) =="))
    wins = [r["kernel"] for r in rows if r["ratio"] < 1]
    print("\nIntel's runtime is faster on: " + (", ".join(wins) if wins else "none of the kernels"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller problems, 5 rounds, 4 launch batches")
    ap.add_argument("--reps", type=int, help="timed rounds per kernel (default 15, 5 with --quick)")
    ap.add_argument("--launches", type=int, default=2000, help="launches per batch of the launch-overhead figures")
    ap.add_argument("--json", help="write the samples and the machine facts here")
    args = ap.parse_args()
    if not gpuc.opencl.available():
        print(f"no OpenCL device: {gpuc.opencl.unavailable_reason()}")
        return 1
    reps = args.reps or (5 if args.quick else 15)
    threads = default_threads()
    facts = machine_facts()
    print(banner(facts))
    print(f"OpenCL: {gpuc.opencl.device_info()}")
    print(f"native: gpuc's CPU runtime on its default thread count, {threads} (GPUC_NUM_THREADS, else every core)\n")
    rows = run_cases(cases(args.quick), reps)
    overhead = launch_overhead(args.launches, 4 if args.quick else 9)
    print()
    report(rows, overhead, threads)
    if args.json:
        write_json(args.json, {"facts": facts, "device": str(gpuc.opencl.device_info()), "threads": threads,
                               "reps": reps, "kernels": rows, "launch_overhead": overhead})
    return 0


if __name__ == "__main__":
    sys.exit(main())
