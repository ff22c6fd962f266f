"""Memory in the tangent transformation: stack slots and heap temporaries get shadows holding the
tangents of what they hold; every other memory the function reads is constant data, and writing
floats to it is an error."""

from __future__ import annotations

import gpuc.llvm as llvm

from . import masked
from .kinds import carries_floats

_DERIVED = ("getelementptr", "addrspacecast", "bitcast", "select", "phi")


def stack_pointers(fn: llvm.Function, heap=None) -> set:
    """fn's pointers into its own stack slots: allocas, calls of the target's allocator `heap[0]`
    (heap temporaries, given `heap`) and what GEPs, casts, selects and phis derive from them (a
    fixpoint, since phis may come before the pointers they merge)."""
    found: set = set()
    changed = True
    while changed:
        changed = False
        for inst in fn.instructions():
            if inst in found:
                continue
            op = inst.opcode_name
            if op == "alloca" or allocates(inst, heap) or (op in _DERIVED and isinstance(inst.type, llvm.PointerType)
                                  and any(v in found for v in pointer_sources(inst))):
                found.add(inst)
                changed = True
    return found


def private_pointers(fn: llvm.Function, heap=None) -> set:
    """fn's pointers into memory no caller sees: its stack slots, and the heap temporaries it
    allocates with the target's allocator (`heap`: the names of it and of its free) and frees itself
    without their address escaping, with what GEPs, casts, selects and phis derive from them, a
    select or phi only where every pointer it merges is such (the largest such set: phis of a loop
    may merge each other)."""
    roots = {inst for inst in fn.instructions() if inst.opcode_name == "alloca"}
    roots |= {inst for inst in fn.instructions() if allocates(inst, heap) and _kept(inst, fn, heap)}
    found = roots | {inst for inst in fn.instructions()
                     if inst.opcode_name in _DERIVED and isinstance(inst.type, llvm.PointerType)}
    changed = True
    while changed:
        changed = False
        for inst in list(found - roots):
            if not all(v in found for v in pointer_sources(inst)):
                found.discard(inst)
                changed = True
    return found


def allocates(inst, heap) -> bool:
    """Whether `inst` calls the target's allocator `heap[0]` (a heap temporary, such as the buffer of
    a copy into an overlapping view)."""
    if heap is None or inst.opcode_name != "call":
        return False
    callee = inst.callee
    return isinstance(callee, llvm.Function) and callee.name == heap[0] and callee.is_declaration


_KEEPING_CALLS = ("llvm.memset.", "llvm.memcpy.", "llvm.memmove.", "llvm.lifetime.", "llvm.masked.")


def _kept(allocation, fn: llvm.Function, heap) -> bool:
    """Whether the heap temporary `allocation` is freed by fn and its address never leaves it: every
    pointer derived from it is only loaded from, stored to, compared, freed or given to memory
    intrinsics."""
    derived = derived_from(allocation, fn)
    freed = False
    for pointer in derived:
        for use in pointer.uses:
            user = use.user
            op = user.opcode_name
            if user in derived or op in ("load", "icmp"):
                continue
            if op == "store" and user.operands[0] != pointer:
                continue
            if op == "ptrtoint" and only_compared(user):
                continue
            callee = user.callee if op == "call" else None
            name = callee.name if isinstance(callee, llvm.Function) else ""
            if heap is not None and name == heap[1]:
                freed = True
                continue
            if name.startswith(_KEEPING_CALLS):
                continue
            return False
    return freed


def derived_from(root, fn: llvm.Function) -> set:
    """`root` and the pointers GEPs, casts, selects and phis derive from it."""
    found = {root}
    changed = True
    while changed:
        changed = False
        for inst in fn.instructions():
            if (inst not in found and inst.opcode_name in _DERIVED and isinstance(inst.type, llvm.PointerType)
                    and any(v in found for v in pointer_sources(inst))):
                found.add(inst)
                changed = True
    return found


def stores_into_outputs(fn: llvm.Function) -> dict:
    """fn's stores (plain, not volatile, or masked) whose address may point only into its outputs, each with
    the outputs it may store into; outputs are pointer parameters fn only stores into. Every use of a pointer
    derived from such a parameter (through GEPs, casts, selects and phis) derives another such pointer or is
    the address of a store; a load, an atomic
    operation, a call, a comparison, a conversion to an integer or the pointer stored as a value makes the
    parameter one fn reads (or may). What fn stores there is never read back by fn
    (`gpuc.adjoint(k, primal_writes=False)` leaves these stores out). One pass over fn."""
    params = {a for a in fn.args if isinstance(a.type, llvm.PointerType)}
    memo: dict = {}

    def rooted(value) -> set:
        """What `value`, if a pointer (or a vector of them), derives from: parameters among them."""
        if isinstance(value, llvm.BasicBlock) or not is_pointer(value.type):
            return set()
        found = memo.get(value)
        if found is None:
            found = memo[value] = roots(value)
        return found

    read, stores = set(), []
    for inst in fn.instructions():
        op = inst.opcode_name
        if op in _DERIVED and is_pointer(inst.type):
            continue  # a pointer derived from others: its own uses count
        if op == "store" and not inst.is_volatile:
            address, others = inst.operands[1], [inst.operands[0]]
        elif op == "call" and masked.kind(inst.callee) == "store":
            address, others = masked.pointer_of(inst), [a for k, a in enumerate(inst.args) if k != 1]
        else:
            address, others = None, list(inst.operands)
        for value in others:
            read |= rooted(value)
        if address is not None:
            stores.append((inst, address))
    outputs = params - read
    return {inst: rooted(address) for inst, address in stores if outputs and rooted(address) <= outputs}


def roots(pointer) -> set:
    """Where `pointer` may point into: the parameters, stack slots (or other values) it derives from
    through GEPs, casts, selects and phis."""
    found, seen, todo = set(), set(), [pointer]
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        if isinstance(p, llvm.Instruction) and p.opcode_name in _DERIVED and is_pointer(p.type):
            todo += pointer_sources(p)
        else:
            found.add(p)
    return found


def is_pointer(ty) -> bool:
    """A pointer or a vector of pointers (a vectorized loop's addresses)."""
    return isinstance(ty, llvm.PointerType) or isinstance(ty, llvm.VectorType) and isinstance(
        ty.element_type, llvm.PointerType)


def pointer_sources(inst) -> list:
    if inst.opcode_name == "select":
        return list(inst.operands)[1:]
    if inst.opcode_name == "phi":
        return inst.incoming_values
    return [inst.operands[0]]


# Integer code an address may flow through on its way to a comparison.
_INTEGER_FLOW = frozenset({"add", "sub", "mul", "udiv", "sdiv", "urem", "srem", "and", "or", "xor", "shl", "lshr",
                           "ashr", "zext", "sext", "trunc", "freeze", "select", "phi"})


def only_compared(address) -> bool:
    """Whether the integer `address` (a `ptrtoint` of a pointer into a stack slot, such as a copy's
    overlap check makes) is only compared: everything integer arithmetic, casts, selects and phis
    compute from it ends in an `icmp`, never in a pointer, a store, a call or a `ret`. Comparing says
    nothing about the slot's contents, so its shadow needs nothing."""
    seen, todo = set(), [address]
    while todo:
        value = todo.pop()
        if value in seen:
            continue
        seen.add(value)
        for use in value.uses:
            user = use.user
            op = user.opcode_name
            if op == "icmp":
                continue
            if op not in _INTEGER_FLOW or isinstance(user.type, llvm.PointerType) or carries_floats(user.type):
                return False
            todo.append(user)
    return True


def alloca(self, inst) -> None:
    # Every slot gets a shadow: a float may be stored into any of them (also through a byte array).
    new = self.vmap[inst] = self.clone(inst)
    shadow = self.clone(inst)
    shadow.name = f"{new.name}.d" if new.name else ""
    self.shadows[inst] = shadow


def pointer_op(self, inst) -> None:
    """GEPs and pointer casts: the same on the shadow pointer, when the base has a shadow (a stack slot,
    an active pointer parameter's memory)."""
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
    if value in self.stack or value in getattr(self, "duplicated", ()):
        raise self.error(inst, "a pointer to memory with tangents (a stack slot, or an array with a tangent) is "
                               "stored into memory: its tangents would be lost")
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
    pointer = inst.operands[0]
    if (inst.opcode_name == "atomicrmw" and inst.operation in ("fadd", "fsub") and pointer in self.shadows
            and len(inst.uses) == 0):
        # an atomic add into memory with tangents (gpuc.atomic_add on an array with a tangent): the
        # tangent's own atomic add into the shadow, whose result is not used either
        self.vmap[inst] = self.clone(inst)
        t = self.b.insert(inst.clone())
        t.operands[0] = self.shadows[pointer]
        t.operands[1] = self.tangent_or_zero(inst.operands[1])
        return
    if any(carries_floats(op.type) for op in inst.operands) or carries_floats(inst.type):
        raise self.error(inst, "atomic operations on floats are not differentiated, but for adds into an "
                               "array with a tangent whose old value is not used")
    if any(op in self.stack for op in inst.operands):
        raise self.error(inst, "atomic operations on stack slots are not differentiated")
    self.vmap[inst] = self.clone(inst)


MEMORY_HANDLERS = {"alloca": alloca, "load": load, "store": store, "getelementptr": pointer_op,
                   "addrspacecast": pointer_op, "atomicrmw": atomic, "cmpxchg": atomic}
