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

from gpuc.llvm import (AllocaInst, CallInst, CastInst, ConstantInt, GetElementPtrInst, Instruction, PHINode,
                       SelectInst, StoreInst, TargetData)

from .loops import Unsupported

#: The metadata kind that marks an access of memory no other work item reaches (see the module doc).
PRIVATE = "gpuc.item.private"
#: At most this many bytes of copies (all slots, all lanes) on the launch entry's stack, which a thread of
#: the pool shares with everything else; larger slots keep one copy (the memory test then sends their rows
#: item by item).
MAX_COPY_BYTES = 64 * 1024


def marked(inst) -> bool:
    return inst.string_metadata(PRIVATE) is not None


def private_slots(item, widest: int) -> tuple[int, dict]:
    """The lanes to run the body in, at most `widest`, and the stack slots the body uses as each item's
    own with addresses computed from them outside the body: value -> its base alloca. A slot qualifies
    when the body starts its lifetime and nothing outside the body (but addresses computed from it) uses
    it, while the lanes' copies of the slots so far fit in MAX_COPY_BYTES (slots that marked accesses may
    reach come first).

    A slot without copies is one for all lanes: the memory test sends the rows whose accesses of it it
    sees item by item. Accesses marked PRIVATE it does not see, so a slot whose address may reach one (a
    tape pushes into its first buffer, a slot, until that fills) must get copies: the lanes halve until
    every such slot does, and a body where they fit in no fewer than 2 lanes, or where such a slot is used
    outside the body, is not vectorized."""
    starts = {}  # in the body's order: which slots get copies, where not all fit, is the same every compile
    for blk in item.body:
        for inst in blk.instructions:
            if isinstance(inst, CallInst) and (inst.intrinsic_name or "").startswith("llvm.lifetime.start"):
                starts.setdefault(inst.args[-1], None)
    own = []  # (whether marked accesses may reach it, slot, the addresses derived from it or None, its size)
    with TargetData.from_layout(item.header.parent.parent.data_layout) as td:
        for slot in starts:
            if isinstance(slot, AllocaInst) and slot not in item.inside and _static(slot):
                own.append((_reaches_marked(slot, item), slot, _derived(slot, item), td.size_of(slot.allocated_type)))
    own.sort(key=lambda entry: not entry[0])  # those first (a stable sort: otherwise in the body's order)
    lanes = widest
    while True:
        found, total, shared = {}, 0, []
        for reached, slot, derived, size in own:
            if derived is not None and total + size * lanes <= MAX_COPY_BYTES:
                total += size * lanes
                found.update({v: slot for v in derived})
            elif reached:
                shared.append((slot, derived))
        if not shared:
            return lanes, found
        outside = [slot for slot, derived in shared if derived is None]
        if outside:
            raise Unsupported(f"the item's own stack slot %{outside[0].name} is used outside the loop's body, "
                              "and accesses marked private may reach it")
        if lanes <= 2:
            raise Unsupported(f"the items' own stack slots ({sum(size for *_, size in own)} bytes), which "
                              f"accesses marked private may reach, do not fit in {MAX_COPY_BYTES} bytes for 2 lanes")
        lanes //= 2


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


def _reaches_marked(slot, item) -> bool:
    """Whether an address in `slot` may reach an access or call marked PRIVATE in the body: through
    addresses computed from it, phis and selects, or by being stored (where a marked load may find it)."""
    seen, work = set(), [slot]
    while work:
        v = work.pop()
        for user in v.users:
            if not isinstance(user, Instruction) or user in seen:
                continue
            seen.add(user)
            if marked(user):
                return True
            if isinstance(user, (GetElementPtrInst, PHINode, SelectInst, CastInst)):
                work.append(user)
            elif isinstance(user, StoreInst) and user.value == v:
                return True
    return False


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
