"""Stencils on the CPU: split the inner loop of a launch where its clamps stop clamping.

A stencil reads its neighbours through clamped indices (`src[min(max(x + dx, 0), width - 1)]`).
On the CPU, a launch runs the kernel in a loop over index 0 (gpuc/targets/cpu_launch.py), and after
inlining each clamp is an `llvm.smin`/`smax`/`umin`/`umax`/`usub.sat` of `index0 + c` and a value the
loop does not change. Each clamp returns its input on a range of index 0 that the loop's preheader can
compute: `smin(i + c, B)` for `i <= B - c`, `smax(i + c, B)` for `i >= B - c`, and so on. This plugin
runs the loop in three parts: before that range (the loop as it was), inside it (a copy whose
clamps are their inputs, so neighbouring addresses are plain offsets that the optimizer can combine
and vectorize), and after it (another unchanged copy). Every part does what the original loop did
for its iterations, so values are unchanged.

When it optimizes, the CPU launch entry calls the marker (`SPLIT_MARKER`) with index 0 in that loop;
the callback fires at the `simplified` point, when inlining has made the clamps visible and before the
loop optimizations, and removes the calls.
It splits loops of one induction variable stepping by one, with a single exit at the latch and no
values used after the loop, and leaves every other loop alone.

Bounds checks (CompilerConfig(boundscheck=True), docs/debugging.md) are split the same way: a check
`icmp ult (i + c), n` whose failure calls abi.BOUNDS_FAILURE passes on the range `-c <= i < n - c`, and
a check of a value the loop does not change passes everywhere or nowhere. The middle copy runs where
every such check passes, with those checks replaced by `true`, so the checked kernel's hot loop is the
unchecked one (it vectorizes); iterations outside that range run the checked loop, which records the
first failure as before.
"""

from __future__ import annotations

from gpuc.abi import BOUNDS_FAILURE, FORWARD_MARKER_PREFIX, REVERSE_MARKER_PREFIX, SPLIT_MARKER, VECTORIZE_MARKER
from gpuc.compiler import CompileState
from gpuc.llvm import (BasicBlock, BinaryOperator, Builder, BranchInst, CallInst, CompareInst,
                       ConstantInt, Function, FunctionType, Instruction, Module, PHINode, SelectInst)

MARKER = SPLIT_MARKER
#: The markers whose code the autodiff plugin builds at the optimized point.
_AUTODIFF_MARKERS = (FORWARD_MARKER_PREFIX, REVERSE_MARKER_PREFIX)
#: Loops with more instructions than this are not copied (code size and compile time).
MAX_LOOP_INSTRUCTIONS = 4000
#: Offsets from the induction variable that the analysis accepts, and the induction variable's bound
#: inside the split range, so that `i + c` never wraps there.
MAX_OFFSET = 1 << 32
MAX_INDEX = 1 << 62
_CLAMPS = ("llvm.smin", "llvm.smax", "llvm.umin", "llvm.umax")
#: The compares of `iv + c` with a value the loop does not change that guard work, their operands swapped
#: and their negations.
_GUARDS = ("slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge", "eq", "ne")
_SWAPPED = {"slt": "sgt", "sle": "sge", "sgt": "slt", "sge": "sle", "ult": "ugt", "ule": "uge", "ugt": "ult", "uge": "ule",
            "eq": "eq", "ne": "ne"}
_NEGATED = {"slt": "sge", "sle": "sgt", "sgt": "sle", "sge": "slt", "ult": "uge", "ule": "ugt", "ugt": "ule", "uge": "ult",
            "eq": "ne", "ne": "eq"}


def resolve(state: CompileState, marker: Function, module: Module) -> bool:
    """The `simplified` and `optimized` callback: split the clamped loops of every launch entry, then drop the
    marker. A loop whose body the autodiff plugin builds at the optimized point (a derivative or gradient in it,
    an adjoint kernel kept out of line) keeps its call until then: split before, each part would be derived
    anew. There the split comes before the loop is vectorized, and only its middle part is (the vectorize
    marker's calls in the parts before and after it go)."""
    calls = [use.user for use in marker.uses]
    later = [call for call in calls if state.point == "simplified" and _built_later(call)]
    headers = [call.args[0].parent for call in calls
               if call not in later and isinstance(call, CallInst) and isinstance(call.args[0], PHINode)]
    for call in calls:
        if call not in later:
            call.erase()
    if not marker.uses:
        marker.erase()
    split = False
    for header in headers:
        loop = _Loop.match(header)
        if loop is not None and loop.split(module, vectorize_middle_only=state.point != "simplified"):
            split = True
    # Erasing the marker's calls needs no cleanup round; a split does (its copies simplify). At the optimized
    # point the vectorize plugin waits for the calls to go: another round finds its markers.
    return split or (state.point != "simplified" and bool(headers))


def _built_later(call) -> bool:
    """Whether the loop of marker call `call` is built at the optimized point: its function calls an autodiff
    marker (a derivative or gradient in the body), or a function kept out of line (`noinline`) that does (an
    adjoint kernel, until its reverse sweep is built)."""
    def marker(fn) -> bool:
        return isinstance(fn, Function) and fn.is_declaration and fn.name.startswith(_AUTODIFF_MARKERS)

    for block in call.parent.parent.blocks:
        for inst in block.instructions:
            callee = inst.callee if isinstance(inst, CallInst) else None
            if marker(callee):
                return True
            if isinstance(callee, Function) and not callee.is_declaration and "noinline" in callee.attributes and \
                    any(isinstance(i, CallInst) and marker(i.callee) for i in callee.instructions()):
                return True
    return False


class _Loop:
    """A loop `header`..`latch` of blocks `body` with induction variable `iv` from `start` (in
    `preheader`), `step = iv + 1`, and the exit test `exit_test(step, end)` at the latch."""

    def __init__(self, header, latch, preheader, body, iv, step, test, end, exit_block):
        self.header, self.latch, self.preheader, self.body = header, latch, preheader, body
        self.iv, self.step, self.test, self.end, self.exit = iv, step, test, end, exit_block
        self.start = iv.incoming_value_for(preheader)
        self.inside = {i for block in body for i in block.instructions}

    @classmethod
    def match(cls, header: BasicBlock):
        phis = [i for i in header.instructions if isinstance(i, PHINode)]
        if len(phis) != 1 or phis[0].type != header.parent.context.i64:
            return None
        iv = phis[0]
        incoming = iv.incoming
        if len(incoming) != 2:
            return None
        latch = next((blk for v, blk in incoming if _is_increment(v, iv)), None)
        if latch is None:
            return None
        preheader = next(blk for v, blk in incoming if blk != latch)
        step = iv.incoming_value_for(latch)
        branch = latch.terminator
        if not isinstance(branch, BranchInst) or not branch.is_conditional:
            return None
        stay, leave = branch.successors
        test = branch.condition
        if stay != header or not isinstance(test, CompareInst) or test.predicate not in ("ult", "slt", "ne"):
            return None
        if test.operands[0] != step or len(test.uses) != 1:
            return None
        body = _blocks_between(header, latch)
        if body is None or leave in body:
            return None
        end = test.operands[1]
        loop = cls(header, latch, preheader, body, iv, step, test, end, leave)
        if not loop._well_formed():
            return None
        return loop

    def _well_formed(self) -> bool:
        """Single entry and exit, nothing of the loop used after it, `end` and `start` loop-invariant."""
        if any(isinstance(i, PHINode) for i in self.exit.instructions):
            return False
        if not self.invariant(self.end) or self.preheader in self.body:
            return False
        count = 0
        for block in self.body:
            for inst in block.instructions:
                count += 1
                if any(not isinstance(u, Instruction) or u not in self.inside for u in inst.users):
                    return False
            if block != self.latch and any(s not in self.body for s in block.successors):
                return False  # a second exit
            if block != self.header and any(p not in self.body for p in block.predecessors):
                return False  # a second entry
        return count <= MAX_LOOP_INSTRUCTIONS

    def invariant(self, v) -> bool:
        return not isinstance(v, Instruction) or v not in self.inside

    # -- the clamps ------------------------------------------------------------------------------

    def clamps(self):
        """(each clamp call whose input is affine in `iv`, with its input's offset) and the bounds
        [(kind, value)] on `iv` under which all of them return their input."""
        memo, bounds, found = {}, [], []

        def affine(v, depth=0):
            """c with v == iv + c inside the bounds, or None."""
            if v == self.iv:
                return 0
            if not isinstance(v, Instruction) or v not in self.inside or depth > 32:
                return None
            if v in memo:
                return memo[v]
            memo[v] = None  # cycles through phis are not affine
            result = None
            if isinstance(v, BinaryOperator) and v.opcode_name in ("add", "sub"):
                c = affine(v.lhs, depth + 1)
                k = _small(v.rhs)
                if c is not None and k is not None:
                    result = c + k if v.opcode_name == "add" else c - k
                elif v.opcode_name == "add" and _small(v.lhs) is not None:
                    c = affine(v.rhs, depth + 1)
                    result = None if c is None else c + _small(v.lhs)
            elif isinstance(v, CallInst):
                result = self._clamp(v, affine, bounds, found, depth)
            if result is not None and abs(result) >= MAX_OFFSET:
                result = None
            memo[v] = result
            return result

        for block in self.body:
            for inst in block.instructions:
                if isinstance(inst, CallInst) and inst.intrinsic_name in _CLAMPS + ("llvm.usub.sat",):
                    affine(inst)
        self.guards = {}
        for compare, value in self._guards().items():
            bound = self._guard_bound(compare, value, affine)
            if bound is not None:
                bounds.append(bound)
                self.guards[compare] = value
        self.checks, self.invariant_checks = [], []
        for check in self._bounds_checks():
            x, limit = check.operands
            if not self.invariant(limit):
                continue
            if self.invariant(x):
                self.invariant_checks.append(check)
                continue
            c = affine(x)
            if c is not None:
                bounds.append(("ult", limit, c))
                self.checks.append(check)
        return found, bounds

    def _bounds_checks(self):
        """The compares `icmp ult index, extent` of the loop's bounds checks: the leaves of the `and`s that
        a branch tests whose other way calls abi.BOUNDS_FAILURE (gpuc/frontend/passes/lowering.py)."""
        leaves = []
        for block in self.body:
            branch = block.terminator
            if not isinstance(branch, BranchInst) or not branch.is_conditional:
                continue
            failing = branch.successors[1]
            if failing not in self.body or not any(isinstance(i, CallInst) and isinstance(i.callee, Function)
                                                   and i.callee.name == BOUNDS_FAILURE
                                                   for i in failing.instructions):
                continue
            work = [branch.condition]
            while work:
                v = work.pop()
                if isinstance(v, CompareInst) and v.predicate == "ult":  # outside the loop: an invariant check
                    if v not in leaves:
                        leaves.append(v)
                elif isinstance(v, BinaryOperator) and v.opcode_name == "and" and v in self.inside:
                    work += [v.lhs, v.rhs]
        return leaves

    def _guards(self) -> dict:
        """{compare: the value it takes where the item does its work} for the integer compares that guard work
        in the loop: a branch on the compare (or on an `and` of compares taken, an `or` of compares not taken)
        whose one way is the other's join (`if i > 0 and i < n - 1: ...`, `if i >= n: return`) wants the way
        that does more. A compare wanted both ways is left out."""
        wanted: dict = {}
        i1 = self.header.parent.context.i1
        for block in self.body:
            branch = block.terminator
            if not isinstance(branch, BranchInst) or not branch.is_conditional:
                continue
            taken, other = branch.successors
            if self._joins(other, taken):
                value = True
            elif self._joins(taken, other):
                value = False
            else:
                continue
            work = [branch.condition]
            while work:
                v = work.pop()
                if isinstance(v, CompareInst) and v.predicate in _GUARDS and v in self.inside:
                    wanted.setdefault(v, set()).add(value)
                elif isinstance(v, BinaryOperator) and v in self.inside and v.type == i1 and \
                        v.opcode_name == ("and" if value else "or"):
                    work += [v.lhs, v.rhs]
                elif isinstance(v, SelectInst) and v in self.inside and v.type == i1:
                    # `a and b` is `select a, b, false`, `a or b` is `select a, true, b`
                    fixed, rest = (v.operands[2], v.operands[1]) if value else (v.operands[1], v.operands[2])
                    if isinstance(fixed, ConstantInt) and fixed.zext_value == (0 if value else 1):
                        work += [v.condition, rest]
        return {compare: values.pop() for compare, values in wanted.items() if len(values) == 1}

    def _joins(self, join, start) -> bool:
        """Whether every way from `start` through the loop's body passes `join` before it reaches the latch or
        a block that ends it (`unreachable`: a trap), `start` not being `join`: `join` post-dominates it."""
        if start == join or join not in self.body or start not in self.body:
            return False
        seen, work = set(), [start]
        while work:
            block = work.pop()
            if block == join or block in seen:
                continue
            onward = [s for s in block.successors if s in self.body and s != self.header]
            if block == self.latch or not onward:
                return False
            seen.add(block)
            work += onward
        return True

    def _guard_bound(self, compare, value: bool, affine):
        """The bound ("guard", predicate, limit, c) on `iv` under which `compare` (of `iv + c` with a value
        the loop does not change, i64) is `value`, or None."""
        x, limit = compare.operands
        predicate = compare.predicate
        if x.type != self.iv.type:
            return None
        if not self.invariant(limit):
            x, limit, predicate = limit, x, _SWAPPED[predicate]
        c = affine(x) if self.invariant(limit) else None
        if c is None:
            return None
        predicate = predicate if value else _NEGATED[predicate]
        if predicate == "eq":
            return None  # one item: no range to run without it
        return ("guard", predicate, limit, c)

    def _clamp(self, call, affine, bounds, found, depth):
        name, args = call.intrinsic_name, call.args
        if call.type != self.iv.type or len(args) != 2:
            return None
        if name == "llvm.usub.sat":
            c, k = affine(args[0], depth + 1), _small(args[1])
            if c is None or k is None or k < 0:
                return None
            bounds.append(("lo", ConstantInt.get(call.type, k - c)))  # iv + c >= k
            found.append((call, args[0], k))
            return c - k
        if name not in _CLAMPS:
            return None
        for x, limit in ((args[0], args[1]), (args[1], args[0])):
            c = affine(x, depth + 1)
            if c is not None and self.invariant(limit):
                bounds.append((name, limit, c))
                found.append((call, x, None))
                return c
        return None

    # -- the split ---------------------------------------------------------------------------------

    def split(self, module: Module, vectorize_middle_only: bool = False) -> bool:
        """Split the loop (see the module doc); False when it has no clamps of the induction variable.
        `vectorize_middle_only`: the vectorize marker's calls stay in the middle part alone."""
        found, bounds = self.clamps()
        if not (found or self.checks or self.invariant_checks or self.guards):
            return False
        fn = self.header.parent
        with Builder(module.context) as b:
            b.position_before(self.preheader.terminator)
            valid, low, high = self._range(b, module, bounds)
            enter = b.or_(b.icmp("eq", valid, ConstantInt.get(valid.type, 0)), b.icmp("slt", self.start, low))
            middle, after = _Copy(self, fn, b, "split.middle"), _Copy(self, fn, b, "split.after")
            guard_middle, guard_after = fn.append_block("split.to_middle"), fn.append_block("split.to_after")
            _retarget(self.preheader.terminator, self.header, guard_middle, enter, b)
            _bound(self.test, self.latch, low, self.exit, guard_middle)
            # each copy is entered from a preheader of its own (what the vectorize plugin takes for a loop)
            into_middle, into_after = fn.append_block("split.middle.preheader"), fn.append_block("split.after.preheader")
            b.position_at_end(guard_middle)
            b.cond_br(b.icmp("slt", low, high), into_middle, guard_after)
            b.position_at_end(into_middle)
            b.br(middle.header)
            middle.enter(into_middle, low, high, guard_after)
            b.position_at_end(guard_after)
            b.cond_br(b.icmp("slt", high, self.end), into_after, self.exit)
            b.position_at_end(into_after)
            b.br(after.header)
            after.enter(into_after, high, self.end, self.exit)
            # the checks pass on the whole middle part: those computed before the loop where the middle part
            # uses them, then the middle part's own copies
            passed = ConstantInt.get(module.context.i1, 1)
            outside = {check for check in self.invariant_checks if check not in self.inside}
            for inst in middle.vmap.values():
                for i, op in enumerate(inst.operands):
                    if op in outside:
                        inst.operands[i] = passed
            for check in self.checks + self.invariant_checks:
                if check not in outside:
                    copy = middle.vmap[check]
                    copy.replace_all_uses_with(passed)
                    copy.erase()
            for guard, value in self.guards.items():  # and each guard takes the value it has there
                if guard in self.checks or guard in self.invariant_checks:
                    continue  # the same compare as a bounds check (passed there, so both ranges hold)
                copy = middle.vmap[guard]
                copy.replace_all_uses_with(ConstantInt.get(module.context.i1, int(value)))
                copy.erase()
            if vectorize_middle_only:
                for inst in [i for block in self.body for i in block.instructions]:
                    if isinstance(inst, CallInst) and isinstance(inst.callee, Function) and \
                            inst.callee.name == VECTORIZE_MARKER:
                        after.vmap[inst].erase()
                        inst.erase()
            found.reverse()  # a clamp's input may be another clamp, found before it: outer ones first
            copies = [middle.vmap[call] for call, _, _ in found]
            for copy, (_, x, k) in zip(copies, found):
                source = middle.value(x)
                if k is not None:
                    b.position_before(copy)
                    source = b.sub(source, ConstantInt.get(copy.type, k))
                copy.replace_all_uses_with(source)
            for copy in copies:
                copy.erase()
        return True

    def _range(self, b, module, bounds):
        """(whether the split applies, the first and one past the last iv of the clamp-free part),
        clipped to [start, end]; where it does not apply both are `end` and the original loop runs it all."""
        i64 = self.iv.type
        low, high = self.start, ConstantInt.get(i64, MAX_INDEX)

        def sat(op, x, y):
            return b.call(module.declare_intrinsic(f"llvm.{op}.sat.i64", FunctionType.get(i64, [i64, i64])), [x, y])

        def pick(op, x, y):
            return b.call(module.declare_intrinsic(f"llvm.{op}.i64", FunctionType.get(i64, [i64, i64])), [x, y])

        one = ConstantInt.get(i64, 1)
        # an item the range must leave out (`iv + c != limit`) is cut last, leaving the longer side of it
        for bound in sorted(bounds, key=lambda bound: bound[:2] == ("guard", "ne")):
            if bound[0] == "lo":
                low = pick("smax", low, bound[1])
                continue
            if bound[0] == "guard":
                low, high = _guarded(b, bound[1:], low, high, sat, pick)
                continue
            name, limit, c = bound
            at = sat("ssub", limit, ConstantInt.get(i64, c))  # iv + c compared with limit: iv against limit - c
            if name == "ult":  # a bounds check, 0 <= iv + c < limit (as unsigned: a negative limit passes all)
                low = pick("smax", low, ConstantInt.get(i64, -c))
                negative = b.icmp("slt", limit, ConstantInt.get(i64, 0))
                high = pick("smin", high, b.select(negative, ConstantInt.get(i64, MAX_INDEX), at))
            elif name == "llvm.smax":
                low = pick("smax", low, at)
            elif name == "llvm.smin":
                high = pick("smin", high, sat("sadd", at, one))
            else:  # unsigned: iv + c must be non-negative, and a negative limit is past every such value
                low = pick("smax", low, ConstantInt.get(i64, -c))
                negative = b.icmp("slt", limit, ConstantInt.get(i64, 0))
                if name == "llvm.umin":
                    high = pick("smin", high, b.select(negative, ConstantInt.get(i64, MAX_INDEX), sat("sadd", at, one)))
                else:
                    low = pick("smax", low, b.select(negative, ConstantInt.get(i64, MAX_INDEX), at))
        zero = ConstantInt.get(i64, 0)
        valid = b.and_(b.icmp("sge", self.start, zero), b.icmp("slt", self.start, self.end))
        for check in self.invariant_checks:  # checks of values the loop does not change: all pass, or no middle
            valid = b.and_(valid, b.icmp("ult", *check.operands))
        low = b.select(valid, pick("smin", pick("smax", low, self.start), self.end), self.end)
        high = b.select(valid, pick("smin", pick("smax", high, low), self.end), self.end)
        return valid, low, high


def _guarded(b, guard, low, high, sat, pick):
    """[low, high) narrowed to where `iv + c <predicate> limit` holds (`guard`: predicate, limit, c); iv is
    non-negative and below MAX_INDEX there, so iv + c does not wrap. An unsigned compare is a signed one where
    iv + c >= 0 and the limit is non-negative; a negative limit is above every such value."""
    predicate, limit, c = guard
    i64 = limit.type
    one = ConstantInt.get(i64, 1)
    at = sat("ssub", limit, ConstantInt.get(i64, c))  # iv + c against limit: iv against limit - c
    if predicate == "ne":  # iv != at: [low, at) or [at + 1, high), the longer, where at is in [low, high)
        inside = b.and_(b.icmp("sge", at, low), b.icmp("slt", at, high))
        # the part after it (high - at - 1 items) unless the part before it (at - low) is longer by two or more
        above = b.icmp("sge", b.sub(high, at), b.sub(at, low))
        return (b.select(b.and_(inside, above), b.add(at, one), low),
                b.select(b.and_(inside, b.not_(above)), at, high))
    upper = predicate in ("slt", "sle", "ult", "ule")
    if predicate in ("sle", "sgt", "ule", "ugt"):
        at = sat("sadd", at, one)  # iv <= at: iv < at + 1; iv > at: iv >= at + 1
    if predicate[0] == "u":
        low = pick("smax", low, ConstantInt.get(i64, -c))
        negative = b.icmp("slt", limit, ConstantInt.get(i64, 0))
        at = b.select(negative, ConstantInt.get(i64, MAX_INDEX), at)
    if upper:
        return low, pick("smin", high, at)
    return pick("smax", low, at), high


class _Copy:
    """A copy of a loop's blocks at the end of `fn`, entered by `enter`."""

    def __init__(self, loop: _Loop, fn, b, name: str):
        self.loop = loop
        self.bmap = {block: fn.append_block(f"{name}.{block.name}") for block in loop.body}
        self.vmap = {}
        phis = []
        for block in loop.body:
            b.position_at_end(self.bmap[block])
            for inst in block.instructions:
                if isinstance(inst, PHINode):
                    phis.append(inst)
                    self.vmap[inst] = b.phi(inst.type, name=inst.name)
                    continue
                self.vmap[inst] = b.insert(inst.clone(), inst.name)
        for block in loop.body:
            for inst in block.instructions:
                copy = self.vmap[inst]
                if isinstance(inst, PHINode):
                    continue
                for i, op in enumerate(inst.operands):
                    mapped = self.value(op)
                    if mapped is not op:
                        copy.operands[i] = mapped
        for phi in phis:
            if phi == loop.iv:
                continue
            for value, block in phi.incoming:
                self.vmap[phi].add_incoming(self.value(value), self.bmap[block])
        self.header = self.bmap[loop.header]

    def value(self, v):
        if isinstance(v, BasicBlock):
            return self.bmap.get(v, v)
        if isinstance(v, Instruction):
            return self.vmap.get(v, v)
        return v

    def enter(self, guard, first, end, exit_block) -> None:
        """Run iv from `first` (coming from `guard`) while the exit test against `end` holds, then
        leave to `exit_block`."""
        loop = self.loop
        iv = self.vmap[loop.iv]
        iv.add_incoming(first, guard)
        iv.add_incoming(self.vmap[loop.step], self.bmap[loop.latch])
        _bound(self.vmap[loop.test], self.bmap[loop.latch], end, loop.exit, exit_block)


def _bound(test, latch, end, old_exit, new_exit) -> None:
    """Make the exit test `test` of a loop compare with `end`, and its `latch` leave to `new_exit`."""
    test.operands[1] = end
    branch = latch.terminator
    for i, op in enumerate(branch.operands):
        if isinstance(op, BasicBlock) and op == old_exit:
            branch.operands[i] = new_exit


def _retarget(branch, old, new_else, cond, b) -> None:
    """Replace the preheader's `br old` by `br cond, old, new_else`."""
    block = branch.parent
    branch.erase()
    b.position_at_end(block)
    b.cond_br(cond, old, new_else)


def _is_increment(v, iv) -> bool:
    return (isinstance(v, BinaryOperator) and v.opcode_name == "add" and v.lhs == iv and _small(v.rhs) == 1)


def _small(v):
    """The value of an i64 constant of moderate size, else None."""
    if isinstance(v, ConstantInt) and v.type.width == 64:
        k = v.value
        return k if abs(k) < MAX_OFFSET else None
    return None


def _blocks_between(header, latch):
    """The blocks of the loop with this header and latch: those that reach the latch without passing
    the header; None when that set is not a plausible natural loop."""
    body, work = {header}, [latch]
    while work:
        block = work.pop()
        if block in body:
            continue
        body.add(block)
        preds = block.predecessors
        if not preds:
            return None
        work.extend(preds)
        if len(body) > 256:
            return None
    return [blk for blk in header.parent.blocks if blk in body]

