"""Guards against miscompilations of the LLVM that gpuc links, for plugins to apply to the IR they hand
to LLVM's optimizer."""

from __future__ import annotations

from ..llvm import AtomicCmpXchgInst, AtomicRMWInst, Builder, CallInst, Instruction, LoadInst, StoreInst


def freeze_reads_before_writes(blocks, pure) -> bool:
    """Freeze the value of each load in `blocks` that its block follows with a write to memory (a store,
    an atomic, a call that `pure(call)` does not clear) and that is used in another block: LLVM's loop
    vectorizer makes such a load (under a branch) a masked load, the phi of its value a select on the same
    mask, and LLVM 22's instcombine folds the two into a masked load placed where the select is, after the
    write (`v = a[i]; a[i] = 0` in a branch then read 0). The fold does not look through freeze. Whether
    any was frozen. Plugins that leave loops to LLVM's vectorizer call it on them (the CPU launch loop,
    gpuc/plugins/vectorize; the work-item loops of block kernels, gpuc/plugins/workitems.py)."""
    frozen = False
    blocks = list(blocks)
    if not blocks:
        return False
    with Builder(blocks[0].parent.parent.context) as b:
        for blk in blocks:
            insts = list(blk.instructions)
            for k, inst in enumerate(insts):
                if not isinstance(inst, LoadInst) or inst.is_volatile or inst.ordering not in (None, "notatomic"):
                    continue
                if not any(isinstance(u, Instruction) and u.parent != blk for u in inst.users):
                    continue
                if not any(isinstance(later, (StoreInst, AtomicRMWInst, AtomicCmpXchgInst))
                           or (isinstance(later, CallInst) and not pure(later)) for later in insts[k + 1:]):
                    continue
                b.position_after(inst)
                value = b.freeze(inst)
                inst.replace_all_uses_with(value)
                value.operands[0] = inst
                frozen = True
    return frozen
