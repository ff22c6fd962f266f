"""Prepared launches: `kernel.prepare(n, *args, ...)` types, compiles, checks and marshals a launch once;
calling the PreparedLaunch it returns runs that launch again at the lowest cost a launch has (Warp's
prepared launches). The contract is docs/launching.md, "Prepared launches".
"""

from __future__ import annotations

import functools
import math

from . import cpu, dispatch


class PreparedLaunch:
    """One launch of a kernel with fixed arguments: `launch()` runs it (as `kernel[n](*args, ...)` would)
    and returns None. Arrays are read where they are when it runs (their contents may change between
    runs; the launch keeps them alive). `kernel`, `n`, `args`, `device`, `threads`, `block` and
    `shared` (read-only) are what it was prepared with."""

    __slots__ = ("_given", "_call", "_run", "__weakref__")

    def __init__(self, kernel, n, args: tuple, device, threads, block, shared: int) -> None:
        self._given = (kernel, n, args, device, threads, block, shared)
        # `_call()`: the one call of the launch into its range wrapper, until its module is closed (forget())
        self._call = None
        launcher = dispatch.launcher_for(kernel, args, device, whole_blocks=block is not None, n=n)
        if isinstance(launcher, cpu.CPULauncher):
            self._prepare_cpu(launcher)
            return
        launcher.geometry.check(n, block)

        def run():
            launcher(n, args, threads, block=block, shared=shared)
        self._run = run

    kernel = property(lambda self: self._given[0], doc="The kernel.")
    n = property(lambda self: self._given[1], doc="The index space, as given.")
    args = property(lambda self: self._given[2], doc="The arguments (a tuple).")
    device = property(lambda self: self._given[3], doc="device=, as given (None: the arguments' device).")
    threads = property(lambda self: self._given[4], doc="threads=, as given.")
    block = property(lambda self: self._given[5], doc="block=, as given.")
    shared = property(lambda self: self._given[6], doc="shared=, in bytes.")

    def _prepare_cpu(self, launcher: cpu.CPULauncher) -> None:
        """Everything a CPU launch does before its first call into the kernel, done now; checked as the
        launch would check it (the arguments, the index space, the block, the thread count)."""
        _, n, args, _, threads, block, shared = self._given
        argv = launcher.marshal(args)
        launcher.geometry.check(n, block)
        dims = cpu.index_space(n)
        if launcher.blocks or block is not None:
            cpu._grid(dims, block)  # its errors now, not at the first run

            def run_blocks():
                launcher.run(n, argv, threads, block=block, shared=shared)
            self._run = run_blocks
            return
        total = math.prod(dims)
        threads = cpu.launch_threads(total, threads) if total else 1  # GPUC_NUM_THREADS as it is now
        if threads == 1 and min(cpu.SERIAL_CHUNKS, total // cpu.MIN_ITEMS_PER_CHUNK) <= 1:
            # one call into the kernel, as launch_marshalled would make it (none for an empty space)
            self._call = functools.partial(launcher._fn, argv, 0, total, cpu._SIZES.pack(*dims)) if total else _nothing
            launcher.module.holders.add(self)

        def run():  # in chunks; or, for one call, where the module was closed: its error
            launcher.run(n, argv, threads)
        self._run = run

    def launch(self) -> None:
        """Run the launch (a gpuc.Tape recording in this context records it, as it records kernel[n](...))."""
        call = self._call
        if call is not None and _recording() is None:
            call()
            return
        if _recording() is not None:
            kernel, n, args, device, threads, block, shared = self._given
            dispatch.launch(kernel, n, args, device=device, threads=threads, block=block, shared=shared)
            return
        self._run()

    __call__ = launch

    def forget(self) -> None:
        """Its module was closed: launches take the launcher's path, which says so."""
        self._call = None

    def __reduce__(self):
        raise TypeError("a PreparedLaunch holds compiled code and array addresses and cannot be pickled; pickle "
                        "the kernel and its arguments and prepare the launch again where they are loaded")

    def __repr__(self) -> str:
        extra = "".join(f", {name}={getattr(self, name)!r}" for name in ("device", "threads", "block", "shared")
                        if getattr(self, name) not in (None, 0))
        return f"<PreparedLaunch {getattr(self.kernel, '__qualname__', self.kernel)}[{self.n!r}], " \
               f"{len(self.args)} argument(s){extra}>"


_recording = dispatch.recording.get


def _nothing() -> None:
    """The launch of an empty index space."""


def prepare(kernel, n, args, *, device: str | None = None, threads: int | None = None, block=None,
            shared: int = 0) -> PreparedLaunch:
    """The PreparedLaunch of `kernel[n](*args, device=..., threads=..., block=..., shared=...)`."""
    return PreparedLaunch(kernel, n, tuple(args), device, threads, block, dispatch._shared_bytes(shared))


__all__ = ["PreparedLaunch", "prepare"]
