"""Forward-mode differentiation of LLVM functions: the tangent function of a function.

Every floating-point SSA value v of the function gets a tangent dv (its dual part); the new
function computes the original values unchanged, interleaved with their tangents. docs/autodiff.md
describes the rules, the memory model and the limits.
"""

from __future__ import annotations

import gpuc.llvm as llvm
from gpuc.errors import CompilationError

from . import mathrules
from .calls import call
from .cfg import Copier, reverse_post_order
from .kinds import carries_floats, define, error
from .memory import MEMORY_HANDLERS, derived_from, only_compared, pointer_op, stack_pointers

_STRUCTURAL = frozenset({"extractvalue", "insertvalue", "extractelement", "insertelement", "shufflevector", "fneg",
                         "fpext", "fptrunc", "freeze"})
_UNSUPPORTED = ("invoke", "callbr", "va_arg", "landingpad", "resume", "indirectbr", "catchswitch", "cleanupret")


#: The slots a failed bounds check sends an access to (gpuc/frontend/passes/lowering.py: bounds_scratch).
_BOUNDS_SCRATCH = "gpuc.boundscheck.scratch"


def _bounds_scratch(pointer) -> bool:
    if isinstance(pointer, llvm.ConstantExpr) and pointer.opcode_name in ("addrspacecast", "bitcast"):
        pointer = pointer.operands[0]
    return isinstance(pointer, llvm.GlobalVariable) and pointer.name.startswith(_BOUNDS_SCRATCH)


def tangent_name(fn: llvm.Function, active) -> str:
    return f"{fn.name}.tangent.{''.join('1' if a else '0' for a in active)}"


def tangent_function(module: llvm.Module, fn: llvm.Function, active, heap=None) -> llvm.Function:
    """The tangent function of `fn` (defined in `module`) for the parameters flagged in `active`.

    `active` is one bool per parameter (or a collection of active parameter indices); active
    parameters must carry floats (float, double, vectors of them, literal structs/arrays holding
    some) or be pointers: an active pointer's tangent is its shadow, memory of the same layout that holds
    the tangents of the floats it points to (loads read them, stores write them), as Enzyme's duplicated
    arguments (the tangent kernels of gpuc.tangent). The result,
    an internal function named `<fn>.tangent.<mask>`, takes fn's parameters followed by one tangent
    per active parameter (of the same type) and returns `{R, R}` (the result and its tangent) for a
    result type R that carries floats, else fn's result alone. It is built once per function and
    activity: a function of that name already defined in the module is returned as it is, so
    callees, recursion and repeated requests share one tangent. `heap` names the target's allocator
    and its free (`Target.heap_functions`): memory fn allocates with it (a copy's temporary) gets a
    shadow as a stack slot does. Raises CompilationError for what cannot be differentiated.
    """
    params = fn.function_type.params
    if not isinstance(active, (list, tuple)) or (active and not isinstance(active[0], bool)):
        indices = set(active)
        active = [i in indices for i in range(len(params))]
    active = list(active)
    if len(active) != len(params):
        raise ValueError(f"{fn.name} has {len(params)} parameters; activity given for {len(active)}")
    for i, (flag, ty) in enumerate(zip(active, params)):
        if flag and not (carries_floats(ty) or isinstance(ty, llvm.PointerType)):
            raise ValueError(f"parameter {i} of {fn.name} has type {ty}, which carries no floats to differentiate "
                             "and is no pointer")
    if fn.is_declaration:
        raise ValueError(f"{fn.name} is a declaration; only a defined function can be differentiated")
    name = tangent_name(fn, active)
    existing = module.functions.get(name)
    if existing is not None and not existing.is_declaration:
        return existing
    if fn.function_type.is_vararg:
        raise error(fn, None, "a function with variable arguments cannot be differentiated")
    ret = fn.return_type
    result = module.context.struct_type([ret, ret]) if carries_floats(ret) else ret
    fnty = llvm.FunctionType.get(result, list(params) + [t for t, a in zip(params, active) if a])
    if existing is not None and str(existing.function_type) != str(fnty):
        raise ValueError(f"@{name} is declared as {existing.function_type}; the tangent of {fn.name} is {fnty}")
    return define(module, name, fnty, existing, lambda tfn: _Transformer(module, fn, tfn, active, heap).run())


class _Transformer(Copier):
    """Builds the body of tangent function `tfn` from `fn`: clones each instruction and follows it
    with its tangent code, block by block in reverse post-order (definitions before uses)."""

    def __init__(self, module: llvm.Module, fn: llvm.Function, tfn: llvm.Function, active, heap=None) -> None:
        self.module, self.fn, self.tfn, self.heap = module, fn, tfn, heap
        self.vmap: dict = {}      # fn's values -> tfn's
        self.tangents: dict = {}  # fn's values -> their tangents in tfn (absent: zero)
        self.shadows: dict = {}   # fn's pointers into its stack slots and temporaries -> the same places in their shadows
        self.bmap: dict = {}
        self.stack = stack_pointers(fn, heap)
        self.phis: list = []      # (fn's phi, its clone, its tangent phi or None, its shadow phi or None)
        n = len(fn.args)
        targs = tfn.args
        extra = iter(targs[n:])
        #: fn's pointers derived from its active pointer parameters: their shadows hold tangents
        self.duplicated: set = set()
        for arg, new, flag in zip(fn.args, targs, active):
            new.name = arg.name
            self.vmap[arg] = new
            if flag:
                tangent = next(extra)
                tangent.name = f"{arg.name or 'arg'}.d"
                if isinstance(arg.type, llvm.PointerType):
                    self.shadows[arg] = tangent
                    self.duplicated |= derived_from(arg, fn)
                else:
                    self.tangents[arg] = tangent

    def run(self) -> None:
        for block in self.fn.blocks:
            self.bmap[block] = self.tfn.append_block(block.name)
        order = reverse_post_order(self.fn)
        self.reachable = set(order)
        with llvm.Builder(self.module.context) as b:
            self.b = b
            for block in order:
                b.position_at_end(self.bmap[block])
                for inst in list(block.instructions):
                    self._instruction(inst)
            for block in self.fn.blocks:
                if block not in self.reachable:
                    b.position_at_end(self.bmap[block])
                    b.unreachable()
            self._fill_phis()

    # -- values ----------------------------------------------------------------------------
    def tangent(self, v):
        """The tangent of fn's value `v` in tfn, None when it is exactly zero."""
        return self.tangents.get(v)

    def tangent_or_zero(self, v):
        t = self.tangents.get(v)
        return llvm.Constant.null(v.type) if t is None else t

    def error(self, inst, message: str) -> CompilationError:
        return error(self.fn, inst, message)

    def shadow_of(self, pointer):
        """The shadow of a pointer whose memory has one, else None. The slot a failed bounds check sends an
        access to is its own shadow: its tangents mean as little as its values."""
        shadow = self.shadows.get(pointer)
        if shadow is None and _bounds_scratch(pointer):
            return pointer
        return shadow

    def has_shadow(self, pointer) -> bool:
        """Whether `pointer` points into memory with a shadow: a stack slot, a temporary, or the memory of
        an active pointer parameter."""
        return pointer in self.stack or pointer in self.duplicated

    def callee_tangent(self, callee: llvm.Function, active) -> llvm.Function:
        return tangent_function(self.module, callee, active, self.heap)

    # -- instructions ------------------------------------------------------------------------
    def _instruction(self, inst) -> None:
        handler = _HANDLERS.get(inst.opcode_name, _Transformer._generic)
        handler(self, inst)

    def _unsupported(self, inst) -> None:
        raise self.error(inst, f"`{inst.opcode_name}` is not differentiated")

    def _generic(self, inst) -> None:
        # Integer, comparison and control-flow code: copied, with no tangent.
        if carries_floats(inst.type):
            raise self.error(inst, f"no derivative rule for `{inst.opcode_name}` on floats")
        if inst.opcode_name != "icmp" and any(op in self.stack for op in inst.operands):
            if inst.opcode_name != "ptrtoint" or not only_compared(inst):
                raise self.error(inst, "a pointer to a stack slot escapes")
        self.vmap[inst] = self.clone(inst)

    def _arith(self, inst) -> None:
        new = self.vmap[inst] = self.clone(inst)
        a, c = inst.operands
        da, dc = self.tangent(a), self.tangent(c)
        if da is None and dc is None:
            return
        b, op = self.b, inst.opcode_name
        ops = mathrules.Ops(b, self.module, mathrules.INTRINSIC, inst.type)
        if op == "fadd":
            t = ops.add(da, dc)
        elif op == "fsub":
            t = ops.sub(da, dc)
        elif op == "fmul":
            t = ops.add(ops.mul(da, self.value(c)), ops.mul(self.value(a), dc))
        elif op == "fdiv":  # (da - y dc) / c with y = a / c
            t = ops.div(ops.sub(da, ops.mul(new, dc)), self.value(c))
        else:  # frem
            t = mathrules.tangent(b, self.module, mathrules.INTRINSIC, "frem",
                                  [self.value(a), self.value(c)], new, [da, dc])
        self.tangents[inst] = t

    def _structural(self, inst) -> None:
        # The same operation on the tangents: fneg, fpext/fptrunc, freeze, aggregate and vector lanes.
        if any(op in self.stack for op in inst.operands):
            raise self.error(inst, "a pointer to a stack slot escapes into an aggregate")
        self.vmap[inst] = self.clone(inst)
        if not carries_floats(inst.type):
            return
        float_ops = [i for i, op in enumerate(inst.operands) if carries_floats(op.type)]
        if all(self.tangent(inst.operands[i]) is None for i in float_ops):
            return
        if inst.opcode_name == "freeze":
            self.tangents[inst] = self.tangent(inst.operands[0])
            return
        t = self.b.insert(inst.clone())
        for i, op in enumerate(inst.operands):
            t.operands[i] = self.tangent_or_zero(op) if i in float_ops else self.value(op)
        self.tangents[inst] = t

    def _int_to_float(self, inst) -> None:
        self.vmap[inst] = self.clone(inst)  # sitofp/uitofp: piecewise constant, tangent 0

    def _bitcast(self, inst) -> None:
        if carries_floats(inst.type) or carries_floats(inst.operands[0].type):
            raise self.error(inst, "reinterpreting the bits of a float has no derivative")
        pointer_op(self, inst)

    def _select(self, inst) -> None:
        new = self.vmap[inst] = self.clone(inst)
        cond, x, y = inst.operands
        if self.has_shadow(inst):
            sx, sy = self.shadow_of(x), self.shadow_of(y)
            if sx is None or sy is None:
                raise self.error(inst, "a select between memory with tangents (a stack slot, or an array with a "
                                       "tangent) and other memory")
            self.shadows[inst] = self.b.select(new.operands[0], sx, sy)
        elif carries_floats(inst.type) and (self.tangent(x) is not None or self.tangent(y) is not None):
            self.tangents[inst] = self.b.select(new.operands[0], self.tangent_or_zero(x), self.tangent_or_zero(y))

    def _phi(self, inst) -> None:
        new = self.vmap[inst] = self.b.phi(inst.type, name=inst.name)
        tangent = shadow = None
        if carries_floats(inst.type):
            tangent = self.tangents[inst] = self.b.phi(inst.type, name=f"{inst.name}.d" if inst.name else "")
        elif self.has_shadow(inst):
            shadow = self.shadows[inst] = self.b.phi(inst.type)
        self.phis.append((inst, new, tangent, shadow))

    def _fill_phis(self) -> None:
        for inst, new, tangent, shadow in self.phis:
            for value, block in inst.incoming:
                target = self.bmap[block]
                if block not in self.reachable:
                    continue  # its copy ends in `unreachable`: no longer a predecessor
                new.add_incoming(self.value(value), target)
                if tangent is not None:
                    tangent.add_incoming(self.tangent_or_zero(value), target)
                if shadow is not None:
                    if self.shadow_of(value) is None:
                        raise self.error(inst, "a phi of memory with tangents (a stack slot, or an array with a "
                                               "tangent) and other memory")
                    shadow.add_incoming(self.shadow_of(value), target)

    def _ret(self, inst) -> None:
        if not inst.operands or not carries_floats(inst.operands[0].type):
            if inst.operands and self.has_shadow(inst.operands[0]):
                raise self.error(inst, "a pointer to memory with tangents (a stack slot, or an array with a "
                                       "tangent) is returned: its tangents would be lost")
            self.clone(inst)
            return
        v = inst.operands[0]
        pair = llvm.Constant.poison(self.tfn.return_type)
        pair = self.b.insert_value(pair, self.value(v), 0)
        pair = self.b.insert_value(pair, self.tangent_or_zero(v), 1)
        self.b.ret(pair)


_HANDLERS = {
    **{op: _Transformer._arith for op in ("fadd", "fsub", "fmul", "fdiv", "frem")},
    **{op: _Transformer._structural for op in _STRUCTURAL},
    **{op: _Transformer._unsupported for op in _UNSUPPORTED},
    "sitofp": _Transformer._int_to_float, "uitofp": _Transformer._int_to_float,
    "bitcast": _Transformer._bitcast, "select": _Transformer._select, "phi": _Transformer._phi,
    "ret": _Transformer._ret, "call": call, **MEMORY_HANDLERS,
}
