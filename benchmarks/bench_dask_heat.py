"""The heat example over Dask: throughput on 1 and 2 worker processes, gpuc against Numba in the same graph.

    .venv/bin/python benchmarks/bench_dask_heat.py [--quick] [--reps N] [--json OUT]

examples/dask_heat.py's computation (explicit Euler steps of a 5-point Laplacian with a fixed
boundary, one `map_overlap` of depth 1 per step) on `LocalCluster(threads_per_worker=1,
processes=True)`, each launch on one thread (GPUC_NUM_THREADS=1):

1. Throughput on a 4096 x 4096 grid in two row slabs, 150 steps (about 10 s on one worker; --quick:
   30 steps), with 1 and with 2 workers, the best of --reps runs after a warm-up run: the chunk
   function launching the example's gpuc kernel, and the same loop as a Numba `@njit` function in the
   same graph (skipped when numba is missing). "No Dask" is the ceiling: the same work per step
   (gluing on the neighbours' edges, the step, trimming) looped inside each worker process on its own
   slab, all workers at once, with no scheduling or transfers. Ratios: 2 workers / 1 (target >= 1.8x),
   gpuc / Numba.
2. What a cluster costs: its start (2 workers); on a fresh worker process the first task with an empty
   and with a warm cache folder, and the next task (a 64 x 64 chunk, timed in the client, so with the
   scheduler's round trip); per chunk and step in a graph of small chunks (1024 x 1024 in 64 chunks of
   128 x 128, 10 steps). Kernels from `__main__` ("gpuc": as the example run as a script, each task
   brings its own copy, by value) and from an importable module ("gpuc importable": the example
   imported on the workers through PYTHONPATH, one copy per process); NumPy slicing as the baseline.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import logging
import math
import os
import sys
import tempfile
import time

import numpy as np

import _common
from _common import banner, machine_facts, table, write_json

import gpuc

EXAMPLES = _common.ROOT / "examples"
sys.path.insert(0, str(EXAMPLES))
import dask_heat  # noqa: E402 - from examples/, also on the workers' PYTHONPATH

try:
    import numba
except ImportError:
    numba = None

ALPHA = dask_heat.ALPHA
N, SLABS, STEPS, QUICK_STEPS = 4096, 2, 150, 30
SMALL = np.random.default_rng(0).random((64, 64))


@gpuc.kernel
def heat_step(u, out, alpha):
    # the example's kernel, defined here in __main__ as the example's is when it runs as a script
    j = gpuc.index(0) + 1
    i = gpuc.index(1) + 1
    out[i, j] = u[i, j] + alpha * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j])


if numba is not None:
    @numba.njit
    def heat_loop(u, out, alpha):
        for i in range(1, u.shape[0] - 1):
            for j in range(1, u.shape[1] - 1):
                out[i, j] = u[i, j] + alpha * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j])


def step_numba(block, alpha):
    out = dask_heat.with_edges(block)
    heat_loop(block, out, alpha)
    return out


def variants() -> dict:
    """Chunk functions, each as (function, keyword arguments) for map_overlap."""
    found = {"gpuc": (dask_heat.step_chunk, {"kernel": heat_step}),
             "gpuc importable": (dask_heat.step_chunk, {}),
             "numpy": (dask_heat.heat_numpy, {"steps": 1})}
    if numba is not None:
        found["numba"] = (step_numba, {})
    return found


# -- the cluster ----------------------------------------------------------------------------------


@contextlib.contextmanager
def cluster(workers: int, folder: str):
    from dask import config
    from distributed import Client, LocalCluster

    env = {"GPUC_NUM_THREADS": "1", "GPUC_CACHE_DIR": os.path.join(folder, "cache"),
           "PYTHONPATH": os.pathsep.join([str(EXAMPLES), os.environ.get("PYTHONPATH", "")])}
    with config.set({"temporary-directory": os.path.join(folder, "dask")}), \
            LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None, env=env,
                         silence_logs=logging.CRITICAL) as local, Client(local) as client:
        yield client


def initial_rows(n: int, start: int, stop: int):
    return dask_heat.initial_grid(n)[start:stop].copy()


def initial(client, n: int, rows: int):
    """examples/dask_heat.py's initial grid in slabs of `rows` rows, each made on the next worker. With
    as many slabs as workers the placement stays: each step moves only edges between workers. (With
    more slabs than workers, Dask moved whole slabs between the two workers on most steps.)"""
    import dask.array as da
    from distributed import wait

    workers = sorted(client.scheduler_info()["workers"])
    slabs = []
    for k, start in enumerate(range(0, n, rows)):
        stop = min(start + rows, n)
        made = client.submit(initial_rows, n, start, stop, workers=[workers[k * len(workers) * rows // n]])
        slabs.append(da.from_delayed(made, (stop - start, n), dtype=np.float64))
    u = da.concatenate(slabs).persist()
    wait(u)
    return u


def run(client, u0, steps: int, variant: tuple, token: str):
    """(seconds, result) of `steps` steps from the persisted `u0`, persisted; a token of its own keeps
    earlier results from being reused."""
    from distributed import wait

    step, kwargs = variant
    u = u0
    for s in range(steps):
        u = u.map_overlap(step, depth=1, boundary="none", meta=np.empty((0, 0)), token=f"{token}-{s}", alpha=ALPHA,
                          **kwargs)
    start = time.perf_counter()
    u = u.persist()
    wait(u)
    return time.perf_counter() - start, u


def steps_in_place(rows: int, n: int, steps: int) -> float:
    """Seconds for `steps` of a slab's work in one task: glue on two edge rows, step, trim."""
    slab, edge = initial_rows(n, 0, rows), np.zeros((1, n))
    dask_heat.step_chunk(np.concatenate([edge, slab, edge]), ALPHA)
    start = time.perf_counter()
    for _ in range(steps):
        slab = dask_heat.step_chunk(np.concatenate([edge, slab, edge]), ALPHA)[1:-1]
    return time.perf_counter() - start


# -- 1. throughput --------------------------------------------------------------------------------


def throughput(folder: str, steps: int, reps: int) -> dict:
    """Seconds per run, by (variant, workers)."""
    names = [name for name in ("gpuc", "numba") if name in variants()]
    seconds, tokens = {}, itertools.count()
    for workers in (1, 2):
        with cluster(workers, folder) as client:
            u0 = initial(client, N, N // SLABS)
            for name in names:  # warm-up: compiles, first transfers
                run(client, u0, 2, variants()[name], f"warm-{next(tokens)}")
            for rep in range(reps):
                for name in names[rep % len(names):] + names[:rep % len(names)]:
                    seconds.setdefault((name, workers), []).append(
                        run(client, u0, steps, variants()[name], f"run-{next(tokens)}")[0])
            addresses = sorted(client.scheduler_info()["workers"])
            for _ in range(reps):
                slabs = [client.submit(steps_in_place, N // SLABS, N, steps * SLABS // workers, workers=[address],
                                       pure=False) for address in addresses]
                seconds.setdefault(("no Dask", workers), []).append(max(client.gather(slabs)))
            if "numba" in names:
                ours, theirs = (run(client, u0, steps, variants()[name], f"check-{next(tokens)}")[1].compute()
                                for name in ("gpuc", "numba"))
                same = np.array_equal(ours, theirs)
                print(f"  {workers} worker(s): gpuc and Numba results {'identical' if same else 'DIFFER'}")
    return seconds


def throughput_table(seconds: dict, steps: int) -> str:
    names = [name for name in ("gpuc", "numba", "no Dask") if (name, 1) in seconds]
    best = {key: min(values) for key, values in seconds.items()}
    rows = []
    for w in (1, 2):
        rows.append([f"{w} worker{'s' if w > 1 else ''}"]
                    + [f"{best[(n, w)]:.2f} s, {N * N * steps / best[(n, w)] / 1e6:.0f}" for n in names])
        if "numba" in names:
            rows[-1].append(f"{best[('gpuc', w)] / best[('numba', w)]:.2f}x")
    rows.append(["2 workers / 1"] + [f"{best[(n, 1)] / best[(n, 2)]:.2f}x" for n in names]
                + ([""] if "numba" in names else []))
    return table([""] + [f"{n}: time, Mcell/s" for n in names] + (["gpuc / numba"] if "numba" in names else []),
                 rows, title=f"== throughput: {N} x {N} in {SLABS} slabs, {steps} steps (best of "
                             f"{len(seconds[('gpuc', 1)])}; target 2 workers / 1 >= 1.8x) ==")


# -- 2. costs -------------------------------------------------------------------------------------


def _use_cache(folder: str) -> None:
    os.environ["GPUC_CACHE_DIR"] = folder


def task_ms(client, worker: str, variant: tuple) -> float:
    step, kwargs = variant
    start = time.perf_counter()
    client.submit(step, SMALL, alpha=ALPHA, workers=[worker], pure=False, **kwargs).result()
    return (time.perf_counter() - start) * 1e3


def first_tasks(client, state: str, found: dict) -> None:
    """On a new cluster, per variant into `found` (ms): the first task on a worker new to it (the cache
    folder in `state`, "empty" or "warm") and, when warm, the best of 10 next tasks there."""
    time.sleep(1)  # the workers start together: let both finish starting before timing one
    workers = sorted(client.scheduler_info()["workers"])
    for name, worker in zip(found, itertools.cycle(workers)):
        times, what = found[name], f"first task, {state} cache folder"
        times[what] = min(times.get(what, math.inf), task_ms(client, worker, variants()[name]))
        if state == "warm":
            later = min(task_ms(client, worker, variants()[name]) for _ in range(10))
            times["next task"] = min(times.get("next task", math.inf), later)


def per_task(client, reps: int) -> dict:
    """ms per chunk and step in a graph of 64 chunks x 10 steps, the best of `reps` runs."""
    u0, tokens, found = initial(client, 1024, 128).rechunk(128).persist(), itertools.count(), {}
    for name, variant in variants().items():
        run(client, u0, 2, variant, f"warm-{name}")
        best = min(run(client, u0, 10, variant, f"{name}-{next(tokens)}")[0] for _ in range(reps))
        found[name] = best / (64 * 10) * 1e3
    return found


def costs(folder: str, reps: int) -> dict:
    """New clusters rather than client.restart(), which hangs after a few restarts (dask/distributed#8534)."""
    starts, tasks = [], {name: {} for name in variants()}
    for rep, state in itertools.product(range(reps), ("empty", "warm")):
        start = time.perf_counter()
        with cluster(2, folder) as client:
            starts.append(time.perf_counter() - start)
            client.run(_use_cache, os.path.join(folder, f"first-tasks-{rep}"))
            first_tasks(client, state, tasks)
    with cluster(2, folder) as client:
        return {"cluster start s": starts, "tasks": tasks, "per task": per_task(client, reps)}


def costs_table(found: dict) -> str:
    names = list(variants())
    rows = [[what] + [f"{found['tasks'][n][what]:.1f}" for n in names]
            for what in ("first task, empty cache folder", "first task, warm cache folder", "next task")]
    rows.append(["per chunk and step, 64 chunks"] + [f"{found['per task'][n]:.2f}" for n in names])
    starts = found["cluster start s"]
    return table(["ms"] + names, rows,
                 title=f"== costs on 2 workers (first tasks: best of {len(starts) // 2} clusters each; cluster start "
                       f"{min(starts):.2f} s, best of {len(starts)}) ==")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=f"{QUICK_STEPS} steps, fewer repetitions")
    ap.add_argument("--reps", type=int, help="runs per measurement (default 3, 2 with --quick)")
    ap.add_argument("--json", help="write the results to this file")
    args = ap.parse_args()
    reps, steps = args.reps or (2 if args.quick else 3), QUICK_STEPS if args.quick else STEPS
    facts = machine_facts()
    print(banner(facts))
    print(f"load average {os.getloadavg()[0]:.2f} (other processes on these CPUs make every figure worse)")
    if numba is None:
        print("(numba is not installed: its column is skipped)")
    with tempfile.TemporaryDirectory(prefix="gpuc-bench-dask-") as folder:
        seconds = throughput(folder, steps, reps)
        print(throughput_table(seconds, steps))
        found = costs(folder, reps)
        print()
        print(costs_table(found))
    print(f"\nload average {os.getloadavg()[0]:.2f}")
    if args.json:
        write_json(args.json, {"facts": facts, "steps": steps, "costs": found,
                               "throughput s": {f"{name} {workers}": s for (name, workers), s in seconds.items()}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
