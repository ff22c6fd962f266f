"""The IR builder: positioning, then one named method per instruction kind.

Flags are keyword arguments spelled as in the IR (`add(a, b, nsw=True)`, `fadd(x, y,
fast_math={"contract"})`, `load(ty, p, align=4, ordering="acquire")`).  When both operands are
constants LLVM folds the operation and the method returns a constant (without the flags).
"""

from __future__ import annotations

from . import capi
from ._base import Owner, check_link
from .capi import lib
from .flags import (FCMP_PREDICATES, ICMP_PREDICATES, gep_no_wrap_bits, ordering_code, ordering_name, rmw_code)
from .instructions import (AllocaInst, AtomicCmpXchgInst, AtomicRMWInst, CallInst, FenceInst, LoadInst, PHINode,
                           StoreInst, check_alignment)
from .typecheck import (FP_BITS, INT, PTR, check_cast, kind_of, require, require_condition, require_pointer,
                        same_type)
from .types import Type
from .values import BasicBlock, Instruction, Value

_INT = frozenset((INT,))
_FP = frozenset(FP_BITS)
# binary operation -> (LLVMOpcode, operand kinds, what they are called in errors)
BINARY_OPERATIONS = {
    **{op: (getattr(capi, f"LLVM{code}"), _INT, "integer") for op, code in (
        ("add", "Add"), ("sub", "Sub"), ("mul", "Mul"), ("udiv", "UDiv"), ("sdiv", "SDiv"), ("urem", "URem"),
        ("srem", "SRem"), ("shl", "Shl"), ("lshr", "LShr"), ("ashr", "AShr"), ("and", "And"), ("or", "Or"),
        ("xor", "Xor"))},
    **{op: (getattr(capi, f"LLVM{code}"), _FP, "floating-point") for op, code in (
        ("fadd", "FAdd"), ("fsub", "FSub"), ("fmul", "FMul"), ("fdiv", "FDiv"), ("frem", "FRem"))},
}
CAST_OPERATIONS = {
    "trunc": capi.LLVMTrunc, "zext": capi.LLVMZExt, "sext": capi.LLVMSExt, "fptrunc": capi.LLVMFPTrunc,
    "fpext": capi.LLVMFPExt, "fptoui": capi.LLVMFPToUI, "fptosi": capi.LLVMFPToSI, "uitofp": capi.LLVMUIToFP,
    "sitofp": capi.LLVMSIToFP, "ptrtoint": capi.LLVMPtrToInt, "ptrtoaddr": capi.LLVMPtrToAddr,
    "inttoptr": capi.LLVMIntToPtr, "bitcast": capi.LLVMBitCast, "addrspacecast": capi.LLVMAddrSpaceCast,
}
_CAST_NAMES = {code: name for name, code in CAST_OPERATIONS.items()}
_FLAGS = ("nsw", "nuw", "exact", "disjoint", "nneg")
_FENCE_ORDERINGS = ("acquire", "release", "acq_rel", "seq_cst")


def _values(seq):
    """A C array of the value handles of `seq`."""
    return (capi.LLVMValueRef * len(seq))(*[v.ref for v in seq])


def _flagged(value: Value, fast_math=None, **flags) -> Value:
    """Set the IR flags that are on (and the fast-math flags, if given) on a new instruction;
    a constant that LLVM folded the operation into carries none.  A flag the instruction cannot
    carry raises TypeError (the instruction's own check) and takes the instruction away again."""
    inst = isinstance(value, Instruction)
    try:
        for flag, on in flags.items():
            if flag not in _FLAGS:
                raise TypeError(f"unknown instruction flag {flag!r}; use one of {', '.join(_FLAGS)} or fast_math=")
            if on and inst:
                setattr(value, flag, True)
        if fast_math is not None and inst:
            value.fast_math = fast_math
    except (TypeError, ValueError):
        if inst:
            value.erase()  # new, so unused
        raise
    return value


class Builder(Owner):
    """An IRBuilder. Position it, then each method appends one instruction and returns it.

    Operands must belong to the module of the block the builder is positioned in (or be
    constants of its context); anything else raises ValueError before LLVM sees it.
    """

    __slots__ = ("_home", "_anchor")

    def __init__(self, context) -> None:
        super().__init__(lib.LLVMCreateBuilderInContext(context))
        self._home = self._scope = context._scope  # the scope new instructions belong to
        self._anchor = None  # the block or instruction positioned at

    def _dispose(self) -> None:
        lib.LLVMDisposeBuilder(self._ref)

    @property
    def _as_parameter_(self):
        ref = Owner._as_parameter_.fget(self)
        anchor = self._anchor
        if anchor is not None and anchor._gen != anchor._scope.gen:
            try:
                anchor._scope.revalidate(anchor)
            except ValueError as exc:
                raise ValueError(f"the Builder's position is gone ({exc}); position it again") from None
        elif self._home.gen is None:
            raise ValueError("the Builder's LLVM context was closed; it can no longer be used")
        return ref

    def _own(self):
        """The builder's ref when only its own liveness matters (repositioning)."""
        return Owner._as_parameter_.fget(self)

    def _place(self, anchor) -> None:
        if anchor._scope.context is not self._home:
            raise ValueError("the Builder belongs to another LLVM context than the block it is positioned in")
        anchor._as_parameter_
        self._anchor, self._scope = anchor, anchor._scope

    def _use(self, what: str, *values) -> None:
        scope = self._scope
        for v in values:
            if v._scope is not scope and v._scope is not scope.context:
                check_link(scope, v, what)

    def _new(self, ref) -> Value:
        return Value.from_ref(ref, self._scope)

    # -- positioning ---------------------------------------------------------------------
    def position_at_end(self, block: BasicBlock) -> "Builder":
        self._place(block)
        lib.LLVMPositionBuilderAtEnd(self._own(), block)
        return self

    def position_before(self, inst: Instruction) -> "Builder":
        self._place(inst)
        lib.LLVMPositionBuilderBefore(self._own(), inst)
        return self

    def position_after(self, inst: Instruction) -> "Builder":
        nxt = inst.next
        if nxt is None:
            return self.position_at_end(inst.parent)
        return self.position_before(nxt)

    @property
    def block(self) -> BasicBlock | None:
        ref = lib.LLVMGetInsertBlock(self)
        return BasicBlock(ref, self._scope) if ref else None

    def insert(self, inst: Instruction, name: str | None = None) -> Instruction:
        """Insert an unparented instruction (from `clone()` or `remove()`) at the position.

        The instruction keeps its name unless `name` is given.
        """
        self._use("insert", inst)
        if inst.parent is not None:
            raise ValueError(f"{str(inst).strip()!r} is already in a block; remove() it first")
        # LLVM's insert always renames (to "" when no name is given): pass the current name.
        lib.LLVMInsertIntoBuilderWithName(self, inst, (inst.name if name is None else name).encode())
        return inst

    def split_before(self, inst: Instruction, name: str = "") -> BasicBlock:
        """Move what precedes `inst` in its block (phis included) to a new block in front, which the
        block's predecessors branch to instead; returns the new block, without a terminator yet, with
        the builder at its end. Phis elsewhere naming the block stay right: it keeps its terminator."""
        block = inst.parent
        fn = block.parent
        head = fn.append_block(name or f"{block.name}.head")
        head.move_before(block)
        for use in list(block.uses):
            user = use.user
            if isinstance(user, Instruction) and user.is_terminator:
                for i, op in enumerate(user.operands):
                    if op == block:
                        user.operands[i] = head
        self.position_at_end(head)
        for before in list(block.instructions):
            if before == inst:
                break
            before.remove()
            self.insert(before)
        return head

    # -- binary operations ---------------------------------------------------------------
    def binop(self, op: str, lhs: Value, rhs: Value, name: str = "", *, fast_math=None, **flags) -> Value:
        """`lhs <op> rhs` for any binary operation by its IR name ("add", "fmul", "xor", ...);
        `flags` are nsw, nuw, exact, disjoint, as the operation allows."""
        if op not in BINARY_OPERATIONS:
            raise ValueError(f"unknown binary operation {op!r}; use one of {', '.join(BINARY_OPERATIONS)}")
        return _flagged(self._binop(op, lhs, rhs, name), fast_math, **flags)

    def _binop(self, op: str, lhs: Value, rhs: Value, name: str) -> Value:
        opcode, kinds, wanted = BINARY_OPERATIONS[op]
        self._use(op, lhs, rhs)
        if kind_of(same_type(op, lhs, rhs)) not in kinds:
            raise TypeError(f"{op} takes {wanted} operands, not {lhs.type}")
        return self._new(lib.LLVMBuildBinOp(self, opcode, lhs, rhs, name.encode()))

    def add(self, lhs: Value, rhs: Value, name: str = "", *, nsw: bool = False, nuw: bool = False) -> Value:
        """Integer `lhs + rhs`; `nsw` / `nuw` promise no signed / unsigned overflow (else poison)."""
        inst = self._binop("add", lhs, rhs, name)
        return _flagged(inst, nsw=nsw, nuw=nuw) if nsw or nuw else inst

    def sub(self, lhs: Value, rhs: Value, name: str = "", *, nsw: bool = False, nuw: bool = False) -> Value:
        inst = self._binop("sub", lhs, rhs, name)
        return _flagged(inst, nsw=nsw, nuw=nuw) if nsw or nuw else inst

    def mul(self, lhs: Value, rhs: Value, name: str = "", *, nsw: bool = False, nuw: bool = False) -> Value:
        inst = self._binop("mul", lhs, rhs, name)
        return _flagged(inst, nsw=nsw, nuw=nuw) if nsw or nuw else inst

    def nsw_add(self, lhs: Value, rhs: Value, name: str = "") -> Value:
        """`add(lhs, rhs, name, nsw=True)`."""
        return _flagged(self._binop("add", lhs, rhs, name), nsw=True)

    def nuw_add(self, lhs: Value, rhs: Value, name: str = "") -> Value:
        """`add(lhs, rhs, name, nuw=True)`."""
        return _flagged(self._binop("add", lhs, rhs, name), nuw=True)

    def nsw_sub(self, lhs: Value, rhs: Value, name: str = "") -> Value:
        """`sub(lhs, rhs, name, nsw=True)`."""
        return _flagged(self._binop("sub", lhs, rhs, name), nsw=True)

    def nsw_mul(self, lhs: Value, rhs: Value, name: str = "") -> Value:
        """`mul(lhs, rhs, name, nsw=True)`."""
        return _flagged(self._binop("mul", lhs, rhs, name), nsw=True)

    def udiv(self, lhs: Value, rhs: Value, name: str = "", *, exact: bool = False) -> Value:
        """Unsigned division; `exact` promises no remainder."""
        inst = self._binop("udiv", lhs, rhs, name)
        return _flagged(inst, exact=exact) if exact else inst

    def sdiv(self, lhs: Value, rhs: Value, name: str = "", *, exact: bool = False) -> Value:
        """Signed division rounding toward zero; `exact` promises no remainder."""
        inst = self._binop("sdiv", lhs, rhs, name)
        return _flagged(inst, exact=exact) if exact else inst

    def exact_sdiv(self, lhs: Value, rhs: Value, name: str = "") -> Value:
        """`sdiv(lhs, rhs, name, exact=True)`."""
        return _flagged(self._binop("sdiv", lhs, rhs, name), exact=True)

    def urem(self, lhs: Value, rhs: Value, name: str = "") -> Value:
        return self._binop("urem", lhs, rhs, name)

    def srem(self, lhs: Value, rhs: Value, name: str = "") -> Value:
        """Signed remainder (the sign of `lhs`)."""
        return self._binop("srem", lhs, rhs, name)

    def shl(self, lhs: Value, rhs: Value, name: str = "", *, nsw: bool = False, nuw: bool = False) -> Value:
        inst = self._binop("shl", lhs, rhs, name)
        return _flagged(inst, nsw=nsw, nuw=nuw) if nsw or nuw else inst

    def lshr(self, lhs: Value, rhs: Value, name: str = "", *, exact: bool = False) -> Value:
        """Logical (zero-filling) right shift; `exact` promises only zero bits are shifted out."""
        inst = self._binop("lshr", lhs, rhs, name)
        return _flagged(inst, exact=exact) if exact else inst

    def ashr(self, lhs: Value, rhs: Value, name: str = "", *, exact: bool = False) -> Value:
        """Arithmetic (sign-filling) right shift."""
        inst = self._binop("ashr", lhs, rhs, name)
        return _flagged(inst, exact=exact) if exact else inst

    def and_(self, lhs: Value, rhs: Value, name: str = "") -> Value:
        return self._binop("and", lhs, rhs, name)

    def or_(self, lhs: Value, rhs: Value, name: str = "", *, disjoint: bool = False) -> Value:
        """Bitwise or; `disjoint` promises no bit is set in both operands."""
        inst = self._binop("or", lhs, rhs, name)
        return _flagged(inst, disjoint=disjoint) if disjoint else inst

    def xor(self, lhs: Value, rhs: Value, name: str = "") -> Value:
        return self._binop("xor", lhs, rhs, name)

    def fadd(self, lhs: Value, rhs: Value, name: str = "", *, fast_math=None) -> Value:
        """Floating-point `lhs + rhs`; `fast_math` names the flags to set (e.g. {"contract"} or "fast")."""
        return _flagged(self._binop("fadd", lhs, rhs, name), fast_math)

    def fsub(self, lhs: Value, rhs: Value, name: str = "", *, fast_math=None) -> Value:
        return _flagged(self._binop("fsub", lhs, rhs, name), fast_math)

    def fmul(self, lhs: Value, rhs: Value, name: str = "", *, fast_math=None) -> Value:
        return _flagged(self._binop("fmul", lhs, rhs, name), fast_math)

    def fdiv(self, lhs: Value, rhs: Value, name: str = "", *, fast_math=None) -> Value:
        return _flagged(self._binop("fdiv", lhs, rhs, name), fast_math)

    def frem(self, lhs: Value, rhs: Value, name: str = "", *, fast_math=None) -> Value:
        return _flagged(self._binop("frem", lhs, rhs, name), fast_math)

    # -- unary operations ----------------------------------------------------------------
    def fneg(self, value: Value, name: str = "", *, fast_math=None) -> Value:
        self._use("fneg", value)
        require("fneg", value, _FP, "floating-point")
        return _flagged(self._new(lib.LLVMBuildFNeg(self, value, name.encode())), fast_math)

    def neg(self, value: Value, name: str = "", *, nsw: bool = False) -> Value:
        """Integer `0 - value`."""
        self._use("neg", value)
        require("neg", value, _INT, "integer")
        build = lib.LLVMBuildNSWNeg if nsw else lib.LLVMBuildNeg
        return self._new(build(self, value, name.encode()))

    def not_(self, value: Value, name: str = "") -> Value:
        """Bitwise complement (`xor value, -1`)."""
        self._use("not", value)
        require("not", value, _INT, "integer")
        return self._new(lib.LLVMBuildNot(self, value, name.encode()))

    def freeze(self, value: Value, name: str = "") -> Value:
        """`value`, with undef and poison replaced by one arbitrary fixed value."""
        self._use("freeze", value)
        return self._new(lib.LLVMBuildFreeze(self, value, name.encode()))

    # -- casts ---------------------------------------------------------------------------
    def cast(self, op: "str | int", value: Value, ty: Type, name: str = "", *, fast_math=None, **flags) -> Value:
        """Convert `value` to `ty` by the cast `op` (its IR name, e.g. "sitofp", or an LLVMOpcode);
        `flags` are nneg (zext, uitofp) and nsw / nuw (trunc)."""
        if isinstance(op, int) and op in _CAST_NAMES:
            op = _CAST_NAMES[op]
        if op not in CAST_OPERATIONS:
            raise ValueError(f"unknown cast {op!r}; use one of {', '.join(CAST_OPERATIONS)}")
        return _flagged(self._cast(op, value, ty, name), fast_math, **flags)

    def _cast(self, op: str, value: Value, ty: Type, name: str) -> Value:
        self._use(op, value, ty)
        check_cast(op, value, ty)
        return self._new(lib.LLVMBuildCast(self, CAST_OPERATIONS[op], value, ty, name.encode()))

    def trunc(self, value: Value, ty: Type, name: str = "", *, nsw: bool = False, nuw: bool = False) -> Value:
        """Keep the low bits; `nsw` / `nuw` promise the dropped bits are sign / zero copies."""
        inst = self._cast("trunc", value, ty, name)
        return _flagged(inst, nsw=nsw, nuw=nuw) if nsw or nuw else inst

    def zext(self, value: Value, ty: Type, name: str = "", *, nneg: bool = False) -> Value:
        """Zero-extend; `nneg` promises the operand is non-negative."""
        inst = self._cast("zext", value, ty, name)
        return _flagged(inst, nneg=nneg) if nneg else inst

    def sext(self, value: Value, ty: Type, name: str = "") -> Value:
        return self._cast("sext", value, ty, name)

    def fptrunc(self, value: Value, ty: Type, name: str = "", *, fast_math=None) -> Value:
        return _flagged(self._cast("fptrunc", value, ty, name), fast_math)

    def fpext(self, value: Value, ty: Type, name: str = "", *, fast_math=None) -> Value:
        return _flagged(self._cast("fpext", value, ty, name), fast_math)

    def fptoui(self, value: Value, ty: Type, name: str = "") -> Value:
        return self._cast("fptoui", value, ty, name)

    def fptosi(self, value: Value, ty: Type, name: str = "") -> Value:
        return self._cast("fptosi", value, ty, name)

    def uitofp(self, value: Value, ty: Type, name: str = "", *, nneg: bool = False) -> Value:
        inst = self._cast("uitofp", value, ty, name)
        return _flagged(inst, nneg=nneg) if nneg else inst

    def sitofp(self, value: Value, ty: Type, name: str = "") -> Value:
        return self._cast("sitofp", value, ty, name)

    def ptrtoint(self, value: Value, ty: Type, name: str = "") -> Value:
        return self._cast("ptrtoint", value, ty, name)

    def inttoptr(self, value: Value, ty: Type, name: str = "") -> Value:
        return self._cast("inttoptr", value, ty, name)

    def bitcast(self, value: Value, ty: Type, name: str = "") -> Value:
        """Reinterpret the bits as another type of the same size."""
        return self._cast("bitcast", value, ty, name)

    def addrspacecast(self, value: Value, ty: Type, name: str = "") -> Value:
        return self._cast("addrspacecast", value, ty, name)

    # -- comparisons and selection -------------------------------------------------------
    def icmp(self, predicate: str, lhs: Value, rhs: Value, name: str = "") -> Value:
        """Compare integers or pointers: predicate "eq", "ne", "slt", "ult", ... (ICMP_PREDICATES)."""
        self._use("icmp", lhs, rhs)
        same_type("icmp", lhs, rhs)
        if predicate not in ICMP_PREDICATES:
            raise ValueError(f"unknown icmp predicate {predicate!r}; use one of {sorted(ICMP_PREDICATES)}")
        require("icmp", lhs, (INT, PTR), "integer or pointer")
        return self._new(lib.LLVMBuildICmp(self, ICMP_PREDICATES[predicate], lhs, rhs, name.encode()))

    def fcmp(self, predicate: str, lhs: Value, rhs: Value, name: str = "", *, fast_math=None) -> Value:
        """Compare floating-point values: predicate "olt", "une", "ord", ... (FCMP_PREDICATES)."""
        self._use("fcmp", lhs, rhs)
        same_type("fcmp", lhs, rhs)
        if predicate not in FCMP_PREDICATES:
            raise ValueError(f"unknown fcmp predicate {predicate!r}; use one of {sorted(FCMP_PREDICATES)}")
        require("fcmp", lhs, _FP, "floating-point")
        return _flagged(self._new(lib.LLVMBuildFCmp(self, FCMP_PREDICATES[predicate], lhs, rhs, name.encode())),
                        fast_math)

    def select(self, cond: Value, then: Value, otherwise: Value, name: str = "", *, fast_math=None) -> Value:
        """`cond ? then : otherwise` (elementwise for a vector of i1)."""
        self._use("select", cond, then, otherwise)
        same_type("select", then, otherwise)
        require_condition("select", cond)
        return _flagged(self._new(lib.LLVMBuildSelect(self, cond, then, otherwise, name.encode())), fast_math)

    # -- memory --------------------------------------------------------------------------
    def alloca(self, ty: Type, name: str = "", *, size: Value | None = None, align: int | None = None) -> AllocaInst:
        """A stack slot for `ty` (or for `size` of them), in the current function's frame."""
        if size is None:
            self._use("alloca", ty)
            inst = self._new(lib.LLVMBuildAlloca(self, ty, name.encode()))
        else:
            self._use("alloca", ty, size)
            require("alloca", size, _INT, "integer")
            inst = self._new(lib.LLVMBuildArrayAlloca(self, ty, size, name.encode()))
        if align:
            inst.alignment = align
        return inst

    def load(self, ty: Type, ptr: Value, name: str = "", *, align: int | None = None, volatile: bool = False,
             ordering: str | None = None) -> LoadInst:
        """Read a `ty` from `ptr`; `ordering` makes the load atomic ("monotonic", "acquire", ...)."""
        self._use("load", ty, ptr)
        require_pointer("load", ptr)
        inst = self._new(lib.LLVMBuildLoad2(self, ty, ptr, name.encode()))
        return self._access(inst, align, volatile, ordering)

    def store(self, value: Value, ptr: Value, *, align: int | None = None, volatile: bool = False,
              ordering: str | None = None) -> StoreInst:
        """Write `value` to `ptr`; `ordering` makes the store atomic ("monotonic", "release", ...)."""
        self._use("store", value, ptr)
        require_pointer("store", ptr)
        inst = self._new(lib.LLVMBuildStore(self, value, ptr))
        return self._access(inst, align, volatile, ordering)

    @staticmethod
    def _access(inst, align, volatile, ordering):
        if align:
            lib.LLVMSetAlignment(inst, check_alignment(align))
        if volatile:
            lib.LLVMSetVolatile(inst, 1)
        if ordering is not None:
            lib.LLVMSetOrdering(inst, ordering_code(ordering))
        return inst

    def gep(self, ty: Type, ptr: Value, indices, name: str = "", *, inbounds: bool = True, no_wrap=None) -> Value:
        """The address of element `indices` of a `ty` at `ptr` (`getelementptr`); `no_wrap`, if
        given, names its flags ("inbounds", "nusw", "nuw") instead of `inbounds`. A vector of
        pointers or of indices gives a vector of addresses."""
        idx = list(indices)
        self._use("gep", ty, ptr, *idx)
        require_pointer("gep", ptr, vector=True)
        for i in idx:
            require("gep index", i, _INT, "integer")
        name_ = name.encode()
        if no_wrap is not None:
            return self._new(lib.LLVMBuildGEPWithNoWrapFlags(self, ty, ptr, _values(idx), len(idx), name_,
                                                             gep_no_wrap_bits(no_wrap)))
        fn = lib.LLVMBuildInBoundsGEP2 if inbounds else lib.LLVMBuildGEP2
        return self._new(fn(self, ty, ptr, _values(idx), len(idx), name_))

    def struct_gep(self, ty: Type, ptr: Value, index: int, name: str = "") -> Value:
        self._use("struct_gep", ty, ptr)
        return self._new(lib.LLVMBuildStructGEP2(self, ty, ptr, index, name.encode()))

    def extract_value(self, agg: Value, index: int, name: str = "") -> Value:
        self._use("extract_value", agg)
        return self._new(lib.LLVMBuildExtractValue(self, agg, index, name.encode()))

    def insert_value(self, agg: Value, value: Value, index: int, name: str = "") -> Value:
        self._use("insert_value", agg, value)
        return self._new(lib.LLVMBuildInsertValue(self, agg, value, index, name.encode()))

    def extract_element(self, vec: Value, index: Value, name: str = "") -> Value:
        self._use("extract_element", vec, index)
        return self._new(lib.LLVMBuildExtractElement(self, vec, index, name.encode()))

    def insert_element(self, vec: Value, value: Value, index: Value, name: str = "") -> Value:
        self._use("insert_element", vec, value, index)
        return self._new(lib.LLVMBuildInsertElement(self, vec, value, index, name.encode()))

    def shuffle_vector(self, v1: Value, v2: Value, mask: Value, name: str = "") -> Value:
        """`shufflevector v1, v2, mask`: `mask` a constant vector of i32 lane numbers (poison for any)."""
        self._use("shuffle_vector", v1, v2, mask)
        return self._new(lib.LLVMBuildShuffleVector(self, v1, v2, mask, name.encode()))

    # -- atomics -------------------------------------------------------------------------
    def atomic_rmw(self, op: "str | int", ptr: Value, value: Value, name: str = "", *,
                   ordering: "str | int" = "monotonic", single_thread: bool = False, volatile: bool = False,
                   align: int | None = None) -> AtomicRMWInst:
        """`atomicrmw op ptr, value`: the old value; `op` is an ATOMIC_RMW_OPERATIONS name
        ("add", "fadd", "xchg", "umax", ...) or its LLVMAtomicRMWBinOp code."""
        code, order = rmw_code(op), ordering_code(ordering)
        if order in (capi.LLVMAtomicOrderingNotAtomic, capi.LLVMAtomicOrderingUnordered):
            raise ValueError(f"atomicrmw needs at least monotonic ordering, not {ordering_name(order)!r}")
        self._use("atomic_rmw", ptr, value)
        require_pointer("atomic_rmw", ptr)
        inst = self._new(lib.LLVMBuildAtomicRMW(self, code, ptr, value, order, int(bool(single_thread))))
        if name:
            inst.name = name
        return self._access(inst, align, volatile, None)

    def compare_exchange_loop(self, fn, pointer, ty: Type, update, *, ordering: str = "monotonic",
                              align: int | None = None, scope: int | None = None, done=None, name: str = "atomic"):
        """Atomically replace the `ty` at `pointer` by `update(b, old)` and return the old value: a loop that
        computes the new value from the one last seen and exchanges it with cmpxchg (on the bits, for
        floats) until no other work item changed the element in between.

        Emitted at the end of the builder's block, which has no terminator yet; the loop exits to `done` (a
        new block of `fn` unless given), where the builder is left (before its first instruction). `update`
        may not add blocks. `ordering` is the exchange's; `scope` a sync scope id (`sync_scope_id`) for the load and exchange,
        system-wide if None.
        """
        llctx = ty.context
        bits = ty if kind_of(ty) == INT else llctx.int_type(FP_BITS[kind_of(ty)])
        b = self
        before = b.block
        first = b.load(bits, pointer, f"{name}.first", align=align, ordering="monotonic")
        loop = fn.append_block(f"{name}.loop")
        done = done if done is not None else fn.append_block(f"{name}.done")
        loop.move_after(before)
        b.br(loop)
        b.position_at_end(loop)
        seen = b.phi(bits, [(first, before)], f"{name}.seen")
        old = seen if bits == ty else b.bitcast(seen, ty, f"{name}.old")
        new = update(b, old)
        pair = b.cmpxchg(pointer, seen, new if bits == ty else b.bitcast(new, bits), success=ordering, align=align)
        if scope is not None:
            first.sync_scope_id = pair.sync_scope_id = scope
        seen.add_incoming(b.extract_value(pair, 0), b.block)
        b.cond_br(b.extract_value(pair, 1), done, loop)
        first_inst = done.instructions.first
        if first_inst is None:
            b.position_at_end(done)
        else:
            b.position_before(first_inst)
        return old

    def cmpxchg(self, ptr: Value, compare: Value, new_value: Value, name: str = "", *,
                success: str = "seq_cst", failure: str | None = None, weak: bool = False,
                single_thread: bool = False, volatile: bool = False,
                align: int | None = None) -> AtomicCmpXchgInst:
        """`cmpxchg ptr, compare, new_value`: `{old value, i1 success}`. `failure` defaults to the
        strongest ordering allowed for `success` (acquire for acq_rel, monotonic for release)."""
        if failure is None:
            failure = {"acq_rel": "acquire", "release": "monotonic"}.get(success, success)
        good, bad = ordering_code(success), ordering_code(failure)
        for which, order in (("success", good), ("failure", bad)):
            if order in (capi.LLVMAtomicOrderingNotAtomic, capi.LLVMAtomicOrderingUnordered):
                raise ValueError(f"cmpxchg needs at least monotonic {which} ordering, not {ordering_name(order)!r}")
        self._use("cmpxchg", ptr, compare, new_value)
        require_pointer("cmpxchg", ptr)
        same_type("cmpxchg", compare, new_value)
        inst = self._new(lib.LLVMBuildAtomicCmpXchg(self, ptr, compare, new_value, good, bad,
                                                    int(bool(single_thread))))
        if weak:
            lib.LLVMSetWeak(inst, 1)
        if name:
            inst.name = name
        return self._access(inst, align, volatile, None)

    def fence(self, ordering: str = "seq_cst", name: str = "", *, single_thread: bool = False) -> FenceInst:
        """A memory fence: "acquire", "release", "acq_rel" or "seq_cst"."""
        if ordering not in _FENCE_ORDERINGS:
            raise ValueError(f"a fence orders as one of {', '.join(_FENCE_ORDERINGS)}, not {ordering!r}")
        return self._new(lib.LLVMBuildFence(self, ordering_code(ordering), int(bool(single_thread)), name.encode()))

    # -- calls and control flow ----------------------------------------------------------
    def call(self, fn: Value, args=(), name: str = "", *, fnty=None, fast_math=None,
             tail: bool = False) -> CallInst:
        """Call `fn` (a Function, or any pointer when `fnty` is given); `fast_math` for a call
        returning floating point (e.g. of an `llvm.` math intrinsic)."""
        from .globals import Function
        if fnty is None:
            if not isinstance(fn, Function):
                raise TypeError("calling a non-function pointer needs fnty=")
            fnty = fn.function_type
        args = list(args)
        self._use("call", fn, fnty, *args)
        params = fnty.params
        if len(args) < len(params) or (len(args) > len(params) and not fnty.is_vararg):
            at_least = "at least " if fnty.is_vararg else ""
            raise TypeError(f"call: {len(args)} argument(s) given, the callee takes {at_least}{len(params)}")
        for i, (arg, ty) in enumerate(zip(args, params)):
            if arg.type != ty:
                raise TypeError(f"call: argument {i} has type {arg.type}, the callee expects {ty}")
        if fnty.return_type.kind == capi.LLVMVoidTypeKind:
            name = ""
        inst = self._new(lib.LLVMBuildCall2(self, fnty, fn, _values(args), len(args), name.encode()))
        if isinstance(fn, Function):
            # A direct call takes its callee's convention: the optimizer turns internal functions
            # fastcc, and a later call made with the default one would be undefined behaviour.
            lib.LLVMSetInstructionCallConv(inst, lib.LLVMGetFunctionCallConv(fn))
        if tail:
            lib.LLVMSetTailCall(inst, 1)
        if fast_math is not None and not lib.LLVMCanValueUseFastMathFlags(inst):
            inst.erase()
            raise TypeError(f"call: a call returning {fnty.return_type} cannot carry fast-math flags")
        return _flagged(inst, fast_math)

    def ret(self, value: Value | None = None) -> Value:
        if value is not None:
            self._use("ret", value)
        return self._new(lib.LLVMBuildRetVoid(self) if value is None else lib.LLVMBuildRet(self, value))

    def br(self, dest: BasicBlock) -> Value:
        self._use("br", dest)
        return self._new(lib.LLVMBuildBr(self, dest))

    def cond_br(self, cond: Value, then: BasicBlock, otherwise: BasicBlock) -> Value:
        self._use("cond_br", cond, then, otherwise)
        return self._new(lib.LLVMBuildCondBr(self, cond, then, otherwise))

    def switch(self, value: Value, default: BasicBlock, cases=()) -> Value:
        cases = list(cases)
        self._use("switch", value, default, *(v for case in cases for v in case))
        inst = self._new(lib.LLVMBuildSwitch(self, value, default, len(cases)))
        for const, block in cases:
            lib.LLVMAddCase(inst, const, block)
        return inst

    def unreachable(self) -> Value:
        return self._new(lib.LLVMBuildUnreachable(self))

    def phi(self, ty: Type, incoming=(), name: str = "", *, fast_math=None) -> PHINode:
        """A phi of type `ty` with the (value, block) pairs of `incoming` (add more with
        `add_incoming`); place it at the start of a block."""
        incoming = list(incoming)
        self._use("phi", ty, *(v for pair in incoming for v in pair))
        for value, _ in incoming:
            if value.type != ty:
                raise TypeError(f"phi: an incoming value of type {value.type} for a phi of type {ty}")
        node = self._new(lib.LLVMBuildPhi(self, ty, name.encode()))
        for value, block in incoming:
            node.add_incoming(value, block)
        return _flagged(node, fast_math)
