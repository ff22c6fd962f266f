"""Adds into one shadow element that every work item makes, summed per chunk of items on the CPU.

In an adjoint whose work items run at once, the cotangent of a value every item loads from one element of
an array (a parameter `w[0]` of a loss) goes into that element's shadow with an atomic add per item: on
the CPU's threads all of them on one cache line, so that a two-thread launch of such an adjoint ran 3.5
times slower than a one-thread one. The reverse sweep (reverse.py: `add_to_shadow`) calls the marker
`gpuc.autodiff.sum.<type>(pointer, value)` there instead (`Settings.chunk_sums`), where

- the target's launch entry runs chunks of items, each on one thread (`Target.chunked_launches`: the
  CPU's `<kernel>.range`, gpuc/targets/cpu_launch.py), and
- the element is the same for every item (its offset in the array has no term in the item's index:
  access.py) and in an array the kernel only reads: its shadow is only added to during the launch, never
  read, so when the adds arrive makes no difference to what the launch computes.

At the `last` callback point, `resolve` turns each call inside the launch entry into `slot += value` on a
slot of the entry's own, and adds the slot into the element atomically once before the entry returns:
one atomic add per chunk and element. Anywhere else (the adjoint compiled on its own, for `inspect`), a
call becomes the atomic add it stands for. The order of the adds changes within a chunk; that of the
atomic adds of items that run at once never was fixed (a one-thread launch runs the serial adjoint,
whose adds are plain, in item order, and never call the marker). In vector lanes (the vectorize plugin, at the
`optimized` point, before `last`) a call on one address for every item becomes one call per chunk of lanes
with the ordered sum of their values.
"""

from __future__ import annotations

import gpuc.llvm as llvm
from gpuc.abi import LAUNCH_ENTRY_SUFFIX

PREFIX = "gpuc.autodiff.sum."
MARKER = PREFIX + "*"
#: Instructions copied into the launch entry's first block to get a marker's pointer where the entry
#: returns (`_in_entry`); deeper chains keep their atomic adds.
_CLONE_LIMIT = 8


def marker(module: llvm.Module, ty) -> llvm.Function:
    """The marker `void PREFIX<ty>(ptr, ty)` of `module`, declared on first use."""
    name = f"{PREFIX}{ty}"
    fn = module.functions.get(name)
    if fn is None:
        ctx = module.context
        fn = module.add_function(name, llvm.FunctionType.get(ctx.void, [ctx.ptr(), ty]))
        fn.attributes.add("nounwind")
    return fn


def resolve(state, marker_fn: llvm.Function, module: llvm.Module) -> bool:
    """The `last` callback: every call of every marker of the family lowered (see the module doc)."""
    names = sorted(n for n in module.function_names() if n.startswith(PREFIX))
    calls: dict = {}  # function -> its marker calls, in order
    for name in names:
        for use in list(module.functions[name].uses):
            call = use.user
            calls.setdefault(call.function, []).append(call)
    summed = False
    with llvm.Builder(module.context) as b:
        for fn, found in calls.items():
            if fn.name.endswith(LAUNCH_ENTRY_SUFFIX):
                summed |= _sum_per_chunk(b, fn, found)
            else:
                for call in found:
                    _atomic_add(b, call)
    for name in names:
        fn = module.functions.get(name)
        if fn is not None and not fn.uses:
            fn.erase()
    if summed:  # the slots into registers (the point's cleanup has no pass that would)
        llvm.run_passes(module, "function(sroa)", state.target_machine)
    return bool(names)


def _atomic_add(b: llvm.Builder, call) -> None:
    pointer, value = call.args
    b.position_before(call)
    b.atomic_rmw("fadd", pointer, value)
    call.erase()


def _sum_per_chunk(b: llvm.Builder, fn: llvm.Function, calls: list) -> bool:
    """Each call of `calls` in the launch entry `fn` adds into a slot of the pointer's; before each return
    the slots are added into their elements. Whether any call got a slot."""
    entry = fn.entry_block
    returns = [blk.terminator for blk in fn.blocks if blk.terminator.opcode_name == "ret"]
    slots: dict = {}  # the pointer's value where the entry returns -> (slot, type)
    copies: dict = {}  # an instruction -> its copy in the first block (or None): one per instruction
    for call in calls:
        pointer, value = call.args
        ty = value.type
        at_return = _in_entry(b, pointer, entry, copies)
        if at_return is None or not returns:
            _atomic_add(b, call)
            continue
        found = slots.get(at_return)
        if found is None or str(found[1]) != str(ty):
            b.position_before(entry.instructions.first)
            slot = b.alloca(ty, "chunk.sum")
            b.position_before(entry.terminator)
            b.store(llvm.ConstantFP.get(ty, -0.0), slot)  # -0.0 + v is v, for every v (0.0 + -0.0 is not)
            found = slots[at_return] = (slot, ty)
        slot = found[0]
        b.position_before(call)
        b.store(b.fadd(b.load(ty, slot), value), slot)
        call.erase()
    for ret in returns:
        b.position_before(ret)
        for pointer, (slot, ty) in slots.items():
            b.atomic_rmw("fadd", pointer, b.load(ty, slot))
    return bool(slots)


def _in_entry(b: llvm.Builder, value, entry, copies: dict, depth: int = 0):
    """`value`, or a copy of what it is computed by, available where the launch entry's first block ends (so
    at every return): GEPs, casts and integer arithmetic (no division) of its parameters and of what it loads
    from its argument slots (`argv`, always readable; LLVM sinks those loads towards their uses); None
    where it is computed from anything else. `copies` maps the instructions copied so far to their copies:
    calls on one pointer share its copy, so its slot and its atomic add."""
    if not isinstance(value, llvm.Instruction) or value.parent == entry:
        return value  # a parameter, a constant, a global, or computed before the loops
    if value in copies:
        return copies[value]
    if depth >= _CLONE_LIMIT:
        return None  # (not remembered: the same value reached at a lesser depth may be copied)
    if isinstance(value, llvm.LoadInst):
        if value.is_volatile or value.ordering is not None or _root(value.operands[0]) != entry.parent.args[0]:
            return None
    elif not (isinstance(value, (llvm.GetElementPtrInst, llvm.CastInst)) or isinstance(value, llvm.BinaryOperator)
              and value.opcode_name not in ("udiv", "sdiv", "urem", "srem")):
        return None
    operands = [_in_entry(b, op, entry, copies, depth + 1) for op in value.operands]
    if any(op is None for op in operands):
        return None
    copy = value.clone()
    for k, op in enumerate(operands):
        copy.operands[k] = op
    b.position_before(entry.terminator)
    copies[value] = b.insert(copy)
    return copies[value]


def _root(pointer):
    while isinstance(pointer, llvm.GetElementPtrInst):
        pointer = pointer.operands[0]
    return pointer
