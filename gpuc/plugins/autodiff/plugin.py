"""The autodiff plugin: resolve `gpuc.autodiff.fwd.*` marker calls at the `optimized` point.

Written only against the public API (`gpuc.compiler`, `gpuc.errors`, `gpuc.llvm`), as a third party
would. A marker call (docs/autodiff.md)

    %r = call {R, R} @gpuc.autodiff.fwd.<MASK>.<SUFFIX>(ptr @f, <f's arguments>, <one tangent per active>)

asks for f's result and its tangent, MASK saying which parameters of f are active ("1") or constant
("0"). It is replaced by a call of f's tangent function, built once per (f, MASK) from f's optimized
IR. Requests are resolved inner first: a function whose body (or whose callees' bodies) still holds
marker calls is differentiated only after those are resolved and the result optimized, so nested
derivatives stay linear in size. The tangents and the functions calling them are optimized before
the callback returns (`state.optimize`): nothing is left for the rest of the pipeline to do alone.
"""

from __future__ import annotations

import time

from gpuc.abi import (ADJOINT_MARKER, BLOCKWISE_ADJOINT_MARKER, FORWARD_MARKER_PREFIX, PARITY_ADJOINT_MARKER,
                      REVERSE_MARKER_PREFIX,
                      TANGENT_KERNEL_MARKER,
                      SERIAL_ADJOINT_MARKER)
from gpuc.compiler import CompileState, TransformationRecord
from gpuc.errors import CompilationError, SourceLocation  # noqa: F401 - SourceLocation in annotations
from gpuc.llvm import Builder, CallInst, Function, Instruction, Module, PointerType, run_passes

from .cfg import cyclic_blocks, keep_loops_whole, reverse_post_order, successors
from . import blocks, nested, sums
from .kinds import carries_floats, locate
from .reverse import Settings, adjoint_body, gradient_function, gradient_name
from .tangent import tangent_function, tangent_name

PREFIX = FORWARD_MARKER_PREFIX
REVERSE = REVERSE_MARKER_PREFIX
#: The plugin claims every function named with either prefix: one marker per call shape.
MARKERS = (PREFIX + "*", REVERSE + "*")
_ADJOINTS = (ADJOINT_MARKER, SERIAL_ADJOINT_MARKER, PARITY_ADJOINT_MARKER, BLOCKWISE_ADJOINT_MARKER)
#: Requests that make a whole kernel into its derivative: adjoints, and tangent kernels.
_KERNELS = _ADJOINTS + (TANGENT_KERNEL_MARKER,)
#: Above the context plugin's (0), below deferred compilation's: at the early point, adjoints of
#: kernels that use blocks are built once pointers are resolved and before the block model is lowered.
PRIORITY = 50


def resolve(state: CompileState, marker: Function, module: Module) -> bool:
    """The optimized-point callback: resolve every autodiff marker call in the module, inner first."""
    changed = False
    while True:
        calls = _marker_calls(module)
        if not calls:
            break
        ready = _ready(calls, _settings(state, concurrent=False).heap)
        if not ready:
            raise _cycle(calls)
        before = module.function_names()
        callers = {call.function.name for call in ready}
        for call in ready:
            if call.callee.name in _ADJOINTS:
                callers |= _adjoint(state, module, call)
            elif call.callee.name == TANGENT_KERNEL_MARKER:
                callers |= _tangent_kernel(state, module, call)
            else:
                _replace(state, module, call)
        changed = True
        made = module.function_names() - before
        state.optimize([module.functions[n] for n in sorted(made | callers) if n in module.functions])
    for fn in [f for f in module.functions if f.name.startswith((PREFIX, REVERSE))]:
        if fn.is_declaration and not fn.uses:
            fn.erase()
            changed = True
    return changed


def resolve_blocks(state: CompileState, marker: Function, module: Module) -> bool:
    """The early callback: adjoint requests of kernels that use blocks, turned into their adjoints
    before the context plugin lowers the block model for the target (blocks.py). Every other
    request waits for the `optimized` point."""
    changed = False
    for call in [c for c in _marker_calls(module) if c.callee.name in _ADJOINTS]:
        kernel = call.function
        changed |= _keep_loops_whole(module, kernel)
        whole_blocks = state.config.whole_blocks
        if not _inline_callees(state, module, kernel, whole_blocks) or not (blocks.uses_blocks(kernel) or whole_blocks):
            continue
        # (convergent before the requests inside are resolved: optimizing the kernel after each would
        # otherwise thread its branches through a shuffle or barrier, a copy in each arm)
        blocks.prepare(module, kernel)
        _resolve_within(state, module, call)
        state.optimize([kernel])
        made = module.function_names()
        callers = _adjoint(state, module, call)
        state.optimize([module.functions[n] for n in sorted((module.function_names() - made) | callers)
                        if n in module.functions])
        changed = True
    for fn in [f for f in module.functions if f.name in _ADJOINTS]:
        if fn.is_declaration and not fn.uses:
            fn.erase()
    return changed


def _resolve_within(state: CompileState, module: Module, request: CallInst) -> None:
    """Resolve the derivative requests the kernel of the adjoint `request` makes (in its body or its
    callees'), inner first, as the optimized point does, but for those the adjoint differentiates in place
    (nested.py): the adjoint built next differentiates the tangent and gradient functions the others call,
    as it would any func."""
    kernel, heap = request.function, _settings(state, concurrent=False).heap
    while True:
        reached = _reached([kernel])
        calls = [c for c in _marker_calls(module) if c.callee.name not in _KERNELS and c.function.name in reached]
        ready = [c for c in _ready(calls + [request], heap) if c is not request] if calls else []
        if not ready:
            return
        before = module.function_names()
        callers = {call.function.name for call in ready}
        for call in ready:
            _replace(state, module, call)
        made = module.function_names() - before
        state.optimize([module.functions[n] for n in sorted(made | callers) if n in module.functions])


def _keep_loops_whole(module: Module, kernel: Function) -> bool:
    """Ask the optimizer not to unroll by a run-time factor the loops of the adjoint kernel `kernel` and of
    the functions it reaches, before the reverse sweep is built (cfg.keep_loops_whole). Whether anything
    was marked."""
    marked = False
    for name in sorted(_reached([kernel])):
        marked |= keep_loops_whole(module.functions[name])
    return marked


def _inline_callees(state: CompileState, module: Module, kernel: Function, marked: bool = False) -> bool:
    """Inline into `kernel` every function it calls (transitively) that uses the block model, so that
    its barriers and shared memory are the kernel's own, and with `marked` those already `alwaysinline`
    (an adjoint kernel's primal: that of a kernel without blocks launched in whole blocks is built here
    too); whether nothing that uses the block model is left a call."""
    for _ in range(4):
        called = [module.functions[n] for n in _reached([kernel]) - {kernel.name}]
        using = [fn for fn in called if blocks.uses_blocks(fn) or marked and "alwaysinline" in fn.attributes
                 and not fn.is_declaration]
        if not using:
            return True
        for fn in using:
            fn.attributes.remove("noinline")
            fn.attributes.add("alwaysinline")
        run_passes(module, "always-inline", state.target_machine)
    return False


def _marker_calls(module: Module) -> list[CallInst]:
    """Every marker call in the module, each checked for the contract's shape."""
    calls = []
    for fn in module.functions:
        if fn.name in _ADJOINTS:
            calls += [_checked_adjoint(use.user, fn) for use in fn.uses]
        elif fn.name == TANGENT_KERNEL_MARKER:
            calls += [_checked_tangent_kernel(use.user, fn) for use in fn.uses]
        elif fn.name.startswith((PREFIX, REVERSE)):
            calls += [_checked(use.user, fn) for use in fn.uses]
    return calls


def _ready(calls: list[CallInst], heap) -> list[CallInst]:
    """The requests to resolve now: inner requests first, except that a reverse request in a function
    another request differentiates waits for it when the rules of nested.py can differentiate it in
    place (its own derivative then needs no tape of its gradient)."""
    reach = {call: _reached([call.function] if call.callee.name in _KERNELS else [call.args[0]]) for call in calls}

    def waits(call: CallInst) -> bool:
        for other in calls:
            if other is call:
                continue
            if other.function.name in reach[call] and not _defers(call, other, heap):
                return True
            if call.function.name in reach[other] and _defers(other, call, heap):
                return True
        return False

    ready = [call for call in calls if not waits(call)]
    if ready:
        return ready
    # Requests waiting on each other: strictly inner ones first (an adjoint request last in its kernel).
    holding = {call.function.name for call in calls}
    return [call for call in calls if not (reach[call] - {call.function.name}) & holding
            and not (call.callee.name in _KERNELS and sum(1 for c in calls if c.function == call.function) > 1)]


def _defers(request: CallInst, inner: CallInst, heap) -> bool:
    reverse = request.callee.name in _ADJOINTS or request.callee.name.startswith(REVERSE)
    return nested.defers(inner, reverse, heap, outer=None if request.callee.name in _KERNELS else request)


def _kernel_request(user, marker: Function):
    """(the kernel, the call's text, its arguments) of a request that makes a whole kernel its derivative,
    or a CompilationError where `user` is no call of `marker` in a function."""
    caller = user.function if isinstance(user, Instruction) else None
    text = str(user).strip()
    if not isinstance(user, CallInst) or user.callee != marker or caller is None:
        raise CompilationError(f"@{marker.name} is used other than by a direct call in a kernel: {text}")
    return caller, text, user.args


def _checked_adjoint(user, marker: Function) -> CallInst:
    caller, text, args = _kernel_request(user, marker)
    if (not marker.is_declaration or str(user.type) != "void" or len(args) < 3 or len(args) % 2 == 0
            or any(str(a.type) != "i64" for a in args[:3])
            or any(not isinstance(a.type, PointerType) for a in args[3:])):
        raise CompilationError(f"the adjoint request in @{caller.name} is malformed: it must be `call void "
                               f"@{marker.name}(i64 index0, i64 index1, i64 index2, ptr array, ptr shadow, ...)`: "
                               f"{text}", locate(caller, user))
    return user


def _checked_tangent_kernel(user, marker: Function) -> CallInst:
    """`call void @gpuc.autodiff.fwd.kernel(ptr array, ptr tangent, ...)`, each a parameter of the kernel."""
    caller, text, args = _kernel_request(user, marker)
    if (not marker.is_declaration or str(user.type) != "void" or not args or len(args) % 2
            or any(not isinstance(a.type, PointerType) for a in args)):
        raise CompilationError(f"the tangent kernel request in @{caller.name} is malformed: it must be `call void "
                               f"@{marker.name}(ptr array, ptr tangent, ...)`: {text}", locate(caller, user))
    return user


def _checked(user, marker: Function) -> CallInst:
    """`user` as a marker call of the contract's shape, or a CompilationError naming its function."""
    caller = user.function if isinstance(user, Instruction) else None
    text = str(user).strip()
    where = f"@{caller.name}" if caller is not None else "a constant or global initializer"

    def fail(why: str, hint: str | None = None) -> CompilationError:
        return CompilationError(f"the derivative request in {where} is malformed: {why}: {text}",
                                locate(caller, user) if caller is not None else None, hint=hint)

    if not isinstance(user, CallInst) or user.callee != marker:
        raise fail(f"@{marker.name} is used other than by a direct call")
    if not marker.is_declaration:
        raise fail(f"@{marker.name} is defined; it is gpuc's marker for derivatives")
    reverse = marker.name.startswith(REVERSE)
    mask = marker.name[len(REVERSE if reverse else PREFIX):].partition(".")[0]
    if not mask or set(mask) - {"0", "1"} or "1" not in mask:
        raise fail(f"the marker's activity mask {mask!r} is not a string of 0 and 1 with at least one 1")
    args = user.args
    if not args or not isinstance(args[0], Function):
        raise fail("the function to differentiate is a pointer chosen at run time",
                   hint="differentiate a function known when compiling (a gpuc.deferred pointer to it)")
    fn = args[0]
    if fn.is_declaration:
        raise fail(f"@{fn.name} is not defined in the module")
    params, active = fn.function_type.params, [c == "1" for c in mask]
    if len(params) != len(mask):
        raise fail(f"@{fn.name} has {len(params)} parameters; the mask {mask} gives {len(mask)}")
    if reverse:
        return _checked_reverse(user, fn, params, active, fail)
    tangents = [ty for ty, a in zip(params, active) if a]
    wanted = [*params, *tangents]
    given = [a.type for a in args[1:]]
    if [str(t) for t in given] != [str(t) for t in wanted]:
        raise fail(f"the arguments after @{fn.name} must be its own ({', '.join(map(str, params))}) and then "
                   f"one tangent per active parameter ({', '.join(map(str, tangents))})")
    if not all(carries_floats(t) or isinstance(t, PointerType) for t in tangents):
        raise fail("an active parameter carries no floats and is no pointer (whose tangent is its shadow)")
    ret = fn.return_type
    if not carries_floats(ret):  # a function that only writes memory, as a kernel: its tangents go to shadows
        if str(user.type) != str(ret) or not any(isinstance(t, PointerType) for t in tangents):
            raise fail(f"@{fn.name} returns {ret}, which carries no floats: the call must return {ret} and "
                       "give a shadow for at least one pointer, where the tangents go")
        return user
    if str(user.type) != str(marker.parent.context.struct_type([ret, ret])):
        raise fail(f"the call must return {{R, R}} for @{fn.name}'s result type R = {ret}, which carries floats")
    return user


def _checked_reverse(user, fn: Function, params, active, fail) -> CallInst:
    """`{R, A...} @gpuc.autodiff.rev.<MASK>.<SUF>(ptr @f, args..., shadows..., cotangent)`."""
    ctx = fn.parent.context
    if not all(carries_floats(t) or isinstance(t, PointerType) for t, a in zip(params, active) if a):
        raise fail("an active parameter carries no floats and is no pointer")
    ret = fn.return_type
    if not carries_floats(ret):
        raise fail(f"@{fn.name} returns {ret}, which carries no floats to differentiate")
    shadows = [t for t, a in zip(params, active) if a and isinstance(t, PointerType)]
    adjoints = [t for t, a in zip(params, active) if a and not isinstance(t, PointerType)]
    wanted = [*params, *shadows, ret]
    given = [a.type for a in user.args[1:]]
    if [str(t) for t in given] != [str(t) for t in wanted]:
        raise fail(f"the arguments after @{fn.name} must be its own ({', '.join(map(str, params))}), one shadow "
                   f"per active pointer and the cotangent of its result ({ret})")
    if str(user.type) != str(ctx.struct_type([ret, *adjoints])):
        raise fail(f"the call must return {{R, one adjoint per active parameter}} for @{fn.name}")
    return user


def _settings(state: CompileState, *, concurrent: bool, parity: bool = False, blockwise: bool = False) -> Settings:
    target = state.target
    # without a heap, a tape outgrowing its buffer traps or fills the launch's error record (tape.Bounded)
    record = getattr(target, "device_bounds_record", False)
    # the CPU's launch entry runs chunks of items on a thread each: where the config lowers the marker, adds
    # of every item into one element are summed per chunk (sums.py)
    chunk_sums = (concurrent and getattr(target, "chunked_launches", False)
                  and any(m == sums.MARKER for _, m in state.config.markers_at("last")))
    return Settings(heap=getattr(target, "heap_functions", None), float_atomics=getattr(target, "float_atomics", True),
                    float_atomics_missing=getattr(target, "float_atomics_missing", ""), concurrent=concurrent,
                    chunk_sums=chunk_sums,
                    parity=parity, serial_blocks=getattr(target, "serial_blocks", False), target_name=repr(target),
                    blockwise=blockwise, trap=getattr(target, "can_trap", True),
                    record_space=getattr(target, "array_address_space", 1) if record else None,
                    site_space=getattr(target, "constant_address_space", 0),
                    definition=lambda name: _definition(state, name))


def _adjoint(state: CompileState, module: Module, call: CallInst) -> set[str]:
    """Turn the kernel holding an adjoint request into its adjoint; the functions to optimize again."""
    kernel = call.function
    start = time.perf_counter()
    schedule = call.callee.name
    settings = _settings(state, concurrent=schedule != SERIAL_ADJOINT_MARKER, parity=schedule == PARITY_ADJOINT_MARKER,
                         blockwise=schedule == BLOCKWISE_ADJOINT_MARKER)
    try:
        reach, reloaded, apart, slab, kept = adjoint_body(module, kernel, call, settings)
    except CompilationError as exc:
        raise exc.located_at(_definition(state, kernel.name)).with_note(
            f"while building the adjoint kernel @{kernel.name}", None)
    state.trace.transformations.append(TransformationRecord(
        f"{kernel.name}.adjoint", f"@{kernel.name} (adjoint kernel)", state.point, False,
        time.perf_counter() - start, kernel.name, details=(("reach", reach), ("reloaded shared loads", reloaded),
                                                       ("blocks apart", apart), ("slab", slab),
                                                       ("outputs kept", kept))))
    # Kept out of line until now (its primal body had to stay whole): let the launch wrapper inline it.
    kernel.attributes.remove("noinline")
    callers = {use.user.function.name for use in kernel.uses if isinstance(use.user, CallInst)}
    if callers:
        kernel.attributes.add("alwaysinline")
    return callers | {kernel.name}


def _tangent_kernel(state: CompileState, module: Module, call: CallInst) -> set[str]:
    """Turn the kernel holding a tangent kernel request into its tangent kernel: its body becomes the
    tangent function of itself with each requested array's pointer active and the tangent array its
    shadow (tangent.py); the functions to optimize again."""
    kernel = call.function
    args = call.args
    if any(a not in set(kernel.args) for a in args):  # optimized, they are the kernel's own parameters
        raise CompilationError(f"the tangent kernel request in @{kernel.name} names arrays that are not parameters "
                               f"of @{kernel.name}: {str(call).strip()}", locate(kernel, call))
    shadow_of = dict(zip(args[0::2], args[1::2]))
    call.erase()
    start = time.perf_counter()
    active = [a in shadow_of for a in kernel.args]
    try:
        tangent = tangent_function(module, kernel, active, _settings(state, concurrent=True).heap)
    except CompilationError as exc:
        raise exc.located_at(_definition(state, kernel.name)).with_note(
            f"while building the tangent kernel @{kernel.name}", None)
    state.trace.transformations.append(TransformationRecord(
        tangent.name, f"@{kernel.name} (tangent kernel)", state.point, False, time.perf_counter() - start,
        kernel.name))
    kernel.delete_body()
    with Builder(module.context) as b:
        b.position_at_end(kernel.append_block("entry"))
        b.call(tangent, list(kernel.args) + [shadow_of[a] for a in kernel.args if a in shadow_of])
        b.ret()
    tangent.attributes.add("alwaysinline")
    kernel.attributes.remove("noinline")  # kept whole until now; the launch wrapper may inline it
    callers = {use.user.function.name for use in kernel.uses if isinstance(use.user, CallInst)}
    if callers:
        kernel.attributes.add("alwaysinline")
    return callers | {kernel.name, tangent.name}


def _inline_for_loop(call: CallInst, fn: Function) -> bool:
    """Whether `fn`, called by `call` in a loop (a kernel's launch loop on the CPU), is to be inlined
    whatever its size, so that the loop can vectorize (its math calls with it, on vector math
    libraries): the tangent of a loop unrolled before the `optimized` point is larger than the
    inliner's threshold. Not a recursive function, nor one kept out of line on purpose."""
    if "noinline" in fn.attributes or "alwaysinline" in fn.attributes:
        return False
    if any(isinstance(use.user, CallInst) and use.user.function == fn for use in fn.uses):
        return False
    caller = call.function
    order = reverse_post_order(caller)
    preds = {block: [] for block in order}
    for block in order:
        for succ in successors(block):
            if succ in preds:
                preds[succ].append(block)
    return call.parent in cyclic_blocks(order, preds)


def _inline_for_outer(caller: Function, fn: Function) -> bool:
    """Whether `fn` (an inner request's tangent or gradient, called by `caller`) is to be inlined whatever its
    size because `caller` is differentiated itself by a request still to come: a gradient keeps a tape in
    memory, and a call that writes memory cannot be differentiated out of line (its gradient would run it
    twice). Not a recursive function, nor one kept out of line on purpose."""
    if "noinline" in fn.attributes or "alwaysinline" in fn.attributes:
        return False
    if any(isinstance(use.user, CallInst) and use.user.function == fn for use in fn.uses):
        return False
    return any(isinstance(use.user, CallInst) and isinstance(use.user.callee, Function)
               and use.user.callee.name.startswith((PREFIX, REVERSE)) and use.user.args[0] == caller
               for use in caller.uses)


def _definition(state: CompileState, name: str) -> SourceLocation | None:
    """Where the Python function compiled to LLVM function `name` is defined (for an adjoint kernel:
    its primal kernel), when the compile knows."""
    record = state.compiled.get(name)
    function = getattr(record, "source", getattr(record, "function", None))
    function = getattr(function, "adjoint_of", function)
    info = getattr(function, "source_info", None)
    if info is None:
        return None
    try:
        return info.location(info.tree)
    except (AttributeError, TypeError):
        return None


def _reached(roots: list[Function]) -> set[str]:
    """The names of the defined functions in `roots` and of those they refer to (an operand of one of their
    instructions), transitively. Found from the defined functions' uses, which are few, rather than from
    every operand of every instruction."""
    if not roots:
        return set()
    referrers: dict[str, set[str]] = {}  # a defined function -> the functions whose instructions refer to it
    for g in roots[0].parent.functions:
        if not g.is_declaration:
            users = [use.user for use in g.uses]
            referrers[g.name] = {fn.name for fn in (u.function for u in users if isinstance(u, Instruction))
                                 if fn is not None}
    refers: dict[str, list[str]] = {}
    for callee, callers in referrers.items():
        for caller in callers:
            refers.setdefault(caller, []).append(callee)
    seen, todo = set(), [f.name for f in roots if not f.is_declaration]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += refers.get(name, [])
    return seen


def _cycle(calls: list[CallInst]) -> CompilationError:
    names = sorted({f"@{c.function.name} asks for the derivative of @{c.args[0].name}" for c in calls})
    first = calls[0]
    return CompilationError("derivative requests depend on each other in a cycle (each needs the other's "
                            f"derivative resolved first): {'; '.join(names)}", locate(first.function, first),
                            hint="a function cannot be differentiated inside its own derivative")


def _replace(state: CompileState, module: Module, call: CallInst) -> None:
    """Replace one checked marker call by a call of the tangent or gradient function it asks for."""
    fn, caller = call.args[0], call.function
    reverse = call.callee.name.startswith(REVERSE)
    mask = call.callee.name[len(REVERSE if reverse else PREFIX):].partition(".")[0]
    active = [c == "1" for c in mask]
    settings = _settings(state, concurrent=False)
    name = gradient_name(fn, mask, settings) if reverse else tangent_name(fn, active)
    existing = module.functions.get(name)
    reused = existing is not None and not existing.is_declaration
    start = time.perf_counter()
    try:
        if reverse:
            tangent = gradient_function(module, fn, mask, settings)
        else:
            tangent = tangent_function(module, fn, active, settings.heap)
    except CompilationError as exc:
        raise exc.located_at(_definition(state, fn.name)).with_note(
            f"while differentiating @{fn.name}, asked for here (in @{caller.name})", locate(caller, call))
    state.trace.transformations.append(TransformationRecord(
        tangent.name, f"@{fn.name} ({'reverse, ' if reverse else ''}activity {mask})", state.point, reused, time.perf_counter() - start,
        caller.name))
    with Builder(module.context) as b:
        b.position_before(call)
        new = b.call(tangent, call.args[1:])
    call.replace_all_uses_with(new)
    call.erase()
    if _inline_for_loop(new, tangent) or _inline_for_outer(caller, tangent):
        tangent.attributes.add("alwaysinline")
