"""Bounds checks at unchecked speed: the launch loop over index 0 is split where every check of `i + c`
against an extent passes (gpuc/plugins/clamp_split.py), the middle part runs without checks and the parts
around it with them. Values, and which work item's failure is reported, stay what they are unsplit."""

from __future__ import annotations

import re

import numpy as np
import pytest

import gpuc


@gpuc.kernel(boundscheck=True)
def shifted(a, out):
    i = gpuc.index()
    out[i] = a[i + 1] - a[i - 1] * 0.5


@gpuc.kernel(boundscheck=True)
def rows_below(u, v):
    j = gpuc.index(0)
    i = gpuc.index(1)
    v[i, j] = u[i + 1, j] + u[i, j + 1]


@gpuc.kernel(boundscheck=True)
def saxpy(a, x, y, out):
    i = gpuc.index()
    out[i] = a * x[i] + y[i]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n", [1, 7, 64, 1000, 4099])
def test_in_range_launches_compute_what_python_does(n, threads):
    a = np.random.default_rng(n).standard_normal(n + 1)
    out = np.zeros(n)
    shifted[n](a, out, threads=threads)
    expected = np.array([a[i + 1] - a[i - 1] * 0.5 for i in range(n)])  # a[-1] for item 0, as Python reads it
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("n", [2, 100, 4099])
def test_the_first_failing_item_is_still_the_one_reported(n):
    """Item n - 1 reads a[n]: every item before it runs in the unchecked middle part and computes its value;
    the failure is found in the checked part after it."""
    a = np.arange(float(n))
    out = np.zeros(n)
    with pytest.raises(IndexError) as info:
        shifted[n](a, out, threads=1)
    assert re.search(rf"index {n} is out of bounds for axis 0 with size {n} in a\[i \+ 1\]", str(info.value)), info.value
    np.testing.assert_array_equal(out[:n - 1], [a[i + 1] - a[i - 1] * 0.5 for i in range(n - 1)])


@pytest.mark.parametrize("threads", [1, 2])
def test_two_dimensional_checks_of_the_row_and_the_column(threads):
    """u[i + 1, j] is checked against the rows once per row (a value the loop over j does not change) and
    u[i, j + 1] per column; in range everything matches NumPy, and a row past the end fails in that row."""
    rows, cols = 37, 515
    u = np.random.default_rng(1).standard_normal((rows + 1, cols + 1))
    v = np.zeros((rows, cols))
    rows_below[cols, rows](u, v, threads=threads)
    np.testing.assert_array_equal(v, u[1:, :cols] + u[:rows, 1:])
    short = u[:rows]  # row rows - 1 reads u[rows, j]: out of range
    v[:] = 0
    with pytest.raises(IndexError, match=rf"index {rows} is out of bounds for axis 0 with size {rows} in u\[i \+ 1, j\]"):
        rows_below[cols, rows](short, v, threads=1)
    np.testing.assert_array_equal(v[:rows - 1], short[1:, :cols] + short[:rows - 1, 1:])
    narrow = u[:, :cols]  # column cols - 1 reads u[i, cols]: the first row fails at its last column
    v[:] = 0
    with pytest.raises(IndexError, match=rf"index {cols} is out of bounds for axis 1 with size {cols} in u\[i, j \+ 1\]"):
        rows_below[cols, rows](narrow, v, threads=1)
    np.testing.assert_array_equal(v[0, :cols - 1], u[1, :cols - 1] + u[0, 1:cols])


def test_the_checked_hot_loop_is_the_unchecked_one():
    """The middle part has no check left, so it vectorizes as the unchecked kernel does; the checked parts
    around it keep the failure call."""
    x = np.ones(1024, np.float32)
    llvm = saxpy.inspect(np.float32(2), x, x, x).llvm
    assert re.search(r"<\d+ x float>", llvm), "the checked saxpy did not vectorize"
    assert "gpuc.boundscheck.fail" in llvm


@gpuc.kernel(boundscheck=True)
def escape(c, out, limit):
    i = gpuc.index()
    z = 0.0
    k = 0
    while k < limit and abs(z) < 2.0:
        z = z * z + c[i]
        k += 1
    out[i] = k + z * 0.0 + c[i + k - k]


def test_checked_loops_run_in_vector_lanes():
    """A checked kernel with a per-item loop (its loop polls the interrupt flag, its accesses may fail) runs in
    lanes, computing what it computes item by item; a failure inside lanes is still an IndexError."""
    n = 1000
    c = np.linspace(-2.2, 0.6, n)
    lines = [line for line in str(escape.inspect(c, np.zeros(n), 50).trace).splitlines() if "vectorized at" in line]
    assert lines and lines[0].strip().startswith("vectorized"), lines
    got, want = np.zeros(n), np.zeros(n)
    escape[n](c, got, 50, threads=1)
    gpuc.kernel(escape.py_func, boundscheck=True, vectorize=False)[n](c, want, 50, threads=1)
    np.testing.assert_array_equal(got, want)
    with pytest.raises(IndexError, match=rf"index {n} is out of bounds for axis 0 with size {n}"):
        escape[n + 1](c, np.zeros(n + 1), 50, threads=1)
