"""Values: constants, names, uses and users, RAUW, operands, instructions and calls."""

import math

import pytest

import gpuc.llvm as llvm

from support.llvm_testing import filecheck

SRC = """
define i32 @callee(i32 %a, i32 %b) {
  %s = sub i32 %a, %b
  ret i32 %s
}

define i32 @caller(i32 %x, ptr %fp) {
entry:
  %r = call i32 @callee(i32 %x, i32 7)
  %q = call i32 %fp(i32 %r, i32 1)
  %t = mul i32 %r, %q
  ret i32 %t
}
"""


@pytest.fixture
def m(ctx):
    with llvm.Module.parse(SRC, ctx) as mod:
        yield mod


def insts(m, name="caller"):
    return list(m.functions[name].instructions())


# -- constants -----------------------------------------------------------------------------

@pytest.mark.parametrize("bits, given, signed, unsigned", [
    (8, -1, -1, 255), (8, 255, -1, 255), (8, 127, 127, 127), (8, -128, -128, 128),
    (1, 1, -1, 1), (1, 0, 0, 0), (32, -5, -5, 2**32 - 5),
    (64, 2**63 - 1, 2**63 - 1, 2**63 - 1), (64, -2**63, -2**63, 2**63), (64, 2**64 - 1, -1, 2**64 - 1),
    (128, -1, -1, 2**128 - 1), (128, 2**100 + 3, 2**100 + 3, 2**100 + 3),
])
def test_constant_int_values(ctx, bits, given, signed, unsigned):
    c = llvm.ConstantInt.get(ctx.int_type(bits), given)
    assert isinstance(c, llvm.ConstantInt) and c.is_constant
    assert c.type == ctx.int_type(bits)
    assert (c.value, c.zext_value) == (signed, unsigned)


@pytest.mark.parametrize("bits, value", [(8, 256), (8, -129), (1, 2), (32, 2**32), (128, 2**128)])
def test_constant_int_out_of_range(ctx, bits, value):
    with pytest.raises(ValueError, match=f"does not fit in i{bits}"):
        llvm.ConstantInt.get(ctx.int_type(bits), value)


def test_constant_int_printing_and_uniquing(ctx):
    assert str(llvm.ConstantInt.get(ctx.i8, 255, signed=False)) == "i8 -1"
    assert str(llvm.ConstantInt.get(ctx.i1, 1)) == "i1 true"
    assert llvm.ConstantInt.get(ctx.i32, 7) == llvm.ConstantInt.get(ctx.i32, 7)


@pytest.mark.parametrize("attr, value, expected", [
    ("double", 1.5, 1.5), ("double", -0.0, -0.0), ("float", 0.1, 0.10000000149011612),
    ("half", 2.0, 2.0), ("double", math.inf, math.inf),
])
def test_constant_fp(ctx, attr, value, expected):
    c = llvm.ConstantFP.get(getattr(ctx, attr), value)
    assert isinstance(c, llvm.ConstantFP)
    assert c.value == expected and math.copysign(1, c.value) == math.copysign(1, expected)


def test_constant_fp_nan(ctx):
    assert math.isnan(llvm.ConstantFP.get(ctx.double, math.nan).value)


def test_null_undef_poison_all_ones(ctx):
    st = ctx.struct_type([ctx.i32, ctx.double])
    assert isinstance(llvm.Constant.null(ctx.i32), llvm.ConstantInt)
    assert llvm.Constant.null(ctx.i32).is_null and llvm.Constant.null(ctx.i32).value == 0
    assert str(llvm.Constant.null(ctx.ptr())) == "ptr null" and llvm.Constant.null(ctx.ptr()).is_null
    assert str(llvm.Constant.null(st)) == "{ i32, double } zeroinitializer"
    assert isinstance(llvm.Constant.undef(ctx.i32), llvm.UndefValue)
    assert str(llvm.Constant.undef(st)) == "{ i32, double } undef"
    poison = llvm.Constant.poison(ctx.i64)
    assert isinstance(poison, llvm.PoisonValue) and str(poison) == "i64 poison" and not poison.is_null
    assert llvm.Constant.all_ones(ctx.int_type(16)).zext_value == 0xFFFF
    assert str(llvm.Constant.all_ones(llvm.VectorType.get(ctx.i8, 2))) == "<2 x i8> splat (i8 -1)"


@pytest.mark.parametrize("make, error", [
    (lambda c: llvm.Constant.null(c.void), "has no null value"),
    (lambda c: llvm.Constant.null(llvm.FunctionType.get(c.void)), "has no null value"),
    (lambda c: llvm.Constant.all_ones(c.ptr()), "all_ones needs"),
    (lambda c: llvm.ConstantFP.get(c.i32, 1.0), "needs a floating-point type"),
    (lambda c: llvm.ConstantInt.get(c.double, 1), "needs an integer type"),
    (lambda c: llvm.Constant.array(c.i32, [llvm.ConstantInt.get(c.i64, 1)]), "element 0 has type i64"),
    (lambda c: llvm.Constant.vector([llvm.ConstantInt.get(c.i32, 1), llvm.ConstantInt.get(c.i64, 1)]),
     "element 1 has type i64"),
])
def test_constants_of_the_wrong_type(ctx, make, error):
    # Regression: LLVM (asserts off) crashed or built a mistyped constant for each of these.
    with pytest.raises(TypeError, match=error):
        make(ctx)


def test_constant_string(ctx):
    s = llvm.Constant.string(ctx, "hi")
    assert str(s.type) == "[3 x i8]" and str(s) == '[3 x i8] c"hi\\00"'
    raw = llvm.Constant.string(ctx, b"a\x00b", null_terminate=False)
    assert str(raw) == '[3 x i8] c"a\\00b"'


def test_constant_struct_and_array(ctx):
    one, two = llvm.ConstantInt.get(ctx.i32, 1), llvm.ConstantFP.get(ctx.double, 2.0)
    s = llvm.Constant.struct(ctx, [one, two])
    assert s.type == ctx.struct_type([ctx.i32, ctx.double])
    assert list(s.operands) == [one, two]
    packed = llvm.Constant.struct(ctx, [one, two], packed=True)
    assert packed.type.is_packed
    arr = llvm.Constant.array(ctx.i32, [llvm.ConstantInt.get(ctx.i32, i) for i in range(3)])
    assert str(arr) == "[3 x i32] [i32 0, i32 1, i32 2]"
    assert arr.type == llvm.ArrayType.get(ctx.i32, 3)
    nested = llvm.Constant.array(s.type, [s, llvm.Constant.null(s.type)])
    assert str(nested.type) == "[2 x { i32, double }]"


def test_constant_vector(ctx):
    lanes = llvm.Constant.vector([llvm.ConstantInt.get(ctx.i32, i) for i in (2, 0, 1)])
    assert str(lanes) == "<3 x i32> <i32 2, i32 0, i32 1>"
    assert lanes.type == llvm.VectorType.get(ctx.i32, 3)
    half = llvm.Constant.vector([llvm.ConstantFP.get(ctx.double, 0.5)])
    assert str(half.type) == "<1 x double>"
    with pytest.raises(ValueError, match="at least one"):
        llvm.Constant.vector([])


def test_constant_elements(ctx):
    """`element(k)`: lane k of a constant vector (of a zeroinitializer too), a struct's field; None past the end."""
    lanes = llvm.Constant.vector([llvm.ConstantInt.get(ctx.i32, i) for i in (2, 0, 1)])
    assert [lanes.element(k).value for k in range(3)] == [2, 0, 1]
    assert lanes.element(3) is None
    zero = llvm.Constant.null(llvm.VectorType.get(ctx.double, 4))
    assert zero.element(0) == zero.element(3) == llvm.Constant.null(ctx.double)
    pair = llvm.Constant.struct(ctx, [llvm.ConstantInt.get(ctx.i64, 7), llvm.ConstantFP.get(ctx.double, 0.5)])
    assert pair.element(0).value == 7 and pair.element(1).type == ctx.double


# -- names, uses, users, RAUW -----------------------------------------------------------------

def test_value_names(m):
    r = insts(m)[0]
    assert r.name == "r" and repr(r) == "<CallInst %r>"
    r.name = "result"
    assert "%result = call i32 @callee" in str(m)
    r.name = ""
    assert r.name == "" and "%0 = call i32 @callee" in str(m)
    assert repr(m.functions["callee"]) == "<Function @callee>"
    ret = insts(m)[-1]
    with pytest.raises(ValueError, match="void"):
        ret.name = "x"  # LLVM would print `%x = ret ...`, which does not parse


def test_uses_and_users(m):
    r, q, t, ret = insts(m)
    assert len(r.uses) == 2 and r.uses
    assert {u.user for u in r.uses} == {q, t}
    assert all(u.value == r for u in r.uses)
    assert set(r.users) == {q, t}
    assert not ret.uses and len(ret.uses) == 0
    callee = m.functions["callee"]
    assert callee.users == [r]


def test_replace_all_uses_with(m, ctx):
    r, q, t, _ = insts(m)
    seven = llvm.ConstantInt.get(ctx.i32, 7)
    r.replace_all_uses_with(seven)
    assert not r.uses
    assert list(t.operands)[0] == seven and q.args[0] == seven
    r.erase()
    m.verify()


def test_replace_all_uses_with_type_mismatch(m, ctx):
    r = insts(m)[0]
    before = str(m)
    with pytest.raises(TypeError, match="does not match"):
        r.replace_all_uses_with(llvm.ConstantInt.get(ctx.i64, 1))
    with pytest.raises(ValueError):
        r.replace_all_uses_with(r)
    assert str(m) == before


# -- operands ---------------------------------------------------------------------------------

def test_operands_get_and_set(m, ctx):
    r, q, t, _ = insts(m)
    assert len(t.operands) == 2 and list(t.operands) == [r, q]
    assert t.operands[-1] == q
    with pytest.raises(IndexError):
        t.operands[2]
    t.operands[1] = llvm.ConstantInt.get(ctx.i32, 3)
    assert str(t).strip() == "%t = mul i32 %r, 3"
    t.operands = [q, r]
    assert str(t).strip() == "%t = mul i32 %q, %r"
    with pytest.raises(ValueError, match="expected 2 operands"):
        t.operands = [q]
    m.verify()


# -- instructions -----------------------------------------------------------------------------

def test_instruction_identity(m):
    r, q, t, ret = insts(m)
    fn = m.functions["caller"]
    assert (t.opcode, t.opcode_name) == (llvm.capi.LLVMMul, "mul")
    assert [i.opcode_name for i in (r, ret)] == ["call", "ret"]
    assert llvm.opcode_name(llvm.capi.LLVMGetElementPtr) == "getelementptr"
    assert t.parent == fn.entry_block and t.function == fn
    assert ret.is_terminator and not t.is_terminator
    assert (t.previous, t.next) == (q, ret) and r.previous is None and ret.next is None
    assert fn.entry_block.terminator == ret


def test_erase_with_uses_leaves_ir_intact(m):
    r = insts(m)[0]
    before = str(m)
    with pytest.raises(ValueError, match="still has 2 use"):
        r.erase()
    assert str(m) == before
    m.verify()


def test_erase_and_remove(m, builder):
    r, q, t, ret = insts(m)
    ret.operands[0] = r
    t.erase()
    assert [i.name for i in insts(m)] == ["r", "q", ""]
    q.remove()
    assert q.parent is None and len(m.functions["caller"].entry_block.instructions) == 2
    with pytest.raises(ValueError, match="not in a block"):
        q.remove()
    builder.position_before(ret)
    builder.insert(q)
    assert q.name == "q" and q.next == ret  # re-inserted with its name
    m.verify()


def test_metadata_copied_from_one_instruction_to_another(ctx):
    mod = llvm.Module.parse("""
define void @f(ptr %p, ptr %q) {
  %v = load i32, ptr %p, !noalias !0
  store i32 %v, ptr %q
  ret void
}
!0 = !{!1}
!1 = distinct !{!1, !2}
!2 = distinct !{!2}
""", ctx)
    load, store, _ = list(mod.functions["f"].instructions())
    kind = ctx.md_kind_id("noalias")
    store.set_metadata(kind, load.get_metadata(kind))
    assert "store i32 %v, ptr %q, align 4, !noalias !0" in str(mod)
    store.set_metadata(kind, None)
    assert "store i32 %v, ptr %q, align 4\n" in str(mod)
    mod.verify()
    mod.close()


def test_clone_and_insert(m, builder):
    r, q, t, ret = insts(m)
    c = t.clone()
    assert c.parent is None and c != t and c.operands[0] == r
    builder.position_before(ret)
    builder.insert(c, "again")
    ret.operands[0] = c
    with pytest.raises(ValueError, match="already in a block"):
        builder.insert(t)
    m.verify()
    filecheck(str(m.functions["caller"]), """
; CHECK: %t = mul i32 %r, %q
; CHECK-NEXT: %again = mul i32 %r, %q
; CHECK-NEXT: ret i32 %again
""")
    t.clone().erase()  # an unparented clone is deleted, not unlinked
    m.verify()


def test_call_direct_and_indirect(m, ctx):
    r, q, _, _ = insts(m)
    caller = m.functions["caller"]
    assert isinstance(r, llvm.CallInst) and isinstance(q, llvm.CallInst)
    assert r.callee == m.functions["callee"] and isinstance(r.callee, llvm.Function)
    assert r.args == [caller.args[0], llvm.ConstantInt.get(ctx.i32, 7)]
    assert str(r.called_function_type) == "i32 (i32, i32)"
    assert q.callee == caller.args[1] and isinstance(q.callee, llvm.Argument)
    assert q.args == [r, llvm.ConstantInt.get(ctx.i32, 1)]
    assert q.calling_convention == 0 and not r.is_tail_call
    q.callee = m.functions["callee"]  # make the indirect call direct
    assert "call i32 @callee(i32 %r, i32 1)" in str(q)
    m.verify()


def test_argument_parent(m):
    caller = m.functions["caller"]
    x, fp = caller.args
    assert isinstance(x, llvm.Argument) and x.parent == caller
    assert (x.name, fp.type) == ("x", m.context.ptr())
