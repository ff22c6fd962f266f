"""Tangents of the differential-test functions (tests/support/diff_funcs.py) against central finite
differences of the Python interpreter, in every float parameter where the function is smooth."""

from __future__ import annotations

import math

import pytest
from support.diff_funcs import CASES
from tangent_helpers import tangent

import gpuc
import gpuc.llvm as llvm

FLOATS = (gpuc.float64, gpuc.float32)
SCALARS = FLOATS + (gpuc.int64, gpuc.int32, gpuc.uint32, gpuc.uint64, gpuc.boolean)
SCALAR_CASES = [c for c in CASES if all(t in SCALARS for t in c[1]) and any(t in FLOATS for t in c[1])]


def _entry_name(ir: str) -> str | None:
    module = llvm.Module.parse(ir)
    entries = [f for f in module.functions if not f.is_declaration and f.linkage == "external"]
    name = entries[0].name if len(entries) == 1 and str(entries[0].return_type) in ("double", "float") else None
    module.close()
    return name


def _finite_difference(fn, args, k: int) -> float | None:
    """The central difference of fn in argument k, None where two step sizes disagree (a kink)."""
    def at(v):
        moved = list(args)
        moved[k] = v
        return float(fn(*moved))
    x = args[k]
    h = 1e-6 * max(1.0, abs(x))
    coarse, fine = ((at(x + s) - at(x - s)) / (2 * s) for s in (h, h / 8))
    return coarse if math.isfinite(coarse) and math.isclose(coarse, fine, rel_tol=1e-4, abs_tol=1e-7) else None


@pytest.mark.parametrize("case", SCALAR_CASES, ids=[c[0].__name__ for c in SCALAR_CASES])
def test_tangent_matches_finite_differences(case):
    fn, argtypes, argsets, _ = case
    ir = gpuc.code_llvm(fn, argtypes)
    name = _entry_name(ir)
    if name is None:
        pytest.skip("does not return one float")
    checked = 0
    for k, ty in enumerate(argtypes):
        if ty not in FLOATS:
            continue
        jit, call = tangent(ir, name, [i == k for i in range(len(argtypes))])
        try:
            for args in argsets:
                x = args[k]
                if not (isinstance(x, float) and math.isfinite(x) and abs(x) < 1e6):
                    continue
                expected = _finite_difference(fn, args, k)
                if expected is None:
                    continue
                tol = 1e-3 if ty is gpuc.float32 else 1e-5
                got = call(*(int(a) if isinstance(a, bool) else a for a in args), 1.0)[1]
                assert math.isclose(got, expected, rel_tol=tol, abs_tol=tol), (fn.__name__, k, args, got, expected)
                checked += 1
        finally:
            jit.close()
    if not checked:
        pytest.skip("no smooth point among the cases")
