"""Full chunks: the vector loop's body once more, for chunks whose lanes are all work items.

Every chunk of the vector loop masks its lanes with `vec.mask` (the lanes below the loop's stop, and at or
past its first item where the chunk starts before the row): the masked loads and stores, the windows of
overlapping accesses (windows.py) and the shuffles that move masks between lanes all take it as it is. Only
the last chunk of a row, and a first one that starts before it, have lanes outside; the others run the same
code with a mask LLVM cannot see is whole. `specialize` copies the loop's body for those: at the head of
each chunk, a branch on whether every lane of the mask is set takes the copy, in which the mask is the
constant all-true, so that the cleanup after the plugin (instcombine) turns masked accesses into plain ones
and drops the shuffles of masks. In such a chunk the mask and the constant are the same value, so the copy
computes what the original does.

Only bodies without loops of their own are copied (vectorize.vectorize decides): their time goes to memory
accesses under the mask, where a body with a loop spends it in the loop, whose lanes leave it at different
rounds and keep masks of their own (Newton's iteration ran as fast either way, and compiled up to twice as
long copied).
"""

from __future__ import annotations

from gpuc.llvm import Builder, Constant, PHINode

#: Bodies with more instructions than this are not copied (code size and compile time).
MAX_INSTRUCTIONS = 3000


def specialize(body) -> bool:
    """Copy the vector loop of `body` (an emit.VectorBody, built) for whole chunks; whether it did."""
    chunk, head = body.chunk, body.head
    if isinstance(chunk, Constant) or chunk.parent != head or chunk.next is None:
        return False
    made = set(body.created)
    region, work = [], [head]
    while work:
        blk = work.pop()
        if blk in region or blk not in made:
            continue
        region.append(blk)
        work += [s for s in blk.successors if s != head]
    if sum(len(blk.instructions) for blk in region) > MAX_INSTRUCTIONS:
        return False
    fn, ctx = head.parent, head.parent.context
    order = {blk: k for k, blk in enumerate(fn.blocks)}
    region.sort(key=order.get)
    with Builder(ctx) as b:
        top = b.split_before(chunk.next, "vec.chunk")  # the index, the lanes and the mask; the rest stays in `head`
        whole = Constant.all_ones(chunk.type)
        bits = b.bitcast(chunk, ctx.int_type(chunk.type.count))
        full = b.icmp("eq", bits, Constant.all_ones(bits.type), "vec.full")
        blocks = {blk: fn.append_block(f"{blk.name}.full") for blk in region}
        b.cond_br(full, blocks[head], head)
        values: dict = {}
        phis = []
        for blk in region:
            b.position_at_end(blocks[blk])
            for inst in blk.instructions:
                if isinstance(inst, PHINode):
                    values[inst] = b.phi(inst.type, name=inst.name)
                    phis.append(inst)
                else:
                    values[inst] = b.insert(inst.clone(), inst.name if str(inst.type) != "void" else "")

        def mapped(v):
            if v == chunk:
                return whole
            return blocks.get(v, values.get(v, v))

        loop_kind = ctx.md_kind_id("llvm.loop")
        for blk in region:
            for inst in blk.instructions:
                if isinstance(inst, PHINode):
                    continue
                copy = values[inst]
                for k, op in enumerate(inst.operands):
                    new = mapped(op)
                    if new is not op:
                        copy.operands[k] = new
                if inst.is_terminator and copy.get_metadata(loop_kind):
                    copy.set_metadata(loop_kind, None)  # a loop's identity is its own
        for phi in phis:
            for value, source in phi.incoming:
                values[phi].add_incoming(mapped(value), blocks.get(source, source))
        # the blocks outside the copy that it branches to (the chunk's head, the exit, a trap) come in from it too
        for blk in region:
            for successor in set(blk.successors):
                if successor in blocks:
                    continue
                for phi in [i for i in successor.instructions if isinstance(i, PHINode)]:
                    if blk in phi.incoming_blocks:
                        phi.add_incoming(mapped(phi.incoming_value_for(blk)), blocks[blk])
    body.created += list(blocks.values()) + [top]
    return True
