"""`gpuc.adjoint(kernel, primal_writes=False)`: the adjoint without the primal's stores into the arrays the kernel
only stores into. Its shadows are the default adjoint's, bit for bit on one thread; those arrays keep what they
held (a NaN sentinel stays, and reaches no shadow); every other array is left as the default adjoint leaves it;
overlapping arrays are refused."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
from test_reverse_kernels import CASES

import gpuc
from gpuc.frontend.constructs.reverse import SERIAL

#: The arrays (by parameter name) each case of test_reverse_kernels.CASES only stores into: atomic updates and
#: arrays updated in place are read as well, and keep every write.
KEPT = {"elementwise": ("y",), "stencil": ("y",), "reduction": (), "atomic_sub": (), "dynamic_loop": ("y",),
        "data_dependent_while": ("y",), "square_in_place": (), "divide_in_place": (), "two_d": ("b",),
        "calls_funcs": ("out",), "gather_repeated": ("y",), "matvec": ("y",), "scaled_early_return": ("y",),
        "float32": ("y",)}


def _names(kernel):
    code = kernel.py_func.__code__
    return code.co_varnames[:code.co_argcount]


def _adjoint(adjoint, args, n, seeds, threads):
    """(the arrays after the launch, their shadows) by position."""
    full, shadows = [], {}
    arrays = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    for p, a in enumerate(arrays):
        full.append(a)
        if isinstance(a, np.ndarray) and a.dtype.kind == "f":
            shadows[p] = seeds[p].copy() if p in seeds else np.zeros_like(a)
            full.append(shadows[p])
    adjoint.launch(n, *full, threads=threads)
    return arrays, shadows


def _kept(kernel, args, n):
    """The arrays the compiled adjoint leaves as they are, as its trace names them."""
    full = []
    for a in args:
        full.append(a)
        if isinstance(a, np.ndarray) and a.dtype.kind == "f":
            full.append(np.zeros_like(a))
    result = gpuc.adjoint(kernel, primal_writes=False).inspect(*full, threads=1)
    found = [dict(r.details).get("outputs kept") for r in result.trace.transformations]
    return next(k for k in found if k is not None)


def test_every_case_is_listed():
    assert set(KEPT) == set(CASES)


@pytest.mark.parametrize("name", list(CASES))
def test_the_arrays_only_stored_into_are_found(name):
    kernel, make, n, _ = CASES[name]
    assert _kept(kernel, make(), n) == KEPT[name]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", list(CASES))
def test_shadows_as_the_default_adjoints_and_outputs_untouched(name, threads):
    kernel, make, n, outputs = CASES[name]
    args = make()
    rng = np.random.default_rng(11)
    seeds = {p: rng.standard_normal(args[p].shape).astype(args[p].dtype) for p in outputs}
    want_arrays, want = _adjoint(gpuc.adjoint(kernel), args, n, seeds, threads)
    kept = [p for p, name_ in enumerate(_names(kernel)) if name_ in KEPT[name]]
    sentinel = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    for p in kept:
        sentinel[p][...] = np.nan  # what the primal stored there is never needed
    arrays, got = _adjoint(gpuc.adjoint(kernel, primal_writes=False), sentinel, n, seeds, threads)
    for p in got:
        if threads == 1:
            np.testing.assert_array_equal(got[p], want[p], err_msg=f"shadow of argument {p}")
        else:  # atomic adds of items running at once come in any order
            np.testing.assert_allclose(got[p], want[p], rtol=1e-12, atol=1e-300, err_msg=f"shadow of argument {p}")
    for p, a in enumerate(arrays):
        if not isinstance(a, np.ndarray):
            continue
        if p in kept:
            assert np.isnan(a).all(), f"argument {p} was written"
        elif threads == 1:
            np.testing.assert_array_equal(a, want_arrays[p], err_msg=f"argument {p}")
        else:
            np.testing.assert_allclose(a, want_arrays[p], rtol=1e-12, err_msg=f"argument {p}")


@gpuc.kernel
def tile_sums(x, out, scale):
    tile = gpuc.shared.array(8, gpuc.float64)
    t = gpuc.thread_index(0)
    i = gpuc.index(0)
    tile[t] = x[i] * x[i]
    gpuc.barrier()
    s = 0.0
    for k in range(8):
        s += tile[k] * math.sin(x[i] + k)
    out[i] = s
    if t == 0:
        scale[gpuc.block_index(0)] = tile[7] * 2.0


@pytest.mark.parametrize("threads", [1, 2])
def test_a_block_kernel(threads):
    n, rng = 64, np.random.default_rng(3)
    x = rng.uniform(-1, 1, n)
    seeds = {1: rng.standard_normal(n), 2: rng.standard_normal(n // 8)}

    def launch(adjoint, out, scale):
        arrays = [x.copy(), np.zeros(n), out.copy(), seeds[1].copy(), scale.copy(), seeds[2].copy()]
        adjoint.launch(n, *arrays, block=8, threads=threads)
        return arrays

    want = launch(gpuc.adjoint(tile_sums), np.zeros(n), np.zeros(n // 8))
    got = launch(gpuc.adjoint(tile_sums, primal_writes=False), np.full(n, np.nan), np.full(n // 8, np.nan))
    for k in (1, 3, 5):  # the shadows
        np.testing.assert_array_equal(got[k], want[k])
    assert np.isnan(got[2]).all() and np.isnan(got[4]).all()


def test_overlapping_arrays_are_refused():
    x = np.linspace(0.5, 1.5, 8)
    with pytest.raises(ValueError, match="do not overlap"):
        gpuc.adjoint(CASES["elementwise"][0], primal_writes=False).launch(8, x, np.zeros(8), x, np.ones(8))


def test_one_adjoint_each_and_pickled_as_itself():
    kernel = CASES["stencil"][0]
    kept = gpuc.adjoint(kernel, primal_writes=False)
    assert kept is gpuc.adjoint(kernel, primal_writes=False)
    assert kept is not gpuc.adjoint(kernel) and gpuc.adjoint(kernel).primal_writes
    again = pickle.loads(pickle.dumps(kept))
    assert again.primal_writes is False and again.primal is kernel


def test_the_disk_cache_tells_the_two_apart():
    """Each generated adjoint is keyed by its source's name (runtime/adjoint.py `_generate`)."""
    kernel = CASES["stencil"][0]
    flags = (False, True, False, True)
    names = {gpuc.adjoint(kernel, primal_writes=pw)._kernel(flags, SERIAL).py_func.__code__.co_filename
             for pw in (True, False)}
    assert len(names) == 2 and any("outputs kept" in name for name in names)


def test_primal_writes_must_be_a_bool():
    with pytest.raises(TypeError, match="True or False"):
        gpuc.adjoint(CASES["stencil"][0], primal_writes="no")
