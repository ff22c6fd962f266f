"""Context propagation: resolve the `gpuc.ctx.index` / `gpuc.ctx.ndrange` markers for each target.

Written only against the public API (`gpuc.abi`, `gpuc.errors`, `gpuc.llvm`, registered through
`gpuc.compiler.register_plugin`), as a third party would. The contract is docs/kernel-abi.md; the
target says how its kernels read the launch context (`Target.launch_context`, docs/targets.md):

- "context-pointer" (the CPU): every function that reaches a marker (directly or through calls)
  gets a trailing `ptr %gpuc.ctx` parameter, passed on at every call site; a marker call becomes
  a load from the `%gpuc.Context = type { [3 x i64] index, [3 x i64] ndrange }` it points to.
- "work-item-registers" (GPUs): `index(d)` becomes the target's global work-item id
  (`Target.global_index`); the launch size is threaded as trailing `i64 %gpuc.n0, %gpuc.n1,
  %gpuc.n2` parameters, and a kernel returns early for work items outside it (grids are rounded
  up to whole blocks).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuc.abi import (ALL_CONTEXT_MARKERS, BARRIER_MARKER, BLOCK_INDEX_MARKER, BLOCK_MODEL_ATTRIBUTE, POSITION_DIMS_ATTRIBUTE,
                      THREAD_INDEX_MARKER, BARRIER_PREDICATE_MARKERS, BLOCK_MARKERS, CONTEXT_FIELDS,
                      CONTEXT_PARAM, DYNAMIC_SHARED_GLOBAL, FENCE_MARKERS, GEOMETRY_MARKERS,
                      GRID_BARRIER_MARKER, INDEX_MARKER, LAUNCH_SIZE_PARAMS, DYNAMIC_SHARED_PARAMS, MAX_EXTENT, NDRANGE_MARKER,
                      SHARED_BYTES_MARKER, BLOCK_KERNEL_FLAG, SHARED_MARKER, SHUFFLE_MARKER_PREFIX,
                      SYNCWARP_MARKER, VOTE_MARKERS, WARP_SIZE_MARKER, context_type)
from gpuc.errors import CompilationError
from gpuc.llvm import (AllocaInst, Builder, CallInst, ConstantInt, Function, FunctionType, Instruction, Module,
                       run_passes)

from .context_pointers import pass_through_pointers, promote_pointer_calls, reaching, threaded

INDEX, NDRANGE = INDEX_MARKER, NDRANGE_MARKER
MARKERS = ALL_CONTEXT_MARKERS
FIELDS = CONTEXT_FIELDS
#: Markers of the form `i64 (i32 dim)`.
DIMENSIONED = (INDEX_MARKER, NDRANGE_MARKER) + GEOMETRY_MARKERS
_PREDICATE_KINDS = {name: kind for kind, name in BARRIER_PREDICATE_MARKERS.items()}
_VOTE_KINDS = {name: kind for kind, name in VOTE_MARKERS.items()}
_FENCE_SCOPES = {name: scope for scope, name in FENCE_MARKERS.items()}


# -- finding marker calls and the functions that reach them -------------------------------------

@dataclass(frozen=True)
class ContextCall:
    """One call of a context marker: `marker` (INDEX or NDRANGE) along dimension `dim`."""

    call: CallInst
    marker: str  # one of MARKERS
    dim: int  # for DIMENSIONED markers; 0 for the others

    @property
    def site(self) -> str:
        """Where the call is in the source ("file:line:col"), for markers that say it, else ""."""
        args = self.call.args
        name = args[-1].name if args and str(args[-1].type) == "ptr" else ""
        return name[len("gpuc.site."):] if name.startswith("gpuc.site.") else ""


def _marker_calls(module: Module) -> list[ContextCall]:
    """Every marker call in the module, checked: direct calls; those of DIMENSIONED markers are of
    `i64 (i32)` with a constant dim 0-2."""
    found = []
    for name in MARKERS:
        marker = module.functions.get(name)
        if marker is None:
            continue
        if name in DIMENSIONED and str(marker.function_type) != "i64 (i32)":
            raise CompilationError(f"@{name} is declared as {marker.function_type}, not i64 (i32)",
                                   hint=f"declare it as `declare i64 @{name}(i32)` (docs/kernel-abi.md)")
        for use in list(marker.uses):
            call = use.user
            if not isinstance(call, CallInst) or call.callee != marker:
                where = f" in @{call.function.name}" if isinstance(call, Instruction) else ""
                raise CompilationError(f"@{name} is used other than by a direct call{where}: "
                                       f"{str(call).strip()}", hint="markers can only be called")
            found.append(ContextCall(call, name, _dim(call, name) if name in DIMENSIONED else 0))
    return found


def _dim(call: CallInst, name: str) -> int:
    arg = call.args[0]
    where = f"@{call.function.name}: `{str(call).strip()}`"
    if not isinstance(arg, ConstantInt):
        raise CompilationError(f"the dimension passed to @{name} must be a constant 0, 1 or 2, not a runtime "
                               f"value, in {where}", hint="write the dimension as a literal, e.g. gpuc.index(0)")
    if arg.value not in (0, 1, 2):
        raise CompilationError(f"dimension {arg.value} of @{name} is out of range (0, 1 or 2) in {where}",
                               hint="index spaces have at most 3 dimensions")
    return arg.value


def _reaching(module: Module, seeds) -> list[Function]:
    """`seeds` and every function that may call one of them, directly or through a pointer
    (cycles and recursion are fine; gpuc/plugins/context_pointers.py)."""
    return reaching(module, seeds)[0]


def _taken_as_value(module: Module, calls) -> bool:
    """Whether a function that reaches a marker is used other than by a direct call."""
    try:
        return reaching(module, {c.call.function for c in calls})[1]
    except CompilationError:
        return True


def _thread(module: Module, seeds, types, names) -> dict[Function, Function]:
    """Give the functions that need them for `seeds` the trailing parameters `types` (`names`),
    passed on at direct calls and, where pointers are involved, at calls through pointers."""
    functions, through_pointers = threaded(module, seeds)
    rebuilt = thread_params(module, functions, types, names)
    if through_pointers:
        pass_through_pointers(module, list(rebuilt.values()), len(types))
    return rebuilt


# -- adding trailing parameters ----------------------------------------------------------------

def thread_params(module: Module, functions, types, names) -> dict[Function, Function]:
    """Give each of `functions` trailing parameters (`types`, `names`) and pass the caller's own at
    every call site; every caller of one of them must be among them. Where a function's address is
    taken, the new function's address takes its place (calls through pointers: see
    context_pointers.pass_through_pointers). Returns old -> new (the old functions are erased,
    their names taken by the new ones)."""
    rebuilt = {old: _with_params(module, old, types, names) for old in functions}
    builder = Builder(module.context)
    try:
        for old, new in rebuilt.items():
            calls = {use.user: None for use in old.uses if isinstance(use.user, CallInst) and use.user.callee == old}
            for call in calls:
                _pass_params(builder, call, new, len(types))
            if old.uses:  # its address, where taken
                old.replace_all_uses_with(new)
    finally:
        builder.close()
    for old, new in rebuilt.items():
        name = old.name
        old.erase()
        new.name = name
    return rebuilt


def _with_params(module: Module, old: Function, types, names) -> Function:
    fnty = old.function_type
    if fnty.is_vararg:
        raise CompilationError(f"@{old.name} takes variable arguments and reaches a gpuc.ctx marker",
                               hint="functions using the launch context cannot be variadic")
    tmp, n = f"{old.name}.gpuc.ctx", 0
    while tmp in module.functions:
        n += 1
        tmp = f"{old.name}.gpuc.ctx{n}"
    new = module.add_function(tmp, FunctionType.get(fnty.return_type, [*fnty.params, *types]))
    new.linkage = old.linkage
    cc = old.calling_convention
    new.calling_convention = int(cc[2:]) if cc.startswith("cc") else cc
    new.attributes.copy_from(old.attributes)
    new.return_attributes.copy_from(old.return_attributes)
    if old.section:
        new.section = old.section
    if old.alignment:
        new.alignment = old.alignment
    old_args, new_args = old.args, new.args
    for i, (a, b) in enumerate(zip(old_args, new_args)):
        new.param_attributes(i).copy_from(old.param_attributes(i))
        b.name = a.name
        if a.uses:
            a.replace_all_uses_with(b)
    for arg, name in zip(new_args[len(old_args):], names):
        arg.name = name
    for block in list(old.blocks):
        new.append_existing_block(block)
    return new


def _pass_params(builder: Builder, call: CallInst, new: Function, count: int) -> None:
    caller, name = call.function, call.name
    if name:
        call.name = ""  # free the name for the replacement
    builder.position_before(call)
    replacement = builder.call(new, [*call.args, *caller.args[-count:]], name)
    replacement.calling_convention = call.calling_convention
    if call.uses:
        call.replace_all_uses_with(replacement)
    call.erase()


def _erase_markers(module: Module) -> None:
    for name in MARKERS:
        marker = module.functions.get(name)
        if marker is not None and not marker.uses:
            marker.erase()


# -- the CPU -------------------------------------------------------------------------------------

def _lower_context_pointer(job, module: Module, calls: list[ContextCall]) -> None:
    entry = module.functions.get(job.source.entry_name)
    blocks = any(c.marker in BLOCK_MARKERS for c in calls)
    if job.config.kernel and entry is not None and (blocks or job.config.whole_blocks):
        _lower_block_kernel(job, module, entry, calls)
        return
    if blocks:
        c = next(c for c in calls if c.marker in BLOCK_MARKERS)
        raise CompilationError(_at(c, f"@{c.call.function.name} uses blocks ({c.marker[9:]}) but is not compiled "
                                      "as a kernel"), hint="compile it as a kernel (CompilerConfig(kernel=True))")
    fences = [c for c in calls if c.marker in _FENCE_SCOPES]
    if fences:
        with Builder(module.context) as builder:
            for c in fences:
                builder.position_before(c.call)
                builder.fence("seq_cst")
                c.call.erase()
        calls = [c for c in calls if c.marker not in _FENCE_SCOPES]
        if not calls:
            return
    llctx = module.context
    ctx_ty = context_type(module)
    _thread(module, {c.call.function for c in calls}, [llctx.ptr()], [CONTEXT_PARAM])
    i32 = llctx.i32
    with Builder(llctx) as builder:
        for c in calls:  # the calls moved with their blocks into the rebuilt functions
            ctx = c.call.function.args[-1]
            builder.position_before(c.call)
            field = builder.gep(ctx_ty, ctx, [ConstantInt.get(i32, 0), ConstantInt.get(i32, FIELDS[c.marker]),
                                              ConstantInt.get(i32, c.dim)])
            value = builder.load(llctx.i64, field, f"{c.marker[9:]}{c.dim}", align=8)
            _assume_in_range(builder, module, value)
            _replace(c.call, value)


def _lower_block_kernel(job, module: Module, entry: Function, calls: list[ContextCall]) -> None:
    """The CPU's block kernels (gpuc/plugins/workitems.py): every function reaching a marker is
    inlined into the kernel, which then runs one whole block per call."""
    calls = _inline_into_kernel(job, module, entry, calls)
    stray = [c for c in calls if c.call.function != entry]
    if stray:
        c = stray[0]
        raise CompilationError(_at(c, f"@{c.call.function.name} uses the launch context (gpuc.{c.marker[9:]}) and "
                                      f"could not be inlined into the kernel, as a kernel with blocks needs on the CPU"),
                               hint="functions using blocks or gpuc.index() in such a kernel cannot be recursive; "
                                    "through function pointers they can be called from the kernel and the funcs "
                                    "it calls, not from recursive funcs")
    run_passes(module, "function(sroa,instsimplify)", getattr(job, "target_machine", None))
    rebuilt = thread_params(module, [entry], [module.context.ptr()], [CONTEXT_PARAM])
    kernel = rebuilt[entry]
    from .workitems import lower_blocks
    lower_blocks(job, module, kernel)
    flag = module.add_global(module.context.i8, BLOCK_KERNEL_FLAG)
    grid = any(c.marker == GRID_BARRIER_MARKER for c in calls)
    flag.initializer = ConstantInt.get(module.context.i8, 2 if grid else 1)
    flag.is_global_constant = True


def _inline_into_kernel(job, module: Module, entry: Function, calls: list[ContextCall]) -> list[ContextCall]:
    """Inline every function that reaches a marker into the kernel `entry`; returns the marker calls
    left. A call through a pointer that may reach one becomes a choice among direct calls
    (context_pointers.promote_pointer_calls), and those are inlined too."""
    tm = getattr(job, "target_machine", None)
    promoted, kept = [], []
    for _ in range(3):  # inlining, then pointers, then what they call
        reaching = _reaching(module, {c.call.function for c in calls}) if calls else []
        for fn in reaching:
            if fn != entry:
                fn.attributes.add("alwaysinline")
        if len(reaching) > 1:
            run_passes(module, "always-inline", tm)
        calls = _marker_calls(module)
        if promoted or not any(c.call.function != entry for c in calls):
            break
        run_passes(module, "function(sroa,instsimplify)", tm)  # constant pointers become direct calls
        promoted, kept = promote_pointer_calls(module, entry)
        if not promoted:
            break
    if promoted:
        _drop_unreachable_bodies(module, promoted, kept)
        calls = _marker_calls(module)
    return calls


def _drop_unreachable_bodies(module: Module, promoted, kept) -> None:
    """After promote_pointer_calls and inlining: a function of `promoted` that is no longer called
    directly, where every call through a pointer left is one of `kept` (which see only pointers to
    no such function), is never called: its body (and the markers in it) becomes `unreachable`."""
    kept = set(kept)
    for fn in module.functions:
        if not fn.is_declaration and any(isinstance(i, CallInst) and not isinstance(i.callee, Function)
                                         and i not in kept for i in fn.instructions()):
            return
    with Builder(module.context) as builder:
        for fn in promoted:
            if fn.is_declaration or any(isinstance(u.user, CallInst) and u.user.callee == fn for u in fn.uses):
                continue
            linkage = fn.linkage
            fn.delete_body()
            builder.position_at_end(fn.append_block("never.called"))
            builder.unreachable()
            fn.linkage = linkage


def _assume_in_range(builder: Builder, module: Module, value) -> None:
    # Indices and sizes lie in [0, 2**62). Saying so (an assume survives inlining into the CPU
    # runtime's loop, where the load is forwarded away) lets LLVM drop Python's negative-index
    # wraparound from `a[gpuc.index() + 1]` and `a[gpuc.index() - 1]` alike (no overflow is
    # possible near the index), which would otherwise block vectorization.
    assume = module.get_or_insert_function("llvm.assume", FunctionType.get(module.context.void, [module.context.i1]))
    builder.call(assume, [builder.icmp("ult", value, ConstantInt.get(module.context.i64, MAX_EXTENT))])


def _replace(call: CallInst, value) -> None:
    if call.uses:
        call.replace_all_uses_with(value)
    call.erase()


# -- GPUs ------------------------------------------------------------------------------------

def _lower_work_item_registers(job, module: Module, calls: list[ContextCall]) -> None:
    target = job.config.target
    index = target.global_index
    entry = module.functions.get(job.source.entry_name)
    # A kernel launched in whole blocks (block=) runs every work item of every block; otherwise
    # those beyond the launch size return at once (grids are rounded up to whole blocks).
    guarded = (job.config.kernel and not job.config.whole_blocks and entry is not None
               and str(entry.return_type) == "void" and entry in _reaching(module, {c.call.function for c in calls}))
    seeds = {c.call.function for c in calls if c.marker == NDRANGE} | ({entry} if guarded else set())
    i64 = module.context.i64
    # Dynamic shared memory as parameters (Target.dynamic_shared_parameters): every function that
    # takes the launch sizes takes them too, before the sizes, so that one set of trailing
    # parameters is threaded (thread_params passes a caller's last ones on).
    dynamic = [c for c in calls if _uses_dynamic_shared(c)] if target.dynamic_shared_parameters else []
    if dynamic:
        if not (job.config.kernel and entry is not None):
            raise CompilationError(_at(dynamic[0], "gpuc.shared.dynamic is a kernel parameter on "
                                                   f"{target.name}: compile the kernel that uses it"))
        seeds |= {c.call.function for c in dynamic} | {entry}
        ptr = module.context.ptr(target.shared_address_space)
        types, names = [ptr, i64] + [i64] * 3, list(DYNAMIC_SHARED_PARAMS + LAUNCH_SIZE_PARAMS)
    else:
        types, names = [i64] * 3, LAUNCH_SIZE_PARAMS
    rebuilt = _thread(module, seeds, types, names) if seeds else {}
    with Builder(module.context) as builder:
        for c in calls:
            builder.position_before(c.call)
            fn = c.call.function
            if c.marker == INDEX:
                value = index(builder, module, c.dim)
            elif c.marker == NDRANGE:
                value = fn.args[len(fn.args) - 3 + c.dim]
            elif c in dynamic:
                value = fn.args[len(fn.args) - (5 if c.marker == SHARED_MARKER else 4)]
            else:
                value = _lower_block_marker(target, builder, module, c)
            read = c.marker == INDEX or c.marker in GEOMETRY_MARKERS
            if read and str(value.type) == "i64" and not value.is_constant:
                # as on the CPU: an index the target reads from a register or a built-in (SPIR-V's
                # get_global_id) is not known to be small, and Python's negative-index wraparound stays
                _assume_in_range(builder, module, value)
            _replace(c.call, value)
        if guarded:
            # Every dimension, not only those the kernel reads: a kernel indexing only dim 0 but
            # launched 2-D must not run its body again in the extra rows of a rounded-up grid.
            _guard(builder, module, rebuilt[entry], (0, 1, 2), index)
    dynamic = module.globals.get(DYNAMIC_SHARED_GLOBAL)
    if dynamic is not None and not dynamic.uses:
        dynamic.erase()


def _uses_dynamic_shared(c: ContextCall) -> bool:
    return c.marker == SHARED_BYTES_MARKER or (c.marker == SHARED_MARKER and c.call.args[0].name == DYNAMIC_SHARED_GLOBAL)


def _lower_block_marker(target, builder: Builder, module: Module, c: ContextCall):
    """The value (or None) of a block-model marker call, from the target's hooks (docs/targets.md)."""
    name, args = c.marker, c.call.args
    if name in GEOMETRY_MARKERS:
        what = name[len("gpuc.ctx."):]
        if name == SHARED_BYTES_MARKER:
            return _dynamic_shared(target, builder, module, c)[1]
        if name == WARP_SIZE_MARKER and target.warp_size is not None:
            return ConstantInt.get(module.context.i64, target.warp_size)
        return target.work_item(builder, module, what, c.dim)
    if name == SHARED_MARKER:
        if args[0].name == DYNAMIC_SHARED_GLOBAL:
            return _dynamic_shared(target, builder, module, c)[0]
        return args[0]
    if name == BARRIER_MARKER:
        return target.barrier(builder, module)
    if name in _PREDICATE_KINDS:
        return target.barrier(builder, module, _PREDICATE_KINDS[name], args[0])
    if name == GRID_BARRIER_MARKER:
        if target.grid_barrier_missing is not None:
            raise CompilationError(_at(c, f"gpuc.grid_barrier() {target.grid_barrier_missing}"),
                                   hint="split the kernel in two launches where the grid must synchronize")
        return target.grid_barrier(builder, module)
    if name in _FENCE_SCOPES:
        return target.fence(builder, module, _FENCE_SCOPES[name])
    if name == SYNCWARP_MARKER:
        return target.syncwarp(builder, module)
    if name in _VOTE_KINDS:
        return target.vote(builder, module, _VOTE_KINDS[name], args[0])
    if name.startswith(SHUFFLE_MARKER_PREFIX):
        kind = name[len(SHUFFLE_MARKER_PREFIX):].split(".")[0]
        return target.shuffle(builder, module, kind, args[0], args[1])
    raise AssertionError(f"no lowering for the marker @{name}")


def _dynamic_shared(target, builder: Builder, module: Module, c: ContextCall):
    if target.dynamic_shared_missing is not None:
        raise CompilationError(_at(c, f"gpuc.shared.dynamic {target.dynamic_shared_missing}"),
                               hint="use gpuc.shared.array(shape, dtype) with a constant shape")
    return target.dynamic_shared(builder, module, DYNAMIC_SHARED_GLOBAL)


def _at(c: ContextCall, message: str) -> str:
    where = c.site or f"@{c.call.function.name}"
    return f"{where}: {message}"


def _guard(builder: Builder, module: Module, kernel: Function, dims, index) -> None:
    """Make `kernel` return at once for work items outside the launch size along `dims`."""
    body = kernel.entry_block
    guard = kernel.append_block("gpuc.guard")
    guard.move_before(body)
    outside = kernel.append_block("gpuc.outside")
    builder.position_at_end(outside)
    builder.ret()
    builder.position_at_end(guard)
    for inst in list(body.instructions):  # static allocas stay in the entry block, where SROA finds them
        if isinstance(inst, AllocaInst) and inst.operands[0].is_constant:
            inst.remove()
            builder.insert(inst)
    n = kernel.args[len(kernel.args) - 3:]
    inside = None
    for d in dims:
        ok = builder.icmp("ult", index(builder, module, d), n[d], f"inside{d}")
        inside = ok if inside is None else builder.and_(inside, ok)
    builder.cond_br(inside, body, outside)


# -- the plugin --------------------------------------------------------------------------------

# How each kind of target reads its launch context (Target.launch_context).
_RESOLVERS = {"context-pointer": _lower_context_pointer, "work-item-registers": _lower_work_item_registers}


def resolve(job, marker: Function, module: Module) -> bool:
    """The early callback: resolve every context marker in the module at once."""
    target = job.config.target
    how = getattr(target, "launch_context", None)
    lower = _RESOLVERS.get(how)
    if lower is None:
        raise NotImplementedError(f"context propagation does not know how {target!r} reads the launch context: "
                                  f"its launch_context is {how!r}, not one of {', '.join(map(repr, _RESOLVERS))}")
    calls = _marker_calls(module)
    if calls and _taken_as_value(module, calls):
        # A gpuc.deferred pointer kept in a local variable: promoting locals to registers turns a
        # call through a constant pointer into a direct call. What is still a value after that
        # (a pointer chosen at run time) is refused by the lowering.
        run_passes(module, "function(sroa,instsimplify)", getattr(job, "target_machine", None))
        calls = _marker_calls(module)
    if calls:
        _record_launch_facts(job, module, calls)
        lower(job, module, calls)
    _erase_markers(module)
    return True


#: The markers that read a work item's position along a dimension.
_POSITION = (INDEX_MARKER, THREAD_INDEX_MARKER, BLOCK_INDEX_MARKER)
#: The markers whose meaning depends on the block size (a grid barrier's does not): a launch needs block=.
_NEED_BLOCKS = frozenset(BLOCK_MARKERS) - {GRID_BARRIER_MARKER}


def _record_launch_facts(job, module: Module, calls: list[ContextCall]) -> None:
    """Tell the launchers, on the kernel entry, along which dimensions the kernel reads a work item's
    position and whether it uses the block model (gpuc/abi.py: POSITION_DIMS_ATTRIBUTE,
    BLOCK_MODEL_ATTRIBUTE); a later round (functions compiled in since) adds to what an earlier one found."""
    entry = module.functions.get(getattr(job.source, "entry_name", None) or "")
    if entry is None or not job.config.kernel:
        return
    dims = set(entry.attributes.get(POSITION_DIMS_ATTRIBUTE) or "") | {str(c.dim) for c in calls
                                                                         if c.marker in _POSITION}
    entry.attributes.add(POSITION_DIMS_ATTRIBUTE, "".join(sorted(dims)))
    first = next((c for c in calls if c.marker in _NEED_BLOCKS), None)
    if first is not None and entry.attributes.get(BLOCK_MODEL_ATTRIBUTE) is None:
        entry.attributes.add(BLOCK_MODEL_ATTRIBUTE, f"gpuc.{first.marker[len('gpuc.ctx.'):]}"
                                                    + (f" at {first.site}" if first.site else ""))

