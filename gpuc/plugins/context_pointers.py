"""Context propagation through function pointers: which functions take the launch parameters.

Part of the context plugin (gpuc/plugins/context.py), written against the same public API. A
function that reads the launch context gets trailing parameters (the CPU's context pointer, the
GPUs' launch sizes) and every direct caller passes its own on. A function whose address is taken
may be called where the optimizer cannot see which function a pointer holds (a pointer chosen at
run time, passed into or returned from a func), so pointers follow one convention, chosen per
module: as soon as one function that needs the parameters has its address taken, *every*
function whose address is taken gets them, and every call through a pointer passes the caller's
own, whatever it calls. The caller of a pointer thus needs the parameters too, and so do its
callers. Modules in which no such function has its address taken are left as they were.
"""

from __future__ import annotations

from gpuc.abi import FORWARD_MARKER_PREFIX, REVERSE_MARKER_PREFIX, SITE_METADATA
from gpuc.errors import CompilationError
from gpuc.llvm import Builder, CallInst, Function, FunctionType, Instruction, Module


def reaching(module: Module, seeds) -> tuple[list[Function], bool]:
    """(`seeds` and every function that may call one of them, in module order; whether a pointer
    is involved). A function calls another directly, or through a pointer: when a function among
    them has its address taken, every function that calls through a pointer may call it."""
    found, work, through_pointers = {}, list(seeds), False
    while work:
        fn = work.pop()
        if fn in found:
            continue
        found[fn] = True
        callers, taken = _users(fn)
        work += callers
        if taken and not through_pointers:
            through_pointers = True
            work += _pointer_callers(module)
    return [fn for fn in module.functions if fn in found], through_pointers


def threaded(module: Module, seeds) -> tuple[list[Function], bool]:
    """(the functions that get the launch parameters for `seeds`, in module order; whether calls
    through pointers must pass them): `reaching(seeds)`, and when a pointer is involved, every
    function whose address is taken and their callers too (the convention is the module's)."""
    found, through_pointers = reaching(module, seeds)
    if not through_pointers:
        return found, False
    found, _ = reaching(module, found + _address_taken(module))
    return found, True


def pass_through_pointers(module: Module, functions, count: int) -> None:
    """Append the caller's last `count` parameters to every call through a pointer in `functions`
    (each of which already has them, from `thread_params`)."""
    calls = [inst for fn in functions for inst in fn.instructions()
             if isinstance(inst, CallInst) and not isinstance(inst.callee, Function)]
    if not calls:
        return
    with Builder(module.context) as builder:
        for call in calls:
            _extend(builder, call, count)


def _extend(builder: Builder, call: CallInst, count: int) -> None:
    caller, fnty = call.function, call.called_function_type
    if fnty.is_vararg:
        raise CompilationError(f"@{caller.name} calls through a pointer a function with variable arguments, in a "
                               "module whose pointers pass the launch context",
                               hint="functions called through pointers cannot be variadic")
    extra = caller.args[len(caller.args) - count:]
    name = call.name
    if name:
        call.name = ""  # free the name for the replacement
    builder.position_before(call)
    new = builder.call(call.callee, [*call.args, *extra], name,
                       fnty=FunctionType.get(fnty.return_type, [*fnty.params, *(a.type for a in extra)]))
    new.calling_convention = call.calling_convention
    new.is_tail_call = call.is_tail_call
    new.attributes.copy_from(call.attributes)
    new.return_attributes.copy_from(call.return_attributes)
    for i in range(len(fnty.params)):
        new.param_attributes(i).copy_from(call.param_attributes(i))
    site = call.string_metadata(SITE_METADATA)
    if site is not None:
        new.set_string_metadata(SITE_METADATA, site)
    if call.uses:
        call.replace_all_uses_with(new)
    call.erase()


def _users(fn: Function, strict: bool = True) -> tuple[list[Function], bool]:
    """(the functions calling `fn` directly; whether its address is taken). `strict`, for a function
    that needs the launch parameters: a use they cannot follow is a CompilationError; otherwise
    such a use (`fn` handed to a function the module does not define, e.g. a plugin's marker)
    does not count as taking its address."""
    callers, taken = [], False
    for use in fn.uses:
        user = use.user
        if isinstance(user, CallInst) and user.callee == fn:
            if user.called_function_type != fn.function_type:
                if strict:
                    raise _misused(fn, user, "called with another function type")
                continue
            callers.append(user.function)
            if any(a == fn for a in user.args):
                taken = True
            continue
        if not isinstance(user, Instruction) or user.function is None:
            if strict:
                raise _misused(fn, user, "used other than by an instruction (in a constant or a global)")
        elif isinstance(user, CallInst) and isinstance(user.callee, Function) and user.callee.is_declaration:
            if strict and user.callee.name.startswith((FORWARD_MARKER_PREFIX, REVERSE_MARKER_PREFIX)):
                raise _differentiated(fn, user)
            if strict:
                raise _misused(fn, user, f"handed to @{user.callee.name} (which the module does not define)")
            continue
        taken = True
    return callers, taken


def _differentiated(fn: Function, user) -> CompilationError:
    """The error for a derivative (gpuc.grad, gpuc.derivative, ...) of `fn`, which uses the launch context,
    asked for by `user`: located at the request, where the frontend recorded it (gpuc.compiler.source_site)."""
    from gpuc.compiler import source_site  # (the compiler imports the plugins)

    return CompilationError(
        f"a derivative of @{fn.name} is asked for in @{user.function.name}, and @{fn.name} uses the launch context "
        "(gpuc.index, the block's geometry, shared memory, barriers or warp operations), which derivatives do not "
        "differentiate through", source_site(user),
        hint="read the index or geometry in the kernel and pass it to the function as an argument; keep shared "
             "memory and synchronization in the kernel (gpuc.adjoint of the kernel differentiates them)")


def _misused(fn: Function, user, how: str) -> CompilationError:
    where = f" in @{user.function.name}" if isinstance(user, Instruction) and user.function else ""
    return CompilationError(
        f"@{fn.name} reaches a gpuc.ctx marker (it uses the launch context) but is {how}{where}: "
        f"{str(user).strip()}",
        hint="functions that use the launch context can be called directly or through function pointers "
             "(gpuc.deferred), and pointers to them passed to and returned from funcs")


def _pointer_callers(module: Module) -> list[Function]:
    """The functions that call through a pointer."""
    return [fn for fn in module.functions if not fn.is_declaration
            and any(isinstance(i, CallInst) and not isinstance(i.callee, Function) for i in fn.instructions())]


def _address_taken(module: Module) -> list[Function]:
    """Every function whose address is taken; each must be defined, as it gets parameters."""
    taken = []
    for fn in module.functions:
        if fn.name.startswith("llvm.") or not fn.uses or not _users(fn, strict=False)[1]:
            continue
        if fn.is_declaration:
            raise CompilationError(
                f"@{fn.name} is only declared, and its address is taken in a module whose function pointers pass "
                f"the launch context (a function using it has its address taken too): a call through a pointer "
                f"to @{fn.name} would pass it parameters it does not take",
                hint="define the function in the module, or call it directly")
        taken.append(fn)
    return taken


# -- calls through pointers made direct (the CPU's block kernels) ---------------------------------

def promote_pointer_calls(module: Module, fn: Function) -> tuple[list[Function], list[CallInst]]:
    """Turn each call through a pointer in `fn` into tests of the pointer against every function of
    the call's type whose address is taken, each calling its function directly; a pointer that is
    none of them (one from outside the module) is still called through. Returns (the functions now
    called directly, the calls through a pointer kept for the other pointers).

    The CPU runs a block kernel as loops over the block's work items, into which every function
    using the launch context is inlined: a call through a pointer chosen at run time becomes a
    choice among direct calls that can be inlined."""
    calls = [i for i in fn.instructions() if isinstance(i, CallInst) and not isinstance(i.callee, Function)]
    if not calls:
        return [], []
    taken = _address_taken_any(module)
    called, kept = {}, []
    with Builder(module.context) as builder:
        for call in calls:
            candidates = [f for f in taken if f.function_type == call.called_function_type]
            if candidates:
                _dispatch(builder, fn, call, candidates)
                called.update(dict.fromkeys(candidates))
                kept.append(call)
    return list(called), kept


def _address_taken_any(module: Module) -> list[Function]:
    return [f for f in module.functions if not f.is_declaration and not f.name.startswith("llvm.") and f.uses
            and _users(f, strict=False)[1]]


def _dispatch(builder: Builder, fn: Function, call: CallInst, candidates) -> None:
    """`call` (through a pointer) becomes: `if p == @f1: r = f1(...) elif ...: else: r = p(...)`."""
    head = builder.split_before(call)
    body = call.parent
    pointer, args = call.callee, call.args
    results = []
    test = head
    for k, callee in enumerate(candidates):
        case = fn.append_block(f"{body.name}.call{k}")
        case.move_before(body)
        following = fn.append_block(f"{body.name}.test{k + 1}")
        following.move_before(body)
        builder.position_at_end(test)
        builder.cond_br(builder.icmp("eq", pointer, callee), case, following)
        builder.position_at_end(case)
        direct = builder.call(callee, args)
        direct.calling_convention = call.calling_convention
        results.append((direct, case))
        builder.br(body)
        test = following
    call.remove()  # the last test block calls through the pointer, for any other pointer
    builder.position_at_end(test)
    builder.insert(call)
    builder.br(body)
    if str(call.type) != "void":
        builder.position_before(body.instructions.first)
        phi = builder.phi(call.type, [], f"{call.name or 'r'}.chosen")
        call.replace_all_uses_with(phi)
        for value, block in [*results, (call, test)]:
            phi.add_incoming(value, block)


