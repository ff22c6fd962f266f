"""print() and bounds checks on GPU targets (docs/debugging.md): the record of a launch's first failed bounds
check that the module keeps for its runtime (abi.BOUNDS_RECORD), the kernel through which OpenCL reads it,
and the printf calls of SPIR-V (OpenCL's `printf`) and PTX (CUDA's `vprintf`)."""

from __future__ import annotations

from .. import abi
from ..llvm import CALLING_CONVENTIONS, Builder, Constant, ConstantInt, FunctionType, Module, PointerType


def define_bounds_record(module: Module):
    """Define the record the checks of `module` fill (declared by the frontend), zeroed and external, so
    that its runtime finds it by name; None when nothing in the module checks its indices."""
    gv = module.globals.get(abi.BOUNDS_RECORD)
    if gv is None:
        return None
    if gv.is_declaration:
        gv.initializer = Constant.null(gv.value_type)
    gv.linkage = "external"
    gv.alignment = 8
    return gv


def add_bounds_reader(module: Module, record, calling_convention: str):
    """`void gpuc_boundscheck_read(i64 addrspace(1)* out)` (abi.BOUNDS_READER), a kernel of one work item:
    it copies the record to `out` and clears it for the next launch (OpenCL reads no globals of a program)."""
    llctx = module.context
    i64 = llctx.i64
    space = record.type.address_space
    out_type = llctx.ptr(space)
    fn = module.add_function(abi.BOUNDS_READER, FunctionType.get(llctx.void, [out_type]))
    fn.calling_convention = calling_convention
    out = fn.args[0]
    out.name = "out"
    with Builder(llctx) as b:
        b.position_at_end(fn.append_block("entry"))
        for k in range(abi.BOUNDS_DEVICE_RECORD_WORDS):
            word = b.gep(i64, record, [ConstantInt.get(i64, k)])
            b.store(b.load(i64, word, align=8), b.gep(i64, out, [ConstantInt.get(i64, k)]), align=8)
            b.store(ConstantInt.get(i64, 0), word, align=8)
        b.ret()
    return fn


def opencl_printf(builder, module: Module, format, args) -> None:
    """OpenCL's printf (the backend makes it the OpenCL extended instruction `printf`): the format in the
    constant address space, the arguments as they are (a float stays a float: OpenCL converts it)."""
    llctx = module.context
    fnty = FunctionType.get(llctx.i32, [format.type], vararg=True)
    fn = module.get_or_insert_function("printf", fnty)
    fn.calling_convention = "spir_func"
    builder.call(fn, [format, *args]).calling_convention = CALLING_CONVENTIONS["spir_func"]


def cuda_vprintf(builder, module: Module, format, args) -> None:
    """CUDA's `vprintf(format, buffer)`: the arguments in a buffer, each aligned to its size (a struct's
    natural layout), floats as doubles and pointers generic, as C's variadic calls pass them."""
    llctx = module.context
    generic = llctx.ptr()
    values = []
    for value in args:
        if value.type == llctx.float or value.type == llctx.half:
            value = builder.fpext(value, llctx.double)
        elif isinstance(value.type, PointerType) and value.type.address_space != 0:
            value = builder.addrspacecast(value, generic)
        values.append(value)
    buffer = Constant.null(generic)
    if values:
        layout = llctx.struct_type([v.type for v in values])
        with Builder(llctx) as entry:  # in the entry block: a print() in a loop reuses one buffer
            block = builder.block.parent.entry_block
            first = block.instructions.first
            entry.position_before(first) if first is not None else entry.position_at_end(block)
            buffer = entry.alloca(layout, "printf.args")
        for k, value in enumerate(values):
            builder.store(value, builder.struct_gep(layout, buffer, k))
    fmt = format if format.type.address_space == 0 else builder.addrspacecast(format, generic)
    fn = module.get_or_insert_function("vprintf", FunctionType.get(llctx.i32, [generic, generic]))
    builder.call(fn, [fmt, buffer])
