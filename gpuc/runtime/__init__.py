"""Running compiled code: the CPU through the ORC JIT, NVIDIA GPUs through the CUDA driver API
(`gpuc.runtime.cuda`, imported on first use), and the launcher behind `kernel[n](*args)`."""

from ..frontend.source import Kernel as _FrontendKernel
from . import dispatch
from .cpu import JITModule, Kernel, KernelSignature, default_threads, launch, load

_FrontendKernel.launcher = dispatch.launch

__all__ = ["JITModule", "Kernel", "KernelSignature", "default_threads", "dispatch", "launch", "load"]
