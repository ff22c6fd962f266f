"""Derivatives of gradients: forward and reverse mode over a reverse request, by rule.

A reverse request `M = @gpuc.autodiff.rev.<mask>(ptr @f, x..., s)` computes `{f(x), s·∂f/∂x_A}` for
the active parameters A. Differentiating the gradient function M becomes (a function with a loop keeps a
tape, memory neither mode can follow) is avoided: both derivatives of M are themselves gradients, of
f's tangent function `fT(x, dx) = {f(x), ∂f/∂x·dx}`, which keeps no tape of M's. With fT's reverse
request `rev(fT, x, dx, {a, b})` = `{fT(x, dx), a·∂f/∂x + b·∂(∂f/∂x·dx)/∂x, b·∂f/∂x}`:

- forward mode, tangents (dx, ds): M's value and gradient are fT's value and the adjoint of dx_A
  (b = s), their tangents fT's tangent and the adjoint of x_A (a = ds): one request;
- reverse mode, cotangents (v̄, ḡ) of M's value and gradient: x̄ gets the adjoint of x in
  `rev(fT, x, dx = ḡ, {v̄, s})` and s̄ fT's tangent `∂f/∂x_A·ḡ` (no request when only s̄ is needed).

The new requests are marker calls the plugin resolves next, as any other: the rule applies to any
depth. The plugin leaves M in place for a request reaching it only where `defers` says so: f writes
no memory, and either it reads none either (under reverse mode, which runs fT where M's reverse
belongs), or what it reads is constant to the outer request: arrays passed on from parameters of the
function the outer request differentiates (f's pointer parameters: a loss looping over a data array),
which that request gives no shadow and that function never writes. So a Hessian of a function whose
gradient keeps a tape of a loop over an array needs no derivative of that tape.
"""

from __future__ import annotations

import gpuc.llvm as llvm
from gpuc.abi import FORWARD_MARKER_PREFIX, REVERSE_MARKER_PREFIX, TANGENT_KERNEL_MARKER

from . import reverse_rules
from . import tangent as forward  # both import this module: their names are looked up when called
from .kinds import carries_floats

_ADJOINT = REVERSE_MARKER_PREFIX + "adjoint"


def is_request(callee) -> bool:
    """Whether `callee` is the marker of a reverse request of a function's gradient (not an adjoint kernel's)."""
    return (isinstance(callee, llvm.Function) and callee.is_declaration and callee.name.startswith(REVERSE_MARKER_PREFIX)
            and not callee.name.startswith(_ADJOINT))


def mask_of(call) -> str:
    """The activity mask of a reverse or forward request's marker call."""
    name = call.callee.name
    prefix = REVERSE_MARKER_PREFIX if name.startswith(REVERSE_MARKER_PREFIX) else FORWARD_MARKER_PREFIX
    return name[len(prefix):].partition(".")[0]


def defers(inner, reverse: bool, heap=None, outer=None) -> bool:
    """Whether a request differentiating (in reverse mode when `reverse`) a function holding the
    reverse request `inner` may leave it in place and apply the rules of this module to it. `outer`,
    the outer request's marker call (of a function, not a kernel), lets f take arrays it only reads
    (`_constant_arrays`)."""
    if not is_request(inner.callee):
        return False
    f = inner.args[0]
    if not isinstance(f, llvm.Function) or f.is_declaration:
        return False
    reads, writes = reverse_rules.memory_effects(f, heap=heap)
    if writes:
        return False
    if any(isinstance(t, llvm.PointerType) for t in f.function_type.params):
        return outer is not None and _constant_arrays(inner, outer, reverse, heap)
    return not (reverse and reads)


def _constant_arrays(inner, outer, reverse: bool, heap) -> bool:
    """Whether every pointer `inner` passes on points into memory constant to the request `outer`: it is
    (through GEPs and casts) a parameter of the function `outer` differentiates, inner's own function,
    that `outer` leaves inactive (no shadow, no tangent); under reverse mode that function also writes
    no memory but its own, so that f reads the same values where M's reverse runs fT again."""
    name = outer.callee.name if isinstance(outer.callee, llvm.Function) else ""
    if not name.startswith((REVERSE_MARKER_PREFIX, FORWARD_MARKER_PREFIX)) or name.startswith(
            (_ADJOINT, TANGENT_KERNEL_MARKER)):
        return False
    fn = inner.function
    if outer.args[0] != fn or fn.is_declaration:
        return False
    mask = mask_of(outer)
    inactive = {a for a, m in zip(fn.args, mask) if m == "0"}
    for value in list(inner.args)[1:]:
        if not isinstance(value.type, llvm.PointerType):
            continue
        while isinstance(value, llvm.Instruction) and value.opcode_name in ("getelementptr", "addrspacecast",
                                                                              "bitcast"):
            value = value.operands[0]
        if value not in inactive:
            return False
    return not (reverse and reverse_rules.memory_effects(fn, heap=heap)[1])


def request(module: llvm.Module, fn: llvm.Function, mask: str) -> llvm.Function:
    """The marker asking for the gradient of `fn` (no pointer parameters) for activity `mask`."""
    params = fn.function_type.params
    ret = fn.return_type
    adjoints = [t for t, m in zip(params, mask) if m == "1"]
    fnty = llvm.FunctionType.get(module.context.struct_type([ret, *adjoints]), [fn.type, *params, ret])
    return module.get_or_insert_function(f"{REVERSE_MARKER_PREFIX}{mask}.nested.{fn.name}", fnty)


def _parts(call):
    """(f, f's arguments, the cotangent, the active parameter indices) of a scalar reverse request."""
    f = call.args[0]
    n = len(f.function_type.params)
    mask = mask_of(call)
    return f, call.args[1:1 + n], call.args[1 + n], [i for i, m in enumerate(mask) if m == "1"]


def _pair(b: llvm.Builder, ty, first, second):
    pair = b.insert_value(llvm.Constant.poison(ty), first, 0)
    return b.insert_value(pair, second, 1)


def _result(b: llvm.Builder, ty, value, grads):
    result = b.insert_value(llvm.Constant.poison(ty), value, 0)
    for k, g in enumerate(grads):
        result = b.insert_value(result, g, k + 1)
    return result


def tangent(t, inst) -> None:
    """Forward mode over reverse request `inst` in tangent transformer `t`."""
    f, args, cot, active = _parts(inst)
    if any(isinstance(a.type, llvm.PointerType) and t.tangent(a) is not None for a in args):
        raise t.error(inst, f"a gradient of {f.name}, which takes arrays with tangents, cannot be differentiated "
                            "inside the function asking for it")
    tangents = [t.tangent(a) if carries_floats(a.type) else None for a in args]
    dcot = t.tangent(cot)
    if dcot is None and all(d is None for d in tangents):
        t.vmap[inst] = t.clone(inst)
        return
    b, module = t.b, t.module
    with_tangent = [i in active or d is not None for i, d in enumerate(tangents)]
    ft = forward.tangent_function(module, f, with_tangent, t.heap)
    mask = "".join("1" if i in active else "0" for i in range(len(args)))
    mask += "".join("1" if i in active else "0" for i, w in enumerate(with_tangent) if w)
    ret = f.return_type
    dx = [tangents[i] if tangents[i] is not None else reverse_rules.zero(args[i].type) for i, w in enumerate(with_tangent) if w]
    seed = _pair(b, ft.return_type, dcot if dcot is not None else reverse_rules.zero(ret), t.value(cot))
    out = b.call(request(module, ft, mask), [ft, *[t.value(a) for a in args], *dx, seed])
    pair = b.extract_value(out, 0)
    k = len(active)
    t.vmap[inst] = _result(b, inst.type, b.extract_value(pair, 0), [b.extract_value(out, 1 + k + j) for j in range(k)])
    t.tangents[inst] = _result(b, inst.type, b.extract_value(pair, 1), [b.extract_value(out, 1 + j) for j in range(k)])


def reverse(r, inst) -> None:
    """Reverse mode over reverse request `inst` in reverse transformer `r`."""
    f, args, cot, active = _parts(inst)
    if inst not in r.varied:
        return
    adjoint = r.take(inst)
    if adjoint is None:
        return
    if any(isinstance(a.type, llvm.PointerType) and a in r.shadowed for a in args):
        raise r.error(inst, f"a gradient of {f.name}, which takes arrays with shadows, cannot be differentiated "
                            "inside the function asking for it")
    b, module = r.b, r.module
    ft = forward.tangent_function(module, f, [i in active for i in range(len(args))], r.settings.heap)
    primals = [r.primal(a) for a in args]
    gbar = [b.extract_value(adjoint, 1 + j) for j in range(len(active))]
    varied = [a in r.varied and carries_floats(a.type) for a in args]
    if not any(varied):  # only s̄ = ∂f/∂x_A·ḡ, fT's tangent
        r.accumulate(cot, b.extract_value(b.call(ft, primals + gbar), 1))
        return
    mask = "".join("1" if v else "0" for v in varied) + "0" * len(active)
    seed = _pair(b, ft.return_type, b.extract_value(adjoint, 0), r.primal(cot))
    out = b.call(request(module, ft, mask), [ft, *primals, *gbar, seed])
    r.accumulate(cot, b.extract_value(b.extract_value(out, 0), 1))
    k = 1
    for a, v in zip(args, varied):
        if v:
            r.accumulate(a, b.extract_value(out, k))
            k += 1
