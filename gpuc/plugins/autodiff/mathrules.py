"""Derivatives of math functions, for every way a target spells them: LLVM intrinsics, libdevice
(`__nv_sin`), OpenCL built-ins (`_Z3sind`), libm (`sin`, `sinf`) and vector variants in the x86
vector function ABI (libmvec's `_ZGVeN8v_sin`, which the CPU's vectorized loops call).

A rule's derivative code calls functions of the same family as the call it differentiates (the
derivative of `__nv_sin` calls `__nv_cos`), so it stays valid on the target the call was made for.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import gpuc.llvm as llvm
from gpuc.abi import LIBRARY_ATTRIBUTE

# Canonical names (the intrinsic's) of the functions whose C name differs.
_C_NAMES = {"minnum": "fmin", "maxnum": "fmax", "frem": "fmod"}
_CANONICAL = {"fmin": "minnum", "fmax": "maxnum", "fmod": "frem"}
_SUFFIX = {"float": "f32", "double": "f64"}


#: LLVM's sums of a vector's lanes, `llvm.vector.reduce.fadd.v8f32(float start, <8 x float> v)`: in lane
#: order, or in any order with `reassoc` (LLVM's loop vectorizer sums a loop's lanes with them).
VECTOR_SUM = "llvm.vector.reduce.fadd."


def splat(b: llvm.Builder, value: llvm.Value, ty: llvm.VectorType) -> llvm.Value:
    """`value` in every lane of a vector of type `ty`."""
    i32 = ty.context.i32
    one = b.insert_element(llvm.Constant.poison(ty), value, llvm.ConstantInt.get(i32, 0))
    return b.shuffle_vector(one, llvm.Constant.poison(ty), llvm.Constant.null(llvm.VectorType.get(i32, ty.count)))


def _suffix(ty: llvm.Type) -> str:
    if isinstance(ty, llvm.VectorType):
        return f"v{ty.count}{_SUFFIX[str(ty.element_type)]}"
    return _SUFFIX[str(ty)]


@dataclass(frozen=True)
class Family:
    """How one math library names its functions: `kind` is "intrinsic", "libdevice", "opencl" or "libm"."""

    kind: str

    def symbol(self, name: str, ty: llvm.Type, params: int) -> str:
        single = str(getattr(ty, "element_type", ty)) == "float"
        c_name = _C_NAMES.get(name, name)
        if self.kind == "intrinsic":
            return f"llvm.{name}.{_suffix(ty)}" + (".i32" if name == "powi" else "")
        if self.kind == "libdevice":
            return f"__nv_{c_name}" + ("f" if single else "")
        if self.kind == "opencl":
            letters = ("f" if single else "d") * params
            return f"_Z{len(c_name)}{c_name}{letters}" + ("i" if name == "pown" else "")
        return c_name + ("f" if single else "")

    def call(self, b: llvm.Builder, module: llvm.Module, name: str, args, like=None) -> llvm.Value:
        """Call math function `name` of this family on `args` (of one float type; powi: and an i32).
        A function it declares gets the calling convention of `like` (the primal's callee)."""
        ty = args[0].type
        if name == "powi" and self.kind == "opencl":
            name = "pown"
        symbol = self.symbol(name, ty, 1 if name in ("powi", "pown") else len(args))
        fnty = llvm.FunctionType.get(ty, [a.type for a in args])
        if self.kind == "intrinsic":
            return b.call(module.declare_intrinsic(symbol, fnty), args)
        fn = module.get_or_insert_function(symbol, fnty)
        if like is not None and fn.is_declaration and not fn.uses:
            fn.calling_convention = like.calling_convention
        call = b.call(fn, args)
        call.calling_convention = llvm.CALLING_CONVENTIONS[fn.calling_convention]
        return call


INTRINSIC, LIBDEVICE, OPENCL, LIBM = (Family(k) for k in ("intrinsic", "libdevice", "opencl", "libm"))


class Ops:
    """Arithmetic for derivative rules on values of one float type; `None` is an exact zero."""

    def __init__(self, b: llvm.Builder, module: llvm.Module, family: Family, ty: llvm.Type, like=None) -> None:
        self.b, self.module, self.family, self.ty, self.like = b, module, family, ty, like

    def const(self, value: float) -> llvm.Value:
        if not isinstance(self.ty, llvm.VectorType):
            return llvm.ConstantFP.get(self.ty, value)
        lane, vector = llvm.ConstantFP.get(self.ty.element_type, value), llvm.Constant.poison(self.ty)
        i32 = self.module.context.i32
        for i in range(self.ty.count):  # folded into a constant vector
            vector = self.b.insert_element(vector, lane, llvm.ConstantInt.get(i32, i))
        return vector

    def add(self, x, y):
        return y if x is None else x if y is None else self.b.fadd(x, y)

    def sub(self, x, y):
        return x if y is None else self.neg(y) if x is None else self.b.fsub(x, y)

    def mul(self, x, y):
        return None if x is None or y is None else self.b.fmul(x, y)

    def div(self, x, y):
        return None if x is None else self.b.fdiv(x, y)

    def neg(self, x):
        return None if x is None else self.b.fneg(x)

    def square(self, x):
        return self.b.fmul(x, x)

    def call(self, name: str, *args):
        return self.family.call(self.b, self.module, name, list(args), self.like)

    def select_equal(self, a, b, if_equal, otherwise):
        """`if_equal` where a == b (ordered), else `otherwise` (None: zero)."""
        zero = llvm.Constant.null(self.ty)
        return self.b.select(self.b.fcmp("oeq", a, b), zero if if_equal is None else if_equal,
                             zero if otherwise is None else otherwise)


# Each rule maps (ops, args, result, tangents of args) to the result's tangent (None: zero).
# Unary rules give the derivative f'(x) from x and y = f(x); the tangent is f'(x) * dx.
_UNARY = {
    "sqrt": lambda o, x, y: o.div(o.const(0.5), y),
    "cbrt": lambda o, x, y: o.div(o.const(1 / 3), o.square(y)),
    "exp": lambda o, x, y: y,
    "exp2": lambda o, x, y: o.mul(y, o.const(math.log(2))),
    "exp10": lambda o, x, y: o.mul(y, o.const(math.log(10))),
    "expm1": lambda o, x, y: o.add(y, o.const(1.0)),
    "log": lambda o, x, y: o.div(o.const(1.0), x),
    "log2": lambda o, x, y: o.div(o.const(1 / math.log(2)), x),
    "log10": lambda o, x, y: o.div(o.const(1 / math.log(10)), x),
    "log1p": lambda o, x, y: o.div(o.const(1.0), o.add(x, o.const(1.0))),
    "sin": lambda o, x, y: o.call("cos", x),
    "cos": lambda o, x, y: o.neg(o.call("sin", x)),
    "tan": lambda o, x, y: o.add(o.const(1.0), o.square(y)),
    "asin": lambda o, x, y: o.div(o.const(1.0), o.call("sqrt", o.sub(o.const(1.0), o.square(x)))),
    "acos": lambda o, x, y: o.div(o.const(-1.0), o.call("sqrt", o.sub(o.const(1.0), o.square(x)))),
    "atan": lambda o, x, y: o.div(o.const(1.0), o.add(o.const(1.0), o.square(x))),
    "sinh": lambda o, x, y: o.call("cosh", x),
    "cosh": lambda o, x, y: o.call("sinh", x),
    "tanh": lambda o, x, y: o.sub(o.const(1.0), o.square(y)),
    "asinh": lambda o, x, y: o.div(o.const(1.0), o.call("sqrt", o.add(o.square(x), o.const(1.0)))),
    "acosh": lambda o, x, y: o.div(o.const(1.0), o.call("sqrt", o.sub(o.square(x), o.const(1.0)))),
    "atanh": lambda o, x, y: o.div(o.const(1.0), o.sub(o.const(1.0), o.square(x))),
    "erf": lambda o, x, y: o.mul(o.const(2 / math.sqrt(math.pi)), o.call("exp", o.neg(o.square(x)))),
    "erfc": lambda o, x, y: o.mul(o.const(-2 / math.sqrt(math.pi)), o.call("exp", o.neg(o.square(x)))),
}
# Piecewise constant: the derivative is 0 wherever it exists.
_STEPS = frozenset({"floor", "ceil", "trunc", "rint", "nearbyint", "round", "roundeven"})


def _fabs(o: Ops, args, y, t):
    # |x|' = sign(x): -dx where x < 0, dx elsewhere (the right derivative at 0).
    (x,), (dx,) = args, t
    return o.b.select(o.b.fcmp("olt", x, o.const(0.0)), o.b.fneg(dx), dx)


def _copysign(o: Ops, args, y, t):
    # copysign(x, s) is x or -x: the tangent is dx or -dx, whichever the result took.
    (x, _), (dx, _) = args, t
    if dx is None:
        return None
    return o.b.select(o.b.fcmp("oeq", y, x), dx, o.b.fneg(dx))


def _choose(o: Ops, args, y, t):
    # min/max pick one argument; the tangent is that argument's (the first's on a tie).
    (x, _), (dx, dz) = args, t
    return o.select_equal(y, x, dx, dz)


def _pow(o: Ops, args, y, t):
    # d x^z = z x^(z-1) dx + x^z log(x) dz; the log term only where z varies (it is NaN for x < 0).
    (x, z), (dx, dz) = args, t
    first = o.mul(o.mul(z, o.call("pow", x, o.sub(z, o.const(1.0)))), dx) if dx is not None else None
    second = o.mul(o.mul(y, o.call("log", x)), dz) if dz is not None else None
    return o.add(first, second)


def _powi(o: Ops, args, y, t):
    x, n = args
    n1 = o.b.sub(n, llvm.ConstantInt.get(n.type, 1))
    return o.mul(o.mul(o.b.sitofp(n, o.ty), o.call("powi", x, n1)), t[0])


def _atan2(o: Ops, args, y, t):
    # atan2(u, v)' = (v du - u dv) / (u^2 + v^2)
    (u, v), (du, dv) = args, t
    return o.div(o.sub(o.mul(v, du), o.mul(u, dv)), o.add(o.square(u), o.square(v)))


def _hypot(o: Ops, args, y, t):
    (u, v), (du, dv) = args, t
    return o.div(o.add(o.mul(u, du), o.mul(v, dv)), y)


def _fma(o: Ops, args, y, t):
    (a, b, _), (da, db, dc) = args, t
    return o.add(o.add(o.mul(da, b), o.mul(a, db)), dc)


def _frem(o: Ops, args, y, t):
    # r = a - trunc(a/b) b, so dr = da - trunc(a/b) db with trunc(a/b) = (a - r) / b exactly.
    (a, b), (da, db) = args, t
    return o.sub(da, o.mul(o.div(o.b.fsub(a, y), b), db))


_RULES = {"fabs": _fabs, "copysign": _copysign, "minnum": _choose, "maxnum": _choose, "minimum": _choose,
          "maximum": _choose, "minimumnum": _choose, "maximumnum": _choose, "pow": _pow, "powi": _powi,
          "atan2": _atan2, "hypot": _hypot, "fma": _fma, "fmuladd": _fma, "frem": _frem}
#: The math functions with a derivative rule, by canonical (intrinsic) name.
DIFFERENTIABLE = frozenset(_UNARY) | _STEPS | frozenset(_RULES)
#: How many arguments each differentiable function takes (powi: the float and its int exponent).
ARITY = {**{name: 1 for name in DIFFERENTIABLE}, **{name: 2 for name in _RULES}, "fabs": 1, "fma": 3,
         "fmuladd": 3}
#: Math functions gpuc's targets may call that have no derivative here (tgamma and lgamma need digamma).
KNOWN_WITHOUT_RULE = frozenset({"tgamma", "lgamma", "sincos", "modf", "frexp", "ldexp"})
_KNOWN = DIFFERENTIABLE | KNOWN_WITHOUT_RULE
_INTRINSIC = re.compile(r"llvm\.(\w+?)\.(v\d+)?(f32|f64)(\.i32)?$")
_OPENCL = re.compile(r"_Z(\d+)(\w+)$")
# `_ZGV<isa><mask N: unmasked><lanes><v per vector argument>_<libm name>` (the x86 vector function ABI).
_VECTOR_VARIANT = re.compile(r"_ZGV[bcde]N\d+v+_(\w+)$")


def _canonical(name: str) -> str | None:
    name = _CANONICAL.get(name, name)
    return name if name in _KNOWN else None


def classify(fn: llvm.Function) -> tuple[Family, str] | None:
    """The family and canonical name of math function `fn`, or None when it is not one."""
    name = fn.name
    if (m := _INTRINSIC.match(name)) and m.group(1) in _KNOWN:
        return INTRINSIC, m.group(1)
    if (m := _VECTOR_VARIANT.match(name)) and fn.is_declaration:
        # A vector variant's derivative calls the vector intrinsics (`llvm.cos.v8f64`): the target
        # that chose the variant lowers them as it lowers its other vector math.
        base = m.group(1)
        found = _canonical(base) or (_canonical(base[:-1]) if base.endswith("f") else None)
        return (INTRINSIC, found) if found else None
    if name.startswith("__nv_"):
        base = name[5:]
        found = _canonical(base) or (_canonical(base[:-1]) if base.endswith("f") else None)
        return (LIBDEVICE, found) if found else None
    if not fn.is_declaration and LIBRARY_ATTRIBUTE not in fn.attributes:  # a math library's (libclc) is
        return None
    if (m := _OPENCL.match(name)) and len(m.group(2)) > int(m.group(1)):
        base = m.group(2)[: int(m.group(1))]
        found = _canonical("powi" if base == "pown" else base)
        return (OPENCL, found) if found else None
    found = _canonical(name) or (_canonical(name[:-1]) if name.endswith("f") else None)
    return (LIBM, found) if found else None


def tangent(b: llvm.Builder, module: llvm.Module, family: Family, name: str, args, result, tangents, like=None):
    """The tangent of `result = name(args)` given the arguments' tangents (None: zero), or None
    when it is zero; `like` is the called function, whose calling convention functions the rule
    declares get. KeyError when `name` has no rule."""
    if all(t is None for t in tangents) or name in _STEPS:
        return None
    ops = Ops(b, module, family, result.type, like)
    if name in _UNARY:
        return ops.mul(_UNARY[name](ops, args[0], result), tangents[0])
    return _RULES[name](ops, args, result, tangents)
