"""Calls in the tangent transformation: math functions by their derivative rules, defined functions
through their own tangent functions (built once each), everything else an error or passed through."""

from __future__ import annotations

import gpuc.llvm as llvm

from . import mathrules, nested, temporaries
from .kinds import TRANSPARENT, carries_floats
from .memory import allocates

_MEMORY = ("llvm.memset.", "llvm.memcpy.", "llvm.memmove.")


def call(self, inst) -> None:
    callee = inst.callee
    if not isinstance(callee, llvm.Function):
        # A pointer computed or passed in is an indirect call; the only other callee is inline asm.
        indirect = isinstance(callee, (llvm.Instruction, llvm.Argument, llvm.Constant))
        what = "an indirect call" if indirect else "inline assembly"
        raise self.error(inst, f"{what} cannot be differentiated")
    name = callee.name
    if callee.function_type.is_vararg:
        raise self.error(inst, f"calls of functions with variable arguments ({name}) are not differentiated")
    if name.startswith("llvm.dbg."):
        return  # debug intrinsics name fn's values in metadata: not copied
    if name.startswith(TRANSPARENT):
        self.vmap[inst] = self.clone(inst)
    elif name.startswith(_MEMORY):
        _memory_intrinsic(self, inst)
    elif name.startswith(mathrules.VECTOR_SUM):
        _vector_sum(self, inst)
    elif (math := mathrules.classify(callee)) is not None:
        _math(self, inst, *math)
    elif allocates(inst, self.heap):
        _allocate(self, inst)
    elif self.heap is not None and name == self.heap[1] and callee.is_declaration:
        _free(self, inst)
    elif nested.is_request(callee):
        nested.tangent(self, inst)
    elif callee.is_declaration:
        _external(self, inst, callee)
    else:
        _defined(self, inst, callee)


def _math(self, inst, family, name: str) -> None:
    if name not in mathrules.DIFFERENTIABLE:
        raise self.error(inst, f"{inst.callee.name} has no derivative rule")
    if len(inst.args) != mathrules.ARITY[name]:  # e.g. a library function whose signature was changed
        raise self.error(inst, f"{inst.callee.name} is called with {len(inst.args)} argument(s); {name} takes "
                               f"{mathrules.ARITY[name]}")
    new = self.vmap[inst] = self.clone(inst)
    args = inst.args
    tangents = [self.tangent(a) if carries_floats(a.type) else None for a in args]
    t = mathrules.tangent(self.b, self.module, family, name, [self.value(a) for a in args], new, tangents,
                          like=inst.callee)
    if t is not None:
        self.tangents[inst] = t


def _vector_sum(self, inst) -> None:
    """`llvm.vector.reduce.fadd(start, v)` (LLVM's vectorizer sums a loop's lanes with it): linear, so its
    tangent is the same sum of the tangents, in the same order."""
    new = self.vmap[inst] = self.clone(inst)
    start, vector = inst.args
    if self.tangent(start) is None and self.tangent(vector) is None:
        return
    t = self.b.call(new.callee, [self.tangent_or_zero(start), self.tangent_or_zero(vector)])
    if inst.fast_math:
        t.fast_math = inst.fast_math
    self.tangents[inst] = t


def _allocate(self, inst) -> None:
    # A heap temporary: a zeroed shadow of the same size, as a stack slot has.
    new = self.vmap[inst] = self.clone(inst)
    self.shadows[inst] = self.b.call(temporaries.shadow_allocator(self.module, self.heap), [new.args[0]],
                                     f"{new.name}.d" if new.name else "")


def _free(self, inst) -> None:
    pointer = inst.args[0]
    if pointer not in self.shadows:
        raise self.error(inst, "memory freed that the function did not allocate itself")
    self.vmap[inst] = self.clone(inst)
    temporaries.free(self.b, self.module, self.heap, self.shadows[pointer])


def _external(self, inst, callee) -> None:
    fnty = callee.function_type
    types = [fnty.return_type, *fnty.params]
    if callee.name.startswith(("llvm.masked.load.", "llvm.masked.store.")) and _masked_on_shadow(self, inst):
        return
    if callee.name.startswith(("llvm.masked.load.", "llvm.masked.gather.")) and inst.args[0] not in self.shadows \
            and inst.args[0] not in self.stack:
        _masked_constant_load(self, inst)
        return
    if any(a in self.duplicated for a in inst.args) and not callee.name.startswith(("llvm.prefetch", "llvm.lifetime.")):
        raise self.error(inst, f"a pointer into an array with a tangent passed to {callee.name} is not differentiated")
    if callee.name.startswith("llvm."):
        # An intrinsic that computes no floats (integer arithmetic, float-to-integer conversions,
        # target registers) has no tangent; one that does and has no rule is an error.
        if carries_floats(fnty.return_type):
            raise self.error(inst, f"the intrinsic {callee.name} has no derivative rule")
        if any(a in self.stack for a in inst.args):
            raise self.error(inst, f"a pointer to a stack slot passed to {callee.name} is not differentiated")
        if any(carries_floats(t) for t in fnty.params) and any(isinstance(t, llvm.PointerType) for t in fnty.params):
            # e.g. llvm.masked.store: floats written to memory, as a store would be
            raise self.error(inst, f"the intrinsic {callee.name} writes floats to memory, which is not differentiated")
    elif any(carries_floats(t) or isinstance(t, llvm.PointerType) for t in types):
        raise self.error(inst, f"{callee.name} is an external function gpuc knows no derivative of")
    self.vmap[inst] = self.clone(inst)


def _masked_on_shadow(self, inst) -> bool:
    """`llvm.masked.load(ptr, mask, passthru)` / `llvm.masked.store(value, ptr, mask)` of memory with a
    shadow: the same access of the shadow, under the same mask, for the tangents. False where the memory
    has none."""
    load = inst.callee.name.startswith("llvm.masked.load.")
    pointer, mask = (0, 1) if load else (1, 2)
    if inst.args[pointer] not in self.shadows or not carries_floats(inst.type if load else inst.args[0].type):
        return False
    new = self.vmap[inst] = self.clone(inst)
    t = self.b.insert(inst.clone())
    t.operands[pointer] = self.shadows[inst.args[pointer]]
    t.operands[mask] = new.operands[mask]
    value = 2 if load else 0  # the passthru, or the value stored
    t.operands[value] = self.tangent_or_zero(inst.args[value])
    if load:
        self.tangents[inst] = t
    return True


def _masked_constant_load(self, inst) -> None:
    """`llvm.masked.load(ptr, align, mask, passthru)` / `.gather` of memory without a shadow: constant data
    for the function, as a plain load's (memory.load), so the lanes it loads have no tangent; the lanes the
    mask leaves out are the pass-through's, with its tangent (LLVM's vectorizer loads a loop's last,
    partial vector of an input array this way)."""
    new = self.vmap[inst] = self.clone(inst)
    t = self.tangent(inst.args[-1])
    if t is not None and carries_floats(inst.type):
        self.tangents[inst] = self.b.select(new.args[-2], llvm.Constant.null(inst.type), t)


def _defined(self, inst, callee) -> None:
    args = inst.args
    if any(a in self.stack for a in args):
        raise self.error(inst, f"a pointer to a stack slot passed to {callee.name} is not differentiated")
    # a pointer into an array with a tangent goes with its shadow (the callee's tangent takes both)
    active = [(carries_floats(a.type) and self.tangent(a) is not None) or a in self.duplicated for a in args]
    if not any(active):
        self.vmap[inst] = self.clone(inst)  # nothing it computes depends on the active inputs
        return
    if any(a in self.duplicated and a not in self.shadows for a in args):
        raise self.error(inst, f"a pointer into an array with a tangent, passed to {callee.name}, whose shadow "
                               "is not known here")
    tfn = self.callee_tangent(callee, active)
    tangents = [self.shadows[a] if a in self.duplicated else self.tangent(a) for a, flag in zip(args, active) if flag]
    result = self.b.call(tfn, [self.value(a) for a in args] + tangents)
    if carries_floats(inst.type):
        self.vmap[inst] = self.b.extract_value(result, 0)
        self.tangents[inst] = self.b.extract_value(result, 1)
    else:
        self.vmap[inst] = result


def _memory_intrinsic(self, inst) -> None:
    new = self.vmap[inst] = self.clone(inst)
    args = inst.args
    destination, source = args[0], args[1]
    is_set = inst.callee.name.startswith("llvm.memset.")
    if destination not in self.shadows:
        if not is_set and source in self.stack:
            raise self.error(inst, "floats copied from a stack slot into memory the caller sees")
        return
    if is_set or source in self.shadows:
        shadow = self.b.insert(new.clone())
        shadow.operands[0] = self.shadows[destination]
        if is_set:  # bytes set: their tangent is zero
            shadow.operands[1] = llvm.ConstantInt.get(source.type, 0)
        else:
            shadow.operands[1] = self.shadows[source]
        return
    # Constant data copied into a stack slot: its tangent is zero.
    size = self.value(args[2])
    fnty = llvm.FunctionType.get(self.module.context.void, [destination.type, self.module.context.i8, size.type,
                                                            self.module.context.i1])
    memset = self.module.declare_intrinsic(f"llvm.memset.p0.i{size.type.width}", fnty)
    self.b.call(memset, [self.shadows[destination], llvm.ConstantInt.get(self.module.context.i8, 0), size,
                         llvm.ConstantInt.get(self.module.context.i1, 0)])
