"""print() through a target's own printf (docs/debugging.md, "print on GPU targets"): one printf call per
print(), its format and arguments chosen so that it writes what Python prints as far as printf can.

Integers and bools print exactly as Python prints them; floats with the fewest digits of `%.17g` (float64),
`%.9g` (float32) and `%.5g` (float16), which read back as the same number, plus ".0" where the value is
whole (as Python prints 3.0), and "nan" for every NaN. A float whose shortest decimal form has fewer digits
than that prints with more than Python's (0.1 prints 0.10000000000000001). Inside a tuple, numbers of NumPy's
types print as their repr (np.float32(0.5)), as on the CPU."""

from __future__ import annotations

import hashlib

from ...llvm import Constant, ConstantFP, FunctionType
from ..core.types import ComplexType, ScalarType, TupleType

#: The printf precision that gives back the same float, per width in bits.
DIGITS = {16: 5, 32: 9, 64: 17}
#: Whole floats below this magnitude print with ".0" (Python's float64, NumPy's float32 and float16 print
#: larger ones in scientific notation).
WHOLE_BELOW = {16: 1e3, 32: 1e7, 64: 1e16}
#: The types that print as Python's own numbers inside a tuple (the others as NumPy's scalars' repr).
PYTHON_NUMBERS = frozenset({"int64", "uint64", "float64", "bool", "complex128"})


class Line:
    """The format and arguments of one print(): literal text, and values by their gpuc type."""

    def __init__(self, lw) -> None:
        self.lw, self.parts, self.args = lw, [], []
        self.long = lw.target.printf_long

    def text(self, text: str) -> None:
        self.parts.append(text.replace("%", "%%"))

    def value(self, value, t, nested: bool = False) -> None:
        if isinstance(t, TupleType):
            self.text("(")
            for k, element in enumerate(t.elements):
                if k:
                    self.text(", ")
                self.value(self.lw.b.extract_value(value, k), element, nested=True)
            self.text(",)" if len(t.elements) == 1 else ")")
            return
        wrapped = nested and t.name not in PYTHON_NUMBERS
        if wrapped:
            self.text(f"np.{t.name}(")
        if isinstance(t, ComplexType):
            self._complex(value, t)
        elif t.is_bool:
            self.parts.append("%s")
            self.args.append(self.lw.b.select(value, self.string("True"), self.string("False")))
        elif t.is_int:
            self._integer(value, t)
        else:
            self._float(value, t.bits, suffix=True)
        if wrapped:
            self.text(")")

    def _integer(self, value, t: ScalarType) -> None:
        b, i64 = self.lw.b, self.lw.ctx.i64
        if t.bits < 64:
            value = b.sext(value, i64) if t.signed else b.zext(value, i64)
        self.parts.append(f"%{self.long}{'d' if t.signed else 'u'}")
        self.args.append(value)

    def _float(self, value, bits: int, suffix: bool, sign: str = "") -> None:
        """`value` with the digits that read back as the same float; `suffix`: ".0" after a whole value."""
        b, ctx = self.lw.b, self.lw.ctx
        if bits == 16:
            value = b.fpext(value, ctx.float)
        nan = b.fcmp("uno", value, value)
        value = b.select(nan, ConstantFP.get(value.type, float("nan")), value)  # no "-nan"
        self.parts.append(f"%{sign}.{DIGITS[bits]}g")
        self.args.append(value)
        if suffix:
            whole = b.and_(b.fcmp("oeq", value, self._intrinsic("trunc", value)),
                           b.fcmp("olt", self._intrinsic("fabs", value), ConstantFP.get(value.type, WHOLE_BELOW[bits])))
            self.parts.append("%s")
            self.args.append(b.select(whole, self.string(".0"), self.string("")))

    def _complex(self, value, t: ComplexType) -> None:
        """(re+imj), the parts as Python writes them in a complex number: without ".0"."""
        b = self.lw.b
        self.text("(")
        self._float(b.extract_value(value, 0), t.part.bits, suffix=False)
        self._float(b.extract_value(value, 1), t.part.bits, suffix=False, sign="+")
        self.text("j)")

    def _intrinsic(self, name: str, value):
        module = self.lw.program.module
        fn = module.declare_intrinsic(f"llvm.{name}.{'f32' if value.type == self.lw.ctx.float else 'f64'}",
                                      FunctionType.get(value.type, [value.type]))
        return self.lw.b.call(fn, [value])

    def string(self, text: str):
        """A constant C string in the target's constant address space, one per module and text."""
        module, ctx = self.lw.program.module, self.lw.ctx
        name = "gpuc.printf." + hashlib.sha256(text.encode()).hexdigest()[:16]
        gv = module.globals.get(name)
        if gv is None:
            data = Constant.string(ctx, text)
            gv = module.add_global(data.type, name, self.lw.target.constant_address_space)
            gv.initializer = data
            gv.is_global_constant = True
            gv.linkage = "private"
        return gv

    def emit(self) -> None:
        self.lw.target.printf(self.lw.b, self.lw.program.module, self.string("".join(self.parts)), self.args)


__all__ = ["DIGITS", "Line", "PYTHON_NUMBERS", "WHOLE_BELOW"]
