"""The IR builder: every family of instructions, verified, and run through the JIT."""

import ctypes
import math

import pytest

import gpuc.llvm as llvm

from support.llvm_testing import Jitted, const, define, filecheck

C = ctypes
# op -> (operand type name, ctypes type, a, b, expected)
BINARY = {
    "add": ("i32", C.c_int32, 40, 2, 42), "sub": ("i32", C.c_int32, 2, 40, -38),
    "mul": ("i64", C.c_int64, -6, 7, -42), "nsw_add": ("i32", C.c_int32, 1, 2, 3),
    "nuw_add": ("i32", C.c_int32, 1, 2, 3), "nsw_sub": ("i32", C.c_int32, 1, 2, -1),
    "nsw_mul": ("i32", C.c_int32, 3, -3, -9),
    "sdiv": ("i32", C.c_int32, -7, 2, -3), "udiv": ("i32", C.c_uint32, 7, 2, 3),
    "exact_sdiv": ("i32", C.c_int32, -8, 2, -4),
    "srem": ("i32", C.c_int32, -7, 2, -1), "urem": ("i32", C.c_uint32, 7, 4, 3),
    "shl": ("i32", C.c_int32, 3, 4, 48), "lshr": ("i32", C.c_uint32, 0x80000000, 31, 1),
    "ashr": ("i32", C.c_int32, -16, 2, -4),
    "and_": ("i32", C.c_int32, 0b1100, 0b1010, 0b1000), "or_": ("i32", C.c_int32, 0b1100, 0b1010, 0b1110),
    "xor": ("i32", C.c_int32, 0b1100, 0b1010, 0b0110),
    "fadd": ("double", C.c_double, 1.5, 2.25, 3.75), "fsub": ("double", C.c_double, 1.5, 2.25, -0.75),
    "fmul": ("double", C.c_double, 1.5, -2.0, -3.0), "fdiv": ("float", C.c_float, 1.0, 4.0, 0.25),
    "frem": ("double", C.c_double, 7.5, 2.0, 1.5),
}
UNARY = {"neg": ("i32", C.c_int32, 5, -5), "not_": ("i32", C.c_int32, 0, -1),
         "fneg": ("double", C.c_double, 2.5, -2.5), "freeze": ("i32", C.c_int32, 9, 9)}
ICMP = [("eq", 3, 3, 1), ("ne", 3, 3, 0), ("slt", -1, 0, 1), ("ult", -1, 0, 0), ("sge", 5, 5, 1),
        ("ugt", -1, 0, 1), ("sle", 1, 0, 0), ("uge", 0, 0, 1), ("sgt", 0, -1, 1), ("ule", 0, -1, 1)]
FCMP = [("oeq", 1.0, 1.0, 1), ("olt", 1.0, 2.0, 1), ("one", math.nan, 1.0, 0), ("une", math.nan, 1.0, 1),
        ("uno", math.nan, 0.0, 1), ("ord", 1.0, 2.0, 1), ("ogt", 2.0, 1.0, 1), ("false", 1.0, 1.0, 0)]


@pytest.fixture(scope="module")
def ops():
    """One JIT-compiled module holding a small function per binary/unary/compare operation."""
    ctx = llvm.Context()
    m = llvm.Module("ops", ctx)
    with llvm.Builder(ctx) as b:
        for op, (tyname, _, _, _, _) in BINARY.items():
            ty = getattr(ctx, tyname)
            fn, entry = define(m, f"bin_{op}", ty, [ty, ty])
            b.position_at_end(entry).ret(getattr(b, op)(*fn.args, "r"))
        for op, (tyname, _, _, _) in UNARY.items():
            ty = getattr(ctx, tyname)
            fn, entry = define(m, f"un_{op}", ty, [ty])
            b.position_at_end(entry).ret(getattr(b, op)(fn.args[0]))
        for kind, preds, ty in (("icmp", ICMP, ctx.i32), ("fcmp", FCMP, ctx.double)):
            for pred, *_ in preds:
                fn, entry = define(m, f"{kind}_{pred}", ctx.i32, [ty, ty])
                b.position_at_end(entry)
                bit = getattr(b, kind)(pred, *fn.args)
                assert isinstance(bit, llvm.CompareInst) and bit.type == ctx.i1
                b.ret(b.zext(bit, ctx.i32))
    jitted = Jitted(m)
    yield jitted
    jitted.close()


@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary(ops, op):
    _, cty, a, b, expected = BINARY[op]
    assert ops.get(f"bin_{op}", cty, cty, cty)(a, b) == expected


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary(ops, op):
    _, cty, a, expected = UNARY[op]
    assert ops.get(f"un_{op}", cty, cty)(a) == expected


@pytest.mark.parametrize("pred, a, b, expected", ICMP)
def test_icmp(ops, pred, a, b, expected):
    assert ops.get(f"icmp_{pred}", C.c_int32, C.c_int32, C.c_int32)(a, b) == expected


@pytest.mark.parametrize("pred, a, b, expected", FCMP)
def test_fcmp(ops, pred, a, b, expected):
    assert ops.get(f"fcmp_{pred}", C.c_int32, C.c_double, C.c_double)(a, b) == expected


def test_operand_type_mismatch_and_bad_predicate(module, builder, ctx):
    fn, entry = define(module, "f", ctx.void, [ctx.i32, ctx.i64, ctx.double])
    x, y, z = fn.args
    builder.position_at_end(entry)
    with pytest.raises(TypeError, match="operand types differ"):
        builder.add(x, y)
    with pytest.raises(TypeError, match="operand types differ"):
        builder.icmp("eq", x, y)
    with pytest.raises(TypeError, match="operand types differ"):
        builder.fcmp("oeq", z, x)
    with pytest.raises(ValueError, match="unknown icmp predicate"):
        builder.icmp("lt", x, x)
    with pytest.raises(ValueError, match="unknown fcmp predicate"):
        builder.fcmp("eq", z, z)
    with pytest.raises(AttributeError):
        builder.no_such_instruction
    assert len(entry.instructions) == 0


def test_casts_and_select(module, builder, ctx, jit_module):
    fn, entry = define(module, "casts", ctx.double, [ctx.i64, ctx.float, ctx.i1])
    n, f, c = fn.args
    builder.position_at_end(entry)
    small = builder.trunc(n, ctx.i32)                       # i64 -> i32
    wide = builder.sext(small, ctx.i64)                     # back, sign-extended
    u = builder.zext(builder.trunc(n, ctx.i8), ctx.i64)      # low byte, zero-extended
    fd = builder.fpext(f, ctx.double)
    as_int = builder.fptosi(fd, ctx.i64)
    back = builder.sitofp(builder.add(builder.add(wide, u), as_int), ctx.double)
    bits = builder.bitcast(back, ctx.i64)
    p = builder.inttoptr(bits, ctx.ptr())
    again = builder.bitcast(builder.ptrtoint(p, ctx.i64), ctx.double)
    half = builder.fptrunc(again, ctx.float)
    out = builder.select(c, builder.fpext(half, ctx.double), builder.uitofp(u, ctx.double))
    builder.ret(out)
    assert [i.opcode_name for i in entry.instructions][:3] == ["trunc", "sext", "trunc"]
    run = jit_module(module).get("casts", C.c_double, C.c_int64, C.c_float, C.c_bool)
    # n = 0x1_0000_0105: trunc i32 -> 0x105 (261); low byte 5; fptosi(2.75) = 2
    assert run(0x1_0000_0105, 2.75, True) == 261 + 5 + 2
    assert run(0x1_0000_0105, 2.75, False) == 5.0


def test_memory_alloca_load_store_gep(module, builder, ctx, jit_module):
    pair = ctx.struct_type([ctx.i32, ctx.i64], name="pair")
    fn, entry = define(module, "mem", ctx.i64, [ctx.ptr(), ctx.i64])
    arr, i = fn.args
    builder.position_at_end(entry)
    slot = builder.alloca(pair, "slot")
    assert isinstance(slot, llvm.AllocaInst) and slot.allocated_type == pair
    f0 = builder.struct_gep(pair, slot, 0, "f0")
    f1 = builder.struct_gep(pair, slot, 1, "f1")
    store = builder.store(llvm.ConstantInt.get(ctx.i32, 10), f0, align=4)
    assert isinstance(store, llvm.MemoryInst) and store.type == ctx.void and store.alignment == 4
    elem = builder.gep(ctx.i64, arr, [i], "elem")
    assert isinstance(elem, llvm.GetElementPtrInst) and elem.source_element_type == ctx.i64
    loaded = builder.load(ctx.i64, elem, "x", align=8)
    assert loaded.alignment == 8 and not loaded.is_volatile
    builder.store(loaded, f1)
    raw = builder.gep(ctx.i8, arr, [llvm.ConstantInt.get(ctx.i64, 8)], inbounds=False)
    second = builder.load(ctx.i64, raw)
    a = builder.sext(builder.load(ctx.i32, f0), ctx.i64)
    builder.ret(builder.add(builder.add(a, builder.load(ctx.i64, f1)), second))
    filecheck(str(fn), """
; CHECK: %slot = alloca %pair
; CHECK: %f0 = getelementptr inbounds nuw %pair, ptr %slot, i32 0, i32 0
; CHECK: store i32 10, ptr %f0, align 4
; CHECK: %elem = getelementptr inbounds i64, ptr %0, i64 %1
; CHECK: %x = load i64, ptr %elem, align 8
; CHECK: getelementptr i8, ptr %0, i64 8
""")
    data = (C.c_int64 * 4)(100, 200, 300, 400)
    run = jit_module(module).get("mem", C.c_int64, C.c_void_p, C.c_int64)
    assert run(data, 3) == 10 + 400 + 200


def test_aggregates_and_vectors(module, builder, ctx):
    st = ctx.struct_type([ctx.i32, ctx.double])
    vec = llvm.VectorType.get(ctx.float, 4)
    fn, entry = define(module, "agg", ctx.float, [ctx.i32, ctx.float])
    builder.position_at_end(entry)
    s = builder.insert_value(llvm.Constant.undef(st), fn.args[0], 0)
    assert builder.extract_value(s, 0).type == ctx.i32
    v = builder.insert_element(llvm.Constant.poison(vec), fn.args[1], llvm.ConstantInt.get(ctx.i32, 2))
    builder.ret(builder.extract_element(v, llvm.ConstantInt.get(ctx.i32, 2)))
    module.verify()
    assert [i.opcode_name for i in entry.instructions] == [
        "insertvalue", "extractvalue", "insertelement", "extractelement", "ret"]


def test_calls_and_argument_checks(module, builder, ctx, jit_module):
    sq, e = define(module, "square", ctx.i64, [ctx.i64])
    builder.position_at_end(e).ret(builder.mul(sq.args[0], sq.args[0]))
    fn, entry = define(module, "twice", ctx.i64, [ctx.i64])
    builder.position_at_end(entry)
    with pytest.raises(TypeError, match="0 argument.* takes 1"):
        builder.call(sq, [])
    with pytest.raises(TypeError, match="2 argument.* takes 1"):
        builder.call(sq, [fn.args[0], fn.args[0]])
    with pytest.raises(TypeError, match="argument 0 has type i32"):
        builder.call(sq, [llvm.ConstantInt.get(ctx.i32, 1)])
    direct = builder.call(sq, [fn.args[0]], "d")
    assert isinstance(direct, llvm.CallInst) and direct.callee == sq
    with pytest.raises(TypeError, match="needs fnty"):
        builder.call(direct, [direct])
    # An indirect call through a pointer needs the function type.
    slot = builder.alloca(ctx.ptr())
    builder.store(sq, slot)
    fptr = builder.load(ctx.ptr(), slot, "fp")
    indirect = builder.call(fptr, [direct], "i", fnty=sq.function_type)
    assert indirect.callee == fptr and indirect.args == [direct]
    builder.ret(indirect)
    assert len(entry.instructions) == 6  # the failed calls built nothing
    assert jit_module(module).get("twice", C.c_int64, C.c_int64)(3) == 81


def test_void_and_vararg_calls(module, builder, ctx):
    printf = module.add_function("printf", llvm.FunctionType.get(ctx.i32, [ctx.ptr()], vararg=True))
    hook, _ = define(module, "hook", ctx.void)
    builder.position_at_end(_).ret()
    fn, entry = define(module, "f", ctx.void, [ctx.ptr()])
    builder.position_at_end(entry)
    call = builder.call(hook, [], "ignored")  # void results are never named
    assert call.name == "" and call.type == ctx.void
    builder.call(printf, [fn.args[0], llvm.ConstantInt.get(ctx.i32, 1), llvm.ConstantFP.get(ctx.double, 2.0)])
    with pytest.raises(TypeError, match="takes at least 1"):
        builder.call(printf, [])
    builder.ret()
    module.verify()


def test_control_flow_loop_with_phis(module, builder, ctx, jit_module):
    i64 = ctx.i64
    fn = module.add_function("sum", llvm.FunctionType.get(i64, [ctx.ptr(), i64]))
    entry, loop, done = fn.append_block("entry"), fn.append_block("loop"), fn.append_block("done")
    zero, one = const(i64, 0), const(i64, 1)
    builder.position_at_end(entry)
    assert builder.block == entry
    builder.cond_br(builder.icmp("eq", fn.args[1], zero), done, loop)
    builder.position_at_end(loop)
    i = builder.phi(i64, [(zero, entry)], "i")
    acc = builder.phi(i64, [(zero, entry)], "acc")
    x = builder.load(i64, builder.gep(i64, fn.args[0], [i]))
    acc2, i2 = builder.add(acc, x, "acc2"), builder.add(i, one, "i2")
    i.add_incoming(i2, loop)
    acc.add_incoming(acc2, loop)
    br = builder.cond_br(builder.icmp("ult", i2, fn.args[1]), loop, done)
    assert isinstance(br, llvm.BranchInst) and br.successors == [loop, done]
    builder.position_at_end(done)
    builder.ret(builder.phi(i64, [(zero, entry), (acc2, loop)], "r"))
    assert i.incoming == [(zero, entry), (i2, loop)]
    run = jit_module(module).get("sum", C.c_int64, C.c_void_p, C.c_int64)
    data = (C.c_int64 * 5)(1, 2, 3, 4, 5)
    assert (run(data, 5), run(data, 0), run(data, 2)) == (15, 0, 3)


def test_switch_and_unconditional_branch(module, builder, ctx, jit_module):
    fn, entry = define(module, "classify", ctx.i32, [ctx.i32])
    other, small, big, out = (fn.append_block(n) for n in ("other", "small", "big", "out"))
    builder.position_at_end(entry)
    sw = builder.switch(fn.args[0], other, [(const(ctx.i32, 1), small), (const(ctx.i32, 100), big)])
    assert sw.opcode_name == "switch" and sw.is_terminator
    for block in (other, small, big):
        builder.position_at_end(block).br(out)
    builder.position_at_end(out)
    builder.ret(builder.phi(ctx.i32, [(const(ctx.i32, -1), other), (const(ctx.i32, 10), small),
                                      (const(ctx.i32, 20), big)]))
    run = jit_module(module).get("classify", C.c_int32, C.c_int32)
    assert [run(v) for v in (0, 1, 100, 7)] == [-1, 10, 20, -1]


def test_positioning(module, builder, ctx):
    fn, entry = define(module, "f", ctx.i32, [ctx.i32])
    builder.position_at_end(entry)
    a = builder.add(fn.args[0], const(ctx.i32, 1), "a")
    ret = builder.ret(a)
    builder.position_before(a)
    first = builder.mul(fn.args[0], fn.args[0], "first")
    builder.position_after(a)
    mid = builder.sub(a, first, "mid")
    builder.position_after(ret)  # at the end of the block
    assert builder.block == entry
    assert [i.name for i in entry.instructions] == ["first", "a", "mid", ""]
    assert mid.next == ret


def test_direct_call_takes_the_callee_calling_convention(ctx, module, builder):
    """An internal function the optimizer made fastcc is called fastcc by calls made afterwards."""
    callee, entry = define(module, "callee", ctx.i32, [ctx.i32])
    builder.position_at_end(entry).ret(callee.args[0])
    callee.calling_convention = "fast"
    caller, entry = define(module, "caller", ctx.i32, [ctx.i32])
    builder.position_at_end(entry)
    call = builder.call(callee, [caller.args[0]])
    builder.ret(call)
    assert call.calling_convention == llvm.CALLING_CONVENTIONS["fast"]
    module.verify()
    filecheck(str(module), """
        CHECK-LABEL: define i32 @caller
        CHECK: call fastcc i32 @callee
    """)
