"""Kernels whose loops never end, for the Ctrl-C tests of the debug mode (run as a script by
test_interrupt_loops.py: `python runaway_kernels.py CASE`)."""

import os
import signal
import sys
import threading
import time

import numpy as np

import gpuc


@gpuc.kernel(boundscheck=True)
def runaway(out, n):
    i = gpuc.index()
    k = 0
    while k < n:  # k never grows
        out[i] += 1.0
    out[i] = 2.0


@gpuc.func(boundscheck=True)
def spin(x, n):
    k = 0
    while k < n:
        x = x * 0.5 + 1.0
    return x + 2.0


@gpuc.kernel(boundscheck=True)
def runaway_in_func(out, n):
    i = gpuc.index()
    out[i] = spin(0.0, n)


@gpuc.kernel(boundscheck=True)
def runaway_blocks(out, n):
    i = gpuc.index(0)
    k = 0
    while k < n:
        out[i] += 1.0
    gpuc.barrier()
    out[i] = 2.0 + gpuc.thread_index(0) * 0.0


@gpuc.kernel(boundscheck=True)
def runaway_for(out, n):
    i = gpuc.index()
    for k in range(n):  # a range with no end in sight
        out[i] += 1.0
    out[i] = 2.0


KERNELS = {"items": runaway, "func": runaway_in_func, "blocks": runaway_blocks, "for": runaway_for}


def launch(case, out, n, threads):
    kernel = KERNELS[case]
    if case == "blocks":
        kernel.launch(out.size, out, n, threads=threads, block=32)
    else:
        kernel[out.size](out, n, threads=threads)


def main(case: str, threads: int, where: str) -> None:
    endless = 1 << 62 if case == "for" else 1
    out = np.zeros(64)
    launch(case, out, 0, threads)  # compiled and warm, gpuc's handler in front of Python's
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    start = time.perf_counter()
    outcome = []

    done = threading.Event()

    def run():
        try:
            launch(case, out, endless, threads)
            outcome.append("finished")
        except KeyboardInterrupt:
            outcome.append(f"interrupted after {time.perf_counter() - start:.2f} s")
        finally:
            done.set()

    if where == "thread":  # launched from another thread: the main thread gets its own KeyboardInterrupt
        threading.Thread(target=run).start()
        while not done.is_set():
            try:
                done.wait(0.05)
            except KeyboardInterrupt:
                pass
    elif where == "custom":  # a handler of the program's own, installed after gpuc's: still called, still stops
        signal.signal(signal.SIGINT, lambda *_: outcome.append("handler ran"))
        run()
    else:
        run()
    print(", ".join(reversed(outcome)))
    out[:] = 0
    launch(case, out, 0, threads)  # the next launch works: nothing left set
    print("next launch", bool(np.all(out == 2.0)))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "main")
