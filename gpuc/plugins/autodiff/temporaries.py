"""Heap temporaries in the reverse sweep: memory a function allocates with the target's allocator
(`Target.heap_functions`) and frees itself, such as the buffer of a copy into an overlapping view.

As Enzyme does for malloc: each allocation gets a shadow of the same size, zeroed, allocated next to
it in the forward part. The primal memory is freed where the function frees it (the reverse sweep
reads no primal memory: it keeps the values it needs); the shadow lives until the reverse of the
allocation, after the reverse of every access of the temporary has used it, and is freed there.
"""

from __future__ import annotations

import gpuc.llvm as llvm

ALLOCATE = "gpuc.autodiff.shadow.allocate"


def shadow_allocator(module: llvm.Module, heap) -> llvm.Function:
    """`ptr @gpuc.autodiff.shadow.allocate(i64 %size)`: `size` zeroed bytes from the heap (at least
    one); it traps where the heap has none left, as the tape's growth does."""
    existing = module.functions.get(ALLOCATE)
    if existing is not None and not existing.is_declaration:
        return existing
    ctx, i64 = module.context, module.context.i64
    fn = existing or module.add_function(ALLOCATE, llvm.FunctionType.get(ctx.ptr(), [i64]))
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    (size,) = fn.args
    malloc = module.get_or_insert_function(heap[0], llvm.FunctionType.get(ctx.ptr(), [i64]))
    with llvm.Builder(ctx) as b:
        b.position_at_end(fn.append_block("entry"))
        one = llvm.ConstantInt.get(i64, 1)
        size = b.select(b.icmp("ugt", size, one), size, one)
        memory = b.call(malloc, [size])
        failed, got = fn.append_block("out_of_memory"), fn.append_block("allocated")
        b.cond_br(b.icmp("eq", memory, llvm.Constant.null(ctx.ptr())), failed, got)
        b.position_at_end(failed)
        b.call(module.declare_intrinsic("llvm.trap", llvm.FunctionType.get(ctx.void, [])), [])
        b.unreachable()
        b.position_at_end(got)
        memset = module.declare_intrinsic("llvm.memset.p0.i64", llvm.FunctionType.get(
            ctx.void, [ctx.ptr(), ctx.i8, i64, ctx.i1]))
        b.call(memset, [memory, llvm.ConstantInt.get(ctx.i8, 0), size, llvm.ConstantInt.get(ctx.i1, 0)])
        b.ret(memory)
    return fn


def free(b: llvm.Builder, module: llvm.Module, heap, pointer) -> None:
    """Give `pointer` back to the heap."""
    ctx = module.context
    b.call(module.get_or_insert_function(heap[1], llvm.FunctionType.get(ctx.void, [ctx.ptr()])), [pointer])
