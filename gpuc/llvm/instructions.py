"""Instruction classes: the operands and flags a transformation reads and sets, per kind of instruction.

`Value.from_ref` picks the class registered for an instruction's opcode.  Flags are spelled as
in the IR ("nsw", "contract", "seq_cst", "fadd", "olt"); a flag that an opcode cannot carry reads
as False and raises TypeError when set.  Fast-math flags are on `Instruction.fast_math`.
"""

from __future__ import annotations

import ctypes

from . import capi
from ._base import check_link, erase_addresses
from .capi import address_of, lib
from .flags import (gep_no_wrap_bits, gep_no_wrap_names, ordering_code, ordering_name, predicate_name, rmw_code,
                    rmw_name)
from .typecheck import raw, type_of
from .types import Type
from .values import BasicBlock, Instruction, Value, opcode_name


def _operand(index: int, doc: str) -> property:
    """A property for operand `index`; setting it checks the link and keeps the operand's type."""
    def get(self) -> Value:
        return Value.from_ref(lib.LLVMGetOperand(self, index), self._scope)

    def set(self, value: Value) -> None:
        check_link(self._scope, value, f"setting {doc}")
        if type_of(value) != raw.LLVMTypeOf(lib.LLVMGetOperand(self, index)):
            raise TypeError(f"{self.opcode_name}: {doc} must stay of type {get(self).type}, not {value.type}")
        lib.LLVMSetOperand(self, index, value)

    return property(get, set, doc=doc)


def _flag(flag: str, opcodes: frozenset, getter: str, setter: str) -> property:
    """A bool property for an IR flag that only the instructions with `opcodes` carry."""
    def get(self) -> bool:
        return lib.LLVMGetInstructionOpcode(self) in opcodes and bool(getattr(lib, getter)(self))

    def set(self, on: bool) -> None:
        if lib.LLVMGetInstructionOpcode(self) not in opcodes:
            carriers = ", ".join(sorted(opcode_name(op) for op in opcodes))
            raise TypeError(f"{self.opcode_name} has no {flag!r} flag (only {carriers} do)")
        getattr(lib, setter)(self, int(bool(on)))

    return property(get, set, doc=f"the {flag!r} flag (settable on {', '.join(sorted(map(opcode_name, opcodes)))})")


_WRAPPING = frozenset((capi.LLVMAdd, capi.LLVMSub, capi.LLVMMul, capi.LLVMShl))
_EXACT = frozenset((capi.LLVMUDiv, capi.LLVMSDiv, capi.LLVMLShr, capi.LLVMAShr))


class BinaryOperator(Instruction):
    """`lhs <op> rhs`: integer and floating-point arithmetic, shifts and bitwise logic."""

    __slots__ = ()
    opcodes = (capi.LLVMAdd, capi.LLVMFAdd, capi.LLVMSub, capi.LLVMFSub, capi.LLVMMul, capi.LLVMFMul,
               capi.LLVMUDiv, capi.LLVMSDiv, capi.LLVMFDiv, capi.LLVMURem, capi.LLVMSRem, capi.LLVMFRem,
               capi.LLVMShl, capi.LLVMLShr, capi.LLVMAShr, capi.LLVMAnd, capi.LLVMOr, capi.LLVMXor)
    lhs = _operand(0, "the left operand")
    rhs = _operand(1, "the right operand")
    nsw = _flag("nsw", _WRAPPING, "LLVMGetNSW", "LLVMSetNSW")
    nuw = _flag("nuw", _WRAPPING, "LLVMGetNUW", "LLVMSetNUW")
    exact = _flag("exact", _EXACT, "LLVMGetExact", "LLVMSetExact")
    disjoint = _flag("disjoint", frozenset((capi.LLVMOr,)), "LLVMGetIsDisjoint", "LLVMSetIsDisjoint")


class UnaryOperator(Instruction):
    """`fneg`."""

    __slots__ = ()
    opcodes = (capi.LLVMFNeg,)
    operand = _operand(0, "the operand")


class CastInst(Instruction):
    """A conversion of `value` from `source_type` to `destination_type` (the instruction's type)."""

    __slots__ = ()
    opcodes = (capi.LLVMTrunc, capi.LLVMZExt, capi.LLVMSExt, capi.LLVMFPToUI, capi.LLVMFPToSI,
               capi.LLVMUIToFP, capi.LLVMSIToFP, capi.LLVMFPTrunc, capi.LLVMFPExt, capi.LLVMPtrToInt,
               capi.LLVMPtrToAddr, capi.LLVMIntToPtr, capi.LLVMBitCast, capi.LLVMAddrSpaceCast)
    value = _operand(0, "the converted value")
    nneg = _flag("nneg", frozenset((capi.LLVMZExt, capi.LLVMUIToFP)), "LLVMGetNNeg", "LLVMSetNNeg")
    nsw = _flag("nsw", frozenset((capi.LLVMTrunc,)), "LLVMGetNSW", "LLVMSetNSW")
    nuw = _flag("nuw", frozenset((capi.LLVMTrunc,)), "LLVMGetNUW", "LLVMSetNUW")

    @property
    def source_type(self) -> Type:
        return Type.from_ref(lib.LLVMTypeOf(lib.LLVMGetOperand(self, 0)), self._scope)

    @property
    def destination_type(self) -> Type:
        return self.type


class AggregateInst(Instruction):
    """`extractvalue` / `insertvalue`: `indices` is the constant path into the aggregate."""

    __slots__ = ()
    opcodes = (capi.LLVMExtractValue, capi.LLVMInsertValue)

    @property
    def indices(self) -> list[int]:
        n = lib.LLVMGetNumIndices(self)
        raw_indices = lib.LLVMGetIndices(self)
        return [raw_indices[k] for k in range(n)]


class ShuffleVectorInst(Instruction):
    """`shufflevector a, b, mask`: `mask` is the source lane of each result lane (None: poison)."""

    __slots__ = ()
    opcodes = (capi.LLVMShuffleVector,)

    @property
    def mask(self) -> list[int | None]:
        lanes = [lib.LLVMGetMaskValue(self, k) for k in range(lib.LLVMGetNumMaskElements(self))]
        return [None if lane < 0 else lane for lane in lanes]


class FreezeInst(Instruction):
    __slots__ = ()
    opcodes = (capi.LLVMFreeze,)
    value = _operand(0, "the frozen value")


class SelectInst(Instruction):
    """`select condition, true_value, false_value`."""

    __slots__ = ()
    opcodes = (capi.LLVMSelect,)
    condition = _operand(0, "the condition")
    true_value = _operand(1, "the value if true")
    false_value = _operand(2, "the value if false")


class CompareInst(Instruction):
    """`icmp` / `fcmp`. LLVM-C cannot change a compare's predicate: build a new compare with
    `Builder.icmp` / `fcmp` before this one, `replace_all_uses_with` it, and `erase()` this one."""

    __slots__ = ()
    opcodes = (capi.LLVMICmp, capi.LLVMFCmp)
    lhs = _operand(0, "the left operand")
    rhs = _operand(1, "the right operand")

    @property
    def is_float(self) -> bool:
        return lib.LLVMGetInstructionOpcode(self) == capi.LLVMFCmp

    @property
    def predicate_code(self) -> int:
        """The LLVMIntPredicate / LLVMRealPredicate number."""
        if self.is_float:
            return lib.LLVMGetFCmpPredicate(self)
        return lib.LLVMGetICmpPredicate(self)

    @property
    def predicate(self) -> str:
        """The predicate as the IR spells it: "slt", "eq", "olt", "une", ..."""
        is_float = self.is_float
        return predicate_name(lib.LLVMGetFCmpPredicate(self) if is_float else lib.LLVMGetICmpPredicate(self),
                              is_float)


class _Scoped:
    __slots__ = ()

    @property
    def single_thread(self) -> bool:
        """True for `syncscope("singlethread")`: ordered only against the same thread (signal handlers)."""
        return bool(lib.LLVMIsAtomicSingleThread(self))

    @single_thread.setter
    def single_thread(self, on: bool) -> None:
        lib.LLVMSetAtomicSingleThread(self, int(bool(on)))

    @property
    def sync_scope_id(self) -> int:
        """The context's number for the `syncscope("...")` (0 single thread, 1 the whole system), to copy
        the scope to another atomic instruction."""
        return lib.LLVMGetAtomicSyncScopeID(self)

    @sync_scope_id.setter
    def sync_scope_id(self, scope: int) -> None:
        lib.LLVMSetAtomicSyncScopeID(self, scope)


class _Access(_Scoped):
    """Volatility and alignment, common to memory accesses."""

    __slots__ = ()

    @property
    def is_volatile(self) -> bool:
        return bool(lib.LLVMGetVolatile(self))

    @is_volatile.setter
    def is_volatile(self, on: bool) -> None:
        lib.LLVMSetVolatile(self, int(bool(on)))

    @property
    def alignment(self) -> int:
        return lib.LLVMGetAlignment(self)

    @alignment.setter
    def alignment(self, align: int) -> None:
        lib.LLVMSetAlignment(self, check_alignment(align))


def check_alignment(align: int) -> int:
    align = int(align)
    if align < 1 or align & (align - 1) or align > 1 << 32:
        raise ValueError(f"alignment must be a power of two between 1 and 2**32, not {align}")
    return align


class _Ordering:
    __slots__ = ()

    @property
    def ordering(self) -> str | None:
        """The atomic ordering ("monotonic", "seq_cst", ...); None for a plain (non-atomic) access."""
        return ordering_name(lib.LLVMGetOrdering(self))

    @ordering.setter
    def ordering(self, ordering: str | None) -> None:
        lib.LLVMSetOrdering(self, ordering_code(ordering))


class MemoryInst(_Access, _Ordering, Instruction):
    """A `load` or `store` (see LoadInst, StoreInst)."""

    __slots__ = ()


class LoadInst(MemoryInst):
    __slots__ = ()
    opcodes = (capi.LLVMLoad,)
    pointer = _operand(0, "the address")


class StoreInst(MemoryInst):
    __slots__ = ()
    opcodes = (capi.LLVMStore,)
    value = _operand(0, "the stored value")
    pointer = _operand(1, "the address")


class FenceInst(_Scoped, _Ordering, Instruction):
    __slots__ = ()
    opcodes = (capi.LLVMFence,)


class AtomicRMWInst(_Access, _Ordering, Instruction):
    """`atomicrmw <operation> pointer, value <ordering>`."""

    __slots__ = ()
    opcodes = (capi.LLVMAtomicRMW,)
    pointer = _operand(0, "the address")
    value = _operand(1, "the operand")

    @property
    def operation(self) -> str:
        """The operation as the IR spells it: "add", "fadd", "xchg", "umax", ..."""
        return rmw_name(lib.LLVMGetAtomicRMWBinOp(self))

    @operation.setter
    def operation(self, operation: str) -> None:
        lib.LLVMSetAtomicRMWBinOp(self, rmw_code(operation))


class AtomicCmpXchgInst(_Access, Instruction):
    """`cmpxchg [weak] pointer, compare, new_value <success> <failure>`, giving `{ value, i1 }`."""

    __slots__ = ()
    opcodes = (capi.LLVMAtomicCmpXchg,)
    pointer = _operand(0, "the address")
    compare = _operand(1, "the expected value")
    new_value = _operand(2, "the new value")

    @property
    def success_ordering(self) -> str:
        return ordering_name(lib.LLVMGetCmpXchgSuccessOrdering(self))

    @success_ordering.setter
    def success_ordering(self, ordering: str) -> None:
        lib.LLVMSetCmpXchgSuccessOrdering(self, ordering_code(ordering))

    @property
    def failure_ordering(self) -> str:
        return ordering_name(lib.LLVMGetCmpXchgFailureOrdering(self))

    @failure_ordering.setter
    def failure_ordering(self, ordering: str) -> None:
        lib.LLVMSetCmpXchgFailureOrdering(self, ordering_code(ordering))

    @property
    def weak(self) -> bool:
        return bool(lib.LLVMGetWeak(self))

    @weak.setter
    def weak(self, on: bool) -> None:
        lib.LLVMSetWeak(self, int(bool(on)))


class AllocaInst(Instruction):
    __slots__ = ()
    opcodes = (capi.LLVMAlloca,)
    size = _operand(0, "the number of elements")

    @property
    def allocated_type(self) -> Type:
        return Type.from_ref(lib.LLVMGetAllocatedType(self), self._scope)

    @property
    def alignment(self) -> int:
        return lib.LLVMGetAlignment(self)

    @alignment.setter
    def alignment(self, align: int) -> None:
        lib.LLVMSetAlignment(self, check_alignment(align))


class GetElementPtrInst(Instruction):
    """`getelementptr [flags] source_element_type, pointer, indices...`."""

    __slots__ = ()
    opcodes = (capi.LLVMGetElementPtr,)
    pointer = _operand(0, "the base address")

    @property
    def source_element_type(self) -> Type:
        return Type.from_ref(lib.LLVMGetGEPSourceElementType(self), self._scope)

    @property
    def indices(self) -> list[Value]:
        scope = self._scope
        return [Value.from_ref(lib.LLVMGetOperand(self, i), scope) for i in range(1, lib.LLVMGetNumOperands(self))]

    @property
    def inbounds(self) -> bool:
        return bool(lib.LLVMIsInBounds(self))

    @inbounds.setter
    def inbounds(self, on: bool) -> None:
        lib.LLVMSetIsInBounds(self, int(bool(on)))

    @property
    def no_wrap(self) -> frozenset[str]:
        """The flags among "inbounds", "nusw", "nuw" (inbounds implies nusw)."""
        return gep_no_wrap_names(lib.LLVMGEPGetNoWrapFlags(self))

    @no_wrap.setter
    def no_wrap(self, flags) -> None:
        lib.LLVMGEPSetNoWrapFlags(self, gep_no_wrap_bits(flags))


class PHINode(Instruction):
    """`phi`: `incoming` is its (value, block) pairs, in order."""

    __slots__ = ()
    opcodes = (capi.LLVMPHI,)

    def add_incoming(self, value: Value, block: BasicBlock) -> None:
        check_link(self._scope, value, "PHINode.add_incoming")
        check_link(self._scope, block, "PHINode.add_incoming")
        if type_of(value) != type_of(self):
            raise TypeError(f"PHINode.add_incoming: value of type {value.type} for a phi of type {self.type}")
        n = lib.LLVMCountIncoming(self)
        old = erase_addresses(self)[1:] if n else []  # the operand uses, should they be reallocated
        first = lib.LLVMGetOperandUse(self, 0) if n else None
        vals = (capi.LLVMValueRef * 1)(value.ref)
        blocks = (capi.LLVMBasicBlockRef * 1)(block.ref)
        lib.LLVMAddIncoming(self, vals, blocks, 1)
        if n and address_of(lib.LLVMGetOperandUse(self, 0)) != address_of(first):
            self._scope.erase(old)  # growing moved the uses: views of the old ones are dead

    @property
    def incoming(self) -> list[tuple[Value, BasicBlock]]:
        scope = self._scope
        return [(Value.from_ref(lib.LLVMGetIncomingValue(self, i), scope),
                 BasicBlock(lib.LLVMGetIncomingBlock(self, i), scope)) for i in range(lib.LLVMCountIncoming(self))]

    @property
    def incoming_values(self) -> list[Value]:
        scope = self._scope
        return [Value.from_ref(lib.LLVMGetIncomingValue(self, i), scope) for i in range(lib.LLVMCountIncoming(self))]

    @property
    def incoming_blocks(self) -> list[BasicBlock]:
        scope = self._scope
        return [BasicBlock(lib.LLVMGetIncomingBlock(self, i), scope) for i in range(lib.LLVMCountIncoming(self))]

    def incoming_value_for(self, block: BasicBlock) -> Value:
        """The value flowing in from `block`; KeyError if the phi has no entry for it."""
        for value, source in self.incoming:
            if source == block:
                return value
        raise KeyError(f"the phi has no incoming value from block {block.name!r}")


class CallInst(Instruction):
    __slots__ = ()
    opcodes = (capi.LLVMCall,)

    @property
    def callee(self) -> Value:
        """The called operand: a Function for direct calls, any pointer value otherwise."""
        return Value.from_ref(lib.LLVMGetCalledValue(self), self._scope)

    @callee.setter
    def callee(self, fn: Value) -> None:
        self.operands[len(self.operands) - 1] = fn

    @property
    def called_function_type(self):
        return Type.from_ref(lib.LLVMGetCalledFunctionType(self), self._scope)

    @property
    def args(self) -> list[Value]:
        n = lib.LLVMGetNumArgOperands(self)
        return [Value.from_ref(lib.LLVMGetOperand(self, i), self._scope) for i in range(n)]

    @property
    def attributes(self):
        """Attributes of the call itself (see CallSiteAttributes)."""
        return _call_site_attributes(self, "function")

    @property
    def return_attributes(self):
        return _call_site_attributes(self, "return")

    def param_attributes(self, i: int):
        """Attributes of argument `i` at this call site (e.g. `zeroext` for an i1 argument)."""
        return _call_site_attributes(self, i)

    @property
    def intrinsic_id(self) -> int:
        """LLVM's id of the called intrinsic (the same for every overload); 0 if the callee is none."""
        return lib.LLVMGetIntrinsicID(lib.LLVMGetCalledValue(self))

    @property
    def intrinsic_name(self) -> str | None:
        """The called intrinsic's base name without overload suffixes ("llvm.fmuladd" for a call of
        @llvm.fmuladd.f64); None if the callee is not an intrinsic."""
        return intrinsic_name(self.intrinsic_id)

    @property
    def calling_convention(self) -> int:
        return lib.LLVMGetInstructionCallConv(self)

    @calling_convention.setter
    def calling_convention(self, cc: int) -> None:
        lib.LLVMSetInstructionCallConv(self, cc)

    @property
    def is_tail_call(self) -> bool:
        return bool(lib.LLVMIsTailCall(self))

    @is_tail_call.setter
    def is_tail_call(self, on: bool) -> None:
        lib.LLVMSetTailCall(self, int(bool(on)))


def intrinsic_id(name: str) -> int:
    """LLVM's id of the intrinsic `name` (a base name or an overloaded one); 0 if there is none."""
    data = name.encode()
    return lib.LLVMLookupIntrinsicID(data, len(data))


def intrinsic_name(iid: int) -> str | None:
    """The base name of intrinsic id `iid`; None for 0."""
    if not iid:
        return None
    size = ctypes.c_size_t()
    return lib.LLVMIntrinsicGetName(iid, ctypes.byref(size)).decode()


class BranchInst(Instruction):
    __slots__ = ()
    opcodes = (capi.LLVMBr,)

    @property
    def is_conditional(self) -> bool:
        return bool(lib.LLVMIsConditional(self))

    @property
    def condition(self) -> Value | None:
        return Value.from_ref(lib.LLVMGetCondition(self), self._scope) if self.is_conditional else None

    @property
    def successors(self) -> list[BasicBlock]:
        return [BasicBlock(lib.LLVMGetSuccessor(self, i), self._scope) for i in range(lib.LLVMGetNumSuccessors(self))]


class SwitchInst(Instruction):
    """`switch value, default [case, dest]...`: the case values are not operands (LLVM keeps them apart)."""

    __slots__ = ()
    opcodes = (capi.LLVMSwitch,)

    @property
    def condition(self) -> Value:
        return Value.from_ref(lib.LLVMGetOperand(self, 0), self._scope)

    @property
    def default(self) -> BasicBlock:
        return BasicBlock(lib.LLVMGetSuccessor(self, 0), self._scope)

    @property
    def cases(self) -> list[tuple[Value, BasicBlock]]:
        """(case value, destination) for each case, in order."""
        return [(Value.from_ref(lib.LLVMGetSwitchCaseValue(self, i), self._scope),
                 BasicBlock(lib.LLVMGetSuccessor(self, i), self._scope)) for i in range(1, lib.LLVMGetNumSuccessors(self))]



def _call_site_attributes(call: CallInst, where: "str | int"):
    """CallSiteAttributes of `call` for "function", "return" or argument number `where`."""
    from .globals import FUNCTION_INDEX, RETURN_INDEX, CallSiteAttributes  # globals builds on this module's classes
    index = FUNCTION_INDEX if where == "function" else RETURN_INDEX if where == "return" else where + 1
    return CallSiteAttributes(call, index)
