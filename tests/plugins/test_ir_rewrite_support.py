"""The gpuc.llvm additions the context plugin needs: moving blocks between functions, copying attributes."""

from __future__ import annotations

import pytest

from gpuc.llvm import Builder, Context, FunctionType, Module

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
