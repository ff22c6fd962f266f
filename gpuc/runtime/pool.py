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
splits its ranges: each is one chunk, taken in order; `run_phases` runs several lists of such ranges, each
list only once every range of the lists before it has ended (a stencil adjoint's two phases), as one launch,
each thread owning the same share of every list (what it touches stays in its cache) and taking another's
ranges only when none of its own may start.

Pool threads block on their queue between launches (no thread spins while the process is idle): a
launch wakes its helpers as it starts, before the calling thread claims its first chunk, and a
helper starts its first chunk about 10 us later when the cores were busy just before, 50-80 us when
they had idled (the system's wake-up, then the GIL, which the calling thread gives up as its first
chunk starts). A thread that returns to Python after a chunk takes the GIL again, and when another
thread holds it then, the wait costs a wake-up too. So where the chunks are calls of a compiled range
wrapper (a kernel's launch entry: not a Python function wrapping one), a few lines of compiled code
(_NATIVE_IR) claim and run a pool thread's chunks, with the same rules, and the pool thread takes the
GIL once per launch, not once per chunk; the calling thread still returns to Python after each of its
chunks, where Ctrl-C reaches it.

Either way a launch stops at a chunk boundary: when the caller is interrupted (Ctrl-C) or a chunk
raises, no new chunk starts, the running ones finish, and only then does the exception reach the
caller.
"""

from __future__ import annotations

import ctypes
import os
import queue
import sys
import threading
from time import perf_counter, sleep

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
        try:
            if self._threads > 1:
                pool = _POOL
                if pool._size < self._threads - 1:
                    pool.ensure(self._threads - 1)
                for _ in range(self._threads - 1):
                    pool.submit(self._help)
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

    def _stop(self) -> None:
        self._stopped = True

    def _stop_and_wait(self) -> None:
        _stop_and_wait(self)


#: The scheduler of launches whose chunks are calls of a compiled range wrapper (see _NativeLaunch): the
#: state is 11 i64 words, [0] the next item, [1] the end, [2] the threads, [3] nonzero once no chunk may
#: start, [4] the most items a pool thread's chunk takes and [5] the items it leaves to the calling thread
#: (its crumb) until it has timed a chunk of its own, [6] the wrapper, [7] its argv, [8] its sizes,
#: [9] CHUNK_SECONDS and [10] CRUMB_SECONDS in nanoseconds; the claims are ChunkedLaunch._claim's.
_NATIVE_IR = r"""
declare i64 @llvm.smin.i64(i64, i64)
declare i64 @llvm.smax.i64(i64, i64)
declare double @llvm.minnum.f64(double, double)  ; below 2**62 (an item count), as fptosi needs

declare i32 @clock_gettime(i32, ptr)

define internal i64 @gpuc_pool_now(ptr %ts) {
entry:
  %r = call i32 @clock_gettime(i32 1, ptr %ts)
  %psec = getelementptr i64, ptr %ts, i64 0
  %pnsec = getelementptr i64, ptr %ts, i64 1
  %sec = load i64, ptr %psec, align 8
  %nsec = load i64, ptr %pnsec, align 8
  %ns = mul i64 %sec, 1000000000
  %t = add i64 %ns, %nsec
  ret i64 %t
}

; A thread's portion of the `left` items: its share of them (rounded up), at least the crumb, at most `want`
; and what is left (ChunkedLaunch._claim).
define internal i64 @gpuc_pool_portion(i64 %left, i64 %threads, i64 %want, i64 %crumb) alwaysinline {
entry:
  %up = add i64 %left, %threads
  %up1 = sub i64 %up, 1
  %share = sdiv i64 %up1, %threads
  %t1 = call i64 @llvm.smax.i64(i64 %crumb, i64 %share)
  %t2 = call i64 @llvm.smin.i64(i64 %want, i64 %t1)
  %t3 = call i64 @llvm.smin.i64(i64 %t2, i64 %left)
  ret i64 %t3
}

; Claims and runs chunks for a pool thread until none is left for it or the launch stops; once it has timed
; a chunk, its own rate sizes its chunks (before, the calling thread's, in [4] and [5]).
define void @gpuc_pool_help(ptr %s) {
entry:
  %ts = alloca [2 x i64], align 8
  %ratep = alloca double, align 8
  store double 0.0, ptr %ratep, align 8
  %pend = getelementptr i64, ptr %s, i64 1
  %pthreads = getelementptr i64, ptr %s, i64 2
  %pstop = getelementptr i64, ptr %s, i64 3
  %pwant = getelementptr i64, ptr %s, i64 4
  %pcrumb = getelementptr i64, ptr %s, i64 5
  %pfn = getelementptr i64, ptr %s, i64 6
  %pargv = getelementptr i64, ptr %s, i64 7
  %psizes = getelementptr i64, ptr %s, i64 8
  %pchunkns = getelementptr i64, ptr %s, i64 9
  %pcrumbns = getelementptr i64, ptr %s, i64 10
  %end = load i64, ptr %pend, align 8
  %threads = load i64, ptr %pthreads, align 8
  %fn = load ptr, ptr %pfn, align 8
  %argv = load ptr, ptr %pargv, align 8
  %sizes = load ptr, ptr %psizes, align 8
  %chunkns.i = load i64, ptr %pchunkns, align 8
  %crumbns.i = load i64, ptr %pcrumbns, align 8
  %chunkns = sitofp i64 %chunkns.i to double
  %crumbns = sitofp i64 %crumbns.i to double
  br label %loop
loop:
  %stop = load atomic i64, ptr %pstop monotonic, align 8
  %stopped = icmp ne i64 %stop, 0
  br i1 %stopped, label %done, label %claim
claim:
  %rate = load double, ptr %ratep, align 8
  %timed = fcmp ogt double %rate, 0.0
  %wantf = fmul double %rate, %chunkns
  %wantc = call double @llvm.minnum.f64(double %wantf, double 0x43D0000000000000)
  %wanti = fptosi double %wantc to i64
  %wantmine = call i64 @llvm.smax.i64(i64 1, i64 %wanti)
  %crumbf = fmul double %rate, %crumbns
  %crumbc = call double @llvm.minnum.f64(double %crumbf, double 0x43D0000000000000)
  %crumbmine = fptosi double %crumbc to i64
  %want0 = load atomic i64, ptr %pwant monotonic, align 8
  %crumb0 = load atomic i64, ptr %pcrumb monotonic, align 8
  %want = select i1 %timed, i64 %wantmine, i64 %want0
  %crumb = select i1 %timed, i64 %crumbmine, i64 %crumb0
  %b = load atomic i64, ptr %s monotonic, align 8
  %left = sub i64 %end, %b
  %t3 = call i64 @gpuc_pool_portion(i64 %left, i64 %threads, i64 %want, i64 %crumb)
  %rest = sub i64 %left, %crumb
  %take = call i64 @llvm.smin.i64(i64 %t3, i64 %rest)
  %least = call i64 @llvm.smax.i64(i64 1, i64 %crumb)
  %few = icmp slt i64 %take, %least
  br i1 %few, label %done, label %cas
cas:
  %next = add i64 %b, %take
  %pair = cmpxchg ptr %s, i64 %b, i64 %next seq_cst seq_cst, align 8
  %won = extractvalue { i64, i1 } %pair, 1
  br i1 %won, label %run, label %loop
run:
  %start = call i64 @gpuc_pool_now(ptr %ts)
  call void %fn(ptr %argv, i64 %b, i64 %next, ptr %sizes)
  %stop.t = call i64 @gpuc_pool_now(ptr %ts)
  %dt = sub i64 %stop.t, %start
  %dt1 = call i64 @llvm.smax.i64(i64 %dt, i64 1)
  %dtf = sitofp i64 %dt1 to double
  %takef = sitofp i64 %take to double
  %newrate = fdiv double %takef, %dtf
  store double %newrate, ptr %ratep, align 8
  br label %loop
done:
  ret void
}

; Runs of a phased launch (_NativeRuns): the state's [1] is the runs, [2] the threads, [3] nonzero once no run
; may start, [4] the runs that have ended, [5] the pool threads that have come (each takes the next slot), [6]
; to [8] as above, [9] a table of (begin, end, need, first, count) per run, in order, [10] the runs'
; dependencies, [11] a flag per run, set once it has ended, [12] per thread (first, count) of the runs it owns
; in the list at [13] (in order), [14] per thread the number of its runs claimed, 8 words apart. A run is
; ready once `need` runs have ended (those of the phases before its own) and so have the `count` runs listed
; in [10] from `first` on. A thread claims the first unclaimed run of its own list when it is ready, else the
; first of another's that is, so that a thread keeps the same part of every phase (the same rows of a
; shadow stay in its cache) and never holds a run it cannot start. Claims and runs them until none is left;
; with %once, returns after one run (the calling thread's, slot 0, which goes back to Python between runs):
; 1 when it ran one, else 0. A thread finding no ready run yields its core.
declare i32 @sched_yield()

define internal i64 @gpuc_pool_runs(ptr %s, i64 %slot, i1 %once) {
entry:
  %pthreads = getelementptr i64, ptr %s, i64 2
  %pstop = getelementptr i64, ptr %s, i64 3
  %pended = getelementptr i64, ptr %s, i64 4
  %pfn = getelementptr i64, ptr %s, i64 6
  %pargv = getelementptr i64, ptr %s, i64 7
  %psizes = getelementptr i64, ptr %s, i64 8
  %ptable = getelementptr i64, ptr %s, i64 9
  %pdeps = getelementptr i64, ptr %s, i64 10
  %pdone = getelementptr i64, ptr %s, i64 11
  %powners = getelementptr i64, ptr %s, i64 12
  %porder = getelementptr i64, ptr %s, i64 13
  %pnext = getelementptr i64, ptr %s, i64 14
  %threads = load i64, ptr %pthreads, align 8
  %fn = load ptr, ptr %pfn, align 8
  %argv = load ptr, ptr %pargv, align 8
  %sizes = load ptr, ptr %psizes, align 8
  %table = load ptr, ptr %ptable, align 8
  %deps = load ptr, ptr %pdeps, align 8
  %done = load ptr, ptr %pdone, align 8
  %owners = load ptr, ptr %powners, align 8
  %order = load ptr, ptr %porder, align 8
  %next = load ptr, ptr %pnext, align 8
  br label %loop
loop:
  %stop = load atomic i64, ptr %pstop monotonic, align 8
  %stopped = icmp ne i64 %stop, 0
  br i1 %stopped, label %none, label %scan
scan:
  %i = phi i64 [ 0, %loop ], [ %i.next, %skip ]
  %open = phi i64 [ 0, %loop ], [ %open.next, %skip ]  ; lists with runs unclaimed, none of them ready
  %more = icmp slt i64 %i, %threads
  br i1 %more, label %head, label %scanned
head:
  %o0 = add i64 %slot, %i
  %wrap = icmp sge i64 %o0, %threads
  %o1 = sub i64 %o0, %threads
  %o = select i1 %wrap, i64 %o1, i64 %o0
  %at.o = shl i64 %o, 1
  %po = getelementptr i64, ptr %owners, i64 %at.o
  %pocount = getelementptr i64, ptr %po, i64 1
  %ofirst = load i64, ptr %po, align 8
  %ocount = load i64, ptr %pocount, align 8
  %at.n = shl i64 %o, 3
  %pn = getelementptr i64, ptr %next, i64 %at.n
  %k = load atomic i64, ptr %pn monotonic, align 8
  %left = icmp slt i64 %k, %ocount
  br i1 %left, label %row, label %skip
row:
  %at.r = add i64 %ofirst, %k
  %pr = getelementptr i64, ptr %order, i64 %at.r
  %r = load i64, ptr %pr, align 8
  %at = mul i64 %r, 5
  %pb = getelementptr i64, ptr %table, i64 %at
  %pneed = getelementptr i64, ptr %pb, i64 2
  %pfirst = getelementptr i64, ptr %pb, i64 3
  %pdepn = getelementptr i64, ptr %pb, i64 4
  %need = load i64, ptr %pneed, align 8
  %first = load i64, ptr %pfirst, align 8
  %depn = load i64, ptr %pdepn, align 8
  %ended = load atomic i64, ptr %pended seq_cst, align 8
  %ok = icmp sge i64 %ended, %need
  br i1 %ok, label %deps.loop, label %waiting
deps.loop:
  %j = phi i64 [ 0, %row ], [ %j.next, %deps.ended ]
  %deps.more = icmp slt i64 %j, %depn
  br i1 %deps.more, label %deps.check, label %take
deps.check:
  %at.dep = add i64 %first, %j
  %pdep = getelementptr i64, ptr %deps, i64 %at.dep
  %dep = load i64, ptr %pdep, align 8
  %pflag = getelementptr i64, ptr %done, i64 %dep
  %flag = load atomic i64, ptr %pflag acquire, align 8
  %dep.ended = icmp ne i64 %flag, 0
  br i1 %dep.ended, label %deps.ended, label %waiting
deps.ended:
  %j.next = add i64 %j, 1
  br label %deps.loop
waiting:
  br label %skip
skip:
  %unready = phi i64 [ 0, %head ], [ 1, %waiting ]
  %open.next = add i64 %open, %unready
  %i.next = add i64 %i, 1
  br label %scan
take:
  %k1 = add i64 %k, 1
  %pair = cmpxchg ptr %pn, i64 %k, i64 %k1 seq_cst seq_cst, align 8
  %won = extractvalue { i64, i1 } %pair, 1
  br i1 %won, label %run, label %loop
run:
  %pe = getelementptr i64, ptr %pb, i64 1
  %b = load i64, ptr %pb, align 8
  %e = load i64, ptr %pe, align 8
  call void %fn(ptr %argv, i64 %b, i64 %e, ptr %sizes)
  %pmine = getelementptr i64, ptr %done, i64 %r
  store atomic i64 1, ptr %pmine release, align 8
  %old = atomicrmw add ptr %pended, i64 1 seq_cst, align 8
  br i1 %once, label %one, label %loop
scanned:
  %all = icmp eq i64 %open, 0
  br i1 %all, label %none, label %later
later:
  %y = call i32 @sched_yield()
  br label %loop
one:
  ret i64 1
none:
  ret i64 0
}

define void @gpuc_pool_help_runs(ptr %s) {
entry:
  %pcame = getelementptr i64, ptr %s, i64 5
  %pthreads = getelementptr i64, ptr %s, i64 2
  %threads = load i64, ptr %pthreads, align 8
  %came = atomicrmw add ptr %pcame, i64 1 seq_cst, align 8
  %after = add i64 %came, 1
  %slot = urem i64 %after, %threads
  %r = call i64 @gpuc_pool_runs(ptr %s, i64 %slot, i1 false)
  ret void
}

define i64 @gpuc_pool_run_run(ptr %s) {
entry:
  %r = call i64 @gpuc_pool_runs(ptr %s, i64 0, i1 true)
  ret i64 %r
}

; Claims and runs one chunk for the calling thread: at most %want items, all that is left where less than
; %crumb would remain. Returns its items, 0 when none is left or the launch stopped.
define i64 @gpuc_pool_run_one(ptr %s, i64 %want, i64 %crumb) {
entry:
  %pend = getelementptr i64, ptr %s, i64 1
  %pthreads = getelementptr i64, ptr %s, i64 2
  %pstop = getelementptr i64, ptr %s, i64 3
  %end = load i64, ptr %pend, align 8
  %threads = load i64, ptr %pthreads, align 8
  br label %loop
loop:
  %stop = load atomic i64, ptr %pstop monotonic, align 8
  %stopped = icmp ne i64 %stop, 0
  br i1 %stopped, label %none, label %claim
claim:
  %b = load atomic i64, ptr %s monotonic, align 8
  %left = sub i64 %end, %b
  %empty = icmp sle i64 %left, 0
  br i1 %empty, label %none, label %size
size:
  %t3 = call i64 @gpuc_pool_portion(i64 %left, i64 %threads, i64 %want, i64 %crumb)
  %rest = sub i64 %left, %t3
  %alone = icmp slt i64 %rest, %crumb
  %take = select i1 %alone, i64 %left, i64 %t3
  %next = add i64 %b, %take
  %pair = cmpxchg ptr %s, i64 %b, i64 %next seq_cst seq_cst, align 8
  %won = extractvalue { i64, i1 } %pair, 1
  br i1 %won, label %run, label %loop
run:
  %pfn = getelementptr i64, ptr %s, i64 6
  %pargv = getelementptr i64, ptr %s, i64 7
  %psizes = getelementptr i64, ptr %s, i64 8
  %fn = load ptr, ptr %pfn, align 8
  %argv = load ptr, ptr %pargv, align 8
  %sizes = load ptr, ptr %psizes, align 8
  call void %fn(ptr %argv, i64 %b, i64 %next, ptr %sizes)
  ret i64 %take
none:
  ret i64 0
}
"""


class _Native:
    """The compiled scheduler (_NATIVE_IR), in a JIT of its own that lives as long as the process."""

    def __init__(self) -> None:
        from ..compiler import cache
        from ..llvm import LLJIT, process_lifetime
        from ..targets import NativeTarget

        self._jit = process_lifetime(LLJIT())
        target = NativeTarget()
        # Its machine code comes from the cache folder where an earlier process generated it: a fresh
        # process's first launch does not spend the 12 ms of code generation.
        self._jit.add_object(cache.runtime_code("pool", _NATIVE_IR, target, lambda: _generate(target)))
        # CFUNCTYPE: ctypes gives up the GIL for the whole call, every chunk of it included
        self.help = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(self._jit.lookup("gpuc_pool_help"))
        self.run_one = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)(
            self._jit.lookup("gpuc_pool_run_one"))
        self.help_runs = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(self._jit.lookup("gpuc_pool_help_runs"))
        self.run_run = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p)(self._jit.lookup("gpuc_pool_run_run"))


def _generate(target) -> bytes:
    """_NATIVE_IR's object code for `target` (the host), relocatable as the JIT links it."""
    from ..llvm import Module, Target, capi, initialize

    initialize(target.llvm_target)
    machine = Target.from_triple(target.triple()).machine(target.cpu(), target.features(), opt_level=2,
                                                          reloc=capi.LLVMRelocPIC)
    module = Module.parse(_NATIVE_IR, name="gpuc.pool")
    try:
        module.triple, module.data_layout = target.triple(), machine.data_layout
        return machine.emit(module, "obj", preserve=False)
    finally:
        module.close()
        machine.close()


_native: _Native | None = None
_native_lock = threading.Lock()
#: Where a bytes object's data starts, from its address (CPython's PyBytesObject), checked below.
_BYTES_DATA = bytes.__basicsize__ - 1


def _bytes_address(data: bytes) -> int:
    return id(data) + _BYTES_DATA


def _native_scheduler() -> "_Native | None":
    """The compiled scheduler, made on first use; None where it cannot be (launches then take ChunkedLaunch)."""
    global _native, _NATIVE_OK
    if _native is None:
        with _native_lock:
            if _native is None and _NATIVE_OK:
                try:
                    _native = _Native()
                except Exception:  # noqa: BLE001 - the Python schedule does the same work
                    _NATIVE_OK = False
    return _native


_NATIVE_OK = (sys.implementation.name == "cpython" and sys.platform.startswith("linux")  # CLOCK_MONOTONIC is 1
              and ctypes.sizeof(ctypes.c_void_p) == 8
              and ctypes.string_at(_bytes_address(b"gpuc"), 4) == b"gpuc")


class _NativeLaunch:
    """A launch over `[begin, end)` whose chunks are calls of a compiled range wrapper at `address`: its
    claims are ChunkedLaunch's (the pool threads' chunks sized by the calling thread's timing), made and
    run by compiled code (_NATIVE_IR), so that a pool thread takes the GIL once for the whole launch
    rather than after every chunk. The calling thread still returns to Python after each chunk (Ctrl-C)."""

    __slots__ = ("_state", "_address", "_argv", "_sizes", "_threads", "_first", "_lock", "_running", "_idle")

    def __init__(self, address: int, argv: bytes, sizes: bytes, threads: int, begin: int, end: int) -> None:
        self._argv, self._sizes, self._threads = argv, sizes, threads  # kept alive while the launch runs
        self._first = max(1, (end - begin) // (threads * FIRST_CHUNK_PARTS))
        state = self._state = (ctypes.c_int64 * 11)(begin, end, threads, 0, self._first, 0, address,
                                                     _bytes_address(argv), _bytes_address(sizes),
                                                     int(CHUNK_SECONDS * 1e9), int(CRUMB_SECONDS * 1e9))
        self._address = ctypes.addressof(state)
        self._lock = threading.Lock()
        self._running = 0  # pool threads inside the compiled scheduler
        self._idle: threading.Lock | None = None

    def run(self) -> None:
        """As ChunkedLaunch.run."""
        try:
            pool = _POOL
            if pool._size < self._threads - 1:
                pool.ensure(self._threads - 1)
            for _ in range(self._threads - 1):
                pool.submit(self._help)
            self._run_mine()
        except BaseException:
            self._stop_and_wait()
            raise
        self._stop_and_wait()

    def _run_mine(self) -> None:
        run_one, address, state = _native.run_one, self._address, self._state
        want, crumb = self._first, 0
        while True:
            start = perf_counter()
            took = run_one(address, want, crumb)
            if not took:
                return
            rate = took / max(perf_counter() - start, 1e-9)
            want, crumb = max(1, int(rate * CHUNK_SECONDS)), int(rate * CRUMB_SECONDS)
            state[4], state[5] = want, crumb  # the pool threads' next chunks, sized by this one

    def _help(self) -> None:
        with self._lock:
            if self._state[3]:
                return
            self._running += 1
        try:
            self._native_help()(self._address)
        finally:
            with self._lock:
                self._running -= 1
                if not self._running and self._idle is not None:
                    self._idle.release()
                    self._idle = None

    @staticmethod
    def _native_help():
        return _native.help

    def _stop(self) -> None:
        self._state[3] = 1

    def _stop_and_wait(self) -> None:
        _stop_and_wait(self)


class _NativeRuns(_NativeLaunch):
    """A launch of runs in phases (run_phases) whose chunks are calls of a compiled range wrapper: each run is
    one chunk, a phase's runs start once every run of the phases before it has ended (or, with `after`, once
    the runs listed for each have), and pool threads wait in compiled code (yielding their core), not by
    going back to their queue."""

    __slots__ = ("_table", "_deps", "_done", "_owners", "_order", "_claimed")

    def __init__(self, address: int, argv: bytes, sizes: bytes, threads: int, phases, after) -> None:
        self._argv, self._sizes, self._threads = argv, sizes, threads
        self._table, self._deps, self._owners, self._order, runs = _runs_table(phases, after, threads)
        self._done = (ctypes.c_int64 * max(1, runs))()
        self._claimed = (ctypes.c_int64 * (8 * threads))()  # a cache line per thread
        self._state = (ctypes.c_int64 * 15)(0, runs, threads, 0, 0, 0, address, _bytes_address(argv),
                                            _bytes_address(sizes), ctypes.addressof(self._table),
                                            ctypes.addressof(self._deps), ctypes.addressof(self._done),
                                            ctypes.addressof(self._owners), ctypes.addressof(self._order),
                                            ctypes.addressof(self._claimed))
        self._address = ctypes.addressof(self._state)
        self._first = 0
        self._lock = threading.Lock()
        self._running = 0
        self._idle = None

    def _run_mine(self) -> None:
        run_run, address, state = _native.run_run, self._address, self._state
        while run_run(address):
            pass
        # Every run is claimed, but pool threads may still run theirs (a run is claimed once it may start, so
        # every run claimed ends): the launch's stop (_stop_and_wait) must not come before they end.
        while state[4] < state[1]:
            sleep(0)

    @staticmethod
    def _native_help():
        return _native.help_runs


#: The tables of the last block schedules launched (run_phases with `after`), each kept with its lists: a launch
#: of the same grid (cpu.block_order keeps its lists) finds its table built (about 1 us a run to build; the
#: compiled scheduler only reads it, so launches at once may share it). Plain phases (a stencil adjoint's two,
#: new lists each launch) are built each time and not kept.
_TABLES: dict = {}
_TABLES_KEPT = 16
_TABLES_LOCK = threading.Lock()


def _runs_table(phases, after, threads: int) -> tuple:
    """(the ctypes table of (begin, end, need, first, count) per run of `phases` that _NativeRuns hands the
    compiled scheduler, the dependency list its rows point into, (first, count) per thread of the runs it
    owns in the next list, that list, the number of runs). With `after` (a list per run, in order, of the
    earlier runs it waits for), a run needs those alone, and the tables are built once per pair of lists and
    thread count while they are among the last kept; else a run needs every run of the phases before its own.
    A phase's runs go to the threads in order, a share each, so that a thread runs the same part of every
    phase (block_phases puts the blocks of one row of a grid at one place in each phase)."""
    key = (id(phases), id(after), threads)
    if after is not None:
        with _TABLES_LOCK:
            found = _TABLES.get(key)
            if found is not None and found[0] is phases and found[1] is after:
                return found[2:]
    rows, deps, need, k = [], [], 0, 0
    owned, owner = [[] for _ in range(threads)], []
    for phase in phases:
        mine = [[] for _ in range(threads)]
        for j, (begin, end) in enumerate(phase):
            if after is None:
                rows += (begin, end, need, 0, 0)
            else:
                rows += (begin, end, 0, len(deps), len(after[k]))
                deps += after[k]
            owner.append(j * threads // len(phase))
            mine[owner[k]].append(k)
            k += 1
        need += len(phase)
        for t, runs in enumerate(mine):
            # a thread's runs that wait for another's last: those are likelier to have ended by then
            owned[t] += sorted(runs, key=lambda r: after is not None and any(owner[d] != t for d in after[r]))
    table = (ctypes.c_int64 * max(5, len(rows)))(*rows)
    listed = (ctypes.c_int64 * max(1, len(deps)))(*deps)
    spans, order = [], []
    for runs in owned:
        spans += (len(order), len(runs))
        order += runs
    owners = (ctypes.c_int64 * len(spans))(*spans)
    ordered = (ctypes.c_int64 * max(1, len(order)))(*order)
    built = (table, listed, owners, ordered, k)
    if after is None:
        return built
    with _TABLES_LOCK:
        if len(_TABLES) >= _TABLES_KEPT:
            _TABLES.pop(next(iter(_TABLES)))
        _TABLES[key] = (phases, after, *built)  # the lists kept alive: their ids name no others
    return built


def _stop_and_wait(launch) -> None:
    """Let no new chunk of `launch` (a ChunkedLaunch or _NativeLaunch) start, and wait for the pool threads'
    running ones (a second Ctrl-C does not cut this short: it is raised after them)."""
    interrupted = None
    with launch._lock:
        launch._stop()
        if not launch._running:
            return
        # The pool thread whose chunk ends last releases it (once: no chunk starts any more).
        idle = launch._idle = threading.Lock()
        idle.acquire()
    while True:
        try:
            with launch._lock:
                if not launch._running:
                    break
            idle.acquire()
        except KeyboardInterrupt as exc:
            interrupted = exc
    if interrupted is not None:
        raise interrupted


_CFUNC = ctypes._CFuncPtr


def run_chunks(fn, argv: bytes, bounds: list[int], sizes: bytes, helpers: int) -> None:
    """Run `[bounds[0], bounds[-1])`, cut into chunks as it goes (see ChunkedLaunch), on the calling thread
    and `helpers` pool threads; any two items may run at once."""
    if helpers and _NATIVE_OK and isinstance(fn, _CFUNC) and argv.__class__ is bytes and sizes.__class__ is bytes:
        if _native is not None or _native_scheduler() is not None:
            address = ctypes.c_void_p.from_address(ctypes.addressof(fn)).value
            _NativeLaunch(address, argv, sizes, helpers + 1, bounds[0], bounds[-1]).run()
            return
    ChunkedLaunch(fn, argv, sizes, helpers + 1, bounds[0], bounds[-1]).run()


def run_ranges(fn, argv: bytes, ranges: list[tuple[int, int]], sizes: bytes, helpers: int) -> None:
    """Run each of `ranges` as one chunk (see ChunkedLaunch) on the calling thread and `helpers` pool threads."""
    ChunkedLaunch(fn, argv, sizes, helpers + 1, ranges=ranges).run()


def run_phases(fn, argv: bytes, phases: list[list[tuple[int, int]]], sizes: bytes, helpers: int,
               after: list | None = None) -> None:
    """Run each range of each phase as one chunk, on the calling thread and `helpers` pool threads: the ranges
    of a phase at once, and none before every range of the phases before it has ended, or, with `after` (per
    range, in order, the numbers of the earlier ranges it must follow), none before those have ended: a
    range whose own predecessors are done starts while others of the phase before still run. A compiled
    range wrapper runs them as one launch (_NativeRuns: the pool threads are woken once, not once per
    phase); the Python schedule keeps the phases whole (which honours `after` too)."""
    if helpers and _NATIVE_OK and isinstance(fn, _CFUNC) and argv.__class__ is bytes and sizes.__class__ is bytes:
        if _native is not None or _native_scheduler() is not None:
            address = ctypes.c_void_p.from_address(ctypes.addressof(fn)).value
            _NativeRuns(address, argv, sizes, helpers + 1, phases, after).run()
            return
    for ranges in phases:
        run_ranges(fn, argv, ranges, sizes, helpers=min(helpers + 1, len(ranges)) - 1)
