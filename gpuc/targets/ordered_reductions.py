"""Float reductions in loops kept in their order, for OpenCL drivers that reorder them.

Intel's OpenCL CPU runtime runs the work items of a work-group that do not fill a vector (a work-group of
100 items in vectors of 8 leaves 4) with a scalar version of the kernel, in which it vectorizes loops
themselves: a sum `acc += a[i, j] * b[i, j]` over j becomes 8 partial sums added at the end, although
nothing allows reassociation (no fast-math flags, no -cl-fast-relaxed-math or -cl-unsafe-math-
optimizations; OpenCL C kernels built without options do the same). So the same kernel gave a work item
a different float32 sum depending on its place in its work-group. gpuc computes what the Python code
computes, in its order.

`keep_reduction_order` passes each float reduction of a loop (a header's phi that the loop updates with
fadd, fsub, fmul or fmuladd, used once, by that arithmetic) through a volatile slot of the work item's stack: the loop vectorizer cannot
make a reduction of it, and the work-item vectorizer still runs the work items in vector lanes. The price
(Intel's CPU device, a float32 dot product of 1000 terms per work item, 4096 work items): 1.5 times the
time of the reordered sum.
"""

from __future__ import annotations

from ..llvm import Builder, CallInst, Function, Instruction, Module, PHINode
from .cfg import dominators

_FLOAT_TYPES = ("half", "float", "double")
_ARITHMETIC = ("fadd", "fsub", "fmul", "fneg")
_INTRINSICS = ("llvm.fmuladd.", "llvm.fma.")


def keep_reduction_order(module: Module) -> bool:
    """Route every float recurrence of every loop through a volatile stack slot; returns whether any."""
    changed = False
    with Builder(module.context) as b:
        for fn in module.functions:
            if fn.is_declaration:
                continue
            for header, phi in _recurrences(fn):
                _demote(b, fn, header, phi)
                changed = True
    return changed


def _recurrences(fn: Function) -> list:
    """(header, phi) of each float phi of a loop header that its loop updates arithmetically."""
    blocks = list(fn.blocks)
    succs = {block: block.successors for block in blocks}
    dom = dominators(blocks, succs)
    found = []
    for latch in blocks:
        for header in succs[latch]:
            if header not in dom[latch]:
                continue  # not a back edge
            for inst in header.instructions:
                if not isinstance(inst, PHINode):
                    break
                if (str(inst.type) in _FLOAT_TYPES and (header, inst) not in found
                        and _reduction_use(inst, _loop_blocks(header, latch, blocks)) and _updates(inst, latch)):
                    found.append((header, inst))
    return found


def _loop_blocks(header, latch, blocks) -> set:
    """The blocks of the natural loop of the back edge `latch` -> `header`."""
    preds = {block: [] for block in blocks}
    for block in blocks:
        for succ in block.successors:
            preds.setdefault(succ, []).append(block)
    body, stack = {header}, [latch]
    while stack:
        block = stack.pop()
        if block not in body:
            body.add(block)
            stack.extend(preds.get(block, ()))
    return body


def _reduction_use(phi: PHINode, loop: set) -> bool:
    """Whether `phi` is used once inside its loop, by arithmetic: the shape of a reduction a loop vectorizer
    reassociates (`acc + a[j] * b[j]`). A recurrence that reads its value more than once or otherwise
    (Mandelbrot's `z * z + c`, a test of `abs(z)`) is no reduction: no vectorizer reorders it, and a volatile
    slot there would only keep the driver from running work items in vector lanes."""
    uses = [use.user for use in phi.uses if isinstance(use.user, Instruction) and use.user.parent in loop]
    if len(uses) != 1:
        return False
    user = uses[0]
    if isinstance(user, CallInst):
        return getattr(user.callee, "name", "").startswith(_INTRINSICS)
    return isinstance(user, Instruction) and user.opcode_name in _ARITHMETIC


def _updates(phi: PHINode, latch) -> bool:
    """Whether the value `phi` gets from `latch` is arithmetic on `phi` itself (through other such operations)."""
    start = phi.incoming_value_for(latch)
    seen, stack = set(), [start]
    while stack:
        value = stack.pop()
        if value == phi:
            return True
        if not isinstance(value, Instruction) or value in seen:
            continue
        seen.add(value)
        if value.opcode_name in _ARITHMETIC:
            stack.extend(value.operands)
        elif isinstance(value, CallInst) and getattr(value.callee, "name", "").startswith(_INTRINSICS):
            stack.extend(value.args)
    return False


def _demote(b: Builder, fn: Function, header, phi: PHINode) -> None:
    b.position_before(fn.entry_block.instructions.first)
    slot = b.alloca(phi.type, f"{phi.name or 'acc'}.ordered")
    for value, block in phi.incoming:
        b.position_before(block.terminator)
        b.store(value, slot, volatile=True)
    first = next(i for i in header.instructions if not isinstance(i, PHINode))
    b.position_before(first)
    loaded = b.load(phi.type, slot, phi.name, volatile=True)
    phi.replace_all_uses_with(loaded)
    phi.erase()
