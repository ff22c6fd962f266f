"""The CPU launcher's worker threads: one shared pool that grows on demand and is never shut down.

A launch is split into chunks that the calling thread and `helpers` pool threads claim one at a
time from a shared counter. Nothing is handed to a particular thread, so launches from many
threads share the pool safely whatever their `threads=` (a launch whose helpers are still queued
behind another launch's work simply runs more chunks on the threads it has), and a launch can
stop at a chunk boundary: when the caller is interrupted (Ctrl-C) or a chunk raises, no new chunk
starts, the running ones finish, and only then does the exception reach the caller.
"""

from __future__ import annotations

import os
import queue
import threading


class _Pool:
    """Daemon threads running queued callables; `ensure(n)` grows it to at least n threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._size = 0

    def ensure(self, workers: int) -> None:
        with self._lock:
            while self._size < workers:
                thread = threading.Thread(target=self._work, name=f"gpuc-cpu-{self._size}", daemon=True)
                thread.start()
                self._size += 1

    def submit(self, task) -> None:
        self._queue.put(task)

    def _work(self) -> None:
        while True:
            self._queue.get()()


_POOL = _Pool()


def _forget_threads_after_fork() -> None:
    global _POOL
    _POOL = _Pool()  # a forked child has none of its parent's threads


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_threads_after_fork)


class ChunkedLaunch:
    """Chunks `[begin, end)` of one launch (`ranges`), each run as `fn(argv, begin, end, sizes)`."""

    def __init__(self, fn, argv: bytes, ranges: list[tuple[int, int]], sizes: bytes) -> None:
        self._fn, self._argv, self._ranges, self._sizes = fn, argv, ranges, sizes
        self._cond = threading.Condition(threading.Lock())
        self._next = 0  # the next chunk to claim
        self._running = 0  # chunks pool threads claimed and have not finished
        self._stopped = False  # no further chunk may start
        self._error: BaseException | None = None  # the first exception a pool thread's chunk raised

    def run(self, helpers: int) -> None:
        """Run every chunk on the calling thread and `helpers` pool threads; return when all are done.

        An exception (KeyboardInterrupt included) stops the launch at the next chunk boundary and
        is raised once no chunk is running any more.
        """
        if helpers:
            _POOL.ensure(helpers)
            for _ in range(helpers):
                _POOL.submit(self._help)
        try:
            self._claim_and_run(counted=False)
        except BaseException:
            self._stop_and_wait()
            raise
        self._stop_and_wait()
        if self._error is not None:
            raise self._error

    def _claim(self, counted: bool) -> int | None:
        with self._cond:
            if self._stopped or self._next >= len(self._ranges):
                return None
            self._running += counted
            self._next += 1
            return self._next - 1

    def _claim_and_run(self, counted: bool) -> None:
        # Only pool threads' chunks are counted as running: the launching thread, the one that
        # gets KeyboardInterrupt, is done with its chunk whenever it runs Python code again.
        while (k := self._claim(counted)) is not None:
            try:
                self._fn(self._argv, *self._ranges[k], self._sizes)
            finally:
                if counted:
                    with self._cond:
                        self._running -= 1
                        self._cond.notify_all()

    def _help(self) -> None:
        try:
            self._claim_and_run(counted=True)
        except BaseException as exc:  # noqa: BLE001 - handed to the launching thread
            with self._cond:
                self._error = self._error or exc
                self._stopped = True

    def _stop_and_wait(self) -> None:
        """Let no new chunk start; wait for the running ones (a second Ctrl-C does not cut this short)."""
        interrupted = None
        with self._cond:
            self._stopped = True
        while True:
            try:
                with self._cond:
                    while self._running:
                        self._cond.wait()
                break
            except KeyboardInterrupt as exc:
                interrupted = exc
        if interrupted is not None:
            raise interrupted


def run_chunks(fn, argv: bytes, bounds: list[int], sizes: bytes, helpers: int) -> None:
    """Run chunks `[bounds[k], bounds[k+1])` (see ChunkedLaunch) on the calling thread and `helpers` pool threads."""
    run_ranges(fn, argv, list(zip(bounds, bounds[1:])), sizes, helpers)


def run_ranges(fn, argv: bytes, ranges: list[tuple[int, int]], sizes: bytes, helpers: int) -> None:
    """Run the chunks `ranges` (see ChunkedLaunch) on the calling thread and `helpers` pool threads."""
    ChunkedLaunch(fn, argv, ranges, sizes).run(helpers)
