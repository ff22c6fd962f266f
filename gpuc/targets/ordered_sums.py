"""Ordered floating-point sums on the CPU, vectorized several at a time.

A loop that adds into a float accumulator, `s += f(j)`, must add in order to give the result the
same code gives unvectorized, on any CPU and at any vector width: floating-point addition is not
associative. LLVM's loop vectorizer leaves such loops scalar unless the adds may be reassociated,
or unless its process-wide option `-force-ordered-reductions` is set (gpuc sets it once per process,
`gpuc.llvm.passes.OPTIONS`): then each vector iteration adds the W lanes of a vector
into the accumulator in lane order, `llvm.vector.reduce.fadd(s, v)` without `reassoc`, which
is exact. The backend lowers that call lane by lane, W dependent adds after W extracts, so a loop
with K accumulators (a row of shared-memory cotangents in a tiled matmul's adjoint: 16 of them)
spends K x 2W scalar operations per vector iteration on them.

`rewrite` (the native target's `finish_module`) does the same adds as vector operations where
several such calls stand in a block, each on its own accumulator: with the K vectors as the rows of a
W x W matrix (zero rows where K < W), a transpose by shuffles gives its columns c_0 .. c_{W-1}, where
lane k of c_j is lane j of vector k; the K accumulators, as lanes of one vector p, then take p + c_0,
then + c_1 and so on, W vector adds. Lane k adds v_k[0], v_k[1], ... in order, as the calls did: the
results are bit for bit theirs. A transpose is W log2(W) two-input shuffles.
The calls read and write no memory, so those before the first other instruction that uses a result are
computed together right before it; a call whose start is another call's result (an interleaved loop adds
two vectors per accumulator, one after the other) comes one round later, from the vector p of the round
before as it is. In a loop (the vectorized loop's body, its own latch), where the K starts are phis of the
header whose values from the latch are the K sums, the phis become one vector phi carrying p from one
iteration to the next: no lane is moved into p or out of it inside the loop, only where a sum is used after
it (in the blocks the latch alone leads to). Groups of fewer than W / 2
calls, vectors of fewer than 4 lanes, scalable vectors (SVE's) and calls with `reassoc` (which LLVM lowers
as a tree already) are left as calls.

That pays where a loop keeps several sums or does costly work besides (math calls, which vectorize as
libmvec's): eight dot products per item ran 2.3-2.5x faster, four sums 1.2x. A loop with one to three sums
and nothing but arithmetic besides runs as fast or faster scalar, its sums then being independent chains of
adds where the vector loop's are one chain per accumulator after extracts (a chunk's sum of a float32 array:
1.7x slower vectorized), so `hold_back` (the native target's `annotate_for_vectorizer`, before the loop
vectorizer) marks such innermost loops `llvm.loop.vectorize.enable` false, as they were before the option.
Loops with loop metadata of their own (gpuc's hints, a region loop of a block kernel) are left as they are.
"""

from __future__ import annotations

from ..llvm import Builder, CallInst, Constant, ConstantInt, FloatingType, PHINode, capi
from . import sum_rows
from .cfg import natural_loop, reverse_postorder

#: The intrinsic: `llvm.vector.reduce.fadd.v8f32(float start, <8 x float> v)`.
REDUCE = "llvm.vector.reduce.fadd."
#: Narrower vectors are left alone (a transpose saves nothing on two lanes).
MIN_LANES = 4
#: An innermost loop with fewer float sums than this, and only cheap operations besides, stays scalar.
MIN_SUMS = 4
#: Calls that count as cheap arithmetic (the others, math functions above all, make a loop worth vectorizing).
_CHEAP_CALLS = ("llvm.assume", "llvm.lifetime.", "llvm.dbg.", "llvm.experimental.noalias.scope.decl",
                "llvm.fmuladd.", "llvm.fma.", "llvm.fabs.", "llvm.copysign.", "llvm.minnum.", "llvm.maxnum.",
                "llvm.minimum.", "llvm.maximum.", "llvm.smax.", "llvm.smin.", "llvm.umax.", "llvm.umin.",
                "llvm.abs.", "llvm.floor.", "llvm.ceil.", "llvm.trunc.", "llvm.rint.", "llvm.round.",
                "llvm.nearbyint.")


def hold_back(module) -> int:
    """Mark the innermost loops of `module` that keep 1 to MIN_SUMS - 1 float sums and do nothing costly
    besides `llvm.loop.vectorize.enable` false (see the module doc); returns how many."""
    kind = module.context.md_kind_id("llvm.loop")
    held = 0
    for fn in module.functions:
        if fn.is_declaration:
            continue
        _, retreating = reverse_postorder(fn.entry_block, lambda blk: blk.successors)
        latches: dict = {}
        for latch, header in retreating:
            latches.setdefault(header, []).append(latch)
        for header, found in latches.items():
            if len(found) != 1:
                continue
            branch = found[0].terminator
            if branch.get_metadata(kind):
                continue
            sums = sum(1 for inst in header.instructions if isinstance(inst, PHINode) and _sum_phi(inst, found[0]))
            if 0 < sums < MIN_SUMS and _cheap_innermost(header, found[0], set(latches)):
                branch.set_loop_hints(("llvm.loop.vectorize.enable", 0))
                held += 1
    return held


def _sum_phi(phi, latch) -> bool:
    """Whether loop header phi `phi` is a float sum: its value from the latch an `fadd` or `fsub` of it
    without `reassoc`."""
    if not isinstance(phi.type, FloatingType):
        return False
    step = next((v for v, pred in phi.incoming if pred == latch), None)
    return (step is not None and getattr(step, "opcode_name", None) in ("fadd", "fsub")
            and "reassoc" not in step.fast_math and phi in step.operands)


def _cheap_innermost(header, latch, headers: set) -> bool:
    """Whether the loop of `header` (its blocks: those reaching `latch` without passing the header) holds no
    other loop (none of `headers`) and calls nothing but cheap intrinsics."""
    body = natural_loop(header, [latch], lambda blk: blk.predecessors)
    if any(other in body for other in headers if other != header):
        return False
    for blk in body:
        for inst in blk.instructions:
            if isinstance(inst, CallInst):
                callee = inst.callee
                if callee is None or not callee.name.startswith(_CHEAP_CALLS):
                    return False
    return True


def rewrite(module) -> int:
    """Rewrite the ordered vector sums of every function of `module` (see the module doc); returns the
    number of calls rewritten."""
    if not any(fn.is_declaration and fn.name.startswith(REDUCE) for fn in module.functions):
        return 0
    rewritten = 0
    with Builder(module.context) as b:
        for fn in module.functions:
            if fn.is_declaration:
                continue
            for block in fn.blocks:
                rewritten += _rewrite_block(b, module.context, block)
    return rewritten


def _ordered_sum(inst) -> bool:
    """Whether `inst` is an in-order `llvm.vector.reduce.fadd`."""
    if not isinstance(inst, CallInst):
        return False
    callee = inst.callee
    return callee is not None and callee.name.startswith(REDUCE) and "reassoc" not in inst.fast_math


class _Sums:
    """What the rewrite of one block's sums made: `lanes` maps each extract of a sum to (the vector p it
    came from, its lane); `carried` lists the vector phis of the loop through the block (with the scalar
    phis they stand for), whose values from the block are set once all of its sums are rewritten."""

    __slots__ = ("block", "lanes", "carried", "phis")

    def __init__(self, block) -> None:
        self.block, self.lanes, self.carried, self.phis = block, {}, [], set()

    def vector_of(self, values: list):
        """The vector p whose lanes 0, 1, ... are `values` (extracts of one rewrite), or None."""
        found = self.lanes.get(values[0])
        if found is None or found[1] != 0:
            return None
        return found[0] if all(self.lanes.get(v) == (found[0], k) for k, v in enumerate(values)) else None

    def carry(self, context, starts: list, vector):
        """A vector phi standing for `starts` where they are phis of one header that this block goes back
        to (its lanes past len(starts) zero), its values from the other predecessors built where they
        branch; else None."""
        header = getattr(starts[0], "parent", None)
        if (not all(isinstance(s, PHINode) and s.parent == header for s in starts) or len(set(starts)) < len(starts)
                or header not in self.block.successors or any(s in self.phis for s in starts)):
            return None
        sources = starts[0].incoming_blocks
        if any(s.incoming_blocks != sources for s in starts):
            return None
        i32 = context.i32
        with Builder(context) as b:
            built = {}
            for source in set(sources):
                if source == self.block:
                    continue
                values = [start.incoming_value_for(source) for start in starts]
                value = sum_rows.load_row(b, context, values, vector, source)
                if value is None:
                    b.position_before(source.terminator)
                    value = Constant.null(vector)
                    for k, start in enumerate(values):
                        value = b.insert_element(value, start, ConstantInt.get(i32, k))
                built[source] = value
            b.position_before(header.instructions.first)
            carried = b.phi(vector, [(built[s], s) for s in sources if s != self.block])
        self.carried.append((carried, starts))
        self.phis.update(starts)
        return carried

    def finish(self, context) -> None:
        """Give each carried phi its value from this block, put the scalar phis' other uses on its lanes, and
        move each lane out of the vector where it is used (an extract in the block stays only for uses the
        block itself or a block other than its sole successors reaches)."""
        i32 = context.i32
        with Builder(context) as b:
            for carried, starts in self.carried:
                ends = [start.incoming_value_for(self.block) for start in starts]
                end = self.vector_of(ends)
                if end is None:
                    b.position_before(self.block.terminator)
                    end = Constant.null(carried.type)
                    for k, value in enumerate(ends):
                        end = b.insert_element(end, value, ConstantInt.get(i32, k))
                for source in starts[0].incoming_blocks:
                    if source == self.block:
                        carried.add_incoming(end, self.block)
                header = carried.parent
                first = next(inst for inst in header.instructions if not isinstance(inst, PHINode))
                for k, start in enumerate(starts):
                    if start.uses:
                        b.position_before(first)
                        start.replace_all_uses_with(b.extract_element(carried, ConstantInt.get(i32, k)))
                    start.erase()
            vectors = []
            for extract, (vector, lane) in list(self.lanes.items()):
                if vector not in vectors:
                    vectors.append(vector)
                if not extract.uses:
                    extract.erase()
                else:
                    _sink(b, extract, vector, lane, self.block, i32)
            for vector in vectors:
                sum_rows.store_rows(b, context, vector)


def _sink(b: Builder, extract, vector, lane: int, block, i32) -> None:
    """Move `extract` (of `vector`, in `block`) to its uses in blocks whose only predecessor is `block`; a phi
    there that has no other value (the loop's exit's) gives way to the extract."""
    moved = {}

    def lane_at(place, end: bool):
        """The lane extracted at the start of `place` (after its phis) or at its end."""
        if (place, end) not in moved:
            b.position_before(place.terminator if end else
                              next(i for i in place.instructions if not isinstance(i, PHINode)))
            moved[place, end] = b.extract_element(vector, ConstantInt.get(i32, lane))
        return moved[place, end]

    def after_block(place) -> bool:
        return place != block and place.predecessors == [block]

    for use in list(extract.uses):
        user = use.user
        if not isinstance(user, PHINode):
            if after_block(user.parent):
                for i, op in enumerate(user.operands):
                    if op == extract:
                        user.operands[i] = lane_at(user.parent, False)
        elif after_block(user.parent) and len(user.incoming) == 1:
            user.replace_all_uses_with(lane_at(user.parent, False))
            user.erase()
        else:
            for i, (value, source) in enumerate(user.incoming):
                if value == extract and after_block(source):
                    user.operands[i] = lane_at(source, True)
    if not extract.uses:
        extract.erase()


def _rewrite_block(b: Builder, context, block) -> int:
    """The block's ordered sums, in segments: the sums before the first other instruction that uses one's
    result (the terminator at the latest) are computed there, all together (they read and write no memory)."""
    rewritten, segment, results = 0, [], set()
    sums = _Sums(block)
    for inst in list(block.instructions):
        if isinstance(inst, PHINode):
            continue
        if _ordered_sum(inst):
            segment.append(inst)
            results.add(inst)
        elif inst.is_terminator or any(op in results for op in inst.operands):
            if segment:
                rewritten += _rewrite_segment(b, context, segment, inst, sums)
            segment, results = [], set()
    if rewritten:
        sums.finish(context)
    return rewritten


def _rewrite_segment(b: Builder, context, calls: list, before, sums: _Sums) -> int:
    """Compute the sums `calls` right before `before`, depth by depth (a sum whose start is another's result
    is one deeper: an interleaved loop's), those of one depth and vector type W at a time by a transpose
    where there are W / 2 or more of them (W >= MIN_LANES, a power of two); the others are moved there as
    they are."""
    depth = {}
    for call in calls:
        start = call.args[0]
        depth[call] = depth[start] + 1 if start in depth else 0
    b.position_before(before)
    rewritten = 0
    for level in range(max(depth.values()) + 1):
        by_type: dict = {}
        for call in calls:
            if depth[call] == level:
                by_type.setdefault(str(call.args[1].type), []).append(call)
        for group in by_type.values():
            vector = group[0].args[1].type
            lanes = vector.count
            fixed = vector.kind == capi.LLVMVectorTypeKind  # not a scalable vector (SVE's), which shuffles cannot transpose
            for first in range(0, len(group), lanes):
                chunk = group[first:first + lanes]
                if fixed and lanes >= MIN_LANES and not lanes & (lanes - 1) and len(chunk) >= max(2, lanes // 2):
                    _rewrite_chunk(b, context, chunk, sums)
                    rewritten += len(chunk)
                else:
                    for call in chunk:
                        call.remove()
                        b.insert(call)
    return rewritten


def _rewrite_chunk(b: Builder, context, calls: list, sums: _Sums) -> None:
    """Replace `calls` (at most W, on vectors of W lanes) by a transpose and W vector adds at the builder."""
    vector = calls[0].args[1].type
    lanes = vector.count
    i32 = context.i32
    zero = Constant.null(vector)
    rows = [call.args[1] for call in calls] + [zero] * (lanes - len(calls))
    flags = frozenset.intersection(*(frozenset(call.fast_math) for call in calls))
    starts = [call.args[0] for call in calls]
    total = sums.vector_of(starts)
    if total is None:
        total = sums.carry(context, starts, vector)
    if total is None:
        total = Constant.null(vector)
        for k, start in enumerate(starts):
            total = b.insert_element(total, start, ConstantInt.get(i32, k))
    for column in _transpose(b, i32, rows):
        total = b.fadd(total, column, fast_math=flags or None)
    for k, call in enumerate(calls):
        extract = b.extract_element(total, ConstantInt.get(i32, k))
        sums.lanes[extract] = (total, k)
        call.replace_all_uses_with(extract)
    for call in calls:
        call.erase()


def _transpose(b: Builder, i32, rows: list) -> list:
    """The columns of the W x W matrix whose rows are the W-lane vectors `rows` (W a power of two):
    log2(W) rounds, each swapping the off-diagonal s x s blocks of every 2s x 2s block (s = W/2, ..., 1)."""
    lanes = len(rows)
    rows = list(rows)
    s = lanes // 2
    while s >= 1:
        low = Constant.vector([ConstantInt.get(i32, j if j % (2 * s) < s else lanes + j - s) for j in range(lanes)])
        high = Constant.vector([ConstantInt.get(i32, j + s if j % (2 * s) < s else lanes + j) for j in range(lanes)])
        for i in range(lanes):
            if i % (2 * s) < s:
                rows[i], rows[i + s] = b.shuffle_vector(rows[i], rows[i + s], low), \
                    b.shuffle_vector(rows[i], rows[i + s], high)
        s //= 2
    return rows
