"""Launches take CPU arrays with `__dlpack__` (here JAX arrays) as they take NumPy arrays: no copy, the same
dtype, dimension and read-only checks."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

import gpuc  # noqa: E402


@gpuc.kernel
def saxpy(a, x, y, out):
    i = gpuc.index()
    out[i] = a * x[i] + y[i]


@gpuc.kernel
def first_rows(m, out):
    i = gpuc.index()
    out[i] = m[i, 0]


X = np.linspace(-1.0, 1.0, 100).astype(np.float32)


def test_jax_inputs_as_numpy_inputs():
    x, y = jnp.asarray(X), jnp.asarray(2 * X)
    got, want = np.empty_like(X), np.empty_like(X)
    saxpy[X.size](np.float32(3), x, y, got)
    saxpy[X.size](np.float32(3), X, 2 * X, want)
    np.testing.assert_array_equal(got, want)


def test_no_copy_is_made():
    x = jnp.asarray(X)
    seen = np.from_dlpack(x)
    assert seen.__array_interface__["data"][0] == x.unsafe_buffer_pointer()
    assert gpuc.runtime.cpu.host_array(x, "x").ptr == x.unsafe_buffer_pointer()


def test_prepared_launch_with_jax_inputs():
    out = np.zeros_like(X)
    launch = saxpy.prepare(X.size, np.float32(1), jnp.asarray(X), jnp.asarray(X), out)
    launch()
    np.testing.assert_array_equal(out, 2 * X)


def test_writing_a_jax_array_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"argument 3 \(out\) of @saxpy\S* is read-only"):
        saxpy[X.size](np.float32(1), X, X, jnp.zeros_like(jnp.asarray(X)))


def test_dtype_and_dimension_checks():
    m = jnp.ones((4, 3), jnp.float32)
    out = np.zeros(4, np.float32)
    first_rows[4](m, out)
    np.testing.assert_array_equal(out, 1.0)
    launch = first_rows.prepare(4, m, out)
    launch()
    with pytest.raises(TypeError, match=r"argument 0: kernels take arrays of 1 to 3 dimensions, not 4"):
        first_rows[4](jnp.ones((2, 2, 2, 2), jnp.float32), out)
    with pytest.raises(TypeError, match=r"argument 0 \(ArrayImpl\) could not be read through DLPack"):
        first_rows[4](jnp.ones((4, 3), jnp.bfloat16), out)
