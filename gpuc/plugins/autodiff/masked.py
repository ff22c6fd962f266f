"""The reverse of LLVM's masked vector memory intrinsics on memory with shadows (`llvm.masked.load`,
`.store`, `.gather`, `.scatter`), which the loop vectorizer makes of strided or conditional loops,
such as copies into views.

Each lane is reversed on its own, as the scalar load or store it stands for: a loaded lane's adjoint
is added to its shadow element, a stored lane's shadow moves to the stored value's adjoint and is
zeroed (lanes of a scatter that write the same element: the last lane's value is what memory holds,
so lanes are reversed from the last; where other work items may store there at once, atomically, as a
store's is). A lane the mask leaves out touches a scratch slot instead.
"""

from __future__ import annotations

import gpuc.llvm as llvm

from .kinds import carries_floats

_LOADS = ("llvm.masked.load.", "llvm.masked.gather.")
_STORES = ("llvm.masked.store.", "llvm.masked.scatter.")


def kind(callee) -> str | None:
    """"load" or "store" for a masked memory intrinsic, else None."""
    name = callee.name if isinstance(callee, llvm.Function) else ""
    return "load" if name.startswith(_LOADS) else "store" if name.startswith(_STORES) else None


def pointer_of(inst):
    """The pointer (or vector of pointers) a masked intrinsic accesses."""
    return inst.args[0] if kind(inst.callee) == "load" else inst.args[1]


def varies(inst, varied, shadowed) -> bool:
    """Whether the result of masked load `inst` varies: read from memory with a shadow, or a varying
    pass-through value."""
    return inst.args[0] in shadowed or inst.args[-1] in varied


def reverse(r, inst) -> None:
    pointer = pointer_of(inst)
    if pointer not in r.shadowed:
        if kind(inst.callee) == "store" and inst.args[0] in r.varied:
            raise r.error(inst, "floats stored outside the function's own stack and its arrays with shadows")
        return
    b, i32 = r.b, r.ctx.i32
    vector_pointers = isinstance(pointer.type, llvm.VectorType)
    loading = kind(inst.callee) == "load"
    vty = inst.type if loading else inst.args[0].type
    if not carries_floats(vty):
        if not loading:  # integers overwrite what the shadow stood for
            _each_lane(r, inst, pointer, vector_pointers, vty, lambda q, lane, m: b.store(
                llvm.Constant.null(vty.element_type), q), reverse_order=False)
        return
    ety = vty.element_type
    mask = r.primal(inst.args[-2] if loading else inst.args[-1])
    if loading:
        a = r.take(inst)
        if a is None:
            return
        passthru = inst.args[-1]
        if passthru in r.varied:
            r.accumulate(passthru, b.select(mask, llvm.Constant.null(vty), a))

        def add(q, lane, m):
            share = b.select(m, b.extract_element(a, llvm.ConstantInt.get(i32, lane)), llvm.Constant.null(ety))
            if _atomic(r, pointer):
                _require_atomics(r, inst)
                b.atomic_rmw("fadd", q, share)
            else:
                b.store(b.fadd(b.load(ety, q), share), q)
        _each_lane(r, inst, pointer, vector_pointers, vty, add, reverse_order=False, mask=mask)
        return
    value = inst.args[0]
    gathered = [llvm.Constant.null(vty)]

    def move(q, lane, m):
        if _atomic(r, pointer):  # several work items may store there at once: one takes the seed
            taken = r.exchange_zero(q, ety)
        else:
            taken = b.load(ety, q)
            b.store(llvm.Constant.null(ety), q)
        share = b.select(m, taken, llvm.Constant.null(ety))
        gathered[0] = b.insert_element(gathered[0], share, llvm.ConstantInt.get(i32, lane))
    _each_lane(r, inst, pointer, vector_pointers, vty, move, reverse_order=True, mask=mask)
    r.accumulate(value, gathered[0])


def _each_lane(r, inst, pointer, vector_pointers, vty, body, *, reverse_order, mask=None) -> None:
    b, i32, i64 = r.b, r.ctx.i32, r.ctx.i64
    ety = vty.element_type
    shadow = r.shadow(pointer)
    if mask is None:
        mask = r.primal(inst.args[-1])
    scratch = _scratch(r, ety)
    lanes = range(vty.count)
    for lane in (reversed(lanes) if reverse_order else lanes):
        m = b.extract_element(mask, llvm.ConstantInt.get(i32, lane))
        if vector_pointers:
            p = b.extract_element(shadow, llvm.ConstantInt.get(i32, lane))
        else:
            p = b.gep(ety, shadow, [llvm.ConstantInt.get(i64, lane)])
        if p.type != scratch.type:
            raise r.error(inst, "a masked vector access of memory outside the stack's address space is not "
                                "differentiated")
        body(b.select(m, p, scratch), lane, m)


def _scratch(r, ety):
    slots = r.__dict__.setdefault("masked_scratch", {})
    key = str(ety)
    if key not in slots:
        slots[key] = r._slot(ety, "masked.scratch", zeroed=False)
    return slots[key]


def _atomic(r, pointer) -> bool:
    return not (pointer in r.stack or not r._roots_of(pointer) & r.atomic_bases)


def _require_atomics(r, inst) -> None:
    if not r.settings.float_atomics:
        raise r.error(inst, f"the adjoint adds into an array that several work items read, with atomic float adds, "
                            f"which {r.settings.target_name} lacks: {r.settings.float_atomics_missing}")
