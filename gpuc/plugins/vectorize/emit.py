"""The vector loop: the launch loop's body for W consecutive items at once, every branch linearized
under a mask of lanes (<W x i1>).

A block runs under the mask of the lanes that reach it (the or of its incoming edges' masks; an edge's
mask is its block's mask and the branch condition). Phis become selects on those masks. A loop inside
the body runs while any lane stays in it: its mask is a phi, the lanes that leave by an exit edge are
collected in that edge's mask, and a value used after the loop keeps, per lane, what it was when that
lane left. Uniform values stay scalar; loads and stores run under the mask (consecutive ones as vector
loads and stores, others as gathers and scatters); math calls go to libmvec's variants; other calls
and atomics run lane by lane, each lane under its bit of the mask. Integer division divides inactive
lanes by 1. The remainder of a row runs in a last chunk with the lanes past its end masked off.
"""

from __future__ import annotations

from gpuc.llvm import (ArrayType, BinaryOperator, Builder, BranchInst, CallInst, CastInst, CompareInst, Constant,
                       ConstantFP, ConstantInt, FreezeInst, FunctionType, GetElementPtrInst, IntegerType, LoadInst,
                       PHINode, SelectInst, StoreInst, UnaryOperator, VectorType)

from .calls import Calls, callee_name  # noqa: F401 - Calls for the type of `calls`
from .loops import Loop, Unsupported, dead_end
from . import streaming
from .memory import type_size

_DIVISIONS = ("udiv", "sdiv", "urem", "srem")


class VectorBody:
    """Builds the vector loop of `item` (see the module doc) in front of it: `build(guard)` branches
    from the loop's preheader to it where `guard` holds and to the original loop elsewhere."""

    def __init__(self, item, cf, uni, mem, calls, width, module, private=None):
        self.item, self.cf, self.uni, self.mem, self.calls = item, cf, uni, mem, calls
        self.private = private or {}  # an item's own slots and addresses in them (private.py)
        self.slots = []  # their copies, a slot per lane
        self.W, self.module = width, module
        self.fn = item.header.parent
        self.llctx = module.context
        self.i1, self.i32, self.i64 = self.llctx.i1, self.llctx.i32, self.llctx.i64
        self.mask_ty = VectorType.get(self.i1, width)
        self.vals, self.mask, self.edges, self.override, self.liveout = {}, {}, {}, {}, {}
        self.frozen = {}
        self.created = []
        self.masks: dict = {}  # the lane lists of the shuffles of calls through libmvec (vector_math.through_variant)
        self.aligns = {}  # the masked loads and stores made, with their alignment (windows.py)
        self.lane_by_lane: list[str] = []
        self.streams = None  # the stores streamed past the caches in large launches (streaming.py)
        self.gathers = self.consecutive = 0
        self._liveouts()
        self.always = self._always_run()

    # -- set-up ------------------------------------------------------------------------------------

    def _liveouts(self) -> None:
        def_block = self.uni.def_block
        for blk in self.item.body:
            for inst in blk.instructions:
                for op in inst.operands:
                    home = def_block.get(op)
                    if home is None:
                        continue
                    for loop in self.cf.loops_containing(home):
                        if blk not in loop.blocks and op not in loop.liveouts:
                            loop.liveouts.append(op)

    def _always_run(self):
        """Blocks outside inner loops that every item runs (the latch is unreachable without them):
        their mask is the chunk's."""
        item, cf = self.item, self.cf
        always = {item.header}
        for blk in item.body:
            if blk in cf.loop_of or blk == item.header:
                continue
            seen, work = {blk}, [item.header]
            while work:
                cur = work.pop()
                if cur in seen:
                    continue
                seen.add(cur)
                work.extend(cf.succ[cur])
            if item.latch not in seen or blk == item.latch:
                always.add(blk)
        return always

    def precheck(self) -> None:
        """Raise Unsupported for what the emitter cannot do, before it builds anything."""
        for blk in self.item.body:
            for inst in blk.instructions:
                if inst.is_terminator or inst == self.item.iv:
                    continue
                op = inst.opcode_name
                if op in ("alloca", "fence", "va_arg", "landingpad", "invoke", "callbr"):
                    raise Unsupported(f"the body has an `{op}`")
                if isinstance(inst, (LoadInst, StoreInst)):
                    # a volatile or atomic load of one address for all items (the interrupt flag loops poll
                    # in the debug mode, docs/debugging.md) is made once per chunk of lanes, as a plain one
                    if (inst.is_volatile or inst.ordering not in (None, "notatomic")) and (
                            isinstance(inst, StoreInst) or self.uni.is_varying_at(inst.operands[0], blk)):
                        raise Unsupported("a volatile or atomic load or store")
                    ty = inst.type if isinstance(inst, LoadInst) else inst.operands[0].type
                    uniform = not any(self.uni.is_varying_at(op, blk) for op in inst.operands)
                    if type_size(ty) is None and not uniform:
                        raise Unsupported(f"an access of type {ty} that differs between work items")
                    continue
                if isinstance(inst, CallInst):
                    kind = self.calls.kind(inst)
                    if kind == "skip":
                        if inst.uses:
                            raise Unsupported(f"a call of @{callee_name(inst)} whose result is used")
                        continue
                    if str(inst.type) != "void" and (kind == "other" or inst in self.uni.varying):
                        self.check_type(inst, True)
                    continue
                varying = inst in self.uni.varying
                if op in ("atomicrmw", "cmpxchg"):
                    self.check_type(inst, True)
                    continue
                if varying:
                    self.check_type(inst, True)
                if varying and not isinstance(inst, (BinaryOperator, UnaryOperator, CastInst, CompareInst, SelectInst,
                                                     FreezeInst, GetElementPtrInst, PHINode)):
                    raise Unsupported(f"`{op}` of values that differ between work items")

    def new_block(self, name):
        blk = self.fn.append_block(name)
        self.created.append(blk)
        return blk

    def rollback(self) -> None:
        """Delete what a failed build made (the original loop is untouched until the build's end)."""
        insts = [i for blk in self.created for i in blk.instructions]
        for inst in insts:
            if str(inst.type) != "void" and inst.uses:
                inst.replace_all_uses_with(Constant.poison(inst.type))
        for inst in reversed(insts):
            inst.erase()
        for blk in self.created:
            blk.erase()
        self.created = []
        for slot in self.slots:
            if slot.uses:
                slot.replace_all_uses_with(Constant.poison(slot.type))
            slot.erase()
        self.slots = []

    # -- small helpers -----------------------------------------------------------------------------

    def const(self, v, ty=None):
        return ConstantInt.get(ty or self.i64, v)

    def vty(self, ty):
        return VectorType.get(ty, self.W)

    def splat(self, v):
        if isinstance(v.type, VectorType):
            return v
        vty = self.vty(v.type)
        first = self.b.insert_element(Constant.poison(vty), v, self.const(0, self.i32))
        return self.b.shuffle_vector(first, Constant.poison(vty), Constant.null(self.vty(self.i32)))

    def any(self, m):
        fn = self.module.declare_intrinsic(f"llvm.vector.reduce.or.v{self.W}i1", FunctionType.get(self.i1, [self.mask_ty]))
        return self.b.call(fn, [m])

    def all(self, m):
        fn = self.module.declare_intrinsic(f"llvm.vector.reduce.and.v{self.W}i1", FunctionType.get(self.i1, [self.mask_ty]))
        return self.b.call(fn, [m])

    def lane(self, v, k):
        return self.b.extract_element(v, self.const(k, self.i32)) if isinstance(v.type, VectorType) else v

    def m_or(self, a, c):
        if a is None:
            return c
        return self.b.or_(a, c)

    def value_of(self, v, ctx):
        """The new value of the body's `v` read in the original block `ctx`."""
        home = self.uni.def_block.get(v)
        if home is None:
            return self.vals.get(v, v) if v in self.private else v
        for loop in self.cf.loops_containing(home):
            if ctx not in loop.blocks:
                return self.liveout[(loop, v)]
        return self.vals[v]

    def vec(self, v, ctx):
        return self.splat(self.value_of(v, ctx))

    def uni_val(self, v, ctx):
        value = self.value_of(v, ctx)
        if value.type != v.type:
            raise Unsupported(f"internal: a uniform value is a vector ({v.name})")
        return value

    def operand(self, v, ctx, vector: bool):
        return self.vec(v, ctx) if vector else self.uni_val(v, ctx)

    # -- the loop --------------------------------------------------------------------------------

    def build(self, guard, entry):
        """The vector loop, entered from `entry` (the block in front of the preheader, ending without a
        terminator: `Builder.split_before` of the preheader's `br header`) where `guard` holds, the original
        loop through its preheader elsewhere."""
        try:
            self._build(guard, entry)
        except Exception:
            self.rollback()
            raise

    def _build(self, guard, entry):
        item = self.item
        head = self.head = self.new_block("vec.chunk")
        with Builder(self.llctx) as b:
            self.b = b
            b.position_at_end(head)
            iv = self.index = b.phi(self.i64, [], "vec.index0")
            lanes = self.splat(iv)
            offsets = Constant.poison(self.vty(self.i64))
            for k in range(self.W):
                offsets = b.insert_element(offsets, self.const(k), self.const(k, self.i32))
            lanes = b.add(lanes, offsets, "vec.lanes")
            chunk = b.icmp("ult", lanes, self.splat(item.stop), "vec.mask")
            if self.streams:  # the first chunk may start before the row (at the stores' alignment)
                chunk = b.and_(chunk, b.icmp("sge", lanes, self.splat(item.first)))
            self.vals[item.iv] = lanes
            self.chunk = chunk
            self.privatize(offsets)
            self.region(self.cf.schedule)
            nxt = b.add(iv, self.const(self.W), "vec.next")
            iv.add_incoming(nxt, b.block)
            latch = b.block
            b.cond_br(b.icmp("ult", nxt, item.stop), head, item.exit)
            for phi in [i for i in item.exit.instructions if isinstance(i, PHINode)]:
                phi.add_incoming(phi.incoming_value_for(item.latch), latch)
            if self.streams:  # streamed stores are ordered before the launch entry returns
                streaming.fence_returns(b, self.fn, self.module)
            b.position_at_end(entry)
            iv.add_incoming(self.streams.start if self.streams else item.first, entry)
            b.cond_br(guard, head, item.preheader)

    def privatize(self, offsets) -> None:
        """A slot per lane for each of the item's own stack slots (private.py): `alloca [W x T]` in the
        entry block, and the addresses in it as vectors, in the chunk's first block."""
        b, entry = self.b, self.fn.entry_block
        here = b.block
        copies = {}
        for slot in dict.fromkeys(self.private.values()):
            b.position_before(entry.instructions.first)
            copies[slot] = b.alloca(ArrayType.get(slot.allocated_type, self.W), f"{slot.name}.lanes",
                                    align=max(slot.alignment, 1))
            self.slots.append(copies[slot])
        b.position_at_end(here)
        todo = list(self.private)
        while todo:
            v = todo.pop(0)
            if v in copies:
                self.vals[v] = b.gep(ArrayType.get(v.allocated_type, self.W), copies[v], [self.const(0), offsets],
                                     f"{v.name}.lane")
                continue
            base = v.operands[0]
            if base not in self.vals:
                todo.append(v)
                continue
            self.vals[v] = b.gep(v.source_element_type, self.vals[base], list(v.indices), inbounds=False)

    def region(self, region) -> None:
        for node in region:
            if isinstance(node, tuple):
                self.loop(*node)
            else:
                self.block(node)

    def block(self, blk, mask=None) -> None:
        if mask is None:
            if blk in self.always:
                mask = self.chunk
            else:
                for p in self.cf.pred[blk]:
                    mask = self.m_or(mask, self.edge(p, blk))
        self.mask[blk] = mask
        is_header = blk in self.cf.loop_of and self.cf.loop_of[blk].header == blk
        for inst in blk.instructions:
            if inst.is_terminator:
                continue
            if isinstance(inst, PHINode):
                if is_header or inst == self.item.iv:
                    continue
                self.vals[inst] = self.join(inst, blk)
                continue
            self.instruction(inst, blk)
        for target in set(blk.successors):
            if dead_end(target) == "trap":  # the item-by-item loop would trap here: so does the vector loop
                self.edges.pop((blk, target), None)
                self.guarded(target.instructions.first, blk, self.edge(blk, target))

    def edge(self, src, dst):
        key = (src, dst)
        if key in self.override:
            return self.override[key]
        if key in self.edges:
            return self.edges[key]
        m, term, b = self.mask[src], src.terminator, self.b
        zero = Constant.null(self.mask_ty)
        if isinstance(term, BranchInst) and term.is_conditional:
            then, other = term.successors
            if then == other:
                out = m
            else:
                cond = self.cond(src, term.condition)
                if isinstance(cond.type, VectorType):
                    out = b.and_(m, cond if dst == then else b.xor(cond, Constant.all_ones(self.mask_ty)))
                else:
                    out = b.select(cond, m, zero) if dst == then else b.select(cond, zero, m)
        elif term.opcode_name == "switch":
            out = self.switch_edge(src, term, dst, m)
        else:
            out = m
        self.edges[key] = out
        return out

    def cond(self, blk, value):
        if blk not in self.frozen:
            varying = self.uni.is_varying_at(value, blk)
            self.frozen[blk] = self.b.freeze(self.operand(value, blk, varying))
        return self.frozen[blk]

    def switch_edge(self, src, term, dst, m):
        b = self.b
        value = self.cond(src, term.condition)
        vector = isinstance(value.type, VectorType)
        hit, seen = None, None
        for c, target in term.cases:
            e = b.icmp("eq", value, self.splat(c) if vector else c)
            seen = e if seen is None else b.or_(seen, e)
            if target == dst:
                hit = e if hit is None else b.or_(hit, e)
        if dst == term.default:
            miss = b.xor(seen, Constant.all_ones(seen.type)) if seen is not None else None
            if miss is None:
                return m
            hit = miss if hit is None else b.or_(hit, miss)
        if hit is None:
            return Constant.null(self.mask_ty)
        if not vector:
            return b.select(hit, m, Constant.null(self.mask_ty))
        return b.and_(m, hit)

    def join(self, phi, blk):
        """A phi of a block that is not a loop header: a select per incoming edge."""
        varying = phi in self.uni.varying
        incoming, seen = [], set()
        for v, p in phi.incoming:
            if p not in seen:
                seen.add(p)
                incoming.append((v, p))
        self.check_type(phi, varying)
        acc = self.operand(incoming[0][0], blk, varying)
        for v, p in incoming[1:]:
            m = self.edge(p, blk)
            acc = self.b.select(m if varying else self.any(m), self.operand(v, blk, varying), acc)
        return acc

    def loop(self, loop: Loop, region) -> None:
        b, cf = self.b, self.cf
        header = loop.header
        entries = [p for p in cf.pred[header] if p not in loop.blocks]
        m_in = None
        for p in entries:
            m_in = self.m_or(m_in, self.edge(p, header))
        starts = []
        for phi in [i for i in header.instructions if isinstance(i, PHINode)]:
            varying = phi in self.uni.varying
            self.check_type(phi, varying)
            starts.append((phi, varying, self.entry_value(phi, header, entries, varying)))
        before = b.block
        head = self.new_block(f"vec.{header.name}")
        b.br(head)
        b.position_at_end(head)
        mphi = b.phi(self.mask_ty, [(m_in, before)], "vec.loopmask")
        divergent = loop in self.uni.divergent
        phis = []
        for phi, varying, start in starts:
            new = b.phi(start.type, [(start, before)])
            self.vals[phi] = new
            phis.append((phi, new, varying))
        zero = Constant.null(self.mask_ty)
        accs = [(e, b.phi(self.mask_ty, [(zero, before)])) for e in loop.exits]
        keeps = []
        for v in loop.liveouts:
            vector = divergent or v in self.uni.varying
            ty = self.vty(v.type) if vector else v.type
            keeps.append((v, vector, b.phi(ty, [(Constant.null(ty), before)])))
        self.block(header, mphi)
        self.region(region[1:])
        m_back = None
        for latch in loop.latches:
            m_back = self.m_or(m_back, self.edge(latch, header))
        leaving = None
        for (src, dst), _ in accs:
            leaving = self.m_or(leaving, self.edge(src, dst))
        leaving = zero if leaving is None else leaving
        new_accs = [(e, acc, b.or_(acc, self.edge(*e))) for e, acc in accs]
        any_leaving = None
        new_keeps = []
        for v, vector, keep in keeps:
            now = self.operand(v, header, vector)
            if vector:
                new_keeps.append((v, keep, b.select(leaving, now, keep)))
            else:
                any_leaving = any_leaving or self.any(leaving)
                new_keeps.append((v, keep, b.select(any_leaving, now, keep)))
        backs = []
        for phi, new, varying in phis:
            backs.append((new, self.back_value(phi, loop, varying)))
        end = b.block
        for new, value in backs:
            new.add_incoming(value, end)
        mphi.add_incoming(m_back, end)
        for e, acc, value in new_accs:
            acc.add_incoming(value, end)
            self.override[e] = value
        for v, keep, value in new_keeps:
            keep.add_incoming(value, end)
            self.liveout[(loop, v)] = value
        after = self.new_block(f"vec.{header.name}.done")
        b.cond_br(self.any(m_back), head, after)
        b.position_at_end(after)

    def entry_value(self, phi, header, entries, varying):
        acc = None
        for p in entries:
            v = self.operand(phi.incoming_value_for(p), header, varying)
            if acc is None:
                acc = v
            else:
                m = self.edge(p, header)
                acc = self.b.select(m if varying else self.any(m), v, acc)
        return acc

    def back_value(self, phi, loop, varying):
        acc = None
        for latch in loop.latches:
            v = self.operand(phi.incoming_value_for(latch), loop.header, varying)
            if acc is None:
                acc = v
            else:
                m = self.edge(latch, loop.header)
                acc = self.b.select(m if varying else self.any(m), v, acc)
        return acc

    def check_type(self, inst, varying) -> None:
        if varying and type_size(inst.type) is None:
            raise Unsupported(f"a value of type {inst.type} differs between work items")

    # -- instructions ------------------------------------------------------------------------------

    def instruction(self, inst, blk) -> None:
        varying = inst in self.uni.varying
        if isinstance(inst, CallInst):
            return self.call(inst, blk, varying)
        if isinstance(inst, LoadInst):
            return self.load(inst, blk, varying)
        if isinstance(inst, StoreInst):
            return self.store(inst, blk)
        op = inst.opcode_name
        if op in ("atomicrmw", "cmpxchg"):
            self.check_type(inst, True)
            self.lane_by_lane.append(op)
            self.vals[inst] = self.per_lane(inst, blk)
            return
        if op in ("alloca", "fence", "va_arg", "landingpad", "invoke", "callbr"):
            raise Unsupported(f"the body has an `{op}`")
        if not varying:
            self.vals[inst] = self.clone(inst, blk)
            return
        self.check_type(inst, True)
        self.vals[inst] = self.vector_op(inst, blk, op)

    def clone(self, inst, blk):
        """A uniform instruction, as it is (where no lane may run it, a division divides by 1)."""
        operands = [(k, self.uni_val(op, blk)) for k, op in enumerate(inst.operands) if op in self.uni.def_block]
        if inst.opcode_name in _DIVISIONS and blk not in self.always:
            divisor = dict(operands).get(1, inst.operands[1])
            sel = self.b.select(self.any(self.mask[blk]), divisor, ConstantInt.get(divisor.type, 1))
            operands = [(k, v) for k, v in operands if k != 1] + [(1, sel)]
        new = inst.clone()
        self.b.insert(new, inst.name)
        for k, value in operands:
            new.operands[k] = value
        return new

    def vector_op(self, inst, blk, op):
        b = self.b
        vty = self.vty(inst.type)
        if isinstance(inst, BinaryOperator):
            lhs, rhs = self.vec(inst.lhs, blk), self.vec(inst.rhs, blk)
            if op in _DIVISIONS:
                rhs = b.select(self.mask[blk], rhs, self.splat(ConstantInt.get(inst.type, 1)))
            return b.binop(op, lhs, rhs)
        if isinstance(inst, UnaryOperator):
            return b.fneg(self.vec(inst.operands[0], blk))
        if isinstance(inst, CastInst):
            return b.cast(op, self.vec(inst.operands[0], blk), vty)
        if isinstance(inst, CompareInst):
            lhs, rhs = self.vec(inst.operands[0], blk), self.vec(inst.operands[1], blk)
            return (b.fcmp if inst.is_float else b.icmp)(inst.predicate, lhs, rhs)
        if isinstance(inst, SelectInst):
            c = inst.operands[0]
            cond = self.operand(c, blk, self.uni.is_varying_at(c, blk))
            return b.select(cond, self.vec(inst.operands[1], blk), self.vec(inst.operands[2], blk))
        if isinstance(inst, FreezeInst):
            return b.freeze(self.vec(inst.operands[0], blk))
        if isinstance(inst, GetElementPtrInst):
            ops = [self.operand(o, blk, self.uni.is_varying_at(o, blk)) for o in inst.operands]
            return b.gep(inst.source_element_type, ops[0], ops[1:], inbounds=False)
        raise Unsupported(f"`{op}` of values that differ between work items")

    # -- memory ------------------------------------------------------------------------------------

    def masked(self, name, ret, args, align):
        call = masked_call(self.b, self.module, name, ret, args, align)
        self.aligns[call] = max(1, align)
        return call

    def load(self, inst, blk, varying):
        ty, ptr = inst.type, inst.operands[0]
        if (inst.is_volatile or inst.ordering not in (None, "notatomic")) and self.uni.is_varying_at(ptr, blk):
            raise Unsupported("a volatile or atomic load")
        if not self.uni.is_varying_at(ptr, blk):
            value = self.clone(inst, blk) if blk in self.always else self.guarded(inst, blk)
            self.vals[inst] = self.splat(value) if varying else value
            return
        vty, mask = self.vty(ty), self.mask[blk]
        pointers = self.vec(ptr, blk)
        if self.mem.stride(ptr) == type_size(ty):
            first = self.lane(pointers, 0)
            self.consecutive += 1
            loaded = self.masked(f"llvm.masked.load.{mangle(vty)}.p0", vty, [first, mask, Constant.null(vty)],
                                 inst.alignment)
            # Frozen: LLVM 22's instcombine folds `select(mask, masked.load(p, mask, 0), x)` into a new
            # `masked.load(p, mask, x)` where the select is, past any store to p in between (a branch that
            # reads an element and then overwrites it, as the adjoint consumes a seed).
            self.vals[inst] = self.b.freeze(loaded)
        else:
            self.gathers += 1
            self.vals[inst] = self.masked(f"llvm.masked.gather.{mangle(vty)}.v{self.W}p0", vty,
                                          [pointers, mask, Constant.null(vty)], inst.alignment)

    def store(self, inst, blk):
        if inst.is_volatile or inst.ordering not in (None, "notatomic"):
            raise Unsupported("a volatile or atomic store")
        value, ptr = inst.operands
        ty = value.type
        void = self.llctx.void
        vary_ptr = self.uni.is_varying_at(ptr, blk)
        vary_value = self.uni.is_varying_at(value, blk)
        if not vary_ptr and inst in self.mem.lane_sums:  # (a term the same for every lane is added W times too)
            self.lane_sum(inst, blk)
            return
        if not vary_ptr and not vary_value:
            if blk in self.always:
                self.clone(inst, blk)
            else:
                self.guarded(inst, blk)
            return
        vty, mask = self.vty(ty), self.mask[blk]
        data = self.vec(value, blk)
        if vary_ptr and self.mem.stride(ptr) == type_size(ty):
            self.consecutive += 1
            address = self.lane(self.vec(ptr, blk), 0)
            streamed = self.streams and inst in self.streams.stores
            if streamed:
                self.stream(data, address, mask, self.streams.stores[inst][1])
            self.masked(f"llvm.masked.store.{mangle(vty)}.p0", void, [data, address, mask], inst.alignment)
            if streamed:
                self.b.br(self.streamed)
                self.b.position_at_end(self.streamed)
        else:  # a scatter stores lane after lane: where lanes share an address, the last one's value stays
            self.gathers += 1
            self.masked(f"llvm.masked.scatter.{mangle(vty)}.v{self.W}p0", void, [data, self.vec(ptr, blk), mask],
                        inst.alignment)

    def ordered_sum(self, start, value, blk):
        """`start` + the lanes of `value` that run `blk`, added in lane order (`llvm.vector.reduce.fadd` without
        `reassoc`: exact, item after item; a lane that does not run it adds -0.0, which changes nothing)."""
        ty = value.type
        terms = self.b.select(self.mask[blk], self.vec(value, blk), self.splat(ConstantFP.get(ty, -0.0)))
        vty = self.vty(ty)
        reduce = self.module.get_or_insert_function(f"llvm.vector.reduce.fadd.{mangle(vty)}",
                                                    FunctionType.get(ty, [ty, vty]))
        return self.b.call(reduce, [start, terms])

    def where_any(self, blk, emit) -> None:
        """`emit()` where any lane runs `blk` (always, where every lane may)."""
        if blk in self.always:
            emit()
            return
        b = self.b
        then, nxt = self.new_block("vec.any"), self.new_block("vec.any.next")
        b.cond_br(self.any(self.mask[blk]), then, nxt)
        b.position_at_end(then)
        emit()
        b.br(nxt)
        b.position_at_end(nxt)

    def summed(self, inst, blk) -> None:
        """A call of the autodiff plugin's sum marker on one address for every item (calls.SUM_PREFIX): one call
        per chunk, with the ordered sum of the lanes' values (the adds' order is free; this one is item order)."""
        pointer, value = inst.args
        total = self.ordered_sum(ConstantFP.get(value.type, -0.0), value, blk)
        self.where_any(blk, lambda: self.copy_with(inst, [(0, self.uni_val(pointer, blk)), (1, total)]))

    def lane_sum(self, inst, blk) -> None:
        """`*p = *p + t` where every lane adds into one element (Memory.lane_sums): the lanes' terms added to
        the element in lane order, item after item as the loop ran them (`ordered_sum`), stored once where any
        lane runs it."""
        load, total = self.mem.lane_sums[inst], inst.operands[0]
        term = total.operands[1] if total.operands[0] == load else total.operands[0]
        result = self.ordered_sum(self.uni_val(load, blk), term, blk)
        address = self.uni_val(inst.operands[1], blk)
        self.where_any(blk, lambda: self.b.store(result, address, align=inst.alignment))

    def stream(self, data, address, mask, align) -> None:
        """Where every lane of `mask` stores, in a launch that streams, store `data` at `address` (aligned to
        `align`) non-temporally; elsewhere go on to the masked store the caller emits, then to `self.streamed`."""
        b = self.b
        whole, partial, self.streamed = (self.new_block(n) for n in ("vec.stream", "vec.partial", "vec.stored"))
        b.cond_br(b.and_(self.streams.streaming, self.all(mask), "vec.stream"), whole, partial)
        b.position_at_end(whole)
        b.store(data, address, align=align).set_nontemporal()
        b.br(self.streamed)
        b.position_at_end(partial)

    # -- calls -------------------------------------------------------------------------------------

    def call(self, inst, blk, varying) -> None:
        kind = self.calls.kind(inst)
        if kind == "skip":
            if inst.uses:
                raise Unsupported(f"a call of @{callee_name(inst)} whose result is used")
            return
        if kind in ("libmvec", "elementwise", "conversion", "pure") and not varying:
            self.vals[inst] = self.clone(inst, blk)
            return
        if kind == "libmvec":
            self.vals[inst] = self.libmvec(inst, blk)
            return
        if kind == "elementwise":
            vty = self.vty(inst.type)
            args = [self.vec(a, blk) if a.type == inst.type else self.uni_val(a, blk) for a in inst.args]
            fn = self.module.declare_intrinsic(f"{inst.intrinsic_name}.{mangle(vty)}",
                                               FunctionType.get(vty, [a.type for a in args]))
            self.vals[inst] = self.b.call(fn, args)
            return
        if kind == "sum" and not self.uni.is_varying_at(inst.args[0], blk):
            self.summed(inst, blk)
            return
        if kind == "conversion":
            vty, arg = self.vty(inst.type), self.vec(inst.args[0], blk)
            fn = self.module.declare_intrinsic(f"{inst.intrinsic_name}.{mangle(vty)}.{mangle(arg.type)}",
                                               FunctionType.get(vty, [arg.type]))
            self.vals[inst] = self.b.call(fn, [arg])
            return
        self.lane_by_lane.append(f"call @{callee_name(inst) or '(pointer)'}")
        if str(inst.type) != "void":
            self.check_type(inst, True)
        self.vals[inst] = self.per_lane(inst, blk)

    def libmvec(self, inst, blk):
        """The call through the same libmvec variant the scalar code calls (the vector math table), so
        that every lane gets the scalar call's result."""
        from gpuc.targets.vector_math import through_variant

        name = callee_name(inst)
        vector_name, lanes, _bits = self.calls.variants[name]
        element = inst.type
        vty = VectorType.get(element, lanes)
        variant = self.module.get_or_insert_function(vector_name, FunctionType.get(vty, [vty] * len(inst.args)))
        args = [self.vec(a, blk) for a in inst.args]
        return through_variant(self.b, self.i32, variant, lanes, args, self.vty(element), self.masks)

    def guarded(self, inst, blk, mask=None):
        """A uniform instruction run once where any lane of `mask` (its block's) runs it."""
        b = self.b
        bit = self.any(self.mask[blk] if mask is None else mask)
        values = [(k, self.uni_val(op, blk)) for k, op in enumerate(inst.operands) if op in self.uni.def_block]
        then, nxt = self.new_block("vec.any"), self.new_block("vec.any.next")
        before = b.block
        b.cond_br(bit, then, nxt)
        b.position_at_end(then)
        new = self.copy_with(inst, values)
        b.br(nxt)
        b.position_at_end(nxt)
        if str(inst.type) == "void":
            return None
        return b.phi(inst.type, [(new, then), (Constant.poison(inst.type), before)])

    def copy_with(self, inst, values):
        """A copy of `inst` at the builder, its operands at the (index, value) pairs `values` replaced."""
        new = inst.clone()
        self.b.insert(new, inst.name)
        for index, value in values:
            new.operands[index] = value
        return new

    def per_lane(self, inst, blk):
        """`inst` once per lane whose mask bit is set, in lane order; its results as a vector. A loop over the
        lanes (not one block per lane: a tape's growth, a lane-by-lane call, is rare and the code stays small)."""
        b = self.b
        mask = self.mask[blk]
        typed = str(inst.type) != "void"
        vty = self.vty(inst.type) if typed else None
        operands = [(k, op) for k, op in enumerate(inst.operands) if op in self.uni.def_block or op in self.private]
        varying = {index: self.uni.is_varying_at(op, blk) for index, op in operands}
        values = [(index, self.vec(op, blk) if varying[index] else self.uni_val(op, blk)) for index, op in operands]
        # Where no lane runs it (a tape's growth: rarely any), one test.
        start, head, rest = b.block, self.new_block("vec.lanes"), self.new_block("vec.lanes.done")
        then, latch = self.new_block("vec.lane"), self.new_block("vec.lane.next")
        b.cond_br(self.any(mask), head, rest)
        b.position_at_end(head)
        k = b.phi(self.i32, [(self.const(0, self.i32), start)])
        result = b.phi(vty, [(Constant.poison(vty), start)]) if typed else None
        b.cond_br(b.extract_element(mask, k), then, latch)
        b.position_at_end(then)
        new = self.copy_with(inst, [(index, b.extract_element(value, k) if varying[index] else value)
                                    for index, value in values])
        b.br(latch)
        b.position_at_end(latch)
        if typed:
            got = b.phi(inst.type, [(new, then), (Constant.poison(inst.type), head)])
            stepped = b.insert_element(result, got, k)
            result.add_incoming(stepped, latch)
        k_next = b.add(k, self.const(1, self.i32))
        k.add_incoming(k_next, latch)
        b.cond_br(b.icmp("ult", k_next, self.const(self.W, self.i32)), head, rest)
        b.position_at_end(rest)
        if typed:
            return b.phi(vty, [(stepped, latch), (Constant.poison(vty), start)])
        return None


def masked_call(b, module, name, ret, args, align):
    """A call of the masked memory intrinsic `name` at `b`, its pointer argument aligned to `align`."""
    fn = module.declare_intrinsic(name, FunctionType.get(ret, [a.type for a in args]))
    call = b.call(fn, args)
    pointer_arg = 1 if name.startswith(("llvm.masked.store", "llvm.masked.scatter")) else 0
    call.param_attributes(pointer_arg).add("align", max(1, align))
    return call


def mangle(ty) -> str:
    if isinstance(ty, VectorType):
        return f"v{ty.count}{mangle(ty.element_type)}"
    if isinstance(ty, IntegerType):
        return f"i{ty.width}"
    text = str(ty)
    return {"double": "f64", "float": "f32", "half": "f16", "bfloat": "bf16", "ptr": "p0"}[text]
