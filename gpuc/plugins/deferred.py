"""Deferred compilation: resolve `gpuc.lookup` marker calls by compiling the functions they name.

Written only against the public API (`gpuc.compiler`, `gpuc.errors`, `gpuc.llvm`), as a third party
would. The frontend lowers `gpuc.deferred(f, *args)` to `call ptr @gpuc.lookup(ptr @SYM)`, where
`@SYM` is a declaration of f's deterministic symbol with the function type calls through the pointer
use, and records `compiled[SYM] = CompiledFunction(f, signature, kernel=..., requested_at=...)`.

At the `early` point this plugin compiles each such symbol into the module (`compile_into`, once per
symbol however often and from wherever it is asked for) and replaces each marker call by the
function itself. Code it compiles may ask for further functions: a worklist resolves them in the
same callback, so nesting of any depth, cycles and recursion through pointers cost one round of the
point's fixpoint, not one round per level. Once the marker calls are gone a pointer is a constant,
and the optimizer turns calls through it into direct calls (and may inline them).
"""

from __future__ import annotations

from gpuc.abi import LOOKUP_MARKER
from gpuc.compiler import CompiledFunction, CompileState, run_deep
from gpuc.errors import CompilationError
from gpuc.llvm import CallInst, Function, Instruction, Module

MARKER = LOOKUP_MARKER
# Runs before plugins of default priority at the same point (docs/deferred.md), so that their
# early callbacks see the deferred functions compiled and the pointers constant.
PRIORITY = 100


def resolve(state: CompileState, marker: Function, module: Module) -> bool:
    """The early callback: resolve every `gpuc.lookup` call, including those in what it compiles."""
    if not marker.is_declaration or str(marker.function_type) != "ptr (ptr)":
        raise CompilationError(f"@{MARKER} is {'defined' if not marker.is_declaration else 'declared'} as "
                               f"{marker.function_type}; it is gpuc's marker for deferred compilation",
                               hint=f"only declare it, as `declare ptr @{MARKER}(ptr)`")
    # The whole worklist on the compile thread (gpuc.compiler.run_deep; inline where the driver runs
    # this point there already), not one hand-over per function compiled.
    return run_deep(_resolve_all, state, marker)


def _resolve_all(state: CompileState, marker: Function) -> bool:
    changed = False
    while True:
        calls = [_checked_call(use.user, marker) for use in list(marker.uses)]
        if not calls:
            break
        for call in calls:
            target = _resolved(state, call.args[0], call.function.name)
            call.replace_all_uses_with(target)
            call.erase()
            changed = True
    marker.erase()
    return changed


def _checked_call(user, marker: Function) -> CallInst:
    """`user` as a marker call of the contract's shape: `call ptr @gpuc.lookup(ptr @function)`."""
    if not isinstance(user, CallInst) or user.callee != marker:
        raise CompilationError(f"@{MARKER} is used other than by a direct call{_where(user)}: {str(user).strip()}",
                               hint=f"@{MARKER} can only be called, as `call ptr @{MARKER}(ptr @function)`")
    args = user.args
    if len(args) != 1 or not isinstance(args[0], Function) or str(user.type) != "ptr":
        raise CompilationError(f"@{MARKER} must be called with one function and return ptr{_where(user)}: "
                               f"{str(user).strip()}",
                               hint=f"call it as `call ptr @{MARKER}(ptr @function)`, the function declared "
                                    "with the type calls through the pointer use")
    return user


def _where(user) -> str:
    return f" in @{user.function.name}" if isinstance(user, Instruction) and user.function else ""


def _resolved(state: CompileState, fn: Function, requester: str) -> Function:
    """The definition `fn` stands for: `fn` itself once the module defines it, else compiled from
    its record in `state.compiled`. Kernels asked for as such are kept as entry points."""
    record = state.compiled.get(fn.name)
    if fn.is_declaration:
        if record is None:
            raise CompilationError(
                f"@{requester} asks for a pointer to @{fn.name}, which the module does not define and "
                "no record in `compiled` says how to compile",
                hint="the frontend records what each deferred symbol stands for (CompiledFunction); "
                     "a plugin asking for a function by symbol must record it too")
        fn = _compile(state, fn, record, requester)
    if record is not None and record.kernel:
        state.add_entry(fn)
    return fn


def _compile(state: CompileState, decl: Function, record: CompiledFunction, requester: str) -> Function:
    """Compile `record` into the module for the declaration `decl`; the declaration is then gone."""
    symbol, wanted, module = decl.name, decl.function_type, state.module
    try:
        fn = state.compile_into(record.as_source(), kernel=record.kernel, requested_by=requester)
    except CompilationError as exc:
        raise exc.with_note(f"while compiling @{symbol}, asked for by gpuc.deferred here", record.requested_at)
    # `decl` may be gone: linking replaces a declaration by a new function of the same name.
    left = module.functions.get(symbol)
    if left is None or left == fn or not left.is_declaration:
        return fn
    if fn.function_type != wanted:
        raise CompilationError(
            f"@{symbol} was asked for as {wanted}, but compiles to @{fn.name} of type {fn.function_type}",
            record.requested_at, hint="the pointer's type must be the function's type for its signature")
    left.replace_all_uses_with(fn)
    left.erase()
    return fn
