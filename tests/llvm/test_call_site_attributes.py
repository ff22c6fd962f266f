"""Attributes at call sites: what an indirect call promises about its arguments (zeroext bools)."""

from __future__ import annotations

import pytest

from gpuc.llvm import Builder, CallInst, Context, FunctionType, Module


def test_call_site_attributes_are_added_read_and_removed():
    with Context() as ctx:
        module = Module("m", ctx)
        i1, i32, ptr = ctx.i1, ctx.i32, ctx.ptr()
        callee_type = FunctionType.get(i1, [i32, i1])
        fn = module.add_function("caller", FunctionType.get(i1, [ptr, i32, i1]))
        with Builder(ctx) as b:
            b.position_at_end(fn.append_block("entry"))
            call = b.call(fn.args[0], [fn.args[1], fn.args[2]], fnty=callee_type)
            b.ret(call)
        assert isinstance(call, CallInst)
        call.param_attributes(1).add("zeroext")
        call.return_attributes.add("zeroext")
        call.attributes.add("nounwind")
        assert "zeroext" in call.param_attributes(1) and "zeroext" not in call.param_attributes(0)
        assert len(call.param_attributes(1)) == 1
        assert "call zeroext i1 %0(i32 %1, i1 zeroext %2) #0" in str(fn)
        call.param_attributes(1).remove("zeroext")
        assert "zeroext" not in call.param_attributes(1)
        module.verify()
        with pytest.raises(ValueError, match="unknown LLVM attribute"):
            call.param_attributes(0).add("no-such-attribute")
        module.close()


def test_integer_attributes_read_back_at_call_sites_and_on_functions():
    """`number`: the integer an enum attribute carries (`align 16`), None where the attribute is absent."""
    with Context() as ctx:
        module = Module("m", ctx)
        ptr = ctx.ptr()
        fn = module.add_function("f", FunctionType.get(ctx.void, [ptr, ptr]))
        callee = module.add_function("g", FunctionType.get(ctx.void, [ptr]))
        with Builder(ctx) as b:
            b.position_at_end(fn.append_block("entry"))
            call = b.call(callee, [fn.args[0]])
            b.ret()
        call.param_attributes(0).add("align", 16)
        call.param_attributes(0).add("noundef")
        assert call.param_attributes(0).number("align") == 16
        assert call.param_attributes(0).number("noundef") == 0
        assert call.param_attributes(0).number("dereferenceable") is None
        fn.param_attributes(1).add("dereferenceable", 24)
        assert fn.param_attributes(1).number("dereferenceable") == 24
        assert fn.param_attributes(0).number("dereferenceable") is None
        with pytest.raises(ValueError, match="unknown LLVM attribute"):
            call.param_attributes(0).number("no-such-attribute")
        module.verify()
        module.close()
