"""print() through a target's own printf (docs/debugging.md, "print on GPU targets"): one printf call per
print(), its format and arguments chosen so that it writes what Python prints as far as printf can.

Integers and bools print exactly as Python prints them; floats with the fewest digits of `%.17g` (float64),
`%.9g` (float32) and `%.5g` (float16), which read back as the same number, plus ".0" where the value is
whole (as Python prints 3.0), and "nan" for every NaN. A float whose shortest decimal form has fewer digits
than that prints with more than Python's (0.1 prints 0.10000000000000001). A complex number prints as (re+imj),
or imj where its real part is +0: the two forms are two printf calls in two branches (up to MOST_CHOICES complex
numbers per line). Inside a tuple, numbers of NumPy's types print as their repr (np.float32(0.5)), as on the
CPU."""

from __future__ import annotations

import hashlib

from ...llvm import Constant, ConstantFP, ConstantInt, FunctionType
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
        #: The line so far before `parts` and `args`: (format, arguments) pieces and _Choice between two lines.
        self.pieces = []

    def _close(self) -> list:
        """`pieces`, with `parts` and `args` made one more piece."""
        if self.parts or self.args:
            self.pieces.append(("".join(self.parts), self.args))
            self.parts, self.args = [], []
        return self.pieces

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
        """As Python writes a complex number: imj where the real part is +0, else (re+imj); the parts without
        ".0". The two forms are two printf calls, one of which runs (`emit`)."""
        b, bits = self.lw.b, t.part.bits
        re, im = b.extract_value(value, 0), b.extract_value(value, 1)
        imaginary, both = Line(self.lw), Line(self.lw)
        imaginary._float(im, bits, suffix=False)
        imaginary.text("j")
        both.text("(")
        both._float(re, bits, suffix=False)
        both._float(im, bits, suffix=False, sign="+")
        both.text("j)")
        integer = self.lw.ctx.int_type(bits)
        positive_zero = b.icmp("eq", b.bitcast(re, integer), ConstantInt.get(integer, 0))
        self._close()
        self.pieces.append(_Choice(positive_zero, imaginary._close(), both._close()))

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
        """The printf call of the line: one per combination of the complex numbers' forms, each its own branch
        (past MOST_CHOICES complex numbers, each in parentheses)."""
        pieces = self._close()
        if sum(isinstance(p, _Choice) for p in pieces) > MOST_CHOICES:
            pieces = [q for p in pieces for q in (p.otherwise if isinstance(p, _Choice) else [p])]
        self._print(pieces, [], [])

    def _print(self, pieces: list, formats: list, args: list) -> None:
        b = self.lw.b
        for k, piece in enumerate(pieces):
            if isinstance(piece, _Choice):
                fn = self.lw.fn
                yes, no, join = fn.append_block("print.then"), fn.append_block("print.else"), fn.append_block("print.join")
                b.cond_br(piece.condition, yes, no)
                for block, line in ((yes, piece.then), (no, piece.otherwise)):
                    b.position_at_end(block)
                    self._print(line + pieces[k + 1:], list(formats), list(args))
                    b.br(join)
                b.position_at_end(join)
                return
            formats.append(piece[0])
            args += piece[1]
        self.lw.target.printf(b, self.lw.program.module, self.string("".join(formats)), args)


#: The most complex numbers of one print() written as Python writes them (2**MOST_CHOICES printf calls).
MOST_CHOICES = 4


class _Choice:
    """Where a line goes on as one of two lines' pieces: `then` where `condition` holds, else `otherwise`."""

    def __init__(self, condition, then: list, otherwise: list) -> None:
        self.condition, self.then, self.otherwise = condition, then, otherwise


__all__ = ["DIGITS", "Line", "MOST_CHOICES", "PYTHON_NUMBERS", "WHOLE_BELOW"]
