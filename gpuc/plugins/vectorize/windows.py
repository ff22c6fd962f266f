"""Windows: the vector loads and stores of one chunk at nearby offsets of one address, kept in registers.

A stencil's adjoint adds into `dx[i - 1]`, `dx[i]` and `dx[i + 1]`. In lanes that is three vector
read-modify-writes of one array, each load overlapping the store before it by all lanes but one. The
CPU cannot forward a store to a load that only partly overlaps it, so each load waits until the store
has reached the cache. Here such a run becomes one window: a single vector load of every element the
run touches, before its first access; each load a shuffle of the window and each store a select into
it; a single vector store of the elements the run stores, after its last access. The result is the one
the accesses give in their order, element by element:
- the window holds exactly what memory would, for every element the run reads (each element a load
  reads is loaded at the start, or was stored by the run before that load);
- it loads and stores only elements some lane of the run loads or stores, so nothing new is touched;
- no other instruction that may touch memory lies between the run's first and last access.

Only runs where a load reads what a store of the run wrote before it change: elsewhere the accesses
are left as they are (overlapping loads alone are cheap).
"""

from __future__ import annotations

from gpuc.llvm import Builder, CallInst, Constant, ConstantInt, GetElementPtrInst, VectorType

from .memory import type_size
from .emit import mangle, masked_call

_LOAD, _STORE = "llvm.masked.load", "llvm.masked.store"


class Access:
    """One masked vector load or store: its pointer is lane 0's address, `key` + `offset` bytes."""

    def __init__(self, call, store: bool, align: int, key, offset: int) -> None:
        self.call, self.store, self.align, self.key, self.offset = call, store, align, key, offset
        self.mask = call.args[2] if store else call.args[1]
        self.vty = call.args[0].type if store else call.type


def combine(blocks, aligns: dict, lanes, index) -> int:
    """Combine the runs in `blocks` (see the module doc); `aligns` the alignment of each masked call made,
    `lanes` the vector of the chunk's item indices and `index` its lane 0. Returns the runs combined."""
    combined = 0
    for blk in blocks:
        for run in _runs(blk, aligns, lanes, index):
            _window(run)
            combined += 1
    return combined


def _runs(blk, aligns, lanes, index):
    """Maximal runs of accesses of one key and vector type with nothing else touching memory between
    them, spanning at most a vector's lanes, where a load follows a store."""
    runs, current = [], []
    for inst in list(blk.instructions):
        access = _access(inst, aligns, lanes, index)
        if access is not None and current and _joins(current, access):
            current.append(access)
            continue
        if access is not None or _touches_memory(inst):
            runs.append(current)
            current = [access] if access is not None else []
    runs.append(current)
    return [run for run in runs if _worth_it(run) and _masks_ready(run)]


def _joins(run, access) -> bool:
    first = run[0]
    if access.key != first.key or access.vty != first.vty:
        return False
    size = type_size(first.vty.element_type)
    offsets = [a.offset for a in run] + [access.offset]
    span = max(offsets) - min(offsets)
    return all((o - offsets[0]) % size == 0 for o in offsets) and span <= size * first.vty.count


def _worth_it(run) -> bool:
    stored = False
    for access in run:
        if access.store:
            stored = True
        elif stored:
            return True
    return False


def _masks_ready(run) -> bool:
    """Every access's mask is defined before the run's first access (the window load needs them all)."""
    first = run[0].call
    after = set()
    inst = first
    while inst is not None:
        after.add(inst)
        inst = inst.next
    return all(a.mask not in after for a in run)


def _window(run) -> None:
    first = run[0]
    vty, width = first.vty, first.vty.count
    element = vty.element_type
    size = type_size(element)
    lo = min(a.offset for a in run)
    span = (max(a.offset for a in run) - lo) // size
    length = -(-(width + span) // 8) * 8  # whole groups of eight lanes; those past the run stay masked off
    ctx = element.context
    i32, i8 = ctx.i32, ctx.i8
    wty = VectorType.get(element, length)
    align = min(a.align for a in run)
    module = first.call.parent.parent.parent
    with Builder(ctx) as b:
        b.position_before(first.call)
        base = b.gep(i8, first.call.args[1] if first.store else first.call.args[0],
                     [ConstantInt.get(ctx.i64, lo - first.offset)], inbounds=False)

        def place(value, at, fill):  # `value`'s lanes at window lanes at.., `fill`'s first lane elsewhere
            picks = [k - at if 0 <= k - at < width else width for k in range(length)]
            return b.shuffle_vector(value, fill, Constant.vector([ConstantInt.get(i32, p) for p in picks]))

        def shifted(access):
            return place(access.mask, (access.offset - lo) // size, Constant.null(access.mask.type))

        touched = None
        for access in run:
            m = shifted(access)
            touched = m if touched is None else b.or_(touched, m)
        window = masked_call(b, module, f"{_LOAD}.{mangle(wty)}.p0", wty,
                         [base, touched, Constant.null(wty)], align)
        stored = None
        for access in run:
            b.position_before(access.call)
            at = (access.offset - lo) // size
            if access.store:
                m = shifted(access)
                window = b.select(m, place(access.call.args[0], at, Constant.poison(vty)), window)
                stored = m if stored is None else b.or_(stored, m)
            else:
                picks = [ConstantInt.get(i32, at + k) for k in range(width)]
                access.call.replace_all_uses_with(b.shuffle_vector(window, Constant.poison(wty),
                                                                   Constant.vector(picks)))
        b.position_before(run[-1].call)
        last = masked_call(b, module, f"{_STORE}.{mangle(wty)}.p0", ctx.void, [window, base, stored], align)
        b.position_before(last)  # the final store goes after the last access's replacement
    for access in run:
        access.call.erase()


def _access(inst, aligns, lanes, index):
    if not isinstance(inst, CallInst) or inst not in aligns:
        return None
    name = inst.intrinsic_name
    if name not in (_LOAD, _STORE):
        return None
    store = name == _STORE
    if type_size((inst.args[0].type if store else inst.type).element_type) is None:
        return None
    pointer = inst.args[1] if store else inst.args[0]
    key, offset = _address(pointer, lanes, index)
    return Access(inst, store, aligns[inst], key, offset)


def _address(pointer, lanes, index):
    """(key, offset): lane 0's address as a sum of terms and a constant byte offset, the key the root
    pointer and the terms. Lane 0 of the chunk's index vector is its scalar index."""
    terms, offset, v = [], 0, pointer
    while True:
        if getattr(v, "opcode_name", None) == "extractelement" and isinstance(v.operands[1], ConstantInt) \
                and v.operands[1].zext_value == 0 and isinstance(v.operands[0].type, VectorType):
            v = v.operands[0]  # lane 0 of a vector of pointers
            continue
        if isinstance(v, GetElementPtrInst) and len(v.indices) == 1:
            size = type_size(v.source_element_type)
            idx = v.indices[0]
            if size is None:
                break
            if isinstance(idx, ConstantInt):
                offset += idx.value * size
            elif isinstance(idx.type, VectorType):
                if idx != lanes:
                    break
                terms.append((index, size))
            else:
                terms.append((idx, size))
            v = v.operands[0]
            continue
        break
    return (v, tuple(sorted(terms, key=lambda t: (t[0].address, t[1])))), offset


def _touches_memory(inst) -> bool:
    return isinstance(inst, CallInst) or inst.opcode_name in ("load", "store", "atomicrmw", "cmpxchg", "fence",
                                                              "va_arg")
