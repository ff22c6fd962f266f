"""Forward-mode derivatives in kernels and funcs: `gpuc.derivative` and `gpuc.jvp` (docs/autodiff.md).

The frontend only asks: a call of either lowers to a `gpuc.deferred`-style pointer to f
(`call ptr @gpuc.lookup(ptr @f)`) and one call of the marker

    {R, R} @gpuc.autodiff.fwd.<MASK>.<SUFFIX>(ptr %f, <f's flattened args>, <one tangent per active arg>)

where R is f's LLVM result type, MASK has one character per flattened parameter of f ("1" active,
"0" constant) and SUFFIX mangles the marker's function type. The built-in autodiff plugin builds the
tangent function from f's optimized IR and replaces the call with it; the result is (value, tangent).

Called from Python with numbers, both compile once per signature for the host (gpuc.runtime installs
`host`, which sits above the frontend in the layering).
"""

from __future__ import annotations

import ast
import re
import sys

from ...errors import CompilationError, SourceLocation
from ...llvm import FunctionType
from ... import abi
from ..core import registry
from ..core.errors import UserError
from ..core.plans import CallPlan, Handler
from ..core.functions import GpucFunction
from ..numeric.complex import refuse_in_derivative
from ..core.types import ArrayType, FunctionPointerType, GType, PyObject, ScalarType, TupleType, float64, none
from ..core.types import an

#: Every marker the frontend emits starts with this; the autodiff plugin claims the prefix.
MARKER_PREFIX = abi.FORWARD_MARKER_PREFIX

#: The Python-level entry, set by gpuc.runtime: an object with derivative(f, x, *consts) and
#: jvp(f, primals, tangents) that compile for the host and return numbers.
host = None


def derivative(f, x, *consts):
    """d f(x, *consts) / d x for a float scalar x; the other arguments are constants.

    Inside kernels and funcs it is computed by the compiled derivative of f; called from Python with
    numbers, f is compiled once per signature for the host and the value is returned."""
    return _host("derivative")(f, x, *consts)


def jvp(f, primals, tangents):
    """(f(*primals), the derivative of f at primals in the direction tangents): primals and tangents
    are tuples of the same structure holding float scalars and tuples of them."""
    return _host("jvp")(f, primals, tangents)


def _host(name: str):
    if host is None:
        frame = sys._getframe(2)
        raise CompilationError(f"gpuc.{name}(...) from Python needs gpuc's runtime: import gpuc",
                               SourceLocation(frame.f_code.co_filename, frame.f_lineno, 1))
    return getattr(host, name)


def is_float_structure(t: GType) -> bool:
    """A float scalar, or a non-empty tuple of float structures: what derivatives are taken of and in."""
    if isinstance(t, ScalarType):
        return t.is_float
    return isinstance(t, TupleType) and bool(t.elements) and all(map(is_float_structure, t.elements))


class Derivative(Handler):
    """`gpuc.derivative(f, x, *consts)`: the marker with x active and tangent 1, then the tangent part."""

    name = "gpuc.derivative"

    def type(self, typer, node):
        if len(node.args) < 2:
            raise UserError(f"gpuc.derivative(f, x, *consts) takes the function and the point x, but "
                            f"{len(node.args)} argument(s) were given", hint="write gpuc.derivative(f, x)")
        target = _function(typer, node.args[0], self.name)
        _arity(target, len(node.args) - 1, self.name,
               "pass x and then one constant per remaining parameter of the function")
        x = _float_leaf(typer, node.args[1], "x, the variable of gpuc.derivative")
        consts = tuple(_argument(typer, a) for a in node.args[2:])
        signature = (x, *consts)
        callee, result = _callee(typer, node, target, signature, self.name)
        return CallPlan(result, signature, (callee, (True,) + (False,) * len(consts)))

    def lower(self, lw, node, plan):
        callee, active = plan.extra
        x = plan.args[0]
        args = [_value(lw, node.args[1], x)] + [_value(lw, a, t) for a, t in zip(node.args[2:], plan.args[1:])]
        pair = _emit(lw, node, callee, plan.args, active, args, [lw.const(x, 1.0)], plan.result)
        return lw.b.extract_value(pair, 1)


class JVP(Handler):
    """`gpuc.jvp(f, (x, y, ...), (dx, dy, ...))`: every argument active; the (value, tangent) pair."""

    name = "gpuc.jvp"

    def type(self, typer, node):
        if len(node.args) != 3:
            raise UserError(f"gpuc.jvp(f, primals, tangents) takes 3 arguments, but {len(node.args)} were given",
                            hint="write gpuc.jvp(f, (x, y), (dx, dy)), with one-element tuples (x,) and (dx,) "
                                 "for one parameter")
        target = _function(typer, node.args[0], self.name)
        signature = _primals(typer, node.args[1])
        _arity(target, len(signature), self.name, "pass one primal (and one tangent) per parameter, in tuples")
        _tangents(typer, node.args[2], signature)
        callee, result = _callee(typer, node, target, signature, self.name)
        return CallPlan(TupleType((result, result)), signature, (callee, (True,) * len(signature)))

    def lower(self, lw, node, plan):
        callee, active = plan.extra
        primals, tangents = (_values(lw, a, plan.args) for a in node.args[1:])
        return _emit(lw, node, callee, plan.args, active, primals, tangents, plan.result.elements[0])


# -- typing --------------------------------------------------------------------------------------------

def _function(typer, node, api: str) -> GpucFunction:
    """The @gpuc.func that `api` differentiates."""
    t = typer.expr(node)
    value = t.value if isinstance(t, PyObject) else None
    if isinstance(value, GpucFunction) and not value.is_kernel:
        return value
    if isinstance(value, GpucFunction):
        what, hint = f"the kernel {value.__qualname__}", "kernels return nothing: differentiate a @gpuc.func"
    elif isinstance(t, FunctionPointerType):
        what, hint = f"a function pointer ({t})", f"pass the @gpuc.func itself to {api}"
    elif isinstance(t, PyObject) and callable(value) and hasattr(value, "__code__"):
        what, hint = f"the Python function {value.__qualname__}", "decorate it with @gpuc.func"
    elif isinstance(t, PyObject):
        what, hint = t, "wrap what it computes in a @gpuc.func and differentiate that"
    else:
        what, hint = f"{an(t)} value", f"pass the @gpuc.func to differentiate as the first argument of {api}"
    raise UserError(f"{api} differentiates @gpuc.func functions, not {what}", hint=hint, node=node)


def _arity(target: GpucFunction, n: int, api: str, hint: str) -> None:
    params = target.source_info.tree.args.args
    if len(params) != n:
        raise UserError(f"{target.__qualname__} takes {len(params)} argument(s), but {api} passes it {n}", hint=hint)


def _float_leaf(typer, node, what: str) -> ScalarType:
    """A float scalar argument's type; a Python int literal is the float64 it converts to."""
    t = typer.value_expr(node, what)
    if isinstance(t, ScalarType) and t.is_float:
        typer.fit(node, t)
        return t
    if isinstance(t, ScalarType) and t.is_int and not t.is_bool and typer.is_weak(node):
        typer.fit(node, float64)
        return float64
    raise UserError(f"{what} must be a float (float32 or float64), not {an(t)}",
                    hint="derivatives are taken in float variables: convert with float(n) or gpuc.float32(n)",
                    node=node)


def _float_structure(typer, node, what: str) -> GType:
    """The type of a float scalar or a tuple of them (a literal tuple's int literals converting to float64)."""
    if isinstance(node, ast.Tuple) and node.elts:
        return TupleType(tuple(_float_structure(typer, e, what) for e in node.elts))
    t = typer.value_expr(node, what)
    if isinstance(t, TupleType) and is_float_structure(t):
        return t
    if isinstance(t, TupleType) or not (isinstance(t, ScalarType) and (t.is_float or t.is_int and not t.is_bool)):
        raise UserError(f"{what} must be a float or a tuple of floats, not {an(t)}",
                        hint="derivatives are taken in float scalars and tuples of them; pass the other values "
                             "through a func that takes them as constants", node=node)
    return _float_leaf(typer, node, what)


def _primals(typer, node, form: str = "jvp") -> tuple:
    """The parameter types the primals of gpuc.jvp (or gpuc.vjp: `form`) give f: a tuple written in place,
    or a tuple variable."""
    if isinstance(node, ast.Tuple):
        return tuple(_float_structure(typer, e, f"a primal of gpuc.{form}") for e in node.elts)
    t = typer.value_expr(node, f"the primals of gpuc.{form}")
    if not isinstance(t, TupleType):
        raise UserError(f"the primals of gpuc.{form} must be a tuple, not {an(t)}",
                        hint=f"write gpuc.{form}(f, (x,), ...) for one parameter", node=node)
    for e in t.elements:
        if not is_float_structure(e):
            raise UserError(f"a primal of gpuc.{form} must be a float or a tuple of floats, not {an(e)}", node=node)
    return t.elements


def _tangents(typer, node, signature: tuple) -> None:
    if isinstance(node, ast.Tuple):
        if len(node.elts) != len(signature):
            raise UserError(f"gpuc.jvp has {len(signature)} primal(s) but {len(node.elts)} tangent(s)",
                            hint="give one tangent per primal, of the same structure", node=node)
        for e, want in zip(node.elts, signature):
            _tangent(typer, e, want)
    else:
        _tangent(typer, node, TupleType(signature))


def _tangent(typer, node, want: GType) -> None:
    """A tangent must have its primal's structure and types (a Python number literal converts)."""
    if isinstance(node, ast.Tuple) and isinstance(want, TupleType) and len(node.elts) == len(want.elements):
        for e, w in zip(node.elts, want.elements):
            _tangent(typer, e, w)
        return
    t = typer.value_expr(node, "a tangent of gpuc.jvp")
    if t == want:
        return
    if isinstance(want, ScalarType) and isinstance(t, ScalarType) and typer.is_weak(node) and not t.is_bool:
        typer.fit(node, want)
        return
    raise UserError(f"this tangent is {an(t)}, but its primal is {an(want)}",
                    hint="a tangent has the structure and the float types of its primal, e.g. (1.0, (0.0, 0.0)) "
                         "for (x, (y, z)); convert with gpuc.float32(...) where the primal is a float32", node=node)


def _argument(typer, node) -> GType:
    t = typer.value_expr(node, "an argument")
    if isinstance(t, TupleType) and any(isinstance(e, ArrayType) for e in t.elements):
        raise UserError("tuples holding arrays cannot be passed to functions", node=node)
    return t


def _callee(typer, node, target: GpucFunction, signature: tuple, api: str):
    """f typed for `signature`, requested like a gpuc.deferred pointer to it; its result must carry floats."""
    location = typer.typed.info.location(node)
    try:
        callee, result = typer.callee_result(target, signature)
    except CompilationError as exc:
        raise exc.with_note(f"{target.__qualname__}({', '.join(map(str, signature))}) is differentiated here by "
                            f"{api}", location) from None
    refused = refuse_in_derivative(callee, api)
    if refused is not None:
        raise refused.with_note(f"{target.__qualname__}({', '.join(map(str, signature))}) is differentiated here by "
                                f"{api}", location)
    if not is_float_structure(result):
        raise UserError(f"{target.__qualname__}({', '.join(map(str, signature))}) returns {an(result)}: {api} "
                        "differentiates functions returning a float or a tuple of floats",
                        hint="return a float (convert with float(...)), or a tuple of floats", node=node.args[0])
    typer.typed.requests.setdefault((target, signature), (callee, False, location))
    return callee, result


# -- lowering ------------------------------------------------------------------------------------------

def _value(lw, node, t: GType):
    """`node` as a `t`; a tuple written in place is built element by element (its literals as floats)."""
    if isinstance(node, ast.Tuple) and isinstance(t, TupleType):
        return lw.make_tuple([_value(lw, e, et) for e, et in zip(node.elts, t.elements)], t)
    return lw.operand(node, t)


def _values(lw, node, types: tuple) -> list:
    """jvp's primals or tangents, one value per parameter of f."""
    if isinstance(node, ast.Tuple):
        return [_value(lw, e, t) for e, t in zip(node.elts, types)]
    whole = lw.expr(node)
    return [lw.b.extract_value(whole, k) for k in range(len(types))]


def _emit(lw, node, callee, signature: tuple, active: tuple, args: list, tangents: list, result: GType):
    """The pointer to f and the marker call returning {R, R}: (f's value, its tangent)."""
    pointer, flat, params, mask, tangent_params = request(lw, callee, signature, active, args)
    r = lw.ltype(result)
    fnty = FunctionType.get(lw.ctx.struct_type([r, r]), [pointer.type] + params + tangent_params)
    marker = lw.declare(marker_name(mask, fnty), fnty.return_type, list(fnty.params))
    return _sited(lw, node, lw.b.call(marker, [pointer] + flat + tangents))


def _sited(lw, node, call):
    """`call` (a derivative request) with where it is in the source, for the errors about it."""
    call.set_string_metadata(abi.SITE_METADATA, str(lw.typed.info.location(node)))
    return call


def request(lw, callee, signature: tuple, active: tuple, args: list):
    """What every derivative marker call starts with: the gpuc.deferred-style pointer to f, f's
    flattened arguments, their LLVM types, the activity mask and the types of the active ones."""
    ptr = lw.ctx.ptr(0)
    lookup = lw.declare(abi.LOOKUP_MARKER, ptr, [ptr])
    pointer = lw.b.call(lookup, [lw.program.functions[callee.symbol]])
    flat, params, mask, active_params = [], [], "", []
    for value, t, on in zip(args, signature, active):
        types = lw.abi_params(t)
        flat += lw.flatten(value, t)
        params += types
        mask += ("1" if on else "0") * len(types)
        if on:
            active_params += types
    return pointer, flat, params, mask, active_params


_TYPE_TOKEN = re.compile(r"ptr addrspace\((\d+)\)|[A-Za-z_]\w*|\d+|[{}()<>\[\]]")
_MANGLED = {"double": "d", "float": "f", "half": "h", "bfloat": "b", "ptr": "p", "x": "x", "void": "v",
            "{": "S", "}": "E", "<": "V", ">": "E", "[": "A", "]": "E", "(": "_", ")": ""}


def marker_name(mask: str, fnty, prefix: str = MARKER_PREFIX) -> str:
    """`<prefix><mask>.<the function type, mangled>` (prefix `gpuc.autodiff.fwd.` or `.rev.`): one name
    per activity and LLVM type."""
    parts = []
    for m in _TYPE_TOKEN.finditer(str(fnty)):
        token = m.group(0)
        if m.group(1) is not None:
            parts.append("p" + m.group(1))
        elif token[0] == "i" and token[1:].isdigit() or token.isdigit():
            parts.append(token)
        elif token in _MANGLED:
            parts.append(_MANGLED[token])
        else:
            raise AssertionError(f"no mangling for the LLVM type token {token!r} in {fnty}")
    return f"{prefix}{mask}.{''.join(parts)}"


# -- tangent kernels ----------------------------------------------------------------------------------


class TangentRequest:
    """The one statement of a generated tangent kernel (gpuc.tangent(kernel), built by the runtime):
    `request(x, dx, y, dy, a)` runs `kernel` on the primal arguments; `shadows` flags the parameters that
    hold the tangents of the float array before them."""

    def __init__(self, kernel, shadows: tuple) -> None:
        self.kernel, self.shadows = kernel, tuple(shadows)

    def __repr__(self) -> str:
        return f"<the tangent kernel of {self.kernel.__qualname__}>"


def shadowed_call(typer, node, kernel, flags: tuple, api: str):
    """The types of a generated derivative kernel's arguments (`flags`: which are the shadow of the float
    array before them) and the primal kernel's function for the others; located errors where they do not fit."""
    if len(node.args) != len(flags):
        raise UserError(f"the {api} kernel of {kernel.__qualname__} takes {len(flags)} arguments, not {len(node.args)}")
    types = [typer.value_expr(a, "an argument") for a in node.args]
    for k, (t, shadow) in enumerate(zip(types, flags)):
        if shadow:
            primal = types[k - 1]
            if not (k and isinstance(primal, ArrayType) and getattr(primal.dtype, "is_float", False)
                    and t == primal):  # (complex arrays have no shadows: complex.refuse_in_derivative)
                raise UserError(f"argument {k} is the shadow of the float array before it and must have its "
                                f"type ({primal}), not {t}", node=node.args[k])
    signature = tuple(t for t, shadow in zip(types, flags) if not shadow)
    callee = typer.session.function(kernel, signature)
    refused = refuse_in_derivative(callee, f"gpuc.{api}")
    if refused is not None:
        raise refused
    return types, callee


def call_primal(lw, node, plan, flags: tuple):
    """Lower a generated derivative kernel's statement up to its marker: the primal body called (inlined
    where it is optimized) on the primal arguments; the (array, shadow) data pointers pairwise."""
    values = [lw.expr(a) for a in node.args]
    flats = [lw.flatten(v, t) for v, t in zip(values, plan.args)]
    primal = lw.program.functions[plan.extra.symbol]
    primal.attributes.add("alwaysinline")
    lw.b.call(primal, [v for f, shadow in zip(flats, flags) if not shadow for v in f])
    pairs = []
    for k, shadow in enumerate(flags):
        if shadow:
            pairs += [flats[k - 1][0], flats[k][0]]
    return flats, pairs


class TangentCall(Handler):
    """A tangent kernel's statement: the primal body, then `gpuc.autodiff.fwd.kernel(x, dx, ...)`, which
    the autodiff plugin turns into the kernel's forward sweep (values and tangents together)."""

    name = "gpuc.tangent"

    def __init__(self, request: TangentRequest) -> None:
        self.request = request

    def type(self, typer, node):
        types, callee = shadowed_call(typer, node, self.request.kernel, self.request.shadows, "tangent")
        return CallPlan(none, tuple(types), callee, calls=(callee,))

    def lower(self, lw, node, plan):
        _, pairs = call_primal(lw, node, plan, self.request.shadows)
        marker = lw.declare(abi.TANGENT_KERNEL_MARKER, lw.ctx.void, [p.type for p in pairs])
        lw.b.call(marker, pairs)
        lw.fn.attributes.add("noinline")  # whole until the plugin has built its tangents
        return None


registry.register(derivative, Derivative(), public="derivative", group="forward-mode derivatives")
registry.register(jvp, JVP(), public="jvp", group="forward-mode derivatives")
registry.register_type(TangentRequest, TangentCall)
