"""Math functions by family: how each family's names are recognised, and that a derivative calls
functions of the family its primal called (run through libm on the CPU)."""

from __future__ import annotations

import math

import pytest
from tangent_helpers import close, tangent

import gpuc.llvm as llvm
from gpuc.plugins.autodiff import mathrules, tangent_function

NAMES = [
    ("llvm.sin.f64", "intrinsic", "sin"), ("llvm.powi.f32.i32", "intrinsic", "powi"),
    ("llvm.fmuladd.v4f32", "intrinsic", "fmuladd"), ("__nv_sin", "libdevice", "sin"),
    ("__nv_erff", "libdevice", "erf"), ("__nv_fmin", "libdevice", "minnum"), ("__nv_fmodf", "libdevice", "frem"),
    ("_Z3sind", "opencl", "sin"), ("_Z5atan2ff", "opencl", "atan2"), ("_Z4powndi", "opencl", "powi"),
    ("_Z4fmoddd", "opencl", "frem"), ("sin", "libm", "sin"), ("erff", "libm", "erf"), ("fmax", "libm", "maxnum"),
    ("tgamma", "libm", "tgamma"),
]


@pytest.mark.parametrize("symbol, family, name", NAMES, ids=[n[0] for n in NAMES])
def test_names_of_each_family(symbol, family, name):
    module = llvm.Module.parse(f"declare double @\"{symbol}\"(double)\n")
    found = mathrules.classify(module.functions[symbol])
    assert found is not None and (found[0].kind, found[1]) == (family, name)
    module.close()


@pytest.mark.parametrize("symbol", ["__nv_isnand", "llvm.nvvm.fabs.f64", "ext", "_Z13get_global_idj", "sinus"])
def test_other_functions_are_not_math(symbol):
    module = llvm.Module.parse(f"declare double @\"{symbol}\"(double)\n")
    assert mathrules.classify(module.functions[symbol]) is None
    module.close()


def test_derivative_calls_the_same_family():
    ctx = llvm.Context()
    double, single = ctx.double, ctx.float
    expected = {("intrinsic", "cos", double): "llvm.cos.f64", ("libdevice", "cos", double): "__nv_cos",
                ("libdevice", "cos", single): "__nv_cosf", ("opencl", "cos", double): "_Z3cosd",
                ("opencl", "pow", single): "_Z3powff", ("opencl", "pown", double): "_Z4powndi",
                ("libm", "cos", single): "cosf", ("libm", "minnum", double): "fmin"}
    for (kind, name, ty), symbol in expected.items():
        params = 2 if name == "pow" else 1
        assert mathrules.Family(kind).symbol(name, ty, params) == symbol
    ctx.close()


# libm functions (as the CPU calls them) with their derivatives
LIBM = [
    ("sin", 1, math.cos), ("cosf", 1, lambda x: -math.sin(x)),
    ("erf", 1, lambda x: 2 / math.sqrt(math.pi) * math.exp(-x * x)),
    ("asinh", 1, lambda x: 1 / math.sqrt(x * x + 1)), ("cbrt", 1, lambda x: 1 / (3 * math.cbrt(x) ** 2)),
    ("pow", 2, lambda x: 2.5 * x ** 1.5), ("fmin", 2, lambda x: 1.0 if x < 2.5 else 0.0),
    ("fmod", 2, lambda x: 1.0), ("hypot", 2, lambda x: x / math.hypot(x, 2.5)),
]


@pytest.mark.parametrize("symbol, arity, derivative", LIBM, ids=[n[0] for n in LIBM])
def test_libm_family(symbol, arity, derivative):
    ty = "float" if symbol.endswith("f") and symbol not in ("erf",) else "double"
    args = ", ".join([f"{ty} %x"] + [f"{ty} 2.5"] * (arity - 1))
    ir = (f"define {ty} @f({ty} %x) {{\n  %r = call {ty} @{symbol}({args})\n  ret {ty} %r\n}}\n"
          f"declare {ty} @{symbol}({', '.join([ty] * arity)})\n")
    module = llvm.Module.parse(ir)
    t = tangent_function(module, module.functions["f"], [True])
    called = {i.callee.name for i in t.instructions() if isinstance(i, llvm.CallInst)}
    assert not any(name.startswith("llvm.") for name in called), called  # libm calls libm
    module.close()
    rel = 1e-5 if ty == "float" else 1e-12
    jit, call = tangent(ir, "f", [True])
    try:
        for x in (0.4, 1.7):
            assert close(call(x, 1.0)[1], derivative(x), rel), (symbol, x)
    finally:
        jit.close()
