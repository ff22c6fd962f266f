"""The frontend's registry: which Python object a call in a kernel names, and the Handler that types
and lowers it (docs/frontend.md, "Adding a builtin").

Every construct registers itself when its module is imported (gpuc/frontend/__init__.py imports them
all); the passes only ask `lookup_call`. A handler is registered

- for one object: `register(gpuc.popc, PopCount())`, `register(math.sin, ...)`; a builtin users call
  from `gpuc` also names itself with `public=` (the package's exports and the "what gpuc has in
  kernels" hint are generated from these);
- for every instance of a type: `register_type(Marker, MarkerCall)` makes a handler per object;
- for a callee's value type: `register_value_type(FunctionPointerType, handler)` for calls of values
  computed at run time (function pointers);
- as a table built at the first lookup: `register_table(builder)`, for families of handlers that are
  cheap to describe and costly to build (NumPy's ufuncs);
- or as a layer over the whole table: `register_layer(wrap)` calls `wrap(table)` once every entry is
  in, and takes the handlers it returns in place of those it was given (complex numbers wrap the math
  functions that also take complex arguments). Layers run in registration order.

A second handler for a registered object is refused unless `replace=True`, as register_target does;
`unregister(obj)` removes one.
"""

from __future__ import annotations

import types as _pytypes
from dataclasses import dataclass

from .functions import GpucFunction
from .plans import Handler


@dataclass(frozen=True)
class PublicName:
    """A name users call as `gpuc.<name>` in kernels, and the group the kernel hint lists it under."""

    name: str
    obj: object
    group: str


_CALLS: dict = {}
_TABLES: list = []
_LAYERS: list = []
_BY_TYPE: dict = {}
_BY_VALUE_TYPE: dict = {}
_PUBLIC: dict[str, PublicName] = {}
_BUILT: dict | None = None


def register(obj, handler: Handler, *, public: str | None = None, group: str = "", replace: bool = False):
    """Calls of `obj` in kernels and funcs are typed and lowered by `handler`; returns `obj`.
    `public`: the name it has in the `gpuc` namespace, listed in the hint under `group`."""
    global _BUILT
    if not isinstance(handler, Handler):
        raise TypeError(f"register needs a gpuc.frontend.core.plans.Handler, not {handler!r}")
    try:
        hash(obj)
    except TypeError:
        raise TypeError(f"register needs a hashable object to stand for the call, not {obj!r}") from None
    known = _CALLS.get(obj)
    if known is not None and not replace:
        raise ValueError(f"{_describe(obj)} is registered ({type(known).__name__}); pass replace=True to replace it")
    _CALLS[obj] = handler
    if public is not None:
        expose(public, obj, group=group)
    _BUILT = None
    return obj


def unregister(obj) -> None:
    """Forget `obj`'s handler (registered with `register`) and its public name, if any."""
    global _BUILT
    if obj not in _CALLS:
        raise KeyError(f"{_describe(obj)} is not registered")
    del _CALLS[obj]
    for name in [name for name, entry in _PUBLIC.items() if entry.obj is obj]:
        del _PUBLIC[name]
    _BUILT = None


def expose(name: str, obj, *, group: str = "") -> None:
    """`obj` is public as `gpuc.<name>` (a stub, a type or a namespace such as gpuc.shared)."""
    known = _PUBLIC.get(name)
    if known is not None and known.obj is not obj:
        raise ValueError(f"the public name {name!r} is taken by {_describe(known.obj)}")
    _PUBLIC[name] = PublicName(name, obj, group)


def register_type(cls: type, make) -> None:
    """Every instance of `cls` called in a kernel is handled by `make(instance)`."""
    if cls in _BY_TYPE:
        raise ValueError(f"instances of {cls.__name__} are registered ({_BY_TYPE[cls]!r})")
    _BY_TYPE[cls] = make


def register_value_type(cls: type, handler: Handler) -> None:
    """A call whose callee is a run-time value of the gpuc type class `cls` (FunctionPointerType)."""
    if cls in _BY_VALUE_TYPE:
        raise ValueError(f"calls of {cls.__name__} values are registered ({_BY_VALUE_TYPE[cls]!r})")
    _BY_VALUE_TYPE[cls] = handler


def register_table(build) -> None:
    """`build()` returns {object: Handler}, called once, when the first call is looked up."""
    global _BUILT
    _TABLES.append(build)
    _BUILT = None


def register_layer(wrap) -> None:
    """`wrap(table)` returns {object: Handler} to put over the finished table (see the module text)."""
    global _BUILT
    _LAYERS.append(wrap)
    _BUILT = None


def _table() -> dict:
    global _BUILT
    table = _BUILT
    if table is None:
        table = dict(_CALLS)
        for build in _TABLES:
            for obj, handler in build().items():
                if obj in table:
                    raise ValueError(f"{_describe(obj)} is registered twice ({type(table[obj]).__name__}, "
                                     f"{type(handler).__name__})")
                table[obj] = handler
        for wrap in _LAYERS:
            table.update(wrap(dict(table)))
        _BUILT = table
    return table


def lookup_call(obj) -> Handler | None:
    """The handler of a call of `obj`, or None when kernels cannot call it."""
    make = _BY_TYPE.get(type(obj))
    if make is not None:
        return make(obj)
    try:
        return _table().get(obj)
    except TypeError:  # unhashable
        return None


def lookup_value_call(t) -> Handler | None:
    """The handler of a call of a run-time value of gpuc type `t`, or None."""
    return _BY_VALUE_TYPE.get(type(t))


def takes_keywords(obj) -> bool:
    handler = lookup_call(obj)
    return handler is not None and handler.keywords


def is_known_object(value) -> bool:
    """Whether a name in a kernel may refer to `value`: modules, gpuc functions, range and registered calls."""
    return (isinstance(value, (_pytypes.ModuleType, GpucFunction)) or value is range
            or lookup_call(value) is not None)


def public_names() -> dict[str, PublicName]:
    """Every name registered as public, in registration order."""
    return dict(_PUBLIC)


def _describe(obj) -> str:
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    module = getattr(obj, "__module__", None)
    return f"{module}.{name}" if name and module else repr(obj)
