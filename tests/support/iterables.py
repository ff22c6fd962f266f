"""The reference's `for` loops over arrays, tuples, `enumerate` and `zip`, and tuples indexed at run time, as
docs/frontend.md defines them ("What `for` iterates over"), written independently of gpuc: a typing mixin of
support.typer.Typer and an evaluation mixin of support.reference.Evaluator.

A `Seq` is what a loop iterates over. A tuple whose elements differ in type, anywhere in it, makes the loop
*unrolled*: the reference copies the target and body once per position (as many as the shortest tuple) and
types and runs each copy as straight-line code, the copy for position k with that position's types; where a
part of the source (an array, a range) may end first, the loop may leave before any copy. Other loops are
typed to the fixpoint of their header like `range` loops. Values: an array element is read when its
iteration starts, enumerate counts in int64 from its start, zip stops at the shortest part.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass

from .numeric import Arr, Expected, Tup, Undefined, convert, fits, from_numpy, is_int, wrap


@dataclass(frozen=True, eq=False)
class Seq:
    kind: str           # "range", "array", "rows" (of an N-D array), "tuple", "enumerate" or "zip"
    node: object        # the iterated expression (for enumerate: its start, or None)
    types: tuple = ()   # range: (loop type,); array: (dtype,); tuple: the element types
    parts: tuple = ()   # enumerate: (inner,); zip: the parts

    def element(self, k=None):
        """The element type (at position k of an unrolled loop)."""
        if self.kind in ("range", "array", "rows"):
            return self.types[0]
        if self.kind == "tuple":
            return self.types[0] if k is None else self.types[k]
        if self.kind == "enumerate":
            return Tup(("int64", self.parts[0].element(k)))
        return Tup(tuple(p.element(k) for p in self.parts))

    @property
    def length(self):
        """The number of positions of an unrolled loop: the shortest tuple's length."""
        if self.kind == "tuple":
            return len(self.types)
        lengths = [p.length for p in self.parts if p.length is not None]
        if self.kind == "zip" and not self.parts:
            return 0
        return min(lengths) if lengths else None

    @property
    def static(self):
        """Whether every part is a tuple (nothing ends at run time)."""
        if self.kind == "tuple":
            return True
        return self.kind in ("enumerate", "zip") and all(p.static for p in self.parts)

    @property
    def unrolled(self):
        if self.kind == "tuple":
            return len(set(self.types)) != 1
        if self.kind == "zip" and not self.parts:
            return True
        return any(p.unrolled for p in self.parts)


class IterableTyping:
    """The typing of loops over sequences (a mixin of support.typer.Typer)."""

    def for_each(self, s, env):
        if s.orelse:
            raise Undefined("for-else")
        seq = self.seq(s.iter, env)
        if not seq.unrolled:
            self.typed.optype[id(s)] = (seq, None)

            def body(h):
                self.bind(s.target, seq.element(), False, None, h, None)
                return self.block(s.body, h)
            return self.loop(env, body)
        key = (id(s), seq.length)
        copies = self.typed.copies.get(key)
        if copies is None:
            copies = self.typed.copies[key] = [copy.deepcopy((s.target, s.body)) for _ in range(seq.length)]
        self.typed.optype[id(s)] = (seq, copies)
        exits = []
        for k, (target, body) in enumerate(copies):
            if not seq.static:
                exits.append(env)  # an array or range part may have ended
            self.loops.append(([], []))
            h = dict(env)
            self.bind(target, seq.element(k), False, None, h, None)
            end = self.block(body, h)
            breaks, continues = self.loops.pop()
            exits += breaks
            env = self.join_envs([end, *continues])
            if env is None:
                break
        return self.join_envs([*exits, env])

    def seq(self, node, env):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id not in env:
            name = node.func.id
            if name == "range":
                if node.keywords or not 1 <= len(node.args) <= 3:
                    raise Undefined("range arity")
                operands = []
                for a in node.args:
                    t, weak = self.expr(a, env)
                    value = self.typed.consts.get(id(a))
                    if not (is_int(t) or (weak and isinstance(value, int) and not isinstance(value, bool))):
                        raise Undefined(f"range over {t}")
                    operands.append((t, weak, value))
                return Seq("range", node, (self.range_type(operands),))
            if name == "enumerate":
                return self.enumerate_seq(node, env)
            if name == "zip":
                if node.keywords:
                    raise Expected("zip keyword", "zip takes no keywords")
                return Seq("zip", None, (), tuple(self.seq(a, env) for a in node.args))
        t, _ = self.expr(node, env)
        if isinstance(t, Arr):
            if t.ndim != 1:  # its rows: views of one dimension less (docs: What `for` iterates over)
                return Seq("rows", node, (Arr(t.dtype, t.ndim - 1),))
            return Seq("array", node, (t.dtype,))
        if isinstance(t, Tup):
            return Seq("tuple", node, t.elts)
        raise Expected("iterate", f"a {t}")

    def enumerate_seq(self, node, env):
        if len(node.args) == 2 and not node.keywords:
            start = node.args[1]
        elif len(node.args) == 1 and [k.arg for k in node.keywords] in ([], ["start"]):
            start = node.keywords[0].value if node.keywords else None
        else:
            raise Undefined("enumerate arguments")
        inner = self.seq(node.args[0], env)
        if start is not None:
            t, weak = self.expr(start, env)
            value = self.typed.consts.get(id(start))
            if weak:
                if isinstance(value, float) or not fits(value, "int64"):
                    raise Expected("enumerate start", f"{value!r}")
            elif not (t == "bool" or is_int(t) and t != "uint64"):  # int8 ... uint32 fit an int64
                raise Expected("enumerate start", f"a {t} start")  # the count is an int64 (uint64: convert)
        return Seq("enumerate", start, (), (inner,))

    def tuple_index(self, node, base, t, weak, value):
        """`t[i]` with a run-time integer i: the elements must have one type."""
        if weak:
            raise Undefined("a literal tuple index that is not an int")
        if not (is_int(t) or t == "bool"):
            raise Expected("tuple index", f"a {t} index")
        if not base.elts or len(set(base.elts)) != 1:
            raise Expected("tuple index", "a run-time index into a tuple of different types")
        self.typed.optype[id(node)] = "run-time index"
        return base.elts[0]


class IterableEval:
    """Running loops over sequences (a mixin of support.reference.Evaluator)."""

    def for_each(self, s, plan, env):
        seq, copies = plan
        values = self.open(seq, env)
        if copies is None:
            steps = ((s.target, s.body, v) for v in values)
        else:
            steps = ((target, body, v) for (target, body), v in zip(copies, values))
        for target, body, value in steps:
            self.tick()
            self.bind(target, value, env, None)
            try:
                self.block(body, env)
            except self.Break:
                break
            except self.Continue:
                pass

    def open(self, seq, env):
        """The iterator of `seq`'s values; the iterated expressions are evaluated now, in Python's order."""
        if seq.kind == "range":
            bounds = [int(self.eval(a, env)) for a in seq.node.args]
            if len(bounds) == 3 and bounds[2] == 0:
                return iter(())  # a run-time step of 0 runs no iterations (docs)
            return self.range_values(range(*bounds), seq.types[0])
        if seq.kind == "array":
            array, dtype = self.eval(seq.node, env), seq.types[0]
            return (from_numpy(array[i], dtype) for i in range(array.shape[0]))
        if seq.kind == "rows":  # no copy: each row a view of the array
            array = self.eval(seq.node, env)
            return (array[i] for i in range(array.shape[0]))
        if seq.kind == "tuple":
            return iter(self.eval(seq.node, env))
        if seq.kind == "enumerate":
            inner = self.open(seq.parts[0], env)
            start = 0 if seq.node is None else wrap(int(convert(self.eval(seq.node, env), "int64")), "int64")
            return ((wrap(start + k, "int64"), v) for k, v in enumerate(inner))
        return zip(*[self.open(p, env) for p in seq.parts])

    @staticmethod
    def range_values(values, loop_t):
        for j in values:
            if convert(j, loop_t) != j:
                raise Undefined(f"loop value {j} does not fit {loop_t}")
            yield j

    @staticmethod
    def tuple_item(values, i):
        """A run-time index: negative counts from the end; outside [-n, n) the nearest end (docs)."""
        n = len(values)
        i = int(i)
        i = i + n if i < 0 else i
        return values[min(max(i, 0), n - 1)]
