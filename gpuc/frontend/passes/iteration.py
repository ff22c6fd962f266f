"""Iteration: what `for` loops run over (ranges, 1-D arrays, tuples, `enumerate`, `zip`), typed and lowered,
and tuples indexed by run-time integers.

Typing turns the iterated expression into a *source*. The loop then either runs as one body, typed to
the fixpoint of its header like every loop, or is *unrolled* where an element's type depends on its
position (a tuple whose elements differ in type, anywhere in the source): the body is copied once per
position and each copy is typed with that position's element type, so the copies are straight-line
code with a `for.inc` block after each (a `continue` goes there, a `break` to the end).

Lowering opens a source into a *cursor*: the iterables are evaluated once, before the loop, in
Python's order; the cursor gives the current element and says whether the next position holds one.
A loop over anything but a lone range counts positions 0, 1, 2, ... in one hidden int64 that its
cursors share (arrays and tuples are read at the position, enumerate adds its start to it); a range
keeps its own counter, stepped so that no value past its end is computed.
"""

from __future__ import annotations

import ast
import copy
import inspect
from dataclasses import dataclass

from ...llvm import ConstantInt
from ..core import plans
from ..core.environment import Unbound, merge
from ..core.types import PyObject
from ..core.errors import UserError
from ..core.types import (ArrayType, FunctionPointerType, GType, ScalarType, TupleType, common_type, int64, int_range, join,
                    uint64)
from ..core.types import an

# -- typing: sources -------------------------------------------------------------------------


@dataclass(frozen=True)
class RangePlan:
    """`range(...)`: the loop variable's type; start, stop and step are Python ints where the argument
    is a literal (or left out), None where it is computed at run time."""

    type: ScalarType
    start: int | None
    stop: int | None
    step: int | None


class Source:
    """What a `for` loop iterates over, as typed. `length` is the number of elements where the types
    fix it (tuples; a zip its shortest tuple), `static` whether that number is exact (no part ends at
    run time), `unrolled` whether element types differ by position, `positional` whether the cursor
    reads the loop's shared position counter."""

    length: int | None = None
    static = False
    unrolled = False
    positional = True

    def element(self, k: int | None = None) -> GType:
        """The type of the elements (of the element at position `k` of an unrolled loop)."""
        raise NotImplementedError

    def open(self, lw) -> "Cursor":
        raise NotImplementedError


@dataclass(frozen=True, eq=False)
class RangeSource(Source):
    call: ast.Call
    plan: RangePlan
    positional = False

    def element(self, k=None):
        return self.plan.type

    def open(self, lw):
        return RangeCursor(lw, self)


@dataclass(frozen=True, eq=False)
class ArraySource(Source):
    node: ast.expr
    type: ArrayType

    def element(self, k=None):
        if self.type.ndim > 1:  # the rows: views (gpuc/frontend/arrays/views.py)
            from ..arrays.views import row_type
            return row_type(self.type)
        return self.type.dtype

    def open(self, lw):
        return ArrayCursor(lw, self)


@dataclass(frozen=True, eq=False)
class TupleSource(Source):
    node: ast.expr
    type: TupleType
    static = True

    @property
    def length(self):
        return len(self.type.elements)

    @property
    def unrolled(self):
        return common_element(self.type) is None

    def element(self, k=None):
        return common_element(self.type) if k is None else self.type.elements[k]

    def open(self, lw):
        return TupleCursor(lw, self)


@dataclass(frozen=True, eq=False)
class EnumerateSource(Source):
    inner: Source
    start: ast.expr | None

    @property
    def length(self):
        return self.inner.length

    @property
    def static(self):
        return self.inner.static

    @property
    def unrolled(self):
        return self.inner.unrolled

    def element(self, k=None):
        return TupleType((int64, self.inner.element(k)))

    def open(self, lw):
        return EnumerateCursor(lw, self)


@dataclass(frozen=True, eq=False)
class ZipSource(Source):
    parts: tuple

    @property
    def length(self):
        lengths = [p.length for p in self.parts if p.length is not None]
        return min(lengths) if lengths else (None if self.parts else 0)

    @property
    def static(self):
        return all(p.static for p in self.parts)

    @property
    def unrolled(self):
        return not self.parts or any(p.unrolled for p in self.parts)

    @property
    def positional(self):
        return any(p.positional for p in self.parts)

    def element(self, k=None):
        return TupleType(tuple(p.element(k) for p in self.parts))

    def open(self, lw):
        return ZipCursor(lw, self)


def common_element(t: TupleType) -> GType | None:
    """The one type every element of `t` has (arrays of one dtype and rank join), None if they differ."""
    if not t.elements:
        return None
    result = t.elements[0]
    for e in t.elements[1:]:
        result = join(result, e)
        if result is None:
            return None
    return result


@dataclass(frozen=True, eq=False)
class LoopPlan:
    """A typed `for` loop: its source, and for an unrolled loop the (target, body) copy of each
    position that is reached (None for a loop that runs)."""

    source: Source
    copies: list | None


_ITERATE = ("loop over range(...), a 1-D array, a tuple, enumerate(...) or zip(...) of these")

#: Expressions that cannot be iterated, by AST node: what to write instead.
_NOT_ITERABLE = {
    "GeneratorExp": "generator expressions are not supported; loop over the values themselves and compute in "
                    "the loop body: for v in a: w = f(v)",
    "ListComp": "list comprehensions are not supported; loop over the values themselves and compute in the loop "
                "body: for v in a: w = f(v)",
    "List": "lists are not supported; iterate over a tuple instead: for v in (a, b, c):",
    "Dict": "dicts are not supported; iterate over a tuple of the values, or zip two tuples for pairs: "
            "for k, v in zip((k0, k1), (v0, v1)):",
    "DictComp": "dict comprehensions are not supported; " + _ITERATE,
    "Set": "sets are not supported; iterate over a tuple instead: for v in (a, b, c):",
    "SetComp": "set comprehensions are not supported; " + _ITERATE,
    "JoinedStr": "strings are not supported; " + _ITERATE,
}

_DICT_METHODS = ("items", "keys", "values")


def _call_hints() -> dict:
    hints = {
        range: "range(...) is iterated by for loops only: for i in range(n):",
        enumerate: "enumerate(...) is iterated by for loops only: for i, v in enumerate(a):",
        zip: "zip(...) is iterated by for loops only: for x, y in zip(a, b):",
        reversed: "reversed(...) is not supported; count down and index: for i in range(len(a) - 1, -1, -1): "
                  "v = a[i]",
        iter: "iter(...) is not supported; iterate over the array or tuple itself: for v in a:",
        next: "next(...) is not supported; iterate with a for loop, or index: a[0]",
        sorted: "sorted(...) is not supported (gpuc has no lists); sort into an array in place",
        map: "map(...) is not supported; call the function in the loop body: for v in a: w = f(v)",
        filter: "filter(...) is not supported; test in the loop body: for v in a: if p(v): ...",
        list: "list(...) is not supported (gpuc has no lists); iterate over the value itself, or build a tuple",
        tuple: "tuple(...) is not supported; write the tuple (a, b, c), or iterate over the value itself",
        dict: "dicts are not supported; use tuples, or zip two tuples for pairs",
        set: "sets are not supported; use a tuple",
        frozenset: "sets are not supported; use a tuple",
        str: "strings are not supported in gpuc functions",
        sum: "sum(...) of an iterable is not supported; add in a loop: for v in a: s += v",
        any: "any(...) is not supported; test in a loop: for v in a: if v: ...",
        all: "all(...) is not supported; test in a loop: for v in a: if not v: ...",
    }
    import numpy as np
    rows = "nest range loops over the shape: for i in range(a.shape[0]): for j in range(a.shape[1]): a[i, j]"
    hints.update({np.ndindex: f"np.ndindex is not supported; {rows}", np.ndenumerate: f"np.ndenumerate is not "
                  f"supported; {rows}", np.nditer: f"np.nditer is not supported; {rows}",
                  np.arange: "np.arange(...) creates an array, which gpuc functions cannot; loop over "
                             "range(start, stop, step)",
                  np.linspace: "np.linspace(...) creates an array, which gpuc functions cannot; compute the values "
                               "in a range loop: start + i * step"})
    return hints


_HINTS: dict | None = None


def call_hint(target) -> str | None:
    """What to write instead of calling `target` (a Python object) in a gpuc function, where iteration
    is the answer: builtins that make or walk iterables, NumPy's iterators, generators, Numba's prange."""
    global _HINTS
    if _HINTS is None:
        _HINTS = _call_hints()
    try:
        hint = _HINTS.get(target)
    except TypeError:  # unhashable
        hint = None
    if hint is not None:
        return hint
    if inspect.isgeneratorfunction(target):
        return ("generators are not supported in gpuc functions; compute the values in the loop body, or return "
                "a tuple from a @gpuc.func and iterate over it")
    if getattr(target, "__name__", None) == "prange" and (getattr(target, "__module__", None) or "").startswith(
            "numba"):
        return "numba's prange is not supported; use range (a kernel runs in parallel over gpuc.index())"
    return None


def type_for(typer, node: ast.For) -> None:
    """Type `for target in iterable: body` (called by the typer's visit_For)."""
    if node.orelse:
        raise UserError("for/else is not supported", hint="use a flag variable")
    source, before = iterable(typer, node.iter), typer.env
    try:
        if not source.unrolled:
            typer.typed.calls[id(node)] = LoopPlan(source, None)
            typer._loop(typer.env, node.body, target=(node.target, source.element()))
            return
        copies = _copies(typer, node, source.length)
        reached = _type_unrolled(typer, source, copies)
        typer.typed.calls[id(node)] = LoopPlan(source, copies[:reached])
    except Unbound:  # a target (a[i] with i not typed yet) in a loop still settling: skipped this round
        typer.env = before
        raise


def _copies(typer, node: ast.For, n: int) -> list:
    """The (target, body) copies of an unrolled loop's positions, made once per typed function: each
    copy's nodes get their own types, and the lowering finds the copies the typing used."""
    key = (id(node), n)
    found = typer.typed.unrolled.get(key)
    if found is None:
        found = typer.typed.unrolled[key] = [copy.deepcopy((node.target, node.body)) for _ in range(n)]
    return found


def _type_unrolled(typer, source: Source, copies: list) -> int:
    """Type each copy from the environment the previous one (and its continues) left; the loop ends
    after the last copy, at each break and, where a part of the source ends at run time, before each
    copy. Returns how many copies are reached."""
    env, exits, reached = typer.env, [], 0
    for k, (target, body) in enumerate(copies):
        if not source.static:
            exits.append(env)
        typer.loops.append(([], []))
        try:
            typer.env = dict(env)
            typer.assign(target, source.element(k), None)
            typer.visit_body(body)
        finally:
            breaks, continues = typer.loops.pop()
        reached += 1
        exits += breaks
        env = merge([typer.env] + continues)
        if env is None:
            break
    typer.env = merge(exits + [env])
    return reached


def iterable(typer, node: ast.expr) -> Source:
    """The source a `for` loop (or a part of enumerate/zip) iterates over."""
    kind = type(node).__name__
    if kind in _NOT_ITERABLE:
        raise UserError(f"cannot iterate over a {_describe(kind)} in gpuc functions", hint=_NOT_ITERABLE[kind],
                        node=node)
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
        raise UserError("cannot iterate over a string in gpuc functions", hint=_ITERATE, node=node)
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Attribute) and node.func.attr in _DICT_METHODS:
            raise UserError(f".{node.func.attr}() of a dict cannot be iterated: dicts are not supported",
                            hint=_NOT_ITERABLE["Dict"], node=node)
        callee = typer.expr(node.func)
        target = callee.value if isinstance(callee, PyObject) else None
        for builtin, make in ((range, _range_source), (enumerate, _enumerate_source), (zip, _zip_source)):
            if target is builtin:
                return make(typer, node)
    _refuse_global(typer, node)
    t = typer.value_expr(node, "the iterated value")
    if isinstance(t, ArrayType):
        return ArraySource(node, t)
    if isinstance(t, TupleType):
        return TupleSource(node, t)
    hint = "function pointers are called, not iterated" if isinstance(t, FunctionPointerType) else _ITERATE
    raise UserError(f"cannot iterate over {an(t)}", hint=hint, node=node)


def _describe(kind: str) -> str:
    return {"GeneratorExp": "generator expression", "ListComp": "list comprehension", "List": "list",
            "Dict": "dict", "DictComp": "dict comprehension", "Set": "set", "SetComp": "set comprehension",
            "JoinedStr": "string"}[kind]


def _refuse_global(typer, node) -> None:
    """A global container is not a value in gpuc functions: say how to iterate over its values."""
    if not isinstance(node, ast.Name) or node.id in typer.locals:
        return
    value = typer.typed.function.resolve(node.id)
    what = {tuple: "tuple", list: "list", dict: "dict", set: "set", frozenset: "set", str: "string",
            range: "range"}.get(type(value))
    if what is not None:
        raise UserError(f"the global {what} {node.id} cannot be iterated in gpuc functions: only numbers are "
                        "compile-time constants", hint="write the values in place, for v in (1, 2, 3):, or pass "
                        "them as a tuple argument", node=node)


def _range_source(typer, node: ast.Call) -> RangeSource:
    if node.keywords or not 1 <= len(node.args) <= 3:
        raise UserError(f"range takes 1 to 3 positional arguments, not {len(node.args) + len(node.keywords)}",
                        node=node)
    return RangeSource(node, type_range(typer, node))


def _enumerate_source(typer, node: ast.Call) -> EnumerateSource:
    start = node.args[1] if len(node.args) == 2 else None
    for k in node.keywords:
        if k.arg != "start" or start is not None:
            raise UserError("enumerate takes an iterable and a start (enumerate(a) or enumerate(a, start))",
                            node=k.value)
        start = k.value
    if not 1 <= len(node.args) <= 2:
        raise UserError(f"enumerate takes 1 or 2 arguments, not {len(node.args) + len(node.keywords)}", node=node)
    inner = iterable(typer, node.args[0])
    if start is not None:
        t = typer.value_expr(start, "the start of enumerate()")
        if not (isinstance(t, ScalarType) and (t.is_int or t.is_bool)) or t == uint64:
            raise UserError(f"the start of enumerate() counts in int64, so it must be a bool or an integer other than uint64, "
                            f"not {an(t)}", hint="convert it with int(...)", node=start)
        typer.fit(start, int64)
    return EnumerateSource(inner, start)


def _zip_source(typer, node: ast.Call) -> ZipSource:
    if node.keywords:
        raise UserError("zip takes no keyword arguments in gpuc functions (it stops at the shortest iterable)",
                        node=node.keywords[0].value)
    return ZipSource(tuple(iterable(typer, a) for a in node.args))


def type_range(typer, it: ast.Call) -> RangePlan:
    """The loop variable's type: the common type of the arguments (a literal step aside, so that
    `range(u, 0, -1)` counts a uint32 down). Every value the loop variable takes must fit it: a
    literal start must, a literal stop may lie one past the type's range in the direction of travel
    (`range(u, -1, -1)` ends at 0) and anywhere behind it, a literal step may be negative for
    unsigned types."""
    for a in it.args:
        t = typer.value_expr(a, "a range argument")
        if not (isinstance(t, ScalarType) and (t.is_int or t.is_bool)):
            raise UserError(f"range arguments must be integers, not {t}", hint="convert with int(...)", node=a)
    types, consts = typer.typed.types, typer.typed.consts
    args = [None, it.args[0], None] if len(it.args) == 1 else list(it.args) + [None] * (3 - len(it.args))
    start, stop, step = (default if a is None else int(consts[id(a)]) if typer.is_literal(a) else None
                         for a, default in zip(args, (0, None, 1)))
    typed_args = [a for a in args[:2] if a is not None] + ([args[2]] if step is None else [])
    loop_t = common_type([types[id(a)] for a in typed_args], [typer.is_weak(a) for a in typed_args])
    loop_t = int64 if loop_t.is_bool else loop_t
    if loop_t.is_float:
        names = " and ".join(sorted({str(types[id(a)]) for a in typed_args}))
        raise UserError(f"range arguments of types {names} have no common integer type",
                        hint="convert one of them, e.g. int(n) or gpuc.uint64(i)", node=it)
    lo, hi = int_range(loop_t)
    # The values lie in [start, stop) counting up and in (stop, start] counting down: a stop beyond the
    # far end only makes the loop empty, one just past the near end lets it reach the type's last value.
    up = step is None or step > 0  # a step known at run time only may be positive ...
    down = step < 0 if step is not None else loop_t.signed  # ... and, if signed, negative
    bad = [(what, value) for what, value, wrong in (
        ("start", start, start is not None and not lo <= start <= hi),
        ("stop", stop, stop is not None and (up and stop > hi + 1 or down and stop < lo - 1)),
        ("step", step, step is not None and not (lo if loop_t.signed else -hi) <= step <= hi)) if wrong]
    if bad:
        what, value = bad[0]
        raise UserError(f"the range {what} {value} does not fit the loop variable's type {loop_t}",
                        hint="convert an argument, e.g. int(n)", node=it)
    if step == 0:
        raise UserError("the range step must not be zero", node=it)
    typer.consumed(*[a for a in args if a is not None])
    return RangePlan(loop_t, start, stop, step)


def type_tuple_index(typer, index: ast.expr, base: TupleType) -> GType:
    """`t[i]` with a run-time integer i: the tuple's elements must have one type (see tuple_element)."""
    t = typer.typed.types[id(index)]
    if not (isinstance(t, ScalarType) and (t.is_int or t.is_bool)):
        raise UserError(f"tuple indices must be integers, not {t}", hint="convert with int(...)", node=index)
    if not base.elements:
        raise UserError("an empty tuple has no elements to index", node=index)
    common = common_element(base)
    if common is None:
        names = ", ".join(map(str, base.elements))
        raise UserError(f"a tuple of different types ({names}) can only be indexed with a constant: the element's "
                        "type would depend on the run-time index",
                        hint="iterate over it (for v in t: unrolls the loop per element), or give the elements "
                             "one type", node=index)
    return common


# -- lowering ----------------------------------------------------------------------------------


def lower_for(lw, node: ast.For) -> None:
    """Emit a typed `for` loop (called by the lowering's visit_For)."""
    plan = lw.typed.calls[id(node)]
    cursor = plan.source.open(lw)
    if plan.copies is not None:
        _lower_unrolled(lw, plan, cursor)
        return
    position = lw.slot(("position", id(node)), int64) if plan.source.positional else None
    if position is not None:
        lw.b.store(ConstantInt.get(lw.ctx.i64, 0), position)
    body, latch, done = (lw.fn.append_block(n) for n in ("for.body", "for.inc", "for.end"))
    lw.b.cond_br(cursor.nonempty, body, done)
    lw.b.position_at_end(body)
    at = lw.b.load(lw.ctx.i64, position) if position is not None else None
    lw.assign(node.target, cursor.value(lw, at, None), plan.source.element())
    lw.b.position_at_end(latch)
    following = None
    if position is not None:
        following = lw.b.nsw_add(lw.b.load(lw.ctx.i64, position), ConstantInt.get(lw.ctx.i64, 1))
        lw.b.store(following, position)
    lw.b.cond_br(cursor.more(lw, following, None), body, done)
    lw._loop_body(body, latch, done, node.body)


def _lower_unrolled(lw, plan: LoopPlan, cursor) -> None:
    if not plan.copies:
        return  # no element: the iterables are evaluated, the body never runs
    done, block = lw.fn.append_block("for.end"), lw.fn.append_block("for.body")
    lw.b.cond_br(cursor.nonempty, block, done)
    last = len(plan.copies) - 1
    for k, (target, body) in enumerate(plan.copies):
        lw.b.position_at_end(block)
        lw.assign(target, cursor.value(lw, ConstantInt.get(lw.ctx.i64, k), k), plan.source.element(k))
        latch = lw.fn.append_block("for.inc")
        lw.loops.append((latch, done))
        lw.body(body)
        lw.loops.pop()
        if lw.b.block.terminator is None:
            lw.b.br(latch)
        lw.b.position_at_end(latch)
        if k == last:
            lw.b.br(done)
        else:
            block = lw.fn.append_block("for.body")
            lw.b.cond_br(cursor.more(lw, ConstantInt.get(lw.ctx.i64, k + 1), k + 1), block, done)
    lw.b.position_at_end(done)


class Cursor:
    """A source opened in the lowering: `nonempty` (an i1) says whether there is a first element;
    `value(lw, at, k)` is the element at position `at` (an i64; in an unrolled loop the constant k);
    `more(lw, following, k)` says whether position `following` holds an element, stepping what the
    cursor keeps itself (a range's value)."""

    nonempty = None

    def value(self, lw, at, k):
        raise NotImplementedError

    def more(self, lw, following, k):
        raise NotImplementedError


def _true(lw, value: bool):
    return ConstantInt.get(lw.ctx.i1, int(value))


class RangeCursor(Cursor):
    """A range's own counter, guarded as docs/frontend.md says: the latch asks whether the next value is
    still short of `stop` *before* stepping, so that no value past the end is ever computed and the loop
    cannot overflow into another round (unsigned counting down, a stop at the type's edge, huge steps)."""

    def __init__(self, lw, source: RangeSource) -> None:
        it, plan = source.call, source.plan
        self.t = t = plan.type
        nodes = [None, it.args[0], None] if len(it.args) == 1 else list(it.args) + [None] * (3 - len(it.args))
        start, self.stop, self.step = (value if value is not None else lw.operand(a, t)
                                       for a, value in zip(nodes, (plan.start, plan.stop, plan.step)))
        start = lw.const(t, start) if isinstance(start, int) else start
        self.start = start
        self.counter = lw.slot(("range", id(it)), t)
        lw.b.store(start, self.counter)
        self.nonempty = _range_guard(lw, start, self.stop, self.step, t)

    def value(self, lw, at, k):
        i = lw.b.load(lw.ltype(self.t), self.counter)
        if self.t.signed and isinstance(self.step, int):
            # Each value yielded lies between start and stop: said where the body starts, this lets LLVM
            # see that a counter from a non-negative start (a tile's) never indexes from the end, also
            # where the body is split into work-item loops that load the counter again.
            bound = _compare(lw, ">=", i, self.start, self.t) if self.step > 0 else _compare(lw, ">", i, self.stop, self.t)
            if not isinstance(bound, ConstantInt):
                lw.b.call(lw.declare("llvm.assume", lw.ctx.void, [lw.ctx.i1]), [bound])
        return i

    def more(self, lw, following, k):
        i = lw.b.load(lw.ltype(self.t), self.counter)
        more, after = _range_step(lw, i, self.stop, self.step, self.t)
        lw.b.store(after, self.counter)
        return more


class ArrayCursor(Cursor):
    def __init__(self, lw, source: ArraySource) -> None:
        self.t = source.type
        self.array = lw.expr(source.node)
        self.n = lw.b.extract_value(self.array, 1)
        self.nonempty = lw.b.icmp("sgt", self.n, ConstantInt.get(lw.ctx.i64, 0))

    def value(self, lw, at, k):
        # the position is never negative: read as unsigned, it needs no end-relative adjustment
        if self.t.ndim > 1:
            from ..arrays.views import row
            return row(lw, self.array, self.t, at)
        return lw.load_element(lw.element_ptr(self.array, self.t, [(at, uint64)]), self.t.dtype)

    def more(self, lw, following, k):
        return lw.b.icmp("slt", following, self.n)


class TupleCursor(Cursor):
    def __init__(self, lw, source: TupleSource) -> None:
        self.t = source.type
        self.tuple = lw.expr(source.node)
        self.nonempty = _true(lw, len(self.t.elements) > 0)

    def value(self, lw, at, k):
        if k is not None:
            return lw.b.extract_value(self.tuple, k)
        return tuple_element(lw, self.tuple, self.t, at, uint64)

    def more(self, lw, following, k):
        n = len(self.t.elements)
        if k is not None:
            return _true(lw, k < n)
        return lw.b.icmp("ult", following, ConstantInt.get(lw.ctx.i64, n))


class EnumerateCursor(Cursor):
    def __init__(self, lw, source: EnumerateSource) -> None:
        self.source = source
        self.inner = source.inner.open(lw)  # Python evaluates the iterable, then the start
        self.start = lw.operand(source.start, int64) if source.start is not None else None
        self.nonempty = self.inner.nonempty

    def value(self, lw, at, k):
        count = at if self.start is None else lw.b.add(self.start, at)
        return lw.make_tuple([count, self.inner.value(lw, at, k)], self.source.element(k))

    def more(self, lw, following, k):
        return self.inner.more(lw, following, k)


class ZipCursor(Cursor):
    def __init__(self, lw, source: ZipSource) -> None:
        self.source = source
        self.parts = [p.open(lw) for p in source.parts]
        self.nonempty = self._all(lw, [p.nonempty for p in self.parts])

    @staticmethod
    def _all(lw, flags):
        result = flags[0] if flags else _true(lw, False)
        for f in flags[1:]:
            result = lw.b.and_(result, f)
        return result

    def value(self, lw, at, k):
        return lw.make_tuple([p.value(lw, at, k) for p in self.parts], self.source.element(k))

    def more(self, lw, following, k):
        return self._all(lw, [p.more(lw, following, k) for p in self.parts])


def tuple_element(lw, value, t: TupleType, index, index_t: ScalarType):
    """`t[i]` for a run-time integer i, as documented: a negative i counts from the end as in Python, and
    an i outside [-n, n) reads the nearest end (the last element past the end, the first before the
    start) -- Python raises IndexError; gpuc has no exceptions, and a tuple read never leaves the tuple.
    Straight-line selects, no memory: element k is taken where i (made non-negative) is at least k."""
    b, n = lw.b, len(t.elements)
    if index_t.is_bool:
        index, index_t = lw.convert(index, index_t, int64), int64
    if index_t.signed:
        zero = ConstantInt.get(index.type, 0)
        index = b.select(b.icmp("slt", index, zero), b.add(index, ConstantInt.get(index.type, n)), index)
    predicate = "sge" if index_t.signed else "uge"
    result = b.extract_value(value, 0)
    for k in range(1, n):
        at_least = b.icmp(predicate, index, ConstantInt.get(index.type, k))
        result = b.select(at_least, b.extract_value(value, k), result)
    return result


def _compare(lw, op: str, a, b, t: ScalarType):
    """`a op b` for a value `a` of `t` and `b` a value of `t` or a Python int (maybe just outside t)."""
    if isinstance(b, int):
        exact = plans.exact_compare(op, t, None, b)
        if exact is not None:
            return ConstantInt.get(lw.ctx.i1, int(exact))
        b = lw.const(t, b)
    return lw.b.icmp(plans.ICMP[(op, t.signed)], a, b)


def _range_guard(lw, start, stop, step, t: ScalarType):
    """Whether range(start, stop, step) yields anything (a zero step at run time yields nothing)."""
    if isinstance(step, int):
        return _compare(lw, "<" if step > 0 else ">", start, stop, t)
    b, zero = lw.b, ConstantInt.get(step.type, 0)
    if not t.signed:
        return b.and_(b.icmp("ne", step, zero), _compare(lw, "<", start, stop, t))
    up = b.and_(b.icmp("sgt", step, zero), _compare(lw, "<", start, stop, t))
    down = b.and_(b.icmp("slt", step, zero), _compare(lw, ">", start, stop, t))
    return b.or_(up, down)


def _range_step(lw, i, stop, step, t: ScalarType):
    """(whether the value after `i` is still yielded, that value). Counting up it is iff
    stop - 1 - i >= step, counting down iff i - (stop + 1) >= -step, both computed as unsigned
    (exact: the differences lie in [0, 2**bits)). The next value is used only when it is yielded,
    and then lies between i and stop, so adding the step's bits cannot wrap."""
    b, zero = lw.b, ConstantInt.get(i.type, 0)
    lo, hi = int_range(t)
    if isinstance(step, int) and abs(step) == 1 and not (isinstance(stop, int) and not lo <= stop <= hi):
        # i is short of stop, so i +- 1 cannot overflow: the canonical loop the optimizer knows best
        one = ConstantInt.get(i.type, 1)
        if step > 0:
            following = b.nsw_add(i, one) if t.signed else b.nuw_add(i, one)
        else:
            following = b.nsw_sub(i, one) if t.signed else b.sub(i, one)
        return _compare(lw, "<" if step > 0 else ">", following, stop, t), following
    increment = lw.bits(t, step) if isinstance(step, int) else step
    if isinstance(step, int) and step < 0:
        more = _range_more(lw, i, stop, lw.bits(t, -step), t, up=False)
    elif isinstance(step, int) or not t.signed:
        more = _range_more(lw, i, stop, increment, t, up=True)
    else:
        more = b.select(b.icmp("slt", step, zero), _range_more(lw, i, stop, b.sub(zero, step), t, up=False),
                        _range_more(lw, i, stop, step, t, up=True))
    return more, b.add(i, increment)


def _range_more(lw, i, stop, distance, t: ScalarType, up: bool):
    """Whether a step of `distance` (unsigned) from i stays short of stop, in the direction `up`."""
    b, one = lw.b, ConstantInt.get(i.type, 1)
    if up:
        last = lw.bits(t, stop - 1) if isinstance(stop, int) else b.sub(stop, one)
        return b.icmp("uge", b.sub(last, i), distance)
    first = lw.bits(t, stop + 1) if isinstance(stop, int) else b.add(stop, one)
    return b.icmp("uge", b.sub(i, first), distance)
