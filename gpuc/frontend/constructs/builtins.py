"""Python's builtins in kernels (int(), float(), bool() and the gpuc scalar types as conversions, abs,
min, max, len), gpuc's index-space intrinsics and gpuc.marker objects."""

from __future__ import annotations

import ast
import builtins as _py

from ...abi import INDEX_MARKER, NDRANGE_MARKER
from ...llvm import ConstantInt
from ..core import intrinsics, registry
from ..core.errors import UserError
from ..core.intrinsics import Marker
from ..core.plans import CallPlan, ComparePlan, Handler
from ..core.types import SCALARS, Array, ArrayType, ScalarType, TupleType, boolean, common_type, float64, int64, none
from ..numeric.arithmetic import binary_plan, lower_binary, lower_compare
from ..numeric.mathlib import MathFunction
from ..core.types import an

class Convert(Handler):
    """int(x), float(x), bool(x), gpuc.float32(x), ...: NumPy-style conversion (floats truncate to ints)."""

    def __init__(self, name: str, target: ScalarType) -> None:
        self.name, self.target = name, target

    def type(self, typer, node):
        (t,) = self.scalars(typer, node, 1)
        typer.fit(node.args[0], self.target)  # np.uint32(-1) is an error in NumPy 2
        return CallPlan(self.target, (t,))

    def lower(self, lw, node, plan):
        return lw.operand(node.args[0], self.target)


class Abs(Handler):
    name = "abs"

    def type(self, typer, node):
        (t,) = self.scalars(typer, node, 1)
        result = int64 if t.is_bool else t
        return CallPlan(result, (t,))

    def lower(self, lw, node, plan):
        t = plan.result
        v = lw.convert(lw.expr(node.args[0]), plan.args[0], t)
        if t.is_float:
            return lw.math("fabs", t, [v])
        if not t.signed:
            return v
        neg = lw.b.icmp("slt", v, ConstantInt.get(v.type, 0))
        return lw.b.select(neg, lw.b.sub(ConstantInt.get(v.type, 0), v), v)


class MinMax(Handler):
    """min/max of two or more numbers with Python's rule: the first of equal (or NaN-unordered) items wins."""

    def __init__(self, name: str) -> None:
        self.name = name

    def type(self, typer, node):
        if len(node.args) == 1:
            raise UserError(f"{self.name}() of an iterable is not supported; pass the numbers: "
                            f"{self.name}(a, b, ...)")
        types = self.scalars(typer, node, 2, 1000)
        result = common_type(types, [typer.is_weak(a) for a in node.args])
        for a in node.args:
            typer.fit(a, result)
        return CallPlan(result, tuple(types))

    def lower(self, lw, node, plan):
        t = plan.result
        values = [lw.operand(a, t) for a in node.args]
        pred = "<" if self.name == "min" else ">"
        current = values[0]
        for v in values[1:]:
            better = lower_compare(lw, ComparePlan(pred, t), v, t, current, t)
            current = lw.b.select(better, v, current)
        return current


class Len(Handler):
    name = "len"

    def type(self, typer, node):
        (t,) = self.args(typer, node, 1)
        if not isinstance(t, (ArrayType, TupleType)):
            raise UserError(f"len() needs an array or a tuple, not {an(t)}")
        return CallPlan(int64, (t,))

    def lower(self, lw, node, plan):
        (t,) = plan.args
        if isinstance(t, TupleType):
            return ConstantInt.get(lw.ctx.i64, len(t.elements))
        return lw.b.extract_value(lw.expr(node.args[0]), 1)



class ContextIntrinsic(Handler):
    """gpuc.index(dim=0), gpuc.ndrange(dim=0) and the block model's geometry (thread_index, ...,
    lane_index(), warp_size()): calls of a gpuc.ctx.* marker `i64 (i32 dim)` (docs/kernel-abi.md)."""

    keywords = True

    def __init__(self, name: str, marker: str | None = None, takes_dim: bool = True) -> None:
        self.name, self.takes_dim = name, takes_dim
        self.marker = marker or (INDEX_MARKER if name == "index" else NDRANGE_MARKER)

    def type(self, typer, node):
        if not self.takes_dim:
            if node.args or node.keywords:
                raise UserError(f"gpuc.{self.name}() takes no arguments")
            return CallPlan(int64, (), 0)
        if len(node.args) + len(node.keywords) > 1 or any(k.arg != "dim" for k in node.keywords):
            raise UserError(f"gpuc.{self.name}() takes one argument, dim (0, 1 or 2)")
        arg = node.args[0] if node.args else (node.keywords[0].value if node.keywords else None)
        dim = 0
        if arg is not None:
            typer.expr(arg)
            dim = typer.typed.consts.get(id(arg))
            if type(dim) is not int or dim not in (0, 1, 2):
                raise UserError(f"gpuc.{self.name}(dim) needs a constant dim of 0, 1 or 2", node=arg)
        return CallPlan(int64, (), dim)

    def lower(self, lw, node, plan):
        fn = lw.declare(self.marker, lw.ctx.i64, [lw.ctx.i32])
        return lw.b.call(fn, [ConstantInt.get(lw.ctx.i32, plan.extra)])


class MarkerCall(Handler):
    """A gpuc.marker(...) object: each call emits `call <restype> @<name>(<args>)`."""

    def __init__(self, marker) -> None:
        self.marker, self.name = marker, marker.name

    def type(self, typer, node):
        want = self.marker.argtypes
        got = self.args(typer, node, len(want))
        for a, g, w in zip(node.args, got, want):
            if g != w and not (isinstance(g, ScalarType) and isinstance(w, ScalarType)) and not (
                    isinstance(w, ArrayType) and w.accepts(g)):
                raise UserError(f"marker {self.name} takes {an(w)} here, not {an(g)}", node=a)
            typer.fit(a, w)
        return CallPlan(self.marker.restype, tuple(got))

    def lower(self, lw, node, plan):
        want = self.marker.argtypes
        args = []
        for a, g, w in zip(node.args, plan.args, want):
            args += lw.flatten(lw.operand(a, w) if isinstance(w, ScalarType) else lw.expr(a), w)
        params = [p for w in want for p in lw.abi_params(w)]
        fn = lw.declare(self.name, lw.ltype(plan.result), params)
        call = lw.b.call(fn, args)
        return None if plan.result == none else call



class Arithmetic(Handler):
    """pow(a, b) is `a ** b` and divmod(a, b) is `(a // b, a % b)`, with the operators' promotion and
    semantics (docs/frontend.md); each operand is evaluated once."""

    def __init__(self, name: str, ops: tuple[str, ...]) -> None:
        self.name, self.ops = name, ops

    def type(self, typer, node):
        if self.name == "pow" and len(node.args) == 3:
            raise UserError("pow(base, exp, mod) is not supported in kernels",
                            hint="write (base ** exp) % mod where it cannot overflow, or a loop of modular squaring")
        left, right = self.args(typer, node, 2)
        weak = typer.is_weak(node.args[0]), typer.is_weak(node.args[1])
        consts = typer.typed.consts
        plans = tuple(binary_plan(op, left, right, *weak, consts.get(id(node.args[1])), consts.get(id(node.args[0])))
                      for op in self.ops)
        for a in node.args:
            typer.fit(a, plans[0].operand)
        result = plans[0].result if len(plans) == 1 else TupleType(tuple(p.result for p in plans))
        return CallPlan(result, (left, right), plans)

    def lower(self, lw, node, plan):
        first = plan.extra[0]
        (a, at), (b, bt) = (lw.binary_operand(arg, first) for arg in node.args)
        exponent = lw.typed.consts.get(id(node.args[1]))
        values = [lower_binary(lw, p, a, at, b, bt, exponent) for p in plan.extra]
        return values[0] if len(values) == 1 else lw.make_tuple(values, plan.result)


class Sum(Handler):
    """sum(t) and sum(t, start) of a tuple of numbers: ((start + t[0]) + t[1]) + ..., start 0 (an int
    literal, so sum((-0.0,)) is 0.0 as in Python)."""

    name = "sum"

    def type(self, typer, node):
        types = self.args(typer, node, 1, 2)
        t = types[0]
        if not isinstance(t, TupleType):
            hint = "a.sum() sums an array (pairwise, as NumPy does); a loop adds in order" \
                if isinstance(t, ArrayType) else None
            raise UserError(f"sum() in kernels takes a tuple of numbers, not {an(t)}", node=node.args[0], hint=hint)
        start = types[1] if len(types) > 1 else int64
        acc, weak, plans = start, len(types) == 1 or typer.is_weak(node.args[1]), []
        start_const = 0 if len(types) == 1 else typer.typed.consts.get(id(node.args[1]))
        for k, e in enumerate(t.elements):
            p = binary_plan("+", acc, e, weak, False, None, start_const if k == 0 else None)
            plans.append(p)
            acc, weak = p.result, False
        return CallPlan(acc, tuple(types), tuple(plans))

    def lower(self, lw, node, plan):
        t = plan.args[0]
        values = lw.expr(node.args[0])
        if len(node.args) > 1 and not lw.is_literal(node.args[1]):
            acc, at = lw.expr(node.args[1]), plan.args[1]
        else:
            acc, at = None, plan.args[1] if len(node.args) > 1 else int64
            start = lw.typed.consts[id(node.args[1])] if len(node.args) > 1 else 0
        for k, (p, e) in enumerate(zip(plan.extra, t.elements)):
            if acc is None:  # the literal start, at the first sum's operand type
                acc, at = lw.const(p.operand, start), p.operand
            acc = lower_binary(lw, p, acc, at, lw.b.extract_value(values, k), e)
            at = p.result
        if acc is None:
            acc = lw.const(plan.result, start) if isinstance(plan.result, ScalarType) else acc
        return acc


class Round(Handler):
    """round(x): an int (int64), rounding half to even as Python does; an integer stays as it is."""

    name = "round"

    def type(self, typer, node):
        if len(node.args) == 2 and not (isinstance(node.args[1], ast.Constant) and node.args[1].value is None):
            raise UserError("round(x, ndigits) is not supported in kernels: Python rounds the decimal value "
                            "exactly, which differs from scaling by 10**ndigits",
                            hint="np.round(x, ndigits) rounds as NumPy does (scaling), or round(x) for an int",
                            node=node.args[1])
        (t,) = self.scalars(typer, ast.Call(node.func, node.args[:1], []), 1)
        return CallPlan(int64, (t,))

    def lower(self, lw, node, plan):
        (t,) = plan.args
        v = lw.expr(node.args[0])
        if not t.is_float:
            return lw.convert(v, t, int64)
        return lw.convert(lw.math("rint", t, [v]), t, int64)


registry.register(_py.pow, Arithmetic("pow", ("**",)))
registry.register(_py.divmod, Arithmetic("divmod", ("//", "%")))
registry.register(_py.sum, Sum())
registry.register(_py.round, Round())
registry.register(int, Convert("int", int64))
registry.register(float, Convert("float", float64))
registry.register(bool, Convert("bool", boolean))
registry.register(_py.abs, Abs())
registry.register(_py.min, MinMax("min"))
registry.register(_py.max, MinMax("max"))
registry.register(_py.len, Len())
registry.register(intrinsics.index, ContextIntrinsic("index"), public="index", group="the index space")
registry.register(intrinsics.ndrange, ContextIntrinsic("ndrange"), public="ndrange", group="the index space")
for _t in SCALARS:
    registry.register(_t, Convert(_t.name, _t), public="bool_" if _t == boolean else _t.name, group="the types")
registry.expose("boolean", boolean, group="the types")
registry.expose("Array", Array, group="the types")
registry.register(intrinsics.fma, MathFunction("fma"), public="fma", group="math beside the math module")
registry.register_type(Marker, MarkerCall)
registry.expose("marker", intrinsics.marker, group="markers for plugins (gpuc.marker(name, restype, argtypes))")
