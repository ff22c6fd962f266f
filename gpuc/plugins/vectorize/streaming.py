"""Streaming stores: a launch that writes a large array it does nothing else with writes it past the caches.

A store `out[i] = v` of a launch over millions of items reads each 64-byte line it overwrites into the
cache (a read for ownership) before writing it back: two bytes of traffic per byte stored, and caches
filled with lines nothing reads soon. A non-temporal store (x86's `vmovntps`/`vmovntdq` of a vector aligned
to its size) writes whole lines past the caches. On the 2-CPU Rocket Lake Xeon of
benchmarks/bench_vectorize.py it halves saxpy's time over 10M float32 on two threads; below about 1 MiB of
output it loses (the lines were in the cache and would have stayed there).

The vector loop (emit.py) streams a *stream store*, a store
- outside the body's loops (each item makes it at most once; under branches too);
- consecutive across items (`out[i]`, a row's `img[y, x]`), of a scalar of 1, 2, 4 or 8 bytes that fills a
  vector of at least 16 bytes;
- into an array (the address's base, known before the loop) that no other access of the body touches (nor
  an atomic; a body with calls or atomics that may touch any array streams nothing).

Whether a row streams is decided in front of its vector loop (`Streams.prepare`): the launch streams when its
stream stores write at least `CompilerConfig.streaming_bytes` bytes in all (work items times bytes per item),
each stream's address at the row's first item is a multiple of its element's size, and all of them lie
equally far past a multiple of the vector's alignment (one start aligns them all; NumPy's large arrays do).
The row's vector loop then starts up to a vector early, at the item whose stores are aligned, with the lanes
before the row's first item masked off as those past its end are. A store whose lanes all store (its
block's mask all set: not in the partial chunks at either end, nor where a branch sends some lanes
elsewhere) is an aligned `!nontemporal` store; the others the masked store. An `sfence` before the launch entry returns
orders a run's streamed stores before whatever follows (the pool's signal that the run has ended).
"""

from __future__ import annotations

from gpuc.llvm import CallInst, ConstantInt, FunctionType, StoreInst

from .memory import type_size

#: The widest alignment a stream needs: a zmm register's 64 bytes (wider values are several registers).
MAX_ALIGN = 64


class Streams:
    """The body's stream stores (`stores`: StoreInst -> (element size, alignment)), and once `prepare`d the
    row's decision (`streaming`, an i1) and the vector loop's first index (`start`)."""

    def __init__(self, body, target, threshold):
        self.body, self.threshold = body, threshold
        self.stores: dict = {}
        self.streaming = self.start = None
        if threshold is None or not target.triple().startswith("x86_64"):
            return
        mem, uni, cf = body.mem, body.uni, body.cf
        if mem.opaque:  # calls and atomics that may touch any array (their rows run item by item anyway)
            return
        touches: dict = {}
        for pointer in [a.pointer for a in mem.accesses] + [inst.operands[0] for inst in mem.atomics]:
            root = mem.root(pointer)
            touches[root] = touches.get(root, 0) + 1
        for access in mem.accesses:
            inst = access.inst
            if not access.write or not isinstance(inst, StoreInst) or inst.is_volatile:
                continue
            if inst.ordering not in (None, "notatomic"):
                continue
            blk = inst.parent
            if blk in cf.loop_of or not uni.is_varying_at(access.pointer, blk):
                continue
            size = type_size(inst.operands[0].type)
            root = mem.root(access.pointer)
            if root is None or touches[root] != 1 or size not in (1, 2, 4, 8) or mem.stride(access.pointer) != size:
                continue
            if access.pointer != inst.operands[1]:
                continue  # (a bounds-checked store: its address is a select)
            vector = size * body.W
            if vector < 16:
                continue
            self.stores[inst] = (size, min(MAX_ALIGN, vector))
        sizes = [size for size, _ in self.stores.values()]
        if len(set(sizes)) > 1:  # one start aligns streams of one element size only: those of the first's
            self.stores = {inst: v for inst, v in self.stores.items() if v[0] == sizes[0]}

    def __bool__(self) -> bool:
        return bool(self.stores)

    def bytes_per_item(self) -> int:
        return sum(size for size, _ in self.stores.values())

    def prepare(self, b, first, items):
        """Build, at `b` (before the row's chunks), whether the row streams and the vector loop's first
        index; returns `streaming`."""
        mem = self.body.mem
        llctx = b.block.parent.context
        i64 = llctx.i64
        stores = list(self.stores.items())
        # items * bytes per item >= threshold, without overflow: items >= ceil(threshold / bytes per item)
        need = -(-self.threshold // self.bytes_per_item())
        ok = b.icmp("uge", items, ConstantInt.get(i64, need))
        align = stores[0][1][1]
        lead = None
        for inst, (size, _) in stores:
            affine = mem.materialize(b, inst.operands[1], first)
            if affine is None:  # (not A + index0 * S: it streams no row)
                return ConstantInt.get(llctx.i1, 0)
            address = affine[0]
            ok = b.and_(ok, b.icmp("eq", b.and_(address, ConstantInt.get(i64, size - 1)), ConstantInt.get(i64, 0)))
            offset = b.and_(address, ConstantInt.get(i64, align - 1))
            if lead is None:
                lead = (offset, size)
            else:
                ok = b.and_(ok, b.icmp("eq", offset, lead[0]))
        offset, size = lead
        lag = b.lshr(offset, ConstantInt.get(i64, size.bit_length() - 1), "stream.lag")
        self.streaming = b.freeze(ok)
        self.start = b.select(self.streaming, b.sub(first, lag), first, "stream.first")
        return self.streaming


def fence_returns(b, fn, module) -> None:
    """An `sfence` before each return of `fn`: the streamed stores of a run are globally visible before the
    pool learns that the run has ended. (Once per run, not per row: an sfence waits for the write-combining
    buffers to drain.)"""
    sfence = module.get_or_insert_function("llvm.x86.sse.sfence", FunctionType.get(module.context.void, []))
    for blk in fn.blocks:
        term = blk.terminator
        if term is not None and term.opcode_name == "ret":
            previous = term.previous
            if not (isinstance(previous, CallInst) and previous.callee == sfence):
                b.position_before(term)
                b.call(sfence, [])
