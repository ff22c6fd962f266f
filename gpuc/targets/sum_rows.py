"""A row of ordered sums that goes into a vector loop from memory and back to memory after it, as one vector
load and one vector store (gpuc/targets/ordered_sums.py).

LLVM keeps accumulators that a loop adds into memory (the row of a shared shadow that a tiled matmul's adjoint
adds into, `dsa[ty, kk]` for 16 kk, over the items of a row) in registers across the loop: K scalar loads
before it, K scalar stores after it. Where the vectorized loop carries those K sums as the lanes of one vector
(ordered_sums: a vector phi), its lanes went in by K inserts into the vector and came out by K extracts, and
where the loop has a scalar remainder each lane's value after it is a phi of the vector loop's lane and the
remainder's scalar. Here:

- `load_row`: the K starts, where they are plain loads of consecutive elements (lane k's address lane 0's
  plus k elements) with nothing that may write memory from the first of them to where the vector is built,
  become one vector load there;
- `store_rows`: after the loop, K plain stores of the lanes to consecutive elements, in lane order, in one
  block with no other access to memory between them, become one vector store: of the vector itself where
  they store its lanes, or of a vector phi where they store phis of its lane (from the block after the vector
  loop) and a scalar (from the remainder: the scalars go into a vector on that edge, in a block of its own
  where the remainder's latch also goes back round its loop).

Loads and stores keep their order with respect to every other access: nothing in between touches memory
(loads are moved only past instructions that cannot write it), and the lanes hold the same bits, so the
results are the scalar code's.
"""

from __future__ import annotations

from ..llvm import Builder, CallInst, Constant, ConstantInt, GetElementPtrInst, LoadInst, PHINode, StoreInst, VectorType

#: Bytes of the element types a row may hold, and of those GEPs step over.
_SIZES = {"half": 2, "bfloat": 2, "float": 4, "double": 8}
_STEPS = {**_SIZES, "i8": 1, "i16": 2, "i32": 4, "i64": 8}
#: Opcodes that may write memory (calls are looked at apart: a few intrinsics write none).
_WRITES = frozenset({"store", "atomicrmw", "cmpxchg", "fence", "va_arg"})
#: Calls that neither read nor write memory.
_QUIET_CALLS = ("llvm.vector.reduce.", "llvm.assume", "llvm.dbg.", "llvm.experimental.noalias.scope.decl",
                "llvm.fmuladd.", "llvm.fma.")


def load_row(b: Builder, context, values: list, vector, block):
    """One load of `vector` (its lanes past len(values) zero), built before `block`'s terminator, for `values`:
    plain loads of consecutive elements of `vector`'s element type in one block, `block` or one it follows along
    blocks of one predecessor each, with nothing that may write memory from the first of them to that
    terminator. None where they are not (nothing is built)."""
    if len(values) < 2 or not all(_plain(v, LoadInst) and str(v.type) == str(vector.element_type) for v in values):
        return None
    size = _SIZES.get(str(vector.element_type))
    if size is None or not _consecutive([v.pointer for v in values], size):
        return None
    home = values[0].parent
    if any(v.parent != home for v in values):
        return None
    path, blk = [], block
    while blk != home:
        preds = blk.predecessors
        if len(preds) != 1 or blk in path:
            return None
        path.append(blk)
        blk = preds[0]
    first = min(_index(home, v) for v in values)
    for blk in [home, *reversed(path)]:
        insts = list(blk.instructions)[first + 1 if blk == home else 0:]
        if any(_may_write(inst) for inst in insts):
            return None
    b.position_before(block.terminator)
    count, align = len(values), values[0].alignment
    if count == vector.count:
        return b.load(vector, values[0].pointer, align=align)
    row = b.load(VectorType.get(vector.element_type, count), values[0].pointer, align=align)
    i32 = context.i32
    mask = [ConstantInt.get(i32, k) for k in range(count)] + [ConstantInt.get(i32, count)] * (vector.count - count)
    return b.shuffle_vector(row, Constant.null(row.type), Constant.vector(mask))


def store_rows(b: Builder, context, vector) -> int:
    """Store as one vector store the lanes of `vector` (the value a vector loop carried out of its latch) that
    the blocks after the loop extract and store as a row (see the module doc); returns the rows stored so."""
    by_block: dict = {}
    for user in list(vector.users):
        if user.opcode_name == "extractelement" and user.operands[0] == vector \
                and isinstance(user.operands[1], ConstantInt):
            by_block.setdefault(user.parent, {}).setdefault(user.operands[1].zext_value, user)
    stored = 0
    for blk, lanes in by_block.items():
        count = 0
        while count in lanes:
            count += 1
        if count < 2:
            continue
        extracts = [lanes[k] for k in range(count)]
        stored += _store_extracts(b, context, vector, extracts) or _store_phis(b, context, vector, blk, extracts)
    return stored


def _store_extracts(b: Builder, context, vector, extracts: list) -> int:
    """The extracts stored as they are."""
    row = _row_stores(extracts)
    if row is None:
        return 0
    stores, last = row
    b.position_before(last)
    _replace(b, stores, last, _narrowed(b, context, vector, len(stores)))
    _erase_unused(extracts)
    return 1


def _store_phis(b: Builder, context, vector, exit_block, extracts: list) -> int:
    """The extracts (in `exit_block`) stored through phis of one join that take a scalar from one other block."""
    phis = []
    for extract in extracts:  # (an extract may also go into the remainder's phis)
        stored = [u for u in extract.users if isinstance(u, PHINode) and len(list(u.users)) == 1
                  and _plain(next(iter(u.users)), StoreInst)]
        if len(stored) != 1:
            return 0
        phis.append(stored[0])
    join = phis[0].parent
    other = next((blk for _, blk in phis[0].incoming if blk != exit_block), None)
    if other is None or any(p.parent != join or len(p.incoming) != 2 or p.incoming_value_for(exit_block) != e
                            or {blk for _, blk in p.incoming} != {exit_block, other} for p, e in zip(phis, extracts)):
        return 0
    row = _row_stores(phis)
    if row is None or sum(1 for s in other.terminator.successors if s == join) != 1:
        return 0
    stores, last = row
    count = len(stores)
    b.position_before(exit_block.terminator)
    mine = _narrowed(b, context, vector, count)
    edge = other
    if len(other.terminator.successors) > 1:  # the remainder's latch also goes round: a block of its own
        edge = other.parent.append_block(f"{join.name}.row")
        edge.move_after(other)
        term = other.terminator
        for k, op in enumerate(term.operands):
            if op == join:
                term.operands[k] = edge
        b.position_at_end(edge)
        b.br(join)
        for phi in [inst for inst in join.instructions if isinstance(inst, PHINode)]:
            _rename_incoming(b, phi, other, edge)
        phis = [next(u for u in e.users if isinstance(u, PHINode) and u.parent == join) for e in extracts]
    b.position_before(edge.terminator)
    theirs = Constant.null(mine.type)
    for k, phi in enumerate(phis):
        theirs = b.insert_element(theirs, phi.incoming_value_for(edge), ConstantInt.get(context.i32, k))
    b.position_before(join.instructions.first)
    both = b.phi(mine.type, [(mine, exit_block), (theirs, edge)])
    _replace(b, stores, last, both)
    _erase_unused(phis)
    _erase_unused(extracts)
    return 1


def _row_stores(values: list):
    """The plain stores of `values` (each used by its store alone), lane k's at lane 0's address + k elements,
    in one block with nothing else touching memory from the first to the last of them: (them in lane order, the
    last of them in block order), or None."""
    size = _SIZES.get(str(values[0].type))
    if size is None:
        return None
    stores = []
    for v in values:
        users = list(v.users)
        if len(users) != 1 or not _plain(users[0], StoreInst) or users[0].value != v:
            return None
        stores.append(users[0])
    block = stores[0].parent
    if any(s.parent != block for s in stores) or not _consecutive([s.pointer for s in stores], size):
        return None
    mine, seen = set(stores), 0
    for inst in block.instructions:
        if inst in mine:
            seen += 1
            if seen == len(stores):
                return stores, inst
        elif seen and _touches_memory(inst):
            return None
    return None


def _replace(b: Builder, stores: list, last, value) -> None:
    """One store of `value` at lane 0's address (that of `stores[0]`) with its alignment, where `last` (the last
    of them in block order) is, for `stores`."""
    b.position_before(last)
    b.store(value, stores[0].pointer, align=stores[0].alignment)
    for store in stores:
        store.erase()


def _narrowed(b: Builder, context, vector, count: int):
    """`vector`'s first `count` lanes."""
    if count == vector.type.count:
        return vector
    mask = Constant.vector([ConstantInt.get(context.i32, k) for k in range(count)])
    return b.shuffle_vector(vector, Constant.poison(vector.type), mask)


def _rename_incoming(b: Builder, phi, old, new) -> None:
    """`phi` rebuilt with its value from `old` coming from `new`."""
    b.position_before(phi)
    fresh = b.phi(phi.type, [(v, new if blk == old else blk) for v, blk in phi.incoming])
    name = phi.name
    phi.replace_all_uses_with(fresh)
    phi.erase()
    fresh.name = name


def _erase_unused(values: list) -> None:
    for v in values:
        if not v.uses:
            v.erase()


def _consecutive(pointers: list, size: int) -> bool:
    """Whether pointer k is pointer 0 + k * size bytes, through GEPs of constant offsets from one root."""
    places = [_root_offset(p) for p in pointers]
    root, start = places[0]
    return all(r == root and o == start + k * size for k, (r, o) in enumerate(places))


def _root_offset(pointer):
    """(root, byte offset): `pointer` through GEPs of one constant index over types of known size."""
    offset, v = 0, pointer
    while isinstance(v, GetElementPtrInst):
        indices = v.indices
        step = _STEPS.get(str(v.source_element_type))
        if len(indices) != 1 or step is None or not isinstance(indices[0], ConstantInt):
            break
        offset += indices[0].value * step
        v = v.operands[0]
    return v, offset


def _plain(inst, kind) -> bool:
    return isinstance(inst, kind) and not inst.is_volatile and inst.ordering is None


def _index(block, inst) -> int:
    return next(k for k, i in enumerate(block.instructions) if i == inst)


def _may_write(inst) -> bool:
    if isinstance(inst, CallInst):
        callee = inst.callee
        return callee is None or not callee.name.startswith(_QUIET_CALLS)
    return inst.opcode_name in _WRITES


def _touches_memory(inst) -> bool:
    return _may_write(inst) or (not isinstance(inst, CallInst) and inst.opcode_name in ("load", "va_arg"))
