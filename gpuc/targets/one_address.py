"""Gathers and scatters through one address, as one load or one store.

LLVM's loop vectorizer predicates per lane what a loop over a block's work items does under a mask, also
where every lane's address is the same: a load of a shared element that all items of a row read
(`sa[ty, kk]` in a tiled matmul whose region tests per-item flags) becomes `llvm.masked.gather` through a
splat address, and a store of a value every item computes alike into one slot of the block (the next tile
counter, `if more: slot = k0 + TILE`) `llvm.masked.scatter` of a splat value to a splat address. x86 runs
each as one memory access per lane (`vgatherqps`, `vpscatterqq`); in the tiled matmul's adjoint the two
scatters of each tile took a tenth of the kernel's time.

The lanes of such a gather read one element: the result is that element in every active lane and the
pass-through value elsewhere. The lanes of such a scatter store in lane order one value at one address,
which leaves what one store leaves. `rewrite` (the native target's `finish_module`, after the optimizer)
replaces each by that access (a splat address: a `shufflevector` of lane 0 of an `insertelement`; a splat
value alike, or a constant vector with equal elements): unconditional where the mask is all true, gone
where it is all false, else under a branch on the mask's lane 0 (a splat mask) or on any lane of it
(`llvm.vector.reduce.or`), so that no lane's address is touched where no lane is active. The access keeps
the intrinsic's alignment and its alias metadata.
"""

from __future__ import annotations

from ..llvm import Builder, CallInst, Constant, ConstantInt, FunctionType, PoisonValue, ShuffleVectorInst, UndefValue

#: The intrinsics: `llvm.masked.gather.v8f32.v8p0(<8 x ptr> align 4 ptrs, <8 x i1> mask, <8 x float> passthru)`,
#: `llvm.masked.scatter.v8i64.v8p0(<8 x i64> value, <8 x ptr> align 8 ptrs, <8 x i1> mask)`.
GATHER, SCATTER = "llvm.masked.gather.", "llvm.masked.scatter."
#: The metadata the access takes over from the intrinsic.
_KEPT = ("alias.scope", "noalias", "tbaa", "llvm.access.group")


def rewrite(module) -> int:
    """Replace the gathers and scatters through one address in every function of `module` by a load or a
    store (see the module doc); returns how many."""
    if not any(fn.is_declaration and fn.name.startswith((GATHER, SCATTER)) for fn in module.functions):
        return 0
    calls = [inst for fn in module.functions if not fn.is_declaration for block in fn.blocks
             for inst in block.instructions if _named(inst, (GATHER, SCATTER))]
    rewritten = 0
    with Builder(module.context) as b:
        for call in calls:
            if _named(call, GATHER):
                pointers, mask, passthru = call.args
                pointer = splat_of(pointers)
                if pointer is not None:
                    _load_once(b, module, call, pointer, mask, passthru)
                    rewritten += 1
                continue
            value, pointers, mask = call.args
            scalar, pointer = splat_of(value), splat_of(pointers)
            if scalar is not None and pointer is not None:
                _store_once(b, module, call, scalar, pointer, mask)
                rewritten += 1
    return rewritten


def _named(inst, prefixes) -> bool:
    if not isinstance(inst, CallInst):
        return False
    callee = inst.callee
    return callee is not None and callee.name.startswith(prefixes)


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


def _condition(b, module, call, mask):
    """Whether any lane of `mask` is set: a constant where the mask is one, lane 0 of a splat, else
    `llvm.vector.reduce.or` (built before `call`)."""
    condition = splat_of(mask)
    if condition is None:
        reduce = module.declare_intrinsic(f"llvm.vector.reduce.or.v{mask.type.count}i1",
                                          FunctionType.get(module.context.i1, [mask.type]))
        b.position_before(call)
        condition = b.call(reduce, [mask], "any")
    return condition


def _under(b, call, condition, name: str):
    """Split the block of `call` before it into the code up to it, a block `<name>` that runs only where
    `condition` holds and the rest (from `call` on); returns (the block before, the new block), the builder
    at the new block's end, before its branch to the rest."""
    rest = call.parent
    before = b.split_before(call)
    then = rest.parent.append_block(f"{rest.name or name}.{name}")
    then.move_before(rest)
    b.cond_br(condition, then, rest)
    b.position_at_end(then)
    b.br(rest)
    b.position_before(then.terminator)
    return before, then


def _keep_metadata(module, call, access) -> None:
    for kind in _KEPT:
        node = call.get_metadata(module.context.md_kind_id(kind))
        if node:
            access.set_metadata(module.context.md_kind_id(kind), node)


def _store_once(b, module, call, value, pointer, mask) -> None:
    """Put the store of `value` at `pointer` where the scatter `call` is, under `mask`, and erase the call."""
    condition = _condition(b, module, call, mask)
    if isinstance(condition, ConstantInt) and not condition.value:
        call.erase()
        return
    if isinstance(condition, ConstantInt):
        b.position_before(call)
    else:
        _under(b, call, condition, "store")
    store = b.store(value, pointer, align=call.param_attributes(1).number("align") or 1)
    _keep_metadata(module, call, store)
    call.erase()


def _load_once(b, module, call, pointer, mask, passthru) -> None:
    """Put the load of `pointer` where the gather `call` is, under `mask`: its value in the active lanes, the
    pass-through value in the others; erase the call."""
    condition = _condition(b, module, call, mask)
    vector = call.type
    if isinstance(condition, ConstantInt) and not condition.value:
        call.replace_all_uses_with(passthru)
        call.erase()
        return
    if isinstance(condition, ConstantInt):
        b.position_before(call)
        before = then = None
    else:
        before, then = _under(b, call, condition, "load")
    load = b.load(vector.element_type, pointer, align=call.param_attributes(0).number("align") or 1)
    _keep_metadata(module, call, load)
    i32 = module.context.i32
    lanes = b.insert_element(Constant.poison(vector), load, ConstantInt.get(i32, 0))
    value = b.shuffle_vector(lanes, Constant.poison(vector), Constant.vector([ConstantInt.get(i32, 0)] * vector.count))
    if splat_of(mask) is None and not isinstance(passthru, (UndefValue, PoisonValue)):
        value = b.select(mask, value, passthru)  # some lanes may be off: theirs is the pass-through value
    if then is not None:
        b.position_before(call)
        value = b.phi(vector, [(value, then), (passthru, before)])
    call.replace_all_uses_with(value)
    call.erase()
