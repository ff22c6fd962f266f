"""Adjoint rules of the reverse sweep, one per instruction kind: given the adjoint of an
instruction's result, add its operands' shares to their adjoints (gpuc/plugins/autodiff/reverse.py).

Each rule takes the transformer `r`: `r.take(v)` reads and zeroes v's adjoint, `r.accumulate(v, c)`
adds to it, `r.primal(v)` is v's forward value, `r.shadow(p)` a pointer's shadow. Math functions
share their derivative rules with forward mode (`mathrules.tangent` is linear in the tangents:
the share of argument j is the tangent with the adjoint in place j and zeros elsewhere).
"""

from __future__ import annotations

import gpuc.llvm as llvm
from gpuc.abi import FORWARD_MARKER_PREFIX

from . import blocks, masked, mathrules, memcopy, nested, temporaries
from .kinds import TRANSPARENT, carries_floats
from .memory import private_pointers



def zero(ty) -> llvm.Value:
    return llvm.Constant.null(ty)


def additive_zero(b: llvm.Builder, ty) -> llvm.Value:
    """-0.0 in every float of `ty`: the start of a sum that LLVM may fold away (-0.0 + x is x for
    every x; +0.0 + x is not, for x = -0.0)."""
    if isinstance(ty, llvm.FloatingType):
        return llvm.ConstantFP.get(ty, -0.0)
    if isinstance(ty, llvm.VectorType):
        lane, vector = llvm.ConstantFP.get(ty.element_type, -0.0), llvm.Constant.poison(ty)
        for k in range(ty.count):  # folded into a constant vector
            vector = b.insert_element(vector, lane, llvm.ConstantInt.get(ty.context.i32, k))
        return vector
    value = llvm.Constant.poison(ty)
    elements = ty.elements if isinstance(ty, llvm.StructType) else [ty.element_type] * ty.count
    for k, et in enumerate(elements):
        value = b.insert_value(value, additive_zero(b, et) if carries_floats(et) else zero(et), k)
    return value


def accumulate_into(b: llvm.Builder, current, contribution):
    """current + contribution, element by element for literal structs and arrays."""
    ty = current.type
    if isinstance(ty, (llvm.StructType, llvm.ArrayType)):
        elements = ty.elements if isinstance(ty, llvm.StructType) else [ty.element_type] * ty.count
        result = current
        for k, et in enumerate(elements):
            if carries_floats(et):
                summed = accumulate_into(b, b.extract_value(current, k), b.extract_value(contribution, k))
                result = b.insert_value(result, summed, k)
        return result
    return b.fadd(current, contribution)


def _at_path(b: llvm.Builder, agg_type, path, value):
    """A zero aggregate of `agg_type` holding `value` at the index `path`."""
    if not path:
        return value
    inner_type = agg_type.elements[path[0]] if isinstance(agg_type, llvm.StructType) else agg_type.element_type
    return b.insert_value(zero(agg_type), _at_path(b, inner_type, path[1:], value), path[0])


def _extract_path(b: llvm.Builder, agg, path):
    for k in path:
        agg = b.extract_value(agg, k)
    return agg


def _insert_path(b: llvm.Builder, agg, path, value):
    if len(path) == 1:
        return b.insert_value(agg, value, path[0])
    inner = b.extract_value(agg, path[0])
    return b.insert_value(agg, _insert_path(b, inner, path[1:], value), path[0])


# -- arithmetic ---------------------------------------------------------------------------------------

def _fadd(r, inst):
    a = r.take(inst)
    if a is not None:
        x, y = inst.operands
        r.accumulate(x, a)
        r.accumulate(y, a)


def _fsub(r, inst):
    a = r.take(inst)
    if a is not None:
        x, y = inst.operands
        r.accumulate(x, a)
        if y in r.varied:
            r.accumulate(y, r.b.fneg(a))


def _fmul(r, inst):
    a = r.take(inst)
    if a is None:
        return
    x, y = inst.operands
    if x in r.varied:
        r.accumulate(x, r.b.fmul(a, r.primal(y)))
    if y in r.varied:
        r.accumulate(y, r.b.fmul(a, r.primal(x)))


def _fdiv(r, inst):
    # q = x / y: dx += a / y, dy -= a q / y
    a = r.take(inst)
    if a is None:
        return
    x, y = inst.operands
    b = r.b
    share = b.fdiv(a, r.primal(y))
    r.accumulate(x, share)
    if y in r.varied:
        r.accumulate(y, b.fneg(b.fmul(share, r.primal(inst))))


def _frem(r, inst):
    # m = x - trunc(x / y) y: dx += a, dy -= a trunc(x / y), with trunc(x / y) = (x - m) / y exactly
    a = r.take(inst)
    if a is None:
        return
    x, y = inst.operands
    r.accumulate(x, a)
    if y in r.varied:
        b = r.b
        py = r.primal(y)
        quotient = b.fdiv(b.fsub(r.primal(x), r.primal(inst)), py)
        r.accumulate(y, b.fneg(b.fmul(a, quotient)))


def _fneg(r, inst):
    a = r.take(inst)
    if a is not None:
        r.accumulate(inst.operands[0], r.b.fneg(a))


def _pass(r, inst):
    a = r.take(inst)
    if a is not None:
        r.accumulate(inst.operands[0], a)


def _float_cast(r, inst):
    # fpext / fptrunc: the adjoint goes back through the opposite conversion.
    a = r.take(inst)
    if a is None:
        return
    source = inst.operands[0]
    back = "fptrunc" if inst.opcode_name == "fpext" else "fpext"
    r.accumulate(source, r.b.cast(back, a, source.type))


def _select(r, inst):
    a = r.take(inst)
    if a is None:
        return
    cond, x, y = inst.operands
    b, z = r.b, zero(inst.type)
    c = r.primal(cond)
    if x in r.varied:
        r.accumulate(x, b.select(c, a, z))
    if y in r.varied:
        r.accumulate(y, b.select(c, z, a))


# -- aggregates and vectors ----------------------------------------------------------------------------

def _extractvalue(r, inst):
    a = r.take(inst)
    if a is None:
        return
    agg = inst.operands[0]
    r.accumulate(agg, _at_path(r.b, agg.type, inst.indices, a))


def _insertvalue(r, inst):
    a = r.take(inst)
    if a is None:
        return
    agg, value = inst.operands[0], inst.operands[1]
    path = inst.indices
    if value in r.varied:
        r.accumulate(value, _extract_path(r.b, a, path))
    if agg in r.varied:
        r.accumulate(agg, _insert_path(r.b, a, path, zero(value.type)))


def _extractelement(r, inst):
    a = r.take(inst)
    if a is None:
        return
    vec, index = inst.operands
    r.accumulate(vec, r.b.insert_element(zero(vec.type), a, r.primal(index)))


def _insertelement(r, inst):
    a = r.take(inst)
    if a is None:
        return
    vec, value, index = inst.operands
    i = r.primal(index)
    if value in r.varied:
        r.accumulate(value, r.b.extract_element(a, i))
    if vec in r.varied:
        r.accumulate(vec, r.b.insert_element(a, zero(value.type), i))


def _shufflevector(r, inst):
    a = r.take(inst)
    if a is None:
        return
    first, second = inst.operands[0], inst.operands[1]
    b, i32 = r.b, r.ctx.i32
    width = first.type.count
    shares = {0: zero(first.type), 1: zero(second.type)}
    for lane, source in enumerate(inst.mask):
        if source is None:
            continue
        which, k = divmod(source, width)
        index = llvm.ConstantInt.get(i32, k)
        piece = b.extract_element(a, llvm.ConstantInt.get(i32, lane))
        shares[which] = b.insert_element(shares[which], b.fadd(b.extract_element(shares[which], index), piece), index)
    r.accumulate(first, shares[0])
    r.accumulate(second, shares[1])


# -- memory ------------------------------------------------------------------------------------------

def _load(r, inst):
    pointer = inst.operands[0]
    if pointer not in r.shadowed:
        return  # constant data for this function
    a = r.take(inst)
    if a is not None:
        r.add_to_shadow(inst, pointer, a)


def _store(r, inst):
    # The store overwrote what the shadow stood for: its adjoint goes to the stored value, then zero.
    value, pointer = inst.operands
    if pointer not in r.shadowed:
        return
    align = inst.alignment  # the shadow is aligned as the primal is: no more (a vector's own may exceed it)
    if carries_floats(value.type):
        r.accumulate(value, r.take_shadow(pointer, value.type, align))
    else:
        r.b.store(zero(value.type), r.shadow(pointer), align=align)


def _atomicrmw(r, inst):
    # a[i] += v (or -= v): v's adjoint is (minus) the shadow's value; the shadow stays.
    pointer, value = inst.operands[0], inst.operands[1]
    if pointer in r.shadowed and inst.operation in ("fadd", "fsub") and value in r.varied:
        share = r.b.load(value.type, r.shadow(pointer), ordering="monotonic")
        r.accumulate(value, share if inst.operation == "fadd" else r.b.fneg(share))


# -- calls ---------------------------------------------------------------------------------------------

def _call(r, inst):
    callee = inst.callee
    if not isinstance(callee, llvm.Function):
        if inst in r.varied or any(a in r.varied or a in r.shadowed for a in inst.args):
            indirect = isinstance(callee, (llvm.Instruction, llvm.Argument, llvm.Constant))
            raise r.error(inst, f"{'an indirect call' if indirect else 'inline assembly'} cannot be differentiated",
                          "call the function directly, or through a gpuc.deferred pointer known when compiling "
                          "(not one chosen at run time)" if indirect else None)
        return
    name = callee.name
    if name.startswith(TRANSPARENT):
        return
    if inst in r.temporaries:  # the reverse of every access of the temporary is done: its shadow goes
        temporaries.free(r.b, r.module, r.settings.heap, r.shadow(inst))
        return
    if r.settings.heap is not None and name == r.settings.heap[1] and callee.is_declaration:
        if not all(root in r.temporaries for root in r._roots_of(inst.args[0])):
            raise r.error(inst, "memory freed that the function did not allocate itself")
        return  # the primal memory is freed in the forward part: the reverse reads none
    if name.startswith(("llvm.memset.", "llvm.memcpy.", "llvm.memmove.")):
        _memory_intrinsic(r, inst)
        return
    if masked.kind(callee) is not None:
        masked.reverse(r, inst)
        return
    if name.startswith(mathrules.VECTOR_SUM):
        _vector_sum(r, inst)
        return
    math = mathrules.classify(callee)
    if math is not None:
        _math(r, inst, *math)
    elif not callee.is_declaration:
        _defined(r, inst, callee)
    elif nested.is_request(callee):
        nested.reverse(r, inst)
    elif blocks.is_marker(callee):
        blocks.reverse(r, inst)
    elif name.startswith("llvm."):
        # An intrinsic computing no floats from floats (a conversion to integer, a test) has no
        # adjoint to pass on; one computing floats, or touching memory with a shadow, needs a rule.
        if inst in r.varied:
            raise r.error(inst, f"the intrinsic {name} has no derivative rule")
        if any(a in r.shadowed for a in inst.args):
            raise r.error(inst, f"the intrinsic {name} works on memory that has a shadow, which is not "
                                "differentiated")
    elif inst in r.varied or any(a in r.varied or a in r.shadowed for a in inst.args):
        raise r.error(inst, f"{name} is an external function gpuc knows no derivative of")


def _vector_sum(r, inst):
    """`llvm.vector.reduce.fadd(start, v)` = start + v[0] + ... : its adjoint goes to `start` and to every
    lane of `v`."""
    a = r.take(inst) if inst in r.varied else None
    if a is None:
        return
    start, vector = inst.args
    r.accumulate(start, a)
    if vector in r.varied:
        r.accumulate(vector, mathrules.splat(r.b, a, vector.type))


def _math(r, inst, family, name):
    args = inst.args
    if not (inst in r.varied and any(x in r.varied for x in args)):
        return
    if name not in mathrules.DIFFERENTIABLE:
        raise r.error(inst, f"{inst.callee.name} has no derivative rule")
    if len(args) != mathrules.ARITY[name]:
        raise r.error(inst, f"{inst.callee.name} is called with {len(args)} argument(s); {name} takes "
                            f"{mathrules.ARITY[name]}")
    a = r.take(inst)
    if a is None:
        return
    primals = [r.primal(x) for x in args]
    result = r.primal(inst)
    for j, x in enumerate(args):
        if x in r.varied:
            tangents = [a if k == j else None for k in range(len(args))]
            r.accumulate(x, mathrules.tangent(r.b, r.module, family, name, primals, result, tangents,
                                              like=inst.callee))


def _defined(r, inst, callee):
    """A call left after inlining (recursion, or a function kept out of line): its gradient function
    reruns it with the call's arguments and returns their adjoints."""
    from .reverse import callee_settings, gradient_function  # the rules and the transformer refer to each other

    args = inst.args
    if not any(a in r.varied or a in r.shadowed for a in args):
        return  # nothing it computes depends on the active inputs
    reads, writes = memory_effects(callee, heap=r.settings.heap)
    if writes:
        raise r.error(inst, f"{callee.name} writes memory and is not inlined (it is recursive or too large): its "
                            "gradient would run it twice")
    if reads and r.writes_memory:
        raise r.error(inst, f"{callee.name} reads memory and is not inlined (it is recursive or too large), and "
                            f"{r.fn.name} writes memory: rerunning it in the reverse sweep could read other values")
    if inst not in r.varied:
        return  # no float result, no writes: nothing flows back
    mask = "".join("1" if (a in r.varied and carries_floats(a.type)) or a in r.shadowed else "0" for a in args)
    if "1" not in mask:
        return
    grad = gradient_function(r.module, callee, mask, callee_settings(r.settings))
    primals = [r.primal(a) for a in args]
    shadows = [r.shadow(a) for a, m in zip(args, mask) if m == "1" and isinstance(a.type, llvm.PointerType)]
    cotangent = r.take(inst)
    if cotangent is None:
        cotangent = zero(inst.type)
    result = r.b.call(grad, primals + shadows + [cotangent])
    k = 1  # field 0 is the callee's value
    for a, m in zip(args, mask):
        if m == "1" and not isinstance(a.type, llvm.PointerType):
            r.accumulate(a, r.b.extract_value(result, k))
            k += 1


def _memory_intrinsic(r, inst):
    destination, source = inst.args[0], inst.args[1]
    is_set = inst.callee.name.startswith("llvm.memset.")
    if is_set:
        if destination in r.shadowed:  # the bytes set: what their shadow stood for is gone
            shadow = r.b.insert(r.vmap[inst].clone())
            shadow.operands[0] = r.shadow(destination)
            shadow.operands[1] = llvm.ConstantInt.get(r.ctx.i8, 0)
        return
    if destination in r.shadowed or source in r.shadowed:
        memcopy.reverse(r, inst)


def memory_effects(fn: llvm.Function, seen=None, heap=None) -> tuple[bool, bool]:
    """Whether `fn` (and what it calls) reads / writes memory other than its own: its stack slots and
    the heap temporaries it allocates with the target's allocator `heap` and frees itself
    (`memory.private_pointers`). Rerunning a function whose only effects are on those changes
    nothing its caller sees."""
    seen = set() if seen is None else seen
    if fn.name in seen:
        return False, False
    seen.add(fn.name)
    own = private_pointers(fn, heap)
    reads = writes = False
    for inst in fn.instructions():
        op = inst.opcode_name
        if op == "load" and inst.operands[0] not in own:
            reads = True
        elif op == "store" and inst.operands[1] not in own:
            writes = True
        elif op in ("atomicrmw", "cmpxchg") and inst.operands[0] not in own:
            reads = writes = True
        elif op == "call":
            callee = inst.callee
            if not isinstance(callee, llvm.Function):
                reads = writes = True
            elif inst in own or heap is not None and callee.name == heap[1] and inst.args[0] in own:
                continue  # a temporary of its own, allocated or freed
            elif callee.name.startswith(TRANSPARENT) or mathrules.classify(callee) is not None:
                continue
            elif callee.name.startswith(("llvm.memset.", "llvm.memcpy.", "llvm.memmove.")):
                writes = writes or inst.args[0] not in own
                reads = reads or (not callee.name.startswith("llvm.memset.") and inst.args[1] not in own)
            elif masked.kind(callee) is not None:
                if masked.pointer_of(inst) not in own:
                    reads = reads or masked.kind(callee) == "load"
                    writes = writes or masked.kind(callee) == "store"
            elif not callee.is_declaration:
                r, w = memory_effects(callee, seen, heap)
                reads, writes = reads or r, writes or w
            elif (nested.is_request(callee) or callee.name.startswith(FORWARD_MARKER_PREFIX)) and isinstance(
                    inst.args[0], llvm.Function):  # a gradient or a tangent touches what its function does
                r, w = memory_effects(inst.args[0], seen, heap)
                reads, writes = reads or r, writes or w
            elif not callee.name.startswith("llvm."):
                reads = writes = True
    return reads, writes


def _bitcast(r, inst):
    if inst in r.varied or inst.operands[0] in r.varied:
        raise r.error(inst, "reinterpreting the bits of a float has no derivative")


RULES = {
    "bitcast": _bitcast,
    "fadd": _fadd, "fsub": _fsub, "fmul": _fmul, "fdiv": _fdiv, "frem": _frem, "fneg": _fneg,
    "freeze": _pass, "fpext": _float_cast, "fptrunc": _float_cast, "select": _select,
    "extractvalue": _extractvalue, "insertvalue": _insertvalue, "extractelement": _extractelement,
    "insertelement": _insertelement, "shufflevector": _shufflevector,
    "load": _load, "store": _store, "atomicrmw": _atomicrmw, "call": _call,
}
