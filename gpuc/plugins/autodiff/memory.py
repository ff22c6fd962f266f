"""Memory in the tangent transformation: stack slots get shadow slots holding the tangents of what
they hold; every other memory the function reads is constant data, and writing floats to it is an error."""

from __future__ import annotations

import gpuc.llvm as llvm

from .kinds import carries_floats

_DERIVED = ("getelementptr", "addrspacecast", "bitcast", "select", "phi")


def stack_pointers(fn: llvm.Function) -> set:
    """fn's pointers into its own stack slots: allocas and what GEPs, casts, selects and phis derive
    from them (a fixpoint, since phis may come before the pointers they merge)."""
    found: set = set()
    changed = True
    while changed:
        changed = False
        for inst in fn.instructions():
            if inst in found:
                continue
            op = inst.opcode_name
            if op == "alloca" or (op in _DERIVED and isinstance(inst.type, llvm.PointerType)
                                  and any(v in found for v in _pointer_sources(inst))):
                found.add(inst)
                changed = True
    return found


def _pointer_sources(inst) -> list:
    if inst.opcode_name == "select":
        return list(inst.operands)[1:]
    if inst.opcode_name == "phi":
        return inst.incoming_values
    return [inst.operands[0]]


def alloca(self, inst) -> None:
    # Every slot gets a shadow: a float may be stored into any of them (also through a byte array).
    new = self.vmap[inst] = self.clone(inst)
    shadow = self.clone(inst)
    shadow.name = f"{new.name}.d" if new.name else ""
    self.shadows[inst] = shadow


def pointer_op(self, inst) -> None:
    """GEPs and pointer casts: the same on the shadow pointer, when the base is a stack slot."""
    new = self.vmap[inst] = self.clone(inst)
    base = inst.operands[0]
    if base in self.shadows:
        shadow = self.b.insert(new.clone())
        shadow.operands[0] = self.shadows[base]
        self.shadows[inst] = shadow
    elif inst in self.stack:
        raise self.error(inst, "a pointer into a stack slot derived from other memory")


def load(self, inst) -> None:
    new = self.vmap[inst] = self.clone(inst)
    pointer = inst.operands[0]
    if pointer in self.shadows and carries_floats(inst.type):
        t = self.b.insert(new.clone())
        t.operands[0] = self.shadows[pointer]
        self.tangents[inst] = t
    # Anything else the function reads is constant data for it: nothing it computes is ever
    # stored there (that is an error below), so its tangent is zero.


def store(self, inst) -> None:
    value, pointer = inst.operands
    if value in self.stack:
        raise self.error(inst, "a pointer to a stack slot escapes into memory")
    if pointer in self.shadows:
        self.clone(inst)
        t = self.b.insert(inst.clone())
        t.operands[0] = self.tangent_or_zero(value) if carries_floats(value.type) else llvm.Constant.null(value.type)
        t.operands[1] = self.shadows[pointer]
        return
    if carries_floats(value.type):
        raise self.error(inst, "a float stored outside the function's own stack (through a pointer argument "
                               "or into a global) would carry a derivative the caller cannot receive")
    self.clone(inst)


def atomic(self, inst) -> None:
    if any(carries_floats(op.type) for op in inst.operands) or carries_floats(inst.type):
        raise self.error(inst, "atomic operations on floats are not differentiated")
    if any(op in self.stack for op in inst.operands):
        raise self.error(inst, "atomic operations on stack slots are not differentiated")
    self.vmap[inst] = self.clone(inst)


MEMORY_HANDLERS = {"alloca": alloca, "load": load, "store": store, "getelementptr": pointer_op,
                   "addrspacecast": pointer_op, "atomicrmw": atomic, "cmpxchg": atomic}
