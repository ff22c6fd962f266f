"""Running compiled code: the CPU through the ORC JIT (and, later, CUDA through the driver API)."""

from .cpu import JITModule, load

__all__ = ["JITModule", "load"]
