"""A kernel that runs long on one thread (or two: `items2`), for the Ctrl-C test (run as a script by it)."""

import os
import signal
import sys
import threading
import time

import numpy as np

import gpuc


@gpuc.kernel
def slow(out, rounds):
    i = gpuc.index()
    x = 0.0
    k = 0
    while k < rounds:
        x = x * 0.999999 + 1.0
        k += 1
    out[i] = x


@gpuc.kernel
def slow_blocks(out, rounds):
    i = gpuc.index(0)
    x = 0.0
    k = 0
    while k < rounds:
        x = x * 0.999999 + 1.0
        k += 1
    gpuc.barrier()  # a block kernel: the CPU runs it block by block
    out[i] = x + gpuc.thread_index(0) * 0.0


if __name__ == "__main__":
    blocks = sys.argv[1:] == ["blocks"]
    threads = 2 if sys.argv[1:] == ["items2"] else 1  # two threads: the pool's compiled scheduler
    out = np.zeros(1 << 20)
    slow[1024](out[:1024], 10, threads=1)  # compiled and warm
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    start = time.perf_counter()
    try:
        if blocks:
            slow_blocks.launch(out.size, out, 200_000, threads=1, block=256)  # about a minute
        else:
            slow.launch(out.size, out, 200_000, threads=threads)
        print("finished", time.perf_counter() - start)
    except KeyboardInterrupt:
        print(f"interrupted after {time.perf_counter() - start:.2f} s")
    out[:] = 0
    slow[4096](out, 3, threads=1)  # the next launch works
    print("next launch", bool(np.all(out[:4096] == 1.0 * 0.999999 * 0.999999 + 1.0 * 0.999999 + 1.0)))
