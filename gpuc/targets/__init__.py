"""Compilation targets: one file each, all implementing the hooks of `interface.Target`, and the
table of targets by name (`TARGETS`), which `register_target` extends."""

from .gcn import GCNTarget
from .interface import CONTEXT_POINTER, WORK_ITEM_REGISTERS, MathLowering, MathOp, Target
from .native import ARCHITECTURES, NativeTarget
from .ptx import PTXTarget, find_libdevice
from .spirv import SPIRVTarget

#: Target classes by their `name`: the CLI's --target choices and `gpuc targets`' rows.
TARGETS: dict[str, type[Target]] = {}


def register_target(cls: type[Target], *, replace: bool = False) -> type[Target]:
    """Add a target class to TARGETS under its `name`; taking a registered name needs `replace=True`."""
    if not (isinstance(cls, type) and issubclass(cls, Target)):
        raise TypeError(f"register_target needs a subclass of gpuc.targets.Target, not {cls!r}")
    if not cls.name or cls.name == Target.name:
        raise ValueError(f"{cls.__name__} needs a class attribute `name` (its short name, e.g. \"ptx\")")
    if cls.name in TARGETS and TARGETS[cls.name] is not cls and not replace:
        raise ValueError(f"a target named {cls.name!r} is registered ({TARGETS[cls.name].__name__}); "
                         "pass replace=True to replace it")
    TARGETS[cls.name] = cls
    return cls


def unregister_target(name: str) -> None:
    """Remove the target registered as `name` from TARGETS."""
    if name not in TARGETS:
        raise KeyError(f"no target named {name!r} is registered (registered: {', '.join(TARGETS)})")
    del TARGETS[name]


for _cls in (NativeTarget, PTXTarget, GCNTarget, SPIRVTarget):
    register_target(_cls)

__all__ = ["ARCHITECTURES", "CONTEXT_POINTER", "GCNTarget", "MathLowering", "MathOp", "NativeTarget", "PTXTarget",
           "SPIRVTarget", "TARGETS", "Target", "WORK_ITEM_REGISTERS", "find_libdevice", "register_target",
           "unregister_target"]
