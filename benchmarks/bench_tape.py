"""What `gpuc.Tape` costs over a simulation, against Warp's `wp.Tape` on its CPU device.

A heat step along a rod (examples/heat_tape.py's kernels, on float32 here, as Warp's usually are): each
step one launch writing its own row of the history `u`, then a squared miss against a target summed into a
one-element loss. Both tapes record the same launches and run the same backward (d loss / d kappa, a
parameter every item of every step reads, and d loss / d u[0]). Reported per tape: the recorded forward
(the launches inside the `with` block, a new tape each round) and `backward` of one recorded tape, its
gradients zeroed before each round (`tape.zero()`, not timed), medians, the two libraries alternated; the
gradients against each other and against a central difference of gpuc's forward in float64 for kappa.

    python benchmarks/bench_tape.py                      # 10^6 cells, 20 steps, one thread (~1 min)
    python benchmarks/bench_tape.py --cells 100000 --steps 100 --threads 2

Warp is optional (the `anchors` extra); without it only gpuc's columns are printed.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import _common  # noqa: F401 - puts the repository on sys.path
from _common import ROOT, banner, machine_facts, median, ms, table, timed

import gpuc

sys.path.insert(0, str(ROOT / "examples"))
from heat_tape import heat_step, squared_miss  # noqa: E402 - the example's kernels, on float32 arrays here

DT = np.float32(0.1)


def gpuc_run(u0, target, kappa, steps: int, threads: int, dtype=np.float32):
    """(a function recording the launches on a new gpuc tape, which it returns; the loss; the history)."""
    u = np.zeros((steps + 1, u0.size), dtype)
    u[0] = u0
    loss = np.zeros(1, dtype)

    def record():
        u[1:] = 0
        loss[:] = 0
        tape = gpuc.Tape()
        with tape:
            for t in range(steps):
                heat_step.launch(u0.size, u[t], u[t + 1], kappa, dtype(DT), threads=threads)
            squared_miss.launch(u0.size, u[steps], target, loss, threads=threads)
        return tape

    return record, loss, u


def warp_run(u0, target, kappa, steps: int):
    """(record, backward, kappa, u[0], loss) of the same with Warp, or None when Warp is not installed."""
    try:
        import warp as wp
    except ImportError:
        return None
    wp.config.quiet = True
    wp.init()

    @wp.kernel
    def w_heat_step(u: wp.array(dtype=wp.float32), u_next: wp.array(dtype=wp.float32),
                    kappa: wp.array(dtype=wp.float32), dt: wp.float32):
        i = wp.tid()
        n = u.shape[0]
        left = u[wp.max(i - 1, 0)]
        right = u[wp.min(i + 1, n - 1)]
        u_next[i] = u[i] + dt * kappa[0] * (left - 2.0 * u[i] + right)

    @wp.kernel
    def w_squared_miss(u: wp.array(dtype=wp.float32), target: wp.array(dtype=wp.float32),
                       loss: wp.array(dtype=wp.float32)):
        i = wp.tid()
        miss = u[i] - target[i]
        wp.atomic_add(loss, 0, miss * miss)

    n = u0.size
    us = [wp.array(u0, dtype=wp.float32, device="cpu", requires_grad=True)]
    us += [wp.zeros(n, dtype=wp.float32, device="cpu", requires_grad=True) for _ in range(steps)]
    wk = wp.array(kappa, dtype=wp.float32, device="cpu", requires_grad=True)
    wt = wp.array(target, dtype=wp.float32, device="cpu")
    wl = wp.zeros(1, dtype=wp.float32, device="cpu", requires_grad=True)

    def record():
        wl.zero_()
        tape = wp.Tape()
        with tape:
            for t in range(steps):
                wp.launch(w_heat_step, dim=n, inputs=[us[t], us[t + 1], wk, DT], device="cpu")
            wp.launch(w_squared_miss, dim=n, inputs=[us[steps], wt, wl], device="cpu")
        return tape

    def backward(tape):
        tape.backward(wl)

    return record, backward, wk, us[0], wl


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, default=1_000_000)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1, help="gpuc's launches (Warp's CPU launches run on one)")
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    print(banner(machine_facts()))
    rng = np.random.default_rng(0)
    u0 = rng.random(args.cells).astype(np.float32)
    target = rng.random(args.cells).astype(np.float32)
    kappa = np.array([0.3], np.float32)

    record, loss, u = gpuc_run(u0, target, kappa, args.steps, args.threads)
    warp = warp_run(u0, target, kappa, args.steps)
    samples = {"gpuc record": [], "gpuc backward": [], "warp record": [], "warp backward": []}
    # the recorded forward: a new tape each round
    for _ in range(args.reps + 1):
        seconds, tape = timed(record)
        samples["gpuc record"].append(seconds)
        if warp is not None:
            seconds, w_tape = timed(warp[0])
            samples["warp record"].append(seconds)
    # backward: the last tapes again, their gradients zeroed (untimed) before each
    tape.backward(loss)  # compiles the adjoints
    if warp is not None:
        w_record, w_backward, wk, wu0, wl = warp
        w_backward(w_tape)
    for _ in range(args.reps):
        tape.zero()
        seconds, _ = timed(tape.backward, loss)
        samples["gpuc backward"].append(seconds)
        if warp is not None:
            w_tape.zero()
            seconds, _ = timed(w_backward, w_tape)
            samples["warp backward"].append(seconds)
    samples = {key: values[-args.reps:] for key, values in samples.items()}  # (the first records compile)
    dkappa, du0 = float(tape.gradients[kappa][0]), tape.gradients[u[0]].copy()

    h = 1e-4  # in float64: the same kernels compiled for float64 arrays
    ends = []
    for k in (kappa[0] - h, kappa[0] + h):
        end_record, end_loss, _ = gpuc_run(u0.astype(np.float64), target.astype(np.float64),
                                           np.array([k], np.float64), args.steps, args.threads, np.float64)
        end_record()
        ends.append(float(end_loss[0]))
    central = (ends[1] - ends[0]) / (2 * h)

    gpuc_bwd = median(samples["gpuc backward"])
    rows = [["gpuc", str(args.threads), ms(median(samples["gpuc record"])), ms(gpuc_bwd), f"{dkappa:.6e}",
             f"{abs(dkappa - central) / abs(central):.1e}", "-", "-"]]
    if warp is not None:
        wdk, wdu0 = float(wk.grad.numpy()[0]), wu0.grad.numpy()
        rows[0][6] = f"{gpuc_bwd / median(samples['warp backward']):.2f}x"
        rows.append(["warp", "1", ms(median(samples["warp record"])), ms(median(samples["warp backward"])),
                     f"{wdk:.6e}", f"{abs(wdk - central) / abs(central):.1e}", "-",
                     f"{abs(dkappa - wdk) / abs(wdk):.1e}, {np.max(np.abs(du0 - wdu0)) / np.max(np.abs(wdu0)):.1e}"])
    print(table(["tape", "threads", "record ms", "backward ms", "d loss / d kappa", "vs central", "bwd / Warp's",
                 "vs gpuc (dkappa, du0)"], rows,
                title=f"\n{args.cells:,} cells, {args.steps} steps, float32 (median of {args.reps}; gpuc and Warp "
                      "alternated; `vs central`: against a central difference of gpuc's forward in float64, "
                      "h = 1e-4; Warp's CPU launches run on one thread)"))


if __name__ == "__main__":
    main()
