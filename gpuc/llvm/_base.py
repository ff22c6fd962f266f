"""Handle base classes: borrowed views and disposable owners of LLVM objects."""

from __future__ import annotations

import os
import sys
import threading
import traceback
import weakref

from .capi import address_of


class Handle:
    """A borrowed view of one LLVM object: one pointer, checked non-NULL, passed via `_as_parameter_`."""

    __slots__ = ("_as_parameter_", "__weakref__")

    def __init__(self, ref) -> None:
        if not ref:
            raise ValueError(f"{type(self).__name__}: NULL LLVM handle")
        self._as_parameter_ = ref

    @property
    def ref(self):
        return self._as_parameter_

    @property
    def address(self) -> int:
        return address_of(self._as_parameter_)

    def __eq__(self, other) -> bool:
        return isinstance(other, Handle) and self.address == other.address

    def __hash__(self) -> int:
        return hash(self.address)


# Set GPUC_TRACK_LEAKS=1 to record where every owner was created; `live_owners()` reports
# those never disposed.
_TRACK = os.environ.get("GPUC_TRACK_LEAKS") == "1"
_live: "weakref.WeakValueDictionary[int, Owner]" = weakref.WeakValueDictionary()
_live_lock = threading.Lock()


class Owner(Handle):
    """An LLVM object this Python object owns: disposed by close(), `with`, or garbage collection.

    A borrowed Owner (`owned=False`) is a view of an object someone else disposes.  Once
    closed or transferred, any use raises instead of handing LLVM a dangling pointer.
    """

    __slots__ = ("_ref", "_closed", "_owned", "_origin")

    def __init__(self, ref, *, owned: bool = True) -> None:
        if not ref:
            raise ValueError(f"{type(self).__name__}: NULL LLVM handle")
        self._ref = ref
        self._closed = False
        self._owned = owned
        self._origin = "".join(traceback.format_stack(limit=8)[:-1]) if _TRACK else None
        if _TRACK:
            with _live_lock:
                _live[id(self)] = self


    @property
    def _as_parameter_(self):
        if self._closed:
            raise ValueError(f"{type(self).__name__} was disposed or transferred; it can no longer be used")
        return self._ref

    @property
    def address(self) -> int:
        return address_of(self._ref)

    def _dispose(self) -> None:
        raise NotImplementedError

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        if not self._closed:
            if self._owned:
                self._dispose()
            self._closed = True

    def _release(self):
        """Give up ownership (the object now belongs to someone else); returns the raw ref."""
        if not self._owned:
            raise ValueError(f"a borrowed {type(self).__name__} cannot be given away")
        ref = self._as_parameter_
        self._closed = True
        return ref

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        if sys.is_finalizing():
            return  # libLLVM may already be unloaded; the OS reclaims the memory
        try:
            self.close()
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass


def live_owners() -> list[tuple[str, str | None]]:
    """Owners still alive (only recorded when GPUC_TRACK_LEAKS=1): (type name, creation stack)."""
    with _live_lock:
        return [(type(o).__name__, o._origin) for o in _live.values() if not o.closed and o._owned]
