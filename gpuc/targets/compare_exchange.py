"""Atomic read-modify-writes as compare-exchange loops, for backends and drivers that cannot do an
operation in one instruction: integer compare-exchange of 32 and 64 bits is all the loops need.

`compare_exchange_loop` emits one (the frontend's atomic_inc/atomic_dec, the reverse sweep's float
accumulation on targets without float atomics); `expand_atomic_rmw` and `expand_narrow_cmpxchg`
replace an `atomicrmw` or an 8/16-bit `cmpxchg` already in a function (SPIR-V's finish_module).
"""

from __future__ import annotations

from ..llvm import AtomicCmpXchgInst, AtomicRMWInst, Builder, Constant, ConstantInt, FunctionType, IntegerType, Type

_FLOAT_BITS = {"half": 16, "bfloat": 16, "float": 32, "double": 64}
_FLOAT_SUFFIX = {"half": "f16", "bfloat": "bf16", "float": "f32", "double": "f64"}
# atomicrmw's IEEE minimum/maximum operations and the intrinsics computing them.
_FLOAT_INTRINSICS = {"fmin": "minnum", "fmax": "maxnum", "fminimum": "minimum", "fmaximum": "maximum"}
# Integer atomicrmw operations: the predicate choosing the operand, or the binary operation.
_SELECTS = {"max": "sgt", "min": "slt", "umax": "ugt", "umin": "ult"}
_BINARY = {"add": "add", "sub": "sub", "and": "and_", "or": "or_", "xor": "xor", "fadd": "fadd", "fsub": "fsub"}


def bit_width(ty: Type) -> int | None:
    """The width of an integer or floating-point type, None for others."""
    if isinstance(ty, IntegerType):
        return ty.width
    return _FLOAT_BITS.get(str(ty))


def compare_exchange_loop(b: Builder, fn, pointer, ty: Type, update, **options):
    """`b.compare_exchange_loop(fn, pointer, ty, update, ...)` (gpuc/llvm/builder.py), for the frontend."""
    return b.compare_exchange_loop(fn, pointer, ty, update, **options)


def rmw_update(module, operation: str, value):
    """`atomicrmw <operation> ..., value`'s new element as `update(b, old)` for compare_exchange_loop, or
    None for an operation it does not know."""
    if operation in _BINARY:
        return lambda b, old: getattr(b, _BINARY[operation])(old, value)
    if operation == "nand":
        return lambda b, old: b.not_(b.and_(old, value))
    if operation == "xchg":
        return lambda b, old: value
    if operation in _SELECTS:
        return lambda b, old: b.select(b.icmp(_SELECTS[operation], old, value), old, value)
    if operation in _FLOAT_INTRINSICS and str(value.type) in _FLOAT_SUFFIX:
        ty = value.type
        intrinsic = module.get_or_insert_function(f"llvm.{_FLOAT_INTRINSICS[operation]}.{_FLOAT_SUFFIX[str(ty)]}",
                                                  FunctionType.get(ty, [ty, ty]))
        return lambda b, old: b.call(intrinsic, [old, value])
    one = ConstantInt.get(value.type, 1) if isinstance(value.type, IntegerType) else None
    if operation == "uinc_wrap":  # old >= v ? 0 : old + 1
        return lambda b, old: b.select(b.icmp("uge", old, value), ConstantInt.get(value.type, 0), b.add(old, one))
    if operation == "udec_wrap":  # old == 0 or old > v ? v : old - 1
        zero = ConstantInt.get(value.type, 0) if one is not None else None
        return lambda b, old: b.select(b.or_(b.icmp("eq", old, zero), b.icmp("ugt", old, value)), value,
                                       b.sub(old, one))
    if operation == "usub_cond":  # old >= v ? old - v : old
        return lambda b, old: b.select(b.icmp("uge", old, value), b.sub(old, value), old)
    if operation == "usub_sat":
        return lambda b, old: b.select(b.icmp("uge", old, value), b.sub(old, value), ConstantInt.get(value.type, 0))
    return None


def expand_atomic_rmw(b: Builder, module, inst: AtomicRMWInst, word_bits: int = 32) -> bool:
    """Replace `inst` by a compare-exchange loop computing its operation; where its element is narrower
    than `word_bits`, the loop exchanges the aligned word of `word_bits` holding it. Returns False (and
    leaves `inst`) for an operation or type it does not know."""
    width = bit_width(inst.type)
    update = rmw_update(module, inst.operation, inst.value)
    if width is None or update is None:
        return False
    fn, tail, name = inst.function, inst.parent, inst.name or f"atomic.{inst.operation}"
    options = dict(ordering=inst.ordering, scope=inst.sync_scope_id, done=tail, name=name)
    b.split_before(inst)
    if width >= word_bits:
        old = compare_exchange_loop(b, fn, inst.pointer, inst.type, update, align=inst.alignment, **options)
    else:
        word = _Word(b, module, inst.pointer, inst.type, word_bits)
        old_word = compare_exchange_loop(b, fn, word.address, word.type, lambda b, w: word.insert(b, w, update(
            b, word.extract(b, w))), **options)
        old = word.extract(b, old_word)
    inst.replace_all_uses_with(old)
    inst.erase()
    return True


def expand_narrow_cmpxchg(b: Builder, module, inst: AtomicCmpXchgInst, word_bits: int = 32) -> bool:
    """Replace `inst`, a cmpxchg of an integer narrower than `word_bits`, by a loop exchanging the aligned
    word holding it: retried while only the word's other bytes changed. Returns False for others."""
    width = bit_width(inst.compare.type)
    if width is None or width >= word_bits or not isinstance(inst.compare.type, IntegerType):
        return False
    fn, tail = inst.function, inst.parent
    name = inst.name or "cmpxchg"
    success, failure, scope = inst.success_ordering, inst.failure_ordering, inst.sync_scope_id
    b.split_before(inst)
    word = _Word(b, module, inst.pointer, inst.compare.type, word_bits)
    first = b.load(word.type, word.address, f"{name}.first", ordering="monotonic")
    first.sync_scope_id = scope
    rest = b.and_(first, word.others)
    before = b.block
    loop, retry = fn.append_block(f"{name}.loop"), fn.append_block(f"{name}.retry")
    loop.move_after(before)
    retry.move_after(loop)
    b.br(loop)
    b.position_at_end(loop)
    others = b.phi(word.type, [(rest, before)], f"{name}.rest")
    pair = b.cmpxchg(word.address, b.or_(others, word.place(b, inst.compare)),
                     b.or_(others, word.place(b, inst.new_value)), success=success, failure=failure)
    pair.sync_scope_id = scope
    seen, ok = b.extract_value(pair, 0), b.extract_value(pair, 1)
    b.cond_br(ok, tail, retry)
    b.position_at_end(retry)
    now = b.and_(seen, word.others)
    others.add_incoming(now, retry)
    b.cond_br(b.icmp("ne", now, others), loop, tail)
    b.position_before(tail.instructions.first)
    result = b.insert_value(b.insert_value(Constant.poison(inst.type), word.extract(b, seen), 0), ok, 1, name)
    inst.replace_all_uses_with(result)
    inst.erase()
    return True


class _Word:
    """The aligned word of `word_bits` holding a narrower element at `pointer`, emitted at `b`'s position:
    its address, where the element lies in it (by the data layout's byte order), and the other bits."""

    def __init__(self, b: Builder, module, pointer, ty: Type, word_bits: int) -> None:
        llctx = ty.context
        self.ty, self.type = ty, llctx.int_type(word_bits)
        width, nbytes = bit_width(ty), word_bits // 8
        self.narrow = ty if isinstance(ty, IntegerType) else llctx.int_type(width)
        i64 = llctx.i64
        offset = b.and_(_address(b, pointer, i64), ConstantInt.get(i64, nbytes - 1), "word.offset")
        self.address = b.gep(llctx.i8, pointer, [b.sub(ConstantInt.get(i64, 0), offset)], "word.address")
        if "E" not in module.data_layout.split("-"):
            position = offset
        else:
            position = b.sub(ConstantInt.get(i64, nbytes - width // 8), offset)
        self.shift = b.trunc(b.shl(position, ConstantInt.get(i64, 3)), self.type, "word.shift")
        mask = b.shl(ConstantInt.get(self.type, (1 << width) - 1), self.shift)
        self.others = b.xor(mask, ConstantInt.get(self.type, -1), "word.others")

    def extract(self, b: Builder, word):
        narrow = b.trunc(b.lshr(word, self.shift), self.narrow)
        return narrow if self.narrow == self.ty else b.bitcast(narrow, self.ty)

    def place(self, b: Builder, value):
        """`value` moved to its bits of the word, the others zero."""
        bits = value if self.narrow == self.ty else b.bitcast(value, self.narrow)
        return b.shl(b.zext(bits, self.type), self.shift)

    def insert(self, b: Builder, word, value):
        return b.or_(b.and_(word, self.others), self.place(b, value))


def _address(b: Builder, pointer, ty: Type):
    """`ptrtoint pointer to ty` as an instruction also for a constant pointer (the builder would fold it into a
    constant expression, which hides a constant address from rewrites of instructions' operands)."""
    if not isinstance(pointer, Constant):
        return b.ptrtoint(pointer, ty)
    stand_in = b.freeze(pointer)
    address = b.ptrtoint(stand_in, ty)
    address.operands[0] = pointer
    stand_in.erase()
    return address


__all__ = ["bit_width", "compare_exchange_loop", "expand_atomic_rmw", "expand_narrow_cmpxchg", "rmw_update"]
