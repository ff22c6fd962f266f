"""Vectorization across work items on the CPU: the launch loop runs W consecutive items of index 0 at
once, in vector lanes (whole-function vectorization with masks, as ISPC and CPU OpenCL runtimes do).

The CPU launch entry (gpuc/targets/cpu_launch.py) calls the marker `gpuc.cpu.vectorize(index0)` in its
loop over index 0 when the config has `vectorize=True` (the default). At the `simplified` point, once
the kernel is inlined into that loop, this plugin
1. inlines the funcs the loop still calls (LLVM's inliner leaves large ones), so that no call stands
   between the loop and a vectorizer: the first round marks them `alwaysinline` and reports a change,
   the point's cleanup inlines them, and the next round finds the marker again;
2. where the body has a loop of its own (a `while` per pixel, which LLVM's loop vectorizer cannot
   handle across items), builds a vector loop in front of the original one (emit.py): W lanes (64-bit
   lanes of the host's vector registers, several registers per value, `width`), branches linearized under
   masks, inner loops run until every lane has left them;
3. guards it with a test made per row (memory.py): the vector loop runs a row where no item touches
   memory another item writes, the original loop elsewhere, so results equal the item-by-item loop's.
Bodies without a loop are left to LLVM's loop vectorizer, which handles them (saxpy, stencils).
A body that calls a derivative or gradient marker (resolved by the autodiff plugin at the `optimized`
point) keeps the marker call until that point, where the callback runs again once the derived code is in
place (the autodiff plugin's priority is higher), on the optimized loop; there bodies without a loop
vectorize too, since LLVM's loop vectorizer has run already. So does a body calling a function kept out of
line that holds such a marker (an adjoint kernel, until its reverse sweep is built). Stack slots each item
starts afresh get a copy per lane (private.py).

Each launch entry's outcome is a line of `result.trace`: "vectorized at simplified: @k.range, 8 lanes
(...)" with what ran lane by lane, or "not vectorized" with the reason (docs/targets.md).
"""

from __future__ import annotations

import time

from gpuc.abi import SPLIT_MARKER, VECTORIZE_MARKER
from gpuc.compiler import CompileState, freeze_reads_before_writes
from gpuc.compiler.trace import TransformationRecord
from gpuc.llvm import BranchInst, Builder, CallInst, Constant, Function, Module

from .calls import Calls, callee_name
from .emit import VectorBody
from .loops import ControlFlow, ItemLoop, Unsupported, own_preheader
from .memory import Memory, outside
from .private import private_slots
from .streaming import Streams
from .uniform import Uniformity
from . import full, windows

MARKER = VECTORIZE_MARKER
#: Before the clamp split at the same point: a loop this plugin vectorizes keeps its original for the rows
#: that fail the memory test, which the split may still split.
PRIORITY = 10
#: (feature, 64-bit lanes per vector register, registers per vector value) by the widest vector feature
#: the target has: a value spans several registers, whose independent operations keep the floating-point
#: units busy through a chain of dependent ones (Mandelbrot's z*z + c); AVX-512's 32 registers hold four
#: per value, AVX's 16 two.
_ISAS = (("avx512f", 8, 4), ("avx", 4, 2), ("sse2", 2, 2))


def resolve(state: CompileState, marker: Function, module: Module) -> bool:
    """The `simplified` callback (see the module doc)."""
    calls = [use.user for use in marker.uses if isinstance(use.user, CallInst)]
    if _inline_callees(calls):
        return True
    changed = False
    for call in calls:
        start = time.perf_counter()
        fn = call.function
        try:
            text = vectorize(state, call, module)
            changed = True
        except Later:
            continue  # the call stays, for the optimized point
        except Unsupported as exc:
            text = f"not vectorized: {exc}"
            changed |= getattr(exc, "changed", False)
        if call.parent is not None:
            call.erase()
        state.trace.transformations.append(TransformationRecord(
            fn.name, "its loop over index 0", state.point, False, time.perf_counter() - start,
            requested_by=MARKER, details=(("vectorize", text),)))
    if not marker.uses:
        marker.erase()
    return changed


class Later(Unsupported):
    """The body calls a marker that a plugin resolves at the optimized point (a derivative, a gradient):
    vectorize it there, once that plugin has put the derived code in its place."""


def width(target) -> int:
    """W, the work items of a chunk: lanes per register times registers per value (_ISAS)."""
    features = {f[1:] for f in target.features().split(",") if f.startswith("+")}
    for feature, lanes, registers in _ISAS:
        if feature in features:
            return lanes * registers
    return 2


def vectorize(state, call, module) -> str:
    own_preheader(call, module.context)
    item = ItemLoop(call)
    calls = Calls(getattr(state.target, "vector_variants", None))
    if not state.config.vectorize:  # CompilerConfig(vectorize=False): LLVM's loop vectorizer takes the loop
        left = Unsupported("vectorize=False; LLVM's loop vectorizer takes it")
        left.changed = _freeze_reads_before_writes(item, calls)
        raise left
    for blk in item.body:
        for inst in blk.instructions:
            if state.point != "simplified" and isinstance(inst, CallInst) and callee_name(inst) == SPLIT_MARKER:
                raise Later()  # the clamp split comes first there (clamp_split.py): this loop is its middle part
            if _is_marker(inst, calls):
                if state.point == "simplified":
                    raise Later()
                if calls.kind(inst) == "sum" and outside(inst.args[0], item.inside):
                    continue  # one call per chunk of lanes (emit.py's `summed`)
                raise Unsupported(f"the body calls the marker @{callee_name(inst)}")
            if state.point == "simplified" and isinstance(inst, CallInst) and _calls_marker(inst.callee, calls):
                raise Later()  # a kernel kept out of line until a plugin rewrites it (an adjoint's)
    cf = ControlFlow(item)
    # At the optimized point LLVM's loop vectorizer has run already; before it, it takes a body without
    # loops, unless the body has stores to stream (streaming.py), which it cannot make.
    leave_to_llvm = not cf.loops and state.point == "simplified"
    if leave_to_llvm:  # (its rows go to LLVM's vectorizer in any case)
        frozen = _freeze_reads_before_writes(item, calls)
        if item.items is None or state.config.streaming_bytes is None:
            raise _left_to_llvm(frozen)
    lanes, private = private_slots(item, width(state.target))
    uni = Uniformity(cf, calls.pure, private)
    mem = Memory(item, calls.pure, private)
    _rows_per_item(cf, uni, mem)
    body = VectorBody(item, cf, uni, mem, calls, lanes, module, private)
    if item.items is not None:
        body.streams = Streams(body, state.target, state.config.streaming_bytes)
    if leave_to_llvm and not body.streams:
        raise _left_to_llvm(frozen)
    body.precheck()
    pre = item.preheader
    term = pre.terminator
    if not isinstance(term, BranchInst) or term.is_conditional:
        raise Unsupported("the loop's preheader ends in a conditional branch")
    with Builder(module.context) as b:
        # The test and the vector loop's entry go in a block of their own in front of the preheader, which
        # keeps `br header` (the clamp split expects the original loop to keep a preheader of its own). Made
        # before the test is built, the split moves the preheader's few instructions, not the test's hundreds.
        entry = b.split_before(term, f"{pre.name}.vec")
        own = entry.instructions.last  # the preheader's last instruction before the test (None: it had none)
        try:
            count = b.sub(item.stop, item.first, "vec.count")
            guard, described = mem.guard(b, count, item.first)
            if body.streams:
                streaming = body.streams.prepare(b, item.first, item.items)
                if leave_to_llvm:  # rows that do not stream run LLVM's vector loop, as they would without this
                    guard = b.and_(guard, streaming)
            body.build(guard, entry)
        except Exception:
            added = []
            inst = entry.instructions.last
            while inst is not None and inst != own:
                added.append(inst)
                inst = inst.previous
            for i in added:
                if i.uses:
                    i.replace_all_uses_with(Constant.poison(i.type))
            for i in added:
                i.erase()
            _rejoin(entry, pre)
            raise
    combined = windows.combine(body.created, body.aligns, body.vals[item.iv], body.index)
    whole = not cf.loops and full.specialize(body)
    parts = [f"{lanes} lanes", f"{len(cf.loops)} inner loop{'s' if len(cf.loops) != 1 else ''}",
             f"{len(uni.divergent)} divergent"]
    if body.consecutive:
        parts.append(f"{body.consecutive} vector loads/stores")
    if body.gathers:
        parts.append(f"{body.gathers} gathers/scatters")
    if combined:
        parts.append(f"{combined} window{'s' if combined != 1 else ''} of overlapping loads and stores")
    if whole:
        parts.append("whole chunks without the mask")
    if body.streams:
        n = len(body.streams.stores)
        parts.append(f"{n} streaming store{'s' if n != 1 else ''} (non-temporal from "
                     f"{state.config.streaming_bytes} bytes stored{'; other launches: LLVM' if leave_to_llvm else ''})")
    parts.append(f"memory: {described}")
    text = "vectorized: " + ", ".join(parts)
    if body.lane_by_lane:
        text += "; lane by lane: " + ", ".join(sorted(set(body.lane_by_lane)))
    return text


def _rejoin(head, block) -> None:
    """Undo `Builder.split_before`: `head`'s instructions back at the start of `block`, which its
    predecessors branch to again; `head` erased."""
    with Builder(block.parent.context) as b:
        b.position_before(block.instructions.first)
        for inst in list(head.instructions):
            inst.remove()
            b.insert(inst)
    for use in list(head.uses):
        user = use.user
        for k, op in enumerate(user.operands):
            if op == head:
                user.operands[k] = block
    head.erase()


def _left_to_llvm(changed: bool) -> Unsupported:
    left = Unsupported("no loop inside the body; LLVM's loop vectorizer takes it")
    left.changed = changed
    return left


def _rows_per_item(cf, uni, mem) -> None:
    """Refuse a body whose loop runs alike for every item but reads or writes memory that is not
    consecutive across items (each item walking its own row): in lanes those accesses would be gathers
    and scatters, where LLVM's loop vectorizer makes the inner loop's accesses consecutive."""
    for loop in cf.loops:
        if loop in uni.divergent:
            continue
        for access in mem.accesses:
            blk = access.inst.parent
            if blk not in loop.blocks or not uni.is_varying_at(access.pointer, blk):
                continue
            if mem.stride(access.pointer) != access.size:
                raise Unsupported("a loop that runs alike for every item walks memory item by item; "
                                  "LLVM's loop vectorizer takes that loop")


def _inline_callees(calls) -> bool:
    """Mark the funcs the launch loops call (and the funcs those call) `alwaysinline`; True when any
    was not yet. Recursive funcs stay calls (they run lane by lane)."""
    todo = []
    for call in calls:
        fn = call.function
        for inst in fn.instructions():
            if isinstance(inst, CallInst):
                todo.append(inst.callee)
    marked, seen = False, set()
    while todo:
        callee = todo.pop()
        if not isinstance(callee, Function) or callee.is_declaration or callee.name in seen:
            continue
        seen.add(callee.name)
        if "noinline" in callee.attributes or _recursive(callee):
            continue
        if "alwaysinline" not in callee.attributes:
            callee.attributes.add("alwaysinline")
            marked = True
        todo.extend(i.callee for i in callee.instructions() if isinstance(i, CallInst))
    return marked


def _freeze_reads_before_writes(item, calls: Calls) -> bool:
    """Guard the launch loop's body against LLVM 22's masked-load fold (`freeze_reads_before_writes`)."""
    return freeze_reads_before_writes(item.body, calls.pure)


def _is_marker(inst, calls: Calls) -> bool:
    """Whether `inst` calls a marker (a declared `gpuc.*` function) that a plugin resolves later."""
    return (isinstance(inst, CallInst) and isinstance(inst.callee, Function) and inst.callee.is_declaration
            and inst.callee.name.startswith("gpuc.") and calls.kind(inst) != "skip")


def _calls_marker(fn, calls: Calls) -> bool:
    """Whether `fn`, a function kept out of line (`noinline`), calls a marker that a plugin resolves later."""
    if not isinstance(fn, Function) or fn.is_declaration or "noinline" not in fn.attributes:
        return False
    return any(_is_marker(inst, calls) for inst in fn.instructions())


def _recursive(fn) -> bool:
    seen, work = set(), [fn]
    while work:
        cur = work.pop()
        for inst in cur.instructions():
            if not isinstance(inst, CallInst):
                continue
            callee = inst.callee
            if not isinstance(callee, Function):
                continue
            if callee.name == fn.name:
                return True
            if not callee.is_declaration and callee.name not in seen:
                seen.add(callee.name)
                work.append(callee)
    return False
