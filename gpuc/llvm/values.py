"""LLVM values as borrowed views: Value, Use, User, constants, basic blocks and the Instruction base.

Concrete classes come from registries keyed by value kind and, for instructions, by opcode
(`Value.from_ref`; the instruction classes are in instructions.py).  Editing contract: while iterating a use list (`value.uses`) or an
instruction list (`block.instructions`), erasing *the current item* is not allowed; iterate
over `list(...)` of the view instead.
"""

from __future__ import annotations

import ctypes
from typing import Iterator

from . import capi
from ._base import CONTEXT_KINDS, Handle, check_link, erase_addresses, module_scope
from .capi import bare, in_flight, lib
from .flags import fast_math_bits, fast_math_names, gep_no_wrap_names
from .types import Type


def _text(raw) -> str:
    return raw.decode("utf-8", "replace") if raw else ""


def _as_value_ref(v):
    return lib.LLVMBasicBlockAsValue(v) if isinstance(v, BasicBlock) else v.ref


class Value(Handle):
    """Any LLVM value. Equality and hashing are by identity of the underlying object."""

    __slots__ = ()
    _by_kind: dict[int, type["Value"]] = {}
    kinds: tuple[int, ...] = ()

    def __init_subclass__(cls, **kw) -> None:
        super().__init_subclass__(**kw)
        for kind in cls.__dict__.get("kinds", ()):
            Value._by_kind[kind] = cls

    @staticmethod
    def from_ref(ref, scope) -> "Value | BasicBlock":
        """The view of `ref`, reached from a view whose Scope is `scope`.

        Uniqued constants get the context's scope; globals, instructions, arguments and blocks
        their module's (found through LLVM when they were reached from a context-level view).
        """
        # `with scope:` inlined (every view is made here): `ref` is raw, so no other thread may
        # free it meanwhile, and the calls on it need no wrapper of their own.
        calls = in_flight.calls
        calls.append(scope)
        try:
            if scope.gen is None:
                raise scope.gone()
            kind = bare.LLVMGetValueKind(ref)
            if kind == capi.LLVMInstructionValueKind:
                cls = Instruction._by_opcode.get(bare.LLVMGetInstructionOpcode(ref), Instruction)
            elif kind in CONTEXT_KINDS:
                return Value._by_kind.get(kind, Value)(ref, scope.context)
            elif kind == capi.LLVMBasicBlockValueKind:
                if scope.context is scope:
                    scope = module_scope(ref, kind, scope)
                return BasicBlock(bare.LLVMValueAsBasicBlock(ref), scope)
            else:
                cls = Value._by_kind.get(kind, Value)
            if scope.context is scope:
                scope = module_scope(ref, kind, scope)
            return cls(ref, scope)
        finally:
            calls.pop()

    @property
    def value_kind(self) -> int:
        return lib.LLVMGetValueKind(self)

    @property
    def name(self) -> str:
        size = ctypes.c_size_t()
        return _text(lib.LLVMGetValueName2(self, ctypes.byref(size)))

    @name.setter
    def name(self, new: str) -> None:
        if new and lib.LLVMGetTypeKind(lib.LLVMTypeOf(self)) == capi.LLVMVoidTypeKind:
            raise ValueError(f"a value of type void cannot be named: {str(self).strip()!r}")
        data = new.encode()
        lib.LLVMSetValueName2(self, data, len(data))

    @property
    def type(self) -> Type:
        return Type.from_ref(lib.LLVMTypeOf(self), self._scope)

    @property
    def context(self):
        return self.type.context

    @property
    def uses(self) -> "UseList":
        return UseList(self)

    @property
    def users(self) -> list["User"]:
        return [u.user for u in self.uses]

    def replace_all_uses_with(self, new: "Value") -> None:
        """Make every user of this value use `new` (of the same type, module and context).

        Uniqued constants are shared by every module of the context: replace their uses one by
        one (`user.operands[i] = new`) instead.
        """
        check_link(self._scope, new, "replace_all_uses_with")
        if self._scope.is_context:
            raise ValueError(f"replace_all_uses_with: {str(self).strip()!r} is a constant shared by the whole "
                             "context; set the operands of its users instead")
        if new.type != self.type:
            raise TypeError(f"replace_all_uses_with: type {new.type} does not match {self.type}")
        if new == self:
            raise ValueError("replace_all_uses_with: a value cannot replace itself")
        lib.LLVMReplaceAllUsesWith(self, new)

    @property
    def is_constant(self) -> bool:
        return bool(lib.LLVMIsConstant(self))

    def __str__(self) -> str:
        return capi.take_message(ctypes.c_void_p(lib.LLVMPrintValueToString(self)))

    def __repr__(self) -> str:
        if not self.alive:
            return f"<{type(self).__name__} (dead)>"
        name = self.name
        if name:
            sigil = "@" if self.value_kind in _GLOBAL_KINDS else "%"
            return f"<{type(self).__name__} {sigil}{name}>"
        return f"<{type(self).__name__} {str(self).strip()[:60]}>"


_GLOBAL_KINDS = frozenset((capi.LLVMFunctionValueKind, capi.LLVMGlobalVariableValueKind,
                           capi.LLVMGlobalAliasValueKind, capi.LLVMGlobalIFuncValueKind))


class Use(Handle):
    """One use of a value: the `value` used and the `user` using it."""

    __slots__ = ()

    @staticmethod
    def _of(ref, value_scope) -> "Use":
        # The uses of a constant lie in any module of its context: such a Use lives with its user's.
        if value_scope.context is value_scope:
            with value_scope:
                user = lib.LLVMGetUser(ref)
                value_scope = module_scope(user, lib.LLVMGetValueKind(user), value_scope)
        return Use(ref, value_scope)

    @property
    def user(self) -> "User":
        return Value.from_ref(lib.LLVMGetUser(self), self._scope)

    @property
    def value(self) -> Value:
        return Value.from_ref(lib.LLVMGetUsedValue(self), self._scope)

    def __repr__(self) -> str:
        if not self.alive:
            return "<Use (dead)>"
        return f"<Use of {self.value!r} by {self.user!r}>"


class UseList:
    """The uses of a value (see the module doc for the editing contract)."""

    __slots__ = ("_value",)

    def __init__(self, value: Value) -> None:
        self._value = value

    def __iter__(self) -> Iterator[Use]:
        # The next use is taken before yielding (so the current one may go), through a checked
        # view: if the body erased it or closed the module, the next step raises.
        scope = self._value._scope
        ref = lib.LLVMGetFirstUse(self._value)
        use = Use._of(ref, scope) if ref else None
        while use is not None:
            ref = lib.LLVMGetNextUse(use)
            nxt = Use._of(ref, scope) if ref else None
            yield use
            use = nxt

    def __len__(self) -> int:
        return _count(lib.LLVMGetFirstUse(self._value), bare.LLVMGetNextUse, self._value._scope)

    def __bool__(self) -> bool:
        return bool(lib.LLVMGetFirstUse(self._value))


def _count(ref, step, scope) -> int:
    """How many references `step` walks through from `ref`, counted without a view of each (list() of uses
    or instructions asks for their length first: views would double its cost), `with scope:` inlined as
    Value.from_ref has it."""
    calls = in_flight.calls
    calls.append(scope)
    try:
        n = 0
        while ref:
            n += 1
            ref = step(ref)
        return n
    finally:
        calls.pop()


class Operands:
    """The operands of a user; `ops[i] = value` sets one."""

    __slots__ = ("_user",)

    def __init__(self, user: "User") -> None:
        self._user = user

    def __len__(self) -> int:
        return lib.LLVMGetNumOperands(self._user)

    def _index(self, i: int) -> int:
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"operand index {i} out of range for {n} operands")
        return i

    def __getitem__(self, i: int) -> Value:
        return Value.from_ref(lib.LLVMGetOperand(self._user, self._index(i)), self._user._scope)

    def __setitem__(self, i: int, value: Value) -> None:
        check_link(self._user._scope, value, "setting an operand")
        lib.LLVMSetOperand(self._user, self._index(i), _as_value_ref(value))

    def __iter__(self) -> Iterator[Value]:
        user = self._user
        for i in range(len(self)):
            yield Value.from_ref(lib.LLVMGetOperand(user, i), user._scope)


class User(Value):
    __slots__ = ()

    @property
    def operands(self) -> Operands:
        return Operands(self)

    @operands.setter
    def operands(self, values) -> None:
        values = list(values)
        ops = self.operands
        if len(values) != len(ops):
            raise ValueError(f"expected {len(ops)} operands, got {len(values)}")
        for i, v in enumerate(values):
            ops[i] = v


# -- constants -------------------------------------------------------------------------------

# Type kinds for the checks LLVM leaves to asserts (a release libLLVM would build garbage or crash).
_FP_KINDS = frozenset((capi.LLVMHalfTypeKind, capi.LLVMBFloatTypeKind, capi.LLVMFloatTypeKind,
                       capi.LLVMDoubleTypeKind, capi.LLVMX86_FP80TypeKind, capi.LLVMFP128TypeKind,
                       capi.LLVMPPC_FP128TypeKind))
_INT_OR_FP_KINDS = _FP_KINDS | {capi.LLVMIntegerTypeKind}
_VECTOR_KINDS = frozenset((capi.LLVMVectorTypeKind, capi.LLVMScalableVectorTypeKind))
_NO_NULL_KINDS = frozenset((capi.LLVMVoidTypeKind, capi.LLVMLabelTypeKind, capi.LLVMMetadataTypeKind,
                            capi.LLVMFunctionTypeKind))

class Constant(User):
    __slots__ = ()
    kinds = (capi.LLVMConstantArrayValueKind, capi.LLVMConstantStructValueKind,
             capi.LLVMConstantVectorValueKind, capi.LLVMConstantAggregateZeroValueKind,
             capi.LLVMConstantDataArrayValueKind, capi.LLVMConstantDataVectorValueKind,
             capi.LLVMConstantPointerNullValueKind, capi.LLVMConstantTokenNoneValueKind,
             capi.LLVMBlockAddressValueKind, capi.LLVMConstantTargetNoneValueKind)

    @staticmethod
    def null(ty: Type) -> "Constant":
        if ty.kind in _NO_NULL_KINDS:
            raise TypeError(f"type {ty} has no null value")
        return Value.from_ref(lib.LLVMConstNull(ty), ty._scope)

    @staticmethod
    def all_ones(ty: Type) -> "Constant":
        with ty._scope:
            scalar = lib.LLVMGetElementType(ty) if ty.kind in _VECTOR_KINDS else ty.ref
            scalar_kind = lib.LLVMGetTypeKind(scalar)
        if scalar_kind not in _INT_OR_FP_KINDS:
            raise TypeError(f"all_ones needs an integer or floating-point type (or a vector of one), not {ty}")
        return Value.from_ref(lib.LLVMConstAllOnes(ty), ty._scope)

    @staticmethod
    def undef(ty: Type) -> "Constant":
        return Value.from_ref(lib.LLVMGetUndef(ty), ty._scope)

    @staticmethod
    def poison(ty: Type) -> "Constant":
        return Value.from_ref(lib.LLVMGetPoison(ty), ty._scope)

    @staticmethod
    def struct(context, values, *, packed: bool = False) -> "Constant":
        values = list(values)
        scope = _aggregate_scope(context._scope, values, "Constant.struct")
        arr = (capi.LLVMValueRef * len(values))(*[v.ref for v in values])
        return Value.from_ref(lib.LLVMConstStructInContext(context, arr, len(values), int(packed)), scope)

    @staticmethod
    def array(element_type: Type, values) -> "Constant":
        values = list(values)
        for i, v in enumerate(values):
            if v.type != element_type:
                raise TypeError(f"array element {i} has type {v.type}, not {element_type}")
        scope = _aggregate_scope(element_type._scope, values, "Constant.array")
        arr = (capi.LLVMValueRef * len(values))(*[v.ref for v in values])
        return Value.from_ref(lib.LLVMConstArray2(element_type, arr, len(values)), scope)

    @staticmethod
    def vector(values) -> "Constant":
        """`<N x T>` of the constants `values`, all of type T (N >= 1): a shuffle's lane numbers, a mask."""
        values = list(values)
        if not values:
            raise ValueError("Constant.vector needs at least one element")
        for i, v in enumerate(values[1:], 1):
            if v.type != values[0].type:
                raise TypeError(f"vector element {i} has type {v.type}, not {values[0].type}")
        scope = _aggregate_scope(values[0].type._scope, values, "Constant.vector")
        arr = (capi.LLVMValueRef * len(values))(*[v.ref for v in values])
        return Value.from_ref(lib.LLVMConstVector(arr, len(values)), scope)

    @staticmethod
    def string(context, text: str | bytes, *, null_terminate: bool = True) -> "Constant":
        data = text.encode() if isinstance(text, str) else text
        return Value.from_ref(lib.LLVMConstStringInContext2(context, data, len(data), int(not null_terminate)),
                              context._scope)

    @property
    def is_null(self) -> bool:
        return bool(lib.LLVMIsNull(self))

    def element(self, k: int) -> "Value | None":
        """Element `k` of a constant vector, array or struct (of a `zeroinitializer` too), or None where
        LLVM cannot say (`k` out of range, a constant expression)."""
        ref = lib.LLVMGetAggregateElement(self, k)
        return Value.from_ref(ref, self._scope) if ref else None


def _aggregate_scope(scope, values, what: str):
    """The scope of a constant built from `values`: their module's if any names a global (all
    such values must then come from one module), else the context's."""
    for v in values:
        check_link(scope, v, what)
        if scope.is_context and not v._scope.is_context:
            scope = v._scope
    return scope


class UndefValue(Constant):
    __slots__ = ()
    kinds = (capi.LLVMUndefValueValueKind,)


class PoisonValue(Constant):
    __slots__ = ()
    kinds = (capi.LLVMPoisonValueValueKind,)


class ConstantInt(Constant):
    __slots__ = ()
    kinds = (capi.LLVMConstantIntValueKind,)

    @staticmethod
    def get(ty: Type, value: int, *, signed: bool = True) -> "ConstantInt":
        """The constant `value` of integer type `ty`, of any width.

        `value` may be written signed or unsigned (`get(i8, -1)` is `get(i8, 255)`: the bits are
        the same, so `signed` only documents the caller's reading); one that fits neither range
        raises ValueError, where LLVM would silently truncate it.
        """
        if ty.kind != capi.LLVMIntegerTypeKind:
            raise TypeError(f"ConstantInt needs an integer type, not {ty}")
        width = lib.LLVMGetIntTypeWidth(ty)
        value = int(value)
        if not -(1 << (width - 1)) <= value < (1 << width):
            raise ValueError(f"{value} does not fit in i{width} (signed range [{-(1 << (width - 1))}, "
                             f"{(1 << (width - 1)) - 1}], unsigned range [0, {(1 << width) - 1}])")
        bits = value & ((1 << width) - 1)
        if width <= 64:
            return ConstantInt(lib.LLVMConstInt(ty, bits, 0), ty._scope)
        nwords = (width + 63) // 64
        words = (ctypes.c_uint64 * nwords)(*[(bits >> (64 * i)) & ((1 << 64) - 1) for i in range(nwords)])
        return ConstantInt(lib.LLVMConstIntOfArbitraryPrecision(ty, nwords, words), ty._scope)

    @property
    def width(self) -> int:
        return lib.LLVMGetIntTypeWidth(lib.LLVMTypeOf(self))

    @property
    def value(self) -> int:
        """The value as a signed integer (i1 true is -1 in two's complement; see `zext_value`)."""
        if self.width > 64:
            return int(str(self).split()[1])  # the C API reads at most 64 bits; the printer is exact
        return lib.LLVMConstIntGetSExtValue(self)

    @property
    def zext_value(self) -> int:
        """The value as an unsigned integer."""
        width = self.width
        if width > 64:
            return self.value & ((1 << width) - 1)
        return lib.LLVMConstIntGetZExtValue(self)


class ConstantFP(Constant):
    __slots__ = ()
    kinds = (capi.LLVMConstantFPValueKind,)

    @staticmethod
    def get(ty: Type, value: float) -> "ConstantFP":
        if ty.kind not in _FP_KINDS:
            raise TypeError(f"ConstantFP needs a floating-point type, not {ty}")
        return ConstantFP(lib.LLVMConstReal(ty, value), ty._scope)

    @property
    def value(self) -> float:
        lost = ctypes.c_int()
        return lib.LLVMConstRealGetDouble(self, ctypes.byref(lost))


class ConstantExpr(Constant):
    __slots__ = ()
    kinds = (capi.LLVMConstantExprValueKind,)

    @property
    def opcode(self) -> int:
        return lib.LLVMGetConstOpcode(self)

    @property
    def is_gep(self) -> bool:
        return self.opcode == capi.LLVMGetElementPtr

    @property
    def source_element_type(self) -> Type:
        """A `getelementptr` expression's source element type (as GetElementPtrInst's)."""
        if not self.is_gep:
            raise TypeError("source_element_type is a getelementptr expression's")
        return Type.from_ref(lib.LLVMGetGEPSourceElementType(self), self._scope)

    @property
    def no_wrap(self) -> frozenset[str]:
        """A `getelementptr` expression's flags among "inbounds", "nusw", "nuw"."""
        if not self.is_gep:
            raise TypeError("no_wrap is a getelementptr expression's")
        return gep_no_wrap_names(lib.LLVMGEPGetNoWrapFlags(self))


class InlineAsm(Value):
    __slots__ = ()
    kinds = (capi.LLVMInlineAsmValueKind,)


class MetadataAsValue(Value):
    __slots__ = ()
    kinds = (capi.LLVMMetadataAsValueValueKind,)


class Argument(Value):
    __slots__ = ()
    kinds = (capi.LLVMArgumentValueKind,)

    @property
    def parent(self):
        return Value.from_ref(lib.LLVMGetParamParent(self), self._scope)


# -- basic blocks and instructions --------------------------------------------------------------

class BasicBlock(Handle):
    """A basic block; `as_value()` gives it as an LLVM value (e.g. a branch operand)."""

    __slots__ = ()

    def as_value(self) -> Value:
        return Value(lib.LLVMBasicBlockAsValue(self), self._scope)

    @property
    def name(self) -> str:
        return _text(lib.LLVMGetBasicBlockName(self))

    @name.setter
    def name(self, new: str) -> None:
        self.as_value().name = new

    @property
    def parent(self):
        """The function holding the block; None after `remove()`."""
        ref = lib.LLVMGetBasicBlockParent(self)
        return Value.from_ref(ref, self._scope) if ref else None

    @property
    def instructions(self) -> "InstructionList":
        return InstructionList(self)

    @property
    def terminator(self) -> "Instruction | None":
        ref = lib.LLVMGetBasicBlockTerminator(self)
        return Value.from_ref(ref, self._scope) if ref else None

    @property
    def uses(self) -> UseList:
        return self.as_value().uses

    @property
    def successors(self) -> list["BasicBlock"]:
        """The blocks this block's terminator may branch to, once per edge (a switch may name one
        twice); none while it has no terminator."""
        term = self.terminator
        return [] if term is None else [op for op in term.operands if isinstance(op, BasicBlock)]

    @property
    def predecessors(self) -> list["BasicBlock"]:
        """The blocks whose terminators may branch to this one, each once."""
        found = []
        for use in self.uses:
            user = use.user
            if isinstance(user, Instruction) and user.is_terminator and user.parent not in found:
                found.append(user.parent)
        return found

    def erase(self) -> None:
        """Unlink and delete the block (with its instructions). Nothing may branch to it any more.

        Views of the block and of its instructions are dead afterwards.
        """
        if not lib.LLVMGetBasicBlockParent(self):
            raise ValueError(f"cannot erase block {self.name!r}: it is not in a function")
        if self.uses:
            raise ValueError(f"cannot erase block {self.name!r}: it still has {len(self.uses)} use(s) "
                             "(branches or phis that name it)")
        gone = erase_addresses(self)
        lib.LLVMDeleteBasicBlock(self)
        self._scope.erase(gone)

    def remove(self) -> None:
        """Unlink the block from its function without deleting it."""
        if not lib.LLVMGetBasicBlockParent(self):
            raise ValueError(f"cannot remove block {self.name!r}: it is not in a function")
        lib.LLVMRemoveBasicBlockFromParent(self)

    def move_after(self, other: "BasicBlock") -> None:
        check_link(other._scope, self, "BasicBlock.move_after")
        lib.LLVMMoveBasicBlockAfter(self, other)

    def move_before(self, other: "BasicBlock") -> None:
        """Move this block before `other` (in `other`'s function), e.g. to make it the entry block."""
        check_link(other._scope, self, "BasicBlock.move_before")
        lib.LLVMMoveBasicBlockBefore(self, other)

    def __str__(self) -> str:
        return str(self.as_value())

    def __repr__(self) -> str:
        if not self.alive:
            return "<BasicBlock (dead)>"
        return f"<BasicBlock {self.name or '(unnamed)'}>"


class InstructionList:
    """The instructions of a block (see the module doc for the editing contract)."""

    __slots__ = ("_block",)

    def __init__(self, block: BasicBlock) -> None:
        self._block = block

    def __iter__(self) -> Iterator["Instruction"]:
        # Each step goes through the yielded view, so erasing it (or closing the module) in the
        # loop body raises at the next step instead of following a freed instruction.
        scope = self._block._scope
        ref = lib.LLVMGetFirstInstruction(self._block)
        while ref:
            inst = Value.from_ref(ref, scope)
            yield inst
            ref = lib.LLVMGetNextInstruction(inst)

    def __reversed__(self) -> Iterator["Instruction"]:
        scope = self._block._scope
        ref = lib.LLVMGetLastInstruction(self._block)
        while ref:
            inst = Value.from_ref(ref, scope)
            yield inst
            ref = lib.LLVMGetPreviousInstruction(inst)

    def __len__(self) -> int:
        return _count(lib.LLVMGetFirstInstruction(self._block), bare.LLVMGetNextInstruction, self._block._scope)

    @property
    def first(self) -> "Instruction | None":
        ref = lib.LLVMGetFirstInstruction(self._block)
        return Value.from_ref(ref, self._block._scope) if ref else None

    @property
    def last(self) -> "Instruction | None":
        ref = lib.LLVMGetLastInstruction(self._block)
        return Value.from_ref(ref, self._block._scope) if ref else None


class Instruction(User):
    """An instruction. `Value.from_ref` picks a subclass registered for its opcode."""

    __slots__ = ()
    _by_opcode: dict[int, type["Instruction"]] = {}
    opcodes: tuple[int, ...] = ()

    def __init_subclass__(cls, **kw) -> None:
        super().__init_subclass__(**kw)
        for op in cls.__dict__.get("opcodes", ()):
            Instruction._by_opcode[op] = cls

    @property
    def opcode(self) -> int:
        return lib.LLVMGetInstructionOpcode(self)

    @property
    def opcode_name(self) -> str:
        return opcode_name(self.opcode)

    @property
    def parent(self) -> BasicBlock | None:
        ref = lib.LLVMGetInstructionParent(self)
        return BasicBlock(ref, self._scope) if ref else None

    @property
    def function(self):
        block = self.parent
        return block.parent if block is not None else None

    @property
    def next(self) -> "Instruction | None":
        ref = lib.LLVMGetNextInstruction(self)
        return Value.from_ref(ref, self._scope) if ref else None

    @property
    def previous(self) -> "Instruction | None":
        ref = lib.LLVMGetPreviousInstruction(self)
        return Value.from_ref(ref, self._scope) if ref else None

    @property
    def is_terminator(self) -> bool:
        return bool(lib.LLVMIsATerminatorInst(self))

    def clone(self) -> "Instruction":
        """An unparented copy; insert it with `Builder.insert`."""
        return Value.from_ref(lib.LLVMInstructionClone(self), self._scope)

    def erase(self) -> None:
        """Unlink (if linked) and delete. The instruction must have no uses left (replace them first).

        Every view of it (and of its operand uses) is dead afterwards: using one raises.
        """
        if self.uses:
            raise ValueError(f"cannot erase {str(self).strip()!r}: it still has {len(self.uses)} use(s); "
                             "call replace_all_uses_with first")
        gone = erase_addresses(self)
        if lib.LLVMGetInstructionParent(self):
            lib.LLVMInstructionEraseFromParent(self)
        else:
            lib.LLVMDeleteInstruction(self)  # a clone() or remove()d instruction
        self._scope.erase(gone)

    def remove(self) -> None:
        """Unlink from the block without deleting (insert it again with `Builder.insert`)."""
        if not lib.LLVMGetInstructionParent(self):
            raise ValueError(f"cannot remove {str(self).strip()!r}: it is not in a block")
        lib.LLVMInstructionRemoveFromParent(self)

    def get_metadata(self, kind: int):
        return lib.LLVMGetMetadata(self, kind)

    def set_metadata(self, kind: int, node) -> None:
        """Attach `node` as metadata of kind `kind` (what `get_metadata` of an instruction in the same
        context returned: a copy of its `!alias.scope`, say); None drops it."""
        lib.LLVMSetMetadata(self, kind, node)

    def set_string_metadata(self, kind: str, text: str) -> None:
        """Attach `!kind !{!"text"}` (a custom kind: the optimizer keeps it on what it clones and
        may drop it where it merges instructions)."""
        ctx = lib.LLVMGetTypeContext(lib.LLVMTypeOf(self))
        name, data = kind.encode(), text.encode()
        md = lib.LLVMMDStringInContext2(ctx, data, len(data))
        node = lib.LLVMMDNodeInContext2(ctx, (capi.LLVMMetadataRef * 1)(md), 1)
        lib.LLVMSetMetadata(self, lib.LLVMGetMDKindIDInContext(ctx, name, len(name)),
                            lib.LLVMMetadataAsValue(ctx, node))

    def string_metadata(self, kind: str) -> str | None:
        """The text of `!kind !{!"text"}` on this instruction (set_string_metadata), or None."""
        ctx = lib.LLVMGetTypeContext(lib.LLVMTypeOf(self))
        name = kind.encode()
        node = lib.LLVMGetMetadata(self, lib.LLVMGetMDKindIDInContext(ctx, name, len(name)))
        if not node or lib.LLVMGetMDNodeNumOperands(node) != 1:
            return None
        operands = (capi.LLVMValueRef * 1)()
        lib.LLVMGetMDNodeOperands(node, operands)
        if not operands[0]:
            return None
        size = ctypes.c_uint()
        text = lib.LLVMGetMDString(operands[0], ctypes.byref(size))
        return None if text is None else text[:size.value].decode("utf-8", "surrogateescape")

    def set_nontemporal(self) -> None:
        """Attach `!nontemporal !{i32 1}` to this store: the data will not be read again soon, so the
        backend may write it past the caches (x86's `movntps`, for a store aligned to its size)."""
        ctx = lib.LLVMGetTypeContext(lib.LLVMTypeOf(self))
        one = lib.LLVMValueAsMetadata(lib.LLVMConstInt(lib.LLVMInt32TypeInContext(ctx), 1, 0))
        node = lib.LLVMMDNodeInContext2(ctx, (capi.LLVMMetadataRef * 1)(one), 1)
        name = b"nontemporal"
        lib.LLVMSetMetadata(self, lib.LLVMGetMDKindIDInContext(ctx, name, len(name)), lib.LLVMMetadataAsValue(ctx, node))

    def set_access_group(self, group) -> None:
        """Attach `!llvm.access.group` `group` (Module.new_access_group) to this memory access (a load,
        a store, a call that reads or writes memory)."""
        ctx = lib.LLVMGetTypeContext(lib.LLVMTypeOf(self))
        name = b"llvm.access.group"
        lib.LLVMSetMetadata(self, lib.LLVMGetMDKindIDInContext(ctx, name, len(name)),
                            lib.LLVMMetadataAsValue(ctx, group.ref))

    def set_alias_scopes(self, scopes, noalias=()) -> None:
        """Attach `!alias.scope !{scopes}` and `!noalias !{noalias}` (Module.new_alias_scopes) to this
        memory access: the caller promises that it touches no memory that an access in a scope of
        `noalias` touches (within one execution of the scopes' declarations, AliasScope.as_list)."""
        ctx = lib.LLVMGetTypeContext(lib.LLVMTypeOf(self))
        for kind, nodes in (("alias.scope", scopes), ("noalias", noalias)):
            nodes = [scope.ref for scope in nodes]
            if not nodes:
                continue
            node = lib.LLVMMDNodeInContext2(ctx, (capi.LLVMMetadataRef * len(nodes))(*nodes), len(nodes))
            name = kind.encode()
            lib.LLVMSetMetadata(self, lib.LLVMGetMDKindIDInContext(ctx, name, len(name)),
                                lib.LLVMMetadataAsValue(ctx, node))

    def set_loop_hints(self, *hints: str, parallel_accesses=None) -> None:
        """Attach `!llvm.loop !{<itself>, !{!"hint"}, ...}` to this branch, a loop's back edge: hints the
        loop passes read (`llvm.loop.unroll.runtime.disable`, ...); a hint that takes a number is a pair
        (`("llvm.loop.vectorize.width", 8)`: `!{!"llvm.loop.vectorize.width", i32 8}`). Inlining and
        cloning keep them.
        `parallel_accesses` (an access group) adds `!{!"llvm.loop.parallel_accesses", group}`: the
        accesses of that group carry no dependence from one iteration of the loop to another, which
        the caller promises (the loop is parallel when every memory access in it is in the group)."""
        ctx = lib.LLVMGetTypeContext(lib.LLVMTypeOf(self))
        temporary = lib.LLVMTemporaryMDNode(ctx, None, 0)
        operands = [temporary]
        for hint in hints:
            value = None
            if isinstance(hint, tuple):
                hint, value = hint
            data = hint.encode()
            text = lib.LLVMMDStringInContext2(ctx, data, len(data))
            if value is None:
                operands.append(lib.LLVMMDNodeInContext2(ctx, (capi.LLVMMetadataRef * 1)(text), 1))
            else:
                number = lib.LLVMValueAsMetadata(lib.LLVMConstInt(lib.LLVMInt32TypeInContext(ctx), value, 0))
                operands.append(lib.LLVMMDNodeInContext2(ctx, (capi.LLVMMetadataRef * 2)(text, number), 2))
        if parallel_accesses is not None:
            data = b"llvm.loop.parallel_accesses"
            text = lib.LLVMMDStringInContext2(ctx, data, len(data))
            operands.append(lib.LLVMMDNodeInContext2(ctx, (capi.LLVMMetadataRef * 2)(text, parallel_accesses.ref), 2))
        node = lib.LLVMMDNodeInContext2(ctx, (capi.LLVMMetadataRef * len(operands))(*operands), len(operands))
        lib.LLVMMetadataReplaceAllUsesWith(temporary, node)  # the node refers to itself; the temporary is freed
        name = b"llvm.loop"
        lib.LLVMSetMetadata(self, lib.LLVMGetMDKindIDInContext(ctx, name, len(name)), lib.LLVMMetadataAsValue(ctx, node))

    @property
    def can_use_fast_math(self) -> bool:
        """Whether the instruction can carry fast-math flags: floating-point arithmetic, fneg,
        fcmp, and calls, selects and phis of floating-point type."""
        return bool(lib.LLVMCanValueUseFastMathFlags(self))

    @property
    def fast_math(self) -> frozenset[str]:
        """The fast-math flags set ("nnan", "ninf", "nsz", "arcp", "contract", "afn", "reassoc";
        all seven for `fast`); empty for an instruction that cannot carry them."""
        if not lib.LLVMCanValueUseFastMathFlags(self):
            return frozenset()
        return fast_math_names(lib.LLVMGetFastMathFlags(self))

    @fast_math.setter
    def fast_math(self, flags) -> None:
        """Set the flags to `flags`: a name, an iterable of names, or "fast" for all.

        LLVM's C API can only add fast-math flags, so `flags` must include the ones already set;
        to drop some, build the operation anew with the Builder and replace this instruction.
        """
        bits = fast_math_bits(flags)
        if not lib.LLVMCanValueUseFastMathFlags(self):
            raise TypeError(f"{str(self).strip()!r} cannot carry fast-math flags (only floating-point operations, "
                            "fcmp, and calls, selects and phis of floating-point type can)")
        dropped = lib.LLVMGetFastMathFlags(self) & ~bits
        if dropped:
            raise ValueError(f"cannot drop the fast-math flags {sorted(fast_math_names(dropped))} of "
                             f"{str(self).strip()!r}: LLVM's C API only adds them; build the operation anew "
                             "(Builder) with the flags wanted, replace_all_uses_with it and erase this one")
        lib.LLVMSetFastMathFlags(self, bits)


_OPCODE_NAMES: dict[int, str] = {}


def opcode_name(opcode: int) -> str:
    """The IR spelling of an opcode number ("call", "phi", ...)."""
    if not _OPCODE_NAMES:
        for name, value in vars(capi._decls).items():
            if name.startswith("LLVM") and isinstance(value, int) and name in _OPCODE_CONSTANTS:
                _OPCODE_NAMES[value] = name[4:].lower()
    return _OPCODE_NAMES.get(opcode, f"opcode{opcode}")


_OPCODE_CONSTANTS = {
    "LLVMRet", "LLVMBr", "LLVMSwitch", "LLVMIndirectBr", "LLVMInvoke", "LLVMUnreachable",
    "LLVMCallBr", "LLVMFNeg", "LLVMAdd", "LLVMFAdd", "LLVMSub", "LLVMFSub", "LLVMMul", "LLVMFMul",
    "LLVMUDiv", "LLVMSDiv", "LLVMFDiv", "LLVMURem", "LLVMSRem", "LLVMFRem", "LLVMShl", "LLVMLShr",
    "LLVMAShr", "LLVMAnd", "LLVMOr", "LLVMXor", "LLVMAlloca", "LLVMLoad", "LLVMStore",
    "LLVMGetElementPtr", "LLVMTrunc", "LLVMZExt", "LLVMSExt", "LLVMFPToUI", "LLVMFPToSI",
    "LLVMUIToFP", "LLVMSIToFP", "LLVMFPTrunc", "LLVMFPExt", "LLVMPtrToInt", "LLVMIntToPtr",
    "LLVMBitCast", "LLVMAddrSpaceCast", "LLVMICmp", "LLVMFCmp", "LLVMPHI", "LLVMCall",
    "LLVMSelect", "LLVMUserOp1", "LLVMUserOp2", "LLVMVAArg", "LLVMExtractElement",
    "LLVMInsertElement", "LLVMShuffleVector", "LLVMExtractValue", "LLVMInsertValue",
    "LLVMFreeze", "LLVMFence", "LLVMAtomicCmpXchg", "LLVMAtomicRMW", "LLVMResume",
    "LLVMLandingPad", "LLVMCleanupRet", "LLVMCatchRet", "LLVMCatchPad", "LLVMCleanupPad",
    "LLVMCatchSwitch",
}
