"""gpuc.jax.jax_kernel: values equal to the same kernel launched on NumPy arrays, eagerly, under jit, inside
lax.scan and vmap, with several outputs and with scalars; bad input is a located error."""

from __future__ import annotations

import math

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

import gpuc  # noqa: E402
from gpuc.jax import jax_kernel  # noqa: E402

N = 1000
RNG = np.random.default_rng(29)
X = RNG.standard_normal(N).astype(np.float32)
Y = RNG.standard_normal(N).astype(np.float32)


@gpuc.kernel
def saxpy(a, x, y, out):
    i = gpuc.index()
    out[i] = a * x[i] + y[i]


@gpuc.kernel
def sum_and_product(x, y, total, product):
    i = gpuc.index()
    total[i] = x[i] + y[i]
    product[i] = x[i] * y[i]


@gpuc.kernel
def accumulate(x, out):
    i = gpuc.index()
    out[i] += x[i] * 2.0


@gpuc.kernel
def row_sums(m, out):
    i = gpuc.index()
    acc = 0.0
    for j in range(m.shape[1]):
        acc += m[i, j]
    out[i] = acc


@gpuc.kernel
def scaled_index(k, out):
    i = gpuc.index()
    out[i] = k * i


@gpuc.kernel
def in_place(x, out):
    i = gpuc.index()
    x[i] = 0.0
    out[i] = 1.0


def numpy_saxpy(a, x, y):
    out = np.empty_like(x)
    saxpy[x.size](a, x, y, out)
    return out


def test_eager_equals_numpy_launch():
    f = jax_kernel(saxpy)
    got = f(np.float32(2.5), jnp.asarray(X), jnp.asarray(Y))
    assert isinstance(got, jax.Array) and got.dtype == jnp.float32 and got.shape == (N,)
    np.testing.assert_array_equal(np.asarray(got), numpy_saxpy(np.float32(2.5), X, Y))


def test_jit_with_a_traced_scalar():
    f = jax.jit(jax_kernel(saxpy))
    for a in (np.float32(-1.0), np.float32(3.0)):  # one compile, the scalar read at each call
        np.testing.assert_array_equal(np.asarray(f(a, X, Y)), numpy_saxpy(a, X, Y))


def test_inside_lax_scan():
    f = jax_kernel(saxpy)

    def step(x, a):
        return f(a, x, jnp.asarray(Y)), None

    coefficients = jnp.asarray([0.5, -1.25, 2.0], jnp.float32)
    got, _ = jax.jit(lambda x: jax.lax.scan(step, x, coefficients))(jnp.asarray(X))
    want = X
    for a in np.asarray(coefficients):
        want = numpy_saxpy(a, want, Y)
    np.testing.assert_array_equal(np.asarray(got), want)


def test_several_outputs():
    f = jax_kernel(sum_and_product, num_outputs=2)
    total, product = jax.jit(f)(X, Y)
    np.testing.assert_array_equal(np.asarray(total), X + Y)
    np.testing.assert_array_equal(np.asarray(product), X * Y)


def test_outputs_the_kernel_reads_start_at_zero():
    # XLA's output buffers hold old data: an output the kernel adds into is zeroed first, at every call.
    f = jax.jit(jax_kernel(accumulate))
    for _ in range(3):
        np.testing.assert_array_equal(np.asarray(f(X)), X * 2)


def test_launch_and_output_dims_from_input_shapes():
    m = RNG.standard_normal((7, 5))
    f = jax_kernel(row_sums, launch_dims=lambda shapes: shapes[0][0], output_dims=lambda shapes: (shapes[0][0],))
    with jax.enable_x64(True):
        got = np.asarray(f(jnp.asarray(m)))
    np.testing.assert_allclose(got, m.sum(axis=1), rtol=1e-12)


def test_int_scalar_with_given_dims_and_dtype():
    f = jax_kernel(scaled_index, launch_dims=6, output_dims=6, output_dtypes=np.int32)
    got = f(np.int32(3))
    assert got.dtype == jnp.int32
    np.testing.assert_array_equal(np.asarray(got), 3 * np.arange(6))


def test_vmap_launches_once_per_batch_element():
    f = jax_kernel(saxpy)
    xs = np.stack([X, -X, 2 * X])
    got = jax.vmap(lambda x: f(np.float32(2.0), x, jnp.asarray(Y)))(xs)
    for row, x in zip(np.asarray(got), xs):
        np.testing.assert_array_equal(row, numpy_saxpy(np.float32(2.0), x, Y))


def test_two_threads_match_one(monkeypatch):
    # 100k items: the launch runs in chunks, claimed by XLA's calling thread and a task on XLA's thread pool
    # (the handler in machine code, as for a launch of one call)
    x = RNG.standard_normal(100_000).astype(np.float32)
    monkeypatch.setenv("GPUC_NUM_THREADS", "2")
    f = jax_kernel(saxpy)
    got = jax.jit(f)(np.float32(0.5), x, x)
    np.testing.assert_array_equal(np.asarray(got), numpy_saxpy(np.float32(0.5), x, x))
    small = jax.jit(f)(np.float32(0.5), X, Y)
    np.testing.assert_array_equal(np.asarray(small), numpy_saxpy(np.float32(0.5), X, Y))
    launches = [launch for launch in f._launches.values() if hasattr(launch, "compiled")]
    assert all(launch.compiled for launch in launches)
    assert sorted(launch._chunks()[1] for launch in launches) == [1, 2]


# -- bad input -----------------------------------------------------------------------------------------

def test_kernel_writing_an_input_is_refused_naming_it():
    f = jax_kernel(in_place)
    with pytest.raises(ValueError, match=r"argument 0 \(x\) of in_place .*test_jax_kernel.py:\d+.* read-only"):
        f(X)
    np.testing.assert_array_equal(np.asarray(jax_kernel(saxpy)(np.float32(1), X, Y)), X + Y)  # still works


def test_unsupported_dtype_is_named():
    f = jax_kernel(saxpy)
    with pytest.raises(TypeError, match="argument 1: dtype bfloat16 is not supported"):
        f(np.float32(1), jnp.asarray(X, jnp.bfloat16), jnp.asarray(Y))


def test_wrong_number_of_inputs():
    with pytest.raises(TypeError, match=r"takes 3 input\(s\) \(a, x, y\), got 2"):
        jax_kernel(saxpy)(X, Y)


def test_output_dims_for_the_wrong_number_of_outputs():
    f = jax_kernel(sum_and_product, num_outputs=2, output_dims=[(N,), (N,), (N,)])
    with pytest.raises(ValueError, match=r"gives 3 value\(s\) for 2 output\(s\) \(total, product\)"):
        f(X, Y)


def test_output_dims_that_are_no_kernel_array_shape():
    with pytest.raises(ValueError, match=r"argument 3 \(out\) of saxpy .*: output_dims gives it 4 dimension"):
        jax_kernel(saxpy, output_dims=(N, 2, 2, 2))(np.float32(1), X, Y)
    with pytest.raises(ValueError, match=r"output_dims of .* must be a shape .* not -1"):
        jax_kernel(saxpy, output_dims=-1)(np.float32(1), X, Y)


def test_output_smaller_than_the_launch_is_an_index_error_with_boundscheck():
    checked = gpuc.kernel(boundscheck=True)(saxpy.py_func)
    f = jax.jit(jax_kernel(checked, output_dims=N // 2))
    with pytest.raises(Exception, match=r"index 500 is out of bounds for axis 0 with size 500 in out"):
        f(np.float32(1), X, Y).block_until_ready()
    np.testing.assert_array_equal(np.asarray(jax_kernel(checked)(np.float32(1), X, Y)), X + Y)


def test_num_outputs_out_of_range():
    with pytest.raises(ValueError, match="num_outputs"):
        jax_kernel(saxpy, num_outputs=5)


def test_not_a_kernel():
    with pytest.raises(TypeError, match="@gpuc.kernel"):
        jax_kernel(math.sin)


@gpuc.kernel
def block_sums(x, out):
    i = gpuc.index()
    tile = gpuc.shared.array(64, gpuc.float32)
    tile[gpuc.thread_index()] = x[i]
    gpuc.barrier()
    out[i] = tile[0]


def test_block_kernel_without_a_block_is_refused_when_traced():
    with pytest.raises(ValueError, match="uses the block model"):
        jax_kernel(block_sums)(X)
