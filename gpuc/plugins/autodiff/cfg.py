"""What both transformations need of a function they rewrite: copying its instructions into a new
function, and facts of its control-flow graph (successors, reverse post-order, blocks on cycles)."""

from __future__ import annotations

import gpuc.llvm as llvm


def successors(block) -> list:
    """The blocks `block`'s terminator may branch to, once per edge (a switch may name one twice)."""
    return block.successors


def reverse_post_order(fn) -> list:
    """fn's blocks reachable from its entry, each after its dominators (definitions before uses)."""
    entry = fn.entry_block
    seen, post = {entry}, []
    stack = [(entry, iter(successors(entry)))]
    while stack:
        block, pending = stack[-1]
        for succ in pending:
            if succ not in seen:
                seen.add(succ)
                stack.append((succ, iter(successors(succ))))
                break
        else:
            post.append(block)
            stack.pop()
    return post[::-1]


#: The hint on the loops of an adjoint kernel and of a gradient function: no unrolling by a run-time factor.
NO_RUNTIME_UNROLL = "llvm.loop.unroll.runtime.disable"


def keep_loops_whole(fn) -> bool:
    """Hint every loop of `fn` (its back edges' branches, in reverse post-order) not to be unrolled by a
    run-time factor: across work items in vector lanes (the CPU) every lane would run both the unrolled copy
    and its remainder loop, up to twice the trips of the loop itself; and a primal loop unrolled so would be
    taped and reversed twice over. A loop's own hints stay. Whether anything was marked."""
    order = reverse_post_order(fn)
    position = {block: k for k, block in enumerate(order)}
    marked = False
    for block in order:
        term = block.terminator
        if any(succ in position and position[succ] <= position[block] for succ in successors(block)):
            if "!llvm.loop" not in str(term):
                term.set_loop_hints(NO_RUNTIME_UNROLL)
                marked = True
    return marked


def cyclic_blocks(order, preds) -> set:
    """`order`'s blocks (with predecessors `preds`) that lie on a cycle of the CFG: in a strongly
    connected component (Tarjan's algorithm) of more than one block, or with an edge to itself."""
    succs = {b: [] for b in order}
    for b, ps in preds.items():
        for p in ps:
            succs[p].append(b)
    index, low, on, stack, found = {}, {}, set(), [], set()
    counter = [0]

    def visit(root):
        work = [(root, iter(succs[root]))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(succs[w])))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1 or v in succs[v]:
                        found.update(component)

    for b in order:
        if b not in index:
            visit(b)
    return found


class Copier:
    """Copies instructions of `fn` into another function at `self.b`'s position: `vmap` and `bmap`
    map fn's values and blocks to their copies."""

    vmap: dict
    bmap: dict

    def value(self, v):
        """fn's value, block or constant `v` as the copy sees it."""
        if isinstance(v, llvm.BasicBlock):
            return self.bmap[v]
        if isinstance(v, (llvm.Instruction, llvm.Argument)):
            return self.vmap[v]
        return v

    def clone(self, inst):
        """A copy of `inst` with its operands mapped, inserted at the builder's position."""
        new = self.b.insert(inst.clone(), inst.name)
        for i, op in enumerate(inst.operands):
            mapped = self.value(op)
            if mapped is not op:
                new.operands[i] = mapped
        return new
