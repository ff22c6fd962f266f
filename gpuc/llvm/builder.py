"""The IR builder: positioning, arithmetic, memory, casts, calls, control flow and phis."""

from __future__ import annotations

from . import capi
from ._base import Owner, check_link
from .capi import lib
from .types import Type
from .values import BasicBlock, Instruction, PHINode, Value

ICMP_PREDICATES = {
    "eq": capi.LLVMIntEQ, "ne": capi.LLVMIntNE,
    "ugt": capi.LLVMIntUGT, "uge": capi.LLVMIntUGE, "ult": capi.LLVMIntULT, "ule": capi.LLVMIntULE,
    "sgt": capi.LLVMIntSGT, "sge": capi.LLVMIntSGE, "slt": capi.LLVMIntSLT, "sle": capi.LLVMIntSLE,
}
FCMP_PREDICATES = {
    "false": capi.LLVMRealPredicateFalse, "true": capi.LLVMRealPredicateTrue,
    "oeq": capi.LLVMRealOEQ, "ogt": capi.LLVMRealOGT, "oge": capi.LLVMRealOGE, "olt": capi.LLVMRealOLT,
    "ole": capi.LLVMRealOLE, "one": capi.LLVMRealONE, "ord": capi.LLVMRealORD, "uno": capi.LLVMRealUNO,
    "ueq": capi.LLVMRealUEQ, "ugt": capi.LLVMRealUGT, "uge": capi.LLVMRealUGE, "ult": capi.LLVMRealULT,
    "ule": capi.LLVMRealULE, "une": capi.LLVMRealUNE,
}

# method name -> LLVM-C builder function, for the uniform (lhs, rhs, name) binary operations
_BINARY = {
    "add": "LLVMBuildAdd", "nsw_add": "LLVMBuildNSWAdd", "nuw_add": "LLVMBuildNUWAdd",
    "sub": "LLVMBuildSub", "nsw_sub": "LLVMBuildNSWSub", "mul": "LLVMBuildMul", "nsw_mul": "LLVMBuildNSWMul",
    "sdiv": "LLVMBuildSDiv", "udiv": "LLVMBuildUDiv", "exact_sdiv": "LLVMBuildExactSDiv",
    "srem": "LLVMBuildSRem", "urem": "LLVMBuildURem",
    "fadd": "LLVMBuildFAdd", "fsub": "LLVMBuildFSub", "fmul": "LLVMBuildFMul",
    "fdiv": "LLVMBuildFDiv", "frem": "LLVMBuildFRem",
    "shl": "LLVMBuildShl", "lshr": "LLVMBuildLShr", "ashr": "LLVMBuildAShr",
    "and_": "LLVMBuildAnd", "or_": "LLVMBuildOr", "xor": "LLVMBuildXor",
}
_UNARY = {"neg": "LLVMBuildNeg", "fneg": "LLVMBuildFNeg", "not_": "LLVMBuildNot", "freeze": "LLVMBuildFreeze"}
_CASTS = {
    "trunc": "LLVMBuildTrunc", "zext": "LLVMBuildZExt", "sext": "LLVMBuildSExt",
    "fptrunc": "LLVMBuildFPTrunc", "fpext": "LLVMBuildFPExt",
    "fptosi": "LLVMBuildFPToSI", "fptoui": "LLVMBuildFPToUI",
    "sitofp": "LLVMBuildSIToFP", "uitofp": "LLVMBuildUIToFP",
    "ptrtoint": "LLVMBuildPtrToInt", "inttoptr": "LLVMBuildIntToPtr",
    "bitcast": "LLVMBuildBitCast", "addrspacecast": "LLVMBuildAddrSpaceCast",
}


def _same_type(what: str, lhs: Value, rhs: Value) -> None:
    if lhs.type != rhs.type:
        raise TypeError(f"{what}: operand types differ ({lhs.type} vs {rhs.type})")


def _values(seq):
    """A C array of the value handles of `seq`."""
    return (capi.LLVMValueRef * len(seq))(*[v.ref for v in seq])


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

    # -- generic helpers -----------------------------------------------------------------
    def _binary(self, fn: str, lhs: Value, rhs: Value, name: str) -> Value:
        what = fn[9:].lower()
        self._use(what, lhs, rhs)
        _same_type(what, lhs, rhs)
        return self._new(getattr(lib, fn)(self, lhs, rhs, name.encode()))

    def _unary(self, fn: str, value: Value, name: str) -> Value:
        self._use(fn[9:].lower(), value)
        return self._new(getattr(lib, fn)(self, value, name.encode()))

    def _cast(self, fn: str, value: Value, ty: Type, name: str) -> Value:
        self._use(fn[9:].lower(), value, ty)
        return self._new(getattr(lib, fn)(self, value, ty, name.encode()))

    def __getattr__(self, attr: str):
        # Arithmetic, unary and cast methods are generated from the tables above.
        if attr in _BINARY:
            fn = _BINARY[attr]
            return lambda lhs, rhs, name="": self._binary(fn, lhs, rhs, name)
        if attr in _UNARY:
            fn = _UNARY[attr]
            return lambda value, name="": self._unary(fn, value, name)
        if attr in _CASTS:
            fn = _CASTS[attr]
            return lambda value, ty, name="": self._cast(fn, value, ty, name)
        raise AttributeError(attr)

    # -- comparisons and selection -------------------------------------------------------
    def icmp(self, predicate: str, lhs: Value, rhs: Value, name: str = "") -> Value:
        self._use("icmp", lhs, rhs)
        _same_type("icmp", lhs, rhs)
        if predicate not in ICMP_PREDICATES:
            raise ValueError(f"unknown icmp predicate {predicate!r}; use one of {sorted(ICMP_PREDICATES)}")
        return self._new(lib.LLVMBuildICmp(self, ICMP_PREDICATES[predicate], lhs, rhs, name.encode()))

    def fcmp(self, predicate: str, lhs: Value, rhs: Value, name: str = "") -> Value:
        self._use("fcmp", lhs, rhs)
        _same_type("fcmp", lhs, rhs)
        if predicate not in FCMP_PREDICATES:
            raise ValueError(f"unknown fcmp predicate {predicate!r}; use one of {sorted(FCMP_PREDICATES)}")
        return self._new(lib.LLVMBuildFCmp(self, FCMP_PREDICATES[predicate], lhs, rhs, name.encode()))

    def select(self, cond: Value, then: Value, otherwise: Value, name: str = "") -> Value:
        self._use("select", cond, then, otherwise)
        return self._new(lib.LLVMBuildSelect(self, cond, then, otherwise, name.encode()))

    # -- memory --------------------------------------------------------------------------
    def alloca(self, ty: Type, name: str = "") -> Value:
        self._use("alloca", ty)
        return self._new(lib.LLVMBuildAlloca(self, ty, name.encode()))

    def load(self, ty: Type, ptr: Value, name: str = "", *, align: int | None = None) -> Value:
        self._use("load", ty, ptr)
        inst = self._new(lib.LLVMBuildLoad2(self, ty, ptr, name.encode()))
        if align:
            lib.LLVMSetAlignment(inst, align)
        return inst

    def store(self, value: Value, ptr: Value, *, align: int | None = None) -> Value:
        self._use("store", value, ptr)
        inst = self._new(lib.LLVMBuildStore(self, value, ptr))
        if align:
            lib.LLVMSetAlignment(inst, align)
        return inst

    def gep(self, ty: Type, ptr: Value, indices, name: str = "", *, inbounds: bool = True) -> Value:
        idx = list(indices)
        self._use("gep", ty, ptr, *idx)
        fn = lib.LLVMBuildInBoundsGEP2 if inbounds else lib.LLVMBuildGEP2
        return self._new(fn(self, ty, ptr, _values(idx), len(idx), name.encode()))

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

    def atomic_rmw(self, op: int, ptr: Value, value: Value, *,
                   ordering: int = capi.LLVMAtomicOrderingMonotonic) -> Value:
        self._use("atomic_rmw", ptr, value)
        return self._new(lib.LLVMBuildAtomicRMW(self, op, ptr, value, ordering, 0))

    # -- calls and control flow ----------------------------------------------------------
    def call(self, fn: Value, args=(), name: str = "", *, fnty=None) -> Value:
        """Call `fn` (a Function, or any pointer when `fnty` is given)."""
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
        return self._new(lib.LLVMBuildCall2(self, fnty, fn, _values(args), len(args), name.encode()))

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

    def phi(self, ty: Type, incoming=(), name: str = "") -> PHINode:
        self._use("phi", ty)
        node = self._new(lib.LLVMBuildPhi(self, ty, name.encode()))
        for value, block in incoming:
            node.add_incoming(value, block)
        return node
