"""Liveness of views: closed owners, erased objects and values linked across modules raise ValueError."""

import gc

import pytest

import gpuc.llvm as llvm

SRC = """
@g = global i64 7
define i64 @f(i64 %n) {
entry:
  %a = add i64 %n, 1
  %b = mul i64 %a, 2
  br label %next
next:
  %c = call i64 @h(i64 %b)
  ret i64 %c
}
define internal i64 @h(i64 %x) {
  ret i64 %x
}
"""


@pytest.fixture
def m(ctx):
    with llvm.Module.parse(SRC, ctx) as module:
        yield module


def insts(fn):
    return {i.name or i.opcode_name: i for i in fn.instructions()}


# -- closed owners -------------------------------------------------------------------------------

def views_of(module):
    f = module.functions["f"]
    entry = f.entry_block
    add = insts(f)["a"]
    return {"function": f, "block": entry, "instruction": add, "argument": f.args[0], "use": next(iter(add.uses)),
            "global": module.globals["g"], "parent": f.parent, "blocks": f.blocks, "uses": add.uses}


def every_use(v):
    return [lambda: str(v["function"]), lambda: list(v["blocks"]), lambda: v["function"].erase(),
            lambda: list(v["uses"]), lambda: v["block"].name, lambda: v["instruction"].opcode,
            lambda: v["argument"].name, lambda: v["use"].user, lambda: v["global"].initializer,
            lambda: str(v["parent"]), lambda: v["instruction"].erase()]


def test_views_of_a_closed_module_raise(ctx):
    # Regression: a plugin's Function kept after the compile segfaulted on str(), .blocks, .erase().
    module = llvm.Module.parse(SRC, ctx)
    v = views_of(module)
    module.close()
    for use in every_use(v):
        with pytest.raises(ValueError, match="the module '<string>' was closed"):
            use()
    assert not v["function"].alive and repr(v["function"]) == "<Function (dead)>"
    assert ctx.i64.kind == llvm.capi.LLVMIntegerTypeKind  # the context lives on


def test_views_die_with_their_context():
    ctx = llvm.Context()
    module = llvm.Module.parse(SRC, ctx)
    v = views_of(module)
    i64, one = ctx.i64, llvm.ConstantInt.get(ctx.i64, 1)
    ctx.close()
    assert module.closed
    for use in every_use(v):
        with pytest.raises(ValueError, match="freed"):
            use()
    for use in (lambda: str(i64), lambda: one.value, lambda: llvm.ConstantInt.get(i64, 2)):
        with pytest.raises(ValueError, match="the LLVM context was closed"):
            use()


def test_views_of_a_collected_module_say_so(ctx):
    fn = llvm.Module.parse(SRC, ctx).functions["f"]
    gc.collect()
    with pytest.raises(ValueError, match="garbage-collected"):
        str(fn)


def test_linked_and_jitted_modules_take_their_views_along(ctx):
    main = llvm.Module.parse("declare i64 @h2(i64)", ctx)
    lib = llvm.Module.parse("define i64 @h2(i64 %x) {\n ret i64 %x\n}", ctx)
    fn = lib.functions["h2"]
    main.link(lib)
    with pytest.raises(ValueError, match="linked into another module"):
        fn.is_declaration
    assert not main.functions["h2"].is_declaration


def test_constants_outlive_a_closed_module(ctx):
    with llvm.Module.parse(SRC, ctx) as module:
        seven = module.globals["g"].initializer
        ty = module.functions["f"].return_type
    assert seven.value == 7 and str(ty) == "i64"


# -- erased objects ------------------------------------------------------------------------------

def test_erased_instruction_is_dead_in_every_view(m):
    # Regression: call.erase(); str(call) segfaulted, and erasing twice aborted with a double free.
    f = m.functions["f"]
    call = insts(f)["c"]
    other_view = next(iter(m.functions["h"].uses)).user
    operand_use = next(iter(insts(f)["b"].uses))
    call.replace_all_uses_with(llvm.ConstantInt.get(m.context.i64, 0))
    call.erase()
    for use in (lambda: str(call), lambda: call.erase(), lambda: other_view.callee, lambda: operand_use.user):
        with pytest.raises(ValueError, match="was erased"):
            use()
    assert repr(call) == "<CallInst (dead)>"
    assert [i.opcode_name for i in f.instructions()] == ["add", "mul", "br", "ret"]


def test_erasing_a_function_kills_its_blocks_instructions_and_arguments(m):
    h = m.functions["h"]
    block, ret, arg = h.entry_block, h.entry_block.terminator, h.args[0]
    for use in list(h.uses):
        use.user.replace_all_uses_with(llvm.ConstantInt.get(m.context.i64, 0))
        use.user.erase()
    h.erase()
    for view in (h, block, ret, arg):
        with pytest.raises(ValueError, match="was erased"):
            str(view)
    assert "h" not in m.functions and m.functions["f"].verify()


def test_erasing_a_block_kills_its_instructions(m):
    f = m.functions["f"]
    entry, nxt = list(f.blocks)
    call, ret = nxt.instructions
    entry.terminator.erase()
    with llvm.Builder(m.context) as b:
        b.position_at_end(entry).ret(f.args[0])
    nxt.erase()
    for view in (nxt, call, ret):
        with pytest.raises(ValueError, match="was erased"):
            str(view)
    m.verify()


def test_erased_global_is_dead(m):
    g = m.globals["g"]
    g.erase()
    with pytest.raises(ValueError, match="was erased"):
        g.initializer


def test_a_reused_address_is_a_new_live_object(m):
    # LLVM may put a new instruction where an erased one was: the new view must work, the old not.
    f = m.functions["f"]
    with llvm.Builder(m.context) as b:
        for _ in range(50):
            b.position_before(f.entry_block.terminator)
            old = b.add(f.args[0], f.args[0])
            old.erase()
            new = b.add(f.args[0], f.args[0], "fresh")
            assert new.name == "fresh"
            new.erase()
            with pytest.raises(ValueError, match="was erased"):
                old.opcode
    m.verify()


def test_erasing_the_current_item_of_an_iteration_raises(m):
    f = m.functions["f"]
    with pytest.raises(ValueError, match="was erased"):
        for inst in f.entry_block.instructions:
            if inst.name == "b":
                inst.replace_all_uses_with(llvm.ConstantInt.get(m.context.i64, 0))
                inst.erase()
    a = insts(f)["a"]
    with llvm.Builder(m.context) as b:
        b.position_before(f.entry_block.terminator)
        for _ in range(3):
            b.add(a, a)
    with pytest.raises(ValueError, match="was erased"):
        for use in a.uses:
            use.user.erase()


def test_builder_positioned_at_an_erased_instruction_raises(m):
    f = m.functions["f"]
    b_inst = insts(f)["b"]
    with llvm.Builder(m.context) as b:
        b.position_before(b_inst)
        b_inst.replace_all_uses_with(llvm.ConstantInt.get(m.context.i64, 0))
        b_inst.erase()
        with pytest.raises(ValueError, match="position it again"):
            b.add(f.args[0], f.args[0])
        b.position_before(f.entry_block.terminator).add(f.args[0], f.args[0])
    m.verify()


def test_passes_that_delete_a_function_kill_its_view(m, host_machine):
    h = m.functions["h"]
    llvm.run_passes(m, "always-inline,inline,globaldce", host_machine)
    assert "h" not in m.functions
    with pytest.raises(ValueError, match="was erased"):
        h.name


def test_uses_moved_by_phi_growth_are_dead_or_right(m):
    # Adding incoming values may reallocate a phi's operands: old Use views must not read freed memory.
    f = m.functions["f"]
    nxt = f.blocks[1]
    with llvm.Builder(m.context) as b:
        b.position_before(nxt.instructions.first)
        phi = b.phi(m.context.i64, [(f.args[0], f.entry_block)])
    for _ in range(20):
        held = [u for u in f.args[0].uses if u.user == phi]
        phi.add_incoming(f.args[0], f.entry_block)
        for use in held:
            try:
                assert use.value == f.args[0] and use.user == phi
            except ValueError as exc:
                assert "was erased" in str(exc)
    assert sum(1 for u in f.args[0].uses if u.user == phi) == 21


# -- values across modules and contexts ----------------------------------------------------------

@pytest.fixture
def other(ctx):
    with llvm.Module.parse("declare i64 @o(i64)\n@og = global i64 1\ndefine i64 @k(i64 %y) {\n"
                           " %z = add i64 %y, 3\n ret i64 %z\n}", ctx) as module:
        yield module


def test_linking_values_across_modules_is_refused(m, other):
    # Regression: call.callee set to a function of a module freed later segfaulted on the next use.
    f = m.functions["f"]
    call, add = insts(f)["c"], insts(f)["a"]
    z = insts(other.functions["k"])["z"]
    refused = {
        "setting an operand": lambda: setattr(call, "callee", other.functions["o"]),
        "replace_all_uses_with": lambda: add.replace_all_uses_with(z),
        "initializer": lambda: setattr(m.add_global(m.context.ptr(), "p"), "initializer", other.globals["og"]),
        "append_existing_block": lambda: f.append_existing_block(other.functions["k"].entry_block),
        "move_before": lambda: other.functions["k"].entry_block.move_before(f.entry_block),
    }
    for what, use in refused.items():
        with pytest.raises(ValueError, match=f"{what}: .* belongs to the module '<string>', not the module"):
            use()
    with llvm.Builder(m.context) as b:
        b.position_before(call)
        with pytest.raises(ValueError, match="call: @o belongs to"):
            b.call(other.functions["o"], [add])
        b.position_before(other.functions["k"].entry_block.terminator)
        with pytest.raises(ValueError, match="add: '%a = add i64 %n, 1' belongs to"):
            b.add(add, add)
        with pytest.raises(ValueError, match="insert: .* belongs to"):
            clone = add.clone()
            b.insert(clone)
    clone.erase()
    m.verify()
    other.verify()


def test_constants_expressions_naming_another_modules_global_are_refused(m, other):
    gep = llvm.Constant.struct(m.context, [other.globals["og"]])
    call = insts(m.functions["f"])["c"]
    with pytest.raises(ValueError, match="@og belongs to the module"):
        m.add_global(gep.type, "s").initializer = gep
    call.operands[0] = llvm.Constant.null(m.context.i64)  # context constants go anywhere
    m.verify()


def test_values_of_another_context_are_refused(m):
    with llvm.Context() as ctx2:
        f = m.functions["f"]
        foreign = llvm.ConstantInt.get(ctx2.i64, 1)
        with pytest.raises(ValueError, match="another LLVM context"):
            insts(f)["a"].operands[1] = foreign
        with llvm.Builder(m.context) as b:
            b.position_before(f.entry_block.terminator)
            with pytest.raises(ValueError, match="store: 'i64 1' belongs to another LLVM context"):
                b.store(foreign, b.alloca(m.context.i64))
        with llvm.Builder(ctx2) as b2, pytest.raises(ValueError, match="another LLVM context"):
            b2.position_at_end(f.entry_block)
        with pytest.raises(ValueError, match="another LLVM context"):
            llvm.FunctionType.get(m.context.i64, [ctx2.i64])
    m.verify()


# -- keeping a module open -----------------------------------------------------------------------

def test_keep_open_refuses_close_and_transfer(ctx, m):
    with m.keep_open("it is being compiled"):
        for use in (m.close, ctx.close, lambda: llvm.Module("x", ctx).link(m)):
            with pytest.raises(ValueError, match="cannot be closed or given away while it is being compiled"):
                use()
        assert "define i64 @f" in str(m)
    m.close()
    assert m.closed
