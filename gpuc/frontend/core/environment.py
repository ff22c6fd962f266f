"""The typing environment: what each variable holds at a point of a function body (a type and the
line that assigned it, or a Conflict or Partial where paths that join disagree), and `merge`, which
joins the environments of paths (branches, loop back edges)."""

from __future__ import annotations

from dataclasses import dataclass

from .types import ArrayType, FunctionPointerType, GType, TupleType, unify

@dataclass(frozen=True)
class Conflict:
    """A variable whose type differs between joining paths: (type, line) of two of its assignments."""

    first: tuple
    second: tuple


@dataclass(frozen=True)
class Partial:
    """A variable holding arrays or function pointers that is bound on only some of the joining paths: on
    the others there is no array or function to read (a scalar reads 0 there instead), so reading it is
    an error."""

    info: tuple


def _holds_array(t) -> bool:
    """Whether a value of type `t` has no default (an array or a function pointer, or a tuple holding one)."""
    return isinstance(t, (ArrayType, FunctionPointerType)) or isinstance(t, TupleType) and any(
        map(_holds_array, t.elements))


def different_types_hint(name: str, a: GType, b: GType) -> str:
    if isinstance(a, FunctionPointerType) or isinstance(b, FunctionPointerType):
        return f"give {name} the same type on every path: pointers to functions with the same parameter and " \
               "return types (and both to funcs or both to kernels)"
    return f"give {name} the same type on every path, e.g. with float(...) or int(...)"


def holds_array_only(t) -> bool:
    return isinstance(t, ArrayType) or isinstance(t, TupleType) and any(map(holds_array_only, t.elements))


def merge(envs):
    """Join variable environments (None = unreachable). A variable bound on some paths only keeps its
    type (it reads 0 on the others; an array becomes Partial); types `unify` as Numba unifies them (each
    path's value is converted where they meet), and those that do not become a Conflict."""
    envs = [e for e in envs if e is not None]
    if not envs:
        return None
    out = {}
    for env in envs:
        for name, info in env.items():
            info = info.info if isinstance(info, Partial) else info
            old = out.get(name)
            if old is None or old == info:
                out[name] = info
            elif isinstance(old, Conflict):
                continue
            elif isinstance(info, Conflict):
                out[name] = info
            else:
                joined = unify(old[0], info[0])
                out[name] = Conflict(old, info) if joined is None else (joined, old[1])
    for name, info in out.items():
        if isinstance(info, tuple) and _holds_array(info[0]) and any(
                isinstance(env.get(name), (Partial, type(None))) for env in envs):
            out[name] = Partial(info)
    return out


_CONFLICT = object()


def types_of(env):
    return None if env is None else {k: (_CONFLICT if isinstance(v, Conflict) else v if isinstance(v, Partial)
                                         else v[0]) for k, v in env.items()}


class Unbound(Exception):
    """A read of a variable with no type yet (or two), while a loop is still being typed: the loop's
    later rounds may bring its assignment along the back edge, so the statement is skipped this round."""
