"""The gpuc.llvm additions the context plugin needs: moving blocks between functions, copying attributes."""

from __future__ import annotations

import pytest

from gpuc.llvm import Builder, CallInst, Context, FunctionType, Module

IR = """\
define internal i32 @f(i32 noundef %x) noinline nounwind {
entry:
  %c = icmp sgt i32 %x, 0
  br i1 %c, label %pos, label %neg
pos:
  ret i32 %x
neg:
  %y = sub i32 0, %x
  ret i32 %y
}
"""


@pytest.fixture
def module():
    with Context() as ctx:
        m = Module.parse(IR, ctx)
        yield m
        m.close()


def test_append_existing_block_moves_a_body_between_functions(module):
    old = module.functions["f"]
    i32 = module.context.i32
    new = module.add_function("g", FunctionType.get(i32, [i32, i32]))
    old.args[0].replace_all_uses_with(new.args[0])
    for block in list(old.blocks):
        assert new.append_existing_block(block) == block
    assert len(old.blocks) == 0 and old.is_declaration
    assert [b.name for b in new.blocks] == ["entry", "pos", "neg"]
    assert all(inst.function == new for inst in new.instructions())
    old.erase()  # an internal function without a body is invalid: erase before verifying
    module.verify()
    new.name = "f"
    assert "define i32 @f(i32 %0, i32 %1)" in str(module)


def test_append_existing_block_takes_removed_blocks(module):
    fn = module.functions["f"]
    neg = fn.blocks[2]
    neg.remove()
    assert neg.parent is None
    fn.append_existing_block(neg)
    assert neg.parent == fn and fn.blocks[2] == neg
    module.verify()


def test_move_before_makes_a_new_entry_block(module):
    fn = module.functions["f"]
    old_entry = fn.entry_block
    guard = fn.append_block("guard")
    guard.move_before(old_entry)
    assert fn.entry_block == guard
    with Builder(module.context) as b:
        b.position_at_end(guard)
        b.br(old_entry)
    module.verify()


def test_attributes_copy_from(module):
    old = module.functions["f"]
    new = module.add_function("g", old.function_type)
    new.attributes.copy_from(old.attributes)
    new.param_attributes(0).copy_from(old.param_attributes(0))
    assert "noinline" in new.attributes and "nounwind" in new.attributes
    assert "noundef" in new.param_attributes(0)
    assert len(new.return_attributes) == 0
    new.return_attributes.copy_from(old.return_attributes)  # nothing to copy is fine
    assert len(new.return_attributes) == 0


def test_call_site_attributes_copy_from():
    # Rebuilding an indirect call with further arguments (the launch context) keeps what the call
    # site said of its own arguments and result: code generation reads it when the callee is unknown.
    ir = """\
define i1 @k(ptr %p, i1 %b) {
  %r = call zeroext i1 %p(i1 zeroext %b, i32 noundef 3) cold
  ret i1 %r
}
"""
    with Context() as ctx:
        m = Module.parse(ir, ctx)
        fn = m.functions["k"]
        old = next(i for i in fn.instructions() if isinstance(i, CallInst))
        with Builder(ctx) as b:
            b.position_before(old)
            fnty = FunctionType.get(ctx.i1, [ctx.i1, ctx.i32, ctx.ptr()])
            new = b.call(old.callee, [*old.args, fn.args[0]], fnty=fnty)
        assert "zeroext" not in new.param_attributes(0)
        for i in range(2):
            new.param_attributes(i).copy_from(old.param_attributes(i))
        new.return_attributes.copy_from(old.return_attributes)
        new.attributes.copy_from(old.attributes)
        assert "zeroext" in new.param_attributes(0) and "noundef" in new.param_attributes(1)
        assert "zeroext" in new.return_attributes and "cold" in new.attributes
        assert len(new.param_attributes(2)) == 0
        with pytest.raises(TypeError):
            new.param_attributes(0).copy_from(fn.param_attributes(0))
        old.replace_all_uses_with(new)
        old.erase()
        m.verify()
        assert "call zeroext i1 %p(i1 zeroext %b, i32 noundef 3, ptr %p) #" in str(m)
        m.close()


def test_string_metadata_round_trips_and_is_none_when_absent():
    # The frontend marks calls through pointers with where they are (abi.SITE_METADATA); validation
    # reads it back to locate a call that a target cannot make.
    with Context() as ctx:
        m = Module.parse("define i64 @k(ptr %p) {\n  %r = call i64 %p(i64 1)\n  ret i64 %r\n}\n", ctx)
        call = next(i for i in m.functions["k"].instructions() if isinstance(i, CallInst))
        assert call.string_metadata("gpuc.site") is None
        call.set_string_metadata("gpuc.site", "dir/kernels.py:12:7")
        assert call.string_metadata("gpuc.site") == "dir/kernels.py:12:7"
        assert call.string_metadata("gpuc.other") is None
        m.verify()
        assert '!gpuc.site !0' in str(m) and '!0 = !{!"dir/kernels.py:12:7"}' in str(m)
        m.close()
