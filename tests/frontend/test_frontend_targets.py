"""Every differential function also compiles for the GPU targets: PTX (checked by ptxas), GCN, SPIR-V (spirv-val)."""

from __future__ import annotations

import pytest

import gpuc

from support.diff_funcs import CASES

FUNCS = {(fn, types) for fn, types, _, _ in CASES}
PARAMS = [pytest.param(fn, types, id=fn.__name__) for fn, types in sorted(FUNCS, key=lambda c: c[0].__name__)]


def job(fn, types, target):
    return gpuc.CompilerJob((fn, types), gpuc.CompilerConfig(target))


@pytest.mark.parametrize("fn, argtypes", PARAMS)
def test_ptx(fn, argtypes, ptxas):
    ptx = gpuc.compile(job(fn, argtypes, gpuc.PTXTarget()), "asm").output
    assert ".func" in ptx or ".entry" in ptx or ".visible" in ptx
    ptxas(ptx)


@pytest.mark.parametrize("fn, argtypes", PARAMS)
def test_gcn(fn, argtypes):
    try:
        asm = gpuc.compile(job(fn, argtypes, gpuc.GCNTarget()), "asm").output
    except gpuc.CompilationError as exc:  # documented: no device math library on AMD GPUs yet
        assert "is not available on the gcn target" in exc.message
        return
    assert "amdgcn" in asm or ".amdhsa" in asm or "s_endpgm" in asm or "s_setpc_b64" in asm


# Known SPIR-V failures, as strict xfails that flip once fixed. (range_forms was one: IndVarSimplify
# computed a closed form in i65; SPIRVTarget now leaves that pass out.)
SPIRV_KNOWN: dict[str, str] = {}


@pytest.mark.parametrize("fn, argtypes", [
    pytest.param(*p.values, id=p.id, marks=[pytest.mark.xfail(reason=SPIRV_KNOWN[p.id], strict=True)]
                 if p.id in SPIRV_KNOWN else []) for p in PARAMS])
def test_spirv(fn, argtypes, spirv_val):
    spirv_val(gpuc.compile(job(fn, argtypes, gpuc.SPIRVTarget()), "obj").output)


def test_gcn_float32_math_works():
    import math

    @gpuc.func
    def f(x):
        return math.sin(x) * math.exp(x) + math.log(x) ** 2.0
    gpuc.compile(job(f, (gpuc.float32,), gpuc.GCNTarget()), "asm")
