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

from gpuc.abi import (CONTEXT_FIELDS, CONTEXT_MARKERS, CONTEXT_PARAM, INDEX_MARKER, LAUNCH_SIZE_PARAMS, MAX_EXTENT,
                      NDRANGE_MARKER, context_type)
from gpuc.errors import CompilationError
from gpuc.llvm import (AllocaInst, Builder, CallInst, ConstantInt, Function, FunctionType, Instruction, Module,
                       run_passes)

INDEX, NDRANGE = INDEX_MARKER, NDRANGE_MARKER
MARKERS = CONTEXT_MARKERS
FIELDS = CONTEXT_FIELDS


# -- finding marker calls and the functions that reach them -------------------------------------

@dataclass(frozen=True)
class ContextCall:
    """One call of a context marker: `marker` (INDEX or NDRANGE) along dimension `dim`."""

    call: CallInst
    marker: str  # INDEX or NDRANGE
    dim: int


def _marker_calls(module: Module) -> list[ContextCall]:
    """Every marker call in the module, checked: direct calls of `i64 (i32)` with a constant dim 0-2."""
    found = []
    for name in MARKERS:
        marker = module.functions.get(name)
        if marker is None:
            continue
        if str(marker.function_type) != "i64 (i32)":
            raise CompilationError(f"@{name} is declared as {marker.function_type}, not i64 (i32)",
                                   hint=f"declare it as `declare i64 @{name}(i32)` (docs/kernel-abi.md)")
        for use in list(marker.uses):
            call = use.user
            if not isinstance(call, CallInst) or call.callee != marker:
                where = f" in @{call.function.name}" if isinstance(call, Instruction) else ""
                raise CompilationError(f"@{name} is used other than by a direct call{where}: "
                                       f"{str(call).strip()}", hint="markers can only be called")
            found.append(ContextCall(call, name, _dim(call, name)))
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
    """`seeds` and every function calling one of them, transitively (cycles and recursion are fine)."""
    found, work = {}, list(seeds)
    while work:
        fn = work.pop()
        if fn in found:
            continue
        found[fn] = True
        for use in fn.uses:
            user = use.user
            if isinstance(user, CallInst) and user.callee == fn and user.called_function_type == fn.function_type:
                work.append(user.function)
                continue
            where = f" in @{user.function.name}" if isinstance(user, Instruction) else ""
            raise CompilationError(
                f"@{fn.name} reaches a gpuc.ctx marker (gpuc.index/gpuc.ndrange) but is used other than by a "
                f"direct call{where}: {str(user).strip()}",
                hint="functions that use the launch context can only be called directly, not through pointers")
    return [fn for fn in module.functions if fn in found]  # module order: deterministic output


def _taken_as_value(module: Module, calls) -> bool:
    """Whether a function that reaches a marker is used other than by a direct call."""
    try:
        _reaching(module, {c.call.function for c in calls})
    except CompilationError:
        return True
    return False


# -- adding trailing parameters ----------------------------------------------------------------

def thread_params(module: Module, functions, types, names) -> dict[Function, Function]:
    """Give each of `functions` trailing parameters (`types`, `names`) and pass the caller's own at
    every call site; every caller of one of them must be among them. Returns old -> new (the old
    functions are erased, their names taken by the new ones)."""
    rebuilt = {old: _with_params(module, old, types, names) for old in functions}
    builder = Builder(module.context)
    try:
        for old, new in rebuilt.items():
            for use in list(old.uses):
                _pass_params(builder, use.user, new, len(types))
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
    llctx = module.context
    ctx_ty = context_type(module)
    thread_params(module, _reaching(module, {c.call.function for c in calls}), [llctx.ptr()], [CONTEXT_PARAM])
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
    index = job.config.target.global_index
    entry = module.functions.get(job.source.entry_name)
    guarded = (job.config.kernel and entry is not None and str(entry.return_type) == "void"
               and entry in _reaching(module, {c.call.function for c in calls}))
    seeds = {c.call.function for c in calls if c.marker == NDRANGE} | ({entry} if guarded else set())
    i64 = module.context.i64
    rebuilt = thread_params(module, _reaching(module, seeds), [i64] * 3, LAUNCH_SIZE_PARAMS) if seeds else {}
    with Builder(module.context) as builder:
        for c in calls:
            builder.position_before(c.call)
            fn = c.call.function
            _replace(c.call, index(builder, module, c.dim) if c.marker == INDEX else fn.args[len(fn.args) - 3 + c.dim])
        if guarded:
            # Every dimension, not only those the kernel reads: a kernel indexing only dim 0 but
            # launched 2-D must not run its body again in the extra rows of a rounded-up grid.
            _guard(builder, module, rebuilt[entry], (0, 1, 2), index)


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
        lower(job, module, calls)
    _erase_markers(module)
    return True

