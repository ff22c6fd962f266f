"""Compilation targets: one file each, all implementing the hooks of `interface.Target`."""

from .gcn import GCNTarget
from .interface import Target
from .native import NativeTarget
from .ptx import PTXTarget, find_libdevice
from .spirv import SPIRVTarget

TARGETS = {"native": NativeTarget, "ptx": PTXTarget, "gcn": GCNTarget, "spirv": SPIRVTarget}

__all__ = ["GCNTarget", "NativeTarget", "PTXTarget", "SPIRVTarget", "TARGETS", "Target", "find_libdevice"]
