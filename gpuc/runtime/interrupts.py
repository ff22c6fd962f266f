"""Ctrl-C inside a work item: the process's interrupt flag, which bounds-checked kernels' loops poll.

A launch on the CPU stops between chunks when the caller gets KeyboardInterrupt (gpuc/runtime/pool.py),
but a loop that never ends inside one work item never gets back to Python. In the debug mode
(boundscheck, docs/debugging.md) every loop of a kernel or func polls, at its back edge, the i32 this
module owns (`flag_address()`; kernels reach it through their abi.INTERRUPT_FLAG pointer) and returns
once it is set, so the chunk ends and the launch raises.

Python's own SIGINT handler cannot set it: it only notes the signal for the interpreter, which is stuck
in the foreign call. So while polling kernels run, a handler of gpuc's own, compiled once per process,
is installed in front of it: it sets the flag and then calls the handler it replaced, so Python still
raises KeyboardInterrupt as soon as the call returns. A handler the program installs later with
`signal.signal` replaces it, and the next polling launch puts it in front again (`watch`). Where
SIGINT is ignored or left to the system (SIG_IGN, SIG_DFL), nothing is installed.

The flag is cleared when the first polling chunk of a quiet process starts and when the last one running
ends (`chunk`): a Ctrl-C that came between launches has already been raised by Python and must not cut
the next launch short. Only Linux
(glibc's `struct sigaction`) gets the handler; elsewhere loops poll a flag nothing sets.
"""

from __future__ import annotations

import ctypes
import signal
import sys
import threading

from ..llvm import LLJIT, Builder, Constant, ConstantInt, FunctionType, Module, process_lifetime

SA_SIGINFO = 4
HANDLER_NAME = "gpuc_sigint"


class _Sigaction(ctypes.Structure):
    """glibc's `struct sigaction` (x86-64 and AArch64 Linux)."""
    _fields_ = [("handler", ctypes.c_void_p), ("mask", ctypes.c_ulong * 16), ("flags", ctypes.c_int),
                ("restorer", ctypes.c_void_p)]


_FLAG = ctypes.c_int32(0)
_lock = threading.Lock()
_running = 0  # polling chunks running now, on any thread
_handler: "_Handler | None" = None


def flag_address() -> int:
    """The address of the process's interrupt flag (an i32, nonzero once SIGINT came during a polling launch)."""
    return ctypes.addressof(_FLAG)


def interrupted() -> bool:
    return _FLAG.value != 0


class _Handler:
    """`void gpuc_sigint(i32 sig, ptr info, ptr context)`, compiled into a JIT of its own that lives as long
    as the process: it sets the flag, then calls `previous` (the handler it was put in front of) the way
    the system would have (a handler without SA_SIGINFO ignores the two extra arguments)."""

    def __init__(self) -> None:
        module = Module("gpuc.interrupts")
        ctx = module.context
        i32, i64, ptr = ctx.i32, ctx.i64, ctx.ptr()
        previous = module.add_global(ptr, "gpuc_sigint_previous")
        previous.initializer = Constant.null(ptr)
        fn = module.add_function(HANDLER_NAME, FunctionType.get(ctx.void, [i32, ptr, ptr]))
        with Builder(ctx) as b:
            entry, chain, done = fn.append_block("entry"), fn.append_block("chain"), fn.append_block("done")
            b.position_at_end(entry)
            flag = b.inttoptr(ConstantInt.get(i64, flag_address()), ptr)
            b.store(ConstantInt.get(i32, 1), flag, align=4, volatile=True)
            target = b.load(ptr, previous, align=8, volatile=True)
            # SIG_DFL is 0 and SIG_IGN 1: never installed in front of those (see watch)
            b.cond_br(b.icmp("ugt", b.ptrtoint(target, i64), ConstantInt.get(i64, 1)), chain, done)
            b.position_at_end(chain)
            b.call(target, list(fn.args), fnty=FunctionType.get(ctx.void, [i32, ptr, ptr]))
            b.br(done)
            b.position_at_end(done)
            b.ret()
        self._jit = process_lifetime(LLJIT())
        self._jit.add_module(module)
        self.address = self._jit.lookup(HANDLER_NAME)
        self.previous = ctypes.c_void_p.from_address(self._jit.lookup("gpuc_sigint_previous"))
        self._sigaction = ctypes.CDLL(None, use_errno=True).sigaction
        self._sigaction.argtypes = [ctypes.c_int, ctypes.POINTER(_Sigaction), ctypes.POINTER(_Sigaction)]

    def install(self) -> None:
        """Put the handler in front of SIGINT's current one, unless it is already there or SIGINT is
        ignored or left to the system."""
        current = _Sigaction()
        if self._sigaction(signal.SIGINT, None, ctypes.byref(current)) != 0:
            return
        if current.handler in (None, 0, 1, self.address):
            return
        self.previous.value = current.handler
        mine = _Sigaction()
        ctypes.memmove(ctypes.byref(mine), ctypes.byref(current), ctypes.sizeof(_Sigaction))
        mine.handler = self.address
        mine.flags = current.flags | SA_SIGINFO
        self._sigaction(signal.SIGINT, ctypes.byref(mine), None)


def watch() -> None:
    """Make sure SIGINT sets the flag (install the handler where it is not in front any more)."""
    global _handler
    if not sys.platform.startswith("linux"):
        return
    if _handler is None:
        _handler = _Handler()
    _handler.install()


def _python_raises() -> bool:
    """Whether Python itself raises KeyboardInterrupt here for the SIGINT that set the flag: on the main
    thread, with its default handler (the handler chained to noted the signal for it)."""
    return (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler)


def chunk(fn):
    """`fn` (a launch entry whose loops poll the flag) as a chunk runner: the handler is in front while it
    runs, the flag is cleared when no other polling chunk is running, and a chunk that a Ctrl-C cut short
    raises KeyboardInterrupt (where Python does not raise it itself, once, as the call returns: see
    `_python_raises`), so a launch never returns what a cut-short chunk left."""
    def run(argv, begin, end, sizes):
        global _running
        with _lock:
            if _running == 0:
                watch()
                _FLAG.value = 0
            _running += 1
        try:
            fn(argv, begin, end, sizes)
        finally:
            with _lock:
                cut = _FLAG.value != 0
                _running -= 1
                if _running == 0:
                    _FLAG.value = 0
        if cut and not _python_raises():
            raise KeyboardInterrupt
    run._gpuc_owner = getattr(fn, "_gpuc_owner", fn)
    return run
