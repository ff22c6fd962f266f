"""Which values of a kernel with barriers are the same in every work item of a block (uniform), for
the work-item loops of gpuc/plugins/workitems.py: a uniform value kept across a barrier is read, at
the start of the region after it, once for the whole block instead of once per item, so that the
region's loop over items sees it as loop-invariant (pocl's uniform regions).

Written against the public API only, like the plugin that uses it.

The analysis errs towards varying: a uniform value taken for varying costs time, never correctness.
Varying are the thread and work-item indices, whatever reads memory (another item may have written
it), atomics, calls other than those `pure_call` names, whatever is computed from a varying value,
a phi where items that took different paths meet (a block reachable, without going round a loop,
from a branch on a varying condition, before or where that branch's arms meet again), the phis of a
loop header with several entries or latches once any branch varies, and a value defined in a loop
that items may leave at different iterations wherever it is used outside that loop: a loop holding a
varying branch whose arms may leave the loop or go round it before they meet again (its immediate
post-dominator; an `if` inside the body whose arms meet before the loop's exits and latches leaves
every item in the loop as long as the others).

What "uniform" promises is what the work-item loops need: the items of a block that arrive together
at a barrier hold the same value of it, each from its latest definition. (Items that go round a
loop holding a barrier a different number of times do not arrive together: that is the divergence
error.)
"""

from __future__ import annotations

from gpuc.compiler import dominates, immediate_dominators, natural_loop, reverse_postorder
from gpuc.llvm import CallInst, Instruction, PHINode, PoisonValue, UndefValue

#: Metadata on a load whose producer vouches that it reads, in every item that runs it, the value
#: uniform across the block that the item stored (an adjoint's tape read back in its reverse sweep of a
#: value uniform in its forward one: items that push and pop it together hold the same).
UNIFORM_READ = "gpuc.uniform.read"

#: Opcodes whose result depends on more than their operands.
_READS = frozenset({"load", "atomicrmw", "cmpxchg", "alloca", "va_arg", "landingpad", "catchpad", "cleanuppad"})


def uniform_values(fn, pure_call, entry=None) -> set:
    """The instructions of `fn` that are uniform across a block (see the module doc); `pure_call(call)`
    says whether a call gives every item the same result when its arguments are the same. An empty
    set when `fn`'s control flow is irreducible. `entry`: where the items start, when not at `fn`'s
    entry block (the blocks reachable from it only are looked at)."""
    graph = _Graph(fn, entry)
    if graph.irreducible:
        return set()
    varying: set = set()
    divergent: set = set()  # loops holding a branch on a varying condition
    insts = [(blk, inst) for blk in graph.rpo for inst in blk.instructions]
    changed = True
    while changed:
        changed = False
        branching = [blk for blk in graph.rpo if _condition(blk) in varying]
        joined = set()
        for blk in branching:
            joined |= graph.reach[blk]
        for loop in graph.loops:
            if loop not in divergent and any(blk in loop.blocks and graph.may_diverge(blk, loop) for blk in branching):
                divergent.add(loop)
                changed = True
        escaping = {v for loop in divergent for v in loop.escaping}
        for blk, inst in insts:
            if inst not in varying and _varies(inst, blk, graph, varying, escaping, joined, branching, pure_call):
                varying.add(inst)
                changed = True
    return {inst for _, inst in insts if inst not in varying}


def _condition(blk):
    term = blk.terminator
    if term is None or term.opcode_name not in ("br", "switch") or len(term.operands) < 2:
        return None
    return term.operands[0]


def _varies(inst, blk, graph, varying, escaping, joined, branching, pure_call) -> bool:
    if inst in escaping:
        return True
    if isinstance(inst, PHINode):
        sources = {v for v in inst.incoming_values
                   if v != inst and not isinstance(v, (UndefValue, PoisonValue))}
        if any(v in varying for v in sources):
            return True
        loop = graph.header_of.get(blk)
        if len(sources) < 2:
            # an undefined value from some edges: where items may come in by others too (a join after a
            # branch that differs between them), those that do not define it would keep theirs for the block
            return loop is None and blk in joined and len(sources) < len(set(inst.incoming_values)) \
                and any(graph.joins(branch, blk) for branch in branching)
        if loop is not None:
            entries = [p for p in blk.predecessors if p not in loop.blocks]
            return (len(entries) > 1 or len(loop.latches) > 1) and bool(branching)
        # items come in by different edges only where the arms of a varying branch have not met again
        # (an `if` on the item's index inside a loop whose uniform exit this phi follows: they have)
        return blk in joined and any(graph.joins(branch, blk) for branch in branching)
    if isinstance(inst, CallInst):
        if not pure_call(inst):
            return True
        return any(op in varying for op in inst.args)
    if inst.opcode_name in _READS:
        return inst.opcode_name != "load" or inst.string_metadata(UNIFORM_READ) is None
    return any(op in varying for op in inst.operands if isinstance(op, Instruction))


class _Loop:
    def __init__(self, header, blocks, latches) -> None:
        self.header, self.blocks, self.latches = header, blocks, latches
        #: Instructions defined inside and used outside.
        self.escaping = {inst for blk in blocks for inst in blk.instructions
                         if any(isinstance(u, Instruction) and u.parent not in blocks for u in inst.users)}


class _Graph:
    """`fn`'s reachable blocks in reverse post-order, its natural loops, and for each block the
    blocks reachable from it without going round a loop."""

    def __init__(self, fn, entry=None) -> None:
        self.rpo, retreating = reverse_postorder(entry or fn.entry_block, lambda blk: blk.successors)
        index = {blk: k for k, blk in enumerate(self.rpo)}
        idom = immediate_dominators(self.rpo, lambda blk: blk.predecessors)
        self.irreducible = not all(dominates(idom, dst, src) for src, dst in retreating)
        latches: dict = {}
        for src, dst in retreating:
            latches.setdefault(dst, []).append(src)
        self.loops, self.header_of = [], {}
        for header, ends in latches.items():
            loop = _Loop(header, natural_loop(header, ends, lambda blk: blk.predecessors, index), ends)
            self.loops.append(loop)
            self.header_of[header] = loop
        back = set(retreating)
        self._back = back
        self._post = None
        self.reach: dict = {}
        for blk in reversed(self.rpo):  # successors first
            found = set()
            for succ in blk.successors:
                if (blk, succ) not in back and succ in index:
                    found.add(succ)
                    found |= self.reach.get(succ, set())
            self.reach[blk] = found

    def may_diverge(self, branch, loop) -> bool:
        """Whether items that take different arms of `branch` (a block of `loop`) may leave `loop` or go
        round it at different times: unless the arms meet again at `branch`'s immediate post-dominator, in
        the loop and not its header, with no exit or latch of the loop on the way."""
        meet = self.post_dominators().get(branch)
        if meet is None or meet not in loop.blocks or meet == loop.header:
            return True
        between = self.reach[branch] - self.reach.get(meet, set()) - {meet}
        for blk in between:
            if blk not in loop.blocks or blk == loop.header or blk in loop.latches:
                return True
            if any(succ not in loop.blocks for succ in blk.successors):
                return True
        return False

    def joins(self, branch, blk) -> bool:
        """Whether items that take different arms of `branch` may come into `blk` by different edges: `blk`
        is reachable from it (without going round a loop) before or where its arms meet again."""
        if blk not in self.reach[branch]:
            return False
        meet = self.post_dominators().get(branch)
        return meet is None or blk == meet or blk not in self.reach.get(meet, set())

    def post_dominators(self) -> dict:
        """Each block that reaches a block without successors -> its immediate post-dominator (absent:
        those without successors, and blocks of loops no item leaves)."""
        if self._post is None:
            exit_ = object()
            index = set(self.rpo)
            succs = {blk: [s for s in blk.successors if s in index] for blk in self.rpo}
            into = {exit_: [blk for blk in self.rpo if not succs[blk]]}
            for blk in self.rpo:
                into[blk] = [p for p in blk.predecessors if p in index]
            order, _ = reverse_postorder(exit_, lambda blk: into[blk])
            idom = immediate_dominators(order, lambda blk: (succs[blk] or [exit_]) if blk is not exit_ else [])
            self._post = {blk: up for blk, up in idom.items() if up is not exit_ and blk is not exit_}
        return self._post
