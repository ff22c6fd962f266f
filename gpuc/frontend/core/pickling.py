"""Pickling @gpuc.kernel and @gpuc.func objects: by reference when importable, else by value from their source.

By value means what cloudpickle does for plain functions, from the source text rather than the
bytecode: the text of the `def` with its file name and first line (so that errors compiling it in
another process still point at the user's file:line:col), its closure values, the globals its code
names (transitively through nested code) and its defaults. Loading compiles that text again into a
Python function with the original line numbers, makes the text readable through `linecache` when
the file is not there, and wraps the function again. Compiled state (launchers, parsed source,
typing) is never carried: the loaded object compiles on first use.
"""

from __future__ import annotations

import __future__
import ast
import builtins
import dis
import functools
import importlib
import inspect
import io
import linecache
import pickle
import sys
import threading
import types
import weakref
from dataclasses import dataclass

from .functions import _PARSE_LOCK, Func, GpucFunction, Kernel

#: Modules that are a script or a notebook: what they define cannot be imported by name elsewhere.
_SCRIPT_MODULES = frozenset({"__main__", "__mp_main__"})
_FUTURE_FLAGS = functools.reduce(
    lambda flags, name: flags | getattr(__future__, name).compiler_flag, __future__.all_feature_names, 0)
_ATOMS = frozenset({type(None), bool, int, float, complex, str, bytes})
_GLOBAL_OPS = frozenset({"LOAD_GLOBAL", "STORE_GLOBAL", "DELETE_GLOBAL"})
_CLOSURE = "__gpuc_closure__"
_WRAPPERS = {"kernel": Kernel, "func": Func}
_NO_TYPE_PARAMS = {"type_params": []} if sys.version_info >= (3, 12) else {}

_lock = threading.Lock()
_gpuc_objects: dict[int, tuple[str, object]] | None = None
_stand_ins: "weakref.WeakKeyDictionary[types.FunctionType, _ByValue]" = weakref.WeakKeyDictionary()


def reduce(fn: GpucFunction):
    """`fn.__reduce__()`: a reference to re-import it, or the recipe and state to rebuild it."""
    py_func = getattr(fn, "py_func", None)
    if py_func is None:
        raise pickle.PicklingError(f"cannot pickle {fn!r}: it was derived from another gpuc object, not defined "
                                   "by a Python function; pickle that one and derive this again after loading")
    path = _importable(fn)
    if path is not None:
        return _lookup, path
    kind = "kernel" if isinstance(fn, Kernel) else "func"
    return _by_value(py_func, kind, tuple(getattr(fn, "options", {}).items()))


# -- pickling -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Recipe:
    """What rebuilds a Python function: its source text and where that text came from."""

    kind: str  # "kernel", "func" or "function" (a plain Python function)
    name: str
    qualname: str
    module: str
    filename: str
    first_line: int
    lines: tuple[str, ...]
    freevars: tuple[str, ...]
    flags: int  # the __future__ features the text was compiled with
    options: tuple = ()  # the decorator's options, as (name, value) pairs

    @property
    def title(self) -> str:
        return f"{self.kind} {self.module}.{self.qualname}"


def _by_value(py_func: types.FunctionType, kind: str, options: tuple = ()):
    code = py_func.__code__
    title = f"{kind} {py_func.__module__}.{py_func.__qualname__}"
    if py_func.__name__ == "<lambda>":
        raise pickle.PicklingError(f"cannot pickle {title} by value: lambdas have no source of their own; "
                                   "define it with def, or in an importable module")
    try:
        lines, first_line = inspect.getsourcelines(py_func)
    except (OSError, TypeError) as exc:
        raise pickle.PicklingError(f"cannot pickle {title} by value: its source is not available ({exc}); "
                                   "define it in a file or a notebook cell, or in an importable module") from None
    recipe = _Recipe(kind, py_func.__name__, py_func.__qualname__, py_func.__module__, code.co_filename, first_line,
                     tuple(lines), code.co_freevars, code.co_flags & _FUTURE_FLAGS, options)
    try:
        definition = _definition(recipe)
    except (SyntaxError, ValueError) as exc:
        raise pickle.PicklingError(f"cannot pickle {title} by value: its source does not parse as one def "
                                   f"({exc})") from None
    return _rebuild, (recipe,), _state(py_func, definition, title), None, None, _fill


def _state(py_func: types.FunctionType, definition: ast.FunctionDef, title: str) -> tuple:
    """The values the function uses: the globals its code (or its annotations) name, closure cells,
    defaults and annotations, each in a form pickle can carry."""
    namespace = py_func.__globals__
    names = sorted((_global_names(py_func.__code__) | _annotation_names(definition)) & namespace.keys())
    captured = {name: _portable(namespace[name], f"global {name!r} of {title}") for name in names}
    cells = {}
    for name, cell in zip(py_func.__code__.co_freevars, py_func.__closure__ or ()):
        try:
            value = cell.cell_contents
        except ValueError:  # a variable of the enclosing function not assigned yet
            continue
        cells[name] = _portable(value, f"closure variable {name!r} of {title}")
    defaults = _portable(py_func.__defaults__, f"a default argument of {title}")
    kwdefaults = {name: _portable(value, f"the default of {name!r} of {title}")
                  for name, value in (py_func.__kwdefaults__ or {}).items()} or None
    annotations = {name: _portable(value, f"the annotation of {name!r} of {title}")
                   for name, value in py_func.__annotations__.items()}
    return captured, cells, defaults, kwdefaults, annotations


def _global_names(code: types.CodeType) -> set[str]:
    names = {op.argval for op in dis.get_instructions(code) if op.opname in _GLOBAL_OPS}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _annotation_names(definition: ast.FunctionDef) -> set[str]:
    """Names in the annotations: gpuc evaluates them in the function's globals."""
    args = definition.args
    params = (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg)
    names = set()
    for node in [p.annotation for p in params if p is not None] + [definition.returns]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                node = ast.parse(node.value, mode="eval")
            except SyntaxError:
                continue
        if node is not None:
            names.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name))
    return names


def _portable(value, where: str):
    """`value` as pickle should carry it; a PicklingError naming `where` if it cannot."""
    if type(value) in _ATOMS or isinstance(value, GpucFunction):
        return value
    name = _gpuc_name(value)
    if name is not None:
        return _Reference(_gpuc_attribute, name)
    if isinstance(value, types.ModuleType):
        if sys.modules.get(value.__name__) is not value:
            raise pickle.PicklingError(f"cannot pickle {where}: module {value.__name__!r} cannot be imported by "
                                       "name in another process")
        return _Reference(importlib.import_module, value.__name__)
    if isinstance(value, types.FunctionType):
        return value if _importable(value) else _stand_in(value)
    if type(value) in (tuple, list):
        return type(value)(_portable(v, where) for v in value)
    try:
        _Probe(io.BytesIO(), pickle.HIGHEST_PROTOCOL).dump(value)
    except Exception as exc:  # noqa: BLE001 - whatever pickle raises, the message names the value
        raise pickle.PicklingError(f"cannot pickle {where}: {type(value).__name__} {_short(value)}: {exc}") from exc
    return value


class _Probe(pickle.Pickler):
    """Pickles a value to see that it can be; refuses classes and functions of a script, which pickle
    would carry by a reference that no other process can follow."""

    def reducer_override(self, obj):
        if isinstance(obj, (type, types.FunctionType)) and getattr(obj, "__module__", None) in _SCRIPT_MODULES:
            instead = "move it to a module" if isinstance(obj, type) else \
                "name it in the function itself, or move it to a module"
            raise pickle.PicklingError(f"{obj!r} is defined in {obj.__module__}, and pickle carries that by name "
                                       f"only, which another process cannot follow ({instead})")
        return NotImplemented


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _Reference:
    """Stands in for an object in a pickle: loaded, it becomes `load(arg)`."""

    __slots__ = ("load", "arg")

    def __init__(self, load, arg: str) -> None:
        self.load, self.arg = load, arg

    def __reduce__(self):
        return self.load, (self.arg,)


class _ByValue:
    """Stands in for a plain Python function that cannot be imported: pickled like a gpuc function by
    value. One per function, so that pickle's memo sees recursion through globals as one object."""

    __slots__ = ("function", "__weakref__")

    def __init__(self, function: types.FunctionType) -> None:
        self.function = weakref.ref(function)

    def __reduce__(self):
        return _by_value(self.function(), "function")


def _stand_in(function: types.FunctionType) -> _ByValue:
    with _lock:
        stand_in = _stand_ins.get(function)
        if stand_in is None:
            stand_in = _stand_ins[function] = _ByValue(function)
        return stand_in


def _importable(obj) -> tuple[str, str] | None:
    """(module, qualname) when that names `obj` itself in an imported module other than a script."""
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if module in _SCRIPT_MODULES or module not in sys.modules or not qualname or "<locals>" in qualname:
        return None
    try:
        found = _lookup(module, qualname)
    except AttributeError:
        return None
    return (module, qualname) if found is obj else None


def _gpuc_name(value) -> str | None:
    """The name of `value` among gpuc's attributes (its intrinsics, types, `gpuc.shared`, ...)."""
    global _gpuc_objects
    if _gpuc_objects is None:
        with _lock:
            if _gpuc_objects is None:
                gpuc = importlib.import_module("gpuc")
                _gpuc_objects = {id(v): (k, v) for k, v in vars(gpuc).items()
                                 if not k.startswith("_") and type(v) not in _ATOMS}
    found = _gpuc_objects.get(id(value))
    return found[0] if found is not None and found[1] is value else None


# -- loading ---------------------------------------------------------------------------------------------------


def _lookup(module: str, qualname: str):
    return functools.reduce(getattr, qualname.split("."), importlib.import_module(module))


def _gpuc_attribute(name: str):
    return getattr(importlib.import_module("gpuc"), name)


def _rebuild(recipe: _Recipe):
    """The function (wrapped as in its recipe) with empty globals and cells: `_fill` sets them, after
    pickle has memoized the object, so that they may refer back to it."""
    _remember_source(recipe)
    code = _code(recipe)
    namespace = {"__builtins__": builtins, "__name__": recipe.module}
    closure = tuple(types.CellType() for _ in code.co_freevars) or None
    function = types.FunctionType(code, namespace, recipe.name, None, closure)
    function.__qualname__ = recipe.qualname
    wrapper = _WRAPPERS.get(recipe.kind)
    return wrapper(function, dict(recipe.options)) if wrapper is not None else function


def _fill(obj, state: tuple) -> None:
    function = obj.py_func if isinstance(obj, GpucFunction) else obj
    captured, cells, defaults, kwdefaults, annotations = state
    function.__globals__.update(captured)
    for name, cell in zip(function.__code__.co_freevars, function.__closure__ or ()):
        if name in cells:
            cell.cell_contents = cells[name]
    function.__defaults__ = defaults
    function.__kwdefaults__ = kwdefaults
    function.__annotations__.update(annotations)  # the same dict update_wrapper gave a gpuc wrapper


@functools.lru_cache(maxsize=256)
def _code(recipe: _Recipe) -> types.CodeType:
    """The function's code, compiled from its text with its own file name and line numbers. A function
    with free variables is compiled inside a function that binds them, so that they stay cells."""
    definition = _definition(recipe)
    body = definition
    if recipe.freevars:
        params = ast.arguments(posonlyargs=[], args=[ast.arg(arg=name) for name in recipe.freevars], vararg=None,
                               kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
        body = ast.FunctionDef(name=_CLOSURE, args=params, body=[definition], decorator_list=[], returns=None,
                               lineno=definition.lineno, col_offset=0, end_lineno=definition.end_lineno,
                               end_col_offset=definition.end_col_offset, **_NO_TYPE_PARAMS)
    module = ast.fix_missing_locations(ast.Module(body=[body], type_ignores=[]))
    with _PARSE_LOCK:
        code = compile(module, recipe.filename, "exec", flags=recipe.flags, dont_inherit=True)
    for name in ([_CLOSURE] if recipe.freevars else []) + [definition.name]:
        code = next(c for c in code.co_consts if isinstance(c, types.CodeType) and c.co_name == name)
    if set(code.co_freevars) != set(recipe.freevars):
        raise pickle.UnpicklingError(f"cannot load {recipe.title}: its source uses the variables "
                                     f"{sorted(code.co_freevars)} of enclosing functions, the pickle carries "
                                     f"{sorted(recipe.freevars)} (was the file edited after it was imported?)")
    return code


def _definition(recipe: _Recipe) -> ast.FunctionDef:
    """The `def` in the recipe's text, with the line numbers and columns it has in its file."""
    text = "".join(recipe.lines)
    indented = text[:1] in (" ", "\t")
    with _PARSE_LOCK:
        tree = ast.parse("if True:\n" + text if indented else text)  # an indented def parses in a block
    definition = tree.body[0].body[0] if indented else tree.body[0]
    if not isinstance(definition, ast.FunctionDef):
        raise ValueError(f"the source of {recipe.qualname} starts with a {type(definition).__name__}")
    return ast.increment_lineno(definition, recipe.first_line - (2 if indented else 1))


def _remember_source(recipe: _Recipe) -> None:
    """Make the recipe's text the lines of its file for `inspect` and `linecache` (so for gpuc's error
    locations), unless the file is readable here and holds that text."""
    start, lines = recipe.first_line - 1, list(recipe.lines)
    if linecache.getlines(recipe.filename)[start:start + len(lines)] == lines:
        return
    with _lock:
        entry = linecache.cache.get(recipe.filename)
        # Entries without a modification time are texts registered by name (ours, a notebook's): add to them.
        known = list(entry[2]) if entry is not None and len(entry) == 4 and entry[1] is None else []
        known.extend("\n" for _ in range(len(known), start + len(lines)))
        known[start:start + len(lines)] = lines
        linecache.cache[recipe.filename] = (sum(map(len, known)), None, known, recipe.filename)
