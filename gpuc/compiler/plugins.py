"""The plugin registry: callbacks that fire on marker functions at named pipeline points."""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from typing import Callable

#: The callback points, in pipeline order.
POINTS = ("early", "simplified", "optimized", "last")

# Declared functions in these namespaces are markers even when no plugin claims them, so an
# unresolved one is reported (with "no plugin is registered for it").
RESERVED_MARKER_PREFIXES = ("gpuc.", "gpucompiler.")

Callback = Callable[..., bool]
_order = itertools.count()


@dataclass(frozen=True, eq=False)
class Plugin:
    """A registered plugin. Compare and hash by identity; build with `register_plugin`/`make_plugin`."""

    name: str
    markers: tuple[str, ...]
    callbacks: dict[str, Callback] = field(repr=False)
    finalize_module: Callable | None = field(default=None, repr=False)
    priority: int = 0
    order: int = field(default_factory=lambda: next(_order))

    def callback(self, point: str) -> Callback | None:
        return self.callbacks.get(point)


def make_plugin(name: str, *, pipeline_callback=None, early_callback=None, simplified_callback=None,
                last_callback=None, finalize_module=None, markers=None, priority: int = 0) -> Plugin:
    """Build a Plugin without registering it (for `CompilerConfig(plugins=...)`)."""
    if not isinstance(name, str) or not name:
        raise ValueError("a plugin needs a non-empty name")
    if markers is None:
        markers = (name,)
    elif isinstance(markers, str):
        markers = (markers,)
    markers = tuple(markers)
    if not all(isinstance(m, str) and m for m in markers):
        raise ValueError(f"plugin {name!r}: markers must be non-empty strings, got {markers!r}")
    callbacks = {point: cb for point, cb in zip(
        POINTS, (early_callback, simplified_callback, pipeline_callback, last_callback)) if cb is not None}
    for point, cb in callbacks.items():
        if not callable(cb):
            raise TypeError(f"plugin {name!r}: the {point} callback is not callable")
    if finalize_module is not None and not callable(finalize_module):
        raise TypeError(f"plugin {name!r}: finalize_module is not callable")
    if not isinstance(priority, int):
        raise TypeError(f"plugin {name!r}: priority must be an int")
    return Plugin(name, markers, callbacks, finalize_module, priority)


class Registry:
    """Name -> Plugin. Thread-safe; `snapshot()` gives the ordered set a new config captures."""

    def __init__(self) -> None:
        self._plugins: dict[str, Plugin] = {}
        self._lock = threading.Lock()

    def register(self, plugin: Plugin, *, replace: bool = False) -> Plugin:
        with self._lock:
            if plugin.name in self._plugins and not replace:
                raise ValueError(f"a plugin named {plugin.name!r} is already registered; "
                                 "pass replace=True to replace it, or unregister it first")
            self._plugins[plugin.name] = plugin
        return plugin

    def unregister(self, name: str) -> Plugin:
        with self._lock:
            try:
                return self._plugins.pop(name)
            except KeyError:
                raise KeyError(f"no plugin named {name!r} is registered") from None

    def snapshot(self) -> tuple[Plugin, ...]:
        with self._lock:
            return ordered(self._plugins.values())

    def __contains__(self, name: str) -> bool:
        return name in self._plugins

    def get(self, name: str) -> Plugin | None:
        return self._plugins.get(name)


def ordered(plugins) -> tuple[Plugin, ...]:
    """Higher priority first, then registration order: deterministic."""
    return tuple(sorted(plugins, key=lambda p: (-p.priority, p.order)))


REGISTRY = Registry()

# Names of the plugins gpuc itself registers (context propagation, ...): a config that names its
# own plugin set still gets these, unless it says CompilerConfig(builtin_plugins=False).
_BUILTIN: set[str] = set()


def mark_builtin(name: str) -> None:
    _BUILTIN.add(name)


def builtin_plugins() -> tuple[Plugin, ...]:
    """The registered plugins gpuc itself provides."""
    return tuple(p for p in REGISTRY.snapshot() if p.name in _BUILTIN)


def register_plugin(name: str, *, pipeline_callback=None, early_callback=None, simplified_callback=None,
                    last_callback=None, finalize_module=None, markers=None, priority: int = 0,
                    replace: bool = False) -> Plugin:
    """Register a plugin globally. `pipeline_callback` fires at the `optimized` point.

    Each callback receives `(job, marker_function, module)` and returns True when it changed
    the module; it fires only when the module declares one of the plugin's `markers` (default:
    the plugin's name).  `finalize_module(job, compiled, module)` runs once per compile.
    """
    plugin = make_plugin(name, pipeline_callback=pipeline_callback, early_callback=early_callback,
                         simplified_callback=simplified_callback, last_callback=last_callback,
                         finalize_module=finalize_module, markers=markers, priority=priority)
    return REGISTRY.register(plugin, replace=replace)


def unregister_plugin(name: str) -> Plugin:
    """Remove a globally registered plugin (configs created earlier keep their snapshot)."""
    return REGISTRY.unregister(name)


def registered_plugins() -> tuple[Plugin, ...]:
    return REGISTRY.snapshot()
