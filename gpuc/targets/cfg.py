"""Control-flow graph facts the targets' IR rewrites need: dominators, post-dominators, cycles. Blocks are
given as a list (the function's, entry first) and `succs`, a dict from each block to its successors; `on_cycle`,
`reverse_postorder` and `natural_loop` take a function giving them (gpuc.compiler exports them for plugins)."""

from __future__ import annotations


def dominators(blocks, succs) -> dict:
    """Each block's dominators, itself included (every block, for blocks the entry does not reach)."""
    preds = {block: [] for block in blocks}
    for block in blocks:
        for s in succs[block]:
            preds[s].append(block)
    entry, everything = blocks[0], set(blocks)
    dom = {block: ({block} if block == entry else set(everything)) for block in blocks}
    changed = True
    while changed:
        changed = False
        for block in blocks[1:]:
            incoming = [dom[p] for p in preds[block]]
            new = {block} | (set.intersection(*incoming) if incoming else set())
            if new != dom[block]:
                dom[block], changed = new, True
    return dom


def immediate_post_dominators(blocks, succs) -> dict:
    """Each block's immediate post-dominator; absent for blocks whose paths reach different exits first."""
    everything = set(blocks)
    pdom = {block: ({block} if not succs[block] else set(everything)) for block in blocks}
    changed = True
    while changed:
        changed = False
        for block in reversed(blocks):
            if not succs[block]:
                continue
            new = {block} | set.intersection(*(pdom[s] for s in succs[block]))
            if new != pdom[block]:
                pdom[block], changed = new, True
    out = {}
    for block in blocks:
        strict = pdom[block] - {block}
        for candidate in strict:  # the immediate one: post-dominated by all the others
            if all(other in pdom[candidate] for other in strict):
                out[block] = candidate
                break
    return out


def on_cycle(start, successors) -> bool:
    """Whether block `start` can reach itself through `successors(block)` (pass one that leaves a block out
    to ask whether a cycle through `start` avoids it)."""
    seen, stack = set(), list(successors(start))
    while stack:
        block = stack.pop()
        if block == start:
            return True
        if block not in seen:
            seen.add(block)
            stack.extend(successors(block))
    return False


def natural_loop(header, latches, predecessors, within=None) -> set:
    """The blocks of the natural loop of `header` whose back edges come from `latches`: the header and the
    blocks that reach a latch without passing it, walking `predecessors(block)` (only blocks in `within`,
    when given: the reachable ones)."""
    body, work = {header}, list(latches)
    while work:
        block = work.pop()
        if block in body or (within is not None and block not in within):
            continue
        body.add(block)
        work.extend(predecessors(block))
    return body


def reverse_postorder(entry, successors) -> tuple[list, list]:
    """The blocks reachable from `entry` through `successors(block)`, in reverse post-order of a depth-first
    walk, and the walk's retreating edges (source, target): the back edges when the graph is reducible."""
    seen, post, retreating = {entry}, [], []
    stack, on_stack = [(entry, iter(successors(entry)))], {entry}
    while stack:
        blk, rest = stack[-1]
        nxt = next(rest, None)
        if nxt is None:
            stack.pop()
            on_stack.discard(blk)
            post.append(blk)
        elif nxt in on_stack:
            retreating.append((blk, nxt))
        elif nxt not in seen:
            seen.add(nxt)
            on_stack.add(nxt)
            stack.append((nxt, iter(successors(nxt))))
    return post[::-1], retreating
