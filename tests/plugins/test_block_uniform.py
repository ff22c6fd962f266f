"""Which values of a kernel with barriers every work item of a block holds alike (gpuc/plugins/block_uniform.py):
phis where items may come in by different edges vary, phis after the arms of every varying branch met again
do not. `@tid` stands for the work item's index (varying), `@n` for a value every item reads alike."""

from __future__ import annotations

import pytest

import gpuc.llvm as llvm
from gpuc.plugins.block_uniform import uniform_values

_DECLS = "declare i64 @tid()\ndeclare i64 @n()\n"


def _uniform_names(body: str) -> set[str]:
    module = llvm.Module.parse(_DECLS + body)
    module.verify()
    fn = module.functions["f"]
    found = uniform_values(fn, lambda call: call.callee is not None and call.callee.name == "n")
    return {inst.name for inst in found if inst.name}


# A tile loop whose trip count every item reads alike, peeled once, with an `if` on the item's index in
# the body (a tiled matmul's bounds test): the arms meet inside the loop, so every item leaves it at the
# same iteration, and the counter's value after the loop (a phi of the peeled exit and the loop's exit)
# is the same in every item.
_PEELED = """
define i64 @f(ptr %p) {
entry:
  %t = call i64 @tid()
  %n = call i64 @n()
  %cond = icmp slt i64 %t, 5
  br i1 %cond, label %peel.then, label %peel.end
peel.then:
  store i64 1, ptr %p
  br label %peel.end
peel.end:
  %more = icmp sgt i64 %n, 1
  br i1 %more, label %loop, label %exit
loop:
  %k = phi i64 [ 1, %peel.end ], [ %k.next, %latch ]
  %c2 = icmp slt i64 %t, %k
  br i1 %c2, label %then, label %latch
then:
  store i64 %k, ptr %p
  br label %latch
latch:
  %k.next = add i64 %k, 1
  %again = icmp slt i64 %k.next, %n
  br i1 %again, label %loop, label %loop.exit
loop.exit:
  %k.last = phi i64 [ %k.next, %latch ]
  br label %exit
exit:
  %count = phi i64 [ 1, %peel.end ], [ %k.last, %loop.exit ]
  %flag = phi i1 [ false, %peel.end ], [ true, %loop.exit ]
  %twice = mul i64 %count, 2
  ret i64 %twice
}
"""


def test_the_count_after_a_loop_whose_varying_ifs_meet_inside_it_is_uniform():
    names = _uniform_names(_PEELED)
    assert {"n", "more", "k", "k.next", "again", "k.last", "count", "flag", "twice"} <= names
    assert not {"t", "cond", "c2"} & names


# The same phi, but items pick its edge by their index: it varies, and so does what is computed from it.
_DIVERGENT_JOIN = """
define i64 @f(ptr %p) {
entry:
  %t = call i64 @tid()
  %n = call i64 @n()
  %cond = icmp slt i64 %t, %n
  br i1 %cond, label %a, label %b
a:
  br label %join
b:
  br label %join
join:
  %v = phi i64 [ 1, %a ], [ 2, %b ]
  %w = add i64 %v, %n
  ret i64 %w
}
"""


def test_a_phi_where_the_arms_of_a_varying_branch_meet_varies():
    names = _uniform_names(_DIVERGENT_JOIN)
    assert "n" in names
    assert not {"v", "w"} & names


# A uniform choice inside one arm of a varying branch, its phi before that branch's arms meet: taken for
# varying (the analysis errs that way); a uniform choice after the meet: uniform.
_NESTED = """
define i64 @f(ptr %p) {
entry:
  %t = call i64 @tid()
  %n = call i64 @n()
  %cond = icmp slt i64 %t, 3
  br i1 %cond, label %arm, label %meet
arm:
  %u = icmp sgt i64 %n, 7
  br i1 %u, label %arm.a, label %arm.b
arm.a:
  br label %arm.join
arm.b:
  br label %arm.join
arm.join:
  %inner = phi i64 [ 1, %arm.a ], [ 2, %arm.b ]
  store i64 %inner, ptr %p
  br label %meet
meet:
  %u2 = icmp sgt i64 %n, 9
  br i1 %u2, label %after.a, label %after.b
after.a:
  br label %after
after.b:
  br label %after
after:
  %outer = phi i64 [ 3, %after.a ], [ 4, %after.b ]
  ret i64 %outer
}
"""


def test_a_uniform_choice_counts_as_uniform_only_after_the_varying_arms_met():
    names = _uniform_names(_NESTED)
    assert {"u", "u2", "outer"} <= names
    assert "inner" not in names


# A loop items leave at different iterations (its exit tests the item's index): what it computes varies
# where it is used after it, and so does a phi of its exits.
_DIVERGENT_LOOP = """
define i64 @f(ptr %p) {
entry:
  %t = call i64 @tid()
  %n = call i64 @n()
  br label %loop
loop:
  %k = phi i64 [ 0, %entry ], [ %k.next, %latch ]
  %early = icmp eq i64 %k, %t
  br i1 %early, label %out.early, label %latch
latch:
  %k.next = add i64 %k, 1
  %again = icmp slt i64 %k.next, %n
  br i1 %again, label %loop, label %out.late
out.early:
  br label %exit
out.late:
  br label %exit
exit:
  %where = phi i64 [ %k, %out.early ], [ %n, %out.late ]
  %which = phi i1 [ true, %out.early ], [ false, %out.late ]
  ret i64 %where
}
"""


def test_what_a_loop_items_leave_apart_computes_varies_after_it():
    names = _uniform_names(_DIVERGENT_LOOP)
    assert "n" in names
    assert not {"where", "which"} & names


@pytest.mark.parametrize("body", [_PEELED, _DIVERGENT_JOIN, _NESTED, _DIVERGENT_LOOP])
def test_the_index_and_what_it_decides_are_never_uniform(body):
    names = _uniform_names(body)
    assert "t" not in names and "cond" not in names
