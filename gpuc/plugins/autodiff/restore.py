"""Shared memory put back by the reverse from what the previous iteration stored, instead of from the tape.

The reverse restores shared memory as it goes (blocks.py): the reverse of a store puts back the value the
store overwrote, which the forward part loads just before it and keeps on the tape, one value per store
and iteration. A tiled kernel's loop over tiles stores each item's element of the tile at the same
address in every iteration, so what the store S overwrote in iteration j is what S itself stored in
iteration j - 1. Where the reverse can compute that value again, it does, and the tape keeps nothing:

- S's loop is counted (recompute.py's `Counted`: on no other cycle, its counters in stack slots), S is
  in no loop inside it, runs in every iteration (its block dominates the latch) and writes an address
  computed before the loop (or from such values alone); no other store in the loop writes S's array;
- S's value follows from the loop's counters (stepped back by their steps), values from before the loop,
  integer and float arithmetic, and loads of arrays that the kernel never writes, whose memory no other
  argument of the launch overlaps (`distinct`: the launch checks, gpuc/runtime/adjoint.py); across the
  branches of the iteration (`a[i] if c else 0.0`), which the reverse takes again, so that each load
  runs only where it ran forward (recompute.py's `_deciding_branch`);
- what S overwrote in the loop's first iteration (shared memory as the loop found it) is kept in a stack
  slot, once.

In between, no other item writes S's element: two items storing to one element between the same barriers
is a race, which kernels for the GPUs may not have (and which the restore already assumes).
"""

from __future__ import annotations

from dataclasses import dataclass

import gpuc.llvm as llvm
from gpuc.compiler import dominates, natural_loop

from . import blocks
from .memory import roots
from .recompute import COMPUTED, Counted

#: Float arithmetic computed again like the integer kind (none of it can fault).
_FLOAT_OPS = frozenset({"fadd", "fsub", "fmul", "fdiv", "frem", "fneg", "fcmp", "fptrunc", "fpext", "sitofp",
                        "uitofp", "fptosi", "fptoui"})
#: Calls computed again: pure LLVM intrinsics.
_PURE_CALLS = tuple(p for p in blocks._PURE_INTRINSIC_PREFIXES if p not in ("llvm.assume", "llvm.dbg."))
#: At most this many instructions computed again for one store's value.
LIMIT = 64


@dataclass
class Rewound:
    """A store whose overwritten value the reverse computes again: its loop, and (once the forward part is
    built) the slot keeping what it overwrote in the loop's first iteration."""
    loop: Counted
    first: object = None


def plan(r) -> dict:
    """The restored stores of `r` (reverse.py's _Reverse, analysed) whose overwritten values the reverse
    computes again (see the module doc) -> their Rewound."""
    if not (r.adjoint_kernel and r.distinct and r.restored):
        return {}
    counted = r.recomputation.counted
    if not counted:
        return {}
    readonly = _never_written(r)
    found = {}
    for store in r.restored:
        block = store.parent
        header = r.innermost_loops.get(block)
        loop = counted.get(header)
        if loop is None or not dominates(r.dominator_tree, block, loop.latch):
            continue
        body = _body(r, loop)
        arrays = _arrays(store.operands[1])
        if any(other != store and other.parent in body and _arrays(other.operands[1]) & arrays
               for other in r.restored):
            continue
        walk = _Walk(r, loop, body, readonly)
        if walk.invariant(store.operands[1]) and walk.computable(store.operands[0]):
            found[store] = Rewound(loop)
    return found


def keep_first(r, store, rewound: Rewound, old) -> None:
    """In the forward part, after the load of what `store` overwrites (`old`): keep it in the first
    iteration of the loop (the builder is at the store's copy)."""
    b = r.b
    loop = rewound.loop
    phi, (_, init) = next(iter(loop.steps.items()))
    rewound.first = r._slot(old.type, zeroed=False)
    first = b.icmp("eq", r.value(phi), r.value(init))
    b.store(b.select(first, old, b.load(old.type, rewound.first)), rewound.first)


def overwritten(r, store, rewound: Rewound):
    """In the reverse of `store`: the value it overwrote in the iteration being reversed, from the slot in
    the loop's first iteration, else computed again as the previous iteration stored it. The builder goes
    on in the block where both meet."""
    b, fn = r.b, r.gfn
    first = r.recomputation.first_iteration(rewound.loop)
    kept, again, meet = (fn.append_block(f"restore.{k}") for k in ("first", "again", "meet"))
    b.cond_br(first, kept, again)
    b.position_at_end(kept)
    value = b.load(store.operands[0].type, rewound.first)
    b.br(meet)
    b.position_at_end(again)
    walk = _Walk(r, rewound.loop, _body(r, rewound.loop), None)
    previous = walk.emit(store.operands[0], {})
    end = b.block
    b.br(meet)
    b.position_at_end(meet)
    return b.phi(value.type, [(value, kept), (previous, end)])


class _Walk:
    """Checks and builds again fn's values of one iteration of `loop` (its blocks `body`) as the previous
    iteration computed them."""

    def __init__(self, r, loop: Counted, body: set, readonly) -> None:
        self.r, self.loop, self.body, self.readonly = r, loop, body, readonly
        self.size = 0

    def invariant(self, value, depth: int = 0) -> bool:
        """Whether `value` is the same in every iteration: from outside the loop, or computed from such."""
        if not isinstance(value, llvm.Instruction) or value.parent not in self.body:
            return True
        return depth < 8 and value.opcode_name in COMPUTED and all(
            self.invariant(op, depth + 1) for op in value.operands if not isinstance(op, llvm.BasicBlock))

    def computable(self, value, seen=None) -> bool:
        seen = set() if seen is None else seen
        if not isinstance(value, llvm.Instruction) or value.parent not in self.body or value in seen:
            return True
        seen.add(value)
        if len(seen) > LIMIT or self.r.innermost_loops.get(value.parent) != self.loop.header:
            return False
        op = value.opcode_name
        if op == "phi":
            if value.parent == self.loop.header:
                return value in self.loop.steps
            branch = self.r.recomputation._deciding_branch(value.parent)
            if branch is None:
                return False
            preds = self.r.preds[value.parent]
            return self.computable(branch[0], seen) and all(
                self.computable(value.incoming_value_for(preds[k]), seen) for k in branch[1:])
        if op == "load":
            found = roots(value.operands[0])
            return (not value.is_volatile and value.ordering is None and bool(found) and found <= self.readonly
                    and self.computable(value.operands[0], seen))
        if op == "call":
            callee = value.callee
            if not (isinstance(callee, llvm.Function) and callee.name.startswith(_PURE_CALLS)):
                return False
            return all(self.computable(a, seen) for a in value.args)
        if op not in COMPUTED and op not in _FLOAT_OPS:
            return False
        return all(self.computable(v, seen) for v in value.operands if not isinstance(v, llvm.BasicBlock))

    def emit(self, value, memo: dict):
        """fn's `value` as the previous iteration computed it, built at the builder's position (which moves
        on to a new block where the reverse takes a branch of the iteration again)."""
        r, b = self.r, self.r.b
        if not isinstance(value, llvm.Instruction):
            return r.value(value)
        if value.parent not in self.body:
            return r.primal(value)
        done = memo.get(value)
        if done is not None:
            return done
        if value.opcode_name == "phi" and value.parent == self.loop.header:  # a counter, one step back
            step = self.loop.steps[value][0]
            result = b.sub(r.recomputation.counter(self.loop, value), llvm.ConstantInt.get(value.type, step))
        elif value.opcode_name == "phi":
            result = self._join(value, memo)
        else:
            result = value.clone()
            for k, op in enumerate(value.operands):
                if not isinstance(op, llvm.BasicBlock) and not isinstance(op, llvm.Function):
                    again = self.emit(op, memo)
                    if again is not op:
                        result.operands[k] = again
            result = b.insert(result)
        memo[value] = result
        return result

    def _join(self, phi, memo: dict):
        """A phi of a join in the iteration: the branch that decides it taken again, each arm building the
        value that comes from its side."""
        r, b = self.r, self.r.b
        condition, k_true, k_false = r.recomputation._deciding_branch(phi.parent)
        preds = r.preds[phi.parent]
        test = self.emit(condition, memo)
        arms = [r.gfn.append_block("restore.then"), r.gfn.append_block("restore.else")]
        meet = r.gfn.append_block("restore.join")
        b.cond_br(test, *arms)
        incoming = []
        for arm, k in zip(arms, (k_true, k_false)):
            b.position_at_end(arm)
            value = self.emit(phi.incoming_value_for(preds[k]), dict(memo))
            incoming.append((value, b.block))
            b.br(meet)
        b.position_at_end(meet)
        return b.phi(phi.type, incoming)


def _body(r, loop: Counted) -> set:
    """fn's blocks of `loop`: those that reach its latch without passing its header, and the header."""
    found = getattr(loop, "body", None)
    if found is None:
        found = loop.body = natural_loop(loop.header, [loop.latch], lambda block: r.preds[block])
    return found


def _arrays(pointer) -> frozenset:
    """The shared arrays `pointer` may point into."""
    return frozenset(x.args[0] for x in roots(pointer) if blocks.is_shared(x))


def _never_written(r) -> set:
    """fn's pointer parameters whose memory nothing in fn writes (or may write: a write through a pointer
    of unknown origin counts as one into every parameter)."""
    params = {a for a in r.fn.args if isinstance(a.type, llvm.PointerType)}
    written = set()
    for block in r.order:
        for inst in block.instructions:
            op = inst.opcode_name
            if op == "store":
                pointers = [inst.operands[1]]
                if isinstance(inst.operands[0].type, llvm.PointerType):  # a pointer escaping into memory
                    pointers.append(inst.operands[0])
            elif op in ("atomicrmw", "cmpxchg"):
                pointers = [inst.operands[0]]
            elif op == "call":
                callee = inst.callee
                if isinstance(callee, llvm.Function) and (blocks.is_marker(callee) or callee.name.startswith(
                        _PURE_CALLS + ("llvm.assume", "llvm.dbg.", "llvm.lifetime.", "llvm.experimental.noalias"))):
                    continue
                pointers = [a for a in inst.args if isinstance(a.type, llvm.PointerType)]
                if not isinstance(callee, llvm.Function):
                    return set()
            else:
                continue
            for pointer in pointers:
                for root in roots(pointer):
                    if isinstance(root, llvm.Argument):
                        written.add(root)
                    elif not (isinstance(root, llvm.AllocaInst) or blocks.is_shared(root)):
                        return set()
    return params - written
