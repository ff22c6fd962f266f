"""Loops over arrays, tuples, `enumerate` and `zip` in generated programs, and tuples indexed at run time: a
mixin of support.progen.Generator.

A loop iterates over a *source*: a 1-D array, a tuple (written in place, a tuple variable, a kernel's
tuple argument, a func's tuple result, `a.shape`), a range inside `enumerate`/`zip`, or `enumerate` and
`zip` of these, nested two deep. Tuples are of one element type (a real loop) or of several (the loop is
unrolled): those mix types of one family (signed integers and uint32, or floats and integers), and the
body is written for a rough type of that family (int64 or float64) -- the reference decides what each
copy means. Targets unpack the elements (`for i, (x, y) in enumerate(zip(a, t)):`) or bind the tuple.
With `iteration_errors`, now and then a documented error: a uint64 `enumerate`
start, a run-time index into a tuple of different types.
"""

from __future__ import annotations

from dataclasses import dataclass

from .expressions import Ex, _fits_text
from .numeric import INTS, SCALARS, Tup, is_float, is_int

LOOP_FEATURES = {"for_array", "for_tuple", "for_enumerate", "for_zip", "tuple_runtime_index", "iteration_errors"}

#: Element types of tuples of different types, by family, and the type the loop body is written for.
FAMILIES = {"int": (("int32", "int64", "int64", "uint32"), "int64"),
            "float": (("float32", "float64"), "float64"),
            "mixed": (("int32", "int64", "float32", "float64"), "float64")}


@dataclass
class Src:
    text: str
    elem: object                # the element type (the rough type an unrolled loop's body is written for)
    positions: tuple | None     # per-position element types where the source holds tuples
    unrolled: bool = False


class LoopRules:
    """`for` over sequences; the Generator provides rng, emit, expr, cast, loop_body, range_text, ..."""

    def s_for_each(self, scope):
        if self.loop_depth >= 2 or not any(self.on(f) for f in ("for_array", "for_tuple")):
            return None
        src = self.sequence(scope, 0)
        if src is None:
            return None
        target, bound = self.loop_target(src.elem, 0)
        self.emit(f"for {target} in {src.text}:")
        return self.loop_body(scope, bound, unrolled=src.unrolled, trace=self.rng.random() < 0.7)

    def trace_values(self, bound):
        """Add the loop's values into outputs, so that every element the loop visits counts."""
        if not self.in_kernel:
            return
        for name, t in bound.items():
            if not isinstance(t, str) or self.rng.random() < 0.3:
                continue
            adds = [o for o, d in self.outs if d != "bool" and (is_float(d) or not is_float(t))]
            if adds:
                self.emit(f"{self.rng.choice(adds)}[{self.next_slot()}] += {name}")
            else:
                out = self.out_for(t)
                if out is not None:
                    self.emit(f"{out}[{self.next_slot()}] = {name}")

    def sequence(self, scope, depth):
        r = self.rng.random()
        if depth < 2 and self.on("for_enumerate") and r < 0.25:
            return self.enumerate_source(scope, depth)
        if depth < 2 and self.on("for_zip") and r < 0.5:
            parts = [self.sequence(scope, depth + 1) for _ in range(self.rng.choice([1, 2, 2, 3]))]
            if any(p is None for p in parts):
                return None
            return _zip(parts)
        if depth and self.rng.random() < 0.25:
            t = self.rng.choice(INTS)
            return Src(self.range_text(scope, t), t, None)
        if self.on("for_array") and (not self.on("for_tuple") or self.rng.random() < 0.5):
            return self.array_source()
        return self.tuple_source(scope) if self.on("for_tuple") else None

    def array_source(self):
        ones = [(n, a) for n, a in self.arrays.items() if a[1] == 1]
        if not ones:
            return None
        name, (dtype, _) = self.rng.choice(ones)
        return Src(name, dtype, None)

    def tuple_source(self, scope):
        r = self.rng.random()
        tuples = [(n, t) for n, t in scope.vars.items() if isinstance(t, Tup) and t.elts
                  and all(isinstance(e, str) for e in t.elts) and (len(set(t.elts)) == 1 or "bool" not in t.elts)]
        if r < 0.3 and tuples:
            name, t = self.rng.choice(tuples)
            return _tuple_src(name, t.elts)
        if r < 0.4 and self.arrays:
            name, (_, ndim) = self.rng.choice(list(self.arrays.items()))
            return _tuple_src(f"{name}.shape", ("int64",) * ndim)
        n = self.rng.choice([1, 2, 3, 3, 4] + ([0] if self.rng.random() < 0.05 else []))
        if self.rng.random() < 0.6:
            types = (self.rng.choice(SCALARS),) * n
        else:
            family = FAMILIES[self.rng.choice(list(FAMILIES))][0]
            types = tuple(self.rng.choice(family) for _ in range(n))
        parts = [self.value_of(scope, t) for t in types]
        text = "(" + ", ".join(parts) + ("," if n == 1 else "") + ")"
        return _tuple_src(text, types)

    def value_of(self, scope, t) -> str:
        """An expression of exactly type `t`."""
        ex = self.expr(scope, 1)
        if ex.t == t and (not ex.weak or (t == "int64" and _fits_text(ex.text, "int64")) or t in ("float64", "bool")):
            return ex.text
        cast = self.cast(ex, t)
        return cast.text if cast is not None else self.cast(Ex("1", "int64", True, 1), t).text

    def enumerate_source(self, scope, depth):
        inner = self.sequence(scope, depth + 1)
        if inner is None:
            return None
        r = self.rng.random()
        starts = [n for n, t in scope.vars.items() if t in ("int32", "int64", "uint32", "bool")]
        if r < 0.4:
            start = ""
        elif r < 0.7:
            start = f", {self.rng.choice([1, 2, 5, -1, -3, 0])}"
        elif r < 0.8:
            start = f", start={self.rng.choice([1, 3, -2])}"
        elif starts:
            name = self.rng.choice(starts)
            start = f", {name}" if self.rng.random() < 0.7 else f", start={name}"
        else:
            start = ""
        if self.on("iteration_errors") and self.rng.random() < 0.03:
            start = f", {self.rng.choice(['gpuc.uint64(1)', '1.5'])}"  # the docs: the count is an int64
        positions = None if inner.positions is None else tuple(Tup(("int64", p)) for p in inner.positions)
        return Src(f"enumerate({inner.text}{start})", Tup(("int64", inner.elem)), positions, inner.unrolled)

    def loop_target(self, t, depth):
        """(target text, {name: type}) for elements of type `t`: unpacked tuples, or one name."""
        if isinstance(t, Tup) and t.elts and (depth or self.rng.random() < 0.8):
            parts = [self.loop_target(e, depth + 1) for e in t.elts]
            text = ", ".join(p[0] for p in parts) + ("," if len(parts) == 1 else "")
            bound = {}
            for _, names in parts:
                bound.update(names)
            return (f"({text})" if depth else text), bound
        name = self.fresh("e")
        return name, {name: t}

    def e_tuple_index(self, scope, depth, want):
        """`t[i]` with a run-time integer i, in range or not (the docs clamp it), of a tuple of one type."""
        tuples = [(n, t) for n, t in scope.vars.items() if isinstance(t, Tup) and t.elts
                  and all(isinstance(e, str) for e in t.elts)]
        same = [(n, t) for n, t in tuples if len(set(t.elts)) == 1 and self.ok(t.elts[0], want)]
        wrong = self.on("iteration_errors") and self.rng.random() < 0.03
        pool = [(n, t) for n, t in tuples if len(set(t.elts)) > 1] if wrong else same
        if not pool or (not wrong and self.rng.random() < 0.5):  # a tuple written in place
            types = [t for t in SCALARS if self.ok(t, want)]
            if not types:
                return None
            t = Tup((self.rng.choice(types),) * self.rng.randint(1, 4))
            parts = [self.value_of(scope, e) for e in t.elts]
            pool = [("(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")", t)]
        name, t = self.rng.choice(pool)
        i = self.expr(scope, depth, "int")
        if i.weak:
            return None
        n = len(t.elts)
        text = self.rng.choice([f"{i.text} % {n}", i.text, f"{i.text} % {n} - {n}"])
        return Ex(f"{name}[{text}]", t.elts[0])


def _tuple_src(text, types) -> Src:
    one = len(set(types)) == 1
    if one:
        return Src(text, types[0], tuple(types))
    rough = "int64" if all(is_int(t) and t != "uint64" for t in types) else "float64"
    return Src(text, rough, tuple(types), unrolled=True)


def _zip(parts) -> Src:
    text = "zip(" + ", ".join(p.text for p in parts) + ")"
    lengths = [len(p.positions) for p in parts if p.positions is not None]
    positions = None
    if lengths:
        positions = tuple(Tup(tuple(p.elem if p.positions is None else p.positions[k] for p in parts))
                          for k in range(min(lengths)))
    return Src(text, Tup(tuple(p.elem for p in parts)), positions, any(p.unrolled for p in parts))
