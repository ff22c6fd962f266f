"""Running compiled code: the CPU through the ORC JIT, NVIDIA GPUs through the CUDA driver API
(`gpuc.runtime.cuda`, imported on first use), and the launcher behind `kernel[n](*args)`.

Both runtimes marshal arguments with one `gpuc.abi.KernelSignature` (re-exported here)."""

from ..abi import KernelSignature
from ..frontend.core.functions import Kernel as _FrontendKernel
from . import dispatch, prepared
from .cpu import CPULauncher, JITModule, default_threads, index_space, launch, load
from .prepared import PreparedLaunch

_FrontendKernel.launcher = dispatch.launch
_FrontendKernel.inspector = dispatch.inspect
_FrontendKernel.preparer = prepared.prepare  # kernel.prepare(n, *args, ...): docs/launching.md

__all__ = ["CPULauncher", "JITModule", "KernelSignature", "PreparedLaunch", "default_threads", "dispatch", "index_space", "launch",
           "load"]
