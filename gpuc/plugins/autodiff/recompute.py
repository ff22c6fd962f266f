"""Values of a loop iteration that the reverse sweep computes again instead of keeping on the tape.

Integer arithmetic, comparisons, selects, casts and addresses (GEPs) computed in a loop from the loop's
counters are cheap to compute again and as wide as what they are computed from, or wider: a tiled loop's
record would hold, per item and iteration, the shadow pointers of the elements it loaded and which arm of
each `a if c else b` it took, where its counter alone says all of them. So where the reverse of a block
in a loop needs such a value of the same iteration (reverse.py's `need`), it clones the instructions that
computed it, in the reverse block, from:

- values defined outside every loop (kept in a stack slot, as `need` keeps them), constants, arguments;
- *anchors*: integer phis of loop headers (the counters), which go on the tape as before, one field per
  counter per record, shared by every value computed from it.

Which predecessor a join block was entered from (its `from` phi) is computed again as the branch that
decided it: `select(c, k_true, k_false)` when the join's immediate dominator ends in `br c` whose two arms
(entered from that branch alone) lead to its two predecessors within one iteration of the same loop (no
loop header between them), and `c` is computable again. Not in a function with a cycle of two entries.

Instructions computed again ran forward with the same operands, so they cannot fault (a division by zero
would have faulted there). A value needing more than LIMIT instructions, or an anchor that is not a
counter (a float, a load), keeps its place on the tape.
"""

from __future__ import annotations

import functools

import gpuc.llvm as llvm
from gpuc.compiler import dominates

#: What the reverse computes again from its operands.
COMPUTED = frozenset({"add", "sub", "mul", "shl", "lshr", "ashr", "and", "or", "xor", "udiv", "sdiv", "urem", "srem",
                      "icmp", "select", "trunc", "zext", "sext", "getelementptr", "addrspacecast", "ptrtoint",
                      "inttoptr", "bitcast"})
#: At most this many instructions computed again for one value.
LIMIT = 24


class Recomputation:
    """The analysis for one reverse sweep `r` (reverse.py's _Reverse, after its forward part is built)."""

    def __init__(self, r) -> None:
        self.r = r
        self.block_of = {copy: block for block, copy in r.bmap.items()}  # gfn's forward blocks -> fn's
        self.choice_of = {phi: join for join, phi in r.from_phis.items()}
        self.known: dict = {}  # gfn value -> whether it can be computed again
        self.branches: dict = {}  # fn's join -> _deciding_branch's answer

    @functools.cached_property
    def headers(self) -> set:
        """fn's loop headers: blocks with a predecessor they dominate (a back edge)."""
        r = self.r
        return {block for block in r.order if any(block in r.dominator_tree and dominates(r.dominator_tree, block, p)
                                                  for p in r.preds[block])}

    @functools.cached_property
    def reducible(self) -> bool:
        """Whether every cycle of fn is a natural loop (else nothing is computed again: a block of a cycle
        with two entries may be entered one way the first time and another way after)."""
        return all(block in self.r.innermost_loops for block in self.r.cyclic)

    def computable(self, value) -> bool:
        """Whether gfn's forward `value` (defined in a loop) can be computed again in the reverse."""
        return self.reducible and self._walk(value, set())

    def _walk(self, value, seen: set) -> bool:
        if not isinstance(value, llvm.Instruction) or value.parent == self.r.alloca_block:
            return True
        block = self.block_of.get(value.parent)
        if block is None:
            return False
        if block not in self.r.cyclic or self._anchor(value, block):
            return True
        known = self.known.get(value)
        if known is not None:
            return known
        if value in seen:
            return True
        seen.add(value)
        if len(seen) > LIMIT:
            return False
        join = self.choice_of.get(value)
        if join is not None:
            branch = self._deciding_branch(join)
            ok = branch is not None and self._walk(self.r.value(branch[0]), seen)
        else:
            ok = value.opcode_name in COMPUTED and all(self._walk(op, seen) for op in value.operands
                                                       if not isinstance(op, llvm.BasicBlock))
        self.known[value] = ok
        return ok

    def counter_around(self, value, carrier) -> bool:
        """Whether gfn's forward `value` is an anchor whose loop holds fn's block `carrier`: its value where
        the carrier ends is the one it has throughout the iteration (reverse.py's `_tape` pushes it once)."""
        block = self.block_of.get(value.parent) if isinstance(value, llvm.Instruction) else None
        return block is not None and self._anchor(value, block) and dominates(self.r.dominator_tree, block, carrier)

    def _anchor(self, value, block) -> bool:
        return isinstance(value, llvm.PHINode) and block in self.headers and value not in self.choice_of \
            and isinstance(value.type, llvm.IntegerType)

    def _deciding_branch(self, join):
        """(the condition c of fn's branch that decides which predecessor of `join` it is entered from, the
        `from` value when c is true, when false), or None where that is not one branch of the same iteration."""
        if join not in self.branches:
            self.branches[join] = self._branch_of(join)
        return self.branches[join]

    def _branch_of(self, join):
        r = self.r
        preds = r.preds[join]
        if len(preds) != 2 or join in self.headers:
            return None
        decider = r.dominator_tree.get(join)
        term = decider.terminator if decider is not None else None
        if not isinstance(term, llvm.BranchInst) or not term.is_conditional:
            return None
        true_arm, false_arm = term.successors
        if true_arm == false_arm:
            return None
        loops = r.innermost_loops
        loop = loops.get(decider)
        if loops.get(join) != loop:
            return None
        if any(arm != join and r.preds[arm] != [decider] for arm in (true_arm, false_arm)):
            return None  # (an arm entered from elsewhere too: reaching it says nothing of this branch)
        sides = []
        for pred in preds:
            side = [arm for arm in (true_arm, false_arm)
                    if (arm == join and pred == decider) or (arm != join and dominates(r.dominator_tree, arm, pred))]
            if len(side) != 1 or not self._within(pred, decider, loop):
                return None
            sides.append(side[0])
        if sides[0] == sides[1]:
            return None
        k_true = sides.index(true_arm)
        return term.condition, k_true, 1 - k_true

    def _within(self, pred, decider, loop) -> bool:
        """Whether every block from `decider` to `pred` lies in `loop` (the innermost loop of both) and none
        is a loop header but `decider`: within one iteration, `decider` runs once before `pred`."""
        r = self.r
        seen, work = set(), [pred]
        while work:
            block = work.pop()
            if block in seen or block == decider:
                continue
            seen.add(block)
            if r.innermost_loops.get(block) != loop or block in self.headers:
                return False
            work.extend(r.preds[block])
        return True

    def compute(self, value, memo: dict):
        """gfn's forward `value` computed again at the builder's position in the reverse block being built
        (its anchors and values outside loops from the tape and stack slots, through `need`)."""
        r = self.r
        if not isinstance(value, llvm.Instruction) or value.parent == r.alloca_block:
            return value
        done = memo.get(value)
        if done is not None:
            return done
        block = self.block_of[value.parent]
        if block not in r.cyclic:
            result = r.need(value, block)
        elif self._anchor(value, block):
            result = r.taped(value)
        elif value in self.choice_of:
            condition, k_true, k_false = self._deciding_branch(self.choice_of[value])
            i32 = r.ctx.i32
            result = r.b.select(self.compute(r.value(condition), memo), llvm.ConstantInt.get(i32, k_true),
                                llvm.ConstantInt.get(i32, k_false))
        else:
            result = value.clone()
            for k, op in enumerate(value.operands):
                if not isinstance(op, llvm.BasicBlock):
                    again = self.compute(op, memo)
                    if again is not op:
                        result.operands[k] = again
            result = r.b.insert(result)
        memo[value] = result
        return result
