"""Helpers for the tangent transformation's tests: JIT a tangent (or an n-th derivative) and call it."""

from __future__ import annotations

import ctypes
import math

import gpuc.llvm as llvm
from gpuc.plugins.autodiff import tangent_function

CTYPES = {"double": ctypes.c_double, "float": ctypes.c_float, "i64": ctypes.c_int64, "i32": ctypes.c_int32,
          "ptr": ctypes.c_void_p}


def _pair(ctype):
    return type(f"Pair_{ctype.__name__}", (ctypes.Structure,), {"_fields_": [("value", ctype), ("tangent", ctype)]})


def _signature(fnty: llvm.FunctionType):
    ret = fnty.return_type
    pair = isinstance(ret, llvm.StructType)
    return str(ret.elements[0] if pair else ret), pair, [str(p) for p in fnty.params]


class Jitted:
    """A JIT holding one module; `function(name)` gives a ctypes callable for a function of it."""

    def __init__(self, module: llvm.Module, *names: str) -> None:
        self.signatures = {n: _signature(module.functions[n].function_type) for n in names}
        for n in names:
            module.functions[n].linkage = "external"
        self.jit = llvm.LLJIT()
        self.jit.add_module(module)

    def function(self, name: str):
        ret, pair, params = self.signatures[name]
        restype = _pair(CTYPES[ret]) if pair else CTYPES[ret]
        fn = ctypes.CFUNCTYPE(restype, *(CTYPES[p] for p in params))(self.jit.lookup(name))
        if pair:
            return lambda *args: (lambda r: (r.value, r.tangent))(fn(*args))
        return fn

    def close(self) -> None:
        self.jit.close()


def tangent(ir: str, name: str, active, *, optimize: bool = True):
    """(jit, callable) for the tangent of `name` in `ir`: call it with the primal arguments, then
    the tangents of the active ones; it returns (value, tangent)."""
    module = llvm.Module.parse(ir)
    t = tangent_function(module, module.functions[name], active)
    module.verify()
    names = _scalar_wrappers(module, t)
    if optimize:
        llvm.run_passes(module, "default<O2>")
    jit = Jitted(module, *names)
    value, dvalue = (jit.function(n) for n in names)
    return jit, lambda *args: (value(*args), dvalue(*args))


def _scalar_wrappers(module: llvm.Module, t: llvm.Function) -> list[str]:
    """Functions returning the value and the tangent of `t`'s result alone: a struct of two floats
    in LLVM IR is not returned the way C (and ctypes) return one."""
    names = []
    for index, suffix in ((0, "value"), (1, "tangent")):
        w = module.add_function(f"{t.name}.{suffix}", llvm.FunctionType.get(t.return_type.elements[0],
                                                                            t.function_type.params))
        with llvm.Builder(module.context) as b:
            b.position_at_end(w.append_block("entry"))
            b.ret(b.extract_value(b.call(t, list(w.args)), index))
        names.append(w.name)
    return names


def derivative_chain(module: llvm.Module, fn: llvm.Function, order: int, *, optimize_between: bool = False):
    """A function with fn's parameters returning d^order fn / d x^order (x: the first parameter),
    each order the tangent of the previous one called with dx = 1, as nested requests build it.
    `optimize_between` runs O2 after each order, as the autodiff plugin resolves inner requests
    (and the pipeline optimizes them) before outer ones."""
    current = fn
    for k in range(1, order + 1):
        if optimize_between and k > 1:
            name = current.name
            current.linkage = "external"
            llvm.run_passes(module, "default<O2>")
            current = module.functions[name]
        params = current.function_type.params
        t = tangent_function(module, current, [True] + [False] * (len(params) - 1))
        g = module.add_function(f"{fn.name}.d{k}", current.function_type)
        g.linkage = "internal"
        with llvm.Builder(module.context) as b:
            b.position_at_end(g.append_block("entry"))
            pair = b.call(t, list(g.args) + [llvm.ConstantFP.get(params[0], 1.0)])
            b.ret(b.extract_value(pair, 1))
        current = g
    return current


def close(a: float, b: float, rel: float) -> bool:
    return a == b or math.isclose(a, b, rel_tol=rel, abs_tol=rel * 1e-3)
