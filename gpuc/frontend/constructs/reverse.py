"""Reverse-mode derivatives in kernels and funcs: `gpuc.grad`, `gpuc.value_and_grad`, `gpuc.vjp`, and the
body of adjoint kernels (docs/autodiff.md, "Reverse mode").

A call of grad, value_and_grad or vjp lowers to a `gpuc.deferred`-style pointer to f and one marker call

    {R, A...} @gpuc.autodiff.rev.<MASK>.<SUFFIX>(ptr %f, <f's flattened args>, R %cotangent)

where MASK marks the float (and float tuple) arguments active, A is one adjoint per active
argument and R is f's result type. The autodiff plugin builds f's gradient function from its
optimized IR and replaces the call. An adjoint kernel (gpuc.adjoint(kernel), built by the runtime)
has one statement, an `AdjointRequest` call: it calls the primal kernel's body and ends with the
`gpuc.autodiff.rev.adjoint` marker naming each float array's shadow, which the plugin turns into
the whole kernel's reverse sweep.
"""

from __future__ import annotations

from ... import abi
from ...llvm import ConstantInt, FunctionType
from . import autodiff
from .autodiff import (_argument, _arity, _callee, _function, _primals, _sited, _tangent, _value, _values, call_primal,
                       is_float_structure, marker_name, request, shadowed_call)
from ..core import registry
from ..core.errors import UserError
from ..core.plans import CallPlan, Handler
from ..core.types import ScalarType, TupleType, none
from ..core.types import an


def grad(f, *args):
    """The gradient of f at args: a tuple with df/da for each float (or float tuple) argument a, in
    order, from one reverse sweep; integer and array arguments are constants. f returns one float."""
    return _host("grad")(f, *args)


def value_and_grad(f, *args):
    """(f(*args), gpuc.grad(f, *args)) from one sweep."""
    return _host("value_and_grad")(f, *args)


def vjp(f, primals, cotangent):
    """(f(*primals), the cotangent pulled back to the primals): `primals` is a tuple of floats and
    float tuples, `cotangent` has the structure and types of f's result."""
    return _host("vjp")(f, primals, cotangent)


def _host(name: str):
    return autodiff._host(name)


class Grad(Handler):
    """`gpuc.grad(f, *args)` (and `value_and_grad`): the marker with the float arguments active and
    cotangent 1."""

    def __init__(self, with_value: bool) -> None:
        self.with_value = with_value
        self.name = "gpuc.value_and_grad" if with_value else "gpuc.grad"

    def type(self, typer, node):
        if len(node.args) < 2:
            raise UserError(f"{self.name}(f, *args) takes the function and its arguments, but {len(node.args)} "
                            "argument(s) were given", hint=f"write {self.name}(f, x): it is the gradient at x, not a "
                                                           "function returning it (as jax.grad(f) is)")
        target = _function(typer, node.args[0], self.name)
        _arity(target, len(node.args) - 1, self.name, "pass one argument per parameter of the function")
        signature = tuple(_argument(typer, a) for a in node.args[1:])
        active = tuple(is_float_structure(t) for t in signature)
        if not any(active):
            raise UserError(f"{self.name} differentiates with respect to the float arguments, and "
                            f"{target.__qualname__} gets none here ({', '.join(map(str, signature))})",
                            hint="pass at least one float (or tuple of floats); integers and arrays are constants")
        callee, result = _callee(typer, node, target, signature, self.name)
        if not (isinstance(result, ScalarType) and result.is_float):
            raise UserError(f"{target.__qualname__} returns {an(result)}: {self.name} differentiates functions "
                            "returning one float", hint="for a tuple result use gpuc.vjp(f, primals, cotangent)",
                            node=node.args[0])
        grads = TupleType(tuple(t for t, a in zip(signature, active) if a))
        out = TupleType((result, grads)) if self.with_value else grads
        return CallPlan(out, signature, (callee, active, result, grads))

    def lower(self, lw, node, plan):
        callee, active, result, grads = plan.extra
        args = [_value(lw, a, t) for a, t in zip(node.args[1:], plan.args)]
        pair = _emit(lw, node, callee, plan.args, active, args, lw.const(result, 1.0), result)
        value, gradient = _split(lw, pair, grads)
        return lw.make_tuple([value, gradient], plan.result) if self.with_value else gradient


class VJP(Handler):
    """`gpuc.vjp(f, (x, y, ...), cotangent)`: every primal active; (value, cotangents of the primals)."""

    name = "gpuc.vjp"

    def type(self, typer, node):
        if len(node.args) != 3:
            raise UserError(f"gpuc.vjp(f, primals, cotangent) takes 3 arguments, but {len(node.args)} were given",
                            hint="write gpuc.vjp(f, (x, y), 1.0), with a one-element tuple (x,) for one parameter")
        target = _function(typer, node.args[0], self.name)
        signature = _primals(typer, node.args[1], "vjp")
        _arity(target, len(signature), self.name, "pass one primal per parameter, in a tuple")
        callee, result = _callee(typer, node, target, signature, self.name)
        _tangent(typer, node.args[2], result)
        grads = TupleType(signature)
        return CallPlan(TupleType((result, grads)), signature, (callee, (True,) * len(signature), result, grads))

    def lower(self, lw, node, plan):
        callee, active, result, grads = plan.extra
        primals = _values(lw, node.args[1], plan.args)
        cotangent = _value(lw, node.args[2], result)
        pair = _emit(lw, node, callee, plan.args, active, primals, cotangent, result)
        return lw.make_tuple(list(_split(lw, pair, grads)), plan.result)


def _emit(lw, node, callee, signature: tuple, active: tuple, args: list, cotangent, result):
    """The marker call returning {R, A...}: f's value and one adjoint per active argument."""
    pointer, flat, params, mask, adjoints = request(lw, callee, signature, active, args)
    r = lw.ltype(result)
    fnty = FunctionType.get(lw.ctx.struct_type([r, *adjoints]), [pointer.type] + params + [r])
    marker = lw.declare(marker_name(mask, fnty, abi.REVERSE_MARKER_PREFIX), fnty.return_type, list(fnty.params))
    return _sited(lw, node, lw.b.call(marker, [pointer] + flat + [cotangent]))


def _split(lw, pair, grads: TupleType):
    value = lw.b.extract_value(pair, 0)
    parts = [lw.b.extract_value(pair, k + 1) for k in range(len(grads.elements))]
    return value, lw.make_tuple(parts, grads)


# -- adjoint kernels ----------------------------------------------------------------------------------

#: How the work items of an adjoint launch run: at once (GPUs; adds into shadows several items share
#: are atomic), one after another (a one-thread CPU launch: no atomics), or at once only where far
#: enough apart that a stencil's neighbours never meet (the CPU's two-phase schedule: atomics only
#: for arrays any item may touch anywhere).
CONCURRENT, SERIAL, PARITY = "concurrent", "serial", "parity"
#: ... or, blocks of a launch with `block=`, at once only where they differ along every dimension the plugin
#: reports (the CPU's blockwise schedule: atomics only for arrays no coordinate of which is a work item's index).
BLOCKWISE = "blockwise"
_MARKERS = {CONCURRENT: abi.ADJOINT_MARKER, SERIAL: abi.SERIAL_ADJOINT_MARKER, PARITY: abi.PARITY_ADJOINT_MARKER,
            BLOCKWISE: abi.BLOCKWISE_ADJOINT_MARKER}


class AdjointRequest:
    """The one statement of a generated adjoint kernel: `request(x, dx, y, dy, a)` runs `kernel` on the
    primal arguments; `shadows` flags the parameters that are the previous float array's shadow;
    `schedule` is how its work items will run (CONCURRENT, SERIAL or PARITY); `spans`, the dimensions along
    which the launch has more than one work item (abi.ADJOINT_SPANS_ATTRIBUTE), None where not known;
    `distinct`, whether the launch checked that no two array arguments overlap (abi.ADJOINT_DISTINCT_ATTRIBUTE);
    `primal_writes` False: the arrays the kernel only stores into keep what they hold
    (abi.ADJOINT_OUTPUTS_KEPT_ATTRIBUTE)."""

    def __init__(self, kernel, shadows: tuple, schedule: str = CONCURRENT, spans: tuple | None = None,
                 distinct: bool = False, primal_writes: bool = True) -> None:
        self.kernel, self.shadows, self.schedule, self.spans = kernel, tuple(shadows), schedule, spans
        self.distinct, self.primal_writes = distinct, primal_writes

    def __repr__(self) -> str:
        return f"<the adjoint of {self.kernel.__qualname__}>"


class AdjointCall(Handler):
    name = "gpuc.adjoint"

    def __init__(self, request: AdjointRequest) -> None:
        self.request = request

    def type(self, typer, node):
        types, callee = shadowed_call(typer, node, self.request.kernel, self.request.shadows, "adjoint")
        return CallPlan(none, tuple(types), callee, calls=(callee,))

    def lower(self, lw, node, plan):
        ctx = lw.ctx
        index = lw.declare(abi.INDEX_MARKER, ctx.i64, [ctx.i32])
        # Read first, before the primal body writes anything: the body's own reads become these values,
        # which tell the plugin which array elements are the work item's own.
        indices = [lw.b.call(index, [ConstantInt.get(ctx.i32, d)]) for d in range(3)]
        _, pairs = call_primal(lw, node, plan, self.request.shadows)
        marker = lw.declare(_MARKERS[self.request.schedule], ctx.void, [ctx.i64] * 3 + [p.type for p in pairs])
        lw.b.call(marker, indices + pairs)
        lw.fn.attributes.add("noinline")  # whole until the plugin has built its reverse sweep
        if self.request.spans is not None:
            lw.fn.attributes.add(abi.ADJOINT_SPANS_ATTRIBUTE, ",".join(map(str, self.request.spans)))
        if self.request.distinct:
            lw.fn.attributes.add(abi.ADJOINT_DISTINCT_ATTRIBUTE, "")
        if not self.request.primal_writes:
            lw.fn.attributes.add(abi.ADJOINT_OUTPUTS_KEPT_ATTRIBUTE, "")
        return None


def is_adjoint_request(obj) -> bool:
    return isinstance(obj, AdjointRequest)


registry.register(grad, Grad(False), public="grad", group="reverse mode")
registry.register(value_and_grad, Grad(True), public="value_and_grad", group="reverse mode")
registry.register(vjp, VJP(), public="vjp", group="reverse mode")
registry.register_type(AdjointRequest, AdjointCall)


__all__ = ["BLOCKWISE", "CONCURRENT", "PARITY", "SERIAL", "AdjointCall", "AdjointRequest", "Grad", "VJP", "grad",
           "value_and_grad", "vjp"]
