"""Memory of a work item's own: stack slots that each item starts afresh, which lanes get a copy each of.

Inlining a func that keeps something on the stack (the reverse sweep's tape: a state slot and a first
buffer) puts its `alloca` in the launch entry's first block and marks the item's use of it with
`llvm.lifetime.start`/`end` in the loop's body: every item starts with that memory undefined, so no item
reads what another left there. In lanes, each gets a slot of its own: `alloca [W x T]` instead of `T`, and
the address (and the addresses computed from it before the loop) becomes a vector, one slot per lane.

Accesses of that memory leave the memory test (memory.py), and so do those a plugin marks with the
metadata PRIVATE (`!gpuc.item.private !{!""}`): a load, store or call that touches only memory its own
work item reaches (the tape's heap buffers, through the pointers its state slot holds). Calls so marked
run lane by lane, each with its lane's addresses.
"""

from __future__ import annotations

from gpuc.llvm import AllocaInst, CallInst, ConstantInt, GetElementPtrInst, Instruction, TargetData

#: The metadata kind that marks an access of memory no other work item reaches (see the module doc).
PRIVATE = "gpuc.item.private"
#: At most this many bytes of copies (all slots, all lanes) on the launch entry's stack, which a thread of
#: the pool shares with everything else; larger slots keep one copy (the memory test then sends their rows
#: item by item).
MAX_COPY_BYTES = 64 * 1024


def marked(inst) -> bool:
    return inst.string_metadata(PRIVATE) is not None


def private_slots(item, lanes: int) -> dict:
    """The stack slots the body uses as each item's own, and addresses computed from them outside the
    body: value -> its base alloca. A slot qualifies when the body starts its lifetime and nothing
    outside the body (but addresses computed from it) uses it, while `lanes` copies of the slots so far
    fit in MAX_COPY_BYTES."""
    starts = {}  # in the body's order: which slots get copies, where not all fit, is the same every compile
    for blk in item.body:
        for inst in blk.instructions:
            if isinstance(inst, CallInst) and (inst.intrinsic_name or "").startswith("llvm.lifetime.start"):
                starts.setdefault(inst.args[-1], None)
    found, total = {}, 0
    with TargetData.from_layout(item.header.parent.parent.data_layout) as td:
        for slot in starts:
            if not isinstance(slot, AllocaInst) or slot in item.inside or not _static(slot):
                continue
            size = td.size_of(slot.allocated_type) * lanes
            derived = _derived(slot, item)
            if derived is not None and total + size <= MAX_COPY_BYTES:
                total += size
                found.update({v: slot for v in derived})
    return found


def _static(slot) -> bool:
    size = slot.size
    return isinstance(size, ConstantInt) and size.value == 1 and slot.parent == slot.function.entry_block


def _derived(slot, item):
    """`slot` and the GEPs of it outside the body (transitively), or None where anything else outside
    the body uses them."""
    out, work = [], [slot]
    while work:
        v = work.pop()
        out.append(v)
        for user in v.users:
            if not isinstance(user, Instruction):
                return None
            if user in item.inside:
                continue
            if isinstance(user, GetElementPtrInst) and user.operands[0] == v and not any(
                    isinstance(op, Instruction) and op in item.inside for op in user.operands):
                work.append(user)
                continue
            return None
    return out


def rooted(pointer, slots, inside) -> bool:
    """Whether `pointer` is an address in one of the private `slots` (through GEPs)."""
    seen = 0
    while seen < 64:
        if pointer in slots:
            return True
        if not isinstance(pointer, GetElementPtrInst):
            return False
        pointer = pointer.operands[0]
        seen += 1
    return False
