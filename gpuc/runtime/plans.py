"""Launch plans: for one argument-type signature of a CPU launcher, one generated function that checks a
launch's arguments and packs the launch wrapper's argv, so a warm launch costs about a microsecond.

A plan is made from the arguments of a launch that the full path (typing, the launcher's converters)
accepted. Its function takes the next launch's argument tuple and returns the argv bytes, or None when
the arguments are not exactly of the kind the plan was made for or would fail a check: then the full
path runs and raises its own error, so a plan never accepts what the full path refuses and never
words an error itself. What a plan checks is what picks the specialization (the Python type of each
scalar, each array's exact type, dtype, rank and C-contiguity, a tuple's element types) and what the
converters check of values (an array the kernel may write is writable, strides are whole items, an
integer fits its slot); the data pointer, shape and strides are read anew at every launch.
"""

from __future__ import annotations

import ctypes
import sys

import numpy as np

from ..abi import ArrayParam, ComplexParam, ScalarParam, TupleParam
from .cpu import _ONE_CALL, _SIZES, items_of, launch_marshalled

#: NumPy's flags (ndarray.flags.num) a plan tests.
_C_CONTIGUOUS, _WRITEABLE = 0x0001, 0x0400
#: The most arguments a plan is made for (beyond, launches take the full path).
MAX_ARGUMENTS = 64
_INT64 = (-(1 << 63), (1 << 63) - 1)


def _data_address_expression() -> str:
    """How generated code reads an array's data pointer: from the array object itself where NumPy's
    public struct layout (PyArrayObject_fields: the object header, then `char *data`) is the one this
    process has, checked here on arrays with and without an offset; else through `ndarray.ctypes`."""
    if sys.implementation.name == "cpython":
        read, offset = ctypes.c_void_p.from_address, object.__basicsize__
        base = np.arange(8.0)
        probes = (base, base[3:], base[::-2], np.zeros((2, 3), np.uint8)[1:], np.empty(0))
        try:
            if all(read(id(a) + offset).value == a.ctypes.data for a in probes):
                return f"_read(_id({{a}}) + {offset}).value"
        except (ValueError, OSError):  # pragma: no cover - an unexpected layout
            pass
    return "{a}.ctypes.data"  # pragma: no cover


_DATA = _data_address_expression()
_NAMESPACE = {"_read": ctypes.c_void_p.from_address, "_id": id, "_ndarray": np.ndarray}


class Plan:
    """A CPU launcher and the functions generated for one argument-type signature."""

    __slots__ = ("launcher", "marshal", "launch", "source", "kinds")

    def __init__(self, launcher, marshal, launch, source: str, kinds: tuple) -> None:
        #: `marshal(args)`: the argv, or None. `launch(n, args, threads, block, shared)`: runs the launch
        #: (as `launcher.run`) and returns True, or returns None without running anything.
        #: `kinds`: what the plan takes of each argument (a type, or an array's dtype and rank).
        self.launcher, self.marshal, self.launch, self.source, self.kinds = launcher, marshal, launch, source, kinds


def make_plan(launcher, args) -> Plan | None:
    """The plan of `launcher` (a CPULauncher the full path picked and ran for `args`) for launches with
    arguments of the kind of `args`; None where no plan is made (such launches take the full path)."""
    params = launcher.signature.params
    if len(args) != len(params) or len(args) > MAX_ARGUMENTS:
        return None
    lines, values = [], []
    namespace = dict(_NAMESPACE, _pack=launcher._pack)
    for i, (param, arg, convert) in enumerate(zip(params, args, launcher._converters)):
        a = f"a{i}"
        if isinstance(param, ArrayParam):
            if not _array_lines(i, param, arg, lines, values, namespace):
                return None
        elif isinstance(param, (TupleParam, ComplexParam)) or not isinstance(param, ScalarParam):
            kind = _kind(arg)
            if kind is None:
                return None
            namespace[f"K{i}"], namespace[f"C{i}"] = kind, convert
            lines.append(f"    if _kind({a}) != K{i}:\n        return None")
            lines.append(f"    try:\n        v{i} = C{i}({a})\n    except Exception:\n        return None")
            values.append(f"*v{i}")
            namespace["_kind"] = _kind
        else:
            kind = type(arg)
            if kind not in _SCALAR_TYPES:
                return None
            namespace[f"T{i}"] = kind
            lines.append(f"    if type({a}) is not T{i}:\n        return None")
            if param.llvm_type == "double" and issubclass(kind, float):
                values.append(a)  # a float, as the converter's float(value) would give
            elif param.llvm_type == "i64" and kind is int:
                namespace[f"C{i}"] = convert  # beyond int64: the converter's range and wrapping
                lines.append(f"    if not {_INT64[0]} <= {a} <= {_INT64[1]}:\n        try:\n"
                             f"            {a}, = C{i}({a})\n        except Exception:\n            return None")
                values.append(a)
            else:
                namespace[f"C{i}"] = convert
                lines.append(f"    try:\n        v{i} = C{i}({a})\n    except Exception:\n        return None")
                values.append(f"*v{i}")
    names = [f"a{i}" for i in range(len(args))]
    unpack = f"    {', '.join(names)}, = args\n" if names else ""
    checks = (f"    if len(args) != {len(args)}:\n        return None\n{unpack}" + "".join(line + "\n" for line in lines)
              + f"    argv = _pack({', '.join(values)})\n")
    # launch: for a range wrapper and an int n, one call on this thread where launch_marshalled would
    # make just that call (n below _ONE_CALL, the default thread count), else launch_marshalled itself,
    # as the launcher's run would call it (one frame less before the threads start); else the launcher's run.
    small = "" if launcher.blocks else (
        "    if n.__class__ is int and block is None:\n"
        "        if _jit.closed:\n            return _run(n, argv, threads, block=block, shared=shared)\n"
        "        if 0 < n < _ONE_CALL and threads is None:\n"
        "            _fn(argv, 0, n, _sizes(n, 1, 1))\n        else:\n"
        "            _marshalled(_fn, argv, n, threads)\n        return True\n")
    # a launcher compiled without streaming stores takes the launches too small to stream one, no others
    limited = "" if launcher.item_limit is None else (
        f"    if (n if n.__class__ is int else _items(n)) >= {launcher.item_limit}:\n        return None\n")
    source = (f"def marshal(args):\n{checks}    return argv\n\n\n"
              f"def launch(n, args, threads, block, shared):\n{limited}{checks}{small}"
              "    _run(n, argv, threads, block=block, shared=shared)\n    return True\n")
    namespace.update(_ONE_CALL=_ONE_CALL, _jit=launcher.module.jit, _fn=launcher._fn, _sizes=_SIZES.pack, _items=items_of,
                     _run=launcher.run, _marshalled=launch_marshalled)
    exec(compile(source, f"<gpuc launch plan of @{launcher.module.entry}>", "exec"), namespace)  # noqa: S102
    # taken out of their own globals: no reference cycle keeps a dropped kernel's JIT alive
    return Plan(launcher, namespace.pop("marshal"), namespace.pop("launch"), source, kinds_of(args))


def kinds_of(args) -> tuple:
    """What a plan made from `args` takes of each argument (a type, or an array's dtype, rank and the flags
    a plan tests)."""
    return tuple((a.dtype, a.ndim, a.flags.num & (_C_CONTIGUOUS | _WRITEABLE)) if type(a) is np.ndarray
                 else _kind(a) for a in args)


def _array_lines(i: int, param: ArrayParam, arg, lines: list, values: list, namespace: dict) -> bool:
    """The checks and argv values of array argument `i`; False if no plan can take it."""
    dtype = np.dtype(param.dtype.name)  # NumPy's one object of this dtype: plans compare by identity
    size = dtype.itemsize
    if type(arg) is not np.ndarray or arg.dtype is not dtype or size & (size - 1):
        return False
    a, k = f"a{i}", param.ndim
    namespace[f"D{i}"] = dtype
    mask = _C_CONTIGUOUS | (_WRITEABLE if param.written else 0)
    want = (_C_CONTIGUOUS if param.layout == "C" else 0) | (_WRITEABLE if param.written else 0)
    shift = size.bit_length() - 1
    lines.append(f"    if type({a}) is not _ndarray or {a}.dtype is not D{i} or {a}.ndim != {k} "
                 f"or {a}.flags.num & {mask} != {want}:\n        return None")
    lines.append(f"    h{i} = {a}.shape\n    s{i} = {a}.strides")
    if size > 1:
        strides = " | ".join(f"s{i}[{d}]" for d in range(k))
        lines.append(f"    if ({strides}) & {size - 1}:\n        return None")
    values.append(_DATA.format(a=a))
    values += [f"h{i}[{d}]" for d in range(k)]
    values += [f"s{i}[{d}] >> {shift}" if shift else f"s{i}[{d}]" for d in range(k)]
    return True


#: The Python types whose values a plan takes as scalars: typing picks a kernel's parameter type
#: from the type alone (gpuc/runtime/dispatch.py: typeof).
_SCALAR_TYPES = frozenset({bool, int, float, complex, np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32,
                           np.uint32, np.int64, np.uint64, np.float16, np.float32, np.float64, np.complex64,
                           np.complex128})


def _kind(value):
    """What typing reads of a tuple or complex argument: its type, and for tuples their elements' kinds."""
    kind = type(value)
    if kind is tuple:
        return tuple(_kind(v) for v in value)
    return kind if kind in _SCALAR_TYPES else None


__all__ = ["MAX_ARGUMENTS", "Plan", "kinds_of", "make_plan"]
