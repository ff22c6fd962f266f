"""Control-flow helpers for plugins that analyse the IR they rewrite (and `on_cycle` and `reverse_postorder`,
from gpuc/targets/cfg.py, whose rewrites use them a layer below: gpuc.compiler exports them)."""

from __future__ import annotations


def immediate_dominators(rpo: list, predecessors) -> dict:
    """The immediate dominator of each block of `rpo` (reachable blocks in reverse post-order, the entry
    first, which is its own), given `predecessors(block)`; predecessors outside `rpo` are ignored
    (Cooper, Harvey and Kennedy's iteration)."""
    index = {blk: k for k, blk in enumerate(rpo)}
    idom = {rpo[0]: rpo[0]}
    changed = True
    while changed:
        changed = False
        for blk in rpo[1:]:
            preds = [p for p in predecessors(blk) if p in idom]
            new = preds[0]
            for p in preds[1:]:
                a, c = p, new
                while a != c:
                    while index[a] > index[c]:
                        a = idom[a]
                    while index[c] > index[a]:
                        c = idom[c]
                new = a
            if idom.get(blk) != new:
                idom[blk] = new
                changed = True
    return idom


def dominates(idom: dict, a, b) -> bool:
    """Whether block `a` dominates block `b`, by the tree `idom` (immediate_dominators)."""
    while True:
        if a == b:
            return True
        parent = idom[b]
        if parent == b:
            return False
        b = parent
