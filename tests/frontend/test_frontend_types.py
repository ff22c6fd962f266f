"""The frontend's types: spelling, NumPy 2 promotion (checked against NumPy itself), mangling."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import gpuc
from gpuc.frontend.core.types import SCALARS, as_type, mangle, promote

NP = {t.name: np.dtype(t.name).type for t in SCALARS}


@pytest.mark.parametrize("a, b", list(itertools.product(SCALARS, SCALARS)), ids=str)
def test_promotion_matches_numpy(a, b):
    assert np.result_type(NP[a.name], NP[b.name]) == np.dtype(NP[promote(a, b).name])


@pytest.mark.parametrize("t", SCALARS, ids=str)
def test_weak_python_literals_match_nep50(t):
    zero = NP[t.name](0)
    assert promote(t, gpuc.int64, False, True).name == (np.result_type(zero, 1).name if t.name != "bool" else "int64")
    assert promote(t, gpuc.float64, False, True).name == np.result_type(zero, 1.0).name
    assert promote(gpuc.int64, gpuc.float64, True, True) == gpuc.float64


def test_spellings():
    assert as_type(int) is gpuc.int64 and as_type(float) is gpuc.float64 and as_type(bool) is gpuc.boolean
    assert gpuc.bool_ is gpuc.boolean and as_type(np.float32) is gpuc.float32
    assert as_type((int, gpuc.float32)) == gpuc.frontend.TupleType((gpuc.int64, gpuc.float32))
    assert isinstance(gpuc.Array[gpuc.float32, 2], gpuc.Array)
    with pytest.raises(TypeError, match="1 to 3 dimensions"):
        gpuc.Array[gpuc.float32, 4]
    with pytest.raises(TypeError, match="array elements must be scalars"):
        gpuc.Array[(int, int), 1]
    with pytest.raises(TypeError, match="not a gpuc type"):
        as_type("no such type")


def test_mangling():
    assert mangle((gpuc.float32, gpuc.Array[gpuc.float64, 1], gpuc.boolean, gpuc.uint64)) == "f32.A1f64.b.u64"
    assert mangle((as_type((gpuc.int32, gpuc.float64)),)) == "T2i32f64E"


def test_intrinsics_refuse_to_run_in_python():
    with pytest.raises(RuntimeError, match="only works inside a compiled"):
        gpuc.index()
    with pytest.raises(RuntimeError, match="marker my.m"):
        gpuc.marker("my.m")()
