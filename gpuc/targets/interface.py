"""The target interface: the fixed set of hooks every target implements, with their defaults.

A new target is one new file: a small frozen dataclass deriving from `Target` that overrides
the hooks it needs.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

from ..llvm import ConstantInt, Function, Module, Target as LLVMTarget, TargetMachine, initialize, process_lifetime
from .pipelines import SEGMENTS


_per_thread = threading.local()

# The namespaces of target-specific LLVM intrinsics (llvm.<namespace>.*) and the backend owning each.
INTRINSIC_OWNERS = {
    "x86": "X86", "nvvm": "NVPTX", "amdgcn": "AMDGPU", "r600": "R600", "spv": "SPIR-V", "aarch64": "AArch64",
    "arm": "ARM", "wasm": "WebAssembly", "ppc": "PowerPC", "riscv": "RISC-V", "mips": "Mips",
    "hexagon": "Hexagon", "s390": "SystemZ", "bpf": "BPF", "loongarch": "LoongArch", "ve": "VE",
    "xcore": "XCore", "dx": "DirectX",
}
# An overload suffix naming a floating-point element type (f64, v4f32, nxv2f64): the type a
# math intrinsic computes in.
_FLOAT_SUFFIX = re.compile(r"(?:n?xv\d+|v\d+)?(bf16|f16|f32|f64|f80|f128|ppcf128)")


def split_intrinsic(name: str) -> tuple[str, tuple[str, ...]]:
    """("sin", ("f64",)) for "llvm.sin.f64": an intrinsic's base name and overload suffixes.

    The base is everything up to the first suffix that names a type (iN, fN, vN..., pN, ...)."""
    parts = name.split(".")[1:]
    for i, part in enumerate(parts):
        if i and re.fullmatch(r"(?:n?xv\d+|v\d+)?(?:i\d+|bf16|f\d+|ppcf128|p\d+|s_.*|sl_.*|a\d+.*)", part):
            return ".".join(parts[:i]), tuple(parts[i:])
    return ".".join(parts), ()


def unselectable_table(rows: dict[str, str]) -> dict[str, frozenset[str]]:
    """{"f32 f64": "sin cos"} -> {"sin": {"f32", "f64"}, "cos": {...}}: a target's unselectable_intrinsics."""
    table: dict[str, set[str]] = {}
    for types, bases in rows.items():
        for base in bases.split():
            table.setdefault(base, set()).update(types.split())
    return {base: frozenset(types) for base, types in table.items()}


def float_element(suffixes: tuple[str, ...]) -> str | None:
    """The floating-point element type ("f64") an intrinsic's overload suffixes name, if any."""
    for part in suffixes:
        m = _FLOAT_SUFFIX.fullmatch(part)
        if m:
            return m.group(1)
    return None


@dataclass(frozen=True)
class MathOp:
    """A math function the frontend asks a target to lower: its Python `name`, its C name (libm,
    libdevice and OpenCL spell it so), the library function's parameter count, and whether LLVM
    has an intrinsic `llvm.<c_name>.f32/.f64` for it."""

    name: str
    c_name: str
    params: int
    intrinsic: bool


@dataclass(frozen=True)
class MathLowering:
    """How a target computes a math function: `kind` "intrinsic" (call the LLVM intrinsic
    `symbol`), "call" (call the math library's function `symbol`, with `calling_convention` when
    it is not C's) or "instruction" (`symbol` names the instruction, e.g. "frem")."""

    kind: str
    symbol: str
    calling_convention: str | None = None


#: How kernels read gpuc.index() / gpuc.ndrange() (docs/kernel-abi.md), the values of
#: `Target.launch_context`: from the %gpuc.Context a trailing `ptr %gpuc.ctx` points to (the CPU
#: launcher fills it), or from the target's work-item registers (`Target.global_index`) with the
#: launch size in trailing i64 parameters.
CONTEXT_POINTER, WORK_ITEM_REGISTERS = "context-pointer", "work-item-registers"


@dataclass(frozen=True)
class Target:
    """Base class of gpuc targets; instances are immutable and hashable (they key caches)."""

    name = "abstract"           # short name, its key in TARGETS and the CLI
    llvm_target = ""            # LLVM target to initialize: "X86", "NVPTX", ...
    kernel_calling_convention = None  # e.g. "ptx_kernel"; a class attribute, not a field
    emit_kinds = ("asm", "obj")  # what `emit` can produce; the driver rejects the others up front
    is_gpu = False
    #: Namespaces of target-specific intrinsics this backend implements ("llvm.nvvm.").
    intrinsic_namespaces = ()
    #: Generic intrinsics this backend's instruction selection cannot lower: base name -> the
    #: floating-point element types it fails for ("*": every overload). Found by compiling each
    #: one with the backend; tests/compiler/test_lowering_limits.py checks the tables against it.
    unselectable_intrinsics = {}
    #: Whether machine code for IR that gpuc did not generate itself (IRSource, third-party
    #: plugins) is generated in a helper process (gpuc/llvm/isolated.py), so that a fatal error in
    #: the backend costs that process, not the caller's. gpuc's own IR, validated, is generated
    #: in-process: the helper's bitcode round trip costs 1.1-1.3x on small kernels
    #: (benchmarks/bench_codegen_containment.py).
    isolated_codegen = False
    #: Whether the backend keeps state between emissions that breaks the next one (SPIR-V): its
    #: machine code is then generated in a fresh helper process each time (or a fresh machine).
    stateful_codegen = False

    # -- what the frontend and the built-in plugins ask (keep these cheap: they run per call) --
    #: The LLVM address space of array data pointers (docs/kernel-abi.md).
    array_address_space = 0
    #: Atomic addition on float elements (gpuc.atomic_add and atomic_sub on float arrays, the
    #: reverse sweep's accumulation); where it is False, `float_atomics_missing` says why, completing
    #: "atomic_add on float32 arrays ...".
    float_atomics = True
    float_atomics_missing = ""
    #: Whether the work items of a block run one after another on one thread (the CPU's work-item
    #: loops): the reverse sweep's adds into shared memory's shadow then need no atomics.
    serial_blocks = False
    #: Whether the launch entry runs the index space in chunks of work items, each chunk on one thread, one
    #: item after another (the CPU's `@<kernel>.range`): the reverse sweep's adds of every item into one
    #: element are then summed per chunk (gpuc/plugins/autodiff/sums.py).
    chunked_launches = False
    #: The other gpuc.atomic_* the backend cannot compile: {(operation, element type): why}, e.g.
    #: {("max", "float32"): "needs ..."}, `why` completing "atomic_max on float32 arrays ..." (see
    #: `atomic_issue`).
    atomics_missing = {}
    #: Which of gpuc.atomic_inc / atomic_dec ("inc", "dec") the backend cannot select as one
    #: `atomicrmw uinc_wrap/udec_wrap`: the frontend computes them in a `cmpxchg` loop instead.
    atomic_loops = frozenset()
    #: Memory allocated at run time by compiled code (the reverse sweep's tape for loops):
    #: the (malloc, free) functions to call, or None where the target has no allocator.
    heap_functions = None
    #: Whether `llvm.trap` stops a work item and makes its launch report an error (SPIR-V's OpenCL
    #: environment has no such instruction: code that would trap there takes a documented other way).
    can_trap = True
    # -- debugging (docs/debugging.md): print() and bounds checks where code runs on a device --
    #: The printf length modifier of 64-bit integers ("l" in OpenCL, "ll" in CUDA) where print() in
    #: kernels calls the target's own printf (`printf`); None where it has none: print() is then a
    #: located error, unless the CPU runtime of this process runs the code (`host_executable`).
    printf_long = None
    #: The LLVM address space of constant data: print()'s format strings, the bounds checks' sites.
    constant_address_space = 0
    #: Whether bounds checks keep their record in the module itself (abi.BOUNDS_DEVICE_RECORD_WORDS,
    #: defined at finish) for the device's runtime to read after a launch.
    device_bounds_record = False
    #: Function pointers: calls whose callee is not a function of the module, and functions used as
    #: values (deferred compilation's pointers, when the optimizer cannot make them direct calls).
    #: Where it is False, validation reports each one left after optimization, and
    #: `indirect_calls_missing` says why.
    indirect_calls = True
    indirect_calls_missing = ""
    #: Inline assembly (`call ... asm "..."`); where it is False, validation reports each function
    #: holding some, and `inline_assembly_missing` says why.
    inline_assembly = True
    inline_assembly_missing = ""
    #: The math library calls go to ("libm", "libdevice", "OpenCL"); None when the target has none,
    #: so that only what `math_intrinsics` and `math_instructions` cover is available.
    math_library = None
    #: Math functions (by name) whose LLVM intrinsic the backend expands itself, per float width;
    #: None: every one LLVM has. The others call the math library.
    math_intrinsics = None
    #: Math functions computed by one instruction instead of a call: name -> instruction ("frem").
    math_instructions = {}
    #: How kernels read their index and launch size: CONTEXT_POINTER or WORK_ITEM_REGISTERS.
    launch_context = WORK_ITEM_REGISTERS
    #: Whether the CPU runtime can run its code in this process (through the ORC JIT).
    host_executable = False
    #: `gpuc compile` options this target reads: option ("cap") -> (dataclass field, help).
    cli_options = {}

    def math_lowering(self, op: MathOp, bits: int) -> MathLowering | None:
        """How math.<op.name> on floats of `bits` bits is computed here, or None when it is not."""
        expanded = self.math_intrinsics
        if op.intrinsic and (expanded is None or op.name in expanded.get(bits, ())):
            return MathLowering("intrinsic", f"llvm.{op.c_name}.f{bits}")
        instruction = self.math_instructions.get(op.name)
        if instruction is not None:
            return MathLowering("instruction", instruction)
        if self.math_library is not None:
            return self.math_library_call(op, bits)
        return None

    def math_library_call(self, op: MathOp, bits: int) -> MathLowering:
        """The math library's function for `op` (targets with a `math_library` override this)."""
        raise NotImplementedError(f"{type(self).__name__} names a math library but not its functions")

    def atomic_issue(self, operation: str, dtype: str) -> str | None:
        """Why gpuc.atomic_<operation> ("add", "max", "cas", ..., docs/frontend.md) on an array of
        `dtype` ("int32", "uint64", "float32", ...) cannot be compiled here, completing
        "atomic_<operation> on <dtype> arrays ...", or None when it can. Only the pairs the language
        defines are asked (never bitwise operations on floats, nor inc/dec on signed integers)."""
        if operation in ("add", "sub") and dtype.startswith("float") and not self.float_atomics:
            return self.float_atomics_missing
        return self.atomics_missing.get((operation, dtype))

    def global_index(self, builder, module: Module, dim: int):
        """The global work-item index along `dim` (0-2), an i64 emitted at `builder`'s position,
        for WORK_ITEM_REGISTERS targets (the context plugin calls it)."""
        raise NotImplementedError(f"{type(self).__name__} reads no work-item registers")

    # -- the block model (docs/targets.md, "Blocks"): WORK_ITEM_REGISTERS targets answer these for
    # the context plugin, which calls them where the frontend's gpuc.ctx.* markers are; each emits
    # at `builder`'s position and returns the value (LLVM types as said). The CPU runs blocks itself
    # (gpuc/plugins/workitems.py) and reads none of them but the attributes.
    #: The LLVM address spaces of shared (per-block) memory and of local (per-work-item) arrays; the
    #: latter is the data layout's alloca address space.
    shared_address_space = 0
    local_address_space = 0
    #: Work items per warp, what gpuc.warp_size() returns; None where only the hardware knows it at
    #: run time (then `work_item("warp_size", 0)` reads it).
    warp_size = 32
    #: Why gpuc.grid_barrier() cannot be compiled here, completing "gpuc.grid_barrier() ...", or None.
    grid_barrier_missing = "needs a target that can synchronize every block of a launch"
    #: Why gpuc.shared.dynamic(...) cannot be compiled here, completing "gpuc.shared.dynamic ...", or None.
    dynamic_shared_missing = None
    #: Whether the kernel receives its dynamic shared memory as parameters (OpenCL's local pointer
    #: arguments): `ptr addrspace(S) %gpuc.shared, i64 %gpuc.shared_bytes`, threaded to every function
    #: that uses them, before the launch sizes; else `dynamic_shared` says where it is.
    dynamic_shared_parameters = False

    def printf(self, builder, module: Module, format, args) -> None:
        """Emit printf(`format`, *`args`) at `builder`'s position (only asked where `printf_long` is set):
        `format` a constant C string in `constant_address_space`, `args` i32, i64, double or float values
        and pointers to such strings, as the format's conversions take them."""
        raise NotImplementedError(f"{type(self).__name__} has no printf")

    def work_item(self, builder, module: Module, what: str, dim: int):
        """An i64: `what` along `dim` (0-2; 0 for the last two) — "thread_index" (within the block),
        "block_index", "block_dim" (work items per block), "grid_dim" (blocks in the grid),
        "lane_index" (the linear thread index modulo the warp size) or "warp_size"."""
        raise NotImplementedError(f"{type(self).__name__} reads no work-item registers")

    def barrier(self, builder, module: Module, kind: str | None = None, predicate=None):
        """A barrier of all work items of the block, with block-wide memory ordering; `kind` "count"
        (returns the i32 number of items whose i1 `predicate` is true), "all" or "any" (return an i1),
        None (returns None)."""
        raise NotImplementedError(f"{type(self).__name__} has no barriers")

    def grid_barrier(self, builder, module: Module) -> None:
        """A barrier of every work item of the launch (only asked when `grid_barrier_missing` is None)."""
        raise NotImplementedError(f"{type(self).__name__} has no grid barrier")

    def fence(self, builder, module: Module, scope: str) -> None:
        """A memory fence: `scope` "device" (every work item of the launch) or "block"."""
        raise NotImplementedError(f"{type(self).__name__} has no fences")

    def syncwarp(self, builder, module: Module) -> None:
        """A barrier of the work items of the warp."""
        raise NotImplementedError(f"{type(self).__name__} has no warp barrier")

    def shuffle(self, builder, module: Module, kind: str, value, operand):
        """The value (i32, i64, float or double) another lane of the warp holds: `kind` "idx" (from
        lane `operand` modulo the warp size), "up" (lane - operand), "down" (lane + operand), "xor"
        (lane ^ operand); the caller's own `value` where the source lane falls outside the warp or is
        not an active lane. `operand` is an i32."""
        raise NotImplementedError(f"{type(self).__name__} has no warp shuffles")

    def vote(self, builder, module: Module, kind: str, predicate):
        """Over the active lanes of the warp: `kind` "ballot" (an i64, bit k set when lane k's i1
        `predicate` is true), "any" or "all" (an i1)."""
        raise NotImplementedError(f"{type(self).__name__} has no warp votes")

    def dynamic_shared(self, builder, module: Module, name: str):
        """A pointer (in `shared_address_space`) to the dynamic shared memory, and an i64: its size in
        bytes, as a tuple (only asked when `dynamic_shared_missing` is None). `name` is the symbol the
        frontend gave it (gpuc.abi.DYNAMIC_SHARED_GLOBAL)."""
        raise NotImplementedError(f"{type(self).__name__} has no dynamic shared memory")

    @classmethod
    def from_cli(cls, options: dict[str, str]) -> "Target":
        """The target `gpuc compile --target NAME` describes; `options` holds the given options."""
        return cls(**{field: options[opt] for opt, (field, _) in cls.cli_options.items() if opt in options})

    @classmethod
    def pipeline_references(cls) -> dict[str, tuple[str, str]]:
        """For tools/gen_pipelines.py: pipeline key -> (triple, cpu) to print LLVM's pipelines for."""
        target = cls()
        return {target.pipeline_key(): (target.triple(), target.cpu())}

    # -- description ---------------------------------------------------------------------
    def triple(self) -> str:
        raise NotImplementedError

    def cpu(self) -> str:
        return ""

    def features(self) -> str:
        return ""

    def pipeline_key(self) -> str:
        """Which generated pipelines (gpuc/targets/pipelines.py) this target runs: its LLVM
        backend's, since the passes a backend adds to default<On> are what differs."""
        return self.llvm_target

    def pipeline_segments(self, opt_level: int) -> dict[str, str]:
        """The pass segments ("simplify", "optimize", "cleanup") for `opt_level` 1-3: LLVM's own
        default<On> for the target (without target passes for a backend not generated), which a
        target may adjust."""
        return SEGMENTS.get(self.pipeline_key(), SEGMENTS["generic"])[opt_level]

    def target_machine(self, opt_level: int = 2) -> TargetMachine:
        initialize(self.llvm_target)
        return LLVMTarget.from_triple(self.triple()).machine(self.cpu(), self.features(), opt_level=opt_level,
                                                            stateful=self.stateful_codegen)

    def cached_target_machine(self, opt_level: int = 2) -> TargetMachine:
        """A machine reused by every compile for this target and level on the calling thread.

        Creating a machine costs about a millisecond; LLVM machines are not thread-safe, so
        each thread keeps its own. Never close the returned machine.
        """
        machines = _per_thread.__dict__.setdefault("machines", {})
        key = (self, opt_level)
        tm = machines.get(key)
        if tm is None:
            tm = machines[key] = process_lifetime(self.target_machine(opt_level))
        return tm

    def data_layout(self) -> str:
        return self.cached_target_machine().data_layout

    # -- hooks called by the driver, in stage order ----------------------------------------
    def prepare_module(self, job, module: Module, tm: TargetMachine) -> None:
        """irgen: give the module this target's triple and data layout."""
        module.triple = self.triple()
        module.data_layout = tm.data_layout

    def link_libraries(self, job, module: Module) -> list[str]:
        """link: link target libraries the module needs; returns the names of those linked."""
        return []

    def library_files(self) -> list:
        """The files `link_libraries` may link (libdevice, libclc), or that the code calls into (the
        CPU's libmvec): the disk cache keys on them, so that a new version of a library is a miss."""
        return []

    def library_function(self, name: str) -> bool:
        """Whether `name` is a function of a library `link_libraries` links (kept a call, not
        inlined, while a plugin at the `optimized` point transforms the IR)."""
        return False

    def allows_external(self, name: str) -> bool:
        """validate: may the module call the undefined function `name` on this target?"""
        return not self.is_gpu or name.startswith("llvm.")

    def external_hint(self, name: str) -> str | None:
        """validate: what to do about a call of the undefined function `name` that this target
        would provide when set up (e.g. from a library it did not find), or None."""
        return None

    def unsupported_type(self, type_text: str) -> str | None:
        """validate: why a type keyword (x86_fp80, fp128, ppc_fp128, vscale, target for target
        extension types) cannot be used on this target, or None."""
        if type_text == "target":
            return f"target extension types (target(\"...\")) belong to other backends than {self.llvm_target}"
        if type_text == "vscale":
            return f"the {self.llvm_target} backend has no scalable vectors"
        if type_text == "ppc_fp128":
            return "ppc_fp128 is PowerPC's double-double type"
        return None

    def intrinsic_issue(self, name: str, approximate: bool = False) -> str | None:
        """validate: why the backend cannot lower a call to the intrinsic `name`, or None.
        `approximate`: every call carries the `afn` (or `fast`) flag, which some backends need to
        select their approximate instructions."""
        owner = INTRINSIC_OWNERS.get(name.split(".")[1] if name.count(".") > 1 else "")
        if owner is not None:
            if name.startswith(self.intrinsic_namespaces):
                return None
            return f"it is an intrinsic of the {owner} backend"
        base, suffixes = split_intrinsic(name)
        failing = self.unselectable_intrinsics.get(base)
        if failing is None:
            return None
        element = float_element(suffixes)
        if "*" in failing or element in failing:
            on = f" on {element}" if element else ""
            return f"the {self.llvm_target} backend cannot lower llvm.{base}{on}"
        return None

    def global_issue(self, gv) -> str | None:
        """validate: why the global variable `gv` cannot be compiled for this target, or None."""
        if self.is_gpu and gv.thread_local:
            return "GPUs have no thread-local storage; use a local variable or an array indexed by gpuc.index()"
        return None

    def symbol_issue(self, name: str) -> str | None:
        """validate: why a symbol that must keep its name (a declaration) cannot be emitted, or None."""
        return None

    def add_launch_entry(self, job, module: Module, entry: Function) -> Function | None:
        """optimize, right after the `early` point (the context plugin has given the entry its
        launch parameters), before any optimization: add the function a launcher calls instead
        of the entry (the CPU's loop over the index space), or None when it calls the entry
        itself. The driver keeps the returned function external and names it on the result."""
        return None

    def annotate_for_vectorizer(self, job, module: Module) -> bool:
        """optimize, between the simplify and optimize segments (after the `simplified` point):
        annotate the module for LLVM's loop vectorizer, which runs next; returns whether it changed
        the module. The native target names vector variants of math functions here
        (gpuc/targets/vector_math.py)."""
        return False

    def mark_kernel(self, job, fn: Function, module: Module) -> Function | None:
        """finish: turn `fn` into a kernel entry point the target's way; returns the entry when it is a
        new function of the same name (a target changing the parameters, e.g. SPIR-V's), else None."""
        if self.kernel_calling_convention:
            fn.calling_convention = self.kernel_calling_convention
        return None

    def finish_module(self, job, module: Module, tm: TargetMachine) -> None:
        """finish: last target-specific rewrite before code generation."""

    def emit(self, job, module: Module, tm: TargetMachine, output: str, *, contained: bool = True) -> str | bytes:
        """codegen: "asm" gives text, "obj" gives bytes. The driver has verified the module and
        discards it afterwards, so code generation may work on it in place. `contained`: the IR
        may hold what the backend aborts on (see `isolated_codegen`)."""
        isolate = self.isolated_codegen and contained
        data = tm.emit(module, output, verify=False, preserve=False, isolate=isolate)
        return data.decode() if output == "asm" else data

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items())
        return f"{type(self).__name__}({fields})"


# -- for targets' warp shuffles ----------------------------------------------------------------

def shuffle_source_lane(builder, kind: str, lane, operand, last):
    """The lane a shuffle of `kind` reads from, in i32 (outside [0, warp size) when it names none): `idx`
    takes its operand modulo the warp size (`last` + 1, a power of two), as CUDA does (up, down and
    xor do not read `last`)."""
    if kind == "idx":
        return builder.and_(operand, last)
    return {"up": builder.sub, "down": builder.add, "xor": builder.xor}[kind](lane, operand)


def shuffle_by_words(builder, module: Module, value, shuffle32):
    """`shuffle32` (i32 -> i32) applied to each 32-bit half of `value` (i32, i64, float or double)."""
    llctx = module.context
    i32, i64 = llctx.i32, llctx.i64
    as_int = {llctx.float: i32, llctx.double: i64}.get(value.type, value.type)
    bits = value if as_int == value.type else builder.bitcast(value, as_int)
    if as_int == i32:
        moved = shuffle32(bits)
    else:
        low = shuffle32(builder.trunc(bits, i32))
        high = shuffle32(builder.trunc(builder.lshr(bits, ConstantInt.get(i64, 32)), i32))
        moved = builder.or_(builder.zext(low, i64), builder.shl(builder.zext(high, i64), ConstantInt.get(i64, 32)))
    return moved if as_int == value.type else builder.bitcast(moved, value.type)


def without_pass(pipeline: str, name: str) -> str:
    """`pipeline` (a textual pass pipeline) with every occurrence of the parameterless pass `name` removed."""
    parts = pipeline.replace("(", "(,").replace(")", ",)").split(",")
    kept = ",".join(p for p in parts if p != name)
    return kept.replace("(,", "(").replace(",)", ")")
