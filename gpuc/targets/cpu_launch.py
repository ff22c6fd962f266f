"""The CPU's launch entry: a wrapper that runs a kernel over a range of its index space.

    void @<kernel>.range(ptr %argv, i64 %begin, i64 %end, ptr %sizes)

runs work items `begin <= i < end` of the index space whose sizes (3 x i64) `sizes` points to.
A linear index maps to (index0, index1, index2) with dimension 0 fastest:
`i = index0 + n0 * (index1 + n1 * index2)`, so consecutive items walk dimension 0 and a chunk of
linear indices is a run of rows. `argv`
holds the kernel's flattened parameters, one 8-byte slot per LLVM scalar (gpuc/abi.py:
SLOT_FORMATS). The wrapper loads them once, then loops over rows and, within a row, over index0
calling the kernel, which is marked `alwaysinline`: the driver adds the wrapper before the
optimization pipeline, which inlines the kernel, promotes the context to registers and can
vectorize the inner loop.
"""

from __future__ import annotations

from ..abi import LAUNCH_ENTRY_SUFFIX, SPLIT_MARKER, VECTORIZE_MARKER, ARGV_SLOT_BYTES, BLOCKS_LAUNCH_PARAM, GRID_LAUNCH_PARAM, BLOCK_CONTEXT_FIELDS, BLOCK_KERNEL_FLAG, LAUNCH_CONTEXT, block_context_type, LAUNCH_NONE, context_type, kernel_params, launch_form, slot_types
from ..llvm import Builder, Constant, ConstantInt, Function, FunctionType, Module, StructType

SUFFIX = LAUNCH_ENTRY_SUFFIX


def add_launch_entry(job, module: Module, entry: Function) -> Function | None:
    """NativeTarget's launch entry: the range wrapper of a kernel job's entry (or of any entry
    the context plugin gave the context parameter), when the entry can be run from one."""
    if not (job.config.kernel or launch_form(entry) == LAUNCH_CONTEXT) or not launchable(entry):
        return None
    flag = module.globals.get(BLOCK_KERNEL_FLAG)
    if flag is not None:
        grid = flag.initializer.value == 2
        flag.erase()
        return add_blocks_wrapper(module, entry, grid)
    split = (job.config.optimize and job.config.opt_level > 0
             and any(m == SPLIT_MARKER for _, m in job.config.markers_at("simplified")))
    # (also with CompilerConfig(vectorize=False): the plugin then only guards the loop against LLVM 22's
    # masked-load fold, gpuc.compiler.freeze_reads_before_writes)
    vectorize = (job.config.optimize and job.config.opt_level > 0
                 and any(m == VECTORIZE_MARKER for _, m in job.config.markers_at("simplified")))
    return add_range_wrapper(module, entry, split, vectorize)


def add_blocks_wrapper(module: Module, kernel: Function, grid: bool = False) -> Function:
    """The launch entry of a block kernel (gpuc/plugins/workitems.py):

        void @<kernel>.range(ptr %argv, i64 %begin, i64 %end, ptr %launch)

    runs blocks `begin <= b < end` (linear, dimension 0 fastest) of the grid that `launch`, a
    %gpuc.BlockContext, describes; it stops early once a block has recorded an error."""
    llctx = module.context
    i32, i64, ptr = llctx.i32, llctx.i64, llctx.ptr()
    fn = module.add_function(f"{kernel.name}{SUFFIX}", FunctionType.get(llctx.void, [ptr, i64, i64, ptr]))
    argv, begin, end, launch = fn.args
    for arg, arg_name in zip(fn.args, ("argv", "begin", "end", GRID_LAUNCH_PARAM if grid else BLOCKS_LAUNCH_PARAM)):
        arg.name = arg_name
    fn.attributes.add("nounwind")
    if "noinline" not in kernel.attributes:
        kernel.attributes.add("alwaysinline")
    ty = block_context_type(module)
    fields = BLOCK_CONTEXT_FIELDS

    def const(v, t=i64):
        return ConstantInt.get(t, v)

    def field(b, base, name, dim=None):
        return b.gep(ty, base, [const(0, i32), const(fields[name], i32)] + ([] if dim is None else [const(dim, i32)]))

    with Builder(llctx) as b:
        entry, loop, body, done = (fn.append_block(n) for n in ("entry", "blocks", "block", "done"))
        b.position_at_end(entry)
        ctx = b.alloca(ty, "ctx")
        params = kernel.function_type.params
        slots = iter(range(1 << 62))
        args = [_load_param(b, llctx, argv, slots, t) for t in params[:-1]]
        for name in ("ndrange", "block_dim", "grid_dim"):
            for d in range(3):
                b.store(b.load(i64, field(b, launch, name, d), align=8), field(b, ctx, name, d), align=8)
        b.store(b.load(i64, field(b, launch, "shared_bytes"), align=8), field(b, ctx, "shared_bytes"), align=8)
        error = b.load(ptr, field(b, launch, "error"), align=8)
        b.store(error, field(b, ctx, "error"), align=8)
        b.store(b.load(ptr, field(b, launch, "grid"), align=8), field(b, ctx, "grid"), align=8)
        gx = b.load(i64, field(b, launch, "grid_dim", 0), align=8)
        gy = b.load(i64, field(b, launch, "grid_dim", 1), align=8)
        b.br(loop)
        b.position_at_end(loop)
        linear = b.phi(i64, [(begin, entry)], "linear")
        b.cond_br(b.icmp("ult", linear, end), body, done)
        b.position_at_end(body)
        rest = b.udiv(linear, gx)
        for d, value in enumerate((b.urem(linear, gx), b.urem(rest, gy), b.udiv(rest, gy))):
            b.store(value, field(b, ctx, "block_index", d), align=8)
        b.call(kernel, [*args, ctx])
        following = b.nuw_add(linear, const(1))
        linear.add_incoming(following, b.block)
        failed = b.icmp("ne", b.load(i32, error, align=8, volatile=True), const(0, i32))
        b.cond_br(failed, done, loop)
        b.position_at_end(done)
        b.ret()
    return fn


def launchable(kernel: Function) -> bool:
    """Whether `kernel` can be run from a range wrapper: it returns nothing, takes scalars, tuples
    and pointers only, and gets the launch context (if at all) through %gpuc.ctx."""
    if str(kernel.return_type) != "void" or launch_form(kernel) not in (LAUNCH_NONE, LAUNCH_CONTEXT):
        return False
    return all(slot_types(t) is not None for t in kernel_params(kernel))


def add_range_wrapper(module: Module, kernel: Function, split: bool = False, vectorize: bool = False) -> Function:
    """Add `void @<kernel>.range(ptr %argv, i64 %begin, i64 %end, ptr %sizes)` (see the module doc).
    With `split`, the loop over index 0 calls `SPLIT_MARKER(index0)`, so that the clamp-splitting plugin
    (gpuc/plugins/clamp_split.py) finds it once inlining has shown the kernel's clamps; with `vectorize`,
    `VECTORIZE_MARKER(index0, items)` likewise (`items` the launch's work items), for the vectorization
    plugin (gpuc/plugins/vectorize/)."""
    llctx = module.context
    i32, i64, ptr = llctx.i32, llctx.i64, llctx.ptr()
    with_context = launch_form(kernel) == LAUNCH_CONTEXT
    fn = module.add_function(f"{kernel.name}{SUFFIX}", FunctionType.get(llctx.void, [ptr, i64, i64, ptr]))
    argv, begin, end, sizes = fn.args
    for arg, arg_name in zip(fn.args, ("argv", "begin", "end", "sizes")):
        arg.name = arg_name
    fn.attributes.add("nounwind")
    if "noinline" not in kernel.attributes:
        kernel.attributes.add("alwaysinline")
    ctx_ty = context_type(module)
    blocks = {b: fn.append_block(b) for b in ("entry", "rows", "row", "items", "done")}

    def const(v, ty=i64):
        return ConstantInt.get(ty, v)

    def ctx_field(b, field, dim):
        return b.gep(ctx_ty, ctx, [const(0, i32), const(field, i32), const(dim, i32)])

    with Builder(llctx) as b:
        b.position_at_end(blocks["entry"])
        ctx = b.alloca(ctx_ty, "ctx")
        params = kernel.function_type.params
        slots = iter(range(1 << 62))
        args = [_load_param(b, llctx, argv, slots, ty) for ty in (params[:-1] if with_context else params)]
        n = [b.load(i64, b.gep(i64, sizes, [const(d)]), f"n{d}", align=8) for d in range(3)]
        for d in range(3):
            b.store(n[d], ctx_field(b, 1, d), align=8)
        items = b.mul(b.mul(n[0], n[1]), n[2], "items")
        b.br(blocks["rows"])

        b.position_at_end(blocks["rows"])  # one row: a run of index0 at fixed (index1, index2)
        linear = b.phi(i64, [(begin, blocks["entry"])], "linear")
        b.cond_br(b.icmp("ult", linear, end), blocks["row"], blocks["done"])

        b.position_at_end(blocks["row"])
        first = b.urem(linear, n[0], "first0")
        rest = b.udiv(linear, n[0])
        b.store(b.urem(rest, n[1], "index1"), ctx_field(b, 0, 1), align=8)
        b.store(b.udiv(rest, n[1], "index2"), ctx_field(b, 0, 2), align=8)
        row_end = b.add(b.sub(linear, first), n[0])
        limit = b.select(b.icmp("ult", row_end, end), row_end, end, "limit")
        stop = b.add(first, b.sub(limit, linear), "stop0")
        b.br(blocks["items"])

        b.position_at_end(blocks["items"])
        index0 = b.phi(i64, [(first, blocks["row"])], "index0")
        b.store(index0, ctx_field(b, 0, 0), align=8)
        if split:
            b.call(_split_marker(module), [index0])
        if vectorize:  # (index0, the launch's work items: whether it streams its stores)
            b.call(_split_marker(module, VECTORIZE_MARKER, 2), [index0, items])
        b.call(kernel, [*args, ctx] if with_context else args)
        following = b.nuw_add(index0, const(1))
        index0.add_incoming(following, blocks["items"])
        b.cond_br(b.icmp("ult", following, stop), blocks["items"], blocks["rows"])
        linear.add_incoming(limit, blocks["items"])

        b.position_at_end(blocks["done"])
        b.ret()
    return fn


def _split_marker(module: Module, name: str = SPLIT_MARKER, params: int = 1) -> Function:
    """`void @gpuc.cpu.split_clamps(i64)` (or another marker `name` taking `params` i64s): touches only
    memory nothing else sees, so it neither goes away nor stops the optimizer from moving loads and stores
    around it."""
    llctx = module.context
    marker = module.get_or_insert_function(name, FunctionType.get(llctx.void, [llctx.i64] * params))
    for name, value in (("nounwind", 0), ("willreturn", 0), ("nosync", 0), ("nofree", 0), ("memory", 12)):
        marker.attributes.add(name, value)
    return marker


def _load_param(b: Builder, llctx, argv, slots, ty):
    """A parameter from the next argv slots: a scalar from one, a literal struct from one per element."""
    if isinstance(ty, StructType):
        value = Constant.poison(ty)
        for k, element in enumerate(ty.elements):
            value = b.insert_value(value, _load_param(b, llctx, argv, slots, element), k)
        return value
    i = next(slots)
    slot = b.gep(llctx.i8, argv, [ConstantInt.get(llctx.i64, ARGV_SLOT_BYTES * i)], f"slot{i}")
    if str(ty) == "i1":
        return b.icmp("ne", b.load(llctx.i8, slot, align=8), ConstantInt.get(llctx.i8, 0), f"arg{i}")
    return b.load(ty, slot, f"arg{i}", align=8)
