"""What reverse-mode differentiation costs: adjoint kernels and gpuc.grad, against the primal, Warp and JAX.

1. Adjoint vs primal: for three float32 kernels (elementwise `sin(x) * x`, a 1-D 3-point stencil
   whose adjoint accumulates into neighbours, a per-element loop with a run-time trip count read
   from an int32 array), the kernel `gpuc.adjoint(k)` against `k` itself, on the CPU with one
   thread and with all threads, over 1M and 10M elements (target: adjoint <= 2x primal).
   And two float32 kernels with blocks from bench_blocks.py: the README's shared-memory tree reduction
   and a matmul with 16x16 tiles in shared memory, `gpuc.adjoint(k).launch(..., block=)` against `k` (target: <= 3x).
2. The same kernels on Warp's CPU device (`warp-lang`, optional): forward and backward time
   (backward = putting the seed in place + the adjoint launch, `tape.backward(grads={y: seed})` for
   Warp; target: gpuc's backward <= 0.5x Warp's), gpuc's backward both as `gpuc.adjoint(k)` (which
   redoes the primal's writes) and as `gpuc.adjoint(k, primal_writes=False)` (the backward of the
   forward that ran, y left as the primal stored it, as Warp's backward leaves it); the gradients of
   both against a float64 reference (the chain rule evaluated in NumPy) and against each other.
3. First-launch compile time, each in a fresh subprocess: gpuc's first `gpuc.adjoint(k).launch`
   (and the primal's first launch after it) with an empty GPUC_CACHE_DIR against Warp's first launch
   with its kernel cache pointed at an empty directory (Warp builds forward and backward together;
   target: gpuc <= 0.1x Warp); then both again in another fresh process with the folder the first one
   filled: gpuc's adjoint from its disk cache (target: <= 30 ms) against Warp's launch and backward
   from its kernel cache.
4. `out[i] = gpuc.grad(f, x[i])[0]` in a kernel over float64 for three funcs (a polynomial, a
   transcendental mix, a loop with a run-time trip count) against
   `jax.jit(jax.vmap(jax.grad(f)))` over the same array (`jax`, optional), with equal values; and the
   second derivative of a loss looping over a 16-element data array (`gpuc.grad` of a func taking
   `gpuc.grad` of it) against `jax.vmap(jax.grad(jax.grad(loss)))`.
Runs interleave (ABBA); medians are reported. Warp and JAX are skipped, with a note, when they
are not installed (`GPUC_EXTRAS=test,ptx,bench,cuda,anchors bash scripts/setup.sh` installs them).

    python benchmarks/bench_reverse.py            # ~3 min on 2 cores
    python benchmarks/bench_reverse.py --quick    # ~35 s: 1M elements, fewer repetitions
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np

import _common  # noqa: F401 - puts the repository on sys.path
from _common import ROOT, banner, machine_facts, median, ms, paired_rounds, spread, table, timed, write_json

import gpuc
from bench_blocks import TILE, TPB, matmul_tiled, sum_tree  # noqa: E402
from bench_autodiff import (loop, loop_derivative, loop_primal, mix, mix_derivative, mix_primal, poly,  # noqa: E402
                            poly_derivative, poly_primal)

HAVE_REVERSE = hasattr(gpuc, "adjoint") and hasattr(gpuc, "grad")

# -- the kernels: gpuc here, Warp in warp_kernels() (the same code) ------------------------------


@gpuc.kernel
def elementwise(x, y):
    i = gpuc.index()
    y[i] = math.sin(x[i]) * x[i]


@gpuc.kernel
def stencil(x, y):
    i = gpuc.index()
    n = len(x)
    if i > 0 and i < n - 1:
        y[i] = 0.25 * x[i - 1] + 0.5 * x[i] + 0.25 * x[i + 1]


@gpuc.kernel
def dynamic_loop(x, nsteps, y):
    i = gpuc.index()
    n = nsteps[i]
    acc = x[i]
    for _ in range(n):
        acc = acc * 0.5 + math.sin(acc)
    y[i] = acc


def run_block_kernels(reps: int, threads: list[int], quick: bool) -> list[list[str]]:
    """Adjoint against primal of bench_blocks.py's tree reduction and tiled matmul, float32, on the CPU:
    table rows."""
    rng = np.random.default_rng(0)
    n, m = (1 << 20, 128) if quick else (1 << 22, 256)
    a, out = rng.uniform(-1, 1, n).astype(np.float32), np.zeros(n // TPB, np.float32)
    x, y = (rng.uniform(-1, 1, (m, m)).astype(np.float32) for _ in range(2))
    z = np.zeros((m, m), np.float32)
    rows = []
    for t in threads:
        for name, primal, adjoint, size, block in (
                ("block reduction", lambda: sum_tree.launch(n, a, out, block=TPB, threads=t),
                 lambda: gpuc.adjoint(sum_tree).launch(n, a, np.zeros_like(a), out, np.ones_like(out), block=TPB,
                                                       threads=t), f"{n:,}", TPB),
                ("tiled matmul", lambda: matmul_tiled.launch((m, m), x, y, z, block=(TILE, TILE), threads=t),
                 lambda: gpuc.adjoint(matmul_tiled).launch((m, m), x, np.zeros_like(x), y, np.zeros_like(y), z,
                                                           np.ones_like(z), block=(TILE, TILE), threads=t),
                 f"{m}x{m}", f"{TILE}x{TILE}")):
            p, d = paired_rounds([primal, adjoint], reps)
            rows.append([name, size, str(block), str(t), ms(median(p)), ms(median(d)), f"{median(d) / median(p):.2f}x"])
    return rows


def warp_kernels():
    """The Warp versions of the kernels, or None when Warp is not installed."""
    try:
        import warp as wp
    except ImportError:
        return None
    wp.config.log_level = wp.LOG_WARNING
    wp.init()

    @wp.kernel
    def elementwise(x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
        i = wp.tid()
        y[i] = wp.sin(x[i]) * x[i]

    @wp.kernel
    def stencil(x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
        i = wp.tid()
        n = x.shape[0]
        if i > 0 and i < n - 1:
            y[i] = 0.25 * x[i - 1] + 0.5 * x[i] + 0.25 * x[i + 1]

    @wp.kernel
    def dynamic_loop(x: wp.array(dtype=wp.float32), nsteps: wp.array(dtype=wp.int32), y: wp.array(dtype=wp.float32)):
        i = wp.tid()
        n = nsteps[i]
        acc = x[i]
        for _ in range(n):
            acc = acc * 0.5 + wp.sin(acc)
        y[i] = acc

    return {"elementwise": elementwise, "stencil": stencil, "dynamic loop": dynamic_loop}


MAX_STEPS = 8  # the loop kernel's trip counts are uniform in [0, MAX_STEPS]


def inputs(name: str, n: int) -> dict:
    """The primal's arrays by parameter name, and the seed (the incoming gradient of y)."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-2.0 if name == "dynamic loop" else -1.0, 2.0 if name == "dynamic loop" else 1.0, n)
    arrays = {"x": x.astype(np.float32)}
    if name == "dynamic loop":
        arrays["nsteps"] = rng.integers(0, MAX_STEPS + 1, n).astype(np.int32)
    arrays["y"] = np.zeros(n, np.float32)
    return arrays | {"seed": rng.uniform(0.5, 1.5, n).astype(np.float32)}


def reference(name: str, a: dict) -> tuple[np.ndarray, np.ndarray]:
    """(y, dx) in float64: the primal and the chain rule evaluated in NumPy."""
    x, s = a["x"].astype(np.float64), a["seed"].astype(np.float64)
    if name == "elementwise":
        return np.sin(x) * x, s * (np.cos(x) * x + np.sin(x))
    if name == "stencil":
        y, dx, inner = np.zeros_like(x), np.zeros_like(x), s[1:-1]
        y[1:-1] = 0.25 * x[:-2] + 0.5 * x[1:-1] + 0.25 * x[2:]
        dx[:-2] += 0.25 * inner
        dx[1:-1] += 0.5 * inner
        dx[2:] += 0.25 * inner
        return y, dx
    acc, d, steps = x.copy(), np.ones_like(x), a["nsteps"]
    for k in range(MAX_STEPS):
        m = steps > k
        d[m] *= 0.5 + np.cos(acc[m])
        acc[m] = acc[m] * 0.5 + np.sin(acc[m])
    return acc, s * d


KERNELS = {"elementwise": (elementwise, ("x", "y")), "stencil": (stencil, ("x", "y")),
           "dynamic loop": (dynamic_loop, ("x", "nsteps", "y"))}


def adjoint_args(params, a: dict, shadows: dict) -> list:
    """The adjoint's arguments: the primal's, each float array followed by its shadow."""
    out = []
    for p in params:
        out.append(a[p])
        if a[p].dtype.kind == "f":
            out.append(shadows[p])
    return out


def rel_diff(a, b) -> float:
    """max |a - b| / max |b|: a normwise relative difference (elementwise ones blow up near zeros)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    scale = np.max(np.abs(b)) if b.size else 0.0
    return float(np.max(np.abs(a - b)) / scale) if scale else float(np.max(np.abs(a - b)))


# -- 1 and 2: run time against the primal and against Warp, gradients ----------------------------


def run_kernels(name: str, n: int, reps: int, threads: list[int], wk) -> dict:
    kernel, params = KERNELS[name]
    a = inputs(name, n)
    ref_y, ref_dx = reference(name, a)
    primal_args = [a[p] for p in params]
    shadows = {"x": np.zeros_like(a["x"]), "y": a["seed"].copy()}
    runs, result = {}, {"n": n, "samples": {}, "check": {}}

    kernel.launch(n, *primal_args, device="cpu", threads=threads[-1])
    result["check"]["gpuc y"] = rel_diff(a["y"], ref_y)
    for t in threads:
        runs[f"gpuc primal {t}T"] = lambda t=t: kernel.launch(n, *primal_args, device="cpu", threads=t)
    gpuc_dx = None
    if HAVE_REVERSE:
        args = adjoint_args(params, a, shadows)
        try:  # the gradient, fresh (dx starts at 0, dy holds the seed), on one thread and on all
            adj = gpuc.adjoint(kernel)
            # and the backward of the forward that ran: y holds what the primal stores there, and keeps it
            kept = gpuc.adjoint(kernel, primal_writes=False)
            for t in threads:
                for how, adjoint in (("", adj), (" kept", kept)):
                    shadows["x"][:], shadows["y"][:] = 0, a["seed"]
                    adjoint.launch(n, *args, device="cpu", threads=t)
                    result["check"][f"gpuc dx{how} {t}T"] = rel_diff(shadows["x"], ref_dx)
        except Exception as exc:  # noqa: BLE001 - record it, go on with the rest
            result["check"]["gpuc error"] = f"{type(exc).__name__}: {exc}"
        else:
            result["check"]["gpuc dx"] = max(result["check"][f"gpuc dx{how} {t}T"] for t in threads
                                             for how in ("", " kept"))
            result["check"]["gpuc dy left nonzero"] = int(np.count_nonzero(shadows["y"]))
            gpuc_dx = shadows["x"].copy()
            for t in threads:
                runs[f"gpuc adjoint {t}T"] = lambda t=t: adj.launch(n, *args, device="cpu", threads=t)
                runs[f"gpuc adjoint kept {t}T"] = lambda t=t: kept.launch(n, *args, device="cpu", threads=t)

    if wk is not None:
        import warp as wp

        wa = {p: wp.array(a[p], device="cpu", requires_grad=a[p].dtype.kind == "f") for p in params}
        wseed = wp.array(a["seed"], device="cpu")
        winputs = [wa[p] for p in params if p != "y"]
        wkernel = wk[name]
        tape = wp.Tape()
        try:
            with tape:
                wp.launch(wkernel, dim=n, inputs=winputs, outputs=[wa["y"]], device="cpu")
            tape.backward(grads={wa["y"]: wseed})
            warp_dx = wa["x"].grad.numpy().copy()
            result["check"]["warp y"] = rel_diff(wa["y"].numpy(), ref_y)
            result["check"]["warp dx"] = rel_diff(warp_dx, ref_dx)
            if gpuc_dx is not None:
                result["check"]["gpuc dx vs warp dx"] = rel_diff(gpuc_dx, warp_dx)
            runs["warp forward"] = lambda: wp.launch(wkernel, dim=n, inputs=winputs, outputs=[wa["y"]], device="cpu")
            runs["warp backward"] = lambda: tape.backward(grads={wa["y"]: wseed})
        except Exception as exc:  # noqa: BLE001 - record what Warp refuses, go on
            result["check"]["warp error"] = f"{type(exc).__name__}: {exc}"

    seed_copy = []
    for fn in runs.values():  # warm-up (and compile)
        shadows["y"][:] = a["seed"]
        fn()
    samples = {key: [] for key in runs}
    keys = list(runs)
    for r in range(reps):
        for key in (keys if r % 2 == 0 else reversed(keys)):
            if key.startswith("gpuc adjoint"):  # the seed is consumed: put it back (timed apart)
                seconds, _ = timed(np.copyto, shadows["y"], a["seed"])
                seed_copy.append(seconds)
            seconds, _ = timed(runs[key])
            samples[key].append(seconds)
    if seed_copy:
        samples["gpuc seed copy"] = seed_copy
    result["samples"] = samples
    return result


# -- 3: first-launch compile time, in fresh subprocesses ------------------------------------------

_SCRATCH = []


def scratch() -> Path:
    """A folder for generated scripts (gpuc and Warp read a kernel's source from its file), removed at exit."""
    if not _SCRATCH:
        _SCRATCH.append(tempfile.TemporaryDirectory(prefix="gpuc-bench-"))
    return Path(_SCRATCH[0].name)


FIRST_PRELUDE = """\
import json, math, sys, time
import numpy as np

PARAMS = {params!r}
n = 1024
arrays = [np.full(n, 3, np.int32) if p == "nsteps" else np.linspace(-1.0, 1.0, n, dtype=np.float32) for p in PARAMS]
"""

# `{name}_again` is a second copy of the kernel: its adjoint's first launch is the compile alone,
# in a process whose JIT and LLVM are already set up
GPUC_FIRST = """\
import gpuc

{source}

{source_again}

adjoint_args = []
for a in arrays:
    adjoint_args += [a, np.ones_like(a)] if a.dtype.kind == "f" else [a]
t0 = time.perf_counter()
gpuc.adjoint({name}).launch(n, *adjoint_args, device="cpu", threads=1)
t1 = time.perf_counter()
{name}.launch(n, *arrays, device="cpu", threads=1)
t2 = time.perf_counter()
gpuc.adjoint({name}_again).launch(n, *adjoint_args, device="cpu", threads=1)
t3 = time.perf_counter()
print(json.dumps({{"adjoint": t1 - t0, "primal after": t2 - t1, "adjoint warm": t3 - t2}}))
"""

WARP_FIRST = """\
import warp as wp
wp.config.kernel_cache_dir = sys.argv[1]
wp.config.log_level = wp.LOG_WARNING
wp.init()

{source}

wa = [wp.array(a, device="cpu", requires_grad=a.dtype.kind == "f") for a in arrays]
tape = wp.Tape()
t0 = time.perf_counter()
with tape:
    wp.launch({name}, dim=n, inputs=wa[:-1], outputs=wa[-1:], device="cpu")
t1 = time.perf_counter()
tape.backward(grads={{wa[-1]: wp.array(np.ones(n, np.float32), device="cpu")}})
t2 = time.perf_counter()
print(json.dumps({{"first launch": t1 - t0, "first backward": t2 - t1}}))
"""


def first_launch(template: str, tag: str, source: str, name: str, params, extra_args=(), env=None) -> dict:
    script = scratch() / f"first_{tag}.py"
    again = source.replace(f"def {name}(", f"def {name}_again(", 1)
    script.write_text(FIRST_PRELUDE.format(params=list(params))
                      + template.format(source=source, source_again=again, name=name))
    proc = subprocess.run([sys.executable, str(script), *extra_args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env={**os.environ, **(env or {})})
    if proc.returncode != 0:
        raise RuntimeError(f"{tag}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def compile_times(reps: int, wk) -> dict:
    data = {}
    for name, (kernel, params) in KERNELS.items():
        tag = name.replace(" ", "_")
        sides = {}
        if HAVE_REVERSE:
            sides["gpuc"] = (GPUC_FIRST, textwrap.dedent(inspect.getsource(kernel.py_func)), kernel.__name__, ())
        if wk is not None:
            sides["warp"] = (WARP_FIRST, textwrap.dedent(inspect.getsource(wk[name].func)), wk[name].func.__name__,
                             None)
        samples, errors = {key: [] for side in sides for key in (side, f"{side} cached")}, {}
        for r in range(reps):
            for side in (sides if r % 2 == 0 else reversed(list(sides))):
                if side in errors:
                    continue
                template, source, fname, _ = sides[side]
                folder = tempfile.mkdtemp(prefix=f"{side}-cache-", dir=scratch())  # empty, then filled
                extra, env = ((folder,), None) if side == "warp" else ((), {"GPUC_CACHE_DIR": folder})
                try:
                    for key in (side, f"{side} cached"):
                        samples[key].append(first_launch(template, f"{side}_{tag}", source, fname, params, extra,
                                                         env))
                except RuntimeError as exc:
                    errors[side] = str(exc)
        data[name] = samples | ({"errors": errors} if errors else {})
    return data


# -- 4: gpuc.grad of funcs in a kernel against jax.jit(jax.vmap(jax.grad(f))) ----------------------
# The funcs, their primal kernels and forward-mode derivative kernels are bench_autodiff.py's.

LOOP_TRIPS = 16


@gpuc.kernel
def poly_grad(a, b):
    i = gpuc.index()
    b[i] = gpuc.grad(poly, a[i])[0]


@gpuc.kernel
def mix_grad(a, b):
    i = gpuc.index()
    b[i] = gpuc.grad(mix, a[i])[0]


@gpuc.kernel
def loop_grad(a, b, n):
    i = gpuc.index()
    b[i] = gpuc.grad(loop, a[i], n)[0]


# The second derivative of a loss looping over a data array: `gpuc.grad` of a func taking `gpuc.grad` of it
# (its derivative by rule: gradients of the loss's tangent, gpuc/plugins/autodiff/nested.py), against
# jax.grad(jax.grad(...)); the reference is forward over forward (gpuc.derivative of gpuc.derivative).
DATA = np.linspace(-1.5, 1.5, LOOP_TRIPS)


@gpuc.func
def data_loss(w, n, data):
    acc = 0.0
    for k in range(n):
        r = math.tanh(w * data[k]) - 0.25 * data[k]
        acc += r * r
    return acc


@gpuc.func
def data_slope(w, n, data):
    return gpuc.grad(data_loss, w, n, data)[0]


@gpuc.func
def data_slope_forward(w, n, data):
    return gpuc.derivative(data_loss, w, n, data)


@gpuc.kernel
def data_loss_primal(a, b, n, data):
    i = gpuc.index()
    b[i] = data_loss(a[i], n, data)


@gpuc.kernel
def data_loss_hessian(a, b, n, data):
    i = gpuc.index()
    b[i] = gpuc.grad(data_slope, a[i], n, data)[0]


@gpuc.kernel
def data_loss_second(a, b, n, data):
    i = gpuc.index()
    b[i] = gpuc.derivative(data_slope_forward, a[i], n, data)


FUNCS = {"polynomial": (poly_primal, poly_grad, poly_derivative, ()),
         "transcendental mix": (mix_primal, mix_grad, mix_derivative, ()),
         f"loop ({LOOP_TRIPS} trips)": (loop_primal, loop_grad, loop_derivative, (LOOP_TRIPS,)),
         f"2nd derivative, loss over {LOOP_TRIPS} data": (data_loss_primal, data_loss_hessian, data_loss_second,
                                                           (LOOP_TRIPS, DATA))}


def jax_funcs():
    """name -> (jitted vmap(grad(f)) over a float64 array, notes), or None when JAX is not installed."""
    try:
        import jax
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    def poly_j(x):
        return ((((0.5 * x - 1.25) * x + 2.0) * x - 0.75) * x + 3.0) * x - 1.0

    def mix_j(x):
        return jnp.exp(-x * x) * jnp.sin(3.0 * x) + jnp.log(1.0 + x * x) + jnp.sqrt(1.0 + x * x)

    def loop_j(x, n):
        return jax.lax.fori_loop(0, n, lambda i, acc: acc * x + (i + 1.0), 0.0)

    # reverse mode through a loop needs its trip count at trace time in JAX: record the refusal
    note = ""
    try:
        jax.jit(jax.vmap(jax.grad(loop_j), in_axes=(0, None)))(jnp.ones(4), LOOP_TRIPS)
    except Exception as exc:  # noqa: BLE001 - what JAX says is the point
        note = f"jax.grad with a traced trip count: {type(exc).__name__}: {str(exc).splitlines()[0]}"
    loop_static = jax.jit(jax.vmap(jax.grad(loop_j), in_axes=(0, None)), static_argnums=1)

    def data_loss_j(w, n, data):
        def step(k, acc):
            r = jnp.tanh(w * data[k]) - 0.25 * data[k]
            return acc + r * r
        return jax.lax.fori_loop(0, n, step, 0.0)

    hessian = jax.jit(jax.vmap(jax.grad(jax.grad(data_loss_j)), in_axes=(0, None, None)), static_argnums=1)
    return {"polynomial": (jax.jit(jax.vmap(jax.grad(poly_j))), ()),
            "transcendental mix": (jax.jit(jax.vmap(jax.grad(mix_j))), ()),
            f"loop ({LOOP_TRIPS} trips)": (loop_static, (LOOP_TRIPS,)),
            f"2nd derivative, loss over {LOOP_TRIPS} data": (hessian, (LOOP_TRIPS, jnp.asarray(DATA))),
            "_note": note}


def run_funcs(n: int, reps: int, threads: list[int], jf) -> dict:
    x = np.random.default_rng(1).uniform(-1.0, 1.0, n)
    data = {"n": n, "note": jf["_note"] if jf else "", "cases": {}}
    for name, (primal, grad, forward, extra) in FUNCS.items():
        runs, first, check = {}, {}, {}
        out_p, out_g, out_f = np.zeros_like(x), np.zeros_like(x), np.zeros_like(x)
        # the forward-mode derivative (gpuc.derivative) is the reference for both
        forward.launch(n, x, out_f, *extra, device="cpu", threads=threads[-1])
        runs["gpuc primal 1T"] = lambda: primal.launch(n, x, out_p, *extra, device="cpu", threads=1)
        grad_ok = False
        if HAVE_REVERSE:
            try:
                first["gpuc"], _ = timed(grad.launch, n, x, out_g, *extra, device="cpu", threads=threads[-1])
            except Exception as exc:  # noqa: BLE001 - record it, go on with the rest
                check["gpuc error"] = f"{type(exc).__name__}: {exc}"
            else:
                grad_ok = True
                check["gpuc vs derivative"] = rel_diff(out_g, out_f)
                for t in threads:
                    runs[f"gpuc grad {t}T"] = lambda t=t: grad.launch(n, x, out_g, *extra, device="cpu", threads=t)
        if jf:
            import jax

            fj, jextra = jf[name]
            xj = jax.device_put(x)
            first["jax"], res = timed(lambda: fj(xj, *jextra).block_until_ready())
            res = np.asarray(res)
            check["jax vs derivative"] = rel_diff(res, out_f)
            if grad_ok:
                check["gpuc vs jax"] = rel_diff(out_g, res)
            runs["jax"] = lambda fj=fj, xj=xj, jextra=jextra: fj(xj, *jextra).block_until_ready()
        for fn in runs.values():  # warm-up
            fn()
        samples = {key: [] for key in runs}
        keys = list(runs)
        for r in range(reps):
            for key in (keys if r % 2 == 0 else reversed(keys)):
                seconds, _ = timed(runs[key])
                samples[key].append(seconds)
        data["cases"][name] = {"samples": samples, "first": first, "check": check}
    return data


# -- report ----------------------------------------------------------------------------------------


def fmt_ratio(a, b) -> str:
    return f"{a / b:.2f}x" if a == a and b == b and b else "-"


def fmt_ms(samples: dict, key: str) -> str:
    return ms(median(samples[key])).strip() if samples.get(key) else "-"


def fmt_noise(samples: list) -> str:
    noise = spread(samples)
    return f"{noise:.0%}" if noise == noise else "-"


def fmt_s(seconds: float) -> str:
    return ms(seconds).strip() if seconds == seconds else "-"


def med(samples: dict, key: str) -> float:
    return median(samples[key]) if key in samples else float("nan")


def fmt_diff(check: dict, key: str) -> str:
    value = check.get(key)
    return "-" if value is None else f"{value:.1e}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1M elements only, fewer repetitions")
    parser.add_argument("--reps", type=int, help="repetitions (default 7, 3 with --quick)")
    parser.add_argument("--sizes", help="comma-separated element counts (default 1000000,10000000)")
    parser.add_argument("--json", metavar="OUT", help="write samples, checks and facts as JSON")
    args = parser.parse_args()
    reps = args.reps or (3 if args.quick else 7)
    compile_reps = 2 if args.quick else 5
    sizes = ([int(s) for s in args.sizes.split(",")] if args.sizes
             else [1_000_000] if args.quick else [1_000_000, 10_000_000])
    cpus = os.cpu_count() or 1
    threads = [1] if cpus == 1 else [1, cpus]
    facts = machine_facts()
    print(banner(facts))
    data = {"facts": facts, "sizes": sizes, "threads": threads, "reps": reps}

    if not HAVE_REVERSE:
        print("gpuc has no reverse mode in this checkout (gpuc.adjoint / gpuc.grad): its columns are skipped")
    wk = warp_kernels()
    if wk is None:
        print("warp-lang is not installed: the Warp columns are skipped (the anchors extra installs it)")
    else:
        import warp as wp

        facts["warp"] = wp.config.version
    jf = jax_funcs()
    if jf is None:
        print("jax is not installed: the JAX columns are skipped (the anchors extra installs it)")
    else:
        import jax

        facts["jax"] = jax.__version__

    kernels = {name: [run_kernels(name, n, reps, threads, wk) for n in sizes] for name in KERNELS}
    data["kernels"] = kernels
    if HAVE_REVERSE:
        rows = []
        for name, results in kernels.items():
            for res in results:
                s = res["samples"]
                for t in threads:
                    p, d = f"gpuc primal {t}T", f"gpuc adjoint {t}T"
                    rows.append([name, f"{res['n']:,}", str(t), fmt_ms(s, p), fmt_ms(s, d),
                                 fmt_ratio(med(s, d), med(s, p)),
                                 f"{fmt_noise(s.get(p, []))} / {fmt_noise(s.get(d, []))}"])
        print(table(["kernel", "n", "threads", "primal ms", "adjoint ms", "adjoint/primal", "noise"], rows,
                    title=f"\nadjoint vs primal kernel on the CPU, float32 (median of {reps}; target <= 2x)"))
    if HAVE_REVERSE:
        print(table(["kernel", "size", "block", "threads", "primal ms", "adjoint ms", "adjoint/primal"],
                    run_block_kernels(reps, threads, args.quick),
                    title=f"\nadjoints of kernels with blocks vs their primal on the CPU, float32 (median of {reps}; "
                          "target <= 3x)"))
    if wk is not None:
        rows = []
        for name, results in kernels.items():
            for res in results:
                s = res["samples"]
                if "warp error" in res["check"]:
                    rows.append([name, f"{res['n']:,}", "refused", *["-"] * 6])
                    continue
                back = {(t, k): med(s, f"gpuc adjoint{k} {t}T") + med(s, "gpuc seed copy") if HAVE_REVERSE
                        else float("nan") for t in threads for k in ("", " kept")}
                wb = med(s, "warp backward")
                last = threads[-1]
                rows.append([name, f"{res['n']:,}", fmt_ms(s, "gpuc primal 1T"), fmt_ms(s, "warp forward"),
                             fmt_ms(s, "warp backward"), fmt_s(back[1, ""]), fmt_ratio(back[1, ""], wb),
                             fmt_s(back[1, " kept"]), fmt_ratio(back[1, " kept"], wb),
                             fmt_ratio(back[last, ""], wb), fmt_ratio(back[last, " kept"], wb)])
        print(table(["kernel", "n", "gpuc fwd 1T", "Warp fwd", "Warp bwd", "gpuc bwd 1T", "/Warp", "kept 1T",
                     "/Warp", f"bwd {last}T/Warp", f"kept {last}T/Warp"], rows,
                    title=f"\nagainst Warp {facts['warp']} on the CPU (ms, median of {reps}; Warp runs a CPU launch on "
                          "one thread; backward = seed in place + adjoint launch, which also redoes the primal's "
                          "writes; kept = gpuc.adjoint(k, primal_writes=False), the backward of the forward that ran, "
                          "y left as it stored it, as Warp's backward does; target bwd/Warp <= 0.5x)"))
    rows = []
    for name, results in kernels.items():
        for res in results:
            c = res["check"]
            rows.append([name, f"{res['n']:,}", fmt_diff(c, "gpuc y"),
                         *[fmt_diff(c, f"gpuc dx{how} {t}T") for how in ("", " kept") for t in threads],
                         str(c.get("gpuc dy left nonzero", "-")), fmt_diff(c, "warp y"), fmt_diff(c, "warp dx"),
                         fmt_diff(c, "gpuc dx vs warp dx")])
    print(table(["kernel", "n", "gpuc y", *[f"gpuc dx{how} {t}T" for how in ("", " kept") for t in threads],
                 "dy left nonzero", "Warp y", "Warp x.grad", "gpuc dx vs Warp"], rows,
                title="\ngradients: max |a - b| / max |b| against the float64 reference (float32 results: "
                      "~1e-7 is equal), and gpuc's dx against Warp's x.grad; dy left nonzero: seed entries the "
                      "adjoint did not consume (the stencil never writes its two ends)"))
    for name, results in kernels.items():
        for res in results:
            for who in ("gpuc", "warp"):
                if f"{who} error" in res["check"]:
                    print(f"  {who} failed on {name}, n = {res['n']:,}: {res['check'][f'{who} error']}")
    if wk is not None and kernels["dynamic loop"][0]["check"].get("warp dx", 0) > 1e-4:
        print("  Warp's dynamic-loop gradient differs: a variable reassigned in a dynamic for-loop is not "
              "differentiable in Warp (its codegen says so at LOG_DEBUG: 'this may not be a differentiable operation')")

    if HAVE_REVERSE or wk is not None:
        comp = compile_times(compile_reps, wk)
        data["compile"] = comp
        rows, cached_rows = [], []
        for name, s in comp.items():
            for side, error in s.get("errors", {}).items():
                print(f"  {side}: the first launch of {name} failed: {error}")
            g_adj = median([r["adjoint"] for r in s.get("gpuc", [])])
            g_both = median([r["adjoint"] + r["primal after"] for r in s.get("gpuc", [])])
            g_warm = median([r["adjoint warm"] for r in s.get("gpuc", [])])
            w = median([r["first launch"] for r in s.get("warp", [])])
            w_back = median([r["first backward"] for r in s.get("warp", [])])
            rows.append([name, fmt_s(g_adj), fmt_s(g_both), fmt_s(g_warm), fmt_s(w), fmt_s(w_back),
                         fmt_ratio(g_adj, w), fmt_ratio(g_both, w)])
            g_cached = median([r["adjoint"] for r in s.get("gpuc cached", [])])
            w_cached = median([r["first launch"] + r["first backward"] for r in s.get("warp cached", [])])
            cached_rows.append([name, fmt_s(g_cached), fmt_s(w_cached), fmt_ratio(g_cached, w_cached),
                                "met" if g_cached <= 0.030 else "missed" if g_cached == g_cached else "-"])
        print(table(["kernel", "gpuc adjoint", "+ primal", "adjoint, warm process", "Warp first launch",
                     "Warp 1st backward", "adjoint/Warp", "both/Warp"], rows,
                    title=f"\nfirst-launch compile time in a fresh process (ms, median of {compile_reps}; gpuc's first "
                          "launch includes setting up its JIT, the warm column is a second copy of the kernel; Warp "
                          "builds forward and backward at its first launch; both with empty caches; target <= 0.1x)"))
        print(table(["kernel", "gpuc adjoint", "Warp launch + backward", "gpuc/Warp", "<= 30 ms"], cached_rows,
                    title=f"\nthe same in the next fresh process, from the folders the first one filled (ms, median "
                          f"of {compile_reps}; gpuc's adjoint from its disk cache, Warp's kernel from its cache)"))

    n = sizes[-1]
    funcs = run_funcs(n, reps, threads, jf)
    data["funcs"] = funcs
    rows = []
    for name, case in funcs["cases"].items():
        s, first, c = case["samples"], case["first"], case["check"]
        jt = med(s, "jax")
        rows.append([name, fmt_ms(s, "gpuc primal 1T"), fmt_ms(s, "gpuc grad 1T"),
                     fmt_ms(s, f"gpuc grad {threads[-1]}T"), fmt_ms(s, "jax"),
                     fmt_ratio(med(s, "gpuc grad 1T"), jt), fmt_ratio(med(s, f"gpuc grad {threads[-1]}T"), jt),
                     fmt_diff(c, "gpuc vs jax"), fmt_diff(c, "gpuc vs derivative"),
                     fmt_diff(c, "jax vs derivative"),
                     fmt_s(first.get("gpuc", float("nan"))), fmt_s(first.get("jax", float("nan")))])
    print(table(["function", "gpuc primal 1T", "gpuc grad 1T", f"gpuc grad {threads[-1]}T", "JAX",
                 "1T/JAX", f"{threads[-1]}T/JAX", "gpuc vs JAX", "gpuc vs derivative", "JAX vs derivative",
                 "gpuc 1st", "JAX 1st"], rows,
                title=f"\ngpuc.grad in a kernel vs jax.jit(jax.vmap(jax.grad(f))), {n:,} float64 (ms, median of "
                      f"{reps}; JAX on XLA's own threads; 1st = first launch/call, compile included; "
                      "vs = max |a - b| / max |b|)"))
    for name, case in funcs["cases"].items():
        if "gpuc error" in case["check"]:
            print(f"  gpuc failed on {name}: {case['check']['gpuc error']}")
    if funcs["note"]:
        print(f"  JAX's loop uses a trip count fixed at trace time ({LOOP_TRIPS}, static_argnums): "
              f"{funcs['note']}")
    if args.json:
        write_json(args.json, data)


if __name__ == "__main__":
    main()
