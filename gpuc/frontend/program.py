"""A gpuc function as the compiler's input: `FunctionSource` (a function and an argument-type signature,
lowered by the passes) and its fingerprint.

What a compiled gpuc function depends on, as one digest: the disk cache's key for its source
(gpuc/compiler/cache.py). It covers the source text (with its file and first line: locations are
compiled into code) of the function and of every gpuc function it names, directly or through a
module attribute (funcs it calls, functions it points to with gpuc.deferred, functions it
differentiates), and the values of the globals and closure variables they read. A value the digest
cannot describe faithfully makes the function uncacheable (None), never a stale hit.
"""

from __future__ import annotations

import hashlib
import linecache
import types
from dataclasses import dataclass, field

import numpy as np

from ..errors import CompilationError
from .constructs.reverse import AdjointRequest
from .core.functions import _NOT_FOUND, GpucFunction, symbol_name
from .core.intrinsics import Marker
from .core.types import GType
from .core.typespec import parse_text, signature_type
from .passes.lowering import lower_into, lower_program

#: Modules whose attributes are gpuc's, Python's or NumPy's own (their versions are in the key or
#: fixed): named, not walked.
_LIBRARY_ROOTS = ("gpuc", "numpy", "math", "builtins", "cmath", "operator")


def fingerprint(function: GpucFunction, signature: tuple, kernel: bool) -> str | None:
    h = hashlib.sha256()
    h.update(repr((tuple(t.mangled for t in signature), kernel)).encode())
    seen, work = set(), [function]
    while work:
        fn = work.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        text = _source(fn)
        if text is None:
            return None  # no source to read: nothing to key on
        code = fn.py_func.__code__
        h.update(f"\x01{fn.__module__}.{fn.__qualname__}@{code.co_filename}:{code.co_firstlineno}\x01".encode())
        h.update(text.encode())
        for name, value in _referenced(fn):
            digest = _value(value, work)
            if digest is None:
                return None
            h.update(f"\x02{name}={digest}".encode())
    return h.hexdigest()


def _source(fn: GpucFunction) -> str | None:
    """The text the function's source is read from: its whole file where there is one (a change
    anywhere in the file counts; reading the file is much cheaper than finding the function in
    it), else the function's own lines."""
    filename = fn.py_func.__code__.co_filename
    lines = linecache.getlines(filename)
    if lines:
        return "".join(lines)
    try:
        return "".join(fn.source_info.lines)
    except CompilationError:
        return None


def _referenced(fn: GpucFunction):
    """(name, value) of each global or closure variable the function's code names, and of each
    attribute it names on a module of the user's it reads (`helpers.axpy`)."""
    names = sorted(_names(fn.py_func.__code__))
    found = []
    for name in names:
        value = fn.resolve(name)
        if value is _NOT_FOUND:
            continue
        found.append((name, value))
    modules = [(name, value) for name, value in found if isinstance(value, types.ModuleType) and not _library(value)]
    seen = {id(value) for _, value in modules}
    while modules:  # `helpers.axpy`, `pkg.sub.axpy`: what the code may reach through a module of the user's
        name, module = modules.pop()
        for attr in names:
            member = getattr(module, attr, _NOT_FOUND)
            if member is _NOT_FOUND:
                continue
            if isinstance(member, types.ModuleType):
                if not _library(member) and id(member) not in seen:
                    seen.add(id(member))
                    modules.append((f"{name}.{attr}", member))
                continue
            found.append((f"{name}.{attr}", member))
    return found


def _names(code: types.CodeType) -> set:
    names = set(code.co_names) | set(code.co_freevars)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _library(module: types.ModuleType) -> bool:
    return module.__name__.split(".")[0] in _LIBRARY_ROOTS


def _value(value, work: list, depth: int = 0) -> str | None:
    """A faithful description of a captured value, or None when there is none."""
    if depth > 8:
        return None
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return f"{type(value).__name__}:{value!r}"
    if isinstance(value, GpucFunction):
        work.append(value)
        return f"gpuc:{value.__module__}.{value.__qualname__}:{value.is_kernel}"
    if isinstance(value, (tuple, list, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, frozenset) else value
        parts = [_value(v, work, depth + 1) for v in items]
        return None if None in parts else f"{type(value).__name__}({','.join(parts)})"
    if isinstance(value, np.generic):
        return f"np.{value.dtype.str}:{value.tobytes().hex()}"
    if isinstance(value, np.dtype):
        return f"dtype:{value.str}"
    if isinstance(value, np.ndarray):
        return f"ndarray:{value.dtype.str}:{value.shape}:{hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()}"
    if isinstance(value, types.ModuleType):
        return f"module:{value.__name__}"
    if isinstance(value, AdjointRequest):  # a generated adjoint kernel's one statement: its primal, walked
        work.append(value.kernel)
        return f"adjoint:{value.kernel.__module__}.{value.kernel.__qualname__}:{value.shadows}:{value.schedule}"
    module = getattr(value, "__module__", None) or ""
    qualname = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    if module.split(".")[0] in _LIBRARY_ROOTS and qualname is not None:
        # gpuc's intrinsics, types and markers, NumPy's and Python's own callables and types
        return f"lib:{module}.{qualname}:{_library_object(value)}"
    if isinstance(value, types.FunctionType):
        from ..compiler.cache import code_digest
        return f"function:{module}.{qualname}:{code_digest(value)}"
    return None  # a class or an object of the user's: what the code reaches through it is not followed


def _library_object(value) -> str:
    """Library objects that carry data of their own (a gpuc.marker, a gpuc type) say it."""
    if isinstance(value, (GType, Marker)):
        return repr(value)
    return ""


@dataclass(frozen=True)
class FunctionSource:
    """A gpuc function and an argument-type signature: implements the compiler's source protocol
    (gpuc/compiler/source.py). Its symbol is derived from the function's qualified name and the
    signature only, so it is the same in every process."""

    generated_by_gpuc = True  # its IR holds only constructs gpuc's code generator emits (see compiler/driver.py)
    function: GpucFunction
    signature: tuple
    _symbol: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.function, GpucFunction):
            raise TypeError(f"compile a @gpuc.func or @gpuc.kernel, not {self.function!r}; decorate it first")
        sig = self.signature
        if isinstance(sig, str):  # "f64[::1], f64" as `gpuc compile --types` takes it
            sig = parse_text(sig)
        elif not isinstance(sig, (tuple, list)):
            sig = (sig,)
        object.__setattr__(self, "signature", tuple(signature_type(t) for t in sig))
        object.__setattr__(self, "_symbol", symbol_name(self.function, self.signature))

    @property
    def entry_name(self) -> str:
        return self._symbol

    @property
    def is_kernel(self) -> bool:
        return self.function.is_kernel

    def describe(self) -> str:
        kind = "kernel" if self.function.is_kernel else "func"
        return f"{kind} {self.function.__qualname__}({', '.join(map(str, self.signature))})"

    def fingerprint(self) -> str | None:
        """What the compiled code depends on (the disk cache's key; see `fingerprint`), or None."""
        return fingerprint(self.function, self.signature, self.function.is_kernel)

    def irgen(self, job, context, tm=None):
        """A new module with the function and every callee it reaches, and their `compiled` records."""
        return lower_program(self, job, context, tm)

    def irgen_into(self, job, module, compiled, tm=None):
        """The function (and the callees it reaches) lowered into `module`; returns its Function."""
        return lower_into(self, job, module, compiled)


GpucFunction.source_class = FunctionSource
