"""Deeply nested programs: recursive compile work runs on a thread with a large stack.

A source's irgen may recurse deeply: the Python frontend's typing and lowering walk the AST
recursively, and typing a call types the callee inside it, so a chain of nested @gpuc.func calls or
a long expression costs Python frames in proportion (about 17 per nested call and 5 per binary
operator). Python's default limit of 1,000 frames would stop at ~60 nested calls or ~200 terms, so
the frontend runs on its own thread with a large stack, and the interpreter's recursion limit is
raised to FRAMES while any such run is in progress.

Python (3.11 included) keeps one recursion limit per interpreter: while a compile runs, other
threads see the raised limit too. It is restored as soon as the last concurrent compile ends,
unless someone changed it in between (lowering it from another thread while a compile runs deep
makes Python abort: "Cannot recover from stack overflow"). The caller waits for the frontend
thread even when interrupted, for the same reason. Beyond the limit, the visitors report a
located CompilationError (see gpuc/frontend/core/errors.py, LocatingVisitor) instead of a RecursionError.
"""

from __future__ import annotations

import os
import queue
import sys
import threading

FRAMES = 30_000             # recursion limit while the frontend runs (~1,700 nested calls, ~6,000 terms)
STACK_BYTES = 256 << 20     # the frontend thread's stack (reserved address space; pages are used on demand)

_lock = threading.Lock()    # guards the counters below and threading.stack_size's process-wide setting
_running = 0                # frontend runs in progress
_restore: int | None = None  # the recursion limit to restore when the last one ends
_local = threading.local()


def run_deep(fn, *args):
    """`fn(*args)` on a frontend thread with a large stack and a raised recursion limit; its result
    or exception comes back to the caller. Runs inline when already on such a thread: the driver
    runs a compile's irgen and plugin stages with it, so that the frontend, and plugins compiling
    further functions into the module (`CompileState.compile_into`, e.g. for gpuc.deferred), do not
    hand their work to the thread and wait for it again, once per function."""
    if getattr(_local, "deep", False):
        return fn(*args)
    outcome: dict = {}
    done = threading.Event()
    _enter()
    try:
        _worker().jobs.put((fn, args, outcome, done))
        _wait(done)
    finally:
        _leave()
    if "error" in outcome:
        error = outcome.pop("error")
        raise error
    return outcome["value"]


#: Frontend threads kept waiting for work: starting a thread costs 0.3-2 ms, as much as typing and
#: lowering a small function (compile_into runs the frontend once per function it compiles).
MAX_IDLE = 4
_idle: list["_Worker"] = []  # guarded by _lock


class _Worker:
    """A frontend thread with a large stack that runs one job after another."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        with _lock:
            previous = threading.stack_size(STACK_BYTES)
            try:
                threading.Thread(target=self._loop, name="gpuc-frontend", daemon=True).start()
            finally:
                threading.stack_size(previous)

    def _loop(self) -> None:
        _local.deep = True
        while True:
            fn, args, outcome, done = self.jobs.get()
            try:
                outcome["value"] = fn(*args)
            except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
                outcome["error"] = exc
            finally:
                del fn, args
                with _lock:  # back among the idle ones before the caller goes on
                    keep = len(_idle) < MAX_IDLE
                    if keep:
                        _idle.append(self)
                done.set()
                del outcome, done  # the caller has the result; an idle thread keeps nothing alive
            if not keep:
                return


def _worker() -> _Worker:
    with _lock:
        if _idle:
            return _idle.pop()
    return _Worker()


def _wait(done: threading.Event) -> None:
    """Wait for the frontend thread even through Ctrl-C, then raise the interruption: the thread
    builds IR in the caller's LLVM context, which the caller frees as it unwinds, and it is deep
    in recursion that the restored recursion limit would turn into a fatal error. (Not
    Thread.join: interrupted, Python 3.11's join marks a running thread as finished.)"""
    interrupted = None
    while not done.is_set():
        try:
            done.wait()
        except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt and other asynchronous exceptions
            interrupted = interrupted or exc
    if interrupted is not None:
        raise interrupted


def _enter() -> None:
    global _running, _restore
    with _lock:
        if _running == 0:
            current = sys.getrecursionlimit()
            _restore = current if current < FRAMES else None
            if _restore is not None:
                sys.setrecursionlimit(FRAMES)
        _running += 1


def _after_fork_in_child() -> None:
    """A forked child has only the thread that forked: the idle frontend threads, and the runs of
    other threads, stayed behind in the parent. Handing a job to one of them would wait forever."""
    global _lock, _running, _restore
    _lock = threading.Lock()  # another thread may have held it at the fork
    _idle.clear()
    if _running and not getattr(_local, "deep", False):
        if _restore is not None and sys.getrecursionlimit() == FRAMES:
            sys.setrecursionlimit(_restore)
        _running, _restore = 0, None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _leave() -> None:
    global _running
    with _lock:
        _running -= 1
        if _running == 0 and _restore is not None and sys.getrecursionlimit() == FRAMES:
            sys.setrecursionlimit(_restore)
