"""The CPU runtime: compile a job for the host and run it in-process through the ORC LLJIT."""

from __future__ import annotations

import ctypes

from ..compiler import CompilerJob, compile_module
from ..llvm import LLJIT
from ..targets import NativeTarget


class JITModule:
    """A compiled job loaded into its own JIT; symbols stay valid until `close()`."""

    def __init__(self, job: CompilerJob) -> None:
        if not isinstance(job.config.target, NativeTarget):
            raise ValueError(f"only NativeTarget jobs can run on the CPU, not {job.config.target!r}")
        self.job = job
        built = compile_module(job)
        self.entry, self.trace = built.entry, built.trace
        self._jit = LLJIT()
        try:
            self._jit.add_module(built.module)  # consumes the module and its context
        except BaseException:
            built.close()
            self._jit.close()
            raise

    def lookup(self, name: str | None = None) -> int:
        """The address of `name` (default: the entry point)."""
        return self._jit.lookup(name or self.entry)

    def function(self, restype, *argtypes, name: str | None = None):
        """A ctypes callable for `name` (default: the entry point) with the given C signature."""
        fn = ctypes.CFUNCTYPE(restype, *argtypes)(self.lookup(name))
        fn._gpuc_owner = self  # keep the JIT (and the code) alive as long as the callable
        return fn

    def close(self) -> None:
        self._jit.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def load(job: CompilerJob) -> JITModule:
    """Compile `job` (a NativeTarget job) and load it into a fresh JIT."""
    return JITModule(job)
