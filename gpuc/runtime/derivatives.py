"""`gpuc.derivative`, `gpuc.jvp`, `gpuc.grad`, `gpuc.value_and_grad` and `gpuc.vjp` called from Python with numbers (docs/autodiff.md).

Each (kind, f, argument types) gets one generated one-item kernel that calls the frontend's
`derivative`/`jvp` on its parameters and stores the result's floats into a float64 array; it is
compiled for the host once, through the normal driver and the CPU launcher, and run on one thread.
"""

from __future__ import annotations

import linecache
import re
import sys
import threading

import numpy as np

from .. import errors as _errors
from ..errors import CompilationError, SourceLocation, user_facing
from ..frontend.constructs import autodiff as _frontend
from ..frontend.constructs import reverse as _reverse_frontend
from ..frontend.passes.inference import Typing
from ..frontend.core.functions import GpucFunction, kernel
from ..frontend.core.types import GType, TupleType, an
from ..targets import NativeTarget
from .dispatch import typeof

_CACHE: dict = {}  # (kind, f, argument types) -> (kernel, the result's float leaves, the result type)
_LOCK = threading.Lock()


@user_facing
def derivative(f, x, *consts):
    _check_function(f, "derivative", 1 + len(consts))
    if isinstance(x, tuple):
        raise _error("x of gpuc.derivative is one float; for tuples of floats use gpuc.jvp",
                     "write gpuc.jvp(f, ((x, y),), ((1.0, 0.0),)) for the derivative along the tuple's first element")
    args = (_float(x, "x"),) + consts
    return _run("derivative", f, args, len(args))


@user_facing
def jvp(f, primals, tangents):
    if not isinstance(primals, tuple) or not isinstance(tangents, tuple):
        raise _error("gpuc.jvp(f, primals, tangents) takes the primals and the tangents as tuples",
                     "write gpuc.jvp(f, (x,), (1.0,)) for one parameter")
    _check_function(f, "jvp", len(primals))
    if len(tangents) != len(primals):
        raise _error(f"gpuc.jvp has {len(primals)} primal(s) but {len(tangents)} tangent(s)",
                     "give one tangent per primal, of the same structure")
    primals = tuple(_float(p, "a primal") for p in primals)
    tangents = tuple(_like(t, p) for t, p in zip(tangents, primals))
    return _run("jvp", f, primals + tangents, len(primals))


@user_facing
def grad(f, *args):
    return _reverse("grad", f, args)


@user_facing
def value_and_grad(f, *args):
    return _reverse("value_and_grad", f, args)


@user_facing
def vjp(f, primals, cotangent):
    if not isinstance(primals, tuple):
        raise _error("gpuc.vjp(f, primals, cotangent) takes the primals as a tuple",
                     "write gpuc.vjp(f, (x,), 1.0) for one parameter")
    _check_function(f, "vjp", len(primals))
    primals = tuple(_float(p, "a primal") for p in primals)
    try:
        signature = tuple(typeof(a, k) for k, a in enumerate(primals))
    except TypeError as exc:
        raise _error(f"gpuc.vjp: {exc}", None) from None
    returned = Typing(NativeTarget()).function(f, signature).return_type
    return _run("vjp", f, primals + (_cotangent(cotangent, returned),), len(primals))


def _reverse(kind: str, f, args: tuple):
    _check_function(f, kind, len(args))
    args = tuple(_float(a, "an argument") if _is_float_like(a) else a for a in args)
    return _run(kind, f, args, len(args))


def _is_float_like(value) -> bool:
    if isinstance(value, tuple):
        return bool(value) and all(map(_is_float_like, value))
    return isinstance(value, (float, np.floating))


def _cotangent(value, t: GType):
    """A cotangent given from Python, converted to the structure and float types of f's result."""
    if isinstance(t, TupleType):
        if not isinstance(value, tuple) or len(value) != len(t.elements):
            raise _error(f"the cotangent {value!r} does not have the structure of the result ({t})", None)
        return tuple(_cotangent(v, e) for v, e in zip(value, t.elements))
    if isinstance(value, (tuple, bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise _error(f"the cotangent {value!r} does not match the result ({t}): it is a number of the result's "
                     "structure", None)
    return np.dtype(t.name).type(value)


def _run(kind: str, f, args: tuple, count: int):
    """Compile (once per signature) and run the wrapper kernel; the result as Python numbers."""
    try:
        types = tuple(typeof(a, k) for k, a in enumerate(args))
    except TypeError as exc:
        raise _error(f"gpuc.{kind}: {exc}", None) from None
    key = (kind, f, types)
    entry = _CACHE.get(key)
    if entry is None:
        with _LOCK:
            entry = _CACHE.get(key) or _CACHE.setdefault(key, _wrapper(kind, f, types, count))
    wrapper, leaves, result = entry
    out = np.zeros(max(len(leaves), 1))
    wrapper.launch(1, out, *args, device="cpu", threads=1)
    values = iter(out.tolist())
    return _rebuild(result, values)


def _wrapper(kind: str, f, types: tuple, count: int):
    """The generated kernel for `f` and these argument types (its source is kept in linecache so the
    frontend reads it like any other function's)."""
    signature = types if kind in ("derivative", "grad", "value_and_grad") else types[:count]
    returned = Typing(NativeTarget()).function(f, signature).return_type  # f's own errors, located in f
    if not _frontend.is_float_structure(returned):
        raise _error(f"{f.__qualname__}({', '.join(map(str, signature))}) returns {an(returned)}: gpuc.{kind} "
                     "differentiates functions returning a float or a tuple of floats", None)
    params = [f"a{k}" for k in range(len(types))]
    if kind in ("grad", "value_and_grad"):
        if isinstance(returned, TupleType):
            raise _error(f"{f.__qualname__} returns {an(returned)}: gpuc.{kind} differentiates functions returning "
                         "one float", "for a tuple result use gpuc.vjp(f, primals, cotangent)")
        grads = TupleType(tuple(t for t in types if _frontend.is_float_structure(t)))
        if not grads.elements:
            raise _error(f"gpuc.{kind} differentiates with respect to the float arguments, and none was given",
                         "pass at least one float (or tuple of floats); integers and arrays are constants")
        result = grads if kind == "grad" else TupleType((returned, grads))
        call = f"{kind}(f, {', '.join(params)})"
    elif kind == "vjp":
        result = TupleType((returned, TupleType(signature)))
        call = f"vjp(f, ({''.join(p + ', ' for p in params[:count])}), {params[count]})"
    elif kind == "derivative":
        result = returned
        call = f"derivative(f, {', '.join(params)})"
    else:
        result = TupleType((returned, returned))
        primals, tangents = ("".join(p + ", " for p in part) for part in (params[:count], params[count:]))
        call = f"jvp(f, ({primals}), ({tangents}))"
    leaves = _leaves(result, "r")
    name = kind + "_of_" + re.sub(r"\W", "_", f.__name__)  # what traces and errors call the wrapper
    lines = [f"def {name}(out, {', '.join(params)}):\n", f"    r = {call}\n"]
    lines += [f"    out[{k}] = {leaf}\n" for k, leaf in enumerate(leaves)]
    # Named by what it is made from, the same in every process: the disk cache keys it by its source.
    filename = f"<gpuc.{kind} of {f.__module__}.{f.__qualname__}, {', '.join(t.mangled for t in types)}>"
    linecache.cache[filename] = (sum(map(len, lines)), None, lines, filename)
    namespace = {"derivative": _frontend.derivative, "jvp": _frontend.jvp, "grad": _reverse_frontend.grad,
                 "value_and_grad": _reverse_frontend.value_and_grad, "vjp": _reverse_frontend.vjp, "f": f}
    exec(compile("".join(lines), filename, "exec"), namespace)
    return kernel(namespace[name]), leaves, result


def _leaves(t: GType, path: str) -> list[str]:
    if isinstance(t, TupleType):
        return [leaf for k, e in enumerate(t.elements) for leaf in _leaves(e, f"{path}[{k}]")]
    return [path]


def _rebuild(t: GType, values):
    if isinstance(t, TupleType):
        return tuple(_rebuild(e, values) for e in t.elements)
    return next(values)


def _check_function(f, kind: str, count: int) -> None:
    if not isinstance(f, GpucFunction) or f.is_kernel:
        what = f"the kernel {f.__qualname__}" if isinstance(f, GpucFunction) else repr(f)
        raise _error(f"gpuc.{kind} differentiates @gpuc.func functions, not {what}",
                     "decorate the function with @gpuc.func")
    params = f.source_info.tree.args.args
    if len(params) != count:
        raise _error(f"{f.__qualname__} takes {len(params)} argument(s), but gpuc.{kind} passes it {count}", None)


def _float(value, what: str):
    """A float variable: a Python float or int (as a float64), a NumPy float32/float64, or a tuple of them."""
    if isinstance(value, tuple) and value:
        return tuple(_float(v, what) for v in value)
    if isinstance(value, (np.float32, np.float64)):
        return value
    if isinstance(value, (int, float, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return float(value)
    raise _error(f"{what} of a derivative must be a float (or for jvp a tuple of floats), not {value!r}",
                 "pass a Python float, or a NumPy float32/float64")


def _like(tangent, primal):
    """A tangent converted to its primal's structure and float type."""
    if isinstance(primal, tuple):
        if not isinstance(tangent, tuple) or len(tangent) != len(primal):
            raise _error(f"the tangent {tangent!r} does not have the structure of its primal {primal!r}", None)
        return tuple(_like(t, p) for t, p in zip(tangent, primal))
    if isinstance(tangent, tuple) or isinstance(tangent, (bool, np.bool_)) or \
            not isinstance(tangent, (int, float, np.integer, np.floating)):
        raise _error(f"the tangent {tangent!r} does not match its primal {primal!r}: a tangent is a number "
                     "of the primal's structure", None)
    return type(primal)(tangent)


def _error(message: str, hint: str | None) -> CompilationError:
    """An error located at the Python line that called gpuc.derivative / gpuc.jvp."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename in (__file__, _frontend.__file__,
                                                            _reverse_frontend.__file__, _errors.__file__):
        frame = frame.f_back
    location = SourceLocation(frame.f_code.co_filename, frame.f_lineno, 1) if frame is not None else None
    return CompilationError(message, location, hint)


_frontend.host = sys.modules[__name__]
