"""Scatters of one value to one address, as one store.

A loop over a block's work items that stores, under a condition, a value all its items compute alike into
one slot (a tiled kernel's next tile counter kept per block, `if more: slot = k0 + TILE`) leaves LLVM's
loop vectorizer a store it can only predicate per lane: `llvm.masked.scatter` of a splat value to a splat
address. x86 runs that as `vpscatterqq`, one store per lane, every one to the same line; in the tiled
matmul's adjoint the two such scatters of each tile took a tenth of the kernel's time.

The lanes of a scatter store in lane order, so W lanes storing one value at one address leave what one
store leaves. `rewrite` (the native target's `finish_module`, after the optimizer) turns each scatter whose
value and address are splats (a `shufflevector` of lane 0 of an `insertelement`, or a constant vector with
equal elements) into that store: unconditional where the mask is all true, gone where it is all false,
else under a branch on the mask's lane 0 (a splat mask) or on any lane of it (`llvm.vector.reduce.or`). The
store keeps the scatter's alignment and its alias metadata.
"""

from __future__ import annotations

from ..llvm import Builder, CallInst, Constant, ConstantInt, FunctionType, ShuffleVectorInst

#: The intrinsic: `llvm.masked.scatter.v8i64.v8p0(<8 x i64> value, <8 x ptr> align 8 ptrs, <8 x i1> mask)`.
SCATTER = "llvm.masked.scatter."
#: The metadata the store takes over from the scatter.
_KEPT = ("alias.scope", "noalias", "tbaa", "llvm.access.group")


def rewrite(module) -> int:
    """Replace the scatters of one value to one address in every function of `module` by a store (see the
    module doc); returns how many."""
    if not any(fn.is_declaration and fn.name.startswith(SCATTER) for fn in module.functions):
        return 0
    scatters = [inst for fn in module.functions if not fn.is_declaration for block in fn.blocks
                for inst in block.instructions if _scatter(inst)]
    rewritten = 0
    with Builder(module.context) as b:
        for call in scatters:
            value, pointers, mask = call.args
            scalar, pointer = splat_of(value), splat_of(pointers)
            if scalar is None or pointer is None:
                continue
            _store_once(b, module, call, scalar, pointer, mask)
            rewritten += 1
    return rewritten


def _scatter(inst) -> bool:
    if not isinstance(inst, CallInst):
        return False
    callee = inst.callee
    return callee is not None and callee.name.startswith(SCATTER)


def splat_of(vector):
    """The value every lane of `vector` holds, where it is a splat `shufflevector` of lane 0 or a constant
    vector with equal elements; else None."""
    if isinstance(vector, ShuffleVectorInst):
        source = vector.operands[0]
        if (any(lane not in (0, None) for lane in vector.mask) or getattr(source, "opcode_name", None) != "insertelement"
                or not isinstance(source.operands[2], ConstantInt) or source.operands[2].value != 0):
            return None
        return source.operands[1]
    if isinstance(vector, Constant):
        lanes = vector.type.count
        first = vector.element(0)
        if first is None or any(vector.element(k) != first for k in range(1, lanes)):
            return None
        return first
    return None


def _store_once(b, module, call, value, pointer, mask) -> None:
    """Put the store of `value` at `pointer` where the scatter `call` is, under `mask`, and erase the call."""
    condition = splat_of(mask)
    if isinstance(condition, ConstantInt) and not condition.value:
        call.erase()
        return
    if condition is None:
        reduce = module.declare_intrinsic(f"llvm.vector.reduce.or.v{mask.type.count}i1",
                                          FunctionType.get(module.context.i1, [mask.type]))
        b.position_before(call)
        condition = b.call(reduce, [mask], "any")
    if isinstance(condition, ConstantInt):
        b.position_before(call)
    else:
        rest = call.parent
        b.split_before(call)
        then = rest.parent.append_block(f"{rest.name or 'scatter'}.store")
        then.move_before(rest)
        b.cond_br(condition, then, rest)
        b.position_at_end(then)
        b.br(rest)
        b.position_before(then.terminator)
    store = b.store(value, pointer, align=call.param_attributes(1).number("align") or 1)
    for kind in _KEPT:
        node = call.get_metadata(module.context.md_kind_id(kind))
        if node:
            store.set_metadata(module.context.md_kind_id(kind), node)
    call.erase()
