"""The reverse of `llvm.memcpy` and `llvm.memmove` between memory with shadows (LLVM forms them from
element-by-element copy loops, such as a copy into a view through a temporary).

The bytes copied are floats of the one float type the function reads and writes in that memory
(found from its loads and stores); the reverse moves each element's shadow from the destination
to the source: `shadow(src)[e] += shadow(dst)[e]`, then `shadow(dst)[e] = 0`. For `memmove`,
whose ranges may overlap, it runs upwards where the destination lies above the source and
downwards otherwise, so that no element's shadow is read after a later step changed it.
"""

from __future__ import annotations

import gpuc.llvm as llvm


def float_types(ty) -> set:
    """The float types inside `ty` (a float, a vector, a literal struct or array)."""
    if isinstance(ty, llvm.FloatingType):
        return {str(ty)}
    if isinstance(ty, llvm.StructType):
        return set().union(*(float_types(e) for e in ty.elements)) if ty.elements else set()
    if isinstance(ty, (llvm.ArrayType, llvm.VectorType)):
        return float_types(ty.element_type)
    return set()


def element_type(r, pointers):
    """The float type held in the memory `pointers` point into (None when none is accessed there), or
    raises when the function accesses that memory as floats of more than one type."""
    roots = set().union(*(r._roots_of(p) for p in pointers))
    found, types = set(), {}
    for block in r.order:
        for inst in block.instructions:
            op = inst.opcode_name
            if op not in ("load", "store", "atomicrmw"):
                continue
            pointer = inst.operands[1 if op == "store" else 0]
            if pointer in r.shadowed and r._roots_of(pointer) & roots:
                ty = inst.operands[0].type if op == "store" else inst.type
                for name in float_types(ty):
                    found.add(name)
                    types[name] = _scalar(ty)
    if len(found) > 1:
        return False
    return types[found.pop()] if found else None


def _scalar(ty):
    while not isinstance(ty, llvm.FloatingType):
        ty = ty.elements[0] if isinstance(ty, llvm.StructType) else ty.element_type
    return ty


def reverse(r, inst) -> None:
    """The reverse of the memcpy or memmove `inst` (its destination or source has a shadow)."""
    destination, source, size = inst.args[0], inst.args[1], inst.args[2]
    if destination not in r.shadowed:
        raise r.error(inst, "floats copied from memory that has a shadow into memory that has none would carry "
                            "a derivative the caller cannot receive")
    b = r.b
    ty = element_type(r, [p for p in (destination, source) if p in r.shadowed])
    if ty is False:
        raise r.error(inst, "a copy of memory that the function accesses as floats of different types is not "
                            "differentiated")
    shadow_d = r.shadow(destination)
    n = r.primal(size)
    if ty is None or source not in r.shadowed:  # what the destination's shadow stood for is overwritten
        memset = r.module.declare_intrinsic(f"llvm.memset.p{shadow_d.type.address_space}.i{n.type.width}",
                                            llvm.FunctionType.get(r.ctx.void, [shadow_d.type, r.ctx.i8, n.type,
                                                                               r.ctx.i1]))
        b.call(memset, [shadow_d, llvm.ConstantInt.get(r.ctx.i8, 0), n, llvm.ConstantInt.get(r.ctx.i1, 0)])
        return
    atomic = not (source in r.stack or not r._roots_of(source) & r.atomic_bases)
    if atomic and not r.settings.float_atomics:
        raise r.error(inst, f"the adjoint adds into an array that several work items read, with atomic float adds, "
                            f"which {r.settings.target_name} lacks: {r.settings.float_atomics_missing}")
    shadow_s = r.shadow(source)
    i64 = r.ctx.i64
    if n.type != i64:
        n = b.zext(n, i64)
    upward = llvm.ConstantInt.get(r.ctx.i1, 1)
    if inst.callee.name.startswith("llvm.memmove."):
        upward = b.icmp("ugt", b.ptrtoint(r.primal(destination), i64), b.ptrtoint(r.primal(source), i64))
    with llvm.TargetData.from_layout(r.module.data_layout) as td:
        width = td.size_of(ty)
    helper = _helper(r.module, ty, width, shadow_d.type, shadow_s.type, atomic)
    b.call(helper, [shadow_d, shadow_s, b.udiv(n, llvm.ConstantInt.get(i64, width)), upward])


def _helper(module, ty, width: int, dty, sty, atomic: bool):
    """`void @gpuc.autodiff.memcopy.reverse...(ptr %shadow_d, ptr %shadow_s, i64 %count, i1 %upward)`."""
    name = (f"gpuc.autodiff.memcopy.reverse.{ty}.p{dty.address_space}.p{sty.address_space}"
            + (".atomic" if atomic else ""))
    existing = module.functions.get(name)
    if existing is not None and not existing.is_declaration:
        return existing
    ctx, i64 = module.context, module.context.i64
    fn = existing or module.add_function(name, llvm.FunctionType.get(ctx.void, [dty, sty, i64, ctx.i1]))
    fn.linkage = "internal"
    for attr in ("alwaysinline", "nounwind"):
        fn.attributes.add(attr)
    shadow_d, shadow_s, count, upward = fn.args
    zero, one = llvm.ConstantInt.get(i64, 0), llvm.ConstantInt.get(i64, 1)
    with llvm.Builder(ctx) as b:
        entry = fn.append_block("entry")
        loop, done = fn.append_block("loop"), fn.append_block("done")
        b.position_at_end(entry)
        b.cond_br(b.icmp("eq", count, zero), done, loop)
        b.position_at_end(loop)
        step = b.phi(i64, name="step")
        e = b.select(upward, step, b.sub(b.sub(count, one), step))
        at_d, at_s = b.gep(ty, shadow_d, [e]), b.gep(ty, shadow_s, [e])
        value = b.load(ty, at_d)
        b.store(llvm.Constant.null(ty), at_d)
        if atomic:
            b.atomic_rmw("fadd", at_s, value)
        else:
            b.store(b.fadd(b.load(ty, at_s), value), at_s)
        following = b.add(step, one)
        step.add_incoming(zero, entry)
        step.add_incoming(following, loop)
        b.cond_br(b.icmp("ult", following, count), loop, done)
        b.position_at_end(done)
        b.ret()
    return fn
