"""Functions, basic blocks and global variables: linkage, attributes, conventions, deletion."""

import pytest

import gpuc.llvm as llvm

from support.llvm_testing import define, filecheck

SRC = """
@table = internal constant [2 x i32] [i32 1, i32 2], align 16
@extern_var = external global i64

declare double @sqrt(double)

define i32 @pick(i1 %c, i32 %a, i32 %b) {
entry:
  br i1 %c, label %then, label %join
then:
  br label %join
join:
  %r = phi i32 [ %a, %then ], [ %b, %entry ]
  ret i32 %r
}

define i32 @user(i32 %x) {
  %r = call i32 @pick(i1 true, i32 %x, i32 0)
  ret i32 %r
}
"""


@pytest.fixture
def m(ctx):
    with llvm.Module.parse(SRC, ctx) as mod:
        yield mod


def test_function_args_and_blocks(m, ctx):
    pick = m.functions["pick"]
    assert [a.name for a in pick.args] == ["c", "a", "b"]
    assert [a.type for a in pick.args] == [ctx.i1, ctx.i32, ctx.i32]
    assert pick.return_type == ctx.i32 and str(pick.function_type) == "i32 (i1, i32, i32)"
    assert len(pick.blocks) == 3
    assert [b.name for b in pick.blocks] == ["entry", "then", "join"]
    assert pick.blocks[-1].name == "join" and pick.entry_block == pick.blocks[0]
    assert all(b.parent == pick for b in pick.blocks)
    assert [i.opcode_name for i in pick.instructions()] == ["br", "br", "phi", "ret"]
    assert list(m.functions["sqrt"].blocks) == [] and m.functions["sqrt"].entry_block is None


def test_block_instruction_views(m):
    join = m.functions["pick"].blocks[2]
    phi, ret = list(join.instructions)
    assert isinstance(phi, llvm.PHINode) and len(join.instructions) == 2
    assert join.instructions.first == phi and join.instructions.last == ret
    assert list(reversed(join.instructions)) == [ret, phi]
    assert [(v.name, b.name) for v, b in phi.incoming] == [("a", "then"), ("b", "entry")]
    entry_br = m.functions["pick"].entry_block.terminator
    assert isinstance(entry_br, llvm.BranchInst) and entry_br.is_conditional
    assert [b.name for b in entry_br.successors] == ["then", "join"]
    assert entry_br.condition == m.functions["pick"].args[0]
    assert len(join.uses) == 2  # both branches


def test_block_rename_move_remove_erase(m):
    pick = m.functions["pick"]
    entry, then, join = pick.blocks
    then.name = "taken"
    assert "taken:" in str(pick)
    join.move_after(entry)
    assert [b.name for b in pick.blocks] == ["entry", "join", "taken"]
    with pytest.raises(ValueError, match="still has"):
        then.erase()
    m.verify()
    # A block nothing branches to can be erased.
    extra = pick.append_block("dead")
    with llvm.Builder(m.context) as b:
        b.position_at_end(extra).unreachable()
    extra.remove()
    assert extra.parent is None and len(pick.blocks) == 3
    with pytest.raises(ValueError, match="not in a function"):
        extra.erase()
    with pytest.raises(ValueError, match="not in a function"):
        extra.remove()
    spare = pick.append_block("spare")
    spare.erase()
    assert len(pick.blocks) == 3
    m.verify()


@pytest.mark.parametrize("linkage", sorted(llvm.LINKAGES))
def test_linkage_set_get(m, linkage):
    fn = m.functions["user"]
    fn.linkage = linkage
    assert fn.linkage == linkage


def test_linkage_of_parsed_globals_and_invalid(m):
    assert m.globals["table"].linkage == "internal"
    assert m.functions["sqrt"].linkage == "external"
    with pytest.raises(ValueError, match="unknown linkage 'bogus'"):
        m.functions["user"].linkage = "bogus"
    assert m.functions["user"].linkage == "external"


def test_enum_and_string_attributes(m):
    fn = m.functions["user"]
    attrs = fn.attributes
    assert len(attrs) == 0 and "noinline" not in attrs
    attrs.add("noinline")
    attrs.add("nounwind")
    attrs.add("gpuc-kernel", "true")
    assert "noinline" in attrs and "nounwind" in attrs and "gpuc-kernel" in attrs
    assert "alwaysinline" not in attrs and "gpuc-other" not in attrs
    assert len(attrs) == 3
    filecheck(str(m), """
; CHECK: define i32 @user(i32 %x) #[[A:[0-9]+]]
; CHECK: attributes #[[A]] = { noinline nounwind "gpuc-kernel"="true" }
""")
    attrs.remove("noinline")
    attrs.remove("gpuc-kernel")
    assert "noinline" not in attrs and "gpuc-kernel" not in attrs and len(attrs) == 1
    with pytest.raises(ValueError, match="unknown LLVM attribute"):
        attrs.add("not-an-attribute-kind", 1)
    m.verify()


def test_parameter_and_return_attributes(m):
    pick = m.functions["pick"]
    pick.param_attributes(0).add("zeroext")
    pick.return_attributes.add("noundef")
    assert "zeroext" in pick.param_attributes(0) and "zeroext" not in pick.param_attributes(1)
    assert "define noundef i32 @pick(i1 zeroext %c" in str(pick)
    m.verify()


def test_integer_and_type_attributes_round_trip(module, ctx):
    fn = module.add_function("g", llvm.FunctionType.get(ctx.void, [ctx.ptr(), ctx.ptr()]))
    pair = ctx.struct_type([ctx.i32, ctx.i64])
    fn.param_attributes(0).add("align", 16)
    fn.param_attributes(0).add("dereferenceable", 8)
    fn.param_attributes(1).add("byval", pair)
    with pytest.raises(ValueError, match="needs a type"):
        fn.param_attributes(1).add("sret")  # would print IR that does not parse
    with pytest.raises(ValueError, match="does not take a type"):
        fn.param_attributes(1).add("noalias", pair)
    assert "declare void @g(ptr align 16 dereferenceable(8), ptr byval({ i32, i64 }))" in str(module)
    llvm.Module.parse(str(module), ctx).verify()


@pytest.mark.parametrize("cc", sorted(llvm.CALLING_CONVENTIONS))
def test_calling_convention_by_name(m, cc):
    fn = m.functions["sqrt"]
    fn.calling_convention = cc
    assert fn.calling_convention == cc


def test_calling_convention_numbers_and_errors(m):
    fn = m.functions["pick"]
    assert fn.calling_convention == "c"
    fn.calling_convention = llvm.CALLING_CONVENTIONS["ptx_kernel"]
    assert fn.calling_convention == "ptx_kernel" and "ptx_kernel" in str(fn)
    fn.calling_convention = 100  # x86_vectorcall or so: no name in the table
    assert fn.calling_convention == "cc100"
    with pytest.raises(ValueError, match="unknown calling convention"):
        fn.calling_convention = "pascal"


def test_is_declaration_and_delete_body(m):
    pick = m.functions["pick"]
    assert m.functions["sqrt"].is_declaration and not pick.is_declaration
    pick.delete_body()
    assert pick.is_declaration and len(pick.blocks) == 0
    assert "declare i32 @pick(i1, i32, i32)" in str(m)
    m.verify()  # @user still calls the declaration


def test_delete_body_with_self_loop(ctx):
    # Regression: blocks were deleted while branches in other blocks still named them.
    m = llvm.Module.parse("define void @spin() {\nentry:\n  br label %l\nl:\n  br label %l\n}\n", ctx)
    m.functions["spin"].delete_body()
    assert m.functions["spin"].is_declaration
    m.verify()


def test_function_erase(m):
    with pytest.raises(ValueError, match="still has 1 use"):
        m.functions["pick"].erase()
    m.functions["user"].erase()
    m.functions["pick"].erase()
    assert [f.name for f in m.functions] == ["sqrt"]
    m.verify()


def test_global_variable_properties(m, ctx):
    table = m.globals["table"]
    assert isinstance(table, llvm.GlobalVariable)
    assert table.is_global_constant and not table.is_declaration
    assert str(table.initializer) == "[2 x i32] [i32 1, i32 2]"
    assert table.alignment == 16 and table.value_type == llvm.ArrayType.get(ctx.i32, 2)
    assert not table.thread_local and table.parent == m
    assert repr(table) == "<GlobalVariable @table>"
    ext = m.globals["extern_var"]
    assert ext.is_declaration and ext.initializer is None


def test_global_variable_mutation(module, ctx):
    g = module.add_global(ctx.i32, "count")
    assert g.initializer is None and g.is_declaration and not g.is_global_constant
    g.initializer = llvm.ConstantInt.get(ctx.i32, 5)
    g.is_global_constant = True
    g.linkage = "internal"
    g.section = ".gpuc"
    g.alignment = 8
    assert g.initializer.value == 5 and g.section == ".gpuc"
    assert str(g).strip() == '@count = internal constant i32 5, section ".gpuc", align 8'
    g.is_global_constant = False
    g.initializer = None
    g.linkage = "external"
    assert g.is_declaration and str(g).startswith("@count = external")  # (dso_local stays from internal)
    assert " global i32" in str(g)
    module.verify()
    g.erase()
    assert "count" not in module.globals


def test_global_erase_with_uses(module, builder, ctx):
    g = module.add_global(ctx.i32, "g")
    g.initializer = llvm.Constant.null(ctx.i32)
    fn, entry = define(module, "read", ctx.i32)
    builder.position_at_end(entry)
    builder.ret(builder.load(ctx.i32, g))
    with pytest.raises(ValueError, match="still has 1 use"):
        g.erase()
    module.verify()
