"""The 2-D heat equation over a Dask cluster: a gpuc kernel per chunk, the workers sharing a disk cache.

    .venv/bin/python examples/dask_heat.py [--small] [--fail] [--n N] [--steps S] [--chunk C]

Explicit Euler steps of a 5-point Laplacian on a grid whose outer ring stays fixed. The grid is a
chunked `dask.array`; each step is one `map_overlap` of depth 1 whose chunk function launches
`heat_step`, a gpuc kernel defined in this file. Run as a script, that is `__main__`, so the kernel
travels to the workers by value (docs/frontend.md, "Pickling") and each worker compiles it, or finds
its code in the disk cache.

On `LocalCluster(n_workers=2, threads_per_worker=1, processes=True)` the same computation runs
three times, each on a new cluster, and every worker's `gpuc.cache.info()` is printed after each:
1. the workers share one empty cache folder: one worker compiles, the other finds the code;
2. new worker processes, the same folder: nobody compiles;
3. one empty folder per worker: each worker compiles.
Each result is checked against NumPy. `--small` (256 x 256, 4 steps) is the quick check the tests
run; `--fail` also launches a kernel with an error in it and checks that the client receives the
`gpuc.CompilationError` located at its line in this file. Exits 1 when a check fails.
docs/scale-out.md says how to run this on a real cluster, and what it costs.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import logging
import os
import sys
import tempfile
import time

import numpy as np

import gpuc

ALPHA = 0.2  # diffusion number dt * k / h**2; explicit Euler is stable up to 0.25


@gpuc.kernel
def heat_step(u, out, alpha):
    # launched over the interior of the chunk; dimension 0 varies fastest, so it walks the columns
    j = gpuc.index(0) + 1
    i = gpuc.index(1) + 1
    out[i, j] = u[i, j] + alpha * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j])


@gpuc.kernel
def heat_step_broken(u, out, alpha):
    j = gpuc.index(0) + 1
    i = gpuc.index(1) + 1
    out[i, j] = u[i, j] + alpha * laplacian  # noqa: F821 - never defined: the error --fail expects


def with_edges(block):
    """An array like `block` (CuPy's for a CuPy chunk) holding its outer ring, the interior still to write."""
    out = np.empty_like(block)
    out[[0, -1], :] = block[[0, -1], :]
    out[:, [0, -1]] = block[:, [0, -1]]
    return out


def step_chunk(block, alpha, kernel=heat_step):
    """One step on a chunk with its ghost cells. Its outer ring is either ghost cells (trimmed by
    map_overlap) or the grid's fixed boundary (boundary="none" adds nothing there): both stay as they are.
    On a CuPy chunk, the kernel runs on the GPU."""
    out = with_edges(block)
    if block.shape[0] > 2 and block.shape[1] > 2:
        kernel[(block.shape[1] - 2, block.shape[0] - 2)](block, out, alpha)
    return out


def heat_dask(u0, steps: int, chunk: int, alpha: float = ALPHA, step=step_chunk, **step_args):
    """The lazy result of `steps` steps from `u0`, one map_overlap of depth 1 each."""
    import dask.array as da

    u = da.from_array(u0, chunks=chunk)
    for _ in range(steps):
        u = u.map_overlap(step, depth=1, boundary="none", meta=u0[:0, :0], alpha=alpha, **step_args)
    return u


def heat_numpy(u, steps: int, alpha: float = ALPHA):
    """The same steps in one process, with the kernel's order of operations."""
    for _ in range(steps):
        v = u.copy()
        v[1:-1, 1:-1] = u[1:-1, 1:-1] + alpha * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]
                                                 - 4.0 * u[1:-1, 1:-1])
        u = v
    return u


def initial_grid(n: int):
    """A hot top edge, a warm square inside, the rest cold."""
    u = np.zeros((n, n))
    u[0, :] = 1.0
    u[n // 4:n // 2, n // 4:n // 2] = 0.5
    return u


def use_own_cache(base: str, dask_worker=None) -> str:
    """Run on every worker (`client.run`): give it a cache folder of its own under `base`."""
    os.environ["GPUC_CACHE_DIR"] = os.path.join(base, f"worker-{dask_worker.name}")
    return os.environ["GPUC_CACHE_DIR"]


def cache_report(client) -> list[dict]:
    """`gpuc.cache.info()` of every worker, with its name, printed and returned in worker order."""
    names = {address: info["name"] for address, info in client.scheduler_info()["workers"].items()}
    infos = sorted(({"worker": names[a], **info} for a, info in client.run(gpuc.cache.info).items()),
                   key=lambda info: str(info["worker"]))
    for info in infos:
        print(f"    worker {info['worker']}: compiled {info['misses']}, found in the cache {info['hits']}"
              f"  (folder {info['folder']}: {info['entries']} entr{'y' if info['entries'] == 1 else 'ies'})")
    return infos


def check(good: bool, what: str) -> bool:
    print(f"  {what}: {'ok' if good else 'WRONG'}")
    return good


def run_and_check(u0, want, args) -> bool:
    start = time.perf_counter()
    got = heat_dask(u0, args.steps, args.chunk).compute()
    error = float(np.abs(got - want).max())
    good = error <= 1e-12
    print(f"  {args.steps} steps on {u0.shape[0]} x {u0.shape[1]} in chunks of {args.chunk}: "
          f"{time.perf_counter() - start:.2f} s; against NumPy: "
          + ("identical" if np.array_equal(got, want) else f"max |difference| {error:.2e}")
          + ("" if good else "  WRONG"))
    return good


@contextlib.contextmanager
def cluster(folder: str):
    """A new LocalCluster of two worker processes sharing the cache folder `folder`/shared, and its client."""
    import dask
    from distributed import Client, LocalCluster

    # GPUC_NUM_THREADS=1: a worker's launches use one core, Dask's workers are the parallelism. Task errors
    # reach the client, which raises them; the workers' own logging of them would repeat them.
    env = {"GPUC_CACHE_DIR": os.path.join(folder, "shared"), "GPUC_NUM_THREADS": "1"}
    start = time.perf_counter()
    with dask.config.set({"temporary-directory": os.path.join(folder, "dask")}), \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, env=env,
                         silence_logs=logging.CRITICAL) as local, Client(local) as client:
        print(f"  (a new cluster of 2 worker processes, started in {time.perf_counter() - start:.2f} s)")
        yield client


def phases(u0, want, args, folder: str) -> bool:
    ok = True
    print("\n1. the workers share one empty cache folder")
    with cluster(folder) as client:
        # One small task on one worker first, so that the other finds its code rather than both compiling
        # the kernel at the same moment (which is safe too: each then stores the same entry).
        first = sorted(client.scheduler_info()["workers"])[0]
        client.submit(step_chunk, u0[:8, :8], ALPHA, workers=[first], pure=False).result()
        ok &= run_and_check(u0, want, args)
        ok &= check(sum(info["misses"] for info in cache_report(client)) == 1, "one compile in the cluster")

    # New clusters rather than client.restart(): restarting the same workers many times can hang
    # (dask/distributed#8534).
    print("\n2. new worker processes, the same folder")
    with cluster(folder) as client:
        ok &= run_and_check(u0, want, args)
        ok &= check(sum(info["misses"] for info in cache_report(client)) == 0, "no compile")

    print("\n3. one empty folder per worker")
    with cluster(folder) as client:
        client.run(use_own_cache, os.path.join(folder, "own"))
        ok &= run_and_check(u0, want, args)
        ok &= check(all(info["misses"] == 1 for info in cache_report(client)), "one compile per worker")
        if args.fail:
            ok &= located_failure(u0, args)
    return ok


def located_failure(u0, args) -> bool:
    """A kernel that cannot compile fails its tasks on the workers; the client raises the same error."""
    print("\n4. a kernel with an error, launched on the workers")
    lines, first_line = inspect.getsourcelines(heat_step_broken.py_func)
    line = first_line + next(i for i, text in enumerate(lines) if "* laplacian" in text)
    try:
        heat_dask(u0, 1, args.chunk, kernel=heat_step_broken).compute()
    except gpuc.CompilationError as error:
        print("  the client caught gpuc.CompilationError:\n    " + str(error).replace("\n", "\n    "))
        where = error.location
        return check(where is not None and os.path.samefile(where.file, __file__) and where.line == line,
                     f"located at {os.path.basename(__file__)}:{line}")
    except Exception as error:  # noqa: BLE001 - anything else is the failure this check is for
        print(f"  WRONG: the client caught {type(error).__name__}: {error}")
        return False
    print("  WRONG: the broken kernel ran")
    return False


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="256 x 256, 4 steps, chunks of 128")
    ap.add_argument("--fail", action="store_true", help="also check the located error of a broken kernel")
    ap.add_argument("--n", type=int, default=2048, help="grid size (default 2048)")
    ap.add_argument("--steps", type=int, default=20, help="time steps (default 20)")
    ap.add_argument("--chunk", type=int, default=1024, help="chunk size (default 1024)")
    args = ap.parse_args(argv)
    if args.small:
        args.n, args.steps, args.chunk = 256, 4, 128

    u0 = initial_grid(args.n)
    want = heat_numpy(u0, args.steps)
    with tempfile.TemporaryDirectory(prefix="gpuc-dask-heat-") as folder:
        ok = phases(u0, want, args, folder)
    print("\nclient process: compiled", gpuc.cache.info()["misses"])
    print("all checks passed" if ok else "SOME CHECKS FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
