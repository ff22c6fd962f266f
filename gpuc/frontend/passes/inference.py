"""Type inference: walk a function's AST for one signature, give every expression and variable a type.

Variables may be rebound to a value of another type (each (name, type) pair gets its own storage),
but where paths join (after if/else, at loop headers) a variable must have one type: a variable
with different types on joining paths is an error where it is next read. Every branch types from
its own copy of the environment; joins merge the copies (`merge`), and a loop is typed until its
header's environment settles.

Python literals (and expressions of literals, folded here) are *weak*: they take the type of what
they meet, and are materialized at that type by the lowering, so a literal is never first squeezed
into int64. Wherever a literal takes a type, `Typer.fit` checks that it is representable.
"""

from __future__ import annotations

import ast
import inspect
import operator
import math
from dataclasses import dataclass, field

from ..core.errors import LocatingVisitor, UserError, located
from ..core.functions import _NOT_FOUND, GpucFunction, symbol_name
from ..core.types import NUMBERS, ComplexType, PyObject  # complex numbers: complex.py
from ..core.types import (POINTER_USES, ArrayType, FunctionPointerType, GType, NoneType, ScalarType, TupleType, as_type,
                    boolean, common_type, holds_pointer, int64, int_range, join, none, promote, unify)
from ..core import plans, registry
from ..core.environment import Conflict, Partial, Unbound, different_types_hint, holds_array_only, merge, types_of
from ..numeric import arithmetic as B
from ..core import intrinsics
from . import iteration
from ..arrays import views
from ..core.types import an


@dataclass
class TypedFunction:
    """The typing result for one function and signature, read by the lowering."""

    function: GpucFunction
    signature: tuple
    symbol: str
    types: dict = field(default_factory=dict)        # id(expr) -> GType
    weak: set = field(default_factory=set)           # id(expr) of Python-literal (NEP 50 "weak") values
    consts: dict = field(default_factory=dict)       # id(expr) -> Python constant value
    calls: dict = field(default_factory=dict)        # id(Call) -> (handler, plan)
    slots: dict = field(default_factory=dict)        # id(Name) -> (name, type)
    positions: dict = field(default_factory=dict)    # id(index) -> constant position of a tuple index
    big: dict = field(default_factory=dict)          # id(expr) -> literal >= 2**63 not yet given a type it fits
    reached: set = field(default_factory=set)        # id(stmt) of statements that are typed (reachable)
    returns: list = field(default_factory=list)      # (type, weak, node)
    requests: dict = field(default_factory=dict)     # (function, signature) -> (TypedFunction, kernel, location)
                                                     # of each gpuc.deferred, first request first
    unrolled: dict = field(default_factory=dict)     # (id(For), n) -> [(target, body)] copies of an unrolled loop
    return_type: GType | None = None
    done: bool = False
    provisional_used: GType | None = None
    #: What recursive calls return while this function is typed again (its first typing's return type).
    assumed: GType | None = None

    @property
    def info(self):
        return self.function.source_info


class Typing:
    """One compilation's typing session: the cache of typed functions and the target."""

    def __init__(self, target) -> None:
        self.target = target  # a gpuc.targets.Target: the frontend asks it what it can compile
        self.functions: dict[tuple, TypedFunction] = {}

    def function(self, function: GpucFunction, signature: tuple) -> TypedFunction:
        key = (function, signature)
        typed = self.functions.get(key)
        if typed is not None:
            return typed
        assumed, before = None, set(self.functions)
        for attempt in range(_RETYPINGS + 1):
            for stale in [k for k in self.functions if k not in before]:  # typed under the wrong assumption
                del self.functions[stale]
            typed = self.functions[key] = TypedFunction(function, signature, symbol_name(function, signature))
            typed.assumed = assumed
            try:
                Typer(self, typed).run()
            except _Retype as retype:
                if attempt == _RETYPINGS:
                    raise located(retype.error, typed.info) from None
                assumed = retype.returns  # as Numba does: type it again with its recursive calls returning that
                continue
            except UserError as exc:
                raise located(exc, typed.info) from None
            return typed
        raise AssertionError("unreachable")


#: How often a recursive function is typed again when its recursive calls assumed another return type.
_RETYPINGS = 3


class _Retype(Exception):
    """A recursive function's calls assumed a return type its returns do not have: type it again."""

    def __init__(self, returns: GType, error: UserError) -> None:
        super().__init__(str(error))
        self.returns, self.error = returns, error


_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
           ast.Pow: "**", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>"}
_FOLD = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
         "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "&": operator.and_, "|": operator.or_,
         "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift}


def _fold(op: str, left, right):
    """The Python value of `left op right` for two literal operands (so `2**64` is checked like the
    literal 18446744073709551616), or None when it is not a number, too big to compute, or undefined."""
    if not all(isinstance(v, (bool, int, float, complex)) for v in (left, right)):
        return None
    if isinstance(left, int) and isinstance(right, int) and right > 256 and (
            op == "<<" and left != 0 or op == "**" and abs(left) > 1):
        return _TOO_BIG  # not computed: 2 << 2**31 alone would take 256 MiB
    try:
        return _FOLD[op](left, right)
    except (ArithmeticError, ValueError, TypeError):
        return None  # division by zero and the like are left to run time (documented as undefined)


_TOO_BIG = 1 << 1000  # stands for a result far outside 64 bits


def _fold_unary(plan, value):
    """The value of a unary operator on a literal (`~` on a bool is logical not, as documented)."""
    if plan.op == "Not" or (plan.op == "Invert" and type(value) is bool):
        return not value
    return {"USub": operator.neg, "UAdd": operator.pos, "Invert": operator.invert}[plan.op](value)


def _choose_operand(is_and: bool, nodes, consts):
    """The operand `a and b and ...` (or `or`) evaluates to, for literal operands: Python's rule."""
    for node in nodes[:-1]:
        if bool(consts[id(node)]) != is_and:
            return node
    return nodes[-1]


_CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
            "!=": operator.ne}
_UNSUPPORTED_HINTS = {
    "List": "lists are not supported; use an array argument (gpuc.Array) or a tuple",
    "ListComp": "comprehensions are not supported; write a for loop over range(...)",
    "Dict": "dicts are not supported", "Set": "sets are not supported",
    "Lambda": "lambdas are not supported; define a @gpuc.func",
    "With": "with-statements are not supported", "Try": "try/except is not supported; errors cannot be raised",
    "Raise": "raise is not supported in gpuc functions", "Global": "global is not supported; pass values as arguments",
    "Nonlocal": "nonlocal is not supported", "FunctionDef": "nested functions are not supported; define a @gpuc.func",
    "Slice": "only arrays can be sliced (a[lo:hi], a[i, :]); index tuples with integers",
    "JoinedStr": "f-strings are not supported", "Assert": "assert is not supported in gpuc functions",
    "Delete": "del is not supported", "Import": "import outside the function; use the module inside it",
    "ImportFrom": "import outside the function", "Yield": "generators are not supported",
    "Starred": "star-unpacking is not supported", "NamedExpr": "the walrus operator is not supported",
    "Match": "match is not supported; use if/elif", "ClassDef": "classes are not supported",
}


def _folds(target) -> bool:
    """Whether calls of `target` with literal arguments are folded into literals: Python's math functions
    and number builtins, which return Python numbers."""
    return getattr(target, "__module__", None) == "math" or target in (abs, min, max, int, float, bool, round, pow)


def _assigned_names(fn: ast.FunctionDef) -> set[str]:
    names = {a.arg for a in fn.args.args}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def _missing_attribute(module, name: str) -> str:
    """The module's own AttributeError message: gpuc's (and NumPy's) say what to use instead."""
    try:
        getattr(module, name)
    except AttributeError as exc:
        return str(exc)
    except Exception:  # noqa: BLE001 - a module's own __getattr__ failing otherwise: the plain message
        pass
    return f"module {module.__name__!r} has no attribute {name!r}"


def _refuse_numba_cuda(owner, name: str) -> None:
    """numba-cuda's kernel API (cuda.threadIdx, cuda.syncthreads, cuda.shared.array, ...) is an error
    whose hint names gpuc's call."""
    module = getattr(owner, "__name__", "") if inspect.ismodule(owner) else ""
    if not module.startswith("numba") or "cuda" not in module and name != "cuda":
        return
    from ..core.hints import NUMBA_CUDA_SPELLINGS
    gpuc_names = {"shared": "gpuc.shared.array(shape, dtype) (and gpuc.shared.dynamic(dtype))",
                  "local": "gpuc.local.array(shape, dtype)",
                  "atomic": "gpuc.atomic_add(a, i, v) and the other gpuc.atomic_* functions"}
    hint = gpuc_names.get(name) or NUMBA_CUDA_SPELLINGS.get(name)
    if hint is None and name == "cuda":
        hint = "use gpuc's own kernel API (docs/porting-from-numba-cuda.md)"
    if hint is not None:
        raise UserError(f"{module}.{name} is numba-cuda's; gpuc kernels do not run numba code",
                        hint=f"{hint} (docs/porting-from-numba-cuda.md)")


class Typer(LocatingVisitor):
    """Types one function body. `visit` attaches the node being visited to any UserError."""

    def __init__(self, session: Typing, typed: TypedFunction) -> None:
        self.session, self.typed = session, typed
        self.tree = typed.info.tree
        self.env: dict | None = {}
        self.loops: list[tuple[list, list]] = []   # (break envs, continue envs)
        self.locals = _assigned_names(self.tree)
        self.unsettled = 0     # how many enclosing loops are in a round before their header settled
        self.stopped = False   # whether a statement was skipped at an Unbound read in the current loop round

    # -- entry -------------------------------------------------------------------------------
    def run(self) -> None:
        fn, typed = self.tree, self.typed
        self._check_signature(fn)
        for arg, t in zip(fn.args.args, typed.signature):
            self.env[arg.arg] = (t, arg.lineno)
        self.visit_body(fn.body)
        typed.return_type = self._resolve_returns(final=True)
        self._check_big_literals()
        if self.env is not None and not isinstance(typed.return_type, NoneType):
            raise UserError(f"{fn.name} can reach its end without returning a value (it returns "
                            f"{typed.return_type} elsewhere)", hint="add a return statement at the end",
                            node=fn.body[-1])
        if typed.provisional_used is not None and typed.provisional_used != typed.return_type:
            raise _Retype(typed.return_type, UserError(
                f"the recursive calls of {fn.name} assumed it returns {typed.provisional_used}, but it returns "
                f"{typed.return_type}", hint="annotate the return type", node=fn))
        typed.done = True

    def _check_signature(self, fn: ast.FunctionDef) -> None:
        args = fn.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults:
            raise UserError("gpuc functions take plain positional parameters only (no *args, **kwargs, "
                            "keyword-only or default values)", node=fn)
        if len(args.args) != len(self.typed.signature):
            raise UserError(f"{fn.name} takes {len(args.args)} argument(s), but the signature has "
                            f"{len(self.typed.signature)}: ({', '.join(map(str, self.typed.signature))})", node=fn)
        for arg, t in zip(args.args, self.typed.signature):
            if arg.annotation is not None:
                want = self._annotation(arg.annotation)
                if want != t and not (isinstance(want, ArrayType) and want.accepts(t)):
                    raise UserError(f"parameter {arg.arg} is annotated {want}, but the argument type is {t}",
                                    hint="pass a matching argument type, or remove the annotation",
                                    node=arg.annotation)
        if self.typed.function.is_kernel:
            for arg, t in zip(args.args, self.typed.signature):
                if holds_pointer(t):
                    raise UserError(f"kernel parameter {arg.arg} has the function-pointer type {t}; kernels take "
                                    "arrays, numbers, bools and tuples of these",
                                    hint="create the pointer inside the kernel with gpuc.deferred(...), or pass it "
                                         "to a @gpuc.func", node=arg)
        if self.typed.function.is_kernel and fn.returns is not None:
            if self._annotation(fn.returns) != none:
                raise UserError("kernels return nothing; write results into an array argument", node=fn.returns)

    def _annotation(self, node: ast.AST, function: GpucFunction | None = None) -> GType:
        scope = (function or self.typed.function).py_func.__globals__
        try:
            value = eval(compile(ast.Expression(node), "<annotation>", "eval"), scope)  # noqa: S307
            if isinstance(value, str):
                value = eval(value, scope)  # noqa: S307
            return as_type(value)
        except Exception as exc:  # noqa: BLE001 - any failure is a bad annotation
            raise UserError(f"cannot use this annotation: {exc}",
                            hint="annotate with gpuc types: gpuc.float64, int, gpuc.Array[gpuc.float32, 1], ...",
                            node=node) from None

    def _resolve_returns(self, final: bool) -> GType | None:
        rets = self.typed.returns
        annotated = self._annotation(self.tree.returns) if self.tree.returns is not None else None
        if not rets:
            return annotated if annotated is not None else (none if final else None)
        strong = [t for t, w, _ in rets if not w]
        if strong:
            result = strong[0]
            for (t, w, node) in rets:  # several types unify as Numba unifies them (int64 and float64: float64)
                if w:
                    continue
                unified = unify(result, t)
                if unified is None:
                    first = next(r for r in rets if not r[1])
                    line = self.typed.info.file_line(first[2].lineno)
                    raise UserError(f"{self.tree.name} returns {first[0]} (line {line}) and {t} here",
                                    hint="return the same type everywhere, converting with float(...)/int(...)",
                                    node=node)
                result = unified
            for t, w, node in rets:  # literals are weak: a float literal makes an integer result float64
                if w and not isinstance(result, NUMBERS):
                    raise UserError(f"returns the literal of type {t} in a function that returns {result}",
                                    node=node)
                if w:
                    result = promote(result, t, False, True)
        elif isinstance(annotated, ScalarType) and all(isinstance(t, ScalarType) for t, _, _ in rets):
            result = annotated  # literals only: they take the annotated type (checked below that they fit)
        else:
            result = common_type([t for t, _, _ in rets], [True] * len(rets))
        for t, w, node in rets:
            if w:
                try:
                    self.fit(node.value, result)
                except UserError as exc:
                    exc.node = exc.node or node
                    raise
        if isinstance(annotated, ScalarType) and isinstance(result, ScalarType):
            return annotated  # a number return annotation converts what is returned, as Numba's signatures do
        if annotated is not None and annotated != result:
            raise UserError(f"{self.tree.name} is annotated to return {annotated} but returns {result}",
                            node=self.tree.returns)
        return result

    def _check_big_literals(self) -> None:
        """A literal of 2**63 or more that never met a uint64 or a float would be materialized as an int64."""
        if self.typed.big:
            node = min(self.typed.big.values(), key=lambda n: (n.lineno, n.col_offset))
            raise UserError(f"the integer {self.typed.consts[id(node)]} does not fit in int64",
                            hint="integers of 2**63 and more fit uint64 values and floats only: write "
                                 "gpuc.uint64(...) or a float", node=node)

    # -- literals ------------------------------------------------------------------------------
    def literal(self, node, value) -> None:
        """Record `node` as a weak literal with the Python value `value`."""
        self.typed.weak.add(id(node))
        self.typed.consts[id(node)] = value
        if type(value) is int and value > int_range(int64)[1]:
            self.typed.big[id(node)] = node

    def is_literal(self, node) -> bool:
        return id(node) in self.typed.weak

    def consumed(self, *nodes) -> None:
        """These literals are not materialized on their own (folded, or compared exactly)."""
        for node in nodes:
            self.typed.big.pop(id(node), None)

    def fit(self, node, t: GType) -> None:
        """`node` is used as a value of type `t`: a literal must be representable as one."""
        if self.is_literal(node) and isinstance(t, NUMBERS):
            plans.check_literal_fits(self.typed.consts[id(node)], t)
            self.consumed(node)

    # -- visiting ----------------------------------------------------------------------------
    def generic_visit(self, node: ast.AST):
        kind = type(node).__name__
        hint = _UNSUPPORTED_HINTS.get(kind, "see docs/frontend.md for the supported subset of Python")
        raise UserError(f"{kind} is not supported in gpuc functions", hint=hint)

    def visit_body(self, body: list[ast.stmt]) -> None:
        """Type `body`; a statement reading a variable a loop's later round types is skipped this round."""
        for stmt in body:
            if self.env is None:
                return  # unreachable statements are neither typed nor lowered
            self.typed.reached.add(id(stmt))
            try:
                self.visit(stmt)
            except Unbound:
                self.stopped = True  # the statement is typed again once the loop's header settles
            except UserError:
                if not self.unsettled:
                    raise
                # In a loop round before its header settled, a variable may still have its entry's type
                # (uint32 before `v = v * 0.5` makes it float64): the statement is typed again in the
                # rounds after, and its error, if it stays one, is raised from the strict round.
                self.stopped = True

    def expr(self, node: ast.expr) -> GType:
        t = self.visit(node)
        self.typed.types[id(node)] = t
        return t

    def value_expr(self, node: ast.expr, what: str = "this value") -> GType:
        t = self.expr(node)
        if isinstance(t, PyObject):
            raise UserError(f"{what} is {t}, not a value gpuc can compute with", node=node)
        if isinstance(t, NoneType):
            raise UserError(f"{what} is None (the call returns nothing)", node=node)
        return t

    def is_weak(self, node) -> bool:
        return id(node) in self.typed.weak

    # -- statements ----------------------------------------------------------------------------
    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # docstring
        self.expr(node.value)

    def visit_Pass(self, node) -> None:
        pass

    def visit_Assign(self, node: ast.Assign) -> None:
        t = self.value_expr(node.value, "the assigned value")
        for target in node.targets:
            self.assign(target, t, node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is None or not isinstance(node.target, ast.Name):
            raise UserError("annotated assignment needs a variable and a value (x: gpuc.float32 = ...)")
        want = self._annotation(node.annotation)
        t = self.value_expr(node.value, "the assigned value")
        if t != want and not (isinstance(t, NUMBERS) and isinstance(want, NUMBERS)
                              and not (isinstance(t, ComplexType) and not isinstance(want, ComplexType))) and not (
                isinstance(want, ArrayType) and want.accepts(t)):
            raise UserError(f"cannot assign {an(t)} to a variable annotated {want}", node=node.value)
        self.fit(node.value, want)
        self.typed.types[id(node)] = want  # the lowering converts the value
        self.assign(node.target, want, node.value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        target = node.target
        if isinstance(target, ast.Name):
            if not hasattr(node, "_gpuc_load"):  # one read node per statement, shared by all signatures
                node._gpuc_load = ast.copy_location(ast.Name(id=target.id, ctx=ast.Load()), target)
            lt = self.value_expr(node._gpuc_load)
        elif isinstance(target, ast.Subscript):
            lt = self.subscript(target, store=True)
            if isinstance(lt, ArrayType):
                return self.augment_view(node, lt)
        else:
            raise UserError("augmented assignment needs a variable or an array element", node=target)
        rt = self.value_expr(node.value)
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise UserError(f"operator {type(node.op).__name__} is not supported")
        plan = B.binary_plan(op, lt, rt, False, self.is_weak(node.value), self.typed.consts.get(id(node.value)))
        self.fit(node.value, plan.operand)
        self.typed.calls[id(node)] = plan
        if isinstance(plan.result, ComplexType) and not isinstance(lt, ComplexType) and not isinstance(target, ast.Name):
            raise UserError(f"the result is {an(plan.result)}, which an array of {lt} cannot hold", node=target,
                            hint="store complex numbers in a complex array (numpy.complex128), or take .real")
        if isinstance(target, ast.Name):
            self.bind(target, plan.result)
        else:
            self.typed.types[id(target)] = lt

    def augment_view(self, node: ast.AugAssign, lt: ArrayType) -> None:
        """`view op= x` (views.type_augmented): NumPy's `np.op(view, x, out=view)`."""
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise UserError(f"operator {type(node.op).__name__} is not supported")
        rt = self.value_expr(node.value)
        views.type_augmented(self, node, lt, rt, op)

    def assign(self, target: ast.expr, t: GType, value_node) -> None:
        if isinstance(target, ast.Name):
            if value_node is not None:
                self.fit(value_node, t)  # a variable holds a literal at its own type (2**63 does not fit)
            self.bind(target, t)
        elif isinstance(target, ast.Tuple):
            if not isinstance(t, TupleType):
                raise UserError(f"cannot unpack {an(t)}", hint="only tuples can be unpacked", node=target)
            if len(target.elts) != len(t.elements):
                raise UserError(f"cannot unpack {len(t.elements)} values into {len(target.elts)} targets",
                                node=target)
            self.typed.types[id(target)] = t
            for elt, et in zip(target.elts, t.elements):
                self.assign(elt, et, None)
        elif isinstance(target, ast.Subscript):
            elem = self.subscript(target, store=True)
            if isinstance(elem, ArrayType):  # a copy into a view
                self.typed.types[id(target)] = elem
                views.type_copy(self, target, elem, t, value_node)
                return
            if holds_pointer(t):
                raise UserError(f"cannot store the function pointer {t} into an array of {elem}: arrays hold "
                                "numbers and bools", hint=POINTER_USES, node=target)
            if not isinstance(t, NUMBERS) or isinstance(t, ComplexType) and not isinstance(elem, ComplexType):
                hint = ("store complex numbers in a complex array (numpy.complex128), or take .real"
                        if isinstance(t, ComplexType) else None)
                raise UserError(f"cannot store {an(t)} into an array of {elem}", hint=hint, node=target)
            if value_node is not None:
                self.fit(value_node, elem)
        else:
            raise UserError(f"cannot assign to {type(target).__name__}",
                            hint="assign to variables, tuples of variables or array elements (a[i] = ...)",
                            node=target)

    def bind(self, target: ast.Name, t: GType) -> None:
        if isinstance(t, PyObject):
            raise UserError(f"cannot store {t} in a variable", hint="use it directly where needed", node=target)
        self.env[target.id] = (t, target.lineno)
        self.typed.slots[id(target)] = (target.id, t)

    def visit_Return(self, node: ast.Return) -> None:
        if node.value is None:
            t, weak = none, False
        else:
            t = self.value_expr(node.value, "the returned value")
            weak = self.is_weak(node.value)
            if isinstance(t, ArrayType):
                views.check_returnable(t, self.typed.function.is_kernel)
            if isinstance(t, TupleType) and any(
                    not isinstance(e, (ScalarType, ComplexType, TupleType, FunctionPointerType)) for e in t.elements):
                raise UserError("returned tuples may hold numbers, bools and function pointers only")
        if self.typed.function.is_kernel and t != none:
            raise UserError("kernels return nothing; write results into an array argument")
        if self.typed.returns and (t == none) != (self.typed.returns[0][0] == none):
            raise UserError("this function returns a value on some paths and nothing on others",
                            hint="return a value everywhere (or nowhere)")
        self.typed.returns.append((t, weak, node))
        self.env = None

    def visit_If(self, node: ast.If) -> None:
        try:
            self.condition(node.test)
        except Unbound:
            # the test (an elif's, say) reads a variable a loop's later round types: it is typed again
            # then, and both branches are typed now, so that what every branch binds (a function
            # pointer) is bound after the if in this round too
            self.stopped = True
        before = self.env
        self.env = dict(before)  # each branch binds in its own copy; the join merges them
        self.visit_body(node.body)
        after_then, self.env = self.env, dict(before)
        self.visit_body(node.orelse)
        self.env = merge([after_then, self.env])

    def condition(self, node: ast.expr) -> None:
        t = self.value_expr(node, "a condition")
        self.consumed(node)  # a literal condition is decided by its Python value, never materialized
        if not isinstance(t, NUMBERS):
            hint = POINTER_USES if isinstance(t, FunctionPointerType) else "compare it, e.g. len(a) > 0"
            raise UserError(f"{an(t)} cannot be used as a condition", hint=hint, node=node)

    def _loop(self, header_env, body, test=None, target=None, forever=False) -> None:
        """Type a loop until the environment at its header settles (the header joins the entry with the
        back edges). Until then a statement that reads a variable with no single type yet is skipped: a
        later round may bring its assignment around the back edge (`if j > 0: t += v` then `v = ...`).
        A settled round that skipped nothing is final; one that skipped is repeated strictly, so that the
        read is an error -- unless an enclosing loop is itself unsettled, which then decides. Only the
        final round's returns and reached statements count."""
        outer_stopped, strict = self.stopped, False
        snapshot = (len(self.typed.returns), set(self.typed.reached), dict(self.typed.big))
        entry, tolerant_rounds = header_env, 2 * len(self.locals) + 8
        for rounds in range(tolerant_rounds + 4 * len(self.locals) + 8):
            del self.typed.returns[snapshot[0]:]
            self.typed.reached, self.typed.big = set(snapshot[1]), dict(snapshot[2])
            self.stopped = False
            breaks, continues = self._loop_round(entry, body, test, target, strict)
            # strict rounds accumulate, so they settle for certain (each variable only moves up)
            new_entry = merge([entry if strict else header_env, self.env] + continues)
            if types_of(new_entry) == types_of(entry):
                if strict or not self.stopped or self.unsettled:
                    break
                strict = True
            elif rounds >= tolerant_rounds:
                strict = True
            entry = new_entry
        else:
            raise AssertionError("the typing of a loop did not settle")
        self.stopped = outer_stopped or self.stopped
        self.env = merge(([] if forever else [entry]) + breaks)

    def _loop_round(self, entry, body, test, target, strict: bool):
        """One pass over a loop from the header environment `entry`; returns its (breaks, continues)."""
        self.unsettled += not strict
        self.loops.append(([], []))
        try:
            self.env = dict(entry)
            try:
                if test is not None:
                    self.condition(test)
            except Unbound:  # the condition reads a variable not typed yet: this round stops
                self.env, self.stopped = None, True
            if self.env is not None:
                if target is not None:
                    self.assign(target[0], target[1], None)
                self.visit_body(body)
        finally:
            self.unsettled -= not strict
            breaks, continues = self.loops.pop()
        return breaks, continues

    def visit_While(self, node: ast.While) -> None:
        if node.orelse:
            raise UserError("while/else is not supported", hint="use a flag variable")
        forever = isinstance(node.test, ast.Constant) and bool(node.test.value) is True
        self._loop(self.env, node.body, test=node.test, forever=forever)

    def visit_For(self, node: ast.For) -> None:
        iteration.type_for(self, node)

    def visit_Break(self, node) -> None:
        self._jump(node, 0)

    def visit_Continue(self, node) -> None:
        self._jump(node, 1)

    def _jump(self, node, which: int) -> None:
        if not self.loops:
            raise UserError(f"{type(node).__name__.lower()} outside a loop")
        self.loops[-1][which].append(self.env)
        self.env = None

    # -- expressions ---------------------------------------------------------------------------
    def visit_Constant(self, node: ast.Constant) -> GType:
        value = node.value
        t = plans.constant_type(value)
        if t is None:
            raise UserError(f"constants of type {type(value).__name__} are not supported",
                            hint="use numbers and bools (strings only as docstrings)")
        self.literal(node, value)
        return t

    def visit_Name(self, node: ast.Name) -> GType:
        info = self.env.get(node.id)
        if self.unsettled and (isinstance(info, (Conflict, Partial)) or info is None and node.id in self.locals):
            raise Unbound(node.id)
        if isinstance(info, Partial):
            what = "an array" if holds_array_only(info.info[0]) else "a function pointer"
            raise UserError(f"variable {node.id!r} holds {what} but is assigned on only some paths to here "
                            f"(line {self.typed.info.file_line(info.info[1])})",
                            hint=f"assign {node.id} on every path before this line ({what} has no default)")
        if info is not None:
            if isinstance(info, Conflict):
                (t1, l1), (t2, l2) = info.first, info.second
                l1, l2 = self.typed.info.file_line(l1), self.typed.info.file_line(l2)
                raise UserError(f"variable {node.id!r} has different types on different paths to here: {t1} "
                                f"(assigned at line {l1}) and {t2} (line {l2})",
                                hint=different_types_hint(node.id, t1, t2))
            self.typed.slots[id(node)] = (node.id, info[0])
            return info[0]
        if node.id in self.locals:
            raise UserError(f"variable {node.id!r} is used before it is assigned",
                            hint="assign it on every path before this line")
        return self._global_value(node.id, node)

    def _global(self, name: str, node):
        value = self.typed.function.resolve(name)
        if value is _NOT_FOUND:
            hint = ("numba-cuda's `cuda.*` kernel API has gpuc equivalents: gpuc.thread_index, gpuc.barrier, "
                    "gpuc.shared.array, ... (docs/porting-from-numba-cuda.md)" if name == "cuda" else None)
            raise UserError(f"name {name!r} is not defined", hint=hint, node=node)
        return value

    def _global_value(self, name: str, node) -> GType:
        return self.object_type(self._global(name, node), node)

    def object_type(self, value, node) -> GType:
        """The type of a compile-time Python object: constants become weak literals."""
        t = plans.constant_type(value)
        if t is not None:
            if type(value) in (bool, int, float, complex):
                self.literal(node, value)
            else:
                self.typed.consts[id(node)] = value  # a NumPy scalar: a constant of its own (strong) type
            return t
        if registry.is_known_object(value) or callable(value):
            return PyObject(value)  # an unknown callable is reported where it is called
        from ..arrays.global_arrays import global_array_type, is_global_array
        if is_global_array(value):
            return global_array_type(self, value, node)
        raise UserError(f"{type(value).__name__} object {value!r} cannot be used in gpuc functions",
                        hint="use numbers, @gpuc.func functions, math functions, gpuc types and intrinsics")

    def visit_Attribute(self, node: ast.Attribute) -> GType:
        base = self.expr(node.value)
        if isinstance(base, PyObject):
            _refuse_numba_cuda(base.value, node.attr)
            value = getattr(base.value, node.attr, _NOT_FOUND)
            if value is _NOT_FOUND:
                if inspect.ismodule(base.value):
                    hint = ("use gpuc.fma (math.fma needs Python 3.13)" if node.attr == "fma" and base.value is math
                            else None)
                    raise UserError(_missing_attribute(base.value, node.attr), hint=hint)
                raise UserError(f"{base.value!r} has no attribute {node.attr!r}")
            return self.object_type(value, node)
        if isinstance(base, ArrayType):
            t = plans.array_attribute(base, node.attr)
            if t is None:
                raise UserError(f"arrays have no attribute {node.attr!r} in gpuc functions",
                                hint="use a.shape, a.ndim, a.size or len(a), and the methods a.sum(), a.prod(), "
                                     "a.max(), a.min(), a.mean()")
            return t
        if isinstance(base, NUMBERS):  # z.real, z.imag, z.conjugate()
            from ..numeric.complex import attribute_type
            return attribute_type(self, node, base)
        raise UserError(f"{an(base)} has no attribute {node.attr!r}")

    def visit_Tuple(self, node: ast.Tuple) -> GType:
        elements = tuple(self.value_expr(e) for e in node.elts)  # a literal already has its default type
        return TupleType(elements)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> GType:
        t = self.value_expr(node.operand)
        plan = B.unary_plan(type(node.op).__name__, t)
        self.typed.calls[id(node)] = plan
        if self.is_literal(node.operand):
            self._fold_literal(node, _fold_unary(plan, self.typed.consts[id(node.operand)]), node.operand)
        return plan.result

    def _fold_literal(self, node, value, *operands) -> None:
        """An expression of literals with the Python value `value` is a literal itself (None: not folded)."""
        if value is None:
            return
        plans.constant_type(value)  # a literal expression must fit in 64 bits, like a literal
        self.consumed(*operands)
        self.literal(node, value)

    def visit_BinOp(self, node: ast.BinOp) -> GType:
        lt, rt = self.value_expr(node.left), self.value_expr(node.right)
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise UserError(f"operator {type(node.op).__name__} is not supported", hint="use + - * / // % ** & | ^")
        lw, rw = self.is_weak(node.left), self.is_weak(node.right)
        consts = self.typed.consts
        plan = B.binary_plan(op, lt, rt, lw, rw, consts.get(id(node.right)), consts.get(id(node.left)))
        self.typed.calls[id(node)] = plan
        if lw and rw:
            self._fold_literal(node, _fold(op, consts[id(node.left)], consts[id(node.right)]), node.left, node.right)
        if not self.is_literal(node):
            self.fit(node.left, plan.operand)
            self.fit(node.right, plan.operand)
        elif isinstance(consts[id(node)], complex) and not isinstance(plan.result, ComplexType):
            return plans.constant_type(consts[id(node)])  # (-8) ** (1 / 3) is complex in Python
        return plan.result

    def visit_BoolOp(self, node: ast.BoolOp) -> GType:
        types = [self.value_expr(v, "an operand of and/or") for v in node.values]
        for v, t in zip(node.values, types):
            if not isinstance(t, ScalarType):
                hint = POINTER_USES if isinstance(t, FunctionPointerType) else None
                raise UserError(f"and/or need numbers or bools, not {t}", hint=hint, node=v)
        if all(self.is_literal(v) for v in node.values):  # Python's value, and the type of the operand it is
            chosen = _choose_operand(isinstance(node.op, ast.And), node.values, self.typed.consts)
            self._fold_literal(node, self.typed.consts[id(chosen)], *node.values)
            return self.typed.types[id(chosen)]
        result = common_type(types, [self.is_weak(v) for v in node.values])
        for v in node.values:
            self.fit(v, result)
        return result

    def visit_Compare(self, node: ast.Compare) -> GType:
        """Comparisons promote their operands; a literal outside the range of the integer type it is
        compared in gives Python's exact answer (`u > -1` is True for unsigned u), as NumPy 2 does."""
        operands = [node.left] + list(node.comparators)
        for op in node.ops:
            if type(op) not in _CMPOPS:
                raise UserError(f"comparison {type(op).__name__} is not supported",
                                hint="use < <= > >= == != (is / in are not supported)")
        types = [self.value_expr(o, "a compared value") for o in operands]
        consts = self.typed.consts
        if all(self.is_literal(o) for o in operands):
            values = [consts[id(o)] for o in operands]
            try:
                result = all(_COMPARE[_CMPOPS[type(op)]](a, b) for op, a, b in zip(node.ops, values, values[1:]))
            except TypeError:  # ordering complex numbers: the plan below says so, located
                result = None
            self._fold_literal(node, result, *operands)
        plans = []
        for i, op in enumerate(node.ops):
            left, right = operands[i], operands[i + 1]
            lw, rw = self.is_literal(left), self.is_literal(right)
            plan = B.compare_plan(_CMPOPS[type(op)], types[i], types[i + 1], lw, rw,
                                  consts[id(left)] if lw else None, consts[id(right)] if rw else None)
            if plan.result is None:
                self.fit(left, plan.operand)
                self.fit(right, plan.operand)
            plans.append(plan)
        self.consumed(*operands)  # the lowering materializes literals per comparison, at its operand type
        self.typed.calls[id(node)] = plans
        return boolean

    def visit_IfExp(self, node: ast.IfExp) -> GType:
        self.condition(node.test)
        bt, ot = self.value_expr(node.body), self.value_expr(node.orelse)
        t = join(bt, ot)
        if t is None and isinstance(bt, NUMBERS) and isinstance(ot, NUMBERS):
            t = promote(bt, ot, self.is_weak(node.body), self.is_weak(node.orelse))
        if t is None:
            hint = ("point both branches to functions with the same parameter and return types"
                    if isinstance(bt, FunctionPointerType) or isinstance(ot, FunctionPointerType)
                    else "make both branches the same type")
            raise UserError(f"the two branches of this conditional expression have types {bt} and {ot}", hint=hint)
        self.fit(node.body, t)
        self.fit(node.orelse, t)
        return t

    def visit_Subscript(self, node: ast.Subscript) -> GType:
        return self.subscript(node, store=False)

    def subscript(self, node: ast.Subscript, store: bool) -> GType:
        base = self.value_expr(node.value, "the indexed value")
        index = node.slice
        if isinstance(base, TupleType):
            if store:
                raise UserError("tuples are immutable; build a new tuple instead")
            position = self._const_int(index)
            if position is None:
                return iteration.type_tuple_index(self, index, base)
            n = len(base.elements)
            if not -n <= position < n:
                raise UserError(f"tuple index {position} is out of range for a tuple of {n}", node=index)
            self.typed.positions[id(index)] = position % n
            return base.elements[position % n]
        if not isinstance(base, ArrayType):
            raise UserError(f"{an(base)} cannot be indexed", hint="only arrays and tuples can be indexed",
                            node=node.value)
        indices = views.mark_new_axes(self, index.elts if isinstance(index, ast.Tuple) else [index])
        if store:
            views.check_writable(base)
        if views.is_view(base, indices):
            return views.type_view(self, node, base, indices)
        if len(indices) != base.ndim:
            raise UserError(f"a {base.ndim}-dimensional array needs {base.ndim} indices, not {len(indices)}",
                            hint="write one integer index per dimension: a[i, j]", node=index)
        for i in indices:
            t = self.value_expr(i, "an index")
            if not (isinstance(t, ScalarType) and (t.is_int or t.is_bool)):
                raise UserError(f"array indices must be integers, not {t}", hint="convert with int(...)", node=i)
        self.typed.types[id(node)] = base.dtype
        return base.dtype

    def _const_int(self, node) -> int | None:
        t = self.expr(node)
        value = self.typed.consts.get(id(node))
        return value if isinstance(t, ScalarType) and t.is_int and type(value) is int else None

    def visit_Call(self, node: ast.Call) -> GType:
        from ..arrays.array_methods import method_call
        method = method_call(self, node)  # a.sum(), a.max(), ...
        if method is not None:
            return method
        callee = self.expr(node.func)
        handler = registry.lookup_value_call(callee)
        if handler is not None:  # a call of a value computed at run time (a function pointer)
            plan = handler.type(self, node, callee)
            self.typed.calls[id(node)] = (handler, plan)
            return plan.result
        if not isinstance(callee, PyObject):
            raise UserError(f"{an(callee)} is not callable", node=node.func)
        if node.keywords and not registry.takes_keywords(callee.value):
            raise UserError("keyword arguments are not supported in this call",
                            hint="pass arguments by position", node=node.keywords[0].value)
        target = callee.value
        if isinstance(target, GpucFunction):
            return self.call_function(node, target)
        handler = registry.lookup_call(target)
        if handler is None:
            name = getattr(target, "__qualname__", repr(target))
            if target is intrinsics.marker:
                raise UserError("gpuc.marker(...) cannot be called inside gpuc functions",
                                hint="create the marker outside, e.g. probe = gpuc.marker('my.probe', restype, "
                                     "argtypes) at module level, and call probe(...) inside", node=node.func)
            if inspect.isfunction(target) and (getattr(target, "__module__", None) or "").split(".")[0] == "gpuc":
                hint = f"gpuc.{name} is host-side API; it cannot run inside compiled code"
            elif iteration.call_hint(target) is not None:
                hint = iteration.call_hint(target)
            elif inspect.isfunction(target):
                hint = "decorate it with @gpuc.func"
            else:
                hint = ("gpuc functions call @gpuc.func functions, math functions, abs/min/max/len/int/float/"
                        "bool, gpuc types and gpuc intrinsics; write a loop instead")
            raise UserError(f"{name} cannot be called from gpuc functions", hint=hint, node=node.func)
        plan = handler.type(self, node)
        self.typed.calls[id(node)] = (handler, plan)
        if node.args and not node.keywords and all(map(self.is_literal, node.args)) and _folds(target):
            # Python's own function of Python literals gives a Python number: a (weak) literal, as in
            # NumPy 2 (`x / math.exp(0.5)` stays float32 for a float32 x); a failing call is computed as usual
            values = [self.typed.consts[id(a)] for a in node.args]
            if target is pow:  # the literal `a ** b`, folded as the operator folds it (a complex one too)
                value = _fold("**", *values)
            else:
                try:
                    value = target(*values)
                except (ArithmeticError, ValueError):
                    value = None
            if type(value) in (bool, int, float) or type(value) is complex and target is pow:
                self._fold_literal(node, value, *node.args)
                return plans.constant_type(value)  # Python's type of the value: max(0.5, 3) is the int 3
        return plan.result

    def call_function(self, node: ast.Call, target: GpucFunction) -> GType:
        if target.is_kernel:
            raise UserError(f"kernel {target.__qualname__} cannot be called from a gpuc function",
                            hint="call a @gpuc.func; kernels are entry points")
        params = target.source_info.tree.args.args
        if len(node.args) != len(params):
            raise UserError(f"{target.__qualname__} takes {len(params)} argument(s), but {len(node.args)} were given")
        sig = []
        for a, param in zip(node.args, params):
            t = self.value_expr(a, "an argument")
            if isinstance(t, TupleType) and any(isinstance(e, ArrayType) for e in t.elements):
                raise UserError("tuples holding arrays cannot be passed to functions", node=a)
            sig.append(self._declared(target, param, a, t))
        callee, result = self.callee_result(target, tuple(sig))
        self.typed.calls[id(node)] = (callee, None)
        return result

    def _declared(self, target: GpucFunction, param: ast.arg, node, t: GType) -> GType:
        """The type an argument is passed as: a number to a parameter annotated with a number type converts
        to it, as Numba converts to a declared signature (`float64` to a `gpuc.float32` parameter rounds, a
        float to an integer parameter converts as int(...) does); a literal must fit."""
        if param.annotation is None or not isinstance(t, ScalarType):
            return t
        want = self._annotation(param.annotation, target)
        if not isinstance(want, ScalarType) or want == t:
            return t
        self.fit(node, want)
        return want

    def callee_result(self, target: GpucFunction, signature: tuple) -> tuple[TypedFunction, GType]:
        """`target` typed for `signature` in this session, and what a call of it returns; for a function
        still being typed (recursion, also through pointers), what the returns seen so far say."""
        callee = self.session.function(target, signature)
        if callee.done:
            return callee, callee.return_type
        result = callee.assumed if callee.assumed is not None else Typer(self.session, callee)._resolve_returns(
            final=False)
        if result is None:
            raise UserError(f"cannot infer what the recursive call of {target.__qualname__} returns: no return "
                            "statement precedes it", hint="annotate the return type (def f(n) -> int:) or "
                            "put the base case's return first")
        callee.provisional_used = result
        return callee, result
