"""SPIR-V: spirv64 modules (OpenCL kernel environment), `spir_kernel` entry points."""

from __future__ import annotations

from dataclasses import dataclass

from ..llvm import (CALLING_CONVENTIONS, AggregateInst, AtomicCmpXchgInst, AtomicRMWInst, Builder, ConstantInt,
                     FunctionType, Instruction, Module, PHINode, StructType, TargetData, VectorType)
from ..errors import CompilationError
from ..llvm import Argument, ArrayType, CallInst, Constant, ConstantExpr, Function
from .aggregate_params import flatten_aggregate_params
from .compare_exchange import bit_width, expand_atomic_rmw, expand_narrow_cmpxchg
from .converged_barriers import converge_barriers, inline_collectives
from .device_debug import add_bounds_reader, define_bounds_record, opencl_printf
from .ordered_reductions import keep_reduction_order
from .interface import (MathLowering, MathOp, Target, shuffle_source_lane, split_intrinsic, unselectable_table,
                        without_pass)

# Intrinsics the SPIR-V backend cannot translate (it has little bfloat support).
_UNSELECTABLE = unselectable_table({
    "f16 bf16 f32 f64": "canonicalize exp10 frexp lrint llrint maximumnum minimumnum sincos",
    # float and double ldexp: finish_module calls OpenCL's (intrinsic_issue lets them through)
    "f16 bf16": "ldexp",
    "bf16": "sin cos tan asin acos atan atan2 sinh cosh tanh exp exp2 log log2 log10 pow powi modf sqrt fabs "
            "floor ceil trunc rint nearbyint round roundeven lround llround copysign fma minnum maxnum "
            "minimum maximum",
})
# OpenCL's work-item functions (size_t f(uint dim)) Target.work_item reads, and its sub-group ones (uint f()).
_GEOMETRY = {"thread_index": "_Z12get_local_idj", "block_index": "_Z12get_group_idj",
             "block_dim": "_Z14get_local_sizej", "grid_dim": "_Z14get_num_groupsj"}
# The warp's width is the largest sub-group's: the last sub-group of a work-group may be smaller.
_SUB_GROUP = {"lane_index": "_Z22get_sub_group_local_idv", "warp_size": "_Z22get_max_sub_group_sizev"}
# SPIR-V execution and memory scopes, and the memory semantics of CUDA's barriers and fences:
# SequentiallyConsistent | WorkgroupMemory | CrossWorkgroupMemory.
_DEVICE, _WORKGROUP, _SUBGROUP = 1, 2, 3
_ALL_MEMORY = 0x10 | 0x100 | 0x200
_FENCE_SCOPES = {"device": _DEVICE, "block": _WORKGROUP}
# OpenCL C's work-group functions (int f(int)) per barrier kind.
_WORK_GROUP_FUNCTIONS = {"count": "_Z21work_group_reduce_addi", "all": "_Z14work_group_alli",
                         "any": "_Z14work_group_anyi"}
# cl_khr_subgroup_shuffle's sub_group_shuffle(T, uint), mangled per LLVM type.
_SHUFFLE_MANGLING = {"i32": "i", "i64": "l", "float": "f", "double": "d"}
# Attributes of the built-ins: pure reads of the work item's ids (equal calls are one value, as
# the other targets' register reads are), or operations every work item of a group must reach.
_PURE = (("memory", 0), ("nounwind", 0), ("willreturn", 0), ("nosync", 0))
_COLLECTIVE = (("convergent", 0), ("nounwind", 0))
# Atomics OpenCL devices need not have in one instruction, made compare-exchange loops (docs/targets.md,
# "Atomics on SPIR-V"): float arithmetic (SPIR-V's SPV_EXT_shader_atomic_float_add/_min_max/_float16_add,
# OpenCL's cl_ext_float_atomics), and every atomic on 8- and 16-bit elements (OpenCL has none), which
# exchange the aligned 32-bit word holding the element.
_FLOAT_RMW = frozenset({"fadd", "fsub", "fmin", "fmax", "fminimum", "fmaximum"})
_WORD_BITS = 32


def _builtin(builder, module: Module, name: str, result, args, attributes=_COLLECTIVE, label: str = ""):
    """A call of the OpenCL or SPIR-V built-in `name` (a spir_func the backend turns into instructions)."""
    fn = module.get_or_insert_function(name, FunctionType.get(result, [a.type for a in args]))
    fn.calling_convention = "spir_func"
    for attribute, value in attributes:
        fn.attributes.add(attribute, value)
    call = builder.call(fn, list(args), label)
    call.calling_convention = CALLING_CONVENTIONS["spir_func"]
    return call


def _constants(module: Module, *values: int):
    return [ConstantInt.get(module.context.i32, v) for v in values]


def _ballot(builder, module: Module, predicate):
    """The sub-group's ballot of the i1 `predicate`: a <4 x i32>, bit k of it lane k's."""
    llctx = module.context
    return _builtin(builder, module, "__spirv_GroupNonUniformBallot", VectorType.get(llctx.i32, 4),
                    [*_constants(module, _SUBGROUP), predicate])


def _here(builder, module: Module, lane):
    """An i1: whether `lane` (below 128) of the sub-group is active, bit `lane` of the ballot of true."""
    llctx = module.context
    words = _ballot(builder, module, ConstantInt.get(llctx.i1, 1))
    five, three, last = _constants(module, 5, 3, 31)
    word = builder.extract_element(words, builder.and_(builder.lshr(lane, five), three))
    return builder.trunc(builder.lshr(word, builder.and_(lane, last)), llctx.i1)


@dataclass(frozen=True, repr=False)
class SPIRVTarget(Target):
    """SPIR-V binaries ("obj") or SPIR-V assembly ("asm") from LLVM's SPIR-V backend."""

    name = "spirv"
    llvm_target = "SPIRV"
    kernel_calling_convention = "spir_kernel"
    is_gpu = True
    #: Float recurrences of loops (sums, products) through a volatile slot, so that a driver that reorders
    #: float reductions (Intel's OpenCL CPU runtime) cannot: gpuc/targets/ordered_reductions.py. The
    #: OpenCL runtime sets it for CPU devices.
    ordered_reductions: bool = False
    intrinsic_namespaces = ("llvm.spv.",)
    unselectable_intrinsics = _UNSELECTABLE
    stateful_codegen = True  # the backend's state from one emission breaks the next
    array_address_space = 1  # CrossWorkgroup
    can_trap = False
    # The backend cannot legalize atomicrmw uinc_wrap/udec_wrap.
    atomic_loops = frozenset({"inc", "dec"})
    indirect_calls = False
    inline_assembly = False
    inline_assembly_missing = ("SPIR-V carries inline assembly only through the extension SPV_INTEL_inline_assembly, "
                               "which gpuc does not enable (OpenCL drivers in general do not take it)")
    indirect_calls_missing = ("SPIR-V needs the extension SPV_INTEL_function_pointers for that, which gpuc's "
                              "spirv target does not enable")
    # The OpenCL extended instruction set: the backend turns the mangled OpenCL C builtin
    # declarations into OpExtInst. OpenCL's fmod is exact by its specification.
    math_library = "OpenCL"
    # print() calls OpenCL's printf, its format in the constant address space; bounds checks keep their
    # record in the program, read through a kernel (gpuc/targets/device_debug.py).
    printf_long = "l"
    constant_address_space = 2  # UniformConstant
    device_bounds_record = True

    def triple(self) -> str:
        return "spirv64-unknown-unknown"

    def printf(self, builder, module: Module, format, args) -> None:
        opencl_printf(builder, module, format, args)

    def prepare_module(self, job, module: Module, tm) -> None:
        super().prepare_module(job, module, tm)
        _declare_math_pure(module)

    def annotate_for_vectorizer(self, job, module: Module) -> bool:
        return _declare_math_pure(module) > 0  # also the math of code plugins compiled in

    def allows_external(self, name: str) -> bool:
        # OpenCL built-ins reach the backend as mangled declarations and become OpExtInst/builtins.
        return name.startswith(("llvm.", "_Z", "__spirv_")) or name == "printf"

    def intrinsic_issue(self, name: str, approximate: bool = False) -> str | None:
        if _ldexp_builtin(name) is not None:
            return None  # finish_module calls OpenCL's ldexp instead
        return super().intrinsic_issue(name, approximate)

    def math_library_call(self, op: MathOp, bits: int) -> MathLowering:
        # OpenCL C's mangled name, e.g. _Z5atan2dd
        return MathLowering("call", f"_Z{len(op.c_name)}{op.c_name}" + ("f" if bits == 32 else "d") * op.params)

    def global_index(self, builder, module: Module, dim: int):
        # OpenCL's get_global_id(uint) -> size_t: the SPIR-V backend turns it into GlobalInvocationId.
        # A pure read (the autodiff plugin recognizes a work item's own elements by equal calls).
        return _builtin(builder, module, "_Z13get_global_idj", module.context.i64, _constants(module, dim), _PURE,
                        f"index{dim}")

    # -- the block model -------------------------------------------------------------------
    shared_address_space = 3  # Workgroup
    local_address_space = 0  # Function
    warp_size = None  # the sub-group size, which the device chooses
    grid_barrier_missing = ("needs every work-group of the launch running at once, which OpenCL does not "
                            "promise (SPIR-V kernels have no cooperative launch)")
    dynamic_shared_missing = None
    # OpenCL sizes local memory at launch through a kernel argument: a local pointer set with
    # clSetKernelArg(kernel, index, bytes, NULL), its size in the next argument (docs/kernel-abi.md).
    dynamic_shared_parameters = True

    def work_item(self, builder, module: Module, what: str, dim: int):
        i64 = module.context.i64
        if what in _SUB_GROUP:
            value = _builtin(builder, module, _SUB_GROUP[what], module.context.i32, [], _PURE)
            return builder.zext(value, i64, what)
        return _builtin(builder, module, _GEOMETRY[what], i64, _constants(module, dim), _PURE, what)

    def barrier(self, builder, module: Module, kind: str | None = None, predicate=None):
        void, i32 = module.context.void, module.context.i32
        everyone = _constants(module, _WORKGROUP, _WORKGROUP, _ALL_MEMORY)
        _builtin(builder, module, "__spirv_ControlBarrier", void, everyone)
        if kind is None:
            return None
        result = _builtin(builder, module, _WORK_GROUP_FUNCTIONS[kind], i32, [builder.zext(predicate, i32)])
        return result if kind == "count" else builder.icmp("ne", result, ConstantInt.get(i32, 0))

    def fence(self, builder, module: Module, scope: str) -> None:
        _builtin(builder, module, "__spirv_MemoryBarrier", module.context.void,
                 _constants(module, _FENCE_SCOPES[scope], _ALL_MEMORY))

    def syncwarp(self, builder, module: Module) -> None:
        _builtin(builder, module, "__spirv_ControlBarrier", module.context.void,
                 _constants(module, _SUBGROUP, _SUBGROUP, _ALL_MEMORY))

    def shuffle(self, builder, module: Module, kind: str, value, operand):
        # OpGroupNonUniformShuffle from a lane outside the sub-group, or not there (returned), gives an
        # undefined value: keep the caller's there. The ballot of true says which lanes are there.
        i32 = module.context.i32
        if kind == "idx":
            source = builder.urem(operand, _builtin(builder, module, _SUB_GROUP["warp_size"], i32, [], _PURE))
        else:
            lane = _builtin(builder, module, _SUB_GROUP["lane_index"], i32, [], _PURE)
            source = shuffle_source_lane(builder, kind, lane, operand, None)
        name = f"_Z17sub_group_shuffle{_SHUFFLE_MANGLING[str(value.type)]}j"
        shuffled = _builtin(builder, module, name, value.type, [value, source])
        size = _builtin(builder, module, "_Z18get_sub_group_sizev", i32, [], _PURE)
        return builder.select(builder.and_(builder.icmp("ult", source, size), _here(builder, module, source)),
                              shuffled, value)

    def vote(self, builder, module: Module, kind: str, predicate):
        llctx = module.context
        if kind == "ballot":
            i64 = llctx.i64
            words = _ballot(builder, module, predicate)
            low, high = (builder.zext(builder.extract_element(words, c), i64) for c in _constants(module, 0, 1))
            return builder.or_(low, builder.shl(high, ConstantInt.get(i64, 32)))
        name = "__spirv_GroupNonUniformAny" if kind == "any" else "__spirv_GroupNonUniformAll"
        return _builtin(builder, module, name, llctx.i1, [*_constants(module, _SUBGROUP), predicate])

    def emit(self, job, module: Module, tm, output: str, *, contained: bool = True):
        # Recursive functions returning an aggregate are where the backend has aborted (phis of
        # tuples, now split by finish_module); such a crash is contained (stateful_codegen: a helper
        # process) and said as the user's to fix.
        recursive = _recursive_function(module)
        try:
            return super().emit(job, module, tm, output, contained=contained)
        except Exception as exc:  # noqa: BLE001 - the contained crash, whatever the backend said
            if recursive is None:
                raise
            raise CompilationError(f"@{recursive} calls itself, directly or through other functions, and returns a "
                                   "tuple, which the SPIR-V backend could not compile",
                                   hint="return the tuple's elements through an array, or write the recursion as "
                                        "a loop, for the spirv target") from exc

    def mark_kernel(self, job, fn: Function, module: Module) -> Function | None:
        # OpenCL drivers take no aggregate kernel arguments (Intel's compiler crashes on them): the
        # entry takes their scalars (docs/kernel-abi.md, "SPIR-V entries").
        super().mark_kernel(job, fn, module)
        flat = flatten_aggregate_params(module, fn)
        return None if flat == fn else flat

    def finish_module(self, job, module: Module, tm) -> None:
        record = define_bounds_record(module)
        if record is not None:
            add_bounds_reader(module, record, self.kernel_calling_convention)
        _ldexp_as_builtin(module)
        # Intel's OpenCL CPU runtime (2026.2, on hosts with AVX-512) returns y for fmod(x, y) of a float32
        # subnormal y dividing x, where the result is 0: a result as large as |y| is taken back by |y|.
        _fmod_below_divisor(module)
        # Intel's OpenCL compiler (2026.2) dies in its instcombine on sin and cos of x next to sin and cos
        # of sin(x) (as derivatives make them); each pair of one argument in a block is one sincos instead.
        _fuse_sin_cos(module)
        _expand_atomics(module)
        # OpenCL leaves a barrier undefined unless every work item of the group reaches it: work items that
        # returned take part in the barriers the others still reach (gpuc/targets/converged_barriers.py).
        kernels = [fn for fn in module.functions
                   if not fn.is_declaration and fn.calling_convention == self.kernel_calling_convention]
        inline_collectives(module, kernels)
        for fn in kernels:
            converge_barriers(module, fn, barrier_attributes=(_WORKGROUP, _WORKGROUP, _ALL_MEMORY), builtin=_builtin)
        if self.ordered_reductions:
            keep_reduction_order(module)
        # The backend gives a phi of a struct (a func's tuple result, returned on two paths) the type of
        # its first element: one phi per element instead.
        _split_aggregate_phis(module)
        # It cannot translate constant aggregates holding others (`{ {float, float} zeroinitializer, ... }` as a
        # derivative's argument): they are built by insertvalue from their scalars instead.
        _materialize_constant_aggregates(module)
        # The SPIR-V backend emits an OpCompositeExtract of an undefined id for an extractvalue of an
        # aggregate that is itself extracted from another (a nested tuple argument's element): such
        # chains read the root aggregate from a stack copy instead, which it translates right.
        _flatten_nested_extracts(module)
        # The backend retypes a constant getelementptr by the instructions using it: a byte offset
        # into a shared array that an atomic also uses became an offset in elements (8 times as far).
        _materialize_constant_geps(module)
        # The backend converts a bool to a float through the integer 1, also for sitofp, where true is -1.
        _widen_bools_to_float(module)
        # The backend cannot legalize a bitcast to a vector of bools (a bit of a ballot, as instcombine
        # reads it): shifts and masks of the integer instead.
        _bits_without_bool_vectors(module)

    def unsupported_type(self, type_text: str) -> str | None:
        if type_text in ("x86_fp80", "fp128", "ppc_fp128"):
            return "SPIR-V has no 80- or 128-bit floating point"
        if type_text == "target":
            return None  # target("spirv.Image") and friends are SPIR-V's own
        return super().unsupported_type(type_text)

    def pipeline_segments(self, opt_level: int) -> dict[str, str]:
        # IndVarSimplify rewrites a loop's exit value in closed form with a wider integer (the sum
        # of 0..n-1 as an i65 product), which SPIR-V cannot express without an extension
        # (SPV_ALTERA_arbitrary_precision_integers): leave it out.
        segments = super().pipeline_segments(opt_level)
        return {name: without_pass(text, "indvars") for name, text in segments.items()}

    def __repr__(self) -> str:
        return "SPIRVTarget(ordered_reductions=True)" if self.ordered_reductions else "SPIRVTarget()"


# OpenCL's ldexp(gentype x, int k) of the extended instruction set, for the intrinsic the backend cannot lower
# and instcombine makes of exp2(sitofp k) and pow(2.0, sitofp k), that is, of 2.0 ** k for a small integer k.
_LDEXP = {("f32", "i32"): "_Z5ldexpfi", ("f64", "i32"): "_Z5ldexpdi"}


def _ldexp_builtin(name: str) -> str | None:
    """OpenCL's mangled ldexp for the intrinsic `name` (llvm.ldexp.f64.i32), or None."""
    if not name.startswith("llvm.ldexp."):
        return None
    base, suffixes = split_intrinsic(name)
    return _LDEXP.get(suffixes) if base == "ldexp" else None


def _ldexp_as_builtin(module: Module) -> None:
    """Replace each call of llvm.ldexp that OpenCL's ldexp computes by a call of that built-in."""
    with Builder(module.context) as b:
        for fn in list(module.functions):
            symbol = _ldexp_builtin(fn.name) if fn.is_declaration else None
            if symbol is None:
                continue
            for call in [u for u in fn.users if isinstance(u, CallInst) and u.callee == fn]:
                b.position_before(call)
                call.replace_all_uses_with(_builtin(b, module, symbol, call.type, call.args, _PURE))
                call.erase()


def _fmod_below_divisor(module: Module) -> None:
    """After each call of OpenCL's float32 fmod: fmod's result is smaller than |y| in magnitude (or a NaN,
    or x for an infinite y); a result r with |r| >= |y| is one |y| too far, so copysign(|r| - |y|, x)
    (exact: |r| and |y| are within a factor of two) is the result the specification gives."""
    fn = module.functions.get("_Z4fmodff")
    if fn is None:
        return
    f32 = module.context.float
    fabs = module.get_or_insert_function("llvm.fabs.f32", FunctionType.get(f32, [f32]))
    copysign = module.get_or_insert_function("llvm.copysign.f32", FunctionType.get(f32, [f32, f32]))
    with Builder(module.context) as b:
        for call in [u for u in fn.users if isinstance(u, CallInst) and u.callee == fn]:
            x, y = call.args[0], call.args[1]
            b.position_after(call)
            r, ay = b.call(fabs, [call]), b.call(fabs, [y])
            fixed = b.call(copysign, [b.fsub(r, ay), x])
            result = b.select(b.fcmp("oge", r, ay), fixed, call)
            call.replace_all_uses_with(result)
            r.operands[0], result.operands[2] = call, call  # the fix itself reads the call


#: OpenCL's sincos(x, __private T *cosval) per float type: returns the sine, stores the cosine.
_SINCOS = {"float": "_Z6sincosfPf", "double": "_Z6sincosdPd"}


def _fuse_sin_cos(module: Module) -> None:
    """Replace the llvm.sin and llvm.cos calls of one argument in one block, where both are made, by one call
    of OpenCL's sincos before the first of them (so it runs exactly where they ran: elsewhere the argument
    may be undefined, as a phi's value from a branch that does not compute it)."""
    found: dict = {}  # (block, argument) -> {"sin": [calls], "cos": [calls]}
    for ty in _SINCOS:
        for what in ("sin", "cos"):
            fn = module.functions.get(f"llvm.{what}.f{32 if ty == 'float' else 64}")
            for call in [u for u in fn.users if isinstance(u, CallInst) and u.callee == fn] if fn else ():
                found.setdefault((call.parent, call.args[0]), {"sin": [], "cos": []})[what].append(call)
    replaced = {}  # a sin or cos call made one of the pairs already -> its value (sin(sin(x)): x is one)
    with Builder(module.context) as b:
        for (block, x), calls in found.items():
            if not (calls["sin"] and calls["cos"]):
                continue
            x = replaced.get(x, x)
            mine = set(calls["sin"] + calls["cos"])
            first = next(i for i in block.instructions if i in mine)
            entry = block.parent.entry_block
            b.position_before(entry.instructions.first)
            slot = b.alloca(x.type, "cos.value")
            b.position_before(first)
            sine = _builtin(b, module, _SINCOS[str(x.type)], x.type, [x, slot], (("nounwind", 0), ("willreturn", 0)))
            cosine = b.load(x.type, slot)
            for what, value in (("sin", sine), ("cos", cosine)):
                for call in calls[what]:
                    call.replace_all_uses_with(value)
                    replaced[call] = value
                    call.erase()


def _expand_atomics(module: Module) -> None:
    """Make compare-exchange loops of the atomics in `_FLOAT_RMW` and of those on elements narrower than
    `_WORD_BITS` (docs/targets.md, "Atomics on SPIR-V")."""
    with Builder(module.context) as b:
        for fn in module.functions:
            if fn.is_declaration:
                continue
            for inst in [i for i in fn.instructions() if isinstance(i, (AtomicRMWInst, AtomicCmpXchgInst))]:
                if isinstance(inst, AtomicCmpXchgInst):
                    expand_narrow_cmpxchg(b, module, inst, _WORD_BITS)
                elif inst.operation in _FLOAT_RMW or (bit_width(inst.type) or _WORD_BITS) < _WORD_BITS:
                    expand_atomic_rmw(b, module, inst, _WORD_BITS)


def _declare_math_pure(module: Module) -> int:
    """Declare the OpenCL math built-ins the module calls (math_library_call's: floats in, the same float
    out) free of memory effects, as they are; returns how many were not yet. LLVM then computes a call
    whose value only the code after a loop reads after the loop, once: left in the loop, any such call
    crashed Intel's OpenCL compiler (its ADCE pass, SIGSEGV; OpenCL C source crashes it the same way)."""
    count = 0
    for fn in module.functions:
        if not (fn.is_declaration and fn.name.startswith("_Z")) or "memory" in fn.attributes:
            continue
        kinds = {str(fn.return_type)} | {str(a.type) for a in fn.args}
        if len(kinds) == 1 and kinds <= {"half", "float", "double"}:
            for attribute, value in _PURE:
                fn.attributes.add(attribute, value)
            count += 1
    return count


def _element_types(ty) -> list:
    """The element types of a struct or array type, else []."""
    if isinstance(ty, StructType):
        return ty.elements
    if isinstance(ty, ArrayType):
        return [ty.element_type] * ty.count
    return []


def _split_aggregate_phis(module: Module) -> None:
    """Replace each phi of a struct or array by one phi per element: a user `extractvalue %phi, k` reads
    the k-th one, other users an aggregate built again after the block's phis."""
    with Builder(module.context) as b:
        for fn in module.functions:
            if fn.is_declaration:
                continue
            work = [i for i in fn.instructions() if isinstance(i, PHINode) and _element_types(i.type)]
            while work:
                phi = work.pop()
                b.position_before(phi)
                parts = [b.phi(t, name=f"{phi.name}.{k}" if phi.name else "")
                         for k, t in enumerate(_element_types(phi.type))]
                extracted = {}  # (block, value) -> its elements: a block's entries must agree
                for value, source in phi.incoming:
                    key = (source, value)
                    if key not in extracted:
                        b.position_before(source.terminator)
                        extracted[key] = (parts if value == phi
                                          else [b.extract_value(value, k) for k in range(len(parts))])
                    for part, element in zip(parts, extracted[key]):
                        part.add_incoming(element, source)
                work += [p for p in parts if _element_types(p.type)]
                for use in list(phi.uses):
                    user = use.user
                    if (isinstance(user, AggregateInst) and user.opcode_name == "extractvalue"
                            and len(user.indices) == 1):
                        user.replace_all_uses_with(parts[user.indices[0]])
                        user.erase()
                if phi.uses:
                    b.position_before(next(i for i in phi.parent.instructions if not isinstance(i, PHINode)))
                    whole = Constant.undef(phi.type)
                    for k, part in enumerate(parts):
                        whole = b.insert_value(whole, part, k)
                    phi.replace_all_uses_with(whole)
                phi.erase()


def _bits_without_bool_vectors(module: Module) -> None:
    """Replace `extractelement (bitcast %x to <n x i1>), %k` by bit k of %x (an integer or a vector of
    integers: its element k / width, shifted right by k % width, truncated)."""
    with Builder(module.context) as b:
        for fn in module.functions:
            if fn.is_declaration:
                continue
            for cast in [i for i in fn.instructions() if i.opcode_name == "bitcast"]:
                ty = cast.type
                if not (isinstance(ty, VectorType) and str(ty.element_type) == "i1"):
                    continue
                source = cast.operands[0]
                vector = isinstance(source.type, VectorType)
                word = source.type.element_type if vector else source.type
                width = word.width
                for use in list(cast.uses):
                    user = use.user
                    if user.opcode_name != "extractelement":
                        continue
                    b.position_before(user)
                    k = user.operands[1]
                    if vector:
                        at = b.udiv(k, ConstantInt.get(k.type, width))
                        value = b.extract_element(source, at)
                        shift = b.urem(k, ConstantInt.get(k.type, width))
                    else:
                        value, shift = source, k
                    if shift.type.width != width:
                        shift = (b.zext if shift.type.width < width else b.trunc)(shift, word)
                    bit = b.trunc(b.lshr(value, shift), module.context.i1)
                    user.replace_all_uses_with(bit)
                    user.erase()
                if not cast.uses:
                    cast.erase()


def _materialize_constant_aggregates(module: Module) -> None:
    """Replace each constant struct or array holding another aggregate that an instruction (not a phi) uses by
    an insertvalue chain of its scalars before the instruction."""
    with Builder(module.context) as b:
        for fn in module.functions:
            if fn.is_declaration:
                continue
            for inst in [i for i in fn.instructions() if not isinstance(i, PHINode)]:
                for k, operand in enumerate(inst.operands):
                    if _nested_constant(operand):
                        b.position_before(inst)
                        inst.operands[k] = _built(b, operand)


def _nested_constant(value) -> bool:
    """Whether `value` is a constant struct or array (not undef, poison or an expression) with an aggregate
    element."""
    return type(value) is Constant and any(_element_types(t) for t in _element_types(value.type))


def _built(b: Builder, constant):
    """`constant` (a struct or array) as an insertvalue chain of its scalars; the chain starts from a stand-in
    the builder cannot fold, replaced by poison once built."""
    stand_in = b.freeze(Constant.poison(constant.type))
    whole = stand_in
    for k, t in enumerate(_element_types(constant.type)):
        part = b.extract_value(constant, k)  # folded: the constant element
        whole = b.insert_value(whole, _built(b, part) if _element_types(t) and type(part) is Constant else part, k)
    first = next(u.user for u in stand_in.uses)
    first.operands[0] = Constant.poison(constant.type)
    stand_in.erase()
    return whole


def _widen_bools_to_float(module: Module) -> None:
    """Make `sitofp i1 %b` (true is -1.0) `sitofp (sext %b to i32)`, and `uitofp i1` `uitofp (zext ...)`."""
    i32 = module.context.i32
    with Builder(module.context) as b:
        for fn in module.functions:
            if fn.is_declaration:
                continue
            for inst in [i for i in fn.instructions() if i.opcode_name in ("sitofp", "uitofp")]:
                ty = inst.operands[0].type
                if isinstance(ty, VectorType):
                    if str(ty.element_type) != "i1":
                        continue
                    wide = VectorType.get(i32, ty.count)
                elif str(ty) == "i1":
                    wide = i32
                else:
                    continue
                b.position_before(inst)
                extend = b.sext if inst.opcode_name == "sitofp" else b.zext
                inst.operands[0] = extend(inst.operands[0], wide)


def _materialize_constant_geps(module: Module) -> None:
    """Replace each constant `getelementptr` expression an instruction uses by a `getelementptr`
    instruction before it (before the incoming block's terminator for a phi)."""
    with Builder(module.context) as b:
        for fn in module.functions:
            if fn.is_declaration:
                continue
            for inst in list(fn.instructions()):
                for k, operand in enumerate(inst.operands):
                    if isinstance(operand, ConstantExpr) and operand.is_gep:
                        if isinstance(inst, PHINode):
                            b.position_before(inst.incoming_blocks[k].terminator)
                        else:
                            b.position_before(inst)
                        inst.operands[k] = _gep_instruction(b, operand)


def _gep_instruction(b: Builder, expression: ConstantExpr):
    base, *indices = expression.operands
    if isinstance(base, ConstantExpr) and base.is_gep:
        base = _gep_instruction(b, base)
    # built on a stand-in base, which the builder cannot fold into a constant expression again
    stand_in = b.freeze(base)
    gep = b.gep(expression.source_element_type, stand_in, indices, no_wrap=expression.no_wrap)
    gep.operands[0] = base
    stand_in.erase()
    return gep


def _flatten_nested_extracts(module: Module) -> None:
    """Replace each `extractvalue (extractvalue %root, i...), j...` by a load through a GEP into a
    copy of %root stored in an alloca of the function's entry block."""
    with Builder(module.context) as b, TargetData.from_layout(module.data_layout) as data:
        for fn in module.functions:
            if fn.is_declaration:
                continue
            copies = {}
            for block in list(fn.blocks):
                for inst in list(block.instructions):
                    if not (isinstance(inst, AggregateInst) and inst.opcode_name == "extractvalue"):
                        continue
                    aggregate = inst.operands[0]
                    if not (isinstance(aggregate, AggregateInst) and aggregate.opcode_name == "extractvalue"):
                        continue
                    path, root = list(inst.indices), aggregate
                    while isinstance(root, AggregateInst) and root.opcode_name == "extractvalue":
                        path = list(root.indices) + path
                        root = root.operands[0]
                    copy = copies.get(root)
                    if copy is None:
                        copy = copies[root] = _stack_copy(b, fn, root)
                    b.position_before(inst)
                    offset = _byte_offset(data, root.type, path)
                    address = b.gep(module.context.i8, copy, [ConstantInt.get(module.context.i64, offset)])
                    loaded = b.load(inst.type, address, inst.name)
                    inst.replace_all_uses_with(loaded)
                    inst.erase()


def _byte_offset(data: TargetData, ty, path) -> int:
    """Where the element at `path` lies in a value of aggregate type `ty` (byte GEPs only: the backend
    turns a constant 0 struct index into OpConstantNull, which SPIR-V refuses as one)."""
    offset = 0
    for k in path:
        if isinstance(ty, StructType):
            offset += data.element_offset(ty, k)
            ty = ty.elements[k]
        else:  # an array
            ty = ty.element_type
            offset += k * data.size_of(ty)
    return offset


def _stack_copy(b: Builder, fn, root):
    """An alloca in `fn`'s entry block holding `root` (stored where `root` is defined)."""
    entry = fn.entry_block
    b.position_before(entry.instructions.first)
    slot = b.alloca(root.type, "nested")
    if isinstance(root, PHINode):
        b.position_before(next(i for i in root.parent.instructions if not isinstance(i, PHINode)))
    elif isinstance(root, Instruction):
        b.position_after(root)
    b.store(root, slot)
    return slot


def _recursive_function(module: Module) -> str | None:
    """The name of a defined function returning an aggregate on a cycle of direct calls, or None."""
    calls = {}
    for fn in module.functions:
        if fn.is_declaration:
            continue
        calls[fn.name] = {inst.callee.name for block in fn.blocks for inst in block.instructions
                          if isinstance(inst, CallInst) and isinstance(inst.callee, Function)
                          and not inst.callee.is_declaration}
    state = {}

    def visit(name: str) -> str | None:
        state[name] = "open"
        for callee in sorted(calls.get(name, ())):
            if state.get(callee) == "open":
                return callee
            if callee not in state:
                found = visit(callee)
                if found is not None:
                    return found
        state[name] = "done"
        return None

    aggregates = {fn.name for fn in module.functions if not fn.is_declaration
                  and (isinstance(fn.return_type, StructType) or str(fn.return_type).startswith("["))}
    for name in calls:
        if name not in state:
            found = visit(name)
            if found is not None and found in aggregates:
                return found
    return None
