"""`gpuc.tangent(kernel)`: the tangent kernel of a kernel, forward mode over a whole launch (docs/autodiff.md).

Its parameters are the primal kernel's with each float array followed by its tangent (same shape, dtype
and strides). A launch computes what the primal computes and, into the tangent of every array it writes,
the directional derivative of what it writes along the tangents of what it reads: `out_dot = J @ x_dot`,
one launch for one direction, as a JVP. Float scalar parameters are constants, as in adjoint kernels.
"""

from __future__ import annotations

import threading

from ..errors import user_facing
from ..frontend.constructs.autodiff import TangentRequest
from ..frontend.core.functions import Kernel
from ..frontend.core.types import as_type
from .adjoint import ShadowedKernel
from .dispatch import launcher_for, recording, typeof


class TangentKernel(ShadowedKernel):
    """The tangent kernel of `primal` (a @gpuc.kernel): `gpuc.tangent(k)[n](x, dx, y, dy, a)`.

    The tangent of an array the kernel reads is the direction (zeros: that array is held constant); the
    tangent of an array it writes receives the derivative of what is written, element by element, where
    the primal writes it (an atomic add into an array adds the tangent of what it adds). Work items need no
    more care than the primal's: each writes the tangents of exactly what it writes."""

    what = "tangent"

    def __reduce__(self):
        return tangent, (self.primal,)

    def _request(self, flags: tuple, schedule: str | None, spans: tuple | None = None, distinct: bool = False):
        return TangentRequest(self.primal, flags)

    @user_facing
    def launch(self, n, *args, device: str | None = None, threads: int | None = None, block=None,
               shared: int = 0) -> None:
        record = recording.get()
        if record is not None:  # a gpuc.Tape differentiates the primal launches it records, not this one
            record(self, n, args, device=device, threads=threads, block=block, shared=shared)
            return
        blocks = {"block": block, "shared": shared} if block is not None or shared else {}
        self._kernel(self._checked_layout(args)).launch(n, *args, device=device, threads=threads, **blocks)

    def cpu_launcher(self, n, args):
        """The CPU launcher a launch with `args` runs, for callers that marshal arguments themselves (gpuc.jax
        hands it XLA's buffers)."""
        return launcher_for(self._kernel(self._layout([typeof(a, k) for k, a in enumerate(args)])), args, "cpu")

    def __gpuc_source__(self, argtypes):
        """The tangent kernel compiled on its own (`gpuc.code_llvm(gpuc.tangent(k), types)`)."""
        types = [as_type(t) for t in (argtypes if isinstance(argtypes, (tuple, list)) else (argtypes,))]
        return self._kernel(self._layout(types)).__gpuc_source__(tuple(types))


_TANGENTS_LOCK = threading.Lock()


def tangent(kernel) -> TangentKernel:
    """The tangent kernel of `kernel` (see TangentKernel): one per kernel, so that its compiled launchers
    are kept with it."""
    if not isinstance(kernel, Kernel) or isinstance(kernel, ShadowedKernel):
        TangentKernel(kernel)  # raises the TypeError that says what it takes
    found = kernel.__dict__.get("_gpuc_tangent")
    if found is None:
        made = TangentKernel(kernel)
        with _TANGENTS_LOCK:
            found = kernel.__dict__.setdefault("_gpuc_tangent", made)
    return found


__all__ = ["TangentKernel", "tangent"]
