"""Function pointers: `gpuc.deferred(f, ...)` and calls through a pointer (docs/frontend.md).

`deferred` types `f` for the requested signature in the same typing session (so recursion and cycles
through pointers reuse the recursive-call logic) but the module gets only a declaration of f's
symbol and the marker call `@gpuc.lookup(ptr @symbol)`; the gpuc.lookup plugin compiles f on demand.
"""

from __future__ import annotations

import ast

import numpy as np

from ...errors import CompilationError
from ...llvm import FunctionType
from ... import abi
from ..core import intrinsics, registry
from ..core.errors import UserError
from ..core.plans import CallPlan, Handler
from ..core.functions import _NOT_FOUND, GpucFunction
from ..core.types import (Array, ArrayType, FunctionPointerType, GType, NoneType, PyObject, ScalarType, TupleType, as_type,
                    boolean, holds_pointer, none, promote)
from ..core.types import an


class Deferred(Handler):
    """`gpuc.deferred(f, *args, kernel=False)`: a typed pointer to f compiled for the types of args."""

    name = "gpuc.deferred"
    keywords = True

    def type(self, typer, node):
        kernel = _kernel_flag(typer, node)
        if not node.args:
            raise UserError("gpuc.deferred(f, *args) needs the function to point to",
                            hint="write gpuc.deferred(f, x, n) or gpuc.deferred(f, (gpuc.float64, gpuc.int64))")
        target = _target(typer, node.args[0], kernel)
        signature, values = _signature(typer, node.args[1:])
        params = target.source_info.tree.args.args
        if len(params) != len(signature):
            raise UserError(f"{target.__qualname__} takes {len(params)} argument(s), but gpuc.deferred asks for "
                            f"a pointer taking {len(signature)}: ({', '.join(map(str, signature))})",
                            hint="pass one value (or, in one tuple, one type) per parameter of the function")
        for a, t in zip(node.args[1:] if values else node.args[1:2] * len(signature), signature):
            if isinstance(t, NoneType):
                raise UserError("None is not a parameter type", node=a)
            if isinstance(t, TupleType) and any(isinstance(e, ArrayType) for e in t.elements):
                raise UserError("tuples holding arrays cannot be passed to functions", node=a)
            if kernel and holds_pointer(t):
                raise UserError(f"a kernel cannot take the function pointer {t} as a parameter",
                                hint="kernels take arrays, numbers, bools and tuples of these", node=a)
        location = typer.typed.info.location(node)
        try:
            if kernel:  # kernels return nothing, also while one is still being typed
                callee, result = typer.session.function(target, signature), none
            else:
                callee, result = typer.callee_result(target, signature)
        except CompilationError as exc:
            raise exc.with_note(f"{target.__qualname__}({', '.join(map(str, signature))}) is requested here by "
                                "gpuc.deferred", location) from None
        typer.typed.requests.setdefault((target, signature), (callee, kernel, location))
        return CallPlan(FunctionPointerType(signature, result, kernel), signature, (callee, values))

    def lower(self, lw, node, plan):
        callee, values = plan.extra
        if values:  # evaluated as Python would, for what they do; only their types matter
            for a in node.args[1:]:
                if not lw.is_literal(a):
                    lw.expr(a)
        ptr = lw.ctx.ptr(0)
        lookup = lw.declare(abi.LOOKUP_MARKER, ptr, [ptr])
        return lw.b.call(lookup, [lw.program.functions[callee.symbol]])


class PointerCall(Handler):
    """`p(a, b)` for a function pointer p: an indirect call with the ABI's flattened parameters."""

    name = "a function pointer"

    def type(self, typer, node, ptype: FunctionPointerType):
        if ptype.kernel:
            raise UserError(f"a pointer to a kernel ({ptype}) cannot be called: kernels are launched, not called",
                            hint="point to a @gpuc.func to call it; a kernel pointer only keeps the kernel as "
                                 "an entry point of the module", node=node.func)
        if node.keywords:
            raise UserError("calls through a function pointer take positional arguments only",
                            node=node.keywords[0].value)
        if len(node.args) != len(ptype.params):
            raise UserError(f"this function pointer takes {len(ptype.params)} argument(s) "
                            f"({', '.join(map(str, ptype.params))}), but {len(node.args)} were given",
                            hint="pass one argument per parameter of the pointer's type")
        got = []
        for k, (a, want) in enumerate(zip(node.args, ptype.params)):
            t = typer.value_expr(a, "an argument")
            if not _passes(typer, a, t, want):
                raise UserError(f"argument {k + 1} of this call through {an(ptype)} is {an(t)}, but the pointer takes "
                                f"{an(want)}", hint="convert the argument, e.g. gpuc.float64(x) or int(n), or point "
                                "to a function specialized for this type", node=a)
            got.append(t)
        return CallPlan(ptype.result, tuple(got), ptype)

    def lower(self, lw, node, plan):
        ptype = plan.extra
        pointer = lw.expr(node.func)
        args = []
        for a, want in zip(node.args, ptype.params):
            args += lw.flatten(lw.operand(a, want), want)
        params = [p for t in ptype.params for p in lw.abi_params(t)]
        call = lw.b.call(pointer, args, fnty=FunctionType.get(lw.ltype(ptype.result), params))
        _call_site_attributes(call, ptype)
        if not lw.program.target.indirect_calls:  # where it is, for the error if it stays indirect
            call.set_string_metadata(abi.SITE_METADATA, str(lw.typed.info.location(node)))
        return None if ptype.result == none else call


registry.register_value_type(FunctionPointerType, PointerCall())
registry.register(intrinsics.deferred, Deferred(), public="deferred", group="function pointers")


def _passes(typer, node, t: GType, want: GType) -> bool:
    """Whether an argument of type `t` can be passed where the pointer takes a `want`: the same type,
    an array the parameter accepts, or a Python literal that converts (NumPy 2's weak promotion)."""
    if t == want or isinstance(want, ArrayType) and want.accepts(t):
        return True
    if typer.is_weak(node) and isinstance(t, ScalarType) and isinstance(want, ScalarType) \
            and promote(want, t, False, True) == want:
        typer.fit(node, want)
        return True
    return False


def _call_site_attributes(call, ptype: FunctionPointerType) -> None:
    """The ABI attributes of the definitions (zeroext bools, noundef data pointers) on an indirect call:
    code generation reads them from the call site when it does not know the callee."""
    index = 0  # the argument number, counting flattened parameters
    for t in ptype.params:
        names = abi.DATA_POINTER_ATTRIBUTES if isinstance(t, ArrayType) else \
            abi.BOOL_ATTRIBUTES if t == boolean else ()
        for name in names:
            call.param_attributes(index).add(name)
        index += abi.array_param_count(t.ndim) if isinstance(t, ArrayType) else 1
    if ptype.result == boolean:
        for name in abi.BOOL_ATTRIBUTES:
            call.return_attributes.add(name)


# -- what gpuc.deferred's arguments say ---------------------------------------------------------------

def _kernel_flag(typer, node: ast.Call) -> bool:
    kernel = False
    for kw in node.keywords:
        if kw.arg != "kernel":
            raise UserError(f"gpuc.deferred takes the keyword argument kernel=True/False only, not {kw.arg}=",
                            node=kw.value)
        typer.expr(kw.value)
        value = typer.typed.consts.get(id(kw.value))
        if type(value) is not bool:
            raise UserError("kernel= needs the constant True or False", node=kw.value)
        typer.consumed(kw.value)
        kernel = value
    return kernel


def _target(typer, node, kernel: bool) -> GpucFunction:
    """The function gpuc.deferred points to: a @gpuc.func, or a @gpuc.kernel with kernel=True."""
    t = typer.expr(node)
    value = t.value if isinstance(t, PyObject) else None
    if isinstance(value, GpucFunction):
        name = value.__qualname__
        if value.is_kernel and not kernel:
            raise UserError(f"{name} is a @gpuc.kernel: a pointer to it must say kernel=True",
                            hint=f"write gpuc.deferred({name}, ..., kernel=True) to keep it as an additional "
                                 "entry point, or point to a @gpuc.func", node=node)
        if kernel and not value.is_kernel:
            raise UserError(f"kernel=True needs a @gpuc.kernel, but {name} is a @gpuc.func",
                            hint="leave out kernel=True to point to a func", node=node)
        return value
    if isinstance(t, FunctionPointerType):
        what, hint = f"the function pointer {t}", "call the pointer, or pass it on, directly"
    elif isinstance(t, PyObject) and callable(value) and hasattr(value, "__code__"):
        what, hint = f"the Python function {value.__qualname__}", "decorate it with @gpuc.func"
    elif isinstance(t, PyObject):
        what, hint = t, "wrap what it computes in a @gpuc.func and point to that"
    else:
        what, hint = f"{an(t)} value", "pass the @gpuc.func itself as the first argument"
    raise UserError(f"gpuc.deferred points to @gpuc.func functions, not to {what}", hint=hint, node=node)


def _signature(typer, args) -> tuple[tuple, bool]:
    """(the pointer's parameter types, whether they come from argument values). One tuple of types is
    the signature itself; otherwise each argument's type is a parameter type (literals: their default)."""
    if len(args) == 1:
        types = _type_tuple(typer, args[0])
        if types is not None:
            return types, False
    signature = []
    for a in args:
        if _is_type(_static(typer, a)):
            raise UserError("gpuc.deferred takes argument values, or one tuple of types, not types one by one",
                            hint="write the signature as a tuple: gpuc.deferred(f, (gpuc.float64, gpuc.int64)), "
                                 "and (gpuc.float64,) for one parameter", node=a)
        t = typer.value_expr(a, "an argument of gpuc.deferred")
        typer.fit(a, t)
        signature.append(t)
    return tuple(signature), True


def _type_tuple(typer, node) -> tuple | None:
    """The types a tuple of types stands for (written in place or named), None if `node` is no such tuple."""
    value = _static(typer, node)
    if not isinstance(value, tuple):
        return None
    kinds = [_is_type(e) for e in value]
    if value and not any(kinds):
        return None  # a tuple of values: one argument of a tuple type
    if not all(kinds):
        bad = next(e for e, k in zip(value, kinds) if not k)
        raise UserError(f"a signature tuple holds gpuc types only, not {getattr(bad, '__qualname__', None) or bad!r}",
                        hint="write gpuc.deferred(f, (gpuc.float64, gpuc.int64)), or pass values: "
                             "gpuc.deferred(f, x, n)")
    try:
        return tuple(as_type(e) for e in value)
    except TypeError as exc:
        raise UserError(str(exc)) from None


def _is_type(obj) -> bool:
    if isinstance(obj, GType):
        return not isinstance(obj, (NoneType, PyObject))
    if obj is bool or obj is int or obj is float or isinstance(obj, np.dtype):
        return True
    if isinstance(obj, type) and issubclass(obj, np.generic):
        return True
    return isinstance(obj, tuple) and bool(obj) and all(map(_is_type, obj))


def _static(typer, node):
    """The compile-time object `node` names (a global or closure variable, an attribute of one, a tuple
    of such, `gpuc.Array[...]`), or _NOT_FOUND when it is computed at run time."""
    if isinstance(node, ast.Name):
        return _NOT_FOUND if node.id in typer.locals else typer.typed.function.resolve(node.id)
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Attribute):
        base = _static(typer, node.value)
        return _NOT_FOUND if base is _NOT_FOUND else getattr(base, node.attr, _NOT_FOUND)
    if isinstance(node, ast.Tuple):
        elements = [_static(typer, e) for e in node.elts]
        return _NOT_FOUND if any(e is _NOT_FOUND for e in elements) else tuple(elements)
    if isinstance(node, ast.Subscript) and _static(typer, node.value) is Array:
        key = _static(typer, node.slice)
        if key is _NOT_FOUND:
            return _NOT_FOUND
        try:
            return Array[key]
        except TypeError as exc:
            raise UserError(str(exc), node=node) from None
    return _NOT_FOUND
