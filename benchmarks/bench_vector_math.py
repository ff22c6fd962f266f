"""Vector math on the CPU: gpuc kernels whose loops call libmvec against libm's scalar calls and JAX.

Two functions over 4M float64 on one core: `wave(x) = sin(x) * exp(-x*x) + log(1 + x*x)` and
`damped(x)`, 16 steps of `acc = 0.9*acc + sin(acc)` from `acc = x`. For each: the primal kernel,
the forward derivative (`gpuc.derivative`) and the reverse adjoint (`gpuc.adjoint`), compiled with
NativeTarget(vector_math=False) (libm, one scalar call per element: before) and NativeTarget()
(libmvec: after), side by side with `jax.jit(jax.vmap(f))` and `jax.jit(jax.vmap(jax.grad(f)))`
(optional: skipped when JAX is missing; `pip install -e .[anchors]`). Everything runs on one core:
the process is pinned to it (os.sched_setaffinity), gpuc launches with threads=1 and XLA runs with
`--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1`. Runs interleave; medians.
Target: gpuc <= 0.8x JAX's time.

    python benchmarks/bench_vector_math.py            # ~2.5 min
    python benchmarks/bench_vector_math.py --quick    # ~1 min
"""

from __future__ import annotations

import argparse
import math
import os
import sys

# One core and one XLA thread, set before anything starts threads (JAX reads XLA_FLAGS on import).
_CORE = min(os.sched_getaffinity(0))
os.sched_setaffinity(0, {_CORE})
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1").strip()

import numpy as np  # noqa: E402

import _common  # noqa: E402,F401 - puts the repository on sys.path
from _common import banner, machine_facts, median, ms, table, timed, write_json  # noqa: E402

import gpuc  # noqa: E402
from gpuc.runtime import cpu  # noqa: E402
from gpuc.runtime.dispatch import KernelSignature, signature_spec, typeof  # noqa: E402

STEPS = 16


@gpuc.func
def wave(x):
    return math.sin(x) * math.exp(-x * x) + math.log(1.0 + x * x)


@gpuc.func
def damped(x):
    acc = x
    for _ in range(STEPS):
        acc = 0.9 * acc + math.sin(acc)
    return acc


@gpuc.kernel
def wave_primal(a, b):
    i = gpuc.index()
    b[i] = wave(a[i])


@gpuc.kernel
def wave_derivative(a, b):
    i = gpuc.index()
    b[i] = gpuc.derivative(wave, a[i])


@gpuc.kernel
def damped_primal(a, b):
    i = gpuc.index()
    b[i] = damped(a[i])


@gpuc.kernel
def damped_derivative(a, b):
    i = gpuc.index()
    b[i] = gpuc.derivative(damped, a[i])


KERNELS = {"wave": (wave_primal, wave_derivative), "damped": (damped_primal, damped_derivative)}
TARGETS = {"libm": gpuc.NativeTarget(vector_math=False), "libmvec": gpuc.NativeTarget()}


def gpuc_runner(kernel, target, arrays, out_index: int):
    """A call running `kernel` compiled for `target` on `arrays` with one thread, returning the output array."""
    types = tuple(typeof(a, i) for i, a in enumerate(arrays))
    job = gpuc.CompilerJob((kernel, types), gpuc.CompilerConfig(target, kernel=True))
    launcher = cpu.JITModule(job, signature=KernelSignature(signature_spec(types))).launcher()
    n = arrays[0].size

    def run():
        launcher(n, arrays, threads=1)
        return arrays[out_index]
    return run


def gpuc_runs(name: str, x: np.ndarray) -> dict:
    primal, derivative = KERNELS[name]
    runs = {}
    for label, target in TARGETS.items():
        runs[f"primal gpuc {label}"] = gpuc_runner(primal, target, (x, np.empty_like(x)), 1)
        runs[f"derivative gpuc {label}"] = gpuc_runner(derivative, target, (x, np.empty_like(x)), 1)
        y, dx, dy = np.empty_like(x), np.zeros_like(x), np.ones_like(x)

        def adjoint(run=gpuc_runner(gpuc.adjoint(primal), target, (x, dx, y, dy), 1), dx=dx, dy=dy):
            dx[:] = 0.0
            dy[:] = 1.0  # consumed by each launch
            return run()
        runs[f"adjoint gpuc {label}"] = adjoint
    return runs


def jax_runs(name: str, x: np.ndarray) -> tuple[dict, str]:
    try:
        import jax
    except ImportError as exc:
        return {}, f"JAX skipped: {exc}"
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    def wave_j(v):
        return jnp.sin(v) * jnp.exp(-v * v) + jnp.log(1.0 + v * v)

    def damped_j(v):
        acc = v
        for _ in range(STEPS):
            acc = 0.9 * acc + jnp.sin(acc)
        return acc

    f = {"wave": wave_j, "damped": damped_j}[name]
    xj = jax.device_put(x)
    primal, grad = jax.jit(jax.vmap(f)), jax.jit(jax.vmap(jax.grad(f)))
    runs = {"primal jax": lambda: np.asarray(primal(xj).block_until_ready()),
            "derivative jax": lambda: np.asarray(grad(xj).block_until_ready())}
    return runs, f"JAX {jax.__version__} on {jax.devices()[0].platform}"


def measure(runs: dict, reps: int) -> tuple[dict, dict]:
    """Median seconds of each run (ABBA order over the runs) and each run's first result."""
    results = {label: run() for label, run in runs.items()}  # compiles, warms up
    seconds = {label: [] for label in runs}
    order = list(runs)
    for rep in range(reps):
        for label in (order if rep % 2 == 0 else order[::-1]):
            t, _ = timed(runs[label])
            seconds[label].append(t)
    return {label: median(v) for label, v in seconds.items()}, results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--n", type=int, default=1 << 22, help="elements (default 4M)")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()
    reps = 5 if args.quick else 11
    facts = machine_facts()
    print(banner(facts))
    print(f"one core (CPU {_CORE}), gpuc threads=1, XLA_FLAGS={os.environ['XLA_FLAGS']!r}")
    x = np.random.default_rng(0).uniform(-3.0, 3.0, args.n)
    report = {"facts": facts, "n": args.n, "reps": reps, "functions": {}}
    for name in KERNELS:
        jruns, note = jax_runs(name, x)
        times, results = measure({**gpuc_runs(name, x), **jruns}, reps)
        rows = []
        for kind in ("primal", "derivative", "adjoint"):
            jax_label = f"{kind if kind != 'adjoint' else 'derivative'} jax"
            jax_time = times.get(jax_label)
            reference = results[f"{kind} gpuc libm"]
            for label in ("gpuc libm", "gpuc libmvec", "jax"):
                key = f"{kind} {label}"
                if label == "jax":
                    if kind == "adjoint" or key not in times:
                        continue
                    key = jax_label
                err = float(np.max(np.abs(results[key] - reference) / (1.0 + np.abs(reference))))
                ratio = f"{times[key] / jax_time:.2f}x" if jax_time else "-"
                rows.append([kind, label, ms(times[key]), ratio, f"{err:.1e}"])
        print(table(["kernel", "code", "ms", "vs jax", "max diff vs libm"], rows, left=(0, 1),
                    title=f"\n{name} over {args.n} float64, one core (median of {reps}; target <= 0.80x jax)"))
        print(note)
        report["functions"][name] = {"ms": {k: v * 1e3 for k, v in times.items()}, "jax": note}
    if args.json:
        write_json(args.json, report)


if __name__ == "__main__":
    sys.exit(main())
