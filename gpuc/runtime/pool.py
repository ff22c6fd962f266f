"""The CPU launcher's worker threads: one shared pool that grows on demand and is never shut down.

A launch runs on the calling thread and `helpers` pool threads, each claiming chunks of it in turn.
`run_chunks` cuts the range as it goes (guided self-scheduling): a claim takes the share of what is
left that would be the thread's if every thread took as much, so the first chunks are large and the
last ones small, and a thread's chunks never last much longer than CHUNK_SECONDS once it has timed
one. A short launch so costs each thread a few calls, as a static schedule would, yet nothing waits
for a particular thread: launches from many threads share the pool safely whatever their `threads=`
(a launch whose helpers are still queued behind another launch's work is simply finished by the
threads it has). Pool threads leave the last crumbs to the calling thread, so that it seldom has to
sleep until a pool thread's chunk ends (waking it costs tens of microseconds). `run_ranges` never
splits its ranges: each is one chunk, taken in order.

Pool threads block on their queue between launches (no thread spins while the process is idle): a
launch wakes its helpers as it starts, before the calling thread claims its first chunk, and a
helper starts its first chunk about 10 us later when the cores were busy just before, 50-80 us when
they had idled (the system's wake-up, then the GIL, which the calling thread gives up as its first
chunk starts). Every chunk a thread runs also takes the GIL once, after its call returns: when the
other thread holds it then, the wait costs a wake-up too, so a thread's chunks are few.

Either way a launch stops at a chunk boundary: when the caller is interrupted (Ctrl-C) or a chunk
raises, no new chunk starts, the running ones finish, and only then does the exception reach the
caller.
"""

from __future__ import annotations

import os
import queue
import threading
from time import perf_counter

#: Once a thread has timed a chunk, its chunks last about this long at most: long enough that a
#: call and a claim (microseconds) cost nothing, short enough that Ctrl-C and the last chunks are prompt.
CHUNK_SECONDS = 0.002
#: Before any thread has timed a chunk, a chunk is this part of a thread's share of the launch.
FIRST_CHUNK_PARTS = 8
#: Pool threads claim no chunk that would run shorter than this: such crumbs are the calling thread's.
CRUMB_SECONDS = 20e-6


class _Pool:
    """Daemon threads running queued calls; `ensure(n)` grows it to at least n threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._size = 0

    def ensure(self, workers: int) -> None:
        if self._size >= workers:
            return
        with self._lock:
            while self._size < workers:
                thread = threading.Thread(target=self._work, name=f"gpuc-cpu-{self._size}", daemon=True)
                thread.start()
                self._size += 1

    def submit(self, task, *args) -> None:
        self._queue.put((task, args))

    def _work(self) -> None:
        while True:
            task, args = self._queue.get()
            task(*args)


_POOL = _Pool()


def _forget_threads_after_fork() -> None:
    global _POOL
    _POOL = _Pool()  # a forked child has none of its parent's threads


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_threads_after_fork)


class ChunkedLaunch:
    """One launch: `fn(argv, begin, end, sizes)` over chunks of `[begin, end)` that `threads` threads
    claim (guided, see the module docstring), or over the given `ranges`, each whole."""

    __slots__ = ("_fn", "_argv", "_sizes", "_threads", "_begin", "_end", "_ranges", "_first", "_rate", "_lock",
                 "_running", "_stopped", "_error", "_idle")

    def __init__(self, fn, argv: bytes, sizes: bytes, threads: int, begin: int = 0, end: int = 0,
                 ranges: list[tuple[int, int]] | None = None) -> None:
        self._fn, self._argv, self._sizes, self._threads = fn, argv, sizes, threads
        self._begin, self._end, self._ranges = begin, end, ranges
        self._first = max(1, (end - begin) // (threads * FIRST_CHUNK_PARTS))
        self._rate = 0.0  # items per second in the chunk that ended last, on any thread
        # A plain lock, not a Condition: this object is made on every launch, before any thread
        # starts working, and a Condition costs ten times as much to make (see _stop_and_wait).
        self._lock = threading.Lock()
        self._running = 0  # chunks pool threads claimed and have not finished
        self._stopped = False  # no further chunk may start
        self._error: BaseException | None = None  # the first exception a pool thread's chunk raised
        self._idle: threading.Lock | None = None  # held while the calling thread waits for running chunks

    def run(self) -> None:
        """Run every chunk on the calling thread and `threads - 1` pool threads; return when all are done.

        An exception (KeyboardInterrupt included) stops the launch at the next chunk boundary and
        is raised once no chunk is running any more.
        """
        if self._threads > 1:
            pool = _POOL
            if pool._size < self._threads - 1:
                pool.ensure(self._threads - 1)
            for _ in range(self._threads - 1):
                pool.submit(self._help)
        try:
            self._claim_and_run(counted=False)
        except BaseException:
            self._stop_and_wait()
            raise
        self._stop_and_wait()
        if self._error is not None:
            raise self._error

    def _claim(self, want: int, crumb: int, counted: bool) -> tuple[int, int] | None:
        """The next chunk, of at most `want` items and, for a pool thread, at least `crumb` (the items
        its thread runs in CRUMB_SECONDS, 0 before it has timed a chunk); or None."""
        with self._lock:
            if self._stopped:
                return None
            if self._ranges is not None:
                if self._begin >= len(self._ranges):
                    return None
                self._begin += 1
                chunk = self._ranges[self._begin - 1]
            else:
                left = self._end - self._begin
                take = min(want, max(crumb, -(-left // self._threads)), left)
                if counted:  # a pool thread leaves at least a crumb to the calling thread
                    take = min(take, left - crumb)
                    if take < max(1, crumb):
                        return None
                elif left - take < crumb:  # no crumb is left behind for a chunk of its own
                    take = left
                if take <= 0:
                    return None
                chunk = (self._begin, self._begin + take)
                self._begin += take
            self._running += counted
            return chunk

    def _claim_and_run(self, counted: bool) -> None:
        # Only pool threads' chunks are counted as running: the launching thread, the one that
        # gets KeyboardInterrupt, is done with its chunk whenever it runs Python code again.
        rate = 0.0  # items per second this thread ran in its last chunk (0: none yet)
        while True:
            timed = rate or self._rate  # another thread's timing stands in for a first chunk
            want = max(1, int(timed * CHUNK_SECONDS)) if timed else self._first
            if (chunk := self._claim(want, int(timed * CRUMB_SECONDS), counted)) is None:
                return
            start = perf_counter()
            try:
                self._fn(self._argv, *chunk, self._sizes)
            finally:
                if counted:
                    with self._lock:
                        self._running -= 1
                        if not self._running and self._idle is not None:
                            self._idle.release()  # the calling thread waits for this chunk: the last
                            self._idle = None
            self._rate = rate = (chunk[1] - chunk[0]) / max(perf_counter() - start, 1e-9)

    def _help(self) -> None:
        try:
            self._claim_and_run(counted=True)
        except BaseException as exc:  # noqa: BLE001 - handed to the launching thread
            with self._lock:
                self._error = self._error or exc
                self._stopped = True

    def _stop_and_wait(self) -> None:
        """Let no new chunk start; wait for the running ones (a second Ctrl-C does not cut this short)."""
        interrupted = None
        with self._lock:
            self._stopped = True
            if not self._running:
                return
            # The pool thread whose chunk ends last releases it (once: no chunk starts any more).
            idle = self._idle = threading.Lock()
            idle.acquire()
        while True:
            try:
                with self._lock:
                    if not self._running:
                        break
                idle.acquire()
            except KeyboardInterrupt as exc:
                interrupted = exc
        if interrupted is not None:
            raise interrupted


def run_chunks(fn, argv: bytes, bounds: list[int], sizes: bytes, helpers: int) -> None:
    """Run `[bounds[0], bounds[-1])`, cut into chunks as it goes (see ChunkedLaunch), on the calling thread
    and `helpers` pool threads; any two items may run at once."""
    ChunkedLaunch(fn, argv, sizes, helpers + 1, bounds[0], bounds[-1]).run()


def run_ranges(fn, argv: bytes, ranges: list[tuple[int, int]], sizes: bytes, helpers: int) -> None:
    """Run each of `ranges` as one chunk (see ChunkedLaunch) on the calling thread and `helpers` pool threads."""
    ChunkedLaunch(fn, argv, sizes, helpers + 1, ranges=ranges).run()
