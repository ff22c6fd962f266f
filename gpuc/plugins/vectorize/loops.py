"""The launch loop and the control flow of its body: the loop over index 0, the loops inside it, an
emission order, and which values are the same in every work item of a chunk (uniform) and which differ
(varying)."""

from __future__ import annotations

from gpuc.compiler import dominates, immediate_dominators, natural_loop, reverse_postorder
from gpuc.llvm import BinaryOperator, BranchInst, Builder, CallInst, CompareInst, Instruction, PHINode

#: Bodies with more blocks or instructions than this are left as they are (compile time).
MAX_BLOCKS = 400
MAX_INSTRUCTIONS = 6000


class Unsupported(Exception):
    """The loop cannot be vectorized; the message says why (it goes into the trace)."""


def own_preheader(marker_call, context) -> None:
    """Give the loop over index 0 of `marker_call` a preheader of its own where it is entered from a
    conditional branch (the clamp split's middle part, whose block the cleanup folded): the vector loop and
    its test go in front of the preheader."""
    iv = marker_call.args[0]
    if not isinstance(iv, PHINode) or len(iv.incoming) != 2:
        return
    header = iv.parent
    entries = [blk for value, blk in iv.incoming if not _is_increment(value, iv)]
    if len(entries) != 1 or any(isinstance(i, PHINode) and i != iv for i in header.instructions):
        return
    term = entries[0].terminator
    if not isinstance(term, BranchInst) or not term.is_conditional:
        return
    pre = header.parent.append_block(f"{header.name}.preheader")
    pre.move_before(header)
    for k, op in enumerate(term.operands):
        if op == header:
            term.operands[k] = pre
    with Builder(context) as b:
        b.position_at_end(pre)
        b.br(header)
        b.position_before(header.instructions.first)
        phi = b.phi(iv.type, [(value, pre if blk == entries[0] else blk) for value, blk in iv.incoming])
    iv.replace_all_uses_with(phi)
    name = iv.name
    iv.erase()
    phi.name = name


class ItemLoop:
    """The loop over index 0 of a CPU launch entry: header `header` (holding the phi `iv`, index 0),
    `iv` from `first` on entry from `preheader`, `step = iv + 1` at `latch`, which leaves to `exit`
    once `step` reaches `stop`; `body` the blocks in function order."""

    def __init__(self, marker_call: CallInst):
        iv = marker_call.args[0]
        # the launch's work items (the launch entry passes them since it decides on streaming stores)
        self.items = marker_call.args[1] if len(marker_call.args) > 1 else None
        if not isinstance(iv, PHINode):
            raise Unsupported("index 0 is not the loop's induction variable")
        self.iv, self.header = iv, iv.parent
        incoming = iv.incoming
        if len(incoming) != 2:
            raise Unsupported("the loop over index 0 has more than one entry or latch")
        latch = next((blk for v, blk in incoming if _is_increment(v, iv)), None)
        if latch is None:
            raise Unsupported("index 0 does not step by one")
        self.latch, self.step = latch, iv.incoming_value_for(latch)
        self.preheader = next(blk for v, blk in incoming if blk != latch)
        self.first = iv.incoming_value_for(self.preheader)
        branch = latch.terminator
        if not isinstance(branch, BranchInst) or not branch.is_conditional:
            raise Unsupported("the loop's latch is not a conditional branch")
        stay, leave = branch.successors
        test = branch.condition
        if (stay != self.header or not isinstance(test, CompareInst) or test.predicate not in ("ult", "ne")
                or test.operands[0] != self.step):
            raise Unsupported("the loop's exit test is not `index0 + 1 < stop`")
        self.test, self.stop, self.exit = test, test.operands[1], leave
        self.body = _blocks_between(self.header, latch)
        self.blocks = set(self.body)
        self.inside = {i for blk in self.body for i in blk.instructions}
        self._check()

    def _check(self) -> None:
        if self.preheader in self.blocks or self.exit in self.blocks:
            raise Unsupported("the loop over index 0 is not in simplified form")
        if isinstance(self.stop, Instruction) and self.stop in self.inside:
            raise Unsupported("the loop's bound changes inside it")
        if any(isinstance(i, PHINode) and i != self.iv for i in self.header.instructions):
            raise Unsupported("the loop over index 0 carries a value from one item to the next")
        count = 0
        for blk in self.body:
            term = blk.terminator
            if term is None or term.opcode_name not in ("br", "switch"):
                raise Unsupported(f"a block ends in `{term.opcode_name if term else 'nothing'}`")
            if blk != self.latch and any(s not in self.blocks and not dead_end(s) for s in blk.successors):
                raise Unsupported("the loop over index 0 has a second exit")
            if blk != self.header and any(p not in self.blocks for p in blk.predecessors):
                raise Unsupported("the loop over index 0 has a second entry")
            for inst in blk.instructions:
                count += 1
                if any(not isinstance(u, Instruction) or u not in self.inside for u in inst.users):
                    raise Unsupported("a value of a work item is used after the loop")
        if len(self.body) > MAX_BLOCKS or count > MAX_INSTRUCTIONS:
            raise Unsupported(f"the kernel is too large ({len(self.body)} blocks, {count} instructions)")

    def successors(self, blk):
        """Successors of `blk` within the body, without the loop's own back edge (and blocks that are
        nothing but `unreachable`: no item goes there, as the optimizer already assumes)."""
        if blk == self.latch:
            return [s for s in blk.successors if s != self.header and s in self.blocks]
        return [s for s in blk.successors if not dead_end(s)]


class Loop:
    """A loop inside the body: its header, blocks, latches (blocks with a back edge to the header),
    exit edges (block inside, block outside), parent loop and sub-loops."""

    def __init__(self, header, blocks, latches):
        self.header, self.blocks, self.latches = header, blocks, latches
        self.parent: Loop | None = None
        self.children: list[Loop] = []
        self.exits: list = []
        self.liveouts: list = []  # values defined inside and used outside, in body order

    def __repr__(self) -> str:
        return f"<loop {self.header.name} ({len(self.blocks)} blocks)>"


class ControlFlow:
    """The body's loops and an emission schedule: a region is a list of blocks and Loops (in an order
    where every block comes after its predecessors, back edges aside); a Loop's region starts at its header."""

    def __init__(self, item: ItemLoop):
        self.item = item
        self.order = {blk: k for k, blk in enumerate(item.body)}
        self.succ = {blk: item.successors(blk) for blk in item.body}
        self.pred = {blk: [] for blk in item.body}
        for blk in item.body:
            for s in self.succ[blk]:
                if blk not in self.pred[s]:
                    self.pred[s].append(blk)
        self.idom = self._dominators()
        self.loops = self._loops()
        self.loop_of = {}  # block -> innermost loop
        for loop in sorted(self.loops, key=lambda lp: -len(lp.blocks)):
            for blk in loop.blocks:
                self.loop_of[blk] = loop
        for loop in self.loops:
            for blk in sorted(loop.blocks, key=self.order.get):
                for s in self.succ[blk]:
                    if s not in loop.blocks:
                        loop.exits.append((blk, s))
        self.schedule = self._schedule(set(item.body), item.header, None)

    # -- dominators and loops ----------------------------------------------------------------------

    def _rpo(self):
        rpo, self.retreating = reverse_postorder(self.item.header, self.succ.__getitem__)
        if len(rpo) != len(self.item.body):
            raise Unsupported("the body has unreachable blocks")
        return rpo

    def _dominators(self):
        rpo = self._rpo()
        self.rpo = rpo
        return immediate_dominators(rpo, self.pred.__getitem__)

    def dominates(self, a, b) -> bool:
        return dominates(self.idom, a, b)

    def _loops(self):
        headers = {}
        for src, dst in self.retreating:
            if not self.dominates(dst, src):
                raise Unsupported("the body's control flow is irreducible")
            headers.setdefault(dst, []).append(src)
        loops = []
        for header, latches in headers.items():
            blocks, work = {header}, list(latches)
            while work:
                blk = work.pop()
                if blk not in blocks:
                    blocks.add(blk)
                    work.extend(self.pred[blk])
            loops.append(Loop(header, blocks, sorted(latches, key=self.order.get)))
        for loop in loops:
            outer = [lp for lp in loops if lp is not loop and loop.header in lp.blocks]
            if outer:
                loop.parent = min(outer, key=lambda lp: len(lp.blocks))
                loop.parent.children.append(loop)
        return loops

    def is_back_edge(self, src, dst) -> bool:
        loop = self.loop_of.get(dst)
        return loop is not None and loop.header == dst and src in loop.blocks

    def loops_containing(self, blk):
        """The loops holding `blk`, outermost first."""
        chain, loop = [], self.loop_of.get(blk)
        while loop is not None:
            chain.append(loop)
            loop = loop.parent
        return chain[::-1]

    # -- the schedule ------------------------------------------------------------------------------

    def _schedule(self, blocks, entry, loop):
        """The region of `blocks` (entered at `entry`, the blocks of `loop` or the whole body): its
        blocks and direct sub-loops, each after everything that branches to it."""
        def node(blk):  # the block, or the direct sub-loop of `loop` holding it
            inner = self.loop_of.get(blk)
            while inner is not None and inner is not loop and inner.parent is not loop:
                inner = inner.parent
            return blk if inner is None or inner is loop else inner

        nodes, edges, indegree = [], {}, {}
        for blk in sorted(blocks, key=self.order.get):
            n = node(blk)
            if n not in indegree:
                nodes.append(n)
                indegree[n] = 0
                edges[n] = []
        for blk in blocks:
            for s in self.succ[blk]:
                if s not in blocks or loop is not None and s == loop.header:
                    continue  # the region's own back edges
                a, c = node(blk), node(s)
                if a is c or c in edges[a]:
                    continue
                edges[a].append(c)
                indegree[c] += 1
        ready = [node(entry)]
        out = []
        while ready:
            n = ready.pop(0)
            out.append(self._schedule(n.blocks, n.header, n) if isinstance(n, Loop) else n)
            if isinstance(n, Loop):
                out[-1] = (n, out[-1])
            for c in edges[n]:
                indegree[c] -= 1
                if indegree[c] == 0:
                    ready.append(c)
            ready.sort(key=lambda x: self.order[x.header if isinstance(x, Loop) else x])
        if len(out) != len(nodes):
            raise Unsupported("the body's control flow could not be ordered")
        return out

    def dag_reach(self):
        """For each block, the blocks reachable from it without taking a back edge."""
        reach = {}
        for blk in reversed(self.rpo):
            seen = set()
            for s in self.succ[blk]:
                if self.is_back_edge(blk, s):
                    continue
                seen.add(s)
                seen |= reach.get(s, set())
            reach[blk] = seen
        return reach


def dead_end(blk) -> str | None:
    """"unreachable" for a block that is nothing but `unreachable` (no item goes there, as the optimizer
    already assumes), "trap" for `call @llvm.trap()` and `unreachable` (the launch dies there), else None."""
    term = blk.terminator
    if term is None or term.opcode_name != "unreachable":
        return None
    first = blk.instructions.first
    if first == term:
        return "unreachable"
    if isinstance(first, CallInst) and first.intrinsic_name == "llvm.trap" and first.next == term:
        return "trap"
    return None


def _is_increment(v, iv) -> bool:
    from gpuc.llvm import ConstantInt
    return (isinstance(v, BinaryOperator) and v.opcode_name == "add" and v.lhs == iv
            and isinstance(v.rhs, ConstantInt) and v.rhs.value == 1)


def _blocks_between(header, latch):
    body = natural_loop(header, [latch], lambda blk: blk.predecessors)
    if any(not blk.predecessors for blk in body):
        raise Unsupported("the loop over index 0 is not a natural loop")
    if len(body) > MAX_BLOCKS:
        raise Unsupported(f"the kernel is too large (more than {MAX_BLOCKS} blocks)")
    return [blk for blk in header.parent.blocks if blk in body]
