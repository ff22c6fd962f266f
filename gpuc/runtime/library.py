"""`gpuc.load_library(path)`: a shared library that `gpuc compile --emit lib` built (aot.py), loaded
back with ctypes. Its kernels launch like JIT-compiled ones, `lib.saxpy[n](a, x, y, out)`, through
the CPU runtime's own launcher (argument checks, range splitting over threads: cpu.py); its funcs
are called with their arguments, `lib.norm(x)`. The library describes itself (the JSON string
METADATA_SYMBOL), so loading needs nothing but the file."""

from __future__ import annotations

import ctypes
import functools
import json
import os

import numpy as np

from ..abi import EntryABI, KernelSignature
from ..frontend.core.typespec import parse_types
from .cpu import CPULauncher, host_array
from .dispatch import signature_spec

#: The exported symbol holding the library's description (a NUL-terminated JSON text).
METADATA_SYMBOL = "gpuc_library"
#: The version of that description's format.
METADATA_FORMAT = 1

_ARG_CTYPES = {"i1": ctypes.c_bool, "i8": ctypes.c_int8, "i16": ctypes.c_int16, "i32": ctypes.c_int32,
               "i64": ctypes.c_int64, "float": ctypes.c_float, "double": ctypes.c_double, "ptr": ctypes.c_void_p}
_RETURN_CTYPES = {"bool": ctypes.c_bool, "int8": ctypes.c_int8, "uint8": ctypes.c_uint8, "int16": ctypes.c_int16,
                  "uint16": ctypes.c_uint16, "int32": ctypes.c_int32, "uint32": ctypes.c_uint32,
                  "int64": ctypes.c_int64, "uint64": ctypes.c_uint64, "float32": ctypes.c_float,
                  "float64": ctypes.c_double}


def parse_record_types(record: dict) -> list:
    """The gpuc types of a kernel's or func's parameters in a library's description."""
    return parse_types(", ".join(record["types"]))


class _Entry:
    """A library kernel as the CPU launcher sees a JIT module (cpu.JITModule): its range entry,
    ABI and argv slots; a library stays loaded for the life of the process, so it is never closed."""

    closed = False
    blocks = grid = False  # libraries export kernels without the block model (aot.py)
    bounds_record = None  # nor bounds checks: a library's code has no runtime to read their record
    polls = False  # so its loops do not poll the interrupt flag either

    def __init__(self, library: "Library", record: dict) -> None:
        self.library, self.entry, self.launch_entry = library, record["name"], record["range"]
        self.abi = EntryABI.from_record(record["entry"])
        self.slots = tuple(record["slots"])

    def function(self, restype, *argtypes, name: str | None = None):
        fn = ctypes.CFUNCTYPE(restype, *argtypes)((name or self.entry, self.library.dll))
        fn._gpuc_owner = self.library
        return fn


class LibraryKernel:
    """A kernel of a loaded library: `kernel[n](*args, threads=None)` or `kernel.launch(n, *args)`."""

    def __init__(self, library: "Library", record: dict) -> None:
        self.name, self.types = record["name"], tuple(parse_record_types(record))
        self.record = record
        signature = KernelSignature(signature_spec(self.types, exact=True))
        self._launcher = CPULauncher(_Entry(library, record), signature)

    def launch(self, n, *args, device: str | None = None, threads: int | None = None) -> None:
        """Run over the index space `n` (an int or a tuple of up to 3 ints) on the CPU's threads."""
        if device not in (None, "cpu"):
            raise ValueError(f"{self.name} is compiled for this machine's CPU; it cannot run on {device!r}")
        self._launcher(n, args, threads)

    def __getitem__(self, n):
        return functools.partial(self.launch, n)

    def __repr__(self) -> str:
        return f"<gpuc library kernel {self.name}({', '.join(self.record['types'])})>"


class LibraryFunc:
    """A func of a loaded library: called with its arguments, returns a NumPy scalar (or None)."""

    def __init__(self, library: "Library", record: dict) -> None:
        self.name, self.types, self.record = record["name"], tuple(parse_record_types(record)), record
        signature = KernelSignature(signature_spec(self.types, exact=True))
        self._converters = signature.flat_converters(host_array, (), self.name)
        self._signature = signature
        returns = record["returns"]
        self._fn = ctypes.CFUNCTYPE(_RETURN_CTYPES[returns] if returns else None,
                                    *(_ARG_CTYPES[t] for t in record["entry"]["types"]))((self.name, library.dll))
        self._result = np.dtype(returns).type if returns else None

    def __call__(self, *args):
        if len(args) != len(self._converters):
            raise self._signature.arity_error(args, self.name)
        values: list = []
        for convert, arg in zip(self._converters, args):
            values += convert(arg)
        result = self._fn(*values)
        return None if self._result is None else self._result(result)

    def __repr__(self) -> str:
        return f"<gpuc library func {self.name}({', '.join(self.record['types'])})>"


class Library:
    """A loaded gpuc library: its kernels and funcs by name, as attributes or items."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        try:
            # a file by its path (also a bare name in the current directory), else as the loader finds it
            self.dll = ctypes.CDLL(os.path.abspath(self.path) if os.path.exists(self.path) else self.path)
        except OSError as exc:
            raise OSError(f"cannot load {self.path}: {exc}") from None
        self.description = read_description(self.dll, self.path)
        self.kernels = {r["name"]: LibraryKernel(self, r) for r in self.description["kernels"]}
        self.funcs = {r["name"]: LibraryFunc(self, r) for r in self.description["funcs"]}

    def __getitem__(self, name: str):
        found = self.kernels.get(name) or self.funcs.get(name)
        if found is None:
            names = ", ".join(sorted([*self.kernels, *self.funcs])) or "nothing"
            raise KeyError(f"{self.path} has no kernel or func {name!r}; it has {names}")
        return found

    def __getattr__(self, name: str):
        if name.startswith("__") or name in ("kernels", "funcs", "description", "dll", "path"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError as exc:
            raise AttributeError(exc.args[0]) from None

    def __dir__(self):
        return [*super().__dir__(), *self.kernels, *self.funcs]

    def __repr__(self) -> str:
        return f"<gpuc library {self.path}: {', '.join([*self.kernels, *self.funcs])}>"


def read_description(dll: ctypes.CDLL, path: str) -> dict:
    """The JSON description a gpuc library exports (METADATA_SYMBOL), checked for its format."""
    try:
        text = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(dll, METADATA_SYMBOL)))
    except ValueError:
        raise ValueError(f"{path} is not a gpuc library: it exports no {METADATA_SYMBOL} description "
                         "(build one with gpuc compile FILE.py:NAME --types ... --emit lib)") from None
    description = json.loads(text)
    if description.get("format") != METADATA_FORMAT:
        raise ValueError(f"{path} was built by gpuc {description.get('gpuc', '?')} in library format "
                         f"{description.get('format')!r}; this gpuc reads format {METADATA_FORMAT}: build it again")
    return description


def load_library(path: str | os.PathLike) -> Library:
    """Load a library built by `gpuc compile ... --emit lib -o path` (docs/aot.md)."""
    return Library(path)
