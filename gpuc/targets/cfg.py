"""Control-flow graph facts the targets' IR rewrites need: dominators and post-dominators (cycles:
gpuc.compiler.on_cycle). Blocks are given as a list (the function's, entry first) and `succs`, a dict from each
block to its successors."""

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


