"""Instruction classes: built with the Builder and read back, flags set and printed, IR text parsed and read."""

import pytest

import gpuc.llvm as llvm

from support.llvm_testing import const, define, filecheck


@pytest.fixture
def fn_i32(module, ctx, builder):
    """@f(i32 %a, i32 %b, double %x, double %y, ptr %p) with the builder at the end of its entry block."""
    fn, entry = define(module, "f", ctx.void, [ctx.i32, ctx.i32, ctx.double, ctx.double, ctx.ptr()])
    for arg, name in zip(fn.args, "abxyp"):
        arg.name = name
    builder.position_at_end(entry)
    return fn


def test_binary_operator_flags_built_read_and_printed(fn_i32, builder):
    a, b, *_ = fn_i32.args
    add = builder.add(a, b, "s", nsw=True)
    assert isinstance(add, llvm.BinaryOperator) and (add.nsw, add.nuw) == (True, False)
    assert (add.lhs, add.rhs, add.opcode_name) == (a, b, "add")
    div = builder.sdiv(a, b, "q", exact=True)
    bits = builder.or_(a, b, "o", disjoint=True)
    shift = builder.shl(a, b, "h", nuw=True)
    assert div.exact and bits.disjoint and shift.nuw and not shift.nsw
    add.nuw, add.nsw, div.exact = True, False, False
    add.rhs = a
    filecheck(str(fn_i32), """
; CHECK: %s = add nuw i32 %a, %a
; CHECK-NEXT: %q = sdiv i32 %a, %b
; CHECK-NEXT: %o = or disjoint i32 %a, %b
; CHECK-NEXT: %h = shl nuw i32 %a, %b
""")


def test_flags_an_opcode_lacks_read_false_and_refuse_to_be_set(fn_i32, builder):
    a, b, x, y, _ = fn_i32.args
    fsum, prod = builder.fadd(x, y), builder.mul(a, b)
    assert not fsum.nsw and not prod.exact and not prod.disjoint
    with pytest.raises(TypeError, match="fadd has no 'nsw' flag"):
        fsum.nsw = True
    with pytest.raises(TypeError, match="mul has no 'exact' flag"):
        prod.exact = True
    with pytest.raises(TypeError, match="must stay of type i32"):
        prod.lhs = x


def test_fast_math_flags(fn_i32, builder, module, ctx):
    a, b, x, y, _ = fn_i32.args
    s = builder.fadd(x, y, "s", fast_math={"contract"})
    n = builder.fneg(s, "n", fast_math="nnan")
    c = builder.fcmp("olt", n, y, "c", fast_math=("ninf", "nsz"))
    sel = builder.select(c, x, y, "m", fast_math="fast")
    sqrt = module.declare_intrinsic("llvm.sqrt.f64", llvm.FunctionType.get(ctx.double, [ctx.double]))
    root = builder.call(sqrt, [sel], "r", fast_math={"afn", "arcp"})
    assert isinstance(n, llvm.UnaryOperator) and n.operand == s and n.opcode_name == "fneg"
    assert s.fast_math == {"contract"} and n.fast_math == {"nnan"} and c.fast_math == {"ninf", "nsz"}
    assert sel.fast_math == set(llvm.FAST_MATH_FLAGS) and root.fast_math == {"afn", "arcp"}
    s.fast_math = "fast"
    n.fast_math = {"nnan", "nsz"}
    with pytest.raises(ValueError, match=r"cannot drop the fast-math flags \['nsz'\]"):
        n.fast_math = "nnan"  # LLVM-C's setter ORs: dropping a flag silently would leave it set
    i = builder.add(a, b)
    assert i.fast_math == frozenset() and not i.can_use_fast_math and root.can_use_fast_math
    with pytest.raises(TypeError, match="cannot carry fast-math flags"):
        i.fast_math = {"nnan"}
    with pytest.raises(ValueError, match="unknown fast-math flag 'fastest'"):
        s.fast_math = "fastest"
    filecheck(str(fn_i32), """
; CHECK: %s = fadd fast double %x, %y
; CHECK-NEXT: %n = fneg nnan nsz double %s
; CHECK-NEXT: %c = fcmp ninf nsz olt double %n, %y
; CHECK-NEXT: %m = select fast i1 %c, double %x, double %y
; CHECK-NEXT: %r = call arcp afn double @llvm.sqrt.f64(double %m)
""")


def test_fast_math_on_a_call_that_cannot_carry_it_is_refused_and_leaves_nothing(fn_i32, builder, module, ctx):
    g = module.add_function("g", llvm.FunctionType.get(ctx.i32, [ctx.i32]))
    with pytest.raises(TypeError, match="cannot carry fast-math"):
        builder.call(g, [fn_i32.args[0]], fast_math="fast")
    assert len(fn_i32.entry_block.instructions) == 0


PARSED = """
define void @f(i32 %a, i64 %w, double %x, double %y, ptr %p, i1 %c) {
entry:
  %s = add nuw nsw i32 %a, 1
  %d = udiv exact i32 %a, 3
  %t = trunc nuw nsw i64 %w to i32
  %z = zext nneg i32 %a to i64
  %u = uitofp nneg i32 %a to double
  %m = fmul reassoc nnan double %x, %y
  %k = fcmp fast une double %x, %y
  %v = select i1 %c, i32 %a, i32 %s
  %l = load atomic volatile i32, ptr %p acquire, align 4
  store atomic i32 %l, ptr %p syncscope("singlethread") release, align 4
  %g = getelementptr inbounds nuw [4 x i32], ptr %p, i64 0, i64 %w
  %r = atomicrmw volatile umax ptr %p, i32 %a seq_cst, align 8
  %x2 = cmpxchg weak ptr %p, i32 %a, i32 %s acq_rel monotonic, align 4
  fence syncscope("singlethread") acquire
  %f = freeze i32 %a
  %q = call double @llvm.fmuladd.f64(double %x, double %y, double %x)
  ret void
}
declare double @llvm.fmuladd.f64(double, double, double)
"""


def test_parsed_ir_reads_back(ctx):
    m = llvm.Module.parse(PARSED, ctx)
    i = {inst.name or inst.opcode_name: inst for inst in m.functions["f"].instructions()}
    assert (i["s"].nsw, i["s"].nuw, i["d"].exact, i["t"].nsw, i["t"].nuw) == (True, True, True, True, True)
    assert i["z"].nneg and i["u"].nneg and isinstance(i["u"], llvm.CastInst)
    assert (i["z"].source_type, i["z"].destination_type) == (ctx.i32, ctx.i64)
    assert i["m"].fast_math == {"reassoc", "nnan"} and i["k"].fast_math == set(llvm.FAST_MATH_FLAGS)
    assert (i["k"].predicate, i["k"].is_float, i["k"].predicate_code) == ("une", True, llvm.FCMP_PREDICATES["une"])
    sel = i["v"]
    assert isinstance(sel, llvm.SelectInst) and (sel.condition.name, sel.true_value.name, sel.false_value) == (
        "c", "a", i["s"])
    load, store = i["l"], i["store"]
    assert isinstance(load, llvm.LoadInst) and isinstance(store, llvm.StoreInst)
    assert (load.ordering, load.is_volatile, load.alignment, load.single_thread) == ("acquire", True, 4, False)
    assert (store.ordering, store.single_thread, store.value, store.pointer.name) == ("release", True, load, "p")
    gep = i["g"]
    assert gep.inbounds and gep.no_wrap == {"inbounds", "nusw", "nuw"} and str(gep.source_element_type) == "[4 x i32]"
    assert [str(v) for v in gep.indices] == ["i64 0", "i64 %w"] and gep.pointer.name == "p"
    rmw = i["r"]
    assert (rmw.operation, rmw.ordering, rmw.is_volatile, rmw.alignment, rmw.value.name) == (
        "umax", "seq_cst", True, 8, "a")
    xchg = i["x2"]
    assert isinstance(xchg, llvm.AtomicCmpXchgInst) and xchg.weak
    assert (xchg.success_ordering, xchg.failure_ordering, xchg.compare.name, xchg.new_value) == (
        "acq_rel", "monotonic", "a", i["s"])
    assert isinstance(i["fence"], llvm.FenceInst) and i["fence"].ordering == "acquire" and i["fence"].single_thread
    assert isinstance(i["f"], llvm.FreezeInst) and i["f"].value.name == "a"
    call = i["q"]
    assert call.intrinsic_id == llvm.intrinsic_id("llvm.fmuladd") != 0 and call.intrinsic_name == "llvm.fmuladd"
    assert i["ret"].opcode_name == "ret" and load.ordering is not None


def test_setting_memory_and_atomic_flags_prints(ctx):
    m = llvm.Module.parse(PARSED, ctx)
    i = {inst.name or inst.opcode_name: inst for inst in m.functions["f"].instructions()}
    i["l"].ordering, i["l"].is_volatile, i["l"].alignment = None, False, 16
    i["store"].ordering, i["store"].single_thread = "seq_cst", False
    i["g"].no_wrap = {"nusw"}
    i["r"].operation, i["r"].is_volatile, i["r"].ordering = "xchg", False, "acq_rel"
    i["fence"].ordering, i["fence"].single_thread = "seq_cst", False
    i["x2"].weak, i["x2"].success_ordering, i["x2"].failure_ordering = False, "seq_cst", "acquire"
    i["z"].nneg, i["t"].nsw = False, False
    filecheck(str(m), """
; CHECK: %t = trunc nuw i64 %w to i32
; CHECK-NEXT: %z = zext i32 %a to i64
; CHECK: %l = load i32, ptr %p, align 16
; CHECK-NEXT: store atomic i32 %l, ptr %p seq_cst, align 4
; CHECK-NEXT: %g = getelementptr nusw [4 x i32], ptr %p
; CHECK-NEXT: %r = atomicrmw xchg ptr %p, i32 %a acq_rel, align 8
; CHECK-NEXT: %x2 = cmpxchg ptr %p, i32 %a, i32 %s seq_cst acquire, align 4
; CHECK-NEXT: fence seq_cst
""")
    m.verify()
    with pytest.raises(ValueError, match="unknown atomic ordering 'strong'"):
        i["l"].ordering = "strong"
    with pytest.raises(ValueError, match="power of two"):
        i["l"].alignment = 3
    with pytest.raises(ValueError, match="unknown atomicrmw operation 'mul'"):
        i["r"].operation = "mul"


def test_casts_built_by_name_by_opcode_and_generic(fn_i32, builder, ctx):
    a, _, x, _, p = fn_i32.args
    wide = builder.zext(a, ctx.i64, "z", nneg=True)
    narrow = builder.trunc(wide, ctx.int_type(16), "t", nuw=True)
    f = builder.uitofp(a, ctx.float, "u", nneg=True)
    g = builder.cast("fpext", f, ctx.double, "e", fast_math="nnan")
    h = builder.cast(llvm.capi.LLVMFPToSI, g, ctx.i32, "s")
    v = builder.bitcast(builder.insert_element(llvm.Constant.poison(llvm.VectorType.get(ctx.i32, 2)), a,
                                               const(ctx.i32, 0), "iv"), ctx.i64, "b")
    q = builder.addrspacecast(p, ctx.ptr(1), "as")
    assert [c.opcode_name for c in (wide, narrow, f, g, h, v, q)] == [
        "zext", "trunc", "uitofp", "fpext", "fptosi", "bitcast", "addrspacecast"]
    assert all(isinstance(c, llvm.CastInst) for c in (wide, narrow, f, g, h, v, q))
    assert wide.nneg and narrow.nuw and f.nneg and g.fast_math == {"nnan"} and h.value == g
    filecheck(str(fn_i32), """
; CHECK: %z = zext nneg i32 %a to i64
; CHECK-NEXT: %t = trunc nuw i64 %z to i16
; CHECK-NEXT: %u = uitofp nneg i32 %a to float
; CHECK-NEXT: %e = fpext nnan float %u to double
""")


@pytest.mark.parametrize("op, src, dst, why", [
    ("trunc", "i32", "i64", "narrower"), ("zext", "i64", "i32", "wider"), ("fptrunc", "float", "double", "narrower"),
    ("sitofp", "i64", "i32", "integer to floating-point"), ("fptosi", "i32", "i32", "floating-point to integer"),
    ("bitcast", "i64", "i32", "sizes differ"), ("bitcast", "ptr", "i64", "pointers convert only"),
    ("addrspacecast", "ptr", "ptr", "same address space"), ("inttoptr", "double", "ptr", "integer to pointer"),
])
def test_invalid_casts_raise_before_llvm_folds_them(fn_i32, builder, ctx, op, src, dst, why):
    # A release libLLVM folded `sitofp i64 5 to i32` into a ppc_fp128 and `zext i64 to i32` into an i32.
    kinds = {"i32": ctx.i32, "i64": ctx.i64, "float": ctx.float, "double": ctx.double, "ptr": ctx.ptr()}
    value = llvm.Constant.null(kinds[src])
    with pytest.raises(TypeError, match=why):
        builder.cast(op, value, kinds[dst])
    with pytest.raises(TypeError, match=why):
        getattr(builder, op)(value, kinds[dst])


def test_select_phi_and_compare(fn_i32, builder, ctx):
    a, b, x, y, _ = fn_i32.args
    entry = builder.block
    c = builder.icmp("slt", a, b, "c")
    assert isinstance(c, llvm.CompareInst) and (c.predicate, c.is_float, c.lhs, c.rhs) == ("slt", False, a, b)
    assert c.predicate_code == llvm.ICMP_PREDICATES["slt"]
    s = builder.select(c, x, y, "s")
    s.true_value, s.false_value = y, x
    assert (s.condition, s.true_value, s.false_value) == (c, y, x)
    join = fn_i32.append_block("join")
    builder.br(join)
    builder.position_at_end(join)
    phi = builder.phi(ctx.double, [(s, entry)], "m")
    assert phi.incoming == [(s, entry)] and phi.incoming_values == [s] and phi.incoming_blocks == [entry]
    assert phi.incoming_value_for(entry) == s
    with pytest.raises(TypeError, match="value of type i32 for a phi of type double"):
        phi.add_incoming(a, entry)
    with pytest.raises(TypeError, match="phi: an incoming value of type i32"):
        builder.phi(ctx.double, [(a, entry)])
    with pytest.raises(TypeError, match="condition must be an i1"):
        builder.select(a, x, y)
    filecheck(str(fn_i32), """
; CHECK: %s = select i1 %c, double %y, double %x
; CHECK: %m = phi double [ %s, %entry ]
""")


def test_memory_and_atomic_builders(fn_i32, builder, ctx):
    a, b, x, _, p = fn_i32.args
    slot = builder.alloca(ctx.i32, "slot", size=a, align=16)
    assert isinstance(slot, llvm.AllocaInst) and (slot.allocated_type, slot.alignment, slot.size) == (ctx.i32, 16, a)
    ld = builder.load(ctx.i32, p, "l", align=4, ordering="acquire", volatile=True)
    st = builder.store(ld, slot, ordering="release", align=4)
    gep = builder.gep(ctx.i32, p, [a], "g", no_wrap={"nuw"})
    rmw = builder.atomic_rmw("fadd", p, x, "r", ordering="acq_rel", single_thread=True)
    old = builder.atomic_rmw(llvm.capi.LLVMAtomicRMWBinOpAdd, p, a)
    pair = builder.cmpxchg(p, a, b, "xc", success="acq_rel", weak=True)
    fence = builder.fence("release", single_thread=True)
    assert (ld.ordering, ld.is_volatile, st.ordering, gep.no_wrap, gep.inbounds) == (
        "acquire", True, "release", {"nuw"}, False)
    assert (rmw.operation, rmw.ordering, rmw.single_thread, old.operation, old.ordering) == (
        "fadd", "acq_rel", True, "add", "monotonic")
    assert (pair.success_ordering, pair.failure_ordering, pair.weak) == ("acq_rel", "acquire", True)
    assert fence.ordering == "release"
    builder.ret()
    fn_i32.parent.verify()
    filecheck(str(fn_i32), """
; CHECK: %slot = alloca i32, i32 %a, align 16
; CHECK-NEXT: %l = load atomic volatile i32, ptr %p acquire, align 4
; CHECK-NEXT: store atomic i32 %l, ptr %slot release, align 4
; CHECK-NEXT: %g = getelementptr nuw i32, ptr %p, i32 %a
; CHECK-NEXT: %r = atomicrmw fadd ptr %p, double %x syncscope("singlethread") acq_rel, align 8
; CHECK-NEXT: atomicrmw add ptr %p, i32 %a monotonic, align 4
; CHECK-NEXT: %xc = cmpxchg weak ptr %p, i32 %a, i32 %b acq_rel acquire, align 4
; CHECK-NEXT: fence syncscope("singlethread") release
""")
    with pytest.raises(ValueError, match="at least monotonic"):
        builder.atomic_rmw("add", p, a, ordering="unordered")
    with pytest.raises(ValueError, match="a fence orders as one of"):
        builder.fence("monotonic")
    with pytest.raises(TypeError, match="the address must be a pointer"):
        builder.load(ctx.i32, a)


def test_builder_has_named_methods_only(builder):
    for name in ["add", "sub", "mul", "sdiv", "udiv", "srem", "urem", "shl", "lshr", "ashr", "and_", "or_", "xor",
                 "fadd", "fsub", "fmul", "fdiv", "frem", "fneg", "neg", "not_", "nsw_add", "nuw_add", "nsw_sub",
                 "nsw_mul", "exact_sdiv", "trunc", "zext", "sext", "fptrunc", "fpext", "fptoui", "fptosi", "uitofp",
                 "sitofp", "ptrtoint", "inttoptr", "bitcast", "addrspacecast", "cast", "binop", "icmp", "fcmp",
                 "select", "load", "store", "phi", "gep", "alloca", "atomic_rmw", "cmpxchg", "call", "fence",
                 "freeze"]:
        method = vars(llvm.Builder).get(name)
        assert callable(method), name
    assert "__getattr__" not in vars(llvm.Builder)
    with pytest.raises(AttributeError):
        builder.fmuladd  # noqa: B018


def test_binop_by_name_and_operand_kinds(fn_i32, builder, ctx):
    a, b, x, y, _ = fn_i32.args
    assert builder.binop("xor", a, b).opcode_name == "xor"
    frozen = builder.freeze(a, "fr")
    assert isinstance(frozen, llvm.FreezeInst) and frozen.value == a
    assert builder.neg(a, nsw=True).nsw and builder.not_(a).opcode_name == "xor"
    assert builder.binop("fmul", x, y, fast_math="contract").fast_math == {"contract"}
    with pytest.raises(ValueError, match="unknown binary operation 'pow'"):
        builder.binop("pow", a, b)
    with pytest.raises(TypeError, match="add takes integer operands, not double"):
        builder.add(x, y)
    with pytest.raises(TypeError, match="fadd takes floating-point operands, not i32"):
        builder.fadd(a, b)
    folded = builder.add(const(ctx.i32, 2), const(ctx.i32, 3), nsw=True)
    assert isinstance(folded, llvm.ConstantInt) and folded.value == 5


def test_declare_intrinsic(module, ctx):
    d = ctx.double
    fma = module.declare_intrinsic("llvm.fmuladd.f64", llvm.FunctionType.get(d, [d, d, d]))
    assert fma.name == "llvm.fmuladd.f64" and fma.intrinsic_id == llvm.intrinsic_id("llvm.fmuladd")
    assert module.declare_intrinsic("llvm.fmuladd.f64", llvm.FunctionType.get(d, [d, d, d])) == fma
    with pytest.raises(ValueError, match="not an LLVM intrinsic"):
        module.declare_intrinsic("llvm.no.such.thing", llvm.FunctionType.get(d, [d]))
    with pytest.raises(ValueError, match="is overloaded"):
        module.declare_intrinsic("llvm.fmuladd", llvm.FunctionType.get(d, [d, d, d]))
    with pytest.raises(TypeError, match="has type void"):
        module.declare_intrinsic("llvm.trap", llvm.FunctionType.get(d, []))
    assert llvm.intrinsic_name(0) is None and llvm.intrinsic_id("sqrt") == 0


def test_call_intrinsic_fields_and_tail(fn_i32, builder, module, ctx):
    x = fn_i32.args[2]
    g = module.add_function("g", llvm.FunctionType.get(ctx.double, [ctx.double]))
    plain = builder.call(g, [x], "p", tail=True)
    assert plain.intrinsic_id == 0 and plain.intrinsic_name is None and plain.is_tail_call
    plain.is_tail_call = False
    assert not plain.is_tail_call


def test_views_of_a_closed_module_or_erased_instruction_raise(ctx):
    m = llvm.Module.parse(PARSED, ctx)
    i = {inst.name or inst.opcode_name: inst for inst in m.functions["f"].instructions()}
    i["s"].replace_all_uses_with(llvm.Constant.null(ctx.i32))
    i["s"].erase()
    with pytest.raises(ValueError, match="was erased"):
        i["s"].nsw  # noqa: B018
    m.close()
    reads = [lambda: i["m"].fast_math, lambda: i["l"].ordering, lambda: i["g"].indices, lambda: i["k"].predicate,
             lambda: i["q"].intrinsic_id, lambda: i["r"].operation, lambda: i["x2"].weak, lambda: i["z"].nneg,
             lambda: i["v"].condition, lambda: i["d"].lhs]
    for read in reads:
        with pytest.raises(ValueError, match="closed"):
            read()
    with pytest.raises(ValueError, match="closed"):
        i["m"].fast_math = "fast"


def test_mistyped_operations_raise_instead_of_crashing_llvm(tmp_path):
    # icmp of two doubles and fcmp of two integers crashed a release libLLVM inside its constant folder.
    import subprocess
    import sys

    code = """
import gpuc.llvm as llvm
ctx = llvm.Context(); m = llvm.Module("m", ctx)
fn = m.add_function("f", llvm.FunctionType.get(ctx.void, [ctx.i32]))
b = llvm.Builder(ctx); b.position_at_end(fn.append_block("e"))
d, i = llvm.ConstantFP.get(ctx.double, 1.0), llvm.ConstantInt.get(ctx.i32, 1)
for build in (lambda: b.icmp("eq", d, d), lambda: b.fcmp("oeq", i, i), lambda: b.neg(d), lambda: b.fneg(i),
              lambda: b.shl(d, d), lambda: b.select(i, i, i), lambda: b.gep(ctx.i32, i, [i])):
    try:
        build()
    except TypeError as exc:
        print("TypeError:", exc)
print("DONE")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[-1] == "DONE" and len(lines) == 8 and all(line.startswith("TypeError:") for line in lines[:-1])


def test_flags_an_operation_cannot_carry_are_refused_and_leave_nothing(fn_i32, builder, ctx):
    # Setting nsw on an fadd (or nneg on a sext) through LLVM-C is undefined behaviour in a release libLLVM.
    a, b, x, y, _ = fn_i32.args
    with pytest.raises(TypeError, match="fadd has no 'nsw' flag"):
        builder.binop("fadd", x, y, nsw=True)
    with pytest.raises(TypeError, match="sext has no 'nneg' flag"):
        builder.cast("sext", a, ctx.i64, nneg=True)
    with pytest.raises(TypeError, match="cannot carry fast-math flags"):
        builder.binop("add", a, b, fast_math="fast")
    with pytest.raises(ValueError, match="unknown fast-math flag 'quick'"):
        builder.fadd(x, y, fast_math="quick")
    with pytest.raises(TypeError, match="unknown instruction flag 'volatile'"):
        builder.binop("add", a, b, volatile=True)
    assert len(fn_i32.entry_block.instructions) == 0


def test_loop_hints_refer_to_themselves(module, ctx, builder):
    # `!llvm.loop` is a node whose first operand is itself, then one node per hint: what the loop passes read
    fn, entry = define(module, "count", ctx.void, [ctx.i64])
    loop, done = fn.append_block("loop"), fn.append_block("done")
    builder.position_at_end(entry)
    builder.br(loop)
    builder.position_at_end(loop)
    i = builder.phi(ctx.i64, [(const(ctx.i64, 0), entry)], "i")
    step = builder.add(i, const(ctx.i64, 1), "step")
    i.add_incoming(step, loop)
    back = builder.cond_br(builder.icmp("ult", step, fn.args[0]), loop, done)
    builder.position_at_end(done)
    builder.ret()
    back.set_loop_hints("llvm.loop.unroll.runtime.disable", "llvm.loop.mustprogress")
    module.verify()
    filecheck(str(module), """
        CHECK: br i1 {{.*}}, label %loop, label %done, !llvm.loop [[LOOP:![0-9]+]]
        CHECK: [[LOOP]] = {{(distinct )?}}!{[[LOOP]], [[A:![0-9]+]], [[B:![0-9]+]]}
        CHECK-DAG: [[A]] = !{!"llvm.loop.unroll.runtime.disable"}
        CHECK-DAG: [[B]] = !{!"llvm.loop.mustprogress"}
    """)


def test_access_groups_declare_a_loop_parallel(module, ctx, builder):
    # for i < n: p[i + k] = p[i] + 1.0, with k unknown: LLVM vectorizes it only behind a run-time check of
    # the distance, unless every access is in a group the loop's `llvm.loop.parallel_accesses` names
    fn, entry = define(module, "shift", ctx.void, [ctx.ptr(), ctx.i64, ctx.i64])
    fn.attributes.add("target-cpu", llvm.host_cpu())
    p, n, k = fn.args
    loop, done = fn.append_block("loop"), fn.append_block("done")
    builder.position_at_end(entry)
    builder.br(loop)
    builder.position_at_end(loop)
    i = builder.phi(ctx.i64, [(const(ctx.i64, 0), entry)], "i")
    x = builder.load(ctx.float, builder.gep(ctx.float, p, [i]))
    store = builder.store(builder.fadd(x, llvm.ConstantFP.get(ctx.float, 1.0)),
                          builder.gep(ctx.float, p, [builder.add(i, k)]))
    step = builder.add(i, const(ctx.i64, 1), "step")
    i.add_incoming(step, loop)
    back = builder.cond_br(builder.icmp("ult", step, n), loop, done)
    builder.position_at_end(done)
    builder.ret()
    group, other = module.new_access_group(), module.new_access_group()
    x.set_access_group(group)
    store.set_access_group(group)
    back.set_loop_hints(("llvm.loop.vectorize.width", 4), parallel_accesses=group)
    module.verify()
    filecheck(str(module), """
        CHECK: load float, ptr {{.*}}, !llvm.access.group [[G:![0-9]+]]
        CHECK: store float {{.*}}, !llvm.access.group [[G]]
        CHECK: br i1 {{.*}}, !llvm.loop [[LOOP:![0-9]+]]
        CHECK-DAG: [[G]] = distinct !{}
        CHECK-DAG: [[LOOP]] = distinct !{[[LOOP]], [[W:![0-9]+]], [[P:![0-9]+]]}
        CHECK-DAG: [[W]] = !{!"llvm.loop.vectorize.width", i32 4}
        CHECK-DAG: [[P]] = !{!"llvm.loop.parallel_accesses", [[G]]}
    """)
    assert group.ref != other.ref  # each group is a node of its own
    llvm.initialize("X86")
    with llvm.Target.from_triple(llvm.host_triple()).machine(llvm.host_cpu(), llvm.host_features()) as tm:
        llvm.run_passes(module, "loop-vectorize", tm)
    text = str(module)
    assert "<4 x float>" in text  # the width asked for
    assert "found.conflict" not in text and "diff.check" not in text  # no run-time check of the distance


def test_a_nontemporal_store_is_written_past_the_caches(module, ctx, builder):
    # an aligned vector store marked !nontemporal becomes x86's movntps
    vec = llvm.VectorType.get(ctx.float, 4)
    fn, entry = define(module, "stream", ctx.void, [ctx.ptr(), vec])
    p, v = fn.args
    builder.position_at_end(entry)
    builder.store(v, p, align=16).set_nontemporal()
    builder.store(v, builder.gep(vec, p, [const(ctx.i64, 1)]), align=16)
    builder.ret()
    module.verify()
    filecheck(str(module), """
        CHECK: store <4 x float> %{{.*}}, ptr %{{.*}}, align 16, !nontemporal [[N:![0-9]+]]
        CHECK-NEXT: getelementptr
        CHECK-NEXT: store <4 x float> %{{[^!]*}}, align 16
        CHECK-NEXT: ret void
        CHECK: [[N]] = !{i32 1}
    """)
    llvm.initialize("X86")
    with llvm.Target.from_triple("x86_64-pc-linux-gnu").machine("x86-64", "") as tm:
        module.triple = "x86_64-pc-linux-gnu"
        asm = bytes(tm.emit(module, "asm")).decode()
    assert asm.count("movntps") == 1 and asm.count("movaps") == 1
