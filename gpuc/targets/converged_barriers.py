"""Barriers at which a work item that returned counts as arrived, for targets whose barriers every work item
of the group must reach: SPIR-V's OpControlBarrier (and a work-group reduction) is undefined unless every
invocation of the work-group executes the same dynamic instance of it.

docs/frontend.md promises that a work item that has returned counts as arrived at the barriers the others
still reach, and is left out of barrier_count/all/any, as on the CPU and on CUDA's hardware. On an OpenCL
device that is not so: Intel's CPU runtime runs the rest of a work-group along its last work item's path,
so where that item returned the others never get past their barrier (their later stores are lost), and
where an earlier one returned it runs the code after the barrier anyway.

`converge_barriers` rewrites a kernel where some work items of a group may return while others still have
a barrier ahead (a divergence analysis, below, finds them; kernels whose barriers the whole group reaches
alike are left as they are). Two forms, the first where it applies:

- **A chain**: the barriers lie on no loop and each is reached only through the one before it (the usual
  shape: a bounds check or an early return, then the block's phases). A work item that returns jumps to
  the next barrier it has not passed, marked done, and from each barrier straight to the next, taking part
  with a predicate that changes nothing (false for barrier_count and barrier_any, true for barrier_all);
  after the last one it returns. The barriers stay where they are, and no edge goes back.

- **Rounds**: otherwise every barrier becomes one instruction that every work item reaches once per round:

      site k:   payload := 1 + (predicate << 32);  resume := k;  goto ROUND
      ret:      payload := 0;                      resume := 0;  goto ROUND
      ROUND:    barrier; round := work_group_reduce_add(payload);  switch resume: k -> after site k, 0 -> drain
      drain:    if low 32 bits of round (the work items still running) == 0: ret, else goto ROUND

  A work item that returned waits in rounds until every work item of its group has; barrier_count is the
  high half of the round, barrier_all whether no running item's predicate was false, barrier_any whether
  one was true. Intel's CPU compiler runs this form 2-3 times slower than the chain.

Values live across the rewritten edges go through the stack (LLVM's reg2mem) and back into registers (SROA).
"""

from __future__ import annotations

from ..llvm import Builder, CallInst, ConstantInt, Function, Instruction, Module, run_passes
from .cfg import dominators, immediate_post_dominators, on_cycle

# What the target's barrier hook emits: a work-group control barrier, then for barrier_count/all/any a
# work-group function of the predicate (an i32), which is also a collective every work item must reach.
_CONTROL_BARRIER = "__spirv_ControlBarrier"
_WORKGROUP = 2
_REDUCTIONS = {"_Z21work_group_reduce_addi": "count", "_Z14work_group_alli": "all", "_Z14work_group_anyi": "any"}
# The predicate a work item that returned brings to each kind: one that changes nothing.
_NEUTRAL = {"count": 0, "all": 1, "any": 0}
_REDUCE_I64 = "_Z21work_group_reduce_addl"
_DRAIN = 0


class Site:
    """A barrier of the kernel: its control barrier `call` (or None, for a lone work-group function), and the
    work-group function `reduction` that follows it (or None), of kind count/all/any."""

    def __init__(self, call: CallInst | None, reduction: CallInst | None) -> None:
        self.call, self.reduction = call, reduction
        self.kind = None if reduction is None else _REDUCTIONS[reduction.callee.name]

    @property
    def first(self) -> CallInst:
        return self.call if self.call is not None else self.reduction

    @property
    def last(self) -> CallInst:
        return self.reduction if self.reduction is not None else self.call


def converge_barriers(module: Module, kernel: Function, *, barrier_attributes, builtin) -> bool:
    """Rewrite `kernel` (the module's finish stage, after optimization) as the module doc says, where a work
    item could return while others still have a barrier ahead; returns whether it did. `builtin(b, module,
    name, result type, args)` calls an OpenCL built-in the target's way; `barrier_attributes` are the
    arguments of the control barrier it emits."""
    sites = _sites(kernel)
    if not sites or not _needs_rounds(kernel, sites):
        return False
    with Builder(module.context) as b:
        for site in sites:
            _hoist_pure_between(b, site)
            tail = site.first.parent
            b.split_before(site.first)
            b.br(tail)
        chain = _chain_order(kernel, sites)
        if chain is not None:
            _chain(b, module, kernel, chain)
        else:
            _rounds(b, module, kernel, sites, barrier_attributes, builtin)
    run_passes(module, "function(sroa,dce)", verify=False)
    return True


def _chain(b: Builder, module: Module, kernel: Function, sites: list[Site]) -> None:
    """The chain form (module doc): `sites` in the order every work item passes them."""
    llctx = module.context
    i1, i32 = llctx.i1, llctx.i32
    # each site alone in its block, between the block of what precedes it and `rest`, what follows it
    blocks, rests = [], []
    for site in sites:
        blocks.append(site.first.parent)
        after = site.last.next
        rest = after.parent
        b.split_before(after)
        b.br(rest)
        rests.append(rest)
        blocks[-1] = site.first.parent
    b.position_before(kernel.entry_block.instructions.first)
    done, passed = b.alloca(i1, "gpuc.done"), b.alloca(i32, "gpuc.passed")
    b.store(ConstantInt.get(i1, 0), done)
    b.store(ConstantInt.get(i32, 0), passed)
    for k, (site, rest) in enumerate(zip(sites, rests), start=1):
        b.position_before(rest.instructions.first)
        b.store(ConstantInt.get(i32, k), passed)
        if site.reduction is not None:
            b.position_before(site.reduction)
            value = site.reduction.args[0]
            neutral = ConstantInt.get(value.type, _NEUTRAL[site.kind])
            site.reduction.operands[0] = b.select(b.load(i1, done, "gpuc.done"), neutral, value)
    # every value used across the edges about to be added goes through the stack
    run_passes(module, "function(reg2mem)", verify=False)
    leave = kernel.append_block("gpuc.return")
    for k, (block, rest) in enumerate(zip(blocks, rests)):
        block.terminator.erase()
        b.position_at_end(block)
        following = blocks[k + 1] if k + 1 < len(blocks) else leave
        b.cond_br(b.load(i1, done, "gpuc.done"), following, rest)
    every = list(kernel.blocks)
    dom = dominators(every, {block: block.successors for block in every})
    for block in every:
        term = block.terminator
        if block != leave and term is not None and term.opcode_name == "ret":
            b.position_before(term)
            b.store(ConstantInt.get(i1, 1), done)
            count = b.load(i32, passed, "gpuc.passed")
            term.erase()
            b.position_at_end(block)
            # the sites on every path here have been passed: no case for them (nor an edge back to them)
            first = sum(1 for site_block in blocks if site_block in dom[block])
            b.switch(count, leave, [(ConstantInt.get(i32, k), blocks[k]) for k in range(first, len(blocks))])
    b.position_at_end(leave)
    b.ret()


def _rounds(b: Builder, module: Module, kernel: Function, sites: list[Site], barrier_attributes, builtin) -> None:
    """The rounds form (module doc)."""
    llctx = module.context
    i32, i64 = llctx.i32, llctx.i64
    # each site starts its block now (a later split in the same block moved the earlier site's block),
    # whose one predecessor ends in the branch the round replaces
    tails = [site.first.parent for site in sites]
    heads = [tail.predecessors[0] for tail in tails]
    b.position_before(kernel.entry_block.instructions.first)
    resume, payload, total = (b.alloca(i32, "gpuc.resume"), b.alloca(i64, "gpuc.payload"),
                              b.alloca(i64, "gpuc.round"))
    for k, (site, head, tail) in enumerate(zip(sites, heads, tails), start=1):
        b.position_before(head.terminator)
        b.store(_payload(b, llctx, site), payload)
        b.store(ConstantInt.get(i32, k), resume)
        if site.reduction is not None:
            b.position_before(site.reduction)
            site.reduction.replace_all_uses_with(_result(b, llctx, site, b.load(i64, total, "gpuc.round")))
            site.reduction.erase()
        if site.call is not None:
            site.call.erase()
    # every value used across the edges about to change goes through the stack: any block may follow a round
    run_passes(module, "function(reg2mem)", verify=False)
    hub = kernel.append_block("gpuc.round")
    for head in heads:
        head.terminator.erase()
        b.position_at_end(head)
        b.br(hub)
    for block in list(kernel.blocks):
        term = block.terminator
        if term is not None and term.opcode_name == "ret":
            b.position_before(term)
            b.store(ConstantInt.get(i64, 0), payload)
            b.store(ConstantInt.get(i32, _DRAIN), resume)
            term.erase()
            b.position_at_end(block)
            b.br(hub)
    drain, leave = kernel.append_block("gpuc.drain"), kernel.append_block("gpuc.return")
    b.position_at_end(hub)
    builtin(b, module, _CONTROL_BARRIER, llctx.void, [ConstantInt.get(i32, v) for v in barrier_attributes])
    b.store(builtin(b, module, _REDUCE_I64, i64, [b.load(i64, payload, "gpuc.payload")]), total)
    b.switch(b.load(i32, resume, "gpuc.resume"), drain,
             [(ConstantInt.get(i32, k), tail) for k, tail in enumerate(tails, start=1)])
    b.position_at_end(drain)
    running = b.trunc(b.load(i64, total), i32, "gpuc.running")
    b.cond_br(b.icmp("eq", running, ConstantInt.get(i32, 0)), leave, hub)
    b.position_at_end(leave)
    b.ret()


def _chain_order(kernel: Function, sites: list[Site]) -> list[Site] | None:
    """The sites in the order every work item passes them, where they form a chain: none on a cycle, and
    each reached only through the one before it (it dominates the next); else None."""
    blocks = list(kernel.blocks)
    succs = {block: block.successors for block in blocks}
    if any(on_cycle(site.first.parent, succs.__getitem__) for site in sites):
        return None
    dom = dominators(blocks, succs)
    order = sorted(sites, key=lambda site: len(dom[site.first.parent]))
    for before, after in zip(order, order[1:]):
        if before.first.parent not in dom[after.first.parent] or before.first.parent == after.first.parent:
            return None
    return order


def inline_collectives(module: Module, kernels) -> None:
    """Inline into the kernels every function that reaches a work-group barrier (the optimizer leaves large
    ones called), so the kernel's own barriers are all there are: a work item that returned cannot arrive
    at a barrier inside a call it never makes. Recursive ones stay calls."""
    kernels = set(kernels)
    defined = [fn for fn in module.functions if not fn.is_declaration and fn not in kernels]
    callees = {fn: {inst.callee for inst in fn.instructions() if isinstance(inst, CallInst)} for fn in defined}
    reaching = {fn for fn in defined if _has_collective(fn)}
    grown = True
    while grown:
        grown = False
        for fn in defined:
            if fn not in reaching and callees[fn] & reaching:
                reaching.add(fn)
                grown = True
    if not reaching:
        return
    for fn in reaching:
        fn.attributes.remove("noinline")
        fn.attributes.add("alwaysinline")
    run_passes(module, "always-inline", verify=False)


def _has_collective(fn: Function) -> bool:
    for inst in fn.instructions():
        if isinstance(inst, CallInst):
            name = getattr(inst.callee, "name", "")
            if (name == _CONTROL_BARRIER and _is_workgroup(inst)) or name in _REDUCTIONS:
                return True
    return False


def _sites(kernel: Function) -> list[Site]:
    """The kernel's work-group barriers in order, each a control barrier with the work-group function that
    directly follows it, if any (only instructions without side effects between them)."""
    sites = []
    for block in kernel.blocks:
        pending = None
        for inst in block.instructions:
            if not isinstance(inst, CallInst):
                if pending is not None and _has_side_effects(inst):
                    pending = None
                continue
            name = getattr(inst.callee, "name", "")
            if name == _CONTROL_BARRIER and _is_workgroup(inst):
                pending = Site(inst, None)
                sites.append(pending)
            elif name in _REDUCTIONS:
                if pending is not None and pending.reduction is None:
                    pending.reduction, pending.kind = inst, _REDUCTIONS[name]
                else:
                    sites.append(Site(None, inst))
                pending = None
            else:
                pending = None
    return sites


def _is_workgroup(call: CallInst) -> bool:
    scope = call.args[0]
    return isinstance(scope, ConstantInt) and scope.zext_value == _WORKGROUP


def _has_side_effects(inst: Instruction) -> bool:
    return inst.opcode_name in ("store", "load", "atomicrmw", "cmpxchg", "fence", "call", "invoke") or inst.is_terminator


def _hoist_pure_between(b: Builder, site: Site) -> None:
    """Move what lies between a site's control barrier and its work-group function (the predicate's
    extension, without side effects) before the barrier, so the payload can be computed ahead of it."""
    if site.call is None or site.reduction is None:
        return
    inst = site.call.next
    while inst is not None and inst != site.reduction:
        following = inst.next
        inst.remove()
        b.position_before(site.call)
        b.insert(inst)
        inst = following


def _payload(b: Builder, llctx, site: Site):
    """1 (a running work item) plus, in the high half, what the round sums for the site's kind: the
    predicate for barrier_count and barrier_any, its negation for barrier_all."""
    i64 = llctx.i64
    one = ConstantInt.get(i64, 1)
    if site.reduction is None:
        return one
    value = site.reduction.args[0]
    if site.kind == "count":
        counted = b.zext(value, i64)
    else:
        holds = b.icmp("ne", value, ConstantInt.get(value.type, 0))
        counted = b.zext(b.not_(holds) if site.kind == "all" else holds, i64)
    return b.or_(b.shl(counted, ConstantInt.get(i64, 32)), one)


def _result(b: Builder, llctx, site: Site, total):
    """The site's work-group function's result (an i32) from the round's sum."""
    i32 = llctx.i32
    high = b.trunc(b.lshr(total, ConstantInt.get(llctx.i64, 32)), i32)
    if site.kind == "count":
        return high
    if site.kind == "all":
        return b.zext(b.icmp("eq", high, ConstantInt.get(i32, 0)), i32)
    return b.zext(b.icmp("ne", high, ConstantInt.get(i32, 0)), i32)


# -- which kernels need it: a divergence analysis --------------------------------------------------------
#
# A site needs the rounds only where some work items of a group may not reach it while others do: where it
# lies in the region of a branch that work items of one group may take differently (a divergent branch:
# its condition depends on the work item), between the branch and the first block every path from it
# reaches (its immediate post-dominator; the exit where a path returns). A value is divergent where it
# comes from the work item's ids, a private (stack) memory read, an atomic, a sub-group operation or a
# call of code gpuc does not know, or from divergent operands; a phi where divergent control flow joins;
# a value leaving a region of divergent control flow (a loop that work items leave in different iterations).

# Built-ins whose result is the same for every work item of a group.
_UNIFORM = frozenset({"_Z14get_local_sizej", "_Z12get_group_idj", "_Z14get_num_groupsj", "_Z15get_global_sizej",
                      "_Z12get_work_dimv", "_Z22get_max_sub_group_sizev", "_Z18get_num_sub_groupsv",
                      _REDUCE_I64, *_REDUCTIONS})
# Built-ins whose result differs between work items whatever their arguments.
_VARYING = ("_Z12get_local_idj", "_Z13get_global_idj", "_Z22get_sub_group_local_idv", "_Z16get_sub_group_idv",
            "_Z18get_sub_group_sizev", "_Z17sub_group_shuffle", "__spirv_GroupNonUniform")
_ALWAYS_VARYING = frozenset({"atomicrmw", "cmpxchg", "alloca"})


def _divergent_regions(kernel: Function) -> list[set]:
    """The regions (sets of blocks) of the kernel's divergent branches (see above)."""
    blocks = list(kernel.blocks)
    succs = {block: block.successors for block in blocks}
    ipdom = immediate_post_dominators(blocks, succs)
    divergent: set = set()
    regions: dict = {}
    changed = True
    while changed:
        changed = False
        joins = set()
        for region, post in regions.values():
            joins |= region
            if post is not None:
                joins.add(post)
        for block in blocks:
            for inst in block.instructions:
                if inst not in divergent and _diverges(inst, divergent, block in joins):
                    divergent.add(inst)
                    changed = True
            term = block.terminator
            if term is not None and term in divergent and block not in regions:
                regions[block] = (_region(block, succs, ipdom.get(block)), ipdom.get(block))
                changed = True
        # values defined inside a divergent region and used outside it (a loop left in different iterations)
        for region, _ in list(regions.values()):
            for block in region:
                for inst in block.instructions:
                    if inst not in divergent and any(isinstance(u, Instruction) and u.parent not in region
                                                     for u in inst.users):
                        divergent.add(inst)
                        changed = True
    return [region for region, _ in regions.values()]


def _diverges(inst: Instruction, divergent: set, at_join: bool) -> bool:
    op = inst.opcode_name
    if op in _ALWAYS_VARYING:
        return True
    if op == "phi":
        return at_join or any(v in divergent for v in inst.operands)
    if op == "call":
        callee = inst.callee
        name = getattr(callee, "name", "")
        if name in _UNIFORM:
            return False
        if not isinstance(callee, Function) or not callee.is_declaration or name.startswith(_VARYING):
            return True
        return any(a in divergent for a in inst.args)
    if op == "load" and _private(inst.operands[0]):
        return True
    if inst.is_terminator and op not in ("br", "switch"):
        return False
    if op == "br" and len(inst.operands) == 1:
        return False
    if op in ("br", "switch"):
        return inst.operands[0] in divergent
    return any(v in divergent for v in inst.operands)


def _private(pointer) -> bool:
    """Whether `pointer` is based on a stack allocation (a work item's own memory)."""
    for _ in range(64):
        if not isinstance(pointer, Instruction):
            return False
        if pointer.opcode_name == "alloca":
            return True
        if pointer.opcode_name not in ("getelementptr", "bitcast", "addrspacecast", "select", "phi"):
            return False
        pointer = pointer.operands[0]
    return True


def _region(branch, succs, post) -> set:
    """The blocks reachable from `branch`'s block before its immediate post-dominator `post` (None: the exit)."""
    seen, stack = set(), list(succs[branch])
    while stack:
        block = stack.pop()
        if block == post or block in seen:
            continue
        seen.add(block)
        stack.extend(succs[block])
    return seen


def _needs_rounds(kernel: Function, sites: list[Site]) -> bool:
    """Whether some work items of a group may reach a site that others do not."""
    regions = _divergent_regions(kernel)
    return any(site.first.parent in region for site in sites for region in regions)
