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

from gpuc.abi import FORWARD_MARKER_PREFIX
from gpuc.compiler import CompileState, TransformationRecord
from gpuc.errors import CompilationError
from gpuc.llvm import Builder, CallInst, Function, Instruction, Module

from .kinds import carries_floats, locate
from .tangent import tangent_function, tangent_name

PREFIX = FORWARD_MARKER_PREFIX
#: The plugin claims every function named with the prefix: one marker per call shape.
MARKERS = (PREFIX + "*",)


def resolve(state: CompileState, marker: Function, module: Module) -> bool:
    """The optimized-point callback: resolve every autodiff marker call in the module, inner first."""
    changed = False
    while True:
        calls = _marker_calls(module)
        if not calls:
            break
        holding = {call.function.name for call in calls}
        ready = [call for call in calls if not _reaches(call.args[0], holding)]
        if not ready:
            raise _cycle(calls)
        before = module.function_names()
        callers = {call.function.name for call in ready}
        for call in ready:
            _replace(state, module, call)
        changed = True
        made = module.function_names() - before
        state.optimize([module.functions[n] for n in sorted(made | callers) if n in module.functions])
    for fn in [f for f in module.functions if f.name.startswith(PREFIX)]:
        if fn.is_declaration and not fn.uses:
            fn.erase()
            changed = True
    return changed


def _marker_calls(module: Module) -> list[CallInst]:
    """Every marker call in the module, each checked for the contract's shape."""
    calls = []
    for fn in module.functions:
        if fn.name.startswith(PREFIX):
            calls += [_checked(use.user, fn) for use in fn.uses]
    return calls


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
        raise fail(f"@{marker.name} is defined; it is gpuc's marker for forward-mode derivatives")
    mask = marker.name[len(PREFIX):].partition(".")[0]
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
    tangents = [ty for ty, a in zip(params, active) if a]
    wanted = [*params, *tangents]
    given = [a.type for a in args[1:]]
    if [str(t) for t in given] != [str(t) for t in wanted]:
        raise fail(f"the arguments after @{fn.name} must be its own ({', '.join(map(str, params))}) and then "
                   f"one tangent per active parameter ({', '.join(map(str, tangents))})")
    if not all(carries_floats(t) for t in tangents):
        raise fail("an active parameter carries no floats")
    ret = fn.return_type
    if not carries_floats(ret) or str(user.type) != str(marker.parent.context.struct_type([ret, ret])):
        raise fail(f"the call must return {{R, R}} for @{fn.name}'s result type R = {ret}, which carries floats")
    return user


def _reaches(fn: Function, holding: set[str]) -> bool:
    """Whether `fn`, or a function it refers to (transitively), holds a marker call."""
    seen, todo = set(), [fn]
    while todo:
        f = todo.pop()
        if f.name in seen or f.is_declaration:
            continue
        seen.add(f.name)
        if f.name in holding:
            return True
        for inst in f.instructions():
            todo += [op for op in inst.operands if isinstance(op, Function)]
    return False


def _cycle(calls: list[CallInst]) -> CompilationError:
    names = sorted({f"@{c.function.name} asks for the derivative of @{c.args[0].name}" for c in calls})
    first = calls[0]
    return CompilationError("derivative requests depend on each other in a cycle (each needs the other's "
                            f"derivative resolved first): {'; '.join(names)}", locate(first.function, first),
                            hint="a function cannot be differentiated inside its own derivative")


def _replace(state: CompileState, module: Module, call: CallInst) -> None:
    """Replace one checked marker call by a call of the tangent function it asks for."""
    fn, caller = call.args[0], call.function
    mask = call.callee.name[len(PREFIX):].partition(".")[0]
    active = [c == "1" for c in mask]
    existing = module.functions.get(tangent_name(fn, active))
    reused = existing is not None and not existing.is_declaration
    start = time.perf_counter()
    try:
        tangent = tangent_function(module, fn, active)
    except CompilationError as exc:
        raise exc.with_note(f"while differentiating @{fn.name}, asked for here (in @{caller.name})",
                            locate(caller, call))
    state.trace.transformations.append(TransformationRecord(
        tangent.name, f"@{fn.name} (activity {mask})", state.point, reused, time.perf_counter() - start,
        caller.name))
    with Builder(module.context) as b:
        b.position_before(call)
        new = b.call(tangent, call.args[1:])
    call.replace_all_uses_with(new)
    call.erase()
