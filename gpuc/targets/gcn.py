"""AMD GCN: amdgcn-amd-amdhsa code objects, `amdgpu_kernel` entry points, libclc for math functions."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..llvm import ArrayType, Constant, ConstantInt, FunctionType, Module
from . import libclc
from ..abi import LIBRARY_ATTRIBUTE
from .interface import MathLowering, shuffle_by_words, shuffle_source_lane, MathOp, Target, split_intrinsic, unselectable_table

# Math intrinsics AMDGPU cannot select (it lowers sin/cos/exp/log/pow only in single precision).
_UNSELECTABLE = unselectable_table({
    "f16 bf16 f32 f64": "tan asin acos atan atan2 sinh cosh tanh modf",
    "f64": "sin cos exp exp2 exp10 log log2 log10 pow sincos",
    "bf16": "lrint llrint lround llround", "*": "clear_cache",
})
# The math functions computed by their LLVM intrinsic, per float width; the rest call libclc. AMDGPU
# expands the exact ones, and in single precision the exponentials and logarithms to OpenCL's accuracy.
# It expands llvm.sin/cos/pow.f32 as well, but as bare hardware approximations (v_sin_f32 of x/2pi with
# no argument reduction, exp2(y * log2(x)) for pow, NaN for a negative x), far from the CPU's results.
_EXPANDED = frozenset({"sqrt", "floor", "ceil", "trunc", "rint", "fabs", "copysign", "fma"})
_MATH_INTRINSICS = {32: _EXPANDED | {"exp", "exp2", "log", "log2", "log10"}, 64: _EXPANDED}
# Intrinsics on the stack, which lower only for pointers into the private address space (5).
_STACK_INTRINSICS = ("frameaddress", "stacksave", "stackrestore")
# Fields of the HSA kernel dispatch packet (hsa_kernel_dispatch_packet_t): byte offset of the x field, bytes.
_WORKGROUP_SIZE, _GRID_SIZE = (4, 2), (12, 4)
# Code object v5's hidden kernel argument hidden_dynamic_lds_size (u32), in bytes from the implicit
# arguments: the launch's dynamic LDS, which HIP fills in.
_DYNAMIC_LDS_SIZE = 120
_FENCE_SCOPES = {"device": "agent", "block": "workgroup"}
# The LDS word barrier() counts predicates in.
_BARRIER_COUNTER = "gpuc.barrier_counter"


def _intrinsic(builder, module: Module, name: str, result, args=()):
    """A call of the AMDGPU intrinsic `name` (checked to exist in this LLVM) on `args`."""
    return builder.call(module.declare_intrinsic(name, FunctionType.get(result, [a.type for a in args])), list(args))


def _dispatch_field(builder, module: Module, field: tuple[int, int], dim: int):
    """An unsigned field of the HSA dispatch packet along `dim`, as an i32."""
    llctx = module.context
    offset, size = field
    packet = _intrinsic(builder, module, "llvm.amdgcn.dispatch.ptr", llctx.ptr(4))
    at = builder.gep(llctx.i8, packet, [ConstantInt.get(llctx.i64, offset + size * dim)])
    value = builder.load(llctx.int_type(8 * size), at, align=size)
    return value if size == 4 else builder.zext(value, llctx.i32)


def _scoped_fence(builder, module: Module, scope: str, ordering: str) -> None:
    """`fence syncscope(scope) ordering`, which gpuc.llvm's Builder cannot spell: a call of a one-fence
    function parsed from IR text and linked in once, always inlined."""
    name = f"gpuc.fence.{scope}.{ordering}"
    fn = module.functions.get(name)
    if fn is None:
        text = (f'define void @"{name}"() alwaysinline nounwind {{\n'
                f'  fence syncscope("{scope}") {ordering}\n  ret void\n}}\n')
        helper = Module.parse(text, module.context, name=name)
        helper.triple, helper.data_layout = module.triple, module.data_layout
        module.link(helper)
        fn = module.functions[name]
        fn.linkage = "internal"
    builder.call(fn, [])


def _workgroup_barrier(builder, module: Module) -> None:
    """s_barrier, with the workgroup's memory ordered across it (HIP's __syncthreads)."""
    _scoped_fence(builder, module, "workgroup", "release")
    _intrinsic(builder, module, "llvm.amdgcn.s.barrier", module.context.void)
    _scoped_fence(builder, module, "workgroup", "acquire")


def _barrier_counter(module: Module):
    gv = module.globals.get(_BARRIER_COUNTER)
    if gv is None:
        i32 = module.context.i32
        gv = module.add_global(i32, _BARRIER_COUNTER, 3)
        gv.initializer = Constant.undef(i32)  # LDS cannot be initialized
        gv.linkage = "internal"
        gv.alignment = 4
    return gv


@dataclass(frozen=True, repr=False)
class GCNTarget(Target):
    """AMDGPU code for the given `arch` ("gfx90a", "gfx942", ...)."""

    arch: str = "gfx90a"
    feature_string: str = ""

    name = "gcn"
    llvm_target = "AMDGPU"
    kernel_calling_convention = "amdgpu_kernel"
    is_gpu = True
    intrinsic_namespaces = ("llvm.amdgcn.",)
    unselectable_intrinsics = _UNSELECTABLE
    isolated_codegen = True
    array_address_space = 1  # global
    math_library = "libclc"  # its OpenCL built-ins, linked by link_libraries
    math_intrinsics = _MATH_INTRINSICS
    # `frem` is C's fmod, which the AMDGPU backend expands exactly (an iterative reduction).
    math_instructions = {"fmod": "frem"}
    cli_options = {"arch": ("arch", "GCN architecture")}

    def __post_init__(self) -> None:
        if not re.fullmatch(r"gfx[0-9a-f]+", self.arch):
            raise ValueError(f"GCNTarget arch must look like 'gfx90a', not {self.arch!r}")

    def triple(self) -> str:
        return "amdgcn-amd-amdhsa"

    def cpu(self) -> str:
        return self.arch

    def features(self) -> str:
        return self.feature_string

    def math_library_call(self, op: MathOp, bits: int) -> MathLowering:
        # OpenCL C's mangled name, e.g. _Z5atan2dd
        return MathLowering("call", f"_Z{len(op.c_name)}{op.c_name}" + ("f" if bits == 32 else "d") * op.params)

    def external_hint(self, name: str) -> str | None:
        if libclc.is_scalar_builtin(name) and libclc.find_libclc() is None:
            return libclc.missing()
        return None

    def library_files(self) -> list:
        found = libclc.find_libclc()
        return [found] if found is not None else []

    def library_function(self, name: str) -> bool:
        return libclc.is_scalar_builtin(name)

    def link_libraries(self, job, module: Module) -> list[str]:
        wanted = {f.name for f in module.functions if f.is_declaration and libclc.is_scalar_builtin(f.name)}
        if not wanted:
            return []
        path = libclc.find_libclc()
        if path is None:
            return []  # validation reports the undefined built-ins, with libclc.missing()'s hint
        lib = Module.parse(libclc.scalar_builtins(path), module.context, name=str(path))
        lib.triple, lib.data_layout = module.triple, module.data_layout
        # Internal functions are linked only where something linked calls them: the module gets what it
        # declares and what that uses. A definition of the same name in the module stays the module's.
        provided = set()
        for fn in lib.functions:
            if not fn.is_declaration:
                if fn.name in wanted:
                    provided.add(fn.name)
                else:
                    fn.linkage = "internal"
        if not provided:
            lib.close()
            return []
        module.link(lib)
        for name in provided:
            fn = module.functions[name]
            fn.linkage = "internal"
            # the autodiff plugin differentiates a call of it by the math rule, not through its body
            fn.attributes.add(LIBRARY_ATTRIBUTE, "libclc")
        return ["libclc"]

    def global_index(self, builder, module: Module, dim: int):
        # workgroup id * workgroup size + work-item id; the workgroup size comes from the HSA
        # dispatch packet.
        block, threads, thread = (self.work_item(builder, module, what, dim)
                                  for what in ("block_index", "block_dim", "thread_index"))
        return builder.add(builder.mul(block, threads), thread, f"index{dim}")

    # -- the block model -------------------------------------------------------------------
    shared_address_space = 3  # LDS
    local_address_space = 5  # private (scratch), the data layout's A5
    # Cooperative launches are what make every workgroup resident at once.
    grid_barrier_missing = "needs a cooperative launch, which gpuc does not make on GCN"
    dynamic_shared_missing = None

    @property
    def warp_size(self) -> int:
        # gfx10 and later run 32-wide waves unless asked for 64 ("+wavefrontsize64"); earlier chips only 64.
        chosen = re.findall(r"\+wavefrontsize(32|64)", self.feature_string)
        if chosen:
            return int(chosen[-1])
        return 32 if int(self.arch[3:-2]) >= 10 else 64

    def work_item(self, builder, module: Module, what: str, dim: int):
        llctx = module.context
        i32, i64, xyz = llctx.i32, llctx.i64, "xyz"[dim]
        if what == "warp_size":
            return ConstantInt.get(i64, self.warp_size)
        if what == "lane_index":
            # Waves are made of consecutive linear work-item ids, so the lane is the linear id modulo the
            # wave size: mbcnt counts the lanes below this one.
            everyone = ConstantInt.get(i32, -1)
            low = _intrinsic(builder, module, "llvm.amdgcn.mbcnt.lo", i32, [everyone, ConstantInt.get(i32, 0)])
            lane = _intrinsic(builder, module, "llvm.amdgcn.mbcnt.hi", i32, [everyone, low])
            return builder.zext(lane, i64, what)
        if what == "thread_index":
            return builder.zext(_intrinsic(builder, module, f"llvm.amdgcn.workitem.id.{xyz}", i32), i64, what)
        if what == "block_index":
            return builder.zext(_intrinsic(builder, module, f"llvm.amdgcn.workgroup.id.{xyz}", i32), i64, what)
        threads = _dispatch_field(builder, module, _WORKGROUP_SIZE, dim)
        if what == "block_dim":
            return builder.zext(threads, i64, what)
        # The packet's grid size counts work items (at least one); a partial last workgroup is a block too.
        items, one = _dispatch_field(builder, module, _GRID_SIZE, dim), ConstantInt.get(i32, 1)
        blocks = builder.add(builder.udiv(builder.sub(items, one), threads), one)
        return builder.zext(blocks, i64, what)

    def barrier(self, builder, module: Module, kind: str | None = None, predicate=None):
        if kind is None:
            _workgroup_barrier(builder, module)
            return None
        # The predicates meet in a counter in LDS that is never reset: each barrier reads it before the
        # work items add to it and after, and barriers separate every addition from every read.
        i32 = module.context.i32
        counter = _barrier_counter(module)
        counted = builder.not_(predicate) if kind == "all" else predicate
        before = builder.load(i32, counter, align=4)
        _workgroup_barrier(builder, module)
        builder.atomic_rmw("add", counter, builder.zext(counted, i32))
        _workgroup_barrier(builder, module)
        count = builder.sub(builder.load(i32, counter, align=4), before, "count")
        if kind == "count":
            return count
        return builder.icmp("ne" if kind == "any" else "eq", count, ConstantInt.get(i32, 0))

    def fence(self, builder, module: Module, scope: str) -> None:
        _scoped_fence(builder, module, _FENCE_SCOPES[scope], "seq_cst")

    def syncwarp(self, builder, module: Module) -> None:
        # A wave runs in lockstep: only the compiler must not move memory accesses across.
        _scoped_fence(builder, module, "wavefront", "release")
        _intrinsic(builder, module, "llvm.amdgcn.wave.barrier", module.context.void)
        _scoped_fence(builder, module, "wavefront", "acquire")

    def shuffle(self, builder, module: Module, kind: str, value, operand):
        # ds_bpermute reads a word from the lane its byte address names (4 * lane); the caller keeps its
        # value where the lane is none of the wave's, or one not there (past the block's last work item,
        # or returned): the exec mask, as the ballot of true, says which are.
        llctx = module.context
        i32, i64 = llctx.i32, llctx.i64
        last = ConstantInt.get(i32, self.warp_size - 1)
        lane = builder.trunc(self.work_item(builder, module, "lane_index", 0), i32)
        source = shuffle_source_lane(builder, kind, lane, operand, last)
        address = builder.shl(source, ConstantInt.get(i32, 2))
        shuffled = shuffle_by_words(builder, module, value, lambda word: _intrinsic(
            builder, module, "llvm.amdgcn.ds.bpermute", i32, [address, word]))
        here = _intrinsic(builder, module, "llvm.amdgcn.ballot.i64", i64, [ConstantInt.get(llctx.i1, 1)])
        inside = builder.icmp("ult", source, ConstantInt.get(i32, self.warp_size))
        bit = builder.lshr(here, builder.zext(builder.and_(source, last), i64))
        return builder.select(builder.and_(inside, builder.trunc(bit, llctx.i1)), shuffled, value)

    def vote(self, builder, module: Module, kind: str, predicate):
        # The 64-bit ballot, of inactive lanes 0 (in wave32 too); `all` asks that no active lane be false.
        i64 = module.context.i64
        counted = builder.not_(predicate) if kind == "all" else predicate
        bits = _intrinsic(builder, module, "llvm.amdgcn.ballot.i64", i64, [counted])
        if kind == "ballot":
            return bits
        return builder.icmp("ne" if kind == "any" else "eq", bits, ConstantInt.get(i64, 0))

    def dynamic_shared(self, builder, module: Module, name: str):
        llctx = module.context
        gv = module.globals.get(name)
        if gv is None:
            gv = module.add_global(ArrayType.get(llctx.i8, 0), name, self.shared_address_space)
            gv.alignment = 16
        arguments = _intrinsic(builder, module, "llvm.amdgcn.implicitarg.ptr", llctx.ptr(4))
        field = builder.gep(llctx.i8, arguments, [ConstantInt.get(llctx.i64, _DYNAMIC_LDS_SIZE)])
        size = builder.load(llctx.i32, field, align=4)
        return gv, builder.zext(size, llctx.i64, "shared_bytes")

    def unsupported_type(self, type_text: str) -> str | None:
        if type_text in ("x86_fp80", "fp128", "ppc_fp128"):
            return "AMDGPU has no 80- or 128-bit floating point"
        return super().unsupported_type(type_text)

    def intrinsic_issue(self, name: str, approximate: bool = False) -> str | None:
        base, suffixes = split_intrinsic(name)
        if base in _STACK_INTRINSICS and suffixes != ("p5",):
            return (f"AMDGPU's stack is in address space 5: llvm.{base} lowers only as llvm.{base}.p5, "
                    f"not {name}")
        return super().intrinsic_issue(name, approximate)

    def __repr__(self) -> str:
        return f"GCNTarget(arch={self.arch!r})"
