"""Tangents on the GPU targets' IR: libdevice calls on PTX (assembled by ptxas), OpenCL built-ins on
SPIR-V (checked by spirv-val), intrinsics on GCN; each derivative calls the family its primal calls."""

from __future__ import annotations

import pytest
from tangent_cases import calls_helper, m_asinh, m_erf, m_fmod_a, m_pow_a, m_sin, m_tanh, newton_sqrt, poly

import gpuc
import gpuc.llvm as llvm
from gpuc.plugins.autodiff import tangent_function
from gpuc.targets import GCNTarget, PTXTarget, SPIRVTarget

F64, F32 = gpuc.float64, gpuc.float32
FUNCTIONS = [(m_sin, 1), (m_pow_a, 2), (calls_helper, 1), (m_fmod_a, 2), (m_erf, 1), (m_asinh, 1), (m_tanh, 1),
             (newton_sqrt, 1), (poly, 1)]


def _tangent_module(target, fn, arity: int, ftype, *, optimize: bool, without_libdevice=False) -> llvm.Module:
    module = llvm.Module.parse(gpuc.code_llvm(fn, (ftype,) * arity, target=target, optimize=optimize))
    if without_libdevice:  # as before the link stage: __nv_* functions are declarations
        for f in list(module.functions):
            if f.name.startswith(("__nv_", "__internal_")) and not f.is_declaration:
                f.delete_body()
                f.linkage = "external"
        for f in list(module.functions):
            if f.is_declaration and not f.uses and not f.name.startswith("llvm."):
                f.erase()
    (entry,) = [f for f in module.functions if not f.is_declaration and f.linkage == "external"]
    t = tangent_function(module, entry, [True] + [False] * (arity - 1))
    t.linkage = "external"
    module.verify()
    return module


def _calls(module: llvm.Module) -> set[str]:
    return {f.name for f in module.functions if f.uses}


@pytest.mark.parametrize("ftype", [F64, F32], ids=["f64", "f32"])
@pytest.mark.parametrize("fn, arity", FUNCTIONS, ids=[f.__name__ for f, _ in FUNCTIONS])
def test_ptx_libdevice(fn, arity, ftype, ptxas):
    # Before optimization the math calls are libdevice's __nv_* functions; the tangent's are too.
    target = PTXTarget()
    module = _tangent_module(target, fn, arity, ftype, optimize=False, without_libdevice=True)
    calls = _calls(module)
    assert not any(name.startswith("llvm.") and name.split(".")[1] in ("sin", "cos", "exp", "log", "pow")
                   for name in calls), calls
    if fn is m_sin:
        assert ("__nv_cos" if ftype is F64 else "__nv_cosf") in calls
    target.link_libraries(None, module)  # libdevice, now also for the functions the tangent calls
    tm = target.target_machine()
    llvm.run_passes(module, "default<O2>", tm)
    target.finish_module(None, module, tm)
    ptxas(tm.emit(module, "asm").decode())
    module.close()


LIBDEVICE_USERS = [(m_sin, 1), (m_pow_a, 2), (m_fmod_a, 2), (m_erf, 1), (m_asinh, 1), (m_tanh, 1)]


@pytest.mark.parametrize("fn, arity", LIBDEVICE_USERS, ids=[f.__name__ for f, _ in LIBDEVICE_USERS])
def test_ptx_optimized_ir_with_inlined_libdevice_is_refused(fn, arity):
    # Optimized PTX IR has libdevice inlined: bit-level code with no derivative. It must be an error
    # naming the instruction, never a silently wrong tangent.
    module = llvm.Module.parse(gpuc.code_llvm(fn, (F64,) * arity, target=PTXTarget()))
    (entry,) = [f for f in module.functions if not f.is_declaration and f.linkage == "external"]
    with pytest.raises(gpuc.CompilationError, match="cannot differentiate"):
        tangent_function(module, entry, [True] + [False] * (arity - 1))
    module.close()


@pytest.mark.parametrize("optimize", [False, True], ids=["unoptimized", "optimized"])
@pytest.mark.parametrize("ftype", [F64, F32], ids=["f64", "f32"])
@pytest.mark.parametrize("fn, arity", FUNCTIONS, ids=[f.__name__ for f, _ in FUNCTIONS])
def test_spirv_opencl_builtins(fn, arity, ftype, optimize, spirv_val):
    target = SPIRVTarget()
    module = _tangent_module(target, fn, arity, ftype, optimize=optimize)
    calls = _calls(module)
    letter = "d" if ftype is F64 else "f"
    if fn is m_erf:
        assert f"_Z3exp{letter}" in calls, calls  # erf' = 2/sqrt(pi) exp(-x^2), in OpenCL's exp
    if fn is m_asinh:
        assert f"_Z4sqrt{letter}" in calls, calls
    conventions = {f.calling_convention for f in module.functions if f.name.startswith("_Z")}
    assert len(conventions) <= 1, conventions  # declared like the frontend's own built-in calls
    tm = target.target_machine()
    llvm.run_passes(module, "default<O2>", tm)
    spirv_val(tm.emit(module, "obj"))
    module.close()


@pytest.mark.parametrize("fn, arity", [(m_sin, 1), (m_pow_a, 2)], ids=["m_sin", "m_pow_a"])
def test_gcn_optimized_ir_with_inlined_libclc_is_refused(fn, arity):
    # GCN computes float32 sin and pow with libclc, linked and inlined in optimized IR: as PTX's libdevice,
    # bit-level code with no derivative, refused by name (gpuc.derivative differentiates before that).
    module = llvm.Module.parse(gpuc.code_llvm(fn, (F32,) * arity, target=GCNTarget()))
    (entry,) = [f for f in module.functions if not f.is_declaration and f.linkage == "external"]
    with pytest.raises(gpuc.CompilationError, match="cannot differentiate"):
        tangent_function(module, entry, [True] + [False] * (arity - 1))
    module.close()


@pytest.mark.parametrize("fn, arity", [(poly, 1), (newton_sqrt, 1)], ids=["poly", "newton_sqrt"])
def test_gcn(fn, arity):
    # Optimized float32 code for GCN is vectorized (<2 x float>): tangents of vector lanes.
    target = GCNTarget()
    module = _tangent_module(target, fn, arity, F32, optimize=True)
    tm = target.target_machine()
    llvm.run_passes(module, "default<O2>", tm)
    assert tm.emit(module, "asm")
    module.close()
