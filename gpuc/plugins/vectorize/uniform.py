"""Which values of the launch loop's body differ between the work items of a chunk (varying) and which
are the same in all of them (uniform, kept scalar).

Index 0 varies; so does whatever is computed from a varying value, a load from a varying address, the
result of a call that runs lane by lane, a phi where lanes that took different paths meet (a block
reachable from a branch on a varying condition), and a value of a loop whose lanes leave it at
different iterations (a divergent loop), where it is used after the loop. Everything else is uniform.
The analysis errs towards varying: a uniform value treated as varying costs time, never correctness.
"""

from __future__ import annotations

from gpuc.llvm import BranchInst, CallInst, Instruction, PHINode

from .loops import ControlFlow


class Uniformity:
    def __init__(self, cf: ControlFlow, pure_call, private=()):
        self.cf, self.item = cf, cf.item
        self.pure_call = pure_call  # CallInst -> whether it computes its result from its arguments alone
        self.varying: set = {self.item.iv, *private}  # an item's own slots: one per lane (private.py)
        self.divergent: set = set()  # loops some lanes leave before others
        self.def_block = {i: blk for blk in self.item.body for i in blk.instructions}
        reach = cf.dag_reach()
        self._run(reach)

    def is_varying_at(self, v, use_block) -> bool:
        """Whether `v`, read in `use_block` (for a phi: the phi's own block), differs between lanes."""
        if v in self.varying:
            return True
        blk = self.def_block.get(v) if isinstance(v, Instruction) else None
        if blk is None:
            return False
        return any(loop in self.divergent and use_block not in loop.blocks
                   for loop in self.cf.loops_containing(blk))

    def branch_varies(self, blk) -> bool:
        term = blk.terminator
        if isinstance(term, BranchInst):
            return term.is_conditional and self.is_varying_at(term.condition, blk)
        if term.opcode_name == "switch":
            return self.is_varying_at(term.condition, blk)
        return False

    def _run(self, reach) -> None:
        cf = self.cf
        changed = True
        while changed:
            changed = False
            varying_branches = [blk for blk in self.item.body if self.branch_varies(blk)]
            joined = set()
            for blk in varying_branches:
                joined |= reach[blk]
            for loop in cf.loops:
                if loop not in self.divergent and any(b in loop.blocks for b in varying_branches):
                    self.divergent.add(loop)
                    changed = True
            for blk in self.item.body:
                for inst in blk.instructions:
                    if inst not in self.varying and self._varies(inst, blk, joined, varying_branches):
                        self.varying.add(inst)
                        changed = True

    def _varies(self, inst, blk, joined, varying_branches) -> bool:
        if isinstance(inst, PHINode):
            incoming = inst.incoming
            if any(self.is_varying_at(v, blk) for v, _ in incoming):
                return True
            if len({v for v, _ in incoming}) < 2:
                return False
            loop = self.cf.loop_of.get(blk)
            if loop is not None and loop.header == blk:
                entries = [p for _, p in incoming if p not in loop.blocks]
                return (len(entries) > 1 or len(loop.latches) > 1) and bool(varying_branches)
            return blk in joined
        if any(self.is_varying_at(op, blk) for op in inst.operands if not _is_block_or_callee(inst, op)):
            return True
        if isinstance(inst, CallInst):
            return not self.pure_call(inst)
        return inst.opcode_name in ("atomicrmw", "cmpxchg")


def _is_block_or_callee(inst, op) -> bool:
    from gpuc.llvm import BasicBlock
    return isinstance(op, BasicBlock) or (isinstance(inst, CallInst) and op == inst.callee)
