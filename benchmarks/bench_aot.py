"""Ahead-of-time libraries against JIT-compiled kernels: build time, and run time side by side.

    .venv/bin/python benchmarks/bench_aot.py [--quick] [--reps N] [--json OUT]

Measured in one run, on a Python file of ten kernels (docs/aot.md):
- build: `gpuc compile FILE.py:K --types ... (x10) --emit lib -o lib.so` as a command (a fresh
  process: start-up, compile, link with `cc`) until `gpuc.load_library` has loaded it; and the JIT's
  first launches of the same ten kernels in this process (`kernel[n]`, compile included), both
  with an empty disk cache;
- the same build in this process (`aot.build` + `aot.link_library`: no interpreter start-up);
- run time of each kernel from the library (`lib.K.launch(n, ...)`) and JIT-compiled
  (`kernel.launch(n, ...)`), alternating, the same arrays, on one thread and on every core; the
  best of the runs (the least disturbed by other processes), the ratio library / JIT (1.0: the
  same machine code), and the outputs compared for equality.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import bench_kernels
from _common import ROOT, banner, machine_facts, median, table, write_json

OWN_KERNELS = textwrap.dedent("""\
    import math

    import gpuc


    @gpuc.kernel
    def scale(s, x, out):
        i = gpuc.index()
        out[i] = s * x[i]


    @gpuc.kernel
    def triad(x, y, z, out):
        i = gpuc.index()
        out[i] = x[i] + y[i] * z[i]


    @gpuc.kernel
    def clip(lo, hi, x, out):
        i = gpuc.index()
        out[i] = min(max(x[i], lo), hi)


    @gpuc.kernel
    def poly(x, out):
        i = gpuc.index()
        v = x[i]
        out[i] = ((0.5 * v + 1.5) * v - 2.0) * v + 3.0


    @gpuc.kernel
    def softplus(x, out):
        i = gpuc.index()
        out[i] = math.log(1.0 + math.exp(x[i]))


    @gpuc.kernel
    def waves(t, out):
        i = gpuc.index()
        out[i] = math.sin(t * i) * math.cos(0.5 * t * i)


    @gpuc.kernel
    def count_above(x, threshold, out):
        i = gpuc.index()
        n = 0
        for k in range(16):
            if x[i] * (k + 1) > threshold:
                n += 1
        out[i] = n
""")
# saxpy, the stencil and mandelbrot are bench_kernels.py's own
KERNELS = OWN_KERNELS + "".join("\n\n" + inspect.getsource(getattr(bench_kernels, name))
                                for name in ("saxpy", "stencil", "mandelbrot"))


TYPES = {
    "saxpy": "f32, f32[::1], f32[::1], f32[::1]",
    "scale": "f64, f64[::1], f64[::1]",
    "triad": "f64[::1], f64[::1], f64[::1], f64[::1]",
    "clip": "f32, f32, f32[::1], f32[::1]",
    "poly": "f64[::1], f64[::1]",
    "softplus": "f64[::1], f64[::1]",
    "waves": "f64, f64[::1]",
    "stencil": "f64[:, ::1], f64[:, ::1]",
    "count_above": "f32[::1], f32, i32[::1]",
    "mandelbrot": "i32[:, ::1], i64",
}


def workloads(np, n: int, side: int):
    """Per kernel: (launch size, arguments) with the argument types of TYPES."""
    rng = np.random.default_rng(1)
    f32 = lambda: rng.random(n, dtype=np.float32)  # noqa: E731
    f64 = lambda: rng.random(n)  # noqa: E731
    return {
        "saxpy": (n, [np.float32(2.5), f32(), f32(), np.zeros(n, np.float32)]),
        "scale": (n, [1.5, f64(), np.zeros(n)]),
        "triad": (n, [f64(), f64(), f64(), np.zeros(n)]),
        "clip": (n, [np.float32(0.25), np.float32(0.75), f32(), np.zeros(n, np.float32)]),
        "poly": (n, [f64(), np.zeros(n)]),
        "softplus": (n, [f64(), np.zeros(n)]),
        "waves": (n, [1e-5, np.zeros(n)]),
        "stencil": ((side - 2, side - 2), [rng.random((side, side)), np.zeros((side, side))]),
        "count_above": (n, [f32(), np.float32(4.0), np.zeros(n, np.int32)]),
        "mandelbrot": ((side // 2, side // 2), [np.zeros((side // 2, side // 2), np.int32), 200]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller arrays, fewer repetitions")
    parser.add_argument("--reps", type=int, default=None, help="runs of each kernel on each side (default 15)")
    parser.add_argument("--json", help="write samples, medians and ratios here")
    args = parser.parse_args()
    reps = args.reps or (5 if args.quick else 15)
    n, side = (1_000_000, 512) if args.quick else (10_000_000, 2048)

    with tempfile.TemporaryDirectory(prefix="gpuc-bench-aot-") as tmp:
        os.environ["GPUC_CACHE_DIR"] = str(Path(tmp) / "cache")  # both sides compile from scratch
        import numpy as np

        import gpuc

        facts = machine_facts()
        print(banner(facts))
        source = Path(tmp) / "tenkernels.py"
        source.write_text(KERNELS)
        library = Path(tmp) / "libten.so"
        argv = [sys.executable, "-m", "gpuc", "compile"]
        for name, types in TYPES.items():
            argv += [f"{source.name}:{name}", "--types", types]
        argv += ["--emit", "lib", "-o", str(library)]
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        start = time.perf_counter()
        proc = subprocess.run(argv, cwd=tmp, capture_output=True, text=True, env=env)
        built = time.perf_counter() - start
        if proc.returncode:
            raise SystemExit(f"gpuc compile failed:\n{proc.stderr}")
        start = time.perf_counter()
        lib = gpuc.load_library(library)
        loaded = time.perf_counter() - start

        spec = importlib.util.spec_from_file_location("tenkernels", source)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        work = workloads(np, n, side)
        jit_args = {name: [a.copy() if isinstance(a, np.ndarray) else a for a in args_] for name, (_, args_) in
                    work.items()}
        start = time.perf_counter()
        for name, (size, _) in work.items():
            getattr(module, name)[size](*jit_args[name])  # the first launch compiles
        jit_first = time.perf_counter() - start

        start = time.perf_counter()
        from gpuc.frontend.core.typespec import parse_types
        from gpuc.runtime import aot
        exports = [aot.Export(getattr(module, name), tuple(parse_types(types)), name) for name, types in TYPES.items()]
        aot.link_library(aot.build(exports, gpuc.NativeTarget(), "lib"), Path(tmp) / "libten2.so")
        in_process = time.perf_counter() - start

        rows, samples = [], {}
        everyone = os.cpu_count() or 1
        for name, (size, lib_args) in work.items():
            kernel, exported = getattr(module, name), lib[name]
            exported[size](*lib_args)  # warm (the first call binds libmvec's symbols)
            row, samples[name] = [name, TYPES[name]], {}
            for threads in (1, everyone):
                times = {"lib": [], "jit": []}
                for _ in range(reps):  # alternating, so that drifting load hits both sides alike
                    start = time.perf_counter()
                    exported.launch(size, *lib_args, threads=threads)
                    times["lib"].append(time.perf_counter() - start)
                    start = time.perf_counter()
                    kernel.launch(size, *jit_args[name], threads=threads)
                    times["jit"].append(time.perf_counter() - start)
                lib_t, jit_t = min(times["lib"]), min(times["jit"])  # the least disturbed run of each
                samples[name][threads] = times
                row += [f"{lib_t * 1e3:.2f}", f"{jit_t * 1e3:.2f}", f"{lib_t / jit_t:.2f}"]
            same = all(np.array_equal(a, b) for a, b in zip(lib_args, jit_args[name]) if isinstance(a, np.ndarray))
            rows.append(row + ["yes" if same else "NO"])

    print(f"\nbuild: gpuc compile --emit lib of 10 kernels (a fresh process, link included) {built:.2f} s, "
          f"load_library {loaded * 1e3:.1f} ms: {built + loaded:.2f} s to a loaded library")
    print(f"       the same build in this process (aot.build + link_library) {in_process:.2f} s")
    print(f"JIT: first launches of the same 10 kernels in this process (compile included) {jit_first:.2f} s "
          f"(ratio: command+load / JIT {(built + loaded) / jit_first:.2f}, in-process build / JIT "
          f"{in_process / jit_first:.2f})\n")
    print(table(["kernel", "types", "lib ms 1T", "JIT ms 1T", "lib/JIT", f"lib ms {everyone}T", f"JIT ms {everyone}T",
                 "lib/JIT", "equal"], rows,
                title=f"run time, best of {reps} (n={n:,}, 2-D {side}x{side}; medians in --json)", left=(0, 1)))
    if args.json:
        write_json(args.json, {"facts": facts, "build_s": built, "load_s": loaded, "in_process_build_s": in_process,
                               "jit_first_launches_s": jit_first,
                               "medians_ms": {k: {t: {side_: median(v) * 1e3 for side_, v in by.items()}
                                                  for t, by in per.items()} for k, per in samples.items()},
                               "reps": reps, "n": n, "side": side, "samples": samples,
                               "rows": [dict(zip(["kernel", "types", "lib_ms_1", "jit_ms_1", "ratio_1", "lib_ms_all",
                                                  "jit_ms_all", "ratio_all", "equal"], r)) for r in rows]})


if __name__ == "__main__":
    main()
