"""NVIDIA PTX: nvptx64, `ptx_kernel` entry points, libdevice for math functions."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import CompilationError
from ..llvm import ArrayType, Builder, Constant, ConstantInt, FunctionType, Module
from .device_debug import cuda_vprintf, define_bounds_record
from .interface import MathLowering, shuffle_by_words, shuffle_source_lane, MathOp, Target, float_element, split_intrinsic, unselectable_table

# Lowest PTX ISA version that supports each compute capability (by sm number).
_PTX_FOR_SM = ((100, 86), (90, 80), (89, 78), (87, 74), (86, 71), (80, 70), (75, 63), (72, 61), (70, 60), (0, 60))
# Functions the CUDA driver provides to PTX.
_DRIVER_FUNCTIONS = frozenset({"vprintf", "malloc", "free", "__assertfail", "__nvvm_reflect"})
# Math intrinsics NVPTX cannot select (it has no library to call; gpuc's math goes to libdevice).
_UNSELECTABLE = unselectable_table({
    "f16 bf16 f32 f64": "sin cos tan asin acos atan atan2 sinh cosh tanh exp exp10 log log2 log10 pow "
                        "sincos modf lrint llrint lround llround",
    "f64": "exp2", "bf16": "canonicalize", "*": "clear_cache",
})
# ... except these, which have approximate instructions (sin.approx.f32) for calls flagged `afn`.
_APPROXIMATE = unselectable_table({"f16 f32": "sin cos tanh"})
# The math functions NVPTX expands itself; the rest call libdevice. (It cannot select most math
# intrinsics, llvm.exp2.f64 crashes it, and llvm.exp2.f32 becomes the approximate ex2.approx.)
_EXPANDED = frozenset({"sqrt", "floor", "ceil", "trunc", "fabs", "copysign", "fma"})
# A PTX identifier: [a-zA-Z]{followsym}* or [_$%]{followsym}+, followsym = [a-zA-Z0-9_$].
_PTX_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_$]*|[_$%][A-Za-z0-9_$]+")
# Names gpuc leaves as they are: valid PTX without "$", which mangled names always contain.
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_WARP_SIZE = 32
# The special registers Target.work_item reads, per dimension (CUDA's threadIdx, blockIdx, blockDim, gridDim).
_GEOMETRY = {"thread_index": "tid", "block_index": "ctaid", "block_dim": "ntid", "grid_dim": "nctaid"}
# bar.red's operation and result type per barrier kind (__syncthreads_count, _and, _or).
_BARRIER_REDUCTIONS = {"count": ("popc", "i32"), "all": ("and", "i1"), "any": ("or", "i1")}
_MEMBARS = {"device": "llvm.nvvm.membar.gl", "block": "llvm.nvvm.membar.cta"}
_GRID_BARRIER = "gpuc.grid_barrier"


def ptx_symbol(name: str) -> str:
    """`name` as a PTX identifier: unchanged when it is plain ([A-Za-z_][A-Za-z0-9_]*), else
    mangled: "." becomes "_$_" (LLVM's own spelling) and every other character that PTX does not
    allow, "$" included, becomes "$<hex code point>_". The code is prefix-free and every mangled
    name contains "$", which plain names lack, so distinct names stay distinct."""
    if _PLAIN.fullmatch(name):
        return name
    out = []
    for i, ch in enumerate(name):
        if ch == ".":
            out.append("_$_")
        elif ch == "_" or ch.isascii() and ch.isalnum() and not (i == 0 and ch.isdigit()):
            out.append(ch)
        else:
            out.append(f"${ord(ch):x}_")
    return "".join(out)


def _default_ptx_version(cap: str) -> int:
    sm = int(re.match(r"sm_(\d+)", cap).group(1))
    return next(ptx for floor, ptx in _PTX_FOR_SM if sm >= floor)


@lru_cache(maxsize=None)
def find_libdevice() -> Path | None:
    """libdevice.10.bc: GPUC_LIBDEVICE, NVIDIA's pip wheel (nvidia-cuda-nvcc-cu12), or a CUDA install."""
    env = os.environ.get("GPUC_LIBDEVICE")
    if env:
        return Path(env) if Path(env).exists() else None
    candidates = []
    try:
        import nvidia.cuda_nvcc as wheel  # type: ignore[import-not-found]

        candidates += [Path(p) / "nvvm/libdevice/libdevice.10.bc" for p in wheel.__path__]
    except ImportError:
        pass
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root:
            candidates.append(Path(root) / "nvvm/libdevice/libdevice.10.bc")
    return next((p for p in candidates if p.exists()), None)


def find_ptxas() -> str | None:
    """NVIDIA's PTX assembler: GPUC_PTXAS, PATH, this interpreter's bin directory (scripts/setup.sh
    links the wheel's there), NVIDIA's pip wheel (the `ptx` extra), or a CUDA install."""
    candidates = [os.environ.get("GPUC_PTXAS"), shutil.which("ptxas"), str(Path(sys.executable).parent / "ptxas")]
    try:
        import nvidia.cuda_nvcc as wheel  # type: ignore[import-not-found]

        candidates += [str(Path(p) / "bin/ptxas") for p in wheel.__path__]
    except ImportError:
        pass
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda", "/usr/local"):
        if root:
            candidates.append(str(Path(root) / "bin/ptxas"))
    return next((c for c in candidates if c and os.path.isfile(c) and os.access(c, os.X_OK)), None)


def _intrinsic(builder, module: Module, name: str, result, args=()):
    """A call of the NVVM intrinsic `name` (checked to exist in this LLVM) on `args`."""
    return builder.call(module.declare_intrinsic(name, FunctionType.get(result, [a.type for a in args])), list(args))


def _sreg(builder, module: Module, reg: str):
    """The i32 special register %<reg> ("tid.x", "laneid", ...)."""
    return _intrinsic(builder, module, f"llvm.nvvm.read.ptx.sreg.{reg}", module.context.i32)


def _grid_barrier_function(module: Module):
    """`void @gpuc.grid_barrier()`, added on first use. Each block's first thread arrives at a counter in
    global memory and waits for the generation after its own; the last to arrive resets the counter and
    starts that generation. The counter is zero after every barrier, so the module's globals need no reset
    between launches. Every block of the launch must be resident at once (a cooperative launch)."""
    fn = module.functions.get(_GRID_BARRIER)
    if fn is not None:
        return fn
    llctx = module.context
    i32, void = llctx.i32, llctx.void
    arrived, generation = (_global_counter(module, f"{_GRID_BARRIER}.{what}") for what in ("arrived", "generation"))
    fn = module.add_function(_GRID_BARRIER, FunctionType.get(void, []))
    fn.linkage = "internal"
    for attribute in ("convergent", "nounwind"):
        fn.attributes.add(attribute)
    entry, first, last, wait, leave, done = (
        fn.append_block(name) for name in ("entry", "first", "last", "wait", "leave", "done"))
    zero, one = ConstantInt.get(i32, 0), ConstantInt.get(i32, 1)
    with Builder(llctx) as b:
        b.position_at_end(entry)
        _intrinsic(b, module, "llvm.nvvm.barrier.cta.sync.aligned.all", void, [zero])
        thread = b.or_(b.or_(_sreg(b, module, "tid.x"), _sreg(b, module, "tid.y")), _sreg(b, module, "tid.z"))
        b.cond_br(b.icmp("eq", thread, zero), first, done)
        b.position_at_end(first)
        # read before arriving: the generation cannot move on until this block has arrived
        now = b.load(i32, generation, "generation", align=4, ordering="monotonic")
        _intrinsic(b, module, "llvm.nvvm.membar.gl", void)  # the block's writes, before it arrives
        blocks = b.mul(b.mul(_sreg(b, module, "nctaid.x"), _sreg(b, module, "nctaid.y")), _sreg(b, module, "nctaid.z"))
        before = b.atomic_rmw("add", arrived, one, "arrived")
        b.cond_br(b.icmp("eq", before, b.sub(blocks, one)), last, wait)
        b.position_at_end(last)
        b.store(zero, arrived, align=4, ordering="monotonic")
        _intrinsic(b, module, "llvm.nvvm.membar.gl", void)  # the reset, before anyone arrives again
        b.atomic_rmw("add", generation, one)
        b.br(leave)
        b.position_at_end(wait)
        seen = b.load(i32, generation, "seen", align=4, ordering="monotonic")
        b.cond_br(b.icmp("eq", seen, now), wait, leave)
        b.position_at_end(leave)
        _intrinsic(b, module, "llvm.nvvm.membar.gl", void)  # the other blocks' writes, before this one reads
        b.br(done)
        b.position_at_end(done)
        _intrinsic(b, module, "llvm.nvvm.barrier.cta.sync.aligned.all", void, [zero])
        b.ret()
    return fn


def _global_counter(module: Module, name: str):
    """An internal i32 in global memory (address space 1), zero when the module is loaded."""
    i32 = module.context.i32
    gv = module.add_global(i32, name, 1)
    gv.initializer = Constant.null(i32)
    gv.linkage = "internal"
    gv.alignment = 4
    return gv


@dataclass(frozen=True, repr=False)
class PTXTarget(Target):
    """PTX for compute capability `cap` ("sm_90"); `ptx_version` defaults to the lowest that supports it."""

    cap: str = "sm_90"
    ptx_version: int | None = None

    name = "ptx"
    llvm_target = "NVPTX"
    kernel_calling_convention = "ptx_kernel"
    emit_kinds = ("asm",)  # NVPTX has no object emitter: ptxas turns PTX into a cubin
    is_gpu = True
    intrinsic_namespaces = ("llvm.nvvm.",)
    unselectable_intrinsics = _UNSELECTABLE
    isolated_codegen = True
    math_library = "libdevice"  # linked by link_libraries
    heap_functions = ("malloc", "free")  # the CUDA driver's device heap (cudaLimitMallocHeapSize)
    math_intrinsics = {32: _EXPANDED, 64: _EXPANDED}
    # No `frem`: NVPTX expands it as x - trunc(x/y)*y, wrong for large quotients (1e17 % 3.0
    # gives 4), so fmod calls libdevice's exact __nv_fmod.
    cli_options = {"cap": ("cap", "PTX compute capability")}
    # print() calls CUDA's vprintf; bounds checks keep their record in the module, where the CUDA runtime
    # finds it by name (gpuc/targets/device_debug.py).
    printf_long = "ll"
    constant_address_space = 1
    device_bounds_record = True

    def __post_init__(self) -> None:
        if not re.fullmatch(r"sm_\d+[af]?", self.cap):
            raise ValueError(f"PTXTarget cap must look like 'sm_90', not {self.cap!r}")
        if self.ptx_version is None:
            object.__setattr__(self, "ptx_version", _default_ptx_version(self.cap))

    #: What turns this target's assembly into an object (`assemble`), and where to get it.
    assembler = "ptxas"
    assembler_hint = "the ptx extra: pip install 'gpuc[ptx]', or a CUDA toolkit"

    def assemble(self, ptx: str) -> bytes | None:
        """A cubin for `cap` from PTX text with ptxas; None when ptxas is not installed."""
        exe = find_ptxas()
        if exe is None:
            return None
        with tempfile.TemporaryDirectory(prefix="gpuc-ptxas-") as tmp:
            source, cubin = Path(tmp) / "module.ptx", Path(tmp) / "module.cubin"
            source.write_text(ptx)
            proc = subprocess.run([exe, f"-arch={self.cap}", str(source), "-o", str(cubin)], capture_output=True,
                                  text=True)
            if proc.returncode:
                raise CompilationError(f"ptxas -arch={self.cap} rejected the PTX: {proc.stderr.strip()}")
            return cubin.read_bytes()

    def triple(self) -> str:
        return "nvptx64-nvidia-cuda"

    def cpu(self) -> str:
        return self.cap

    def features(self) -> str:
        return f"+ptx{self.ptx_version}"

    def allows_external(self, name: str) -> bool:
        return name.startswith("llvm.") or name in _DRIVER_FUNCTIONS

    def external_hint(self, name: str) -> str | None:
        if name.startswith("__nv_") and find_libdevice() is None:
            return ("libdevice was not found; install NVIDIA's nvidia-cuda-nvcc-cu12 wheel or set GPUC_LIBDEVICE "
                    "to libdevice.10.bc")
        return None

    def math_library_call(self, op: MathOp, bits: int) -> MathLowering:
        return MathLowering("call", f"__nv_{op.c_name}f" if bits == 32 else f"__nv_{op.c_name}")

    def printf(self, builder, module: Module, format, args) -> None:
        cuda_vprintf(builder, module, format, args)

    def global_index(self, builder, module: Module, dim: int):
        # blockIdx * blockDim + threadIdx, from the special registers %ctaid, %ntid and %tid.
        i64, xyz = module.context.i64, "xyz"[dim]
        block, threads, thread = (builder.zext(_sreg(builder, module, f"{reg}.{xyz}"), i64)
                                  for reg in ("ctaid", "ntid", "tid"))
        return builder.add(builder.mul(block, threads), thread, f"index{dim}")

    # -- the block model -------------------------------------------------------------------
    shared_address_space = 3
    local_address_space = 0  # NVPTX's data layout names no alloca address space: allocas are generic
    warp_size = _WARP_SIZE
    grid_barrier_missing = None  # a counter in global memory; the launch must be cooperative
    dynamic_shared_missing = None

    def work_item(self, builder, module: Module, what: str, dim: int):
        i64 = module.context.i64
        if what == "warp_size":
            return ConstantInt.get(i64, _WARP_SIZE)
        # Warps are made of consecutive linear thread indices, so %laneid is the linear index modulo 32.
        reg = "laneid" if what == "lane_index" else f"{_GEOMETRY[what]}.{'xyz'[dim]}"
        return builder.zext(_sreg(builder, module, reg), i64, what)

    def barrier(self, builder, module: Module, kind: str | None = None, predicate=None):
        zero = ConstantInt.get(module.context.i32, 0)  # barrier 0, __syncthreads'
        if kind is None:
            _intrinsic(builder, module, "llvm.nvvm.barrier.cta.sync.aligned.all", module.context.void, [zero])
            return None
        op, result = _BARRIER_REDUCTIONS[kind]
        return _intrinsic(builder, module, f"llvm.nvvm.barrier.cta.red.{op}.aligned.all",
                          getattr(module.context, result), [zero, predicate])

    def grid_barrier(self, builder, module: Module) -> None:
        builder.call(_grid_barrier_function(module), [])

    def fence(self, builder, module: Module, scope: str) -> None:
        _intrinsic(builder, module, _MEMBARS[scope], module.context.void)

    def syncwarp(self, builder, module: Module) -> None:
        i32 = module.context.i32
        _intrinsic(builder, module, "llvm.nvvm.bar.warp.sync", module.context.void, [ConstantInt.get(i32, -1)])

    def shuffle(self, builder, module: Module, kind: str, value, operand):
        # By index, from the lane computed here: exact for any operand, and the lane is needed anyway to
        # keep the caller's value where it names none of the warp's, or one not there (past the block's
        # last work item, or returned), whose value shfl.sync leaves undefined.
        i32 = module.context.i32
        everyone, last = ConstantInt.get(i32, -1), ConstantInt.get(i32, _WARP_SIZE - 1)
        source = shuffle_source_lane(builder, kind, _sreg(builder, module, "laneid"), operand, last)
        shuffled = shuffle_by_words(builder, module, value, lambda word: _intrinsic(
            builder, module, "llvm.nvvm.shfl.sync.idx.i32", i32, [everyone, word, source, last]))
        i1 = module.context.i1
        here = _intrinsic(builder, module, "llvm.nvvm.vote.ballot.sync", i32, [everyone, ConstantInt.get(i1, 1)])
        inside = builder.icmp("ult", source, ConstantInt.get(i32, _WARP_SIZE))
        bit = builder.lshr(here, builder.and_(source, last))
        return builder.select(builder.and_(inside, builder.trunc(bit, i1)), shuffled, value)

    def vote(self, builder, module: Module, kind: str, predicate):
        llctx = module.context
        everyone = ConstantInt.get(llctx.i32, -1)
        if kind == "ballot":
            bits = _intrinsic(builder, module, "llvm.nvvm.vote.ballot.sync", llctx.i32, [everyone, predicate])
            return builder.zext(bits, llctx.i64)
        return _intrinsic(builder, module, f"llvm.nvvm.vote.{kind}.sync", llctx.i1, [everyone, predicate])

    def dynamic_shared(self, builder, module: Module, name: str):
        # Every `.extern .shared` array is the start of the block's dynamic shared memory, whatever it is
        # called; a declaration keeps its name, so it gets one PTX allows.
        symbol = ptx_symbol(name)
        gv = module.globals.get(symbol)
        if gv is None:
            gv = module.add_global(ArrayType.get(module.context.i8, 0), symbol, self.shared_address_space)
            gv.alignment = 16
        size = _sreg(builder, module, "dynamic_smem_size")
        return gv, builder.zext(size, module.context.i64, "shared_bytes")

    def unsupported_type(self, type_text: str) -> str | None:
        if type_text in ("x86_fp80", "fp128", "ppc_fp128"):
            return "NVPTX has no 80- or 128-bit floating point"
        return super().unsupported_type(type_text)

    def intrinsic_issue(self, name: str, approximate: bool = False) -> str | None:
        if approximate:
            base, suffixes = split_intrinsic(name)
            if float_element(suffixes) in _APPROXIMATE.get(base, ()):
                return None
        return super().intrinsic_issue(name, approximate)

    def symbol_issue(self, name: str) -> str | None:
        if name.startswith("llvm.") or _PTX_IDENTIFIER.fullmatch(name):
            return None
        return ("PTX identifiers are [a-zA-Z_$%][a-zA-Z0-9_$]*, and a declaration keeps its name so that it "
                "can be linked; define the symbol in the module (definitions are renamed) or rename it")

    def link_libraries(self, job, module: Module) -> list[str]:
        wanted = [f for f in module.functions if f.is_declaration and f.name.startswith("__nv_")]
        if not wanted:
            return []
        path = find_libdevice()
        if path is None:
            return []  # validation reports the undefined __nv_* functions with a hint
        lib = Module.parse(path.read_bytes(), module.context, name=str(path))
        lib.triple, lib.data_layout = module.triple, module.data_layout
        provided = {f.name for f in lib.functions if not f.is_declaration}
        clashes = sorted(f.name for f in module.functions if not f.is_declaration and f.name in provided)
        if clashes:  # linking would fail with "symbol multiply defined"
            lib.close()
            raise CompilationError(f"the module defines {', '.join('@' + n for n in clashes)}, which libdevice "
                                   "also defines", hint="rename them: the __nv_ prefix belongs to libdevice")
        module.link(lib)
        for name in provided:  # keep only what the module uses: unused definitions are dropped by DCE
            fn = module.functions.get(name)
            if fn is not None and not fn.is_declaration:
                fn.linkage = "internal"
        return ["libdevice"]

    def library_files(self) -> list:
        found = find_libdevice()
        return [found] if found is not None else []

    def library_function(self, name: str) -> bool:
        return name.startswith("__nv_")

    def finish_module(self, job, module: Module, tm) -> None:
        define_bounds_record(module)
        # PTX identifiers cannot contain "." (gpuc's symbols, e.g. `axpy.f32.f32.f32`, do) nor
        # anything outside [A-Za-z0-9_$] (a Python kernel may be named in any script), and LLVM
        # aborts on such a name. Its nvptx-assign-valid-global-names renames only local symbols;
        # rename the other definitions here, so the entry stays valid and result.entry names it.
        for symbol in (*module.functions, *module.globals):
            if symbol.is_declaration or symbol.linkage in ("internal", "private"):
                continue
            name = symbol.name
            if name and not name.startswith("llvm.") and ptx_symbol(name) != name:
                symbol.name = ptx_symbol(name)

    def __repr__(self) -> str:
        return f"PTXTarget(cap={self.cap!r})"
