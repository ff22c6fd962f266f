"""The kernel ABI, written once (docs/kernel-abi.md): what the frontend emits, what the context
plugin rewrites, what the CPU launch wrapper reads and what every runtime passes.

This module sits just above the LLVM layer: the frontend, the targets, the plugins and both
runtimes import it, and it imports nothing of theirs. It fixes

- how an array argument is flattened (data pointer, shapes, strides in elements) and stored
  (bool as a byte), which attributes the parameters carry, and what C-contiguity means;
- how the launch context reaches a kernel entry: not at all, through the CPU's trailing
  `ptr %gpuc.ctx` (%gpuc.Context), or through the GPUs' trailing `i64 %gpuc.n0..n2` (launch
  sizes); `launch_form(entry)` reads it from the entry's parameters, never from a count;
- `KernelSignature`: one description of a kernel's parameters (ScalarParam / ArrayParam /
  TupleParam, which arrays it may write, its launch form) that both runtimes marshal with;
- which pointer parameters a compiled kernel may write (`written_params`).
"""

from __future__ import annotations

import ctypes
import functools
import operator
from dataclasses import dataclass, replace

import numpy as np

from .llvm import ArrayType, Builder, Constant, ConstantInt, Function, FunctionType, Module, StructType, run_passes

# -- function pointers -------------------------------------------------------------------------

#: The marker `gpuc.deferred(f, ...)` lowers to: `call ptr @gpuc.lookup(ptr @<f's symbol>)`, with
#: `declare ptr @gpuc.lookup(ptr)`; the built-in gpuc.lookup plugin compiles f and replaces the call.
LOOKUP_MARKER = "gpuc.lookup"
# Declared by the CPU launch entry when it is optimized: the clamp-splitting plugin (gpuc/plugins/clamp_split.py)
# splits its inner loop at the `simplified` point.
SPLIT_MARKER = "gpuc.cpu.split_clamps"
# Declared by the CPU launch entry when it is optimized with CompilerConfig(vectorize=True): the
# vectorization plugin (gpuc/plugins/vectorize.py) runs the loop over index 0 several items at a time.
VECTORIZE_MARKER = "gpuc.cpu.vectorize"
# Bounds checks (CompilerConfig(boundscheck=True), docs/debugging.md): the external global the first
# failed check of a launch fills, [state (1: filled), site (a C string "file:line:col: a[i] in f"),
# dimension, index, ndim, the first BOUNDS_SHAPE_WORDS extents]; the CPU runtime defines it per module
# and reads it after each chunk of a launch.
BOUNDS_RECORD = "gpuc_boundscheck_record"
#: The internal function a failed check calls to fill the record: it computes no floats and writes only the
#: record (the first failure of a launch wins), so running it again changes nothing (autodiff: transparent).
BOUNDS_FAILURE = "gpuc.boundscheck.fail"
BOUNDS_SHAPE_WORDS = 4
BOUNDS_RECORD_WORDS = 5 + BOUNDS_SHAPE_WORDS
# On GPU targets (SPIR-V, PTX) the record is the module's own global: the site's word is 0 and its text follows
# the words, at most BOUNDS_SITE_BYTES bytes with its final NUL (the runtime cannot read the device's
# constants). The OpenCL runtime reads it through the kernel BOUNDS_READER the module also defines
# (`void (i64 addrspace(1)* out)`: copies the record to `out` and clears it); the CUDA runtime by its name.
BOUNDS_SITE_BYTES = 256
BOUNDS_DEVICE_RECORD_WORDS = BOUNDS_RECORD_WORDS + BOUNDS_SITE_BYTES // 8
BOUNDS_READER = "gpuc_boundscheck_read"
#: The `ndim` word of a record filled not by an index but by the reverse sweep's tape outgrowing its fixed
#: buffer on a target without an allocator (docs/autodiff.md): `index` is the bytes it needed, the first
#: extent its buffer's size, the site its gradient function. The runtimes raise a MemoryError for it.
BOUNDS_TAPE = -1
# Ctrl-C in the debug mode (docs/debugging.md): the external global holding a `ptr` to the process's i32
# interrupt flag (gpuc/runtime/interrupts.py), which every loop of a bounds-checked kernel or func on the
# CPU polls at its back edge; the CPU runtime defines it per module that polls.
INTERRUPT_FLAG = "gpuc_interrupt_flag"
# print() in kernels (docs/debugging.md): the external global holding the function the CPU runtime
# formats a line with, `void (ptr description, ptr values)`: the description is a C string of fields
# separated by \x1f (sep, end, then per argument "s" + a literal or the printed type), the values one
# 64-bit slot per number (floats as doubles' bits). The runtime defines it per module that prints.
PRINT_HOOK = "gpuc_print_hook"
PRINT_FIELD = "\x1f"
#: Metadata `!gpuc.site !{!"file:line:col"}` on a call through a function pointer: where it is in
#: the source, for errors about calls that remain after optimization.
SITE_METADATA = "gpuc.site"
#: The start of the markers `gpuc.derivative` / `gpuc.jvp` lower to, one per call shape:
#: `{R, R} @gpuc.autodiff.fwd.<mask>.<type>(ptr %f, primals..., tangents...)` (docs/autodiff.md).
FORWARD_MARKER_PREFIX = "gpuc.autodiff.fwd."
#: The start of the markers `gpuc.grad` / `gpuc.value_and_grad` / `gpuc.vjp` lower to, one per call shape:
#: `{R, A...} @gpuc.autodiff.rev.<mask>.<type>(ptr %f, args..., shadows..., cotangent)`, and of the one
#: an adjoint kernel ends its primal body with: `void @gpuc.autodiff.rev.adjoint(i64 %index0, i64 %index1,
#: i64 %index2, ptr %array, ptr %shadow, ...)` (docs/autodiff.md).
REVERSE_MARKER_PREFIX = "gpuc.autodiff.rev."
ADJOINT_MARKER = REVERSE_MARKER_PREFIX + "adjoint"
#: The same for work items that run one after another (a one-thread CPU launch): no atomics needed.
SERIAL_ADJOINT_MARKER = ADJOINT_MARKER + ".serial"
#: ... and for work items of which only those farther apart than any shift of a shared array's access
#: run at once (the CPU's two-phase schedule): atomics only for arrays any item may touch anywhere.
PARITY_ADJOINT_MARKER = ADJOINT_MARKER + ".parity"
#: ... and for blocks of which only those that differ along every dimension the plugin reports ("blocks
#: apart" in the trace) run at once (the CPU's blockwise schedule): no atomics for arrays one coordinate of
#: which is the work item's index along such a dimension (a tiled kernel's rows of `a`, columns of `b`).
BLOCKWISE_ADJOINT_MARKER = ADJOINT_MARKER + ".blockwise"
#: The request of a tangent kernel (gpuc.tangent(kernel)): `call void @gpuc.autodiff.fwd.kernel(ptr %array,
#: ptr %tangent, ...)` in a kernel whose parameters include both; the plugin makes the kernel compute, beside
#: its values, the tangents of what it stores into each array, from the tangents of what it loads.
TANGENT_KERNEL_MARKER = FORWARD_MARKER_PREFIX + "kernel"

# -- the launch context: markers, parameters and the context struct ----------------------------

#: The markers `gpuc.index(d)` and `gpuc.ndrange(d)` lower to: `declare i64 @<marker>(i32 d)`.
INDEX_MARKER, NDRANGE_MARKER = "gpuc.ctx.index", "gpuc.ctx.ndrange"
CONTEXT_MARKERS = (INDEX_MARKER, NDRANGE_MARKER)
#: The CPU's trailing context parameter: `ptr %gpuc.ctx`, pointing to a %gpuc.Context.
CONTEXT_PARAM = "gpuc.ctx"
#: The GPUs' trailing launch-size parameters: `i64 %gpuc.n0, i64 %gpuc.n1, i64 %gpuc.n2`.
LAUNCH_SIZE_PARAMS = ("gpuc.n0", "gpuc.n1", "gpuc.n2")
CONTEXT_TYPE = "gpuc.Context"
#: The field of %gpuc.Context each marker reads: { [3 x i64] index, [3 x i64] ndrange }.
CONTEXT_FIELDS = {INDEX_MARKER: 0, NDRANGE_MARKER: 1}
#: The markers of the block model (docs/kernel-abi.md, "Blocks"), all `i64 (i32 d)` like the two
#: above: the index within the block, the block's index, the block's and the grid's extents (in work
#: items and in blocks), the lane within the warp, the warp's width and the dynamic shared memory's
#: size in bytes (the last three take d = 0).
THREAD_INDEX_MARKER, BLOCK_INDEX_MARKER = "gpuc.ctx.thread_index", "gpuc.ctx.block_index"
BLOCK_DIM_MARKER, GRID_DIM_MARKER = "gpuc.ctx.block_dim", "gpuc.ctx.grid_dim"
LANE_INDEX_MARKER, WARP_SIZE_MARKER = "gpuc.ctx.lane_index", "gpuc.ctx.warp_size"
SHARED_BYTES_MARKER = "gpuc.ctx.shared_bytes"
GEOMETRY_MARKERS = (THREAD_INDEX_MARKER, BLOCK_INDEX_MARKER, BLOCK_DIM_MARKER, GRID_DIM_MARKER,
                    LANE_INDEX_MARKER, WARP_SIZE_MARKER, SHARED_BYTES_MARKER)
#: Synchronization markers; each takes last a `ptr` to the source location ("file:line:col", a
#: constant C string) of the call, which the CPU names when work items of a block disagree:
#: `void @gpuc.ctx.barrier(ptr)`, `i32 @gpuc.ctx.barrier_count(i1, ptr)`, `i1 @gpuc.ctx.barrier_all(i1, ptr)`,
#: `i1 @gpuc.ctx.barrier_any(i1, ptr)`, `void @gpuc.ctx.grid_barrier(ptr)`, `void @gpuc.ctx.syncwarp(ptr)`;
#: fences take nothing: `void @gpuc.ctx.fence()` (device-wide), `void @gpuc.ctx.fence_block()`.
BARRIER_MARKER, GRID_BARRIER_MARKER, SYNCWARP_MARKER = "gpuc.ctx.barrier", "gpuc.ctx.grid_barrier", "gpuc.ctx.syncwarp"
BARRIER_PREDICATE_MARKERS = {"count": "gpuc.ctx.barrier_count", "all": "gpuc.ctx.barrier_all",
                             "any": "gpuc.ctx.barrier_any"}
FENCE_MARKERS = {"device": "gpuc.ctx.fence", "block": "gpuc.ctx.fence_block"}
#: Warp operations, one marker per operation and value type: `T @gpuc.ctx.shfl_<kind>.<T>(T, i32, ptr)`
#: for kind idx/up/down/xor and T i32/i64/float/double; `i64 @gpuc.ctx.ballot(i1, ptr)`,
#: `i1 @gpuc.ctx.vote_any(i1, ptr)`, `i1 @gpuc.ctx.vote_all(i1, ptr)`.
SHUFFLE_MARKER_PREFIX = "gpuc.ctx.shfl_"
SHUFFLE_KINDS = ("idx", "up", "down", "xor")
VOTE_MARKERS = {"ballot": "gpuc.ctx.ballot", "any": "gpuc.ctx.vote_any", "all": "gpuc.ctx.vote_all"}
#: Shared memory: one `internal addrspace(S) global [N x i8]` per `gpuc.shared.array` in a function's
#: source, named with this prefix (S: the target's shared address space), and one external
#: `[0 x i8]` for `gpuc.shared.dynamic`, sized at launch.
SHARED_GLOBAL_PREFIX = "gpuc.shared."
DYNAMIC_SHARED_GLOBAL = "gpuc.shared.dynamic"
#: Where dynamic shared memory is a kernel parameter (OpenCL's local pointer arguments, SPIR-V):
#: `ptr addrspace(S) %gpuc.shared, i64 %gpuc.shared_bytes`, before the launch sizes.
DYNAMIC_SHARED_PARAMS = ("gpuc.shared", "gpuc.shared_bytes")
#: The shadow of dynamic shared memory lives in the adjoint kernel's own: the primal's `shared=` bytes,
#: then their shadow from the next multiple of SHADOW_ALIGN. `gpuc.adjoint(k)` is launched with
#: `adjoint_shared_bytes(S)` for a primal launched with S, and its `gpuc.ctx.shared_bytes` gives S back
#: (gpuc/plugins/autodiff/blocks.py, `dynamic_layout`, which inverts it).
SHADOW_ALIGN = 16
#: Every use of shared memory goes through `ptr addrspace(S) @gpuc.ctx.shared(ptr addrspace(S) @global)`,
#: which returns its argument on GPUs and the block's own copy on the CPU.
SHARED_MARKER = "gpuc.ctx.shared"
SHUFFLE_TYPES = ("i32", "i64", "float", "double")
SHUFFLE_MARKERS = tuple(f"{SHUFFLE_MARKER_PREFIX}{kind}.{t}" for kind in SHUFFLE_KINDS for t in SHUFFLE_TYPES)
#: The markers that make a kernel a block kernel (the CPU runs it with work-item loops): all but
#: gpuc.ctx.index / gpuc.ctx.ndrange and the fences.
BLOCK_MARKERS = (GEOMETRY_MARKERS + (BARRIER_MARKER, GRID_BARRIER_MARKER, SYNCWARP_MARKER, SHARED_MARKER)
                 + tuple(BARRIER_PREDICATE_MARKERS.values()) + tuple(VOTE_MARKERS.values()) + SHUFFLE_MARKERS)
ALL_CONTEXT_MARKERS = CONTEXT_MARKERS + BLOCK_MARKERS + tuple(FENCE_MARKERS.values())
#: The string attribute a target gives the functions of a math library it links (its value: the
#: library's name), so that plugins treat their calls as the math functions they are.
LIBRARY_ATTRIBUTE = "gpuc-library"
#: Index spaces are smaller than this along every dimension, and in all (the launchers check it).
MAX_EXTENT = 1 << 62

#: How the launch context reaches a kernel entry (`launch_form`).
LAUNCH_NONE, LAUNCH_CONTEXT, LAUNCH_SIZES = "none", "context", "sizes"
LAUNCH_FORMS = (LAUNCH_NONE, LAUNCH_CONTEXT, LAUNCH_SIZES)
_LAUNCH_TYPES = {LAUNCH_NONE: (), LAUNCH_CONTEXT: ("ptr",), LAUNCH_SIZES: ("i64",) * 3}


def site_text(module: Module, text: str, address_space: int = 0):
    """A `ptr` to the constant C string `text` ("file:line:col: what is there"), one per module, text and
    address space: the errors found at run time (bounds checks, a tape outgrowing its buffer) name it."""
    name = f"gpuc.site.{text}" if not address_space else f"gpuc.site{address_space}.{text}"
    gv = module.globals.get(name)
    if gv is None:
        data = Constant.string(module.context, text)
        gv = module.add_global(data.type, name, address_space)
        gv.initializer = data
        gv.is_global_constant = True
        gv.linkage = "private"
    return gv


def bounds_record(module: Module, device: bool, address_space: int = 0):
    """The record of a launch's first failed check (BOUNDS_RECORD) in `module`, declared: on the host
    BOUNDS_RECORD_WORDS words the CPU runtime defines; on a device (`device`) the module's own
    BOUNDS_DEVICE_RECORD_WORDS words in `address_space` (its global memory), defined when the target
    finishes the module."""
    gv = module.globals.get(BOUNDS_RECORD)
    if gv is None:
        i64 = module.context.i64
        if device:
            gv = module.add_global(ArrayType.get(i64, BOUNDS_DEVICE_RECORD_WORDS), BOUNDS_RECORD, address_space)
        else:
            gv = module.add_global(ArrayType.get(i64, BOUNDS_RECORD_WORDS), BOUNDS_RECORD)
        gv.alignment = 8
    return gv


def bounds_failure(module: Module, record, site_space: int, device: bool) -> Function:
    """`void gpuc.boundscheck.fail(ptr site, i64 dim, i64 index, i64 ndim, i64 shape...)` (BOUNDS_FAILURE) in
    `module`, made once: the first call of a launch fills `record` (bounds_record), the others leave it;
    `site` points into `site_space`; on a device (`device`) the site's text is copied after the words,
    since the runtime cannot read the device's constants."""
    fn = module.functions.get(BOUNDS_FAILURE)
    if fn is not None and not fn.is_declaration:
        return fn
    ctx, i64 = module.context, module.context.i64
    fn = fn or module.add_function(BOUNDS_FAILURE, FunctionType.get(
        ctx.void, [ctx.ptr(site_space), *[i64] * (3 + BOUNDS_SHAPE_WORDS)]))
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    fn.attributes.add("cold")
    with Builder(ctx) as b:
        entry, fill, done = fn.append_block("entry"), fn.append_block("fill"), fn.append_block("done")
        b.position_at_end(entry)
        won = b.extract_value(b.cmpxchg(record, ConstantInt.get(i64, 0), ConstantInt.get(i64, 1),
                                        success="monotonic", align=8), 1)
        b.cond_br(won, fill, done)
        b.position_at_end(fill)
        site = ConstantInt.get(i64, 0) if device else b.ptrtoint(fn.args[0], i64)
        for k, value in enumerate([site, *fn.args[1:]], start=1):
            b.store(value, b.gep(i64, record, [ConstantInt.get(i64, k)]), align=8)
        if device:
            _copy_site(b, fn, record, done)
        else:
            b.br(done)
        b.position_at_end(done)
        b.ret()
    return fn


def _copy_site(b, fn: Function, record, done) -> None:
    """The failure function's copy of its site's text (a C string) into the record, after its words: at
    most BOUNDS_SITE_BYTES bytes, the last a NUL (device targets, BOUNDS_DEVICE_RECORD_WORDS)."""
    ctx = fn.parent.context
    i8, i64 = ctx.i8, ctx.i64
    text = b.gep(i8, record, [ConstantInt.get(i64, 8 * BOUNDS_RECORD_WORDS)])
    start, loop, last = b.block, fn.append_block("copy"), fn.append_block("copy.end")
    b.br(loop)
    b.position_at_end(loop)
    k = b.phi(i64, name="k")
    byte = b.load(i8, b.gep(i8, fn.args[0], [k]))
    b.store(byte, b.gep(i8, text, [k]))
    following = b.add(k, ConstantInt.get(i64, 1))
    more = b.and_(b.icmp("ne", byte, ConstantInt.get(i8, 0)),
                  b.icmp("ult", following, ConstantInt.get(i64, BOUNDS_SITE_BYTES - 1)))
    k.add_incoming(ConstantInt.get(i64, 0), start)
    k.add_incoming(following, loop)
    b.cond_br(more, loop, last)
    b.position_at_end(last)
    b.store(ConstantInt.get(i8, 0), b.gep(i8, text, [ConstantInt.get(i64, BOUNDS_SITE_BYTES - 1)]))
    b.br(done)


def adjoint_shared_bytes(primal: int) -> int:
    """The dynamic shared bytes an adjoint kernel is launched with for a primal launched with `primal`:
    the primal's, padded to SHADOW_ALIGN, then as many for the shadow. Distinct totals for distinct
    sizes: S in (16k - 16, 16k] gives 16k + S in (32k - 16, 32k], so the kernel reads S back."""
    return -(-primal // SHADOW_ALIGN) * SHADOW_ALIGN + primal


def context_type(module: Module) -> StructType:
    """`%gpuc.Context = type { [3 x i64], [3 x i64] }` (index, ndrange) in `module`'s context."""
    existing = module.get_type(CONTEXT_TYPE)
    if existing is not None:
        return existing
    dims = ArrayType.get(module.context.i64, 3)
    return StructType.create(module.context, [dims, dims], name=CONTEXT_TYPE)


#: What a block kernel's trailing `ptr %gpuc.ctx` points to on the CPU (gpuc/plugins/workitems.py):
#: `%gpuc.BlockContext = type { [3 x i64] ndrange, [3 x i64] block_dim, [3 x i64] grid_dim,
#: [3 x i64] block_index, i64 shared_bytes, ptr error, ptr grid }`. The CPU's blocks wrapper fills it
#: per block from the launch's copy, whose block_index it ignores. `grid` (kernels with
#: gpuc.grid_barrier(); null otherwise) points to GRID_RECORD_WORDS 8-byte words per block, zeroed
#: before the launch: the block's scratch memory (kept between the launch's phases), the site it
#: waits at (-1 once every work item has returned) and the `ptr` to that site's "file:line:col".
BLOCK_CONTEXT_TYPE = "gpuc.BlockContext"
BLOCK_CONTEXT_FIELDS = {"ndrange": 0, "block_dim": 1, "grid_dim": 2, "block_index": 3, "shared_bytes": 4, "error": 5,
                        "grid": 6}
GRID_RECORD_WORDS = 3
#: The error record `error` points to, in 8-byte words: an i32 flag (0: no error; set once, atomically,
#: by the first block that fails), the failing block's linear index, two work items (linear indices
#: in the block) and the `ptr`s to the "file:line:col" of the sites they arrived at.
BLOCK_ERROR_WORDS = 6
#: The name of a module-level i8 constant that marks the entry as a block kernel on the CPU.
BLOCK_KERNEL_FLAG = "gpuc.block_kernel"
#: String attributes the context plugin gives a kernel entry, on every target, for its launchers
#: (EntryABI): the dimensions along which the kernel reads a work item's position (gpuc.index,
#: thread_index or block_index), as digits ("01"; absent when the plugin never saw the entry), and,
#: when it uses the block model (BLOCK_MARKERS but a grid barrier, whose meaning no block size changes),
#: the first such use ("gpuc.barrier at file:line:col").
POSITION_DIMS_ATTRIBUTE = "gpuc-position-dims"
BLOCK_MODEL_ATTRIBUTE = "gpuc-block-model"
#: A string attribute of a kernel whose accesses to some shared arrays rely on the work items of a block
#: running one after another between barriers, as the CPU runs them (the adjoint's plain adds of several
#: items into one element of a shared shadow, on `serial_blocks` targets): the names of those arrays'
#: globals, comma-separated. The CPU's loops over work items keep their order for accesses there (and
#: where a pointer's array is not known); every other plain access is declared free of dependences
#: between items (a race-free kernel, as GPUs require), so that LLVM runs the loops in vector lanes.
SERIAL_ITEMS_ATTRIBUTE = "gpuc-serial-items"
#: On a generated adjoint kernel: the dimensions along which the launch it is compiled for has more than one
#: work item ("0,1"). Its work items touch shadow elements of their own only where the index of every one of
#: these dimensions (and of every one the kernel reads) picks the element: a kernel that reads only index(0),
#: launched over (n, m), has m work items on each element.
ADJOINT_SPANS_ATTRIBUTE = "gpuc-adjoint-spans"
#: On a generated adjoint kernel: its launch checked that no two of its array arguments overlap in memory, so
#: that an array the kernel never writes holds the same values throughout the launch: the reverse sweep may
#: load it again instead of keeping what it read (gpuc/plugins/autodiff/restore.py).
ADJOINT_DISTINCT_ATTRIBUTE = "gpuc-adjoint-distinct"
#: On a generated adjoint kernel (`gpuc.adjoint(k, primal_writes=False)`): the arrays the kernel only stores
#: into (no load, atomic operation or call reads them) keep what they hold: the primal ran before with the same
#: inputs, so its stores into them are left out of the adjoint's forward part.
ADJOINT_OUTPUTS_KEPT_ATTRIBUTE = "gpuc-adjoint-outputs-kept"
#: The CPU launch entry's name is the kernel's and this (gpuc/targets/cpu_launch.py): `@<kernel>.range`.
LAUNCH_ENTRY_SUFFIX = ".range"
#: The name of the last parameter of the CPU's blocks wrapper (the range wrapper names it "sizes").
BLOCKS_LAUNCH_PARAM = "launch"
#: ... and of a block kernel with grid barriers, which the runtime runs in phases (GRID_RECORD_WORDS).
GRID_LAUNCH_PARAM = "grid.launch"


def block_context_type(module: Module) -> StructType:
    """%gpuc.BlockContext in `module`'s context (see BLOCK_CONTEXT_TYPE)."""
    existing = module.get_type(BLOCK_CONTEXT_TYPE)
    if existing is not None:
        return existing
    i64 = module.context.i64
    dims = ArrayType.get(i64, 3)
    ptr = module.context.ptr()
    return StructType.create(module.context, [dims, dims, dims, dims, i64, ptr, ptr], name=BLOCK_CONTEXT_TYPE)


def has_context_param(fn: Function) -> bool:
    """Whether the CPU's context propagation gave `fn` the trailing context parameter."""
    args = fn.args
    return bool(args) and args[-1].name == CONTEXT_PARAM and str(args[-1].type) == "ptr"


def has_launch_size_params(fn: Function) -> bool:
    """Whether the GPUs' context propagation gave `fn` the trailing launch-size parameters."""
    args = fn.args[-3:]
    return len(args) == 3 and all(a.name == name and str(a.type) == "i64" for a, name in zip(args, LAUNCH_SIZE_PARAMS))


def launch_form(fn: Function) -> str:
    """How the launch context reaches the entry `fn`: LAUNCH_CONTEXT, LAUNCH_SIZES or LAUNCH_NONE,
    read from the names and types of its trailing parameters."""
    if has_context_param(fn):
        return LAUNCH_CONTEXT
    if has_launch_size_params(fn):
        return LAUNCH_SIZES
    return LAUNCH_NONE


def kernel_params(fn: Function) -> list:
    """The LLVM types of `fn`'s own parameters: all of them but the launch parameters."""
    params = fn.function_type.params
    return params[:len(params) - len(_LAUNCH_TYPES[launch_form(fn)])]


# -- arrays: flattening and storage -------------------------------------------------------------

#: Attributes of an array's data pointer parameter, and of bool parameters and return values.
DATA_POINTER_ATTRIBUTES = ("noundef",)
BOOL_ATTRIBUTES = ("zeroext",)


def array_param_count(ndim: int) -> int:
    """How many parameters an `ndim`-dimensional array flattens to: data, shapes, strides."""
    return 1 + 2 * ndim


def array_params(context, ndim: int, addrspace: int = 0) -> list:
    """The flattened parameter types of an array: `ptr addrspace(a) data, i64 shape.., i64 stride..`."""
    return [context.ptr(addrspace)] + [context.i64] * (2 * ndim)


def array_param_names(name: str, ndim: int) -> list[str]:
    """The names of an array argument's flattened parameters (launchers read the `.data` one)."""
    return [f"{name}.data"] + [f"{name}.shape{k}" for k in range(ndim)] + [f"{name}.stride{k}" for k in range(ndim)]


def array_struct(context, ndim: int, addrspace: int = 0):
    """How a function holds an array between its parameters and its uses: the flattened
    parameters packed into one literal struct { ptr, i64 x ndim shapes, i64 x ndim strides }."""
    return context.struct_type(array_params(context, ndim, addrspace))


def storage_type(value_type, context):
    """How an element of LLVM type `value_type` is stored in an array: i1 as i8 (NumPy's bool_)."""
    return context.i8 if str(value_type) == "i1" else value_type


def c_strides(shape, itemsize: int = 1) -> tuple:
    """The strides of a C-contiguous array of `shape`: in elements, or in bytes with `itemsize`."""
    strides, step = [], itemsize
    for extent in reversed(shape):
        strides.append(step)
        step *= extent
    return tuple(reversed(strides))


def is_c_contiguous(shape, strides) -> bool:
    """Whether an array with element `strides` is C-contiguous, as NumPy decides: an empty array
    is, and dimensions of extent 1 may have any stride (they are only ever indexed with 0)."""
    if 0 in shape:
        return True
    expected = 1
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if extent != 1 and stride != expected:
            return False
        expected *= extent
    return True


# -- which arrays a compiled kernel may write ---------------------------------------------------

_READ_ONLY = ("readonly", "readnone")


def written_params(module: Module, kernel: Function) -> frozenset[int]:
    """The indices of `kernel`'s pointer parameters that it may write through.

    LLVM's function-attrs pass infers `readonly`/`readnone` for a pointer parameter only when no
    store, atomic, call that may write, or escape of the pointer (stored, cast to an integer,
    passed to an unknown function) can reach it: a parameter without them may be written. The
    kernel's own attributes are inferred afresh, so none left stale by a plugin is trusted; its
    callees' attributes are their compiles' contract, as for every LLVM optimization. Where
    inference cannot see through the code (unoptimized IR keeps arrays in stack slots), the
    answer is "may write": a refusal, never a missed write.
    """
    pointers = [i for i, ty in enumerate(kernel.function_type.params) if str(ty).startswith("ptr")]
    for i in pointers:
        for name in _READ_ONLY:
            kernel.param_attributes(i).remove(name)
    run_passes(module, "function-attrs")
    return frozenset(i for i in pointers if not any(name in kernel.param_attributes(i) for name in _READ_ONLY))


# -- kernel signatures --------------------------------------------------------------------------

_CTYPES = {"bool": ctypes.c_bool, "int8": ctypes.c_int8, "uint8": ctypes.c_uint8, "int16": ctypes.c_int16,
           "uint16": ctypes.c_uint16, "int32": ctypes.c_int32, "uint32": ctypes.c_uint32,
           "int64": ctypes.c_int64, "uint64": ctypes.c_uint64, "float32": ctypes.c_float,
           "float64": ctypes.c_double, "float16": ctypes.c_uint16}  # a half travels as its bits
_LLVM_TYPES = {"bool": "i1", "int8": "i8", "uint8": "i8", "int16": "i16", "uint16": "i16", "int32": "i32",
               "uint32": "i32", "int64": "i64", "uint64": "i64", "float32": "float", "float64": "double",
               "float16": "half"}
#: Scalars spelled as LLVM types are signless: integers of either sign's range are accepted (the
#: bits are what matter), and "ptr" takes an address (or an array, for its data pointer).
LLVM_SCALARS = {"i1": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "float": "float32",
                "double": "float64", "ptr": "uint64", "half": "float16"}


def _dtype(spec) -> np.dtype:
    """A native-endian NumPy dtype from a name ("float32"), a NumPy dtype or a ctypes type."""
    try:
        dtype = np.dtype(spec)
    except TypeError:
        raise TypeError(f"{spec!r} is not a scalar type; use a name like 'float32', a NumPy dtype or a "
                        "ctypes type") from None
    if dtype.name not in _CTYPES and dtype.name not in COMPLEX_PARTS or not dtype.isnative:
        raise TypeError(f"kernels take {', '.join(list(_CTYPES) + list(COMPLEX_PARTS))} scalars and arrays, not "
                        f"{dtype.str!r}")
    return dtype


#: Complex numbers: an array element is NumPy's (real, imaginary) pair of these; a scalar argument is one
#: LLVM parameter `{ T, T }` passed by value, as a tuple of the two parts is (ComplexParam).
COMPLEX_PARTS = {"complex64": "float32", "complex128": "float64"}


def _scalar_param(spec):
    """A ScalarParam, or a ComplexParam for a complex dtype."""
    if not (isinstance(spec, str) and spec in LLVM_SCALARS):
        try:
            dtype = np.dtype(spec)
        except TypeError:
            dtype = None
        if dtype is not None and dtype.name in COMPLEX_PARTS and dtype.isnative:
            return ComplexParam.of(dtype)
    return ScalarParam.from_spec(spec)


@dataclass(frozen=True)
class ScalarParam:
    """A scalar parameter: one LLVM parameter of `llvm_type`, holding a value of `dtype`."""

    dtype: np.dtype
    llvm_type: str
    signless: bool = False

    @classmethod
    def from_spec(cls, spec) -> ScalarParam:
        if isinstance(spec, str) and spec in LLVM_SCALARS:  # first: NumPy reads "float" as float64
            return cls(np.dtype(LLVM_SCALARS[spec]), spec, signless=True)
        dtype = _dtype(spec)
        return cls(dtype, _LLVM_TYPES[dtype.name])

    @property
    def ctype(self) -> type:
        return _CTYPES[self.dtype.name]

    def converter(self, what: str, view=None):
        """A function from an argument to its checked value (integers as their signed bit pattern)."""
        kind = self.dtype.kind
        if kind == "b":
            return _bool_converter(what)
        if kind == "f":
            return _half_converter(what) if self.dtype.itemsize == 2 else _float_converter(what)
        bits = 8 * self.dtype.itemsize
        if self.signless:
            low, high = -(1 << (bits - 1)), (1 << bits) - 1
        else:
            info = np.iinfo(self.dtype)
            low, high = int(info.min), int(info.max)
        return _int_converter(low, high, bits, what, str(self), view if self.llvm_type == "ptr" else None)

    def __str__(self) -> str:
        return self.llvm_type if self.signless else self.dtype.name


# Converters are closures over what they check: a launch runs one per argument.

def _bool_converter(what):
    def convert(value):
        if value is True or value is False or isinstance(value, np.bool_):
            return bool(value)
        raise TypeError(f"{what} must be a bool, not {type(value).__name__}")
    return convert


def _float_converter(what):
    def convert(value):
        if isinstance(value, (float, np.floating)):
            return float(value)
        if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{what} must be a number, not {type(value).__name__}")
        return float(value)
    return convert


def _half_converter(what):
    """A float16 argument: the bits of the value rounded to half as NumPy rounds it (np.float16(x))."""
    number = _float_converter(what)

    def convert(value):
        with np.errstate(over="ignore"):  # beyond float16's range: inf, as np.float16(x)
            return int(np.float16(number(value)).view(np.uint16))
    return convert


def _int_converter(low, high, bits, what, name, view):
    sign, wrap = 1 << (bits - 1), 1 << bits

    def convert(value):
        try:
            value = operator.index(value)
        except TypeError:
            if view is None:
                raise TypeError(f"{what} must be an integer, not {type(value).__name__}") from None
            value = view(value, what).ptr  # an array passed for a pointer: its data
        if not low <= value <= high:
            raise OverflowError(f"{what}: {value} does not fit in {name}")
        return value - wrap if value >= sign else value  # the bits, as a signed number
    return convert


@dataclass(frozen=True)
class ArrayParam:
    """An array parameter: `ptr data, i64 shape.., i64 stride..`; "C" `layout` promises C-contiguity;
    `written`: whether the kernel may write through it (read-only arrays are refused there)."""

    dtype: np.dtype
    ndim: int
    layout: str = "A"
    written: bool = True

    @property
    def llvm_types(self) -> list[str]:
        return ["ptr"] + ["i64"] * (2 * self.ndim)

    def converter(self, what: str, view):
        """A function from an argument to its checked array view; `view(arg, what)` reads the
        runtime's kind of array (a NumPy array, a `__cuda_array_interface__` object) as an object
        with `ptr`, `shape`, `strides` (in elements), `dtype`, `readonly` and `c_contiguous`."""
        dtype, ndim, written, contiguous = self.dtype, self.ndim, self.written, self.layout == "C"

        def convert(arg):
            array = view(arg, what)
            if array.dtype != dtype or len(array.shape) != ndim:
                _mismatch(array, self, what)
            if written and array.readonly:
                raise ValueError(f"{what} is read-only (a broadcast view, a buffer of bytes, a read-only mapping, "
                                 "an interface that says so, ...) but the kernel may write to it; pass a writable "
                                 "copy")
            if contiguous and not array.c_contiguous:
                raise ValueError(f"{what} must be C-contiguous (the kernel was compiled for Array[..., \"C\"]); "
                                 "pass a contiguous copy")
            return array
        return convert

    def __str__(self) -> str:
        return f"array {self.dtype.name}[{self.ndim}d{', C' if self.layout == 'C' else ''}]"


def _mismatch(array, param: ArrayParam, what: str):
    if array.dtype != param.dtype:
        raise TypeError(f"{what} must hold {param.dtype.name}, not {array.dtype.str!r} ({array.dtype.name})")
    raise TypeError(f"{what} must have {param.ndim} dimension(s), not {len(array.shape)}")


@dataclass(frozen=True)
class TupleParam:
    """A tuple of scalars (or tuples): one LLVM parameter of a literal struct type, passed by value."""

    elements: tuple

    @property
    def llvm_type(self) -> str:
        types = [e.llvm_type for e in self.elements]
        return "{ " + ", ".join(types) + " }" if types else "{}"

    @functools.cached_property
    def ctype(self) -> type:
        """A ctypes Structure with the struct's layout (natural alignment, as C and NVPTX lay it out)."""
        fields = [(f"f{i}", e.ctype) for i, e in enumerate(self.elements)]
        return type("TupleArgument", (ctypes.Structure,), {"_fields_": fields})

    def converter(self, what: str, view=None):
        """A function from an argument to the tuple of its checked element values."""
        parts = tuple(e.converter(f"{what}[{i}]", view) for i, e in enumerate(self.elements))

        def convert(value):
            if not isinstance(value, tuple) or len(value) != len(parts):
                got = f"a tuple of {len(value)}" if isinstance(value, tuple) else type(value).__name__
                raise TypeError(f"{what} must be a tuple of {len(parts)} element(s), not {got}")
            return tuple(part(element) for part, element in zip(parts, value))
        return convert

    def __str__(self) -> str:
        return "tuple[" + ", ".join(map(str, self.elements)) + "]"


@dataclass(frozen=True)
class ComplexParam(TupleParam):
    """A complex scalar: the struct `{ T, T }` (real, imaginary) of its part type, passed by value like a
    tuple of two floats; the argument is any number (a real one has imaginary part 0)."""

    dtype: np.dtype = np.dtype("complex128")

    @classmethod
    def of(cls, dtype) -> "ComplexParam":
        dtype = np.dtype(dtype)
        part = ScalarParam.from_spec(COMPLEX_PARTS[dtype.name])
        return cls((part, part), dtype)

    def converter(self, what: str, view=None):
        def convert(value):
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, complex, np.number)):
                raise TypeError(f"{what} must be a number, not {type(value).__name__}")
            value = complex(value)
            return (value.real, value.imag)
        return convert

    def __str__(self) -> str:
        return self.dtype.name


def _param(item, index: int, in_tuple: bool = False):
    if isinstance(item, (ScalarParam, ArrayParam, TupleParam)) and not (in_tuple and isinstance(item, ArrayParam)):
        return item
    kind, *rest = item if isinstance(item, (tuple, list)) and item else (None,)
    if kind == "scalar" and len(rest) == 1:
        return _scalar_param(rest[0])
    if kind == "tuple" and len(rest) == 1 and isinstance(rest[0], (tuple, list)):
        return TupleParam(tuple(_param(e, index, in_tuple=True) for e in rest[0]))
    if kind == "array" and not in_tuple and len(rest) in (2, 3) and rest[1] in (1, 2, 3) \
            and (len(rest) == 2 or rest[2] in ("A", "C")):
        return ArrayParam(_dtype(rest[0]), rest[1], rest[2] if len(rest) == 3 else "A")
    raise ValueError(f"bad kernel parameter {index}: {item!r}; use ('scalar', type), ('array', dtype, ndim[, layout]) "
                     "with ndim 1-3 and layout 'A' or 'C', or ('tuple', (scalar or tuple parameters, ...))")


@dataclass(frozen=True, init=False)
class KernelSignature:
    """What a kernel's parameters are, and how the launch context reaches it.

    `params` are ScalarParam / ArrayParam / TupleParam, built from specs `("scalar", type)` (a
    NumPy name, dtype or ctypes type, or a signless LLVM type: i1, i8, i16, i32, i64, float,
    double, ptr), `("array", dtype, ndim[, layout])` (ndim 1-3, layout "A" or "C") or
    `("tuple", (element, ...))`. `launch` is a LAUNCH_* form, or None while unknown: a signature
    for a compiled entry takes it from the entry (`for_entry`), never from a parameter count.
    """

    params: tuple
    launch: str | None

    def __init__(self, params, launch: str | None = None) -> None:
        if launch is not None and launch not in LAUNCH_FORMS:
            raise ValueError(f"launch must be one of {', '.join(LAUNCH_FORMS)} (or None), not {launch!r}")
        object.__setattr__(self, "params", tuple(_param(p, i) for i, p in enumerate(params)))
        object.__setattr__(self, "launch", launch)

    @classmethod
    def from_spec(cls, spec, launch: str | None = None) -> KernelSignature:
        return spec if isinstance(spec, cls) and launch in (None, spec.launch) else cls(getattr(spec, "params", spec),
                                                                                          launch)

    def llvm_types(self) -> tuple[str, ...]:
        """The kernel's own LLVM parameter types (arrays flattened), as LLVM prints them."""
        out: list[str] = []
        for p in self.params:
            out += p.llvm_types if isinstance(p, ArrayParam) else [p.llvm_type]
        return tuple(out)

    def entry_types(self) -> tuple[str, ...]:
        """The entry's LLVM parameter types: the kernel's own, then its launch parameters."""
        if self.launch is None:
            raise TypeError("the signature does not say how the launch context reaches the kernel (launch=...)")
        return self.llvm_types() + _LAUNCH_TYPES[self.launch]

    def for_entry(self, entry: EntryABI | Function) -> KernelSignature:
        """This signature checked against a compiled entry (a Function or its EntryABI): the
        launch form is the entry's, and arrays are marked by what it may write (when known)."""
        entry = entry if isinstance(entry, EntryABI) else EntryABI.of(entry)
        if self.launch not in (None, entry.launch):
            raise TypeError(f"the signature says the launch context reaches @{entry.name} as {self.launch!r}, "
                            f"but the entry takes it as {entry.launch!r}")
        if self.llvm_types() != entry.types:
            raise TypeError(f"the signature ({', '.join(map(str, self.params))}) flattens to "
                            f"({', '.join(self.llvm_types())}) but @{entry.name} takes ({', '.join(entry.types)})")
        out = KernelSignature(self.params, entry.launch)
        return out if entry.written is None else out.with_written(entry.written)

    def with_written(self, written) -> KernelSignature:
        """This signature with each array marked by whether its data pointer (an LLVM parameter
        index) is in `written`."""
        params, index = [], 0
        for p in self.params:
            if isinstance(p, ArrayParam):
                params.append(replace(p, written=index in written))
                index += array_param_count(p.ndim)
                continue
            params.append(p)
            index += 1
        return KernelSignature(params, self.launch)

    def converters(self, view, names=(), entry: str = "") -> list:
        """One function per parameter from an argument to its checked value: a number for a scalar,
        a tuple of values for a tuple, the array view for an array (`view`: see ArrayParam).
        `names` are the entry's LLVM parameter names and `entry` its name, for messages."""
        out, index = [], 0
        for i, p in enumerate(self.params):
            name = names[index].removesuffix(".data") if index < len(names) and names[index] else ""
            what = f"argument {i}" + (f" ({name})" if name else "") + (f" of @{entry}" if entry else "")
            if not entry and not name and not isinstance(p, ArrayParam):
                what += f" ({p})"
            out.append(p.converter(what, view))
            index += array_param_count(p.ndim) if isinstance(p, ArrayParam) else 1
        return out

    def flat_converters(self, view, names=(), entry: str = "") -> list:
        """Like `converters`, but each gives the list of the argument's LLVM scalars (`flat_values`)."""
        out = []
        for param, convert in zip(self.params, self.converters(view, names, entry)):
            if isinstance(param, ArrayParam):
                out.append(lambda arg, convert=convert: _array_values(convert(arg)))
            elif isinstance(param, TupleParam):
                out.append(lambda arg, convert=convert, param=param: flat_values(param, convert(arg)))
            else:
                out.append(lambda arg, convert=convert: [convert(arg)])
        return out

    def arity_error(self, args, entry: str = "") -> TypeError:
        who = f"@{entry}" if entry else "the kernel"
        return TypeError(f"{who} takes {len(self.params)} argument(s) ({', '.join(map(str, self.params))}), "
                         f"got {len(args)}")


@dataclass(frozen=True)
class EntryABI:
    """What a launcher needs to know of a compiled kernel entry, read from its LLVM function:
    its name, launch form, own parameter types and names (launch parameters left out), and the
    pointer parameters it may write (None: not analysed; every array counts as written)."""

    name: str
    launch: str
    types: tuple
    names: tuple
    written: frozenset | None = None
    #: The dimensions along which the kernel reads a work item's position (POSITION_DIMS_ATTRIBUTE);
    #: None: not known.
    dims: tuple | None = None
    #: Its first use of the block model (BLOCK_MODEL_ATTRIBUTE), or "" when it uses none (or not known).
    block_model: str = ""

    @classmethod
    def of(cls, fn: Function, written=None) -> EntryABI:
        types = kernel_params(fn)
        dims = fn.attributes.get(POSITION_DIMS_ATTRIBUTE)
        return cls(fn.name, launch_form(fn), tuple(str(t) for t in types),
                   tuple(arg.name for arg in fn.args[:len(types)]), None if written is None else frozenset(written),
                   None if dims is None else tuple(int(d) for d in dims), fn.attributes.get(BLOCK_MODEL_ATTRIBUTE) or "")

    def record(self) -> dict:
        """As plain data (JSON): for caches and libraries that describe their kernels (`from_record`)."""
        return {"name": self.name, "launch": self.launch, "types": list(self.types), "names": list(self.names),
                "written": None if self.written is None else sorted(self.written),
                "dims": None if self.dims is None else list(self.dims), "block_model": self.block_model}

    @classmethod
    def from_record(cls, record: dict) -> EntryABI:
        written, dims = record["written"], record.get("dims")
        return cls(record["name"], record["launch"], tuple(record["types"]), tuple(record["names"]),
                   None if written is None else frozenset(written), None if dims is None else tuple(dims),
                   record.get("block_model") or "")


def as_signature(sig) -> KernelSignature:
    return KernelSignature.from_spec(sig)


def _array_values(array) -> list:
    return [array.ptr, *array.shape, *array.strides]


def flat_values(param, value) -> list:
    """A converted argument as the flat list of its LLVM scalars, in parameter order: an array's
    data pointer, shapes and strides; a tuple's elements (nested tuples flattened)."""
    if isinstance(param, ArrayParam):
        return [value.ptr, *value.shape, *value.strides]
    if isinstance(param, TupleParam):
        out: list = []
        for element, v in zip(param.elements, value):
            out += flat_values(element, v)
        return out
    return [value]


# -- the CPU launch wrapper's argv --------------------------------------------------------------

#: The CPU launch wrapper's argv: one 8-byte slot per LLVM scalar of the kernel's flattened
#: parameters (tuples take one per element), holding the value in its low bytes (i1 as a byte 0/1).
ARGV_SLOT_BYTES = 8
#: The `struct` format of one argv slot per LLVM scalar type.
SLOT_FORMATS = {"i1": "?7x", "i8": "b7x", "i16": "h6x", "i32": "i4x", "i64": "q", "float": "f4x", "double": "d",
                "ptr": "q", "half": "H6x"}


def slot_types(ty) -> list[str] | None:
    """The argv slots (LLVM scalar types) of an LLVM parameter type; None if it cannot be passed."""
    name = str(ty)
    if name in SLOT_FORMATS:
        return [name]
    if not isinstance(ty, StructType) or ty.is_packed or ty.name:
        return None
    out: list[str] = []
    for element in ty.elements:
        slots = slot_types(element)
        if slots is None:
            return None
        out += slots
    return out


__all__ = ["BOUNDS_FAILURE", "BOUNDS_RECORD", "BOUNDS_TAPE", "BOUNDS_DEVICE_RECORD_WORDS", "bounds_record", "bounds_failure",
           "site_text", "INTERRUPT_FLAG", "BOUNDS_RECORD_WORDS", "BOUNDS_SHAPE_WORDS", "PRINT_FIELD", "PRINT_HOOK", "LIBRARY_ATTRIBUTE", "POSITION_DIMS_ATTRIBUTE", "BLOCK_MODEL_ATTRIBUTE", "SERIAL_ITEMS_ATTRIBUTE", "ADJOINT_SPANS_ATTRIBUTE", "ADJOINT_DISTINCT_ATTRIBUTE", "ADJOINT_OUTPUTS_KEPT_ATTRIBUTE", "DYNAMIC_SHARED_PARAMS", "SHADOW_ALIGN", "adjoint_shared_bytes", "GRID_LAUNCH_PARAM", "GRID_RECORD_WORDS", "BLOCKS_LAUNCH_PARAM", "LAUNCH_ENTRY_SUFFIX", "BLOCK_CONTEXT_FIELDS", "BLOCK_CONTEXT_TYPE", "BLOCK_ERROR_WORDS", "BLOCK_KERNEL_FLAG",
           "block_context_type", "ALL_CONTEXT_MARKERS", "BARRIER_MARKER", "BARRIER_PREDICATE_MARKERS", "BLOCK_DIM_MARKER",
           "BLOCK_INDEX_MARKER", "BLOCK_MARKERS", "DYNAMIC_SHARED_GLOBAL", "FENCE_MARKERS", "GEOMETRY_MARKERS",
           "GRID_BARRIER_MARKER", "GRID_DIM_MARKER", "LANE_INDEX_MARKER", "SHARED_BYTES_MARKER", "SHARED_GLOBAL_PREFIX",
           "SHARED_MARKER", "SHUFFLE_KINDS", "SHUFFLE_MARKERS", "SHUFFLE_MARKER_PREFIX", "SHUFFLE_TYPES",
           "SYNCWARP_MARKER", "THREAD_INDEX_MARKER", "VOTE_MARKERS", "WARP_SIZE_MARKER", "ADJOINT_MARKER", "PARITY_ADJOINT_MARKER", "BLOCKWISE_ADJOINT_MARKER", "TANGENT_KERNEL_MARKER", "SERIAL_ADJOINT_MARKER", "FORWARD_MARKER_PREFIX", "REVERSE_MARKER_PREFIX", "LOOKUP_MARKER", "SPLIT_MARKER", "SITE_METADATA", "ARGV_SLOT_BYTES", "ArrayParam", "BOOL_ATTRIBUTES", "CONTEXT_FIELDS", "CONTEXT_MARKERS", "CONTEXT_PARAM",
           "CONTEXT_TYPE", "DATA_POINTER_ATTRIBUTES", "EntryABI", "INDEX_MARKER", "KernelSignature", "LAUNCH_CONTEXT",
           "LAUNCH_FORMS", "LAUNCH_NONE", "LAUNCH_SIZES", "LAUNCH_SIZE_PARAMS", "LLVM_SCALARS", "MAX_EXTENT",
           "NDRANGE_MARKER", "SLOT_FORMATS", "ScalarParam", "TupleParam", "array_param_count", "array_param_names",
           "array_params", "array_struct", "as_signature", "c_strides", "context_type", "flat_values",
           "has_context_param", "has_launch_size_params", "is_c_contiguous", "kernel_params", "launch_form",
           "slot_types", "storage_type", "written_params"]
