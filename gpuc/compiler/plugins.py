"""The plugin registry: callbacks that fire on marker functions at named pipeline points."""

from __future__ import annotations

import contextlib
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


def is_prefix_marker(marker: str) -> bool:
    """Whether `marker` names a family of markers: `prefix*` claims every function named `prefix...`."""
    return marker.endswith("*")


def marker_matches(marker: str, name: str) -> bool:
    """Whether the function `name` is the marker `marker` (or one of the family a `prefix*` names)."""
    return name.startswith(marker[:-1]) if is_prefix_marker(marker) else name == marker


def claimed_by(markers, name: str) -> bool:
    """Whether any of `markers` claims the function `name`."""
    return any(marker_matches(m, name) for m in markers)


def find_marker(marker: str, names) -> str | None:
    """The function of `names` that `marker` claims: itself, or for a `prefix*` the first name of
    its family in sorted order (deterministic); None when there is none."""
    if not is_prefix_marker(marker):
        return marker if marker in names else None
    prefix = marker[:-1]
    return min((n for n in names if n.startswith(prefix)), default=None)


@dataclass(frozen=True, eq=False)
class Plugin:
    """A registered plugin. Compare and hash by identity; build with `register_plugin`/`make_plugin`.

    `builtin`: one of gpuc's own plugins (see `register_plugin`)."""

    name: str
    markers: tuple[str, ...]
    callbacks: dict[str, Callback] = field(repr=False)
    finalize_module: Callable | None = field(default=None, repr=False)
    priority: int = 0
    order: int = field(default_factory=lambda: next(_order))
    builtin: bool = False
    #: What identifies the plugin's behaviour for the disk cache (gpuc/compiler/cache.py); None: the
    #: code of its callbacks does.
    version: str | None = None

    def callback(self, point: str) -> Callback | None:
        return self.callbacks.get(point)


def make_plugin(name: str, *, pipeline_callback=None, early_callback=None, simplified_callback=None,
                last_callback=None, finalize_module=None, markers=None, priority: int = 0,
                builtin: bool = False, version=None) -> Plugin:
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
    if any(m == "*" or "*" in m[:-1] for m in markers):
        raise ValueError(f"plugin {name!r}: a marker prefix is a non-empty prefix followed by one final "
                         f"'*', got {markers!r}")
    callbacks = {point: cb for point, cb in zip(
        POINTS, (early_callback, simplified_callback, pipeline_callback, last_callback)) if cb is not None}
    for point, cb in callbacks.items():
        if not callable(cb):
            raise TypeError(f"plugin {name!r}: the {point} callback is not callable")
    if finalize_module is not None and not callable(finalize_module):
        raise TypeError(f"plugin {name!r}: finalize_module is not callable")
    if not isinstance(priority, int):
        raise TypeError(f"plugin {name!r}: priority must be an int")
    if version is not None and not isinstance(version, (str, int)):
        raise TypeError(f"plugin {name!r}: version must be a string or an int, not {type(version).__name__}")
    return Plugin(name, markers, callbacks, finalize_module, priority, builtin=bool(builtin),
                  version=None if version is None else str(version))


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

    @contextlib.contextmanager
    def scope(self):
        """Registrations and unregistrations inside are undone on leaving."""
        with self._lock:
            saved = dict(self._plugins)
        try:
            yield self
        finally:
            with self._lock:
                self._plugins.clear()
                self._plugins.update(saved)


def ordered(plugins) -> tuple[Plugin, ...]:
    """Higher priority first, then registration order: deterministic."""
    return tuple(sorted(plugins, key=lambda p: (-p.priority, p.order)))


REGISTRY = Registry()


def builtin_plugins() -> tuple[Plugin, ...]:
    """The registered plugins gpuc itself provides (registered with `builtin=True`)."""
    return tuple(p for p in REGISTRY.snapshot() if p.builtin)


def register_plugin(name: str, *, pipeline_callback=None, early_callback=None, simplified_callback=None,
                    last_callback=None, finalize_module=None, markers=None, priority: int = 0,
                    replace: bool = False, builtin: bool = False, version=None) -> Plugin:
    """Register a plugin globally. `pipeline_callback` fires at the `optimized` point.

    Each callback receives `(state, marker_function, module)`: `state` is the compile's
    CompileState (its job, config, target, `compiled` mapping, `compile_into`; it also answers
    `state.config`, `state.source`, `state.target` and `state.describe()` as the job does). It
    returns True when it changed the module and fires only when the module declares one of the
    plugin's `markers` (default: the plugin's name). A marker ending in `*` is a prefix: it claims
    every function whose name starts with what precedes the `*`, and the callback fires once per
    round of the point, receiving one of them (the first by name). `finalize_module(state, compiled, module)`
    runs once per compile, before the pipeline.

    `builtin=True` makes it one of gpuc's own plugins: configs that name their own plugin set
    still get it (unless `CompilerConfig(builtin_plugins=False)`), and the IR it produces is
    trusted like gpuc's own (in-process code generation). gpuc's built-in plugins use it.

    `version` says what identifies the plugin's behaviour for the disk cache: compiled code is reused
    while it stays the same; without one, the code of the plugin's callbacks identifies it.
    """
    plugin = make_plugin(name, pipeline_callback=pipeline_callback, early_callback=early_callback,
                         simplified_callback=simplified_callback, last_callback=last_callback,
                         finalize_module=finalize_module, markers=markers, priority=priority, builtin=builtin,
                         version=version)
    return REGISTRY.register(plugin, replace=replace)


def unregister_plugin(name: str) -> Plugin:
    """Remove a globally registered plugin (configs created earlier keep their snapshot)."""
    return REGISTRY.unregister(name)


def registered_plugins() -> tuple[Plugin, ...]:
    """The globally registered plugins, in the order callbacks run (priority, then registration)."""
    return REGISTRY.snapshot()


def plugin_scope():
    """A context manager: plugins registered or unregistered inside are restored on leaving.

        with gpuc.plugin_scope():
            gpuc.register_plugin("my.marker", early_callback=resolve)
            ...  # compile with it
        # the registry is as before

    For tests and libraries that must not leave global registrations behind. Configs created
    inside keep the plugin set they captured."""
    return REGISTRY.scope()
