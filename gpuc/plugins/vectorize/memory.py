"""Memory in the launch loop's body: which accesses are consecutive across lanes, and the test, run
before a row's chunks, that no lane touches memory another lane writes.

Running a chunk's items in lanes reorders their memory accesses: item k's load may run before item j's
store (j < k), where the items one after another ran it after. The result is the same where no item
reads or writes what another item writes. A vector loop runs a row only where that holds, by a test
made once per row: every access whose address is `A + index0 * S` (A and S the same for every item, S
known before the loop) covers [A + first*S, A + last*S] plus its size; a store's range must not meet
another access's range, unless both touch only their own item's slot (the same S, and both inside one
window of |S| bytes). Accesses of another form (gathers, addresses that change in inner loops), atomics
and calls that may write memory pass the test only for rows of one item, with one exception: integer
atomics of a single operation that commutes (add, and, or, xor, max, min) whose old value nothing reads end
in the same state in any order, so they pass where no other access touches their arrays. A row that fails
it runs item by item, as it would without vectorization. Accesses of memory that is the item's own (its
stack slots, a copy per lane, and what a plugin marks so: private.py) are not part of the test.
"""

from __future__ import annotations

from gpuc.abi import BOUNDS_FAILURE, INTERRUPT_FLAG
from gpuc.llvm import (BinaryOperator, CallInst, CastInst, ConstantExpr, ConstantInt, FloatingType, Function,
                       GetElementPtrInst, GlobalVariable, Instruction, IntegerType, LoadInst, PHINode, SelectInst,
                       StoreInst)

from .calls import SUM_PREFIX
from .private import marked, rooted

#: Above this many accesses the test is not built (rows of one item still vectorize).
MAX_ACCESSES = 48
_LINEAR_OPS = ("add", "sub", "mul", "shl")


#: Metadata a plugin puts on the load and the store of `*p = *p + v` (fadd) where the adds of several work
#: items into one element may run in any order (an adjoint's adds into a shadow).
ACCUMULATE = "gpuc.accumulate"


class Access:
    def __init__(self, inst, pointer, size, write):
        self.inst, self.pointer, self.size, self.write = inst, pointer, size, write
        self.affine = None  # (A at first, S) once materialized
        self.adds = False  # one half of an add whose order between items is free (_accumulations)
        self.pair = None  # ... and its other half


def type_size(ty) -> int | None:
    text = str(ty)
    if isinstance(ty, IntegerType):
        return max(1, (ty.width + 7) // 8)
    return {"half": 2, "float": 4, "double": 8, "ptr": 8, "bfloat": 2}.get(text)


#: The slots a failed bounds check sends its access to (gpuc/frontend/passes/lowering.py: bounds_scratch).
_BOUNDS_SCRATCH = "gpuc.boundscheck.scratch"


def _past_scratch(pointer):
    """Where an access goes when its bounds check passes: the other operand of a select or two-way phi between it
    and the module's scratch slot. Failed accesses write the slot, which no access of the kernel's reaches, so
    the memory test bounds the access by that operand alone."""
    if isinstance(pointer, SelectInst):
        options = list(pointer.operands)[1:]
    elif isinstance(pointer, PHINode) and len(pointer.incoming) == 2:
        options = pointer.incoming_values
    else:
        return pointer
    kept = [p for p in options if not _is_scratch(p)]
    return kept[0] if len(kept) == 1 else pointer


def _is_scratch(value) -> bool:
    if isinstance(value, ConstantExpr) and value.opcode_name in ("addrspacecast", "bitcast"):
        value = value.operands[0]
    return isinstance(value, GlobalVariable) and value.name.startswith(_BOUNDS_SCRATCH)


def _runtime_only(inst) -> bool:
    """The debug mode's accesses of the runtime's own memory (docs/debugging.md): the call a failed bounds check
    makes (it writes only the launch's record, abi.BOUNDS_FAILURE) and the poll of the interrupt flag (a
    volatile load through abi.INTERRUPT_FLAG). No access of the kernel's reaches that memory, so they do not
    decide whether items may run in lanes; they still run lane by lane, or once per chunk of lanes."""
    if isinstance(inst, CallInst):
        callee = inst.callee
        return isinstance(callee, Function) and callee.name == BOUNDS_FAILURE
    if isinstance(inst, LoadInst) and inst.is_volatile:
        source = inst.operands[0]
        return (isinstance(source, LoadInst) and isinstance(source.operands[0], GlobalVariable)
                and source.operands[0].name == INTERRUPT_FLAG)
    return False


class Memory:
    """The body's accesses: `accesses` (loads and stores with a pointer), `opaque` (instructions that
    touch memory in a way the test cannot bound: atomics, calls), `writes` whether anything writes."""

    def __init__(self, item, pure_call, private=None):
        self.item = item
        self.accesses, self.opaque, self.atomics = [], [], []
        private = private or {}
        for blk in item.body:
            for inst in blk.instructions:
                if isinstance(inst, (LoadInst, StoreInst, CallInst)) and (
                        marked(inst) or (not isinstance(inst, CallInst) and rooted(inst.pointer, private, item.inside))):
                    continue  # memory of the item's own (private.py)
                if _runtime_only(inst):
                    continue  # the runtime's own memory, which the kernel's accesses never touch
                if isinstance(inst, LoadInst):
                    self.accesses.append(Access(inst, _past_scratch(inst.operands[0]), type_size(inst.type), False))
                elif isinstance(inst, StoreInst):
                    self.accesses.append(Access(inst, _past_scratch(inst.operands[1]), type_size(inst.operands[0].type),
                                                True))
                elif _commutes(inst):
                    self.atomics.append(inst)
                elif inst.opcode_name in ("atomicrmw", "cmpxchg", "fence", "va_arg"):
                    self.opaque.append(inst)
                elif isinstance(inst, CallInst) and not pure_call(inst) and not _summed(inst):
                    self.opaque.append(inst)
        _accumulations(self.accesses)
        #: the stores of those adds where every item adds into one element (an address the same for all
        #: items: the shadow of a parameter every item reads) -> their loads: in lanes one ordered sum of the
        #: lanes' terms, added to the element once (emit.py's `lane_sum`)
        self.lane_sums = {a.inst: a.pair.inst for a in self.accesses
                          if a.adds and a.write and outside(a.inst.operands[1], item.inside)
                          and isinstance(a.inst.operands[0].type, FloatingType)}
        if len({(a.operation, str(a.type)) for a in self.atomics}) > 1:
            self.opaque += self.atomics  # an add and a max on one element do not commute
            self.atomics = []
        self.writes = bool(self.opaque or self.atomics) or any(a.write for a in self.accesses)

    # -- strides -----------------------------------------------------------------------------------

    def stride(self, v, memo=None):
        """The constant c with v(index0 + 1) == v(index0) + c (in bytes for pointers), or None."""
        memo = {} if memo is None else memo
        if v == self.item.iv:
            return 1
        if not isinstance(v, Instruction) or v not in self.item.inside:
            return 0
        if v in memo:
            return memo[v]
        memo[v] = None
        result = None
        if isinstance(v, BinaryOperator) and v.opcode_name in _LINEAR_OPS:
            a, c = self.stride(v.lhs, memo), self.stride(v.rhs, memo)
            op = v.opcode_name
            if a is not None and c is not None:
                if op == "add":
                    result = a + c
                elif op == "sub":
                    result = a - c
                elif op == "mul":
                    k_l, k_r = _const(v.lhs), _const(v.rhs)
                    result = a * k_r if k_r is not None and c == 0 else c * k_l if k_l is not None and a == 0 else (
                        0 if a == 0 and c == 0 else None)
                elif op == "shl":
                    k = _const(v.rhs)
                    result = a << k if k is not None and 0 <= k < 62 and c == 0 else (0 if a == 0 and c == 0 else None)
        elif isinstance(v, GetElementPtrInst):
            result = self._gep_stride(v, memo)
        elif all(self.stride(op, memo) == 0 for op in v.operands if not _is_callee(v, op)) and not _has_effects(v):
            result = 0
        memo[v] = result
        return result

    def _gep_stride(self, gep, memo):
        total = self.stride(gep.operands[0], memo)
        if total is None:
            return None
        ty = gep.source_element_type
        for k, idx in enumerate(gep.indices):
            s = self.stride(idx, memo)
            if s is None:
                return None
            if k == 0:
                size = _alloc_size(ty)
            elif hasattr(ty, "elements"):
                if s != 0:
                    return None
                ty = ty.elements[_const(idx)]
                continue
            else:
                ty = ty.element_type
                size = _alloc_size(ty)
            if s and size is None:
                return None
            total += s * (size or 0)
        return total

    # -- the test ------------------------------------------------------------------------------------

    def guard(self, b, count, first):
        """An i1 computed at the builder `b` (before the loop), true where the row's items may run in
        lanes: one item, or no lane touching what another writes. Also returns a description."""
        llctx = b.block.parent.context
        i64 = llctx.i64
        one_item = b.icmp("ule", count, ConstantInt.get(i64, 1))
        if not self.writes:
            return ConstantInt.get(llctx.i1, 1), "reads only"
        if self.opaque or len(self.accesses) > MAX_ACCESSES:
            return one_item, "atomics, calls or too many accesses: rows of one item only"
        extents = Extents(self.item, b)
        bounded = 0
        for a in self.accesses:
            a.affine = self.materialize(b, a.pointer, first)
            a.extent = None
            if a.affine is None and not a.write:
                a.extent = extents.of(self.root(a.pointer))
                bounded += a.extent is not None
            if a.affine is None and a.extent is None:
                return one_item, "an access the test cannot bound: rows of one item only"
        atomic_ranges = [extents.of(self.root(inst.operands[0])) for inst in self.atomics]
        if any(r is None for r in atomic_ranges):
            return one_item, "atomics on memory the test cannot bound: rows of one item only"
        ok = ConstantInt.get(llctx.i1, 1)
        last = b.sub(count, ConstantInt.get(i64, 1))
        small = ConstantInt.get(i64, 1 << 31)
        ranges = {}
        for a in self.accesses:
            if a.extent is not None:  # anywhere in its array (reads outside it are undefined)
                ranges[a] = a.extent
                continue
            start, s = a.affine
            ok = b.and_(ok, b.icmp("ult", b.add(s, small), ConstantInt.get(i64, 1 << 32)))  # |S| < 2**31
            ok = b.and_(ok, b.icmp("ult", start, ConstantInt.get(i64, 1 << 56)))
            end = b.add(start, b.mul(s, last))
            lo = _pick(b, "smin", start, end)
            hi = b.add(_pick(b, "smax", start, end), ConstantInt.get(i64, a.size))
            ranges[a] = (lo, hi)
        ok = b.and_(ok, b.icmp("ult", count, small))
        writes = [(k, a) for k, a in enumerate(self.accesses) if a.write]
        sums = {a for a in self.accesses if a.inst in self.lane_sums or a.pair is not None
                and a.pair.inst in self.lane_sums}
        for k, w in writes:
            stride = _pick(b, "abs", w.affine[1])
            if w not in sums:  # (a lane sum is one add of the lanes' ordered sum, once per chunk)
                ok = b.and_(ok, b.icmp("sge", stride, ConstantInt.get(i64, w.size)))
            for j, a in enumerate(self.accesses):
                if j == k or (a.write and j < k) or a is w.pair or (w.adds and a.adds and not {w, a} & sums):
                    continue  # (adds into one element in any order: each lane's add is whole, lanes apart)
                ok = b.and_(ok, self._apart(b, w, a, ranges, stride))
        # Atomics of one integer operation whose results nothing reads commute: in lanes they may run in
        # another order, so no other access may touch their arrays.
        for lo_t, hi_t in atomic_ranges:
            for a in self.accesses:
                lo_a, hi_a = ranges[a]
                ok = b.and_(ok, b.or_(b.icmp("sle", hi_t, lo_a), b.icmp("sle", hi_a, lo_t)))
        gathers = f", {bounded} bounded by their arrays" if bounded else ""
        gathers += f", {len(self.atomics)} commuting atomics" if self.atomics else ""
        adds = sum(a.adds and a.write for a in self.accesses)
        gathers += f", {adds} adds in any order" if adds else ""
        return (b.or_(one_item, b.freeze(ok)),
                f"{len(self.accesses)} accesses, {len(writes)} of them stores{gathers}, tested per row")

    def _apart(self, b, w, a, ranges, stride):
        """i1: w and a never touch one byte from two lanes (`stride`: |w's stride|)."""
        i64 = w.affine[1].type
        (lo_w, hi_w), (lo_a, hi_a) = ranges[w], ranges[a]
        disjoint = b.or_(b.icmp("sle", hi_w, lo_a), b.icmp("sle", hi_a, lo_w))
        if a.affine is None:
            return disjoint
        d = b.sub(a.affine[0], w.affine[0])
        zero = ConstantInt.get(i64, 0)
        width = b.sub(_pick(b, "smax", ConstantInt.get(i64, w.size), b.add(d, ConstantInt.get(i64, a.size))),
                      _pick(b, "smin", zero, d))
        own = b.and_(b.icmp("eq", w.affine[1], a.affine[1]), b.icmp("sle", width, stride))
        return b.or_(disjoint, own)

    def root(self, pointer):
        """The pointer an address is an offset of (through GEPs), if it is known before the loop."""
        while isinstance(pointer, GetElementPtrInst):
            pointer = pointer.operands[0]
        if isinstance(pointer, Instruction) and pointer in self.item.inside:
            return None
        return pointer

    def materialize(self, b, pointer, first):
        """(address at index0 = first as i64, stride in bytes as i64) built at `b`, or None where the
        address is not `A + index0 * S` with A and S known before the loop."""
        i64 = first.type
        at0 = self._rebuild(b, pointer, first, {})
        if at0 is None:
            return None
        at1 = self._rebuild(b, pointer, b.add(first, ConstantInt.get(i64, 1)), {})
        a0, a1 = b.ptrtoint(at0, i64), b.ptrtoint(at1, i64)
        return a0, b.sub(a1, a0)

    def _rebuild(self, b, v, iv_value, memo):
        """`v` with index 0 replaced by `iv_value`, built without poison flags; None if not linear."""
        if v == self.item.iv:
            return iv_value
        if not isinstance(v, Instruction) or v not in self.item.inside:
            return v
        if v in memo:
            return memo[v]
        result = None
        if isinstance(v, BinaryOperator) and v.opcode_name in _LINEAR_OPS:
            lhs, rhs = self._rebuild(b, v.lhs, iv_value, memo), self._rebuild(b, v.rhs, iv_value, memo)
            dep_l, dep_r = self._depends(v.lhs), self._depends(v.rhs)
            linear = not (dep_l and dep_r) and not (v.opcode_name == "shl" and dep_r)
            if lhs is not None and rhs is not None and linear:
                result = b.binop(v.opcode_name, lhs, rhs)
        elif isinstance(v, GetElementPtrInst):
            ops = [self._rebuild(b, op, iv_value, memo) for op in v.operands]
            if all(op is not None for op in ops):
                result = b.gep(v.source_element_type, ops[0], ops[1:], inbounds=False)
        elif isinstance(v, CastInst) and not self._depends(v):
            result = None  # defined inside the loop but not from index 0: not known before it
        memo[v] = result
        return result

    def _depends(self, v, seen=None) -> bool:
        if v == self.item.iv:
            return True
        if not isinstance(v, Instruction) or v not in self.item.inside:
            return False
        seen = set() if seen is None else seen
        if v in seen:
            return False
        seen.add(v)
        return any(self._depends(op, seen) for op in v.operands if not _is_callee(v, op))


def _summed(call) -> bool:
    """A call of the autodiff plugin's sum marker (calls.SUM_PREFIX): it adds into the shadow of an array the
    kernel only reads, which nothing in the launch reads (gpuc/plugins/autodiff/sums.py), so it meets no other
    access; the emitter makes it one call per chunk (a marker on an address that varies is refused before)."""
    callee = call.callee
    return isinstance(callee, Function) and callee.name.startswith(SUM_PREFIX)


def outside(pointer, inside) -> bool:
    """Whether `pointer` is computed before the loop (through GEPs of constant or outside offsets): one address
    for every item."""
    for _ in range(64):
        if not isinstance(pointer, Instruction) or pointer not in inside:
            return True
        if not isinstance(pointer, GetElementPtrInst) or any(
                isinstance(op, Instruction) and op in inside for op in list(pointer.operands)[1:]):
            return False
        pointer = pointer.operands[0]
    return False


def _accumulations(accesses) -> None:
    """Mark the loads and stores of the adds whose order between items is free: a load and a store marked
    ACCUMULATE of one address in one block, the store's value an fadd of the load (its only use), and
    nothing touching memory between them. In lanes each such add runs whole for every lane at once (a
    vector load, add and store), and the test keeps the lanes' elements apart (|S| >= size): the adds of
    several items into one element all arrive, in another order than item by item."""
    by_inst = {a.inst: a for a in accesses}
    for store in [a for a in accesses if a.write and a.inst.string_metadata(ACCUMULATE) is not None]:
        value = store.inst.operands[0]
        if not isinstance(value, BinaryOperator) or value.opcode_name != "fadd" or len(value.uses) != 1:
            continue
        load = next((by_inst.get(op) for op in value.operands if isinstance(op, LoadInst) and op in by_inst), None)
        if (load is None or load.pointer != store.pointer or load.inst.string_metadata(ACCUMULATE) is None
                or len(load.inst.uses) != 1 or load.inst.parent != store.inst.parent):
            continue
        between, inst = [], load.inst.next
        while inst is not None and inst != store.inst:
            between.append(inst)
            inst = inst.next
        if inst is None or any(isinstance(i, (LoadInst, StoreInst, CallInst)) or i.opcode_name in (
                "atomicrmw", "cmpxchg", "fence") for i in between):
            continue
        load.adds = store.adds = True
        load.pair, store.pair = store, load


class Extents:
    """[lo, hi) byte ranges of the kernel's array arguments, from their data pointers, shapes and strides
    in the launch's argv (gpuc/abi.py: `<name>.data`, `.shape<d>`, `.stride<d>`, strides in elements),
    built before the loop. Elements are taken as 16 bytes (complex128, the widest), an upper bound."""

    ELEMENT_BOUND = 16

    def __init__(self, item, b):
        self.item, self.b = item, b
        fn = item.header.parent
        self.argv = fn.args[0]
        self.slots = {}  # argv slot of a data pointer -> {parameter name: slot}
        kernel = fn.parent.functions.get(fn.name[:-len(".range")]) if fn.name.endswith(".range") else None
        if kernel is None:
            return
        from gpuc.abi import ARGV_SLOT_BYTES, kernel_params, slot_types
        self.slot_bytes = ARGV_SLOT_BYTES
        names, slot = {}, 0
        for arg, ty in zip(kernel.args, kernel_params(kernel)):
            types = slot_types(ty)
            if types is None:
                return
            if len(types) == 1:
                names[arg.name] = slot
            slot += len(types)
        for name, at in names.items():
            if name.endswith(".data"):
                self.slots[at] = {k: v for k, v in names.items() if k.startswith(name[:-len("data")])}
        self.made = {}

    def of(self, root):
        slot = self._slot(root)
        if slot is None or slot not in self.slots:
            return None
        if slot not in self.made:
            self.made[slot] = self._build(root, self.slots[slot])
        return self.made[slot]

    def _slot(self, root):
        if not isinstance(root, LoadInst) or str(root.type) != "ptr":
            return None
        address = root.operands[0]
        if address == self.argv:
            return 0
        if (isinstance(address, GetElementPtrInst) and address.operands[0] == self.argv
                and len(address.indices) == 1 and str(address.source_element_type) == "i8"):
            offset = _const(address.indices[0])
            if offset is not None and offset % self.slot_bytes == 0:
                return offset // self.slot_bytes
        return None

    def _build(self, root, params):
        b = self.b
        i64 = b.block.parent.context.i64
        prefix = next(k for k in params if k.endswith(".data"))[:-len("data")]
        dims = sum(1 for k in params if k.startswith(prefix + "shape"))
        lo = hi = ConstantInt.get(i64, 0)
        for d in range(dims):
            n, s = (self._arg(params.get(f"{prefix}{what}{d}")) for what in ("shape", "stride"))
            if n is None or s is None:
                return None
            span = b.mul(b.sub(n, ConstantInt.get(i64, 1)), s)
            lo = b.add(lo, _pick(b, "smin", span, ConstantInt.get(i64, 0)))
            hi = b.add(hi, _pick(b, "smax", span, ConstantInt.get(i64, 0)))
        scale = ConstantInt.get(i64, self.ELEMENT_BOUND)
        base = b.ptrtoint(root, i64)
        return b.add(base, b.mul(lo, scale)), b.add(base, b.add(b.mul(hi, scale), scale))

    def _arg(self, slot):
        if slot is None:
            return None
        b = self.b
        ctx = b.block.parent.context
        address = b.gep(ctx.i8, self.argv, [ConstantInt.get(ctx.i64, slot * self.slot_bytes)], inbounds=False)
        return b.load(ctx.i64, address, align=8)


def _commutes(inst) -> bool:
    """An integer atomicrmw whose old value nothing reads, of an operation where order does not matter."""
    return (inst.opcode_name == "atomicrmw" and not inst.uses and isinstance(inst.type, IntegerType)
            and inst.operation in ("add", "sub", "and", "or", "xor", "max", "min", "umax", "umin"))


def _pick(b, name, *args):
    """smin, smax (of two i64) or abs (of one, INT64_MIN staying itself) as a compare and a select, which
    LLVM's instcombine turns into its intrinsics: a call costs the test's build several times as much."""
    if name == "abs":
        x = args[0]
        return b.select(b.icmp("slt", x, ConstantInt.get(x.type, 0)), b.sub(ConstantInt.get(x.type, 0), x), x)
    x, y = args
    return b.select(b.icmp("slt" if name == "smin" else "sgt", x, y), x, y)


def _const(v):
    return v.value if isinstance(v, ConstantInt) and v.type.width <= 64 else None


def _alloc_size(ty):
    size = type_size(ty)
    if size is not None:
        return size
    if hasattr(ty, "count") and hasattr(ty, "element_type") and not str(ty).startswith("<"):
        inner = _alloc_size(ty.element_type)
        return None if inner is None else inner * ty.count
    return None


def _is_callee(inst, op) -> bool:
    return isinstance(inst, CallInst) and op == inst.callee


def _has_effects(inst) -> bool:
    return isinstance(inst, (CallInst, LoadInst, StoreInst)) or inst.opcode_name in ("atomicrmw", "cmpxchg", "phi")

