"""Lowering: typed Python ASTs to one LLVM module (entry plus every reachable callee), per docs/kernel-abi.md."""

from __future__ import annotations

import ast
import functools
import warnings

from ... import abi
from ...errors import LaunchWarning
from ...compiler import CompiledFunction, CompileState
from ...llvm import ArrayType as LLArrayType
from ...llvm import BinaryOperator, Constant, ConstantFP, ConstantInt, FunctionType, Module, capi
from . import iteration
from ..numeric import arithmetic as B
from ..arrays import views
from ...compiler.depth import run_deep
from ..core.errors import LocatingVisitor, UserError, located
from ..numeric.mathlib import float_to_int
from ..core.types import (ArrayType, FunctionPointerType, GType, NoneType, ScalarType, TupleType, abi_params, address_space, boolean, int64,
                    int_range, llvm_type, memory_type, none, storage, widens)
from .inference import TypedFunction, Typing
from ..core.types import NUMBERS, ComplexType, PyObject  # complex numbers: complex.py
from ..numeric import complex as complex_numbers


def lower_program(source, job, context, tm=None):
    """Type the entry and its callees, then emit them into a module for the job's target."""
    return run_deep(_lower_program, source, job, context, tm)  # deep nesting needs a large stack


def _lower_program(source, job, context, tm):
    session = _typed_session(source, job)
    state = CompileState.of(context)
    if state is not None:  # what the gpuc.lookup plugin compiles later is typed already
        state.scratch[_SESSION] = session
    module = Module(source.entry_name, context)
    module.triple = job.config.target.triple()
    if tm is not None:
        module.data_layout = tm.data_layout
    try:
        program = _program(session, module, job)
        defined, deferred = _module_functions(session)
        functions = program.declare_all(source.entry_name, defined, [d[0] for d in deferred])
        _emit(program, defined, functions)
    except BaseException:
        module.close()
        raise
    compiled = {t.symbol: CompiledFunction(t.function, t.signature) for t in defined}
    for t, kernel, location in deferred:
        compiled[t.symbol] = CompiledFunction(t.function, t.signature, kernel=kernel, requested_at=location)
    return module, compiled


def lower_into(source, job, module: Module, compiled: dict):
    """Lower `source` and the callees it reaches into `module`, reusing what `compiled` records as
    already defined there; returns the entry Function (see FunctionSource.irgen_into)."""
    return run_deep(_lower_into, source, job, module, compiled)


def _lower_into(source, job, module: Module, compiled: dict):
    session, entry = _shared_session(source, job, module)
    program = _program(session, module, job)
    defined, deferred = _module_functions(session, entry)
    fresh, created, declared = _declare_into(program, compiled, defined, deferred, job.config.kernel)
    try:
        _emit(program, fresh, program.functions)
    except BaseException:
        _undo(program, fresh, created)
        raise
    for t in fresh:  # a record made when the function was requested keeps what the request said
        record = CompiledFunction(t.function, t.signature)
        if compiled.get(t.symbol) != record:
            compiled[t.symbol] = record
    for t, kernel, location in declared:
        compiled.setdefault(t.symbol, CompiledFunction(t.function, t.signature, kernel=kernel,
                                                       requested_at=location))
    return program.functions[defined[0].symbol]


def _typed_session(source, job) -> Typing:
    session = Typing(job.config.target)
    session.function(source.function, source.signature)
    return session


_SESSION = "gpuc.frontend.typing"  # the key of the shared typing session in CompileState.scratch


def _shared_session(source, job, module: Module) -> tuple[Typing, TypedFunction]:
    """The typing session every compile_into of one compile shares (so that a chain of deferred
    functions, each typed for its pointer's return type, is typed once, not once per link), and
    `source`'s typed function in it. A typing error discards the session: a half-typed function
    must never be reused."""
    state = CompileState.of(module)
    session = state.scratch.get(_SESSION) if state is not None else None  # irgen's, or an earlier call's
    if session is None or session.target != job.config.target:
        session = Typing(job.config.target)
        if state is not None:
            state.scratch[_SESSION] = session
    try:
        return session, session.function(source.function, source.signature)
    except BaseException:
        if state is not None:
            state.scratch.pop(_SESSION, None)
        raise


def _program(session: Typing, module: Module, job) -> "Program":
    return Program(session, module, job.config.target, job.config.boundscheck)


def _emit(program: "Program", typed_functions, functions: dict) -> None:
    for typed in typed_functions:
        try:
            Lowerer(program, typed, functions[typed.symbol]).run()
        except UserError as exc:
            raise located(exc, typed.info) from None


def _module_functions(session: Typing, entry: TypedFunction | None = None):
    """(the typed functions the module defines, [(typed, kernel, requested_at)] of those it only
    declares). It defines the entry and what that calls directly, transitively; it declares what
    these point to with gpuc.deferred and it does not define: the gpuc.lookup plugin compiles those
    on demand (and what only they reach)."""
    typed_all = list(session.functions.values())
    entry = entry if entry is not None else typed_all[0]
    typed_all = [entry] + [t for t in typed_all if t is not entry]  # the entry first
    reached, work = {id(entry)}, [entry]
    while work:
        for plan in work.pop().calls.values():
            callees = [plan[0]] if isinstance(plan, tuple) else []
            callees += getattr(plan[1], "calls", ()) if isinstance(plan, tuple) else ()
            for callee in callees:
                if isinstance(callee, TypedFunction) and id(callee) not in reached:
                    reached.add(id(callee))
                    work.append(callee)
    defined = [t for t in typed_all if id(t) in reached]
    deferred = {}
    for typed in defined:
        for callee, kernel, location in typed.requests.values():
            if id(callee) not in reached:
                deferred.setdefault(id(callee), (callee, kernel, location))
    return defined, list(deferred.values())


def _declare_into(program: "Program", compiled: dict, defined: list, deferred: list, external: bool):
    """Give every typed function its Function in the existing module: reuse a definition `compiled`
    records for the same function and signature, fill in a matching declaration, or add one under
    the first free deterministic name (symbol, symbol.1, ...); the deferred functions get a
    declaration unless the module has them. Returns (functions to lower, added names, the deferred
    functions left declared)."""
    module, fresh, created, assigned = program.module, [], set(), set()
    for typed in defined:
        name, existing = _free_name(program, compiled, typed, assigned)
        if existing is not None and not existing.is_declaration:
            program.functions[name] = existing  # compiled before, from the same function and signature
            continue
        fn = existing if existing is not None else module.add_function(name, program.function_type(typed))
        if existing is None:
            created.add(name)
        if typed is not defined[0] or not external:
            fn.linkage = "internal"
        program._abi_attributes(fn, typed)
        program.functions[name] = fn
        fresh.append(typed)
    declared = []
    for typed, kernel, location in deferred:
        name, existing = _free_name(program, compiled, typed, assigned)
        if existing is None:
            existing = module.add_function(name, program.function_type(typed))
            program._abi_attributes(existing, typed)
            created.add(name)
        program.functions[name] = existing
        if existing.is_declaration:
            declared.append((typed, kernel, location))
    return fresh, created, declared


def _free_name(program: "Program", compiled: dict, typed: TypedFunction, assigned: set):
    """The first name of symbol, symbol.1, ... that is free for `typed` in the module, or holds it
    already (a definition `compiled` records for it, or a matching declaration); and what is there."""
    module, fnty = program.module, program.function_type(typed)
    want = CompiledFunction(typed.function, typed.signature)
    base, k = typed.symbol, 0
    while True:
        name = f"{base}.{k}" if k else base
        k += 1
        existing = module.functions.get(name)
        if name in assigned or existing is not None and (
                existing.function_type != fnty or not existing.is_declaration and compiled.get(name) != want
                or existing.is_declaration and compiled.get(name, want) != want):
            continue
        typed.symbol = name
        assigned.add(name)
        return name, existing


def _undo(program: "Program", fresh, created: set) -> None:
    """Take back a failed lowering into an existing module: bodies first, then the added functions."""
    for typed in fresh:
        fn = program.functions[typed.symbol]
        if not fn.is_declaration:
            fn.delete_body()
        fn.linkage = "external"
    for name in created:
        fn = program.functions[name]
        if not fn.uses:
            fn.erase()


class Program:
    """What all functions of one module share: the module, the target, the declared functions."""

    def __init__(self, session: Typing, module: Module, target, boundscheck: bool = False) -> None:
        self.session, self.module, self.target = session, module, target
        #: Every function of the module checks its indices (CompilerConfig(boundscheck=True)).
        self.boundscheck = boundscheck
        self._warned_unchecked = False
        self.ctx = module.context
        self.addrspace = address_space(target)
        self.functions = {}
        self._function_types = {}  # id(typed function) -> its LLVM type (asked for several times each)

    def unchecked(self, function) -> None:
        """Bounds checks were asked for on a target that cannot report them: a warning, once."""
        if not self._warned_unchecked:
            self._warned_unchecked = True
            warnings.warn(f"bounds checks run on the CPU, OpenCL (spirv) and CUDA (ptx) only: "
                          f"{function.__qualname__} is compiled for {self.target.name} without them; launch it "
                          "with device='cpu' to check its indices (docs/debugging.md, \"Bounds checks\")",
                          LaunchWarning, stacklevel=2)

    def ltype(self, t: GType):
        return llvm_type(t, self.ctx, self.addrspace)

    def function_type(self, typed: TypedFunction):
        """The LLVM type of a function: the ABI's flattened parameters (gpuc/abi.py), its return type."""
        fnty = self._function_types.get(id(typed))
        if fnty is None:
            params = [p for t in typed.signature for p in abi_params(t, self.ctx, self.addrspace)]
            fnty = self._function_types[id(typed)] = FunctionType.get(self.ltype(typed.return_type), params)
        return fnty

    def declare_all(self, entry: str, defined: list, deferred: list) -> dict:
        """Add the functions the module defines (internal but the entry) and declarations of the
        deferred ones (compiled on demand by the gpuc.lookup plugin)."""
        taken, declared = {}, {id(t) for t in deferred}
        for typed in defined + deferred:
            if typed.symbol in taken and taken[typed.symbol] is not typed.function:
                typed.symbol = f"{typed.symbol}.{len(taken)}"  # two functions with one qualname
            taken[typed.symbol] = typed.function
            fn = self.module.add_function(typed.symbol, self.function_type(typed))
            if typed.symbol != entry and id(typed) not in declared:
                fn.linkage = "internal"
            self._abi_attributes(fn, typed)
            self.functions[typed.symbol] = fn
        return self.functions

    def _abi_attributes(self, fn, typed: TypedFunction) -> None:
        i = 0
        for t in typed.signature:
            if isinstance(t, ArrayType):
                for name in abi.DATA_POINTER_ATTRIBUTES:
                    fn.param_attributes(i).add(name)
                i += abi.array_param_count(t.ndim)
                continue
            if t == boolean:
                for name in abi.BOOL_ATTRIBUTES:
                    fn.param_attributes(i).add(name)
            i += 1
        if typed.return_type == boolean:
            for name in abi.BOOL_ATTRIBUTES:
                fn.return_attributes.add(name)


class Lowerer(LocatingVisitor):
    """Emits one typed function. Variables live in entry-block allocas (SROA turns them into SSA)."""

    def __init__(self, program: Program, typed: TypedFunction, fn) -> None:
        self.program, self.typed, self.fn = program, typed, fn
        self.ctx = program.ctx
        self.target = program.target
        self.slots = {}
        self.loops = []  # (continue block, break block)
        self.b = None
        self._local_scratch = None  # bounds_scratch's slot for local arrays, made on first use

    # -- services used by the builtin tables --------------------------------------------------
    def ltype(self, t: GType):
        return self.program.ltype(t)

    def abi_params(self, t: GType) -> list:
        return abi_params(t, self.ctx, self.program.addrspace)

    def declare(self, name: str, ret, params):
        return self.program.module.get_or_insert_function(name, FunctionType.get(ret, params))

    def math(self, name: str, t: ScalarType, args):
        return B.emit_math(self, name, t, args)

    def const(self, t: ScalarType, value):
        """The constant `value` (a Python or NumPy number) as a `t`. Python floats convert like Python
        and NumPy do (an int through float64); the typing has checked that integers fit."""
        if isinstance(t, ComplexType):
            return complex_numbers.constant(self, t, value)
        ty = self.ltype(t)
        if t.is_float:
            return ConstantFP.get(ty, float(value))
        if t.is_bool:
            return ConstantInt.get(ty, int(bool(value)))
        value = int(value)  # floats truncate
        lo, hi = int_range(t)
        if not lo <= value <= hi:
            raise AssertionError(f"the constant {value} does not fit in {t}; the typing should have refused it")
        return ConstantInt.get(ty, value & ((1 << t.bits) - 1))

    def bits(self, t: ScalarType, value: int):
        """An integer constant of `t` with the low bits of `value`, for the lowering's own wrapping arithmetic."""
        return ConstantInt.get(self.ltype(t), value & ((1 << t.bits) - 1))

    def truth(self, v, t: ScalarType):
        if isinstance(t, ComplexType):
            return complex_numbers.truth(self, v)
        if t.is_bool:
            return v
        if t.is_float:
            return self.b.fcmp("une", v, ConstantFP.get(v.type, 0.0))  # NaN is true, as in Python
        return self.b.icmp("ne", v, ConstantInt.get(v.type, 0))

    def convert(self, v, src: GType, dst: GType):
        if isinstance(src, TupleType) and isinstance(dst, TupleType) and src != dst:
            return self.make_tuple([self.convert(self.b.extract_value(v, k), s, d)
                                    for k, (s, d) in enumerate(zip(src.elements, dst.elements))], dst)
        if src == dst or isinstance(dst, (TupleType, ArrayType, NoneType, FunctionPointerType)):
            return v
        if isinstance(src, ComplexType) or isinstance(dst, ComplexType):
            return complex_numbers.convert(self, v, src, dst)
        if dst.is_bool:
            return self.truth(v, src)
        ty, b = self.ltype(dst), self.b
        if src.is_bool:
            return b.uitofp(v, ty) if dst.is_float else b.zext(v, ty)
        if src.is_float:
            if dst.is_float:
                if (src.bits, dst.bits) == (64, 16):  # rounded once, on every target (small_dtypes.py)
                    from ..numeric.small_dtypes import double_to_half
                    return double_to_half(self, v)
                return b.fpext(v, ty) if dst.bits > src.bits else b.fptrunc(v, ty)
            return float_to_int(self, v, src, dst)  # saturating: NaN gives 0, never poison
        if dst.is_float:
            return b.sitofp(v, ty) if src.signed else b.uitofp(v, ty)
        if dst.bits == src.bits:
            return v
        if dst.bits < src.bits:
            return b.trunc(v, ty)
        return b.sext(v, ty) if src.signed else b.zext(v, ty)

    def flatten(self, v, t: GType) -> list:
        if isinstance(t, ArrayType):
            return [self.b.extract_value(v, k) for k in range(1 + 2 * t.ndim)]
        return [v]

    def element_ptr(self, array, t: ArrayType, indices, checked_at: ast.AST | None = None):
        """&a[i, j, ...] for (value, type) index pairs; negative indices count from the end, as in Python.
        With bounds checks on, an index out of range is recorded, named by the node `checked_at` (the
        subscript, or the atomic call), and the access goes to a scratch slot instead (`check_indices`).

        Offsets use `nsw` arithmetic and `inbounds` addressing (a valid element offset fits in an i64
        and stays in the array), which the loop vectorizer relies on. For the unit-stride last
        dimension of a C-contiguous array, the end-relative shift and the index are two `inbounds`
        steps rather than one sum, so that instcombine cannot split the sum and lose `inbounds`.
        """
        i64 = self.ctx.i64
        zero = ConstantInt.get(i64, 0)
        element = memory_type(t.dtype, self.ctx)
        offset, shift, checks = None, None, []
        for k, (index, it) in enumerate(indices):
            index = self.convert(index, it, int64) if it != int64 else index
            wrap = None
            if it.signed and not (isinstance(index, ConstantInt) and index.value >= 0):
                negative = self._counts_from_end(index)
                wrap = self.b.select(negative, self.b.extract_value(array, 1 + k), zero)
            if checked_at is not None and self.boundscheck:
                checks.append((k, index, wrap, it))
            if t.layout == "C" and k == t.ndim - 1:
                term, shift = index, wrap  # C-contiguous: the last stride is 1
            else:
                if wrap is not None:
                    index = self.b.nsw_add(index, wrap)
                term = self.b.nsw_mul(index, self.b.extract_value(array, 1 + t.ndim + k))
            offset = term if offset is None else self.b.nsw_add(offset, term)
        pointer = self.b.extract_value(array, 0)
        if shift is not None:
            pointer = self.b.gep(element, pointer, [shift])
        pointer = self.b.gep(element, pointer, [offset])
        if checks:
            ok = self.check_indices(checked_at, array, t.ndim, checks)
            pointer = self.b.select(ok, pointer, self.bounds_scratch(pointer.type))
        return pointer

    def _counts_from_end(self, index):
        """The i1 saying whether `index` (an int64) counts from the end of its dimension: index < 0. For a sum
        `x + y`, `(x | y) < 0 and x + y < 0`: where x and y are both non-negative, a negative sum is an
        overflow, no valid position whichever way it is read (it lies 2**63 or more from the true sum;
        extents are under 2**62), and the test says so without the sum, so that LLVM, knowing x and y
        non-negative (a tile's start and the item's index), sees that the access never counts from the
        end: loads and stores of consecutive items stay vector loads and stores rather than gathers and
        scatters."""
        zero = ConstantInt.get(self.ctx.i64, 0)
        negative = self.b.icmp("slt", index, zero)
        if isinstance(index, BinaryOperator) and index.opcode == capi.LLVMAdd:
            either = self.b.icmp("slt", self.b.or_(index.lhs, index.rhs), zero)
            negative = self.b.and_(either, negative)
        return negative

    # -- bounds checks (docs/debugging.md, "Bounds checks") -------------------------------------
    @functools.cached_property
    def boundscheck(self) -> bool:
        """Whether this function checks its indices: the compile's setting or its own decorator's, for code
        the CPU runtime runs or a target that keeps the record for its runtime (Target.device_bounds_record;
        other targets compile the function unchecked, and say so once per module)."""
        wanted = self.program.boundscheck or bool(self.typed.function.options.get("boundscheck"))
        if wanted and not (self.target.host_executable or self.target.device_bounds_record):
            self.program.unchecked(self.typed.function)
            return False
        return wanted

    def check_indices(self, node: ast.AST, array, ndim: int, checks):
        """An i1, true when every index of `checks` ((dimension, int64 index, its end-relative shift or
        None, its type)) lies in the extent of `array` (an `ndim`-dimensional array value) along its
        dimension. Where one does not, a cold call records the failure in the launch's record (the first
        of the launch wins: abi.BOUNDS_RECORD) and the function's own flag (`bounds_failed`), which its
        loops poll."""
        b, i64 = self.b, self.ctx.i64
        shapes = [b.extract_value(array, 1 + k) for k in range(ndim)]
        ok, failed_dim, failed_index = None, None, None
        for k, index, wrap, it in reversed(checks):
            position = index if wrap is None else b.add(index, wrap)
            inside = b.icmp("ult", position, shapes[k])  # negative positions are huge unsigned
            if not it.signed:  # an unsigned index beyond int64's range converted negative: outside too
                inside = b.and_(inside, b.icmp("sge", index, ConstantInt.get(i64, 0)))
            outside = b.not_(inside)
            failed_dim = ConstantInt.get(i64, k) if failed_dim is None else b.select(outside, ConstantInt.get(i64, k), failed_dim)
            failed_index = index if failed_index is None else b.select(outside, index, failed_index)
            ok = inside if ok is None else b.and_(inside, ok)
        fail, cont = self.fn.append_block("bounds.fail"), self.fn.append_block("bounds.ok")
        b.cond_br(ok, cont, fail)
        b.position_at_end(fail)
        padded = shapes[:abi.BOUNDS_SHAPE_WORDS] + [ConstantInt.get(i64, 0)] * (abi.BOUNDS_SHAPE_WORDS - len(shapes))
        where = f"{self.typed.info.location(node)}: {ast.unparse(node)} in {self.typed.function.__qualname__}"
        b.call(self.bounds_failure(), [self.site(where, self.target.constant_address_space), failed_dim, failed_index, ConstantInt.get(i64, ndim),
                                       *padded])
        b.store(ConstantInt.get(self.ctx.i1, 1), self.bounds_failed)
        b.br(cont)
        b.position_at_end(cont)
        return ok

    @functools.cached_property
    def bounds_failed(self):
        """An entry-block alloca: whether a check of this call has failed (SROA makes it a value)."""
        slot = self.alloca_builder.alloca(self.ctx.i1, "bounds.failed")
        self.alloca_builder.store(ConstantInt.get(self.ctx.i1, 0), slot)
        return slot

    def bounds_failure(self):
        """`void gpuc.boundscheck.fail(ptr site, i64 dim, i64 index, i64 ndim, i64 shape...)`: the first
        call of a launch fills the record the runtime reads after it (abi.BOUNDS_RECORD)."""
        return abi.bounds_failure(self.program.module, self.bounds_record(), self.target.constant_address_space,
                                  not self.target.host_executable)

    def bounds_record(self):
        """The runtime's record of the first failed check (abi.BOUNDS_RECORD), declared."""
        return abi.bounds_record(self.program.module, not self.target.host_executable, self.program.addrspace["global"])

    def interrupt_flag(self):
        """The runtime's pointer to the process's interrupt flag (abi.INTERRUPT_FLAG), declared."""
        module = self.program.module
        gv = module.globals.get(abi.INTERRUPT_FLAG)
        if gv is None:
            gv = module.add_global(self.ctx.ptr(), abi.INTERRUPT_FLAG)
            gv.alignment = 8
        return gv

    def bounds_scratch(self, ty):
        """Where an access whose index failed its check goes: a zeroed slot of the module's own in the address
        space of the access (GPU targets cannot cast between global, shared and local memory); a slot of the
        function's own for local arrays where they have an address space of their own."""
        module, space = self.program.module, ty.address_space
        scratch = LLArrayType.get(self.ctx.i64, 4)  # the widest element, a complex128, is 16 bytes
        spaces = self.program.addrspace
        if space == spaces["local"] and space not in (spaces["global"], spaces["shared"]):
            if self._local_scratch is None:
                self._local_scratch = self.alloca_builder.alloca(scratch, "bounds.scratch", align=16)
            return self._local_scratch
        if space == spaces["global"] or space != spaces["shared"]:
            space = spaces["global"]
        name = "gpuc.boundscheck.scratch" + ("" if space == spaces["global"] else ".shared")
        gv = module.globals.get(name)
        if gv is None:
            gv = module.add_global(scratch, name, space)
            # shared memory takes no initial value on GPUs: what a failed access reads there is unspecified
            gv.initializer = Constant.null(scratch) if space == spaces["global"] else Constant.undef(scratch)
            gv.linkage = "internal"
            gv.alignment = 16
        return gv if gv.type == ty else self.b.addrspacecast(gv, ty)

    def poll_bounds(self, latch) -> None:
        """At a loop's back edge, with bounds checks on: once a check of this call has failed, return (the
        launch is stopping), so that a loop whose values the failed access spoiled (it read 0 from the
        scratch slot) cannot run on forever. On the CPU also once Ctrl-C came: the process's interrupt
        flag is set (gpuc/runtime/interrupts.py)."""
        b = self.b
        leave = self.fn.append_block("bounds.leave")
        stop = b.load(self.ctx.i1, self.bounds_failed)
        if self.target.host_executable:  # and once Ctrl-C came (gpuc/runtime/interrupts.py)
            flag = b.load(self.ctx.ptr(), self.interrupt_flag(), align=8)
            stop = b.or_(stop, b.icmp("ne", b.load(self.ctx.i32, flag, align=4, volatile=True),
                                      ConstantInt.get(self.ctx.i32, 0)))
        b.cond_br(stop, leave, latch)
        b.position_at_end(leave)
        rt = self.typed.return_type
        if isinstance(rt, NoneType):
            b.ret()
        else:
            b.ret(Constant.null(self.ltype(rt)))

    def site(self, text: str, address_space: int = 0):
        """A `ptr` to the constant C string `text` (a location, "file:line:col", and what is there),
        one per module, text and address space: errors found at run time name it."""
        return abi.site_text(self.program.module, text, address_space)

    # -- function ---------------------------------------------------------------------------
    def run(self) -> None:
        from ...llvm import Builder
        tree = self.typed.info.tree
        self.alloca_block = self.fn.append_block("entry")
        body = self.fn.append_block("body")
        with Builder(self.ctx) as self.alloca_builder, Builder(self.ctx) as self.b:
            self.alloca_builder.position_at_end(self.alloca_block)
            self.b.position_at_end(body)
            self._bind_params(tree)
            self.body(tree.body)
            if self.b.block.terminator is None:
                if isinstance(self.typed.return_type, NoneType):
                    self.b.ret()
                else:
                    self.b.unreachable()
            self.alloca_builder.br(body)

    def _bind_params(self, tree: ast.FunctionDef) -> None:
        self._name_params(tree)
        params, i = self.fn.args, 0
        for arg, t in zip(tree.args.args, self.typed.signature):
            if isinstance(t, ArrayType):
                n = abi.array_param_count(t.ndim)
                value = Constant.poison(self.ltype(t))
                for k in range(n):
                    value = self.b.insert_value(value, params[i + k], k)
                if self.typed.function.is_kernel:
                    self._assume_extents(params[i + 1:i + 1 + t.ndim])
                i += n
            else:
                value = params[i]
                i += 1
            self.store_var(arg.arg, t, value)

    def _assume_extents(self, shapes) -> None:
        # A launcher passes the shapes of real arrays: none is negative. Saying so lets LLVM drop
        # Python's negative-index wraparound from clamped indices, `a[min(i + 1, n - 1)]` (negative
        # only when n is 0, where the wrap adds 0), which survives inlining into the CPU range loop.
        assume = self.declare("llvm.assume", self.ctx.void, [self.ctx.i1])
        for shape in shapes:
            self.b.call(assume, [self.b.icmp("sge", shape, ConstantInt.get(self.ctx.i64, 0))])

    def _name_params(self, tree) -> None:
        params, i = self.fn.args, 0
        for arg, t in zip(tree.args.args, self.typed.signature):
            if isinstance(t, ArrayType):
                names = abi.array_param_names(arg.arg, t.ndim)
                for k, name in enumerate(names):
                    params[i + k].name = name
                i += len(names)
            else:
                params[i].name = arg.arg
                i += 1

    def slot(self, name: str, t: GType):
        t = storage(t)  # a C-contiguous array shares the storage of the strided type it joins to
        key = (name, t)  # name is a variable's name, or ("range" or "position", id) for a loop's hidden counter
        ptr = self.slots.get(key)
        if ptr is None:
            ty = self.ltype(t)
            ptr = self.slots[key] = self.alloca_builder.alloca(ty, name if isinstance(name, str) else f"{name[0]}.i")
            self.alloca_builder.store(Constant.null(ty), ptr)  # a variable unassigned on some path reads 0
        return ptr

    def store_var(self, name: str, t: GType, value) -> None:
        """Store a variable's value; where it is read at a type its paths unify to (`v = 7` on one path,
        `v = 2.5` on another: read as float64), the value converted to that type is stored too."""
        self.b.store(value, self.slot(name, t))
        for wider in self.read_types.get(name, ()):
            if widens(storage(t), wider):
                self.b.store(self.convert(value, t, wider), self.slot(name, wider))

    @functools.cached_property
    def read_types(self) -> dict:
        """Each variable's types where it is read."""
        reads = {}
        for name, t in self.typed.slots.values():
            reads.setdefault(name, set()).add(storage(t))
        return reads

    # -- visiting ---------------------------------------------------------------------------
    def generic_visit(self, node):
        raise AssertionError(f"the typer accepted {type(node).__name__}, which the lowering does not handle")

    def body(self, stmts) -> None:
        for stmt in stmts:
            if id(stmt) not in self.typed.reached or self.b.block.terminator is not None:
                return
            self.visit(stmt)

    def type_of(self, node) -> GType:
        return self.typed.types[id(node)]

    def is_literal(self, node) -> bool:
        return id(node) in self.typed.weak

    def expr(self, node):
        if self.is_literal(node):  # a literal or a folded expression of literals
            return self.const(self.type_of(node), self.typed.consts[id(node)])
        return self.visit(node)

    def operand(self, node, t: GType):
        """The value of `node` as a `t`. A literal is materialized as a `t` directly, never first as its
        own type: `x + 2**63` on a float64 x adds 9.223372036854776e18, not a wrapped int64."""
        if self.is_literal(node) and isinstance(t, NUMBERS):
            return self.const(t, self.typed.consts[id(node)])
        return self.convert(self.expr(node), self.type_of(node), t)

    # -- statements -------------------------------------------------------------------------
    def visit_Expr(self, node) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return
        self.expr(node.value)

    def visit_Pass(self, node) -> None:
        pass

    def visit_Assign(self, node: ast.Assign) -> None:
        source = node.value
        value = None if self.is_literal(source) else self.expr(source)
        for target in node.targets:
            self.assign(target, value, self.type_of(source), source)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        want = self.typed.types[id(node)]
        self.assign(node.target, self.operand(node.value, want), want)

    def assign(self, target, value, t: GType, source=None) -> None:
        """Store `value` (of type `t`) into `target`; value None stands for the literal `source`, which
        is materialized at the type the target stores (an array's dtype, or the variable's type)."""
        if isinstance(target, ast.Name):
            name, slot_t = self.typed.slots[id(target)]
            self.store_var(name, slot_t, self.operand(source, slot_t) if value is None else value)
        elif isinstance(target, ast.Tuple):
            for k, (elt, et) in enumerate(zip(target.elts, t.elements)):
                self.assign(elt, self.b.extract_value(value, k), et)
        elif isinstance(self.typed.calls.get(id(target)), views.ViewPlan):  # a copy into a view
            views.lower_copy(self, target, value, t, source)
        else:  # array element
            dtype = self.type_of(target.value).dtype
            ptr = self.subscript_ptr(target)
            self.store_element(ptr, self.operand(source, dtype) if value is None else self.convert(value, t, dtype),
                               dtype)

    def store_element(self, ptr, value, dtype: ScalarType) -> None:
        if isinstance(dtype, ComplexType):
            return complex_numbers.store(self, ptr, value, dtype)
        if dtype.is_bool:
            value = self.b.zext(value, self.ctx.i8)
        self.b.store(value, ptr)

    def load_element(self, ptr, dtype: ScalarType):
        if isinstance(dtype, ComplexType):
            return complex_numbers.load(self, ptr, dtype)
        value = self.b.load(memory_type(dtype, self.ctx), ptr)
        return self.b.trunc(value, self.ctx.i1) if dtype.is_bool else value

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        plan = self.typed.calls[id(node)]
        rt = self.type_of(node.value)
        if isinstance(node.target, ast.Name):
            load = node._gpuc_load
            current, lt = self.expr(load), self.type_of(load)
            right, rt = self.binary_operand(node.value, plan)
            result = B.lower_binary(self, plan, current, lt, right, rt, self.typed.consts.get(id(node.value)))
            name, slot_t = self.typed.slots[id(node.target)]
            self.store_var(name, slot_t, result)
            return
        dtype = self.type_of(node.target)
        if isinstance(dtype, ArrayType):
            views.lower_augmented(self, node, plan)
            return
        ptr = self.subscript_ptr(node.target)
        current = self.load_element(ptr, dtype)
        right, rt = self.binary_operand(node.value, plan)
        result = B.lower_binary(self, plan, current, dtype, right, rt, self.typed.consts.get(id(node.value)))
        self.store_element(ptr, self.convert(result, plan.result, dtype), dtype)

    def visit_Return(self, node: ast.Return) -> None:
        rt = self.typed.return_type
        if node.value is None or isinstance(rt, NoneType):
            if node.value is not None:
                self.expr(node.value)
            self.b.ret()
            return
        self.b.ret(self.operand(node.value, rt))

    def visit_If(self, node: ast.If) -> None:
        cond = self.condition(node.test)
        then, other, done = (self.fn.append_block(n) for n in ("if.then", "if.else", "if.end"))
        self.b.cond_br(cond, then, other)
        for block, stmts in ((then, node.body), (other, node.orelse)):
            self.b.position_at_end(block)
            self.body(stmts)
            if self.b.block.terminator is None:
                self.b.br(done)
        self.b.position_at_end(done)

    def condition(self, node):
        if self.is_literal(node):  # Python's truth of the literal's own value (`if 2**63:`)
            return ConstantInt.get(self.ctx.i1, int(bool(self.typed.consts[id(node)])))
        return self.truth(self.expr(node), self.type_of(node))

    def visit_While(self, node: ast.While) -> None:
        head, body, done = (self.fn.append_block(n) for n in ("while.cond", "while.body", "while.end"))
        self.b.br(head)
        self.b.position_at_end(head)
        self.b.cond_br(self.condition(node.test), body, done)
        self._loop_body(body, head, done, node.body)

    def _loop_body(self, body, latch, done, stmts) -> None:
        polled = latch
        if self.boundscheck:  # every way back to the loop's head passes the poll
            polled = self.fn.append_block("bounds.poll")
        self.b.position_at_end(body)
        self.loops.append((polled, done))
        self.body(stmts)
        self.loops.pop()
        if self.b.block.terminator is None:
            self.b.br(polled)
        if polled is not latch:
            self.b.position_at_end(polled)
            self.poll_bounds(latch)
        self.b.position_at_end(done)

    def visit_For(self, node: ast.For) -> None:
        iteration.lower_for(self, node)

    def visit_Break(self, node) -> None:
        self.b.br(self.loops[-1][1])

    def visit_Continue(self, node) -> None:
        self.b.br(self.loops[-1][0])

    # -- expressions ------------------------------------------------------------------------
    def _constant_or_none(self, node):
        t = self.type_of(node)
        if isinstance(t, PyObject):
            return None
        if isinstance(t, ArrayType):  # a global NumPy array, frozen (gpuc/frontend/arrays/global_arrays.py)
            from ..arrays.global_arrays import lower_global_array
            return lower_global_array(self, self.typed.consts[id(node)], t)
        return self.const(t, self.typed.consts[id(node)])

    def visit_Constant(self, node):
        return self._constant_or_none(node)

    def visit_Name(self, node: ast.Name):
        slot = self.typed.slots.get(id(node))
        if slot is None:  # a global: a constant or a compile-time object
            return self._constant_or_none(node)
        name, t = slot
        return self.b.load(self.ltype(t), self.slot(name, t), name)

    def visit_Attribute(self, node: ast.Attribute):
        base_t = self.type_of(node.value)
        if isinstance(base_t, PyObject):
            return self._constant_or_none(node)
        if isinstance(base_t, NUMBERS):
            return complex_numbers.lower_attribute(self, node, base_t)
        array = self.expr(node.value)
        i64 = self.ctx.i64
        if node.attr == "ndim":
            return ConstantInt.get(i64, base_t.ndim)
        shapes = [self.b.extract_value(array, 1 + k) for k in range(base_t.ndim)]
        if node.attr == "size":
            size = shapes[0]
            for s in shapes[1:]:
                size = self.b.mul(size, s)
            return size
        return self.make_tuple(shapes, self.type_of(node))

    def make_tuple(self, values, t: TupleType):
        agg = Constant.poison(self.ltype(t))
        for k, v in enumerate(values):
            agg = self.b.insert_value(agg, v, k)
        return agg

    def visit_Tuple(self, node: ast.Tuple):
        t = self.type_of(node)
        values = [self.operand(e, et) for e, et in zip(node.elts, t.elements)]
        return self.make_tuple(values, t)

    def visit_UnaryOp(self, node):
        return B.lower_unary(self, self.typed.calls[id(node)], self.expr(node.operand), self.type_of(node.operand))

    def visit_BinOp(self, node):
        plan = self.typed.calls[id(node)]
        left, lt = self.binary_operand(node.left, plan)
        right, rt = self.binary_operand(node.right, plan)
        return B.lower_binary(self, plan, left, lt, right, rt, self.typed.consts.get(id(node.right)))

    def binary_operand(self, node, plan):
        """(value, type) of an operand of a binary operator: a literal is materialized at the operand type
        (an integer exponent of a float base too: it then converts to that float exactly)."""
        if self.is_literal(node):
            return self.const(plan.operand, self.typed.consts[id(node)]), plan.operand
        return self.expr(node), self.type_of(node)

    def _branches(self, first, rest, on_true: bool, t: GType, produce):
        """Short-circuit: `first` is (value, truth); evaluate `rest` only when truth == on_true."""
        value, truth = first
        start = self.b.block
        more, done = self.fn.append_block("sc.rhs"), self.fn.append_block("sc.end")
        self.b.cond_br(truth, more, done) if on_true else self.b.cond_br(truth, done, more)
        self.b.position_at_end(more)
        other = produce(rest)
        end = self.b.block
        self.b.br(done)
        self.b.position_at_end(done)
        return self.b.phi(self.ltype(t), [(value, start), (other, end)])

    def visit_BoolOp(self, node: ast.BoolOp):
        t = self.type_of(node)
        on_true = isinstance(node.op, ast.And)

        def produce(values):
            v = self.operand(values[0], t)
            if len(values) == 1:
                return v
            # the truth of a literal is its own (1e-300 is true even where it becomes a float32 0.0)
            truth = (ConstantInt.get(self.ctx.i1, int(bool(self.typed.consts[id(values[0])])))
                     if self.is_literal(values[0]) else self.truth(v, t))
            return self._branches((v, truth), values[1:], on_true, t, produce)
        return produce(node.values)

    def visit_Compare(self, node: ast.Compare):
        plans = self.typed.calls[id(node)]
        operands = [node.left] + list(node.comparators)
        values = {}  # position -> value of a non-literal operand, each evaluated once

        def operand(k, t):
            node = operands[k]
            if self.is_literal(node):
                return None if t is None else self.const(t, self.typed.consts[id(node)])
            if k not in values:
                values[k] = self.expr(node)
            return None if t is None else self.convert(values[k], self.type_of(node), t)

        def produce(k):
            plan = plans[k]
            if plan.result is not None:  # a literal outside the operand type: the others still run
                operand(k, None), operand(k + 1, None)
                result = ConstantInt.get(self.ctx.i1, int(plan.result))
            else:
                left, right = operand(k, plan.operand), operand(k + 1, plan.operand)
                result = B.lower_compare(self, plan, left, plan.operand, right, plan.operand)
            if k + 1 == len(plans):
                return result
            return self._branches((result, result), k + 1, True, boolean, produce)
        return produce(0)

    def visit_IfExp(self, node: ast.IfExp):
        t = self.type_of(node)
        cond = self.condition(node.test)
        then, other, done = (self.fn.append_block(n) for n in ("ifexp.then", "ifexp.else", "ifexp.end"))
        self.b.cond_br(cond, then, other)
        incoming = []
        for block, branch in ((then, node.body), (other, node.orelse)):
            self.b.position_at_end(block)
            value = self.operand(branch, t)
            incoming.append((value, self.b.block))
            self.b.br(done)
        self.b.position_at_end(done)
        return self.b.phi(self.ltype(t), incoming)

    def subscript_ptr(self, node: ast.Subscript):
        array = self.expr(node.value)
        t = self.type_of(node.value)
        indices = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return self.element_ptr(array, t, [(self.expr(i), self.type_of(i)) for i in indices], checked_at=node)

    def visit_Subscript(self, node: ast.Subscript):
        base_t = self.type_of(node.value)
        if isinstance(base_t, TupleType):
            value = self.expr(node.value)
            if id(node.slice) not in self.typed.positions:  # a run-time index
                return iteration.tuple_element(self, value, base_t, self.expr(node.slice), self.type_of(node.slice))
            return self.b.extract_value(value, self.typed.positions[id(node.slice)])
        if isinstance(self.typed.calls.get(id(node)), views.ViewPlan):
            return views.lower_view(self, node)
        return self.load_element(self.subscript_ptr(node), base_t.dtype)

    def visit_Call(self, node: ast.Call):
        handler, plan = self.typed.calls[id(node)]
        if isinstance(handler, TypedFunction):
            return self.call_function(node, handler)
        return handler.lower(self, node, plan)

    def call_function(self, node: ast.Call, callee: TypedFunction):
        args = []
        for a, t in zip(node.args, callee.signature):
            args += self.flatten(self.operand(a, t), t)  # converted to an annotated parameter's type
        result = self.b.call(self.program.functions[callee.symbol], args)
        return None if callee.return_type == none else result
