"""Function pointers in generated programs (`gpuc.deferred`): a mixin of support.progen.Generator.

A *family* is a group of helper @gpuc.funcs written for one signature (parameter types, return
type), so pointers to any of them share one pointer type: `plain` families of independent helpers
(later ones may defer earlier ones), `chain`s where each member defers the one before it (up to 8
deep), and `cycle`s whose members defer each other (or themselves) with an annotated return type
and a guard that bounds the recursion. Statements take pointers (`gpuc.deferred(h, args...)` or
`gpuc.deferred(h, (types...))`), choose between them with conditional expressions, if/elif/else
and `choose` funcs that return pointers, and call them; regular helpers may take a pointer
parameter. With `deferred_errors`, a few statements are the documented errors: pointers of two
signatures meeting at a join, a wrong argument count, deferring something that is not a gpuc func.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .expressions import Ex
from .numeric import INTS, SCALARS, FnPtr

POINTER_FEATURES = {"deferred", "deferred_types", "deferred_funcs", "deferred_nested", "deferred_errors",
                    "deferred_index",             # gpuc.index() in functions called through pointers
                    "annotated_literal_return"}   # `return 0` in a function with a return annotation
NOT_GPUC = ["plain_helper", "abs", "math.sqrt", "min"]   # what gpuc.deferred refuses


@dataclass
class Family:
    sig: FnPtr
    kind: str                                      # plain, chain or cycle
    members: list = field(default_factory=list)    # names of the funcs written so far
    choosers: list = field(default_factory=list)   # names of funcs returning a pointer of this type


def _types_text(params) -> str:
    from .progen import type_text
    inner = ", ".join(type_text(t) for t in params)
    return f"({inner},)" if len(params) == 1 else f"({inner})"


class PointerRules:
    """Needs the Generator's rng, emit, fresh, func, expr, cond, arg_for, return_value."""

    # -- the helper funcs ---------------------------------------------------------------------
    def pointer_funcs(self):
        for f in range(self.rng.choice([1, 1, 2])):
            kinds = ["plain", "plain"] + (["chain", "cycle"] if self.on("deferred_nested") else [])
            kind = self.rng.choice(kinds)
            params = [self.rng.choice(SCALARS) for _ in range(self.rng.randint(1, 2))]
            if kind == "cycle":
                params[0] = self.rng.choice(INTS)
                ret = self.rng.choice(["int64", "int32", "float64", "float32", "uint32"])
            else:
                ret = self.rng.choice(SCALARS)
            family = Family(FnPtr(tuple(params), ret), kind)
            self.families.append(family)
            if kind == "plain":
                for k in range(self.rng.randint(2, 3)):
                    self.member(family, f"h{f}_{k}")
            elif kind == "chain":
                for k in range(self.rng.choice([2, 3, 4, 8])):
                    self.member(family, f"h{f}_{k}", self.chain_prelude(family) if k else None)
            else:
                names = [f"r{f}_{k}" for k in range(self.rng.choice([1, 2]))]
                for k, name in enumerate(names):
                    self.member(family, name, self.cycle_prelude(family, names[(k + 1) % len(names)]), True, False)
                family.members = names  # deferred by other code only once the whole cycle is written
            if self.on("deferred_funcs") and len(family.members) >= 2 and self.rng.random() < 0.5:
                self.chooser(family, f"choose{f}")
        if self.on("deferred_errors"):
            self.lines += ["def plain_helper(p0, p1=0):", "    return p0", "", ""]

    def member(self, family, name, prelude=None, annotate=False, join=True):
        self.pointee = True  # a function called through pointers
        self.func(0, name=name, params=family.sig.params, ret=family.sig.ret, prelude=prelude, annotate=annotate)
        self.pointee = False
        self.lines.append("")
        if join:
            family.members.append(name)

    def chain_prelude(self, family):
        """Defer the previous member of the chain and call it once."""
        previous = family.members[-1]

        def prelude(scope):
            q = self.fresh("fp")
            self.emit(f"{q} = {self.deferred_text(scope, previous, family.sig)}")
            scope.vars[q] = family.sig
            w = self.fresh()
            self.emit(f"{w} = {q}({', '.join(f'p{k}' for k in range(len(family.sig.params)))})")
            scope.vars[w] = family.sig.ret
        return prelude

    def cycle_prelude(self, family, following):
        """Return at a bounded depth, else defer the next member of the cycle and call it one level down."""
        def prelude(scope):
            self.emit(f"if p0 <= 0 or p0 > {self.rng.randint(1, 5)}:")
            self.emit(f"    return {self.return_value(scope)}")
            q, w = self.fresh("fp"), self.fresh()
            self.emit(f"{q} = {self.deferred_text(scope, following, family.sig)}")
            rest = "".join(f", p{k}" for k in range(1, len(family.sig.params)))
            self.emit(f"{w} = {q}(p0 - 1{rest})")
            scope.vars[q], scope.vars[w] = family.sig, family.sig.ret
        return prelude

    def chooser(self, family, name):
        """A func returning one of two pointers of the family's type, chosen by its argument."""
        t = self.rng.choice(SCALARS)
        a, b = self.rng.sample(family.members, 2)
        arrays, self.arrays = self.arrays, {}
        self.pointee = True  # called from functions called through pointers
        self.lines += ["@gpuc.func", f"def {name}(p0):"]
        self.indent = 1
        test = self.rng.choice(["p0", f"p0 > {self.rng.choice([0, 1, 3])}" if t != "bool" else "not p0"])
        scope = self.pointer_scope({"p0": t})
        self.emit(f"if {test}:")
        self.emit(f"    return {self.deferred_text(scope, a, family.sig)}")
        self.emit(f"return {self.deferred_text(scope, b, family.sig)}")
        self.lines += ["", ""]
        self.arrays, self.pointee = arrays, False
        family.choosers.append((name, t))

    @staticmethod
    def pointer_scope(variables):
        from .progen import Scope
        return Scope(dict(variables))

    # -- expressions --------------------------------------------------------------------------
    def deferred_text(self, scope, name, sig, depth=1):
        if self.on("deferred_types") and self.rng.random() < 0.4:
            return f"gpuc.deferred({name}, {_types_text(sig.params)})"
        args = "".join(", " + self.arg_for(scope, t, depth) for t in sig.params)
        return f"gpuc.deferred({name}{args})"

    def pointer_arg(self, scope, sig, depth=1):
        """A pointer of type `sig`: a variable, a fresh deferral, or a chooser's result."""
        found = [n for n, t in scope.vars.items() if t == sig]
        family = next((f for f in self.families if f.sig == sig and f.members), None)
        r = self.rng.random()
        if found and r < 0.6:
            return self.rng.choice(found)
        if family is None:
            return None
        if family.choosers and r < 0.75:
            name, t = self.rng.choice(family.choosers)
            return f"{name}({self.arg_for(scope, t, depth)})"
        return self.deferred_text(scope, self.rng.choice(family.members), sig, depth)

    def pointer_families(self):
        return [f for f in self.families if f.members]

    def e_ptr_call(self, scope, depth, want):
        pointers = sorted({t for t in scope.vars.values() if isinstance(t, FnPtr)}, key=str)
        sigs = [s for s in pointers + [f.sig for f in self.pointer_families()]
                if isinstance(s.ret, str) and self.ok(s.ret, want)]
        if not sigs:
            return None
        sig = self.rng.choice(sigs)
        callee = self.pointer_arg(scope, sig, depth)
        if callee is None:
            return None
        if not callee.isidentifier():
            callee = f"({callee})" if self.rng.random() < 0.5 else callee
        args = ", ".join(self.arg_for(scope, t, depth) for t in sig.params)
        return Ex(f"{callee}({args})", sig.ret)

    # -- statements ---------------------------------------------------------------------------
    def s_ptr_take(self, scope):
        families = self.pointer_families()
        if not families:
            return None
        family = self.rng.choice(families)
        name = self.fresh("fp")
        self.emit(f"{name} = {self.pointer_arg(scope, family.sig)}")
        scope.vars[name] = family.sig
        return True

    def s_ptr_select(self, scope):
        """A pointer chosen at run time: a conditional expression or if/elif/else over every path."""
        families = self.pointer_families()
        if not families:
            return None
        family = self.rng.choice(families)
        name = self.fresh("fp")
        if self.rng.random() < 0.5:
            a, b = self.pointer_arg(scope, family.sig), self.pointer_arg(scope, family.sig)
            self.emit(f"{name} = {a} if {self.cond(scope).text} else {b}")
        else:
            self.emit(f"if {self.cond(scope).text}:")
            self.emit(f"    {name} = {self.pointer_arg(scope, family.sig)}")
            if self.rng.random() < 0.5:
                self.emit(f"elif {self.cond(scope).text}:")
                self.emit(f"    {name} = {self.pointer_arg(scope, family.sig)}")
            self.emit("else:")
            self.emit(f"    {name} = {self.pointer_arg(scope, family.sig)}")
        scope.vars[name] = family.sig
        return True

    def s_ptr_error(self, scope):
        """One of the documented errors (rarely: the rest of the program is not tested by it)."""
        families = self.pointer_families()
        if not families or self.rng.random() < 0.5:
            return None
        family = self.rng.choice(families)
        sig, r = family.sig, self.rng.random()
        name = self.fresh("fp")
        if r < 0.4:  # two signatures meet in a conditional expression, or after if/else
            k = self.rng.randrange(len(sig.params))
            other = list(sig.params)
            other[k] = self.rng.choice([t for t in SCALARS if t != other[k]])
            a = self.pointer_arg(scope, sig)
            b = self.deferred_text(scope, self.rng.choice(family.members), FnPtr(tuple(other), sig.ret))
            if self.rng.random() < 0.5:
                self.emit(f"{name} = {a} if {self.cond(scope).text} else {b}")
            else:
                self.emit(f"if {self.cond(scope).text}:")
                self.emit(f"    {name} = {a}")
                self.emit("else:")
                self.emit(f"    {name} = {b}")
                self.emit(f"{self.fresh()} = {name}({', '.join(self.arg_for(scope, t, 1) for t in sig.params)})")
        elif r < 0.7:  # a wrong argument count
            args = [self.arg_for(scope, t, 1) for t in sig.params]
            args = args[:-1] if self.rng.random() < 0.5 else args + [args[-1]]
            self.emit(f"{name} = {self.pointer_arg(scope, sig)}")
            self.emit(f"{self.fresh()} = {name}({', '.join(args)})")
        else:  # not a gpuc function
            args = "".join(", " + self.arg_for(scope, t, 1) for t in sig.params)
            self.emit(f"{name} = gpuc.deferred({self.rng.choice(NOT_GPUC)}{args})")
        return True
