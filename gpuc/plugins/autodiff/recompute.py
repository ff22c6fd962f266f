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

A loop outside every other cycle of the function whose header has one entry and one latch (a tiled
kernel's loop over tiles, a `for` over a work item's own trip count) runs once per call, so its counters
need no tape when they step by a constant: each such counter (`k = phi [init, entry], [k + C, latch]`, an
i64, or an `add nsw` of any width: LLVM narrows a counter to the i32 of its trip count) is kept in a stack
slot of its own, which the forward part sets at the header (its last value is the last iteration's) and
the reverse of the header steps back by C on the way to the previous iteration (`Counted`). The header's
`from` is then `k == init`: the first iteration is the one entered from outside (an i64 comes back to init
only after 2**64 / |C| steps, a counter without signed wrap never).

Instructions computed again ran forward with the same operands, so they cannot fault (a division by zero
would have faulted there). A value needing more than LIMIT instructions, or an anchor that is not a
counter (a float, a load), keeps its place on the tape.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import gpuc.llvm as llvm
from gpuc.compiler import dominates

from ..block_uniform import UNIFORM_READ

#: What the reverse computes again from its operands.
COMPUTED = frozenset({"add", "sub", "mul", "shl", "lshr", "ashr", "and", "or", "xor", "udiv", "sdiv", "urem", "srem",
                      "icmp", "select", "trunc", "zext", "sext", "getelementptr", "addrspacecast", "ptrtoint",
                      "inttoptr", "bitcast"})
#: At most this many instructions computed again for one value.
LIMIT = 24
#: A counted loop's counters step by less than this (so that 2**64 / |step| iterations never run).
MAX_STEP = 1 << 16


@dataclass
class Counted:
    """A loop that runs at most once per call, entered from `entry`, back from `latch`; its counters:
    fn's header phi -> (its step, its value from the entry); their slots once made (gfn's)."""
    header: object
    entry: object
    latch: object
    steps: dict
    slots: dict


class Recomputation:
    """The analysis for one reverse sweep `r` (reverse.py's _Reverse, after its forward part is built)."""

    def __init__(self, r) -> None:
        self.r = r
        self.known: dict = {}  # gfn value -> whether it can be computed again
        self.branches: dict = {}  # fn's join -> _deciding_branch's answer
        self.edges: dict = {}  # a counted loop's header -> the reverse's block going on to its latch's

    @functools.cached_property
    def block_of(self) -> dict:
        """gfn's forward blocks -> fn's (once the forward part is built)."""
        return {copy: block for block, copy in self.r.bmap.items()}

    @functools.cached_property
    def choice_of(self) -> dict:
        """gfn's `from` phis -> fn's join blocks (once the forward part is built)."""
        return {phi: join for join, phi in self.r.from_phis.items()}

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

    @functools.cached_property
    def counted(self) -> dict:
        """fn's headers of loops on no other cycle, with one entry and one latch and a counter stepping by a
        constant (see the module doc) -> their Counted."""
        r, found = self.r, {}
        if not self.reducible:
            return found
        for header in self.headers:
            preds = r.preds[header]
            latches = [p for p in preds if dominates(r.dominator_tree, header, p)]
            if len(preds) != 2 or len(latches) != 1:
                continue
            latch, entry = latches[0], next(p for p in preds if p != latches[0])
            if entry in r.cyclic:
                continue
            steps = {}
            for phi in header.instructions:
                if not isinstance(phi, llvm.PHINode):
                    break
                step = _step(phi, latch)
                if step is not None:
                    steps[phi] = (step, phi.incoming_value_for(entry))
            if steps:
                found[header] = Counted(header, entry, latch, steps, {})
        return found

    def counter_slot(self, loop: Counted, phi):
        """The stack slot holding counter `phi` (fn's) of `loop` where the reverse runs, made at first use:
        the forward part stores each iteration's value at the header."""
        slot = loop.slots.get(phi)
        if slot is None:
            r, b = self.r, self.r.b
            slot = loop.slots[phi] = r._slot(phi.type, f"{phi.name}.counter" if phi.name else "", zeroed=False)
            saved = b.block
            header = r.bmap[loop.header]
            first = header.instructions.first
            while isinstance(first, llvm.PHINode):
                first = first.next
            b.position_before(first)
            b.store(r.value(phi), slot)
            b.position_at_end(saved)
        return slot

    def counter(self, loop: Counted, phi):
        """Counter `phi` of `loop` in the iteration whose reverse is being built."""
        r, b = self.r, self.r.b
        value = b.load(phi.type, self.counter_slot(loop, phi))
        step, init = loop.steps[phi]
        # between the value it was entered with and the last (LLVM's own view of the forward loop): what lets
        # it fold Python's wrap-around of negative indices (`x[k + t]`) as it does forward
        start = r.primal(init) if isinstance(init, llvm.Instruction) else r.value(init)
        assume = r.module.get_or_insert_function("llvm.assume", llvm.FunctionType.get(r.ctx.void, [r.ctx.i1]))
        b.call(assume, [b.icmp("sge" if step > 0 else "sle", value, start)])
        if r.mark_uniform:  # every item of a block stores it alike and steps it back alike
            if r.uniform_forward is None:
                r.uniform_forward = r.uniform_values()
            if r.value(phi) in r.uniform_forward:
                value.set_string_metadata(UNIFORM_READ, "")
        return value

    def first_iteration(self, loop: Counted):
        """Whether the iteration of `loop` whose reverse is being built is its first: its first counter holds
        the value it was entered with."""
        r = self.r
        phi, (_, init) = next(iter(loop.steps.items()))
        return r.b.icmp("eq", self.counter(loop, phi), r.primal(init) if isinstance(init, llvm.Instruction)
                        else r.value(init))

    def back_edge(self, header, pred, edge) -> None:
        """`edge`: the block of the reverse of `header` that goes on to the reverse of `pred`; where `pred` is
        a counted loop's latch, its counters step back there to the previous iteration's (`step_back`)."""
        loop = self.counted.get(header)
        if loop is not None and pred == loop.latch:
            self.edges[header] = edge

    def step_back(self) -> None:
        """Once the reverse is built: at each counted loop's back edge, its counters (those the reverse
        read) step back by their steps."""
        b = self.r.b
        for header, edge in self.edges.items():
            loop = self.counted[header]
            b.position_before(edge.terminator)
            for phi, slot in loop.slots.items():
                step = loop.steps[phi][0]
                b.store(b.sub(b.load(phi.type, slot), llvm.ConstantInt.get(phi.type, step)), slot)

    def _counted_of(self, value, block):
        """(the Counted loop, fn's phi) when gfn's `value` is a counter of a counted loop, else None."""
        loop = self.counted.get(block)
        if loop is None:
            return None
        phi = next((p for p in loop.steps if self.r.vmap.get(p) == value), None)
        return None if phi is None else (loop, phi)

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
        if join is not None and join in self.counted:
            ok = True
        elif join is not None:
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
            counted = self._counted_of(value, block)
            result = r.taped(value) if counted is None else self.counter(*counted)
        elif value in self.choice_of and self.choice_of[value] in self.counted:
            loop = self.counted[self.choice_of[value]]
            index = r.preds[loop.header].index
            i32 = r.ctx.i32
            result = r.b.select(self.first_iteration(loop), llvm.ConstantInt.get(i32, index(loop.entry)),
                                llvm.ConstantInt.get(i32, index(loop.latch)))
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


def _step(phi, latch):
    """C when fn's header `phi` is `phi [init, entry], [phi + C, latch]` with 0 < |C| < MAX_STEP, an i64 or
    an add without signed wrap (a counter LLVM narrowed to the i32 of a trip count keeps its `nsw`): either
    way it never comes back to a value it held."""
    if not isinstance(phi.type, llvm.IntegerType):
        return None
    nxt = phi.incoming_value_for(latch)
    if not isinstance(nxt, llvm.Instruction) or nxt.opcode_name != "add":
        return None
    if str(phi.type) != "i64" and not nxt.nsw:
        return None
    a, c = nxt.operands
    if c == phi:
        a, c = c, a
    if a != phi or not isinstance(c, llvm.ConstantInt):
        return None
    step = c.value
    return step if 0 < abs(step) < MAX_STEP else None
