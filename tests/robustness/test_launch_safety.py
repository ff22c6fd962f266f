"""Hostile launches: read-only arrays a kernel writes, index spaces whose size overflows, thread
counts that resize the pool from many threads, Ctrl-C in the middle of a launch, many dropped
kernels. Each once wrote where it must not, ran nothing, hung, crashed or leaked; each now runs in
its own interpreter, which must survive with the documented error and launch the next kernel, on
the CPU and through OpenCL."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.devices("cpu", "opencl")

KERNELS = """
import numpy as np, gpuc

@gpuc.func
def put(a, i, v):
    a[i] = v

@gpuc.kernel
def store(out, x):
    i = gpuc.index()
    out[i] = x[i] + 1.0

@gpuc.kernel
def store_in_func(x, out):
    i = gpuc.index()
    put(out, i, x[i])

@gpuc.kernel
def atomic(total, x):
    gpuc.atomic_add(total, 0, x[gpuc.index()])

def refused(kernel, *args):
    try:
        kernel[4](*args)
    except ValueError as exc:
        print("REFUSED:", exc)
    else:
        print("NOT-REFUSED")
"""

# (id, how a read-only float64 array of 4 is made, the launch that writes it, its argument's name)
READ_ONLY = [
    ("frombuffer-bytes", "ro = np.frombuffer(bytes(32), dtype=np.float64)", "refused(store, ro, np.ones(4))", "out"),
    ("broadcast-to", "ro = np.broadcast_to(np.float64(2.0), (4,))", "refused(store, ro, np.ones(4))", "out"),
    ("writeable-false", "ro = np.zeros(4); ro.flags.writeable = False", "refused(store_in_func, np.ones(4), ro)",
     "out"),
    ("atomic", "ro = np.zeros(1); ro.flags.writeable = False",
     "refused(atomic, ro, np.ones(4))", "total"),
    ("readonly-mmap", "import mmap; f = open('data.bin', 'w+b'); f.write(bytes(32)); f.flush(); "
     "ro = np.frombuffer(mmap.mmap(f.fileno(), 32, access=mmap.ACCESS_READ), dtype=np.float64)",
     "refused(store, ro, np.ones(4))", "out"),
]


@pytest.mark.parametrize("make, launch, name", [c[1:] for c in READ_ONLY], ids=[c[0] for c in READ_ONLY])
def test_a_read_only_array_the_kernel_writes_is_refused(survive, make, launch, name):
    # Writes went through silently: an immutable bytes object changed; a read-only mmap segfaulted.
    code = KERNELS + make + "\nbefore = ro.copy()\n" + launch + "\nassert (ro == before).all(), ro\n"
    done = survive(code)
    assert "NOT-REFUSED" not in done.stdout, done.stdout
    assert f"argument {'1' if 'store_in_func' in launch else '0'} ({name})" in done.stdout, done.stdout
    assert "is read-only" in done.stdout and "the kernel may write to it" in done.stdout, done.stdout


def test_read_only_arrays_can_be_read(survive):
    done = survive(KERNELS + """
x = np.frombuffer(np.arange(4.0).tobytes(), dtype=np.float64)
out = np.zeros(4)
store[4](out, np.broadcast_to(np.float64(2.0), (4,)))
assert out.tolist() == [3.0] * 4, out
store[4](out, x)
assert out.tolist() == [1.0, 2.0, 3.0, 4.0], out
total = np.zeros(1)
atomic[4](total, x)
assert total[0] == 6.0, total
print("READS-OK")
""")
    assert "READS-OK" in done.stdout


@pytest.mark.parametrize("n", ["(2**40, 2**40)", "(2**31,) * 3", "(2**32, 2**32)", "(2**62,)", "(2**21, 2**21, 2**20)"])
def test_an_index_space_too_large_in_all_is_refused(survive, n):
    # The product wrapped: (2**40, 2**40) ran nothing and (2**32, 2**32) hung.
    done = survive(KERNELS + f"""
out = np.zeros(4)
try:
    store[{n}](out, np.ones(4))
except ValueError as exc:
    print("REFUSED:", exc)
assert (out == 0).all()
""", timeout=60)
    assert "REFUSED:" in done.stdout, done.stdout
    assert "fewer than 2**62" in done.stdout or "below 2**62" in done.stdout, done.stdout


@pytest.mark.not_on("opencl", "checks the CPU runtime's worker pool (threads=)")
def test_thread_counts_varying_from_eight_threads(survive):
    # Asking for more threads replaced the pool and shut the old one down under other launches:
    # "cannot schedule new futures after shutdown".
    done = survive(KERNELS + """
import threading
x = np.arange(50_000.0)
failures = []
def work(t):
    out = np.zeros_like(x)
    for k in range(40):
        threads = (t * 7 + k) % 16 + 1
        try:
            store.launch(len(x), out, x, threads=threads)
        except Exception as exc:
            failures.append(repr(exc))
            continue
        if not (out == x + 1.0).all():
            failures.append(f"wrong result with threads={threads}")
        out[:] = 0
workers = [threading.Thread(target=work, args=(t,)) for t in range(8)]
for w in workers: w.start()
for w in workers: w.join()
assert not failures, failures[:3]
print("THREADS-OK")
""")
    assert "THREADS-OK" in done.stdout


@pytest.mark.not_on("opencl", "checks that Ctrl-C stops the CPU runtime's worker threads")
def test_ctrl_c_stops_the_workers_before_the_exception_arrives(survive):
    # KeyboardInterrupt reached the caller while pool threads went on writing its arrays.
    done = survive("""
import os, signal, threading, time
import numpy as np, gpuc

@gpuc.kernel
def slow(out, n):
    i = gpuc.index()
    acc = 0.0
    for j in range(n):
        acc += (i + j) % 7
    out[i] = acc + 1.0

out = np.zeros(4 * 8 * 4096)  # 4 threads, 8 chunks each
slow[16](np.zeros(16), 10)  # compile first

def interrupt_once_a_chunk_is_done():
    while not out.any():
        time.sleep(0.01)
    os.kill(os.getpid(), signal.SIGINT)

threading.Thread(target=interrupt_once_a_chunk_is_done, daemon=True).start()
started = time.perf_counter()
try:
    slow.launch(len(out), out, 30_000, threads=4)
except KeyboardInterrupt:
    elapsed = time.perf_counter() - started
    snapshot = out.copy()
    time.sleep(1.0)
    assert (out == snapshot).all(), "workers wrote after KeyboardInterrupt reached the caller"
    done = int((snapshot != 0).sum())
    print(f"INTERRUPTED after {elapsed:.2f} s with {done} of {len(out)} items written")
    assert done < len(out), "the launch was not stopped"
else:
    print("NOT-INTERRUPTED")
""", timeout=120)
    assert "INTERRUPTED after" in done.stdout, done.stdout + done.stderr


def test_dropped_kernels_do_not_grow_memory(survive):
    # Each launched-then-dropped kernel kept its JIT until a full collection: +14-23 MiB per 1,000.
    done = survive("""
import numpy as np, gpuc

def rss():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS"))

def one():
    @gpuc.kernel
    def k(out):
        out[gpuc.index()] = 1.0
    out = np.zeros(4)
    k[4](out)
    assert out.tolist() == [1.0] * 4

for _ in range(50):
    one()
base = rss()
for _ in range(200):
    one()
growth = rss() - base
print(f"GROWTH {growth / 2**20:.2f} MiB for 200 kernels")
assert growth < 2**20, growth  # it was 4.3 MiB
""", timeout=300)
    assert "GROWTH" in done.stdout
