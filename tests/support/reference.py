"""The reference side of the random-program tests: run a generated kernel with the documented semantics.

`Program(source)` parses the module text; `program.run(args)` types the kernel for the launch
arguments (support.typer) and interprets it over reference values (support.numeric): integers wrap
at their width, float32 rounds after every operation, `//` and `%` follow Python, literals are weak.
Array arguments are NumPy arrays and are updated in place. It raises `Expected` where the docs
require a compile error and `Undefined` where the program has no defined result (division by
zero, out-of-range shifts or conversions, out-of-bounds indices, math domain errors, too many
steps); such programs are discarded by the generator.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .iterables import IterableEval
from .numpy_calls import NumpyEval
from .py_builtins import PY_BUILTINS, PyBuiltinEval
from .numeric import (Arr, Expected, FnPtr, Tup, Undefined, Weak, bit_count, convert, from_numpy, is_complex, is_float,
                      is_int,
                      signed, truth, wrap, zero, BITS, NUMPY)
from .views import augment_view, copy_into_view, eval_method, eval_view, is_view, is_view_method
from .typer import BIT_COUNTS, FOLD, INT_MATH, PRED_MATH, TYPE_NAMES, Typer, strong

MAX_STEPS = 20_000
RTOL32, RTOL64 = 1e-5, 1e-13  # transcendental results: libm's float32 functions round differently
RTOL16 = 2e-3  # float16 math: gpuc rounds the float32 function (as NumPy), the reference the float64 one

__all__ = ["Program", "Expected", "Undefined", "launch_types"]


def launch_types(args) -> tuple:
    """The gpuc types of launch arguments (as the launcher types them: int -> int64, float -> float64)."""
    out = []
    for a in args:
        if isinstance(a, np.ndarray):
            out.append(Arr("bool" if a.dtype == np.bool_ else a.dtype.name, a.ndim))
        elif isinstance(a, (bool, np.bool_)):
            out.append("bool")
        elif type(a) is int:
            out.append("int64")
        elif type(a) is float:
            out.append("float64")
        elif type(a) is complex:
            out.append("complex128")
        elif isinstance(a, np.generic):
            out.append(a.dtype.name)
        elif isinstance(a, tuple):
            out.append(Tup(launch_types(a)))
        else:
            raise TypeError(a)
    return tuple(out)


class _Return(Exception):
    def __init__(self, value) -> None:
        self.value = value


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class Program:
    def __init__(self, source: str, kernel: str = "kernel") -> None:
        self.source = source
        tree = ast.parse(source)
        self.funcs = {d.name: d for d in tree.body if isinstance(d, ast.FunctionDef)}
        self.gpu_funcs = {name for name, d in self.funcs.items() if any(
            ast.unparse(dec) == "gpuc.func" for dec in d.decorator_list)}  # what gpuc.deferred accepts
        self.globals = {}  # module-level numbers: name -> (type, weak, value)
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                self.globals[node.targets[0].id] = _constant(node.value)
        self.kernel = kernel
        self._typed: dict = {}

    def typed(self, name, argtypes):
        key = (name, argtypes)
        found = self._typed.get(key)
        if found is None:
            if key in self._typed:
                raise Undefined("recursion")
            self._typed[key] = None  # under way: a pointer cycle reaching it reads its annotation
            try:
                found = self._typed[key] = Typer(self, self.funcs[name], argtypes).run()
            except BaseException:
                del self._typed[key]  # typed again where it is asked for again (a loop's next round)
                raise
        return found

    def annotated_ret(self, name):
        """The return type a function's annotation declares (None without one)."""
        node = self.funcs[name].returns
        return None if node is None else TYPE_ANNOTATION(node)

    def pointer_ret(self, name, argtypes):
        """The return type of a pointer to `name` for `argtypes`: the function is typed (compiled)
        now, unless its typing is under way (a cycle through pointers), which needs an annotation."""
        key = (name, argtypes)
        if key in self._typed and self._typed[key] is None:
            declared = self.annotated_ret(name)
            if declared is None:
                raise Undefined("a pointer cycle through a function without a return annotation")
            return declared
        return self.typed(name, argtypes).ret

    def check(self, args):
        """Type the kernel for `args`; raises Expected where the docs require a compile error."""
        typed = self.typed(self.kernel, launch_types(args))
        if typed.ret is not None:
            raise Expected("kernel returns a value")
        return typed

    def run(self, args, masks=None) -> None:
        """Run the kernel for one work item (index 0 of 1) over `args`, updating arrays in place.
        `masks` (float arrays like the array arguments) get the relative tolerance where a transcendental
        result was stored (0 elsewhere: exact)."""
        typed = self.check(args)
        values = [_value(a, t) for a, t in zip(args, typed.argtypes)]
        mask_of = {id(a): m for a, m in zip(args, masks or []) if isinstance(a, np.ndarray)}
        with np.errstate(all="ignore"):
            Evaluator(self, mask_of).call(typed, values)


def _value(arg, t):
    if isinstance(arg, np.ndarray):
        return arg
    if isinstance(arg, tuple):
        return tuple(_value(a, e) for a, e in zip(arg, t.elts))
    return convert(arg.item() if isinstance(arg, np.generic) else arg, t)


def unified(value, t):
    """A variable's value read at the type its joining paths unify to (docs/frontend.md "Joins")."""
    if isinstance(t, Tup) and isinstance(value, tuple):
        return tuple(unified(v, e) for v, e in zip(value, t.elts))
    if isinstance(t, str):
        return convert(value, t)
    return value


class Evaluator(IterableEval, NumpyEval, PyBuiltinEval):
    Break, Continue = _Break, _Continue

    def __init__(self, program: Program, masks: dict) -> None:
        self.program, self.masks = program, masks
        self.steps = 0

    def call(self, typed, values):
        saved = getattr(self, "t", None)
        self.t = typed
        env = dict(zip([a.arg for a in self.program.funcs[typed.name].args.args], values))
        try:
            self.block(self.program.funcs[typed.name].body, env)
            result = None
        except _Return as r:
            result = r.value
        finally:
            self.t = saved
        if isinstance(typed.ret, (str, Tup)):
            result = unified(result, typed.ret)
        return result

    def tick(self):
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise Undefined("too many steps")

    # -- statements ---------------------------------------------------------------------------
    def block(self, stmts, env):
        for s in stmts:
            self.tick()
            getattr(self, "s_" + type(s).__name__)(s, env)

    def s_Pass(self, s, env):
        pass

    def s_Expr(self, s, env):
        if not isinstance(s.value, ast.Constant):
            self.eval(s.value, env)

    def s_Assign(self, s, env):
        value = self.eval(s.value, env)
        for target in s.targets:
            self.bind(target, value, env, s)

    def s_AnnAssign(self, s, env):
        env[s.target.id] = convert(self.eval(s.value, env), TYPE_ANNOTATION(s.annotation))

    def s_AugAssign(self, s, env):
        target = s.target
        if isinstance(target, ast.Name):
            env[target.id] = self.binop(s, s.op, self.name(target, env), s.value, env)
        elif self.t.optype.get(id(s)) == "view":
            augment_view(self, s, env)
        else:
            array, index = self.element(target, env)
            current = from_numpy(array[index], self.dtype(array))
            self.store(array, index, self.binop(s, s.op, current, s.value, env), s)

    def bind(self, target, value, env, stmt):
        if isinstance(target, ast.Name):
            if stmt is not None:
                t, weak = self.t.types[id(stmt.value)]
                if weak:  # a literal stored in a variable becomes int64, float64 or bool
                    value = convert(value, strong(t, True, value))
            env[target.id] = value
        elif isinstance(target, ast.Subscript) and is_view(target):
            copy_into_view(self, target, value, env, stmt)
        elif isinstance(target, ast.Subscript):
            array, index = self.element(target, env)
            self.store(array, index, value, stmt)
        else:
            for sub, v in zip(target.elts, value):
                self.bind(sub, v, env, None)

    def store(self, array, index, value, stmt):
        array[index] = convert(value, self.dtype(array))
        mask = self.masks.get(id(array))
        if mask is not None:
            inexact = stmt is not None and id(stmt) in self.t.inexact
            rtol = (RTOL16 if isinstance(value, np.float16) else RTOL32
                    if isinstance(value, (np.float32, np.complex64)) else RTOL64)
            mask[index] = rtol if inexact else 0.0

    def s_If(self, s, env):
        self.block(s.body if truth(self.eval(s.test, env)) else s.orelse, env)

    def s_Return(self, s, env):
        raise _Return(None if s.value is None else self.eval(s.value, env))

    def s_Break(self, s, env):
        raise _Break

    def s_Continue(self, s, env):
        raise _Continue

    def s_While(self, s, env):
        while truth(self.eval(s.test, env)):
            self.tick()
            try:
                self.block(s.body, env)
            except _Break:
                break
            except _Continue:
                pass

    def s_For(self, s, env):
        loop_t = self.t.optype[id(s)]
        if not isinstance(loop_t, str):
            return self.for_each(s, loop_t, env)  # arrays, tuples, enumerate, zip (support.iterables)
        bounds = [int(self.eval(a, env)) for a in s.iter.args]
        if len(bounds) == 3 and bounds[2] == 0:
            return  # a step that is 0 at run time runs no iterations (docs)
        for j in range(*bounds):
            self.tick()
            if convert(j, loop_t) != j:
                raise Undefined(f"loop value {j} does not fit {loop_t}")
            env[s.target.id] = j
            try:
                self.block(s.body, env)
            except _Break:
                break
            except _Continue:
                pass

    # -- expressions --------------------------------------------------------------------------
    def eval(self, node, env):
        if id(node) in self.t.consts:
            value = self.t.consts[id(node)]
            return Weak(value) if type(value) is int else value
        return getattr(self, "e_" + type(node).__name__)(node, env)

    def name(self, node, env):
        if node.id in env:
            return unified(env[node.id], self.t.types.get(id(node), (None,))[0])
        if isinstance(self.t.types[id(node)][0], (Arr, FnPtr)):  # no default value: not modelled
            raise Undefined(f"array or pointer variable {node.id} read where it is unassigned")
        return zero(self.t.types[id(node)][0])  # assigned on other paths only: 0 (docs)

    def e_Name(self, node, env):
        return self.name(node, env)

    def e_BinOp(self, node, env):
        return self.binop(node, node.op, self.eval(node.left, env), node.right, env)

    def binop(self, node, op, left, right_node, env):
        return self.arith(op, self.t.optype[id(node)], left, self.eval(right_node, env),
                          self.t.consts.get(id(right_node)))

    def arith(self, op, c, left, right, right_const=None):
        """`left op right` computed in the common type `c`."""
        if is_complex(c):
            from .complexes import evaluate_binop
            return evaluate_binop(op, left, right, c, right_const)
        a, b = convert(left, c), convert(right, c)
        if isinstance(op, ast.Div):
            if not is_float(c):
                a, b = np.float64(a), np.float64(b)
            return a / b  # by zero: IEEE's ±inf or NaN, as NumPy
        if c == "bool" and not isinstance(op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
            a, b, c = int(a), int(b), "int64"
        if is_float(c):
            return self.float_op(op, a, b)
        if isinstance(op, (ast.FloorDiv, ast.Mod)) and b == 0:
            return 0  # NumPy's result (docs); Python raises ZeroDivisionError
        if isinstance(op, ast.Pow):
            return 1 if b < 0 else wrap(pow(a, b, 1 << BITS[c]), c)  # the docs: a negative runtime exponent gives 1
        if isinstance(op, (ast.LShift, ast.RShift)) and not 0 <= b < BITS[c]:
            return -1 if isinstance(op, ast.RShift) and a < 0 else 0  # every bit shifted out (docs)
        result = FOLD[type(op)](a, b)
        return bool(result) if c == "bool" else wrap(result, c)

    def float_op(self, op, a, b):
        if isinstance(op, (ast.FloorDiv, ast.Mod)) and b == 0:  # the docs: NumPy's x / 0.0, and NaN for %
            return a / b if isinstance(op, ast.FloorDiv) else type(a)(np.nan)
        if isinstance(op, ast.Pow):
            return np.power(a, b)
        return FOLD[type(op)](a, b)

    def e_UnaryOp(self, node, env):
        value = self.eval(node.operand, env)
        t = self.t.types[id(node)][0]
        if isinstance(node.op, ast.Not):
            return not truth(value)
        if isinstance(node.op, ast.UAdd):
            return value
        if isinstance(node.op, ast.USub):
            return wrap(-value, t) if is_int(t) else -value
        return (not value) if t == "bool" else wrap(~value, t)

    def e_Compare(self, node, env):
        types = self.t.optype[id(node)]
        left = self.eval(node.left, env)
        for op, right_node, c in zip(node.ops, node.comparators, types):
            right = self.eval(right_node, env)
            if c is None:  # an out-of-range literal compared exactly
                a, b = exact(left), exact(right)
            else:
                a, b = convert(left, c), convert(right, c)
            if not COMPARE[type(op)](a, b):
                return False
            left = right
        return True

    def e_BoolOp(self, node, env):
        c = self.t.optype[id(node)]
        stop = isinstance(node.op, ast.Or)
        for v in node.values:
            value = self.eval(v, env)
            if truth(value) == stop:
                return convert(value, c)
        return convert(value, c)

    def e_IfExp(self, node, env):
        c = self.t.optype[id(node)]
        value = self.eval(node.body if truth(self.eval(node.test, env)) else node.orelse, env)
        return value if isinstance(c, (Arr, FnPtr)) else convert(value, c)

    def e_Tuple(self, node, env):
        out = []
        for e, t in zip(node.elts, self.t.types[id(node)][0].elts):
            out.append(convert(self.eval(e, env), t) if isinstance(t, str) else self.eval(e, env))
        return tuple(out)

    def e_Attribute(self, node, env):
        array = self.eval(node.value, env)
        if node.attr in ("real", "imag"):
            from .complexes import part
            return part(array, node.attr)
        if node.attr == "shape":
            return tuple(array.shape)
        return array.ndim if node.attr == "ndim" else array.size

    def e_Subscript(self, node, env):
        if is_view(node):
            return eval_view(self, node, env)
        base = self.eval(node.value, env)
        if isinstance(base, tuple):
            if self.t.optype.get(id(node)) == "run-time index":
                return self.tuple_item(base, self.eval(node.slice, env))
            return base[self.t.consts[id(node.slice)]]
        if len(node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]) < base.ndim:
            return eval_view(self, node, env)  # `m[i]`: a row
        array, index = self.element(node, env, base)
        return from_numpy(array[index], self.dtype(array))

    def element(self, node, env, array=None):
        if array is None:
            array = self.eval(node.value, env)
        nodes = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        index = []
        for n, extent in zip(nodes, array.shape):
            i = int(self.eval(n, env))
            if not -extent <= i < extent:
                raise Undefined(f"index {i} out of bounds for extent {extent}")
            index.append(i + extent if i < 0 else i)
        return array, tuple(index)

    @staticmethod
    def dtype(array):
        return "bool" if array.dtype == np.bool_ else array.dtype.name

    def e_Call(self, node, env):
        f = node.func
        if is_view_method(node):
            return eval_method(self, node, env)
        t = self.t.types[id(node)][0]
        if isinstance(self.t.types.get(id(f), (None,))[0], FnPtr):
            return self.call_pointer(node, env)
        if isinstance(t, FnPtr) and isinstance(f, ast.Attribute) and f.attr == "deferred":
            for a in node.args[1:]:
                if not isinstance(a, ast.Tuple) or id(a) in self.t.types:
                    self.eval(a, env)  # the values only give their types, but must be defined
            return Pointer(*self.t.optype[id(node)])
        if isinstance(f, ast.Name):
            if f.id in ("min", "max"):
                return self.minmax(node, f.id, env)
            if f.id == "abs":
                v = self.eval(node.args[0], env)
                if isinstance(v, (complex, np.complexfloating)):
                    from .complexes import evaluate_abs
                    return evaluate_abs(v)
                return wrap(abs(v), t) if is_int(t) else abs(v)
            if f.id == "len":
                return self.eval(node.args[0], env).shape[0]
            if f.id == "complex":
                from .complexes import evaluate_call
                return evaluate_call([self.eval(a, env) for a in node.args])
            if f.id in ("int", "float", "bool"):
                return convert(self.eval(node.args[0], env), t)
            if f.id in PY_BUILTINS and f.id not in self.program.funcs:
                return self.call_py_builtin(node, f.id, env)
            return self.call_func(node, env)
        if f.value.id == "math":
            return self.call_math(node, f.attr, env)
        if f.value.id == "cmath":
            from .complexes import evaluate_cmath
            return evaluate_cmath(f.attr, self.eval(node.args[0], env))
        if f.attr == "conjugate":
            return np.conj(self.eval(f.value, env))  # the parts' signs: exact
        if f.value.id == "np" and f.attr not in TYPE_NAMES:
            return self.call_numpy(node, f.attr, env)
        if f.attr in ("index", "ndrange"):
            return 0 if f.attr == "index" else 1
        if f.attr in BIT_COUNTS:
            return bit_count(f.attr, self.eval(node.args[0], env), self.t.optype[id(node)])
        return convert(self.eval(node.args[0], env), t)

    def minmax(self, node, which, env):
        c = self.t.optype[id(node)]
        values = [convert(self.eval(a, env), c) for a in node.args]
        result = values[0]
        for v in values[1:]:
            if (v < result) if which == "min" else (v > result):  # Python's tie and NaN behaviour
                result = v
        return result

    def call_func(self, node, env):
        argtypes, values = [], []
        for a in node.args:
            t, weak = self.t.types[id(a)]
            v = self.eval(a, env)
            st = strong(t, weak, self.t.consts.get(id(a)))
            argtypes.append(st)
            values.append(convert(v, st) if isinstance(st, str) else v)
        callee = self.program.typed(node.func.id, tuple(argtypes))
        return self.call(callee, values)

    def call_pointer(self, node, env):
        """In the reference, a pointer is its function: called with the arguments converted to the
        pointer's parameter types."""
        pointer = self.eval(node.func, env)
        values = []
        for a, want in zip(node.args, pointer.argtypes):
            v = self.eval(a, env)
            values.append(convert(v, want) if isinstance(want, str) else v)
        return self.call(self.program.typed(pointer.name, pointer.argtypes), values)

    def call_math(self, node, name, env):
        values = [self.eval(a, env) for a in node.args]
        t = self.t.types[id(node)][0]
        if name in PRED_MATH:
            return bool(getattr(np, name)(float(values[0])))
        if name in INT_MATH:  # a float rounds to int64 (saturating); an integer converts as int(x)
            x = values[0]
            return convert(getattr(np, name)(x) if isinstance(x, (float, np.floating)) else x, t)
        args = [float(convert(v, t)) for v in values]
        if name == "fma":
            if not all(math.isfinite(x) for x in args):
                raise Undefined("fma of non-finite values")
            return convert(float(Fraction(args[0]) * Fraction(args[1]) + Fraction(args[2])), t)
        if name in ("radians", "degrees"):  # CPython's x * (pi / 180) in float64, then rounded
            return convert(args[0] * (math.pi / 180 if name == "radians" else 180 / math.pi), t)
        if name == "log" and len(args) == 2:  # CPython's log(x) / log(base); IEEE where Python raises (docs)
            return convert(float(np.float64(np.log(np.float64(args[0]))) / np.log(np.float64(args[1]))), t)
        ieee = IEEE.get(name)
        if ieee is not None:  # where Python raises, kernels give C's IEEE result (docs)
            return convert(float(ieee(*[np.float64(x) for x in args])), t)
        try:
            return convert(getattr(math, name)(*args), t)
        except (ValueError, OverflowError) as exc:
            raise Undefined(f"math.{name}{tuple(values)}: {exc}")


@dataclass(frozen=True)
class Pointer:
    """A function pointer's value: the function and the signature it was specialized for."""
    name: str
    argtypes: tuple


IEEE = {"sqrt": np.sqrt, "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log": np.log, "log2": np.log2,
        "log10": np.log10, "log1p": np.log1p, "pow": np.power, "sin": np.sin, "cos": np.cos, "tan": np.tan,
        "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "atan2": np.arctan2, "hypot": np.hypot,
        "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "asinh": np.arcsinh, "acosh": np.arccosh,
        "atanh": np.arctanh, "fmod": np.fmod, "fabs": np.fabs, "copysign": np.copysign, "cbrt": np.cbrt}


def _constant(node):
    """A module-level number: a Python literal is weak (like a literal); a NumPy scalar keeps its dtype."""
    value = ast.literal_eval(node) if not isinstance(node, ast.Call) else None
    if value is not None:
        if isinstance(value, bool) or isinstance(value, (int, float)):
            return None, True, value
        raise Undefined("global constant")
    t = TYPE_NAMES[node.func.attr]
    return t, False, convert(ast.literal_eval(node.args[0]), t)


def exact(value):
    """A value for an exact comparison: Python int or float (Python compares those exactly)."""
    return float(value) if isinstance(value, (float, np.floating)) else int(value)


def TYPE_ANNOTATION(node):
    if isinstance(node, ast.Name):
        return {"int": "int64", "float": "float64", "bool": "bool"}[node.id]
    return TYPE_NAMES[node.attr]


COMPARE = {ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b,
           ast.GtE: lambda a, b: a >= b, ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b}
