"""print() in kernels and funcs (docs/debugging.md, "print"): numbers, bools, complex numbers, string
literals and tuples of them, separated by `sep` and ended by `end` (string literals), as Python prints
them. On the CPU a call hands the runtime a description of the line and its values
(abi.PRINT_HOOK); the runtime formats them in Python and writes the whole line to sys.stdout, so each
work item's lines come out whole and in its own order, and pytest and Jupyter see them. Targets with a
printf of their own (SPIR-V: OpenCL's, PTX: CUDA's vprintf) make each print() one printf call
(printf_format.py); the others refuse print() with a located error."""

from __future__ import annotations

import ast
import builtins

from ... import abi
from ...llvm import ArrayType as LLArrayType
from ...llvm import Constant, ConstantInt, FunctionType
from ..core import registry
from ..core.errors import UserError
from ..core.plans import CallPlan, Handler
from ..core.types import ComplexType, ScalarType, TupleType, none
from ..core.types import an
from .printf_format import Line

#: The separator of the description's fields (a C string: the printed type per value, "s" + text per literal).
FIELD = abi.PRINT_FIELD


def _literal(node) -> str | None:
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        return None
    if "\x00" in node.value or FIELD in node.value:  # the description is a C string of FIELD-separated parts
        raise UserError("print() in kernels takes strings without the characters \\x00 and \\x1f", node=node)
    return node.value


def _printable(t) -> bool:
    if isinstance(t, (ScalarType, ComplexType)):
        return True
    return isinstance(t, TupleType) and all(_printable(e) for e in t.elements)


def kind(t) -> str:
    """The description of one printed value of type `t`: "int64", "float32", "complex128", "(a,b)"..."""
    if isinstance(t, TupleType):
        return "(" + ",".join(kind(e) for e in t.elements) + ")"
    return t.name


class Print(Handler):
    name = "print"
    keywords = True

    def type(self, typer, node):
        options = {"sep": " ", "end": "\n"}
        for kw in node.keywords:
            if kw.arg not in options:
                raise UserError(f"print() in kernels takes sep= and end=, not {kw.arg}=", node=kw.value,
                                hint="the output goes to sys.stdout on the CPU, flushed line by line")
            text = _literal(kw.value)
            if text is None:
                raise UserError(f"print()'s {kw.arg}= must be a string literal here", node=kw.value)
            options[kw.arg] = text
        items, types = [], []
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise UserError("print(*values) is not supported in kernels; pass the values one by one", node=a)
            text = _literal(a)
            if text is not None:
                items.append(("s", text))
                continue
            t = typer.value_expr(a, "an argument of print()")
            if not _printable(t):
                raise UserError(f"print() in kernels prints numbers, bools, string literals and tuples of them, "
                                f"not {an(t)}", node=a, hint="print an array's elements, e.g. print(a[i])")
            items.append(("v", t))
            types.append(t)
        return CallPlan(none, tuple(types), (tuple(items), options["sep"], options["end"]))

    def lower(self, lw, node, plan):
        if not lw.target.host_executable:  # the CPU runtime of this process defines the hook
            if lw.target.printf_long is not None:
                return _printf(lw, node, plan)
            raise UserError(f"print() in kernels runs on the CPU, OpenCL (spirv) and CUDA (ptx), not on "
                            f"{lw.target.name}{'' if lw.target.is_gpu else ' (a CPU other than this one)'}",
                            hint="launch with device='cpu' to see the output, or store the values in an array")
        items, sep, end = plan.extra
        b, i64 = lw.b, lw.ctx.i64
        fields, values = [sep, end], []
        for (what, x), a in zip(items, node.args):
            if what == "s":
                fields.append("s" + x)
                continue
            fields.append(kind(x))
            values += _scalars(lw, lw.expr(a), x)
        slots = lw.alloca_builder.alloca(LLArrayType.get(i64, len(values)), "print.values") if values else \
            Constant.null(lw.ctx.ptr())
        for k, (v, t) in enumerate(values):
            slot = b.gep(i64, slots, [ConstantInt.get(i64, k)])
            b.store(_as_i64(lw, v, t), slot)
        hook = lw.program.module.globals.get(abi.PRINT_HOOK)
        if hook is None:
            hook = lw.program.module.add_global(lw.ctx.ptr(), abi.PRINT_HOOK)
            hook.alignment = 8
        callee = b.load(lw.ctx.ptr(), hook, "print.hook", align=8)
        fnty = FunctionType.get(lw.ctx.void, [lw.ctx.ptr(), lw.ctx.ptr()])
        b.call(callee, [lw.site(FIELD.join(fields)), slots], fnty=fnty)
        return None


def _printf(lw, node, plan) -> None:
    """print() as one call of the target's printf (gpuc/frontend/constructs/printf_format.py)."""
    items, sep, end = plan.extra
    line = Line(lw)
    for k, ((what, x), a) in enumerate(zip(items, node.args)):
        if k:
            line.text(sep)
        if what == "s":
            line.text(x)
        else:
            line.value(lw.expr(a), x)
    line.text(end)
    line.emit()
    return None


def _scalars(lw, value, t) -> list:
    """(LLVM value, scalar type) of every number in `value` of type `t`, in order."""
    if isinstance(t, TupleType):
        out = []
        for k, e in enumerate(t.elements):
            out += _scalars(lw, lw.b.extract_value(value, k), e)
        return out
    if isinstance(t, ComplexType):
        return [(lw.b.extract_value(value, k), t.part) for k in (0, 1)]
    return [(value, t)]


def _as_i64(lw, v, t: ScalarType):
    """A scalar in one 64-bit slot: integers extended as their sign says, floats as a double's bits."""
    b, i64 = lw.b, lw.ctx.i64
    if t.is_float:
        if t.bits != 64:
            v = b.fpext(v, lw.ctx.double)
        return b.bitcast(v, i64)
    if t.bits == 64:
        return v
    return b.sext(v, i64) if t.signed else b.zext(v, i64)


registry.register(builtins.print, Print())
