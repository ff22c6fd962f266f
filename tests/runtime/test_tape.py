"""gpuc.Tape (gpuc/runtime/tape.py): gradients through many recorded launches against central differences of
the primal launches and closed forms; the refusals (memory overwritten after a recorded launch used it, GPU
arrays, adjoint launches, nested tapes), zero/reset, backward twice, threads, pass-through arguments."""

from __future__ import annotations

import contextvars
import sys
import threading

import numpy as np
import pytest

import gpuc
from support.examples import load_example


pytestmark = pytest.mark.devices("cpu", "opencl")


@pytest.fixture(scope="module")
def heat():
    return load_example("heat_tape", "gpuc_example_heat_tape")


@gpuc.kernel
def scaled_sine(x, a, y):
    i = gpuc.index()
    y[i] = a * np.sin(x[i])


@gpuc.kernel
def weighted_squares(x, w, loss):
    i = gpuc.index()
    gpuc.atomic_add(loss, 0, w[i] * x[i] * x[i])


@gpuc.kernel
def square_in_place(x):
    i = gpuc.index()
    x[i] = x[i] * x[i]


@gpuc.kernel
def copy_scaled(x, y):
    i = gpuc.index()
    y[i] = 2.0 * x[i]


def _sum_of(arrays, w):
    """Launch the sums of w[i] * a[i]**2, one element of a fresh array of losses per array of `arrays`."""
    losses = np.zeros(len(arrays))
    for k, a in enumerate(arrays):
        weighted_squares[a.size](a, w, losses[k:k + 1])
    return losses


# -- the example and finite differences ------------------------------------------------------------------------


def test_heat_example_over_100_steps_matches_central_differences(heat):
    u0 = heat.initial_profile()
    target = heat.simulate(np.array([0.3]), u0, np.zeros(u0.size))[0][heat.STEPS]
    kappa = np.array([0.2])
    loss, dkappa, du0 = heat.gradients(kappa, u0, target)
    cells = list(range(0, u0.size, 3))
    fd_kappa, fd_u0 = heat.finite_differences(kappa, u0, target, cells)
    # the loss is an atomic sum over cells: through OpenCL its order, and so its last bits, vary between runs
    assert loss == pytest.approx(heat.simulate(kappa, u0, target)[1][0], rel=1e-14)
    assert dkappa[0] == pytest.approx(fd_kappa, rel=1e-7)
    np.testing.assert_allclose(du0[cells], fd_u0, rtol=0, atol=1e-7 * np.abs(fd_u0).max())
    assert np.abs(fd_u0).max() > 1e-2  # the gradient is not trivially zero


def test_heat_example_runs(heat, capsys):
    assert heat.main() == 0
    out = capsys.readouterr().out
    assert "WRONG" not in out and "central differences" in out and ": ok" in out


@gpuc.kernel
def fluxes(u, flux, kappa):
    i = gpuc.index()
    if i == 0:
        flux[i] = 0.0
    else:
        flux[i] = kappa[0] * (u[i - 1] - u[i]) * (1.0 + 0.5 * u[i] * u[i])


@gpuc.kernel
def apply_fluxes(u, flux, source, dt, u_next):
    i = gpuc.index()
    outflow = 0.0
    if i + 1 < u.shape[0]:
        outflow = flux[i + 1]
    u_next[i] = u[i] + dt * (flux[i] - outflow + source[i] * u[i])


@gpuc.kernel
def squared_miss(u, target, loss):
    i = gpuc.index()
    miss = u[i] - target[i]
    gpuc.atomic_add(loss, 0, miss * miss)


def _two_kernel_run(kappa, source, u0, target, steps, threads=None):
    n = u0.size
    u, flux = np.zeros((steps + 1, n)), np.zeros((steps, n))
    u[0] = u0
    loss = np.zeros(1)
    for t in range(steps):
        fluxes.launch(n, u[t], flux[t], kappa, threads=threads)
        apply_fluxes.launch(n, u[t], flux[t], source, 0.1, u[t + 1], threads=threads)
    squared_miss.launch(n, u[steps], target, loss, threads=threads)
    return u, flux, loss


def test_several_kernels_per_step_and_parameters_read_by_every_step():
    rng = np.random.default_rng(1)
    n, steps = 24, 30
    u0, target, source = rng.random(n), rng.random(n), 0.2 * rng.random(n)
    kappa = np.array([0.7])
    with gpuc.Tape() as tape:
        u, flux, loss = _two_kernel_run(kappa, source, u0, target, steps)
    assert len(tape.launches) == 2 * steps + 1
    tape.backward(loss)
    h = 1e-6

    def central(change):
        up, down = change(h), change(-h)
        return (_two_kernel_run(*up, target, steps)[-1][0] - _two_kernel_run(*down, target, steps)[-1][0]) / (2 * h)

    assert tape.gradients[kappa][0] == pytest.approx(central(lambda e: (kappa + e, source, u0)), rel=1e-6)
    for c in (0, 7, n - 1):
        bump = np.eye(n)[c]
        want_source = central(lambda e: (kappa, source + e * bump, u0))
        want_u0 = central(lambda e: (kappa, source, u0 + e * bump))
        assert tape.gradients[source][c] == pytest.approx(want_source, rel=1e-6, abs=1e-9)
        assert tape.gradients[u[0]][c] == pytest.approx(want_u0, rel=1e-6, abs=1e-9)
    # the intermediate rows and fluxes were overwritten by the launches: their gradients were consumed
    assert not tape.gradients[u[1:]].any() and not tape.gradients[flux].any()


def test_an_input_read_by_many_launches_accumulates_its_gradient():
    rng = np.random.default_rng(2)
    x, w = rng.random(50), rng.random(50)
    factors = (0.5, -2.0, 3.0)
    ys = [np.zeros(50) for _ in factors]
    with gpuc.Tape() as tape:
        for a, y in zip(factors, ys):
            scaled_sine[50](x, a, y)
        losses = _sum_of(ys, w)
    tape.backward(grads=[(losses, 1.0)])
    want = sum(2.0 * w * a * np.sin(x) * a * np.cos(x) for a in factors)
    np.testing.assert_allclose(tape.gradients[x], want, rtol=1e-12)
    np.testing.assert_allclose(tape.gradients[w], sum((a * np.sin(x)) ** 2 for a in factors), rtol=1e-12)
    assert (tape.gradients[losses] == 1.0).all()  # only added to: their seeds stay


# -- the in-place rule -----------------------------------------------------------------------------------------


@gpuc.kernel
def smooth(u, u_next):
    i = gpuc.index()
    u_next[i] = 0.5 * u[i] + 0.25 * (u[max(i - 1, 0)] + u[min(i + 1, u.shape[0] - 1)])


def test_time_stepping_in_place_is_a_located_error_at_the_second_write():
    u, v = np.random.default_rng(3).random(16), np.zeros(16)
    with gpuc.Tape() as tape:
        smooth[16](u, v)
        first = sys._getframe().f_lineno - 1
        before = u.copy()
        second = sys._getframe().f_lineno + 2
        with pytest.raises(ValueError) as info:
            smooth[16](v, u)  # ping-pong: writes u, which the first launch read
    message = str(info.value)
    assert message.startswith(f"{__file__}:{second}: ")
    assert "smooth" in message and "argument 1 (u_next)" in message and "argument 0 (u)" in message
    assert f"{__file__}:{first} read" in message and "one array per step" in message
    assert (u == before).all() and len(tape.launches) == 1  # refused before it ran; the tape is as it was


def test_writing_an_output_twice_is_refused_and_says_wrote():
    x, y = np.ones(8), np.zeros(8)
    with gpuc.Tape():
        copy_scaled[8](x, y)
        with pytest.raises(ValueError, match=r"copy_scaled at .*test_tape.py:\d+ wrote \(its argument 1 \(y\)\)"):
            copy_scaled[8](x, y)
        with pytest.raises(ValueError, match="writes its argument 1"):
            copy_scaled[4](x, y[4:])  # any bytes of it: a view of the same memory


def test_views_of_one_buffer_are_one_array_to_the_tape():
    # the rows of a history array: a new view object per launch, one gradient memory
    x = np.random.default_rng(4).random((3, 10))
    w = np.ones(10)
    with gpuc.Tape() as tape:
        copy_scaled[10](x[0], x[1])
        copy_scaled[10](x[1], x[2])
        loss = _sum_of([x[2]], w)
    tape.backward(grads=[(loss, 1.0)])
    np.testing.assert_allclose(tape.gradients[x[0]], 2 * 2 * 2 * x[2] / 1.0, rtol=1e-14)
    np.testing.assert_allclose(tape.gradients[x][0], tape.gradients[x[0]])
    assert not tape.gradients[x[1:]].any()


def test_columns_and_reversed_views_that_share_no_element_are_separate_arrays():
    # the columns of one array: their bytes interleave, their elements do not
    u = np.zeros((10, 4))
    u[:, 0] = np.random.default_rng(11).random(10)
    w = np.ones(10)
    with gpuc.Tape() as tape:
        for t in range(3):
            copy_scaled[10](u[:, t], u[:, t + 1])
        loss = _sum_of([u[::-1, 3]], w)
        with pytest.raises(ValueError, match="writes its argument 1"):
            copy_scaled[5](u[::2, 0], u[1::2, 1])  # every other element of column 1, which launch 2 read
    tape.backward(loss)
    np.testing.assert_allclose(tape.gradients[u[:, 0]], 2 * 8 * 8 * u[:, 0], rtol=1e-14)
    assert not tape.gradients[u[:, 1:]].any()


def test_a_launch_updating_an_array_in_place_reruns_from_its_old_values():
    # The adjoint of x[i] = x[i] * x[i] reruns it: the tape gives it x as it was, not the squares.
    x0 = np.random.default_rng(5).random(20) + 0.5
    x, y, w = x0.copy(), np.zeros(20), np.ones(20)
    with gpuc.Tape() as tape:
        square_in_place[20](x)
        scaled_sine[20](x, 1.0, y)
        loss = _sum_of([y], w)
    done = (x.copy(), y.copy(), loss.copy())
    tape.backward(loss)
    want = 2.0 * np.sin(x0 ** 2) * np.cos(x0 ** 2) * 2.0 * x0
    np.testing.assert_allclose(tape.gradients[x], want, rtol=1e-12)
    for after, before in zip((x, y, loss), done):  # memory is as the forward launches left it
        np.testing.assert_allclose(after, before, rtol=1e-14)


def test_an_array_a_launch_reads_and_writes_under_two_names_is_refused():
    x = np.ones(8)
    with gpuc.Tape():
        with pytest.raises(ValueError, match=r"copy_scaled may write argument 1 \(y\), which shares memory with its "
                                             r"argument 0 \(x\)"):
            copy_scaled[8](x, x)


# -- zero, reset, backward twice ---------------------------------------------------------------------------------


def _recorded(x, w):
    y = np.zeros_like(x)
    tape = gpuc.Tape()
    with tape:
        scaled_sine[x.size](x, 1.5, y)
        loss = _sum_of([y], w)
    return tape, y, loss


def test_backward_twice_adds_the_gradients_again_and_keeps_the_primal():
    rng = np.random.default_rng(6)
    x, w = rng.random(30), rng.random(30)
    tape, y, loss = _recorded(x, w)
    value = loss.copy()
    tape.backward(loss)
    once = tape.gradients[x].copy()
    np.testing.assert_allclose(once, 2 * w * 1.5 * np.sin(x) * 1.5 * np.cos(x), rtol=1e-12)
    tape.backward(loss)
    np.testing.assert_allclose(tape.gradients[x], 2 * once, rtol=1e-14)
    np.testing.assert_allclose(loss, value, rtol=1e-14)  # the atomic sum was rerun from what it held, not added to
    np.testing.assert_allclose(y, 1.5 * np.sin(x), rtol=1e-15)


def test_zero_keeps_the_recording_and_reset_forgets_it():
    rng = np.random.default_rng(7)
    x, w = rng.random(30), rng.random(30)
    tape, y, loss = _recorded(x, w)
    with pytest.raises(KeyError, match="call tape.backward first"):
        tape.gradients[x]
    assert len(tape.gradients) == 0
    tape.backward(loss)
    first = tape.gradients[x].copy()
    assert first.any() and len(tape.gradients) == 4 and any(a is x for a in tape.gradients)
    tape.zero()
    assert not tape.gradients[x].any() and not tape.gradients[w].any() and len(tape.launches) == 2
    tape.backward(loss)
    # the adjoints add into shared gradients atomically, in the order work items get there: through
    # OpenCL (work groups on several threads) the sums may round differently from one backward to the next
    np.testing.assert_allclose(tape.gradients[x], first, rtol=1e-14, atol=0)
    tape.reset()
    assert tape.launches == () and x not in tape.gradients
    z = np.zeros(30)
    with tape:  # records afresh, from the same arrays
        copy_scaled[30](x, z)
        loss2 = _sum_of([z], w)
    tape.backward(loss2)
    np.testing.assert_allclose(tape.gradients[x], 8.0 * w * x, rtol=1e-14)


def test_recording_more_after_backward_keeps_the_gradients():
    x, y, z = np.ones(6), np.zeros(6), np.zeros(6)
    tape = gpuc.Tape()
    with tape:
        copy_scaled[6](x, y)
    tape.backward(grads=[(y, 1.0)])
    with tape:  # a second with block adds to the recording
        copy_scaled[6](y, z)
    tape.backward(grads=[(z, 1.0)])  # both launches run backwards: 2 before, then 2 * 2
    np.testing.assert_array_equal(tape.gradients[x], np.full(6, 6.0))
    assert len(tape.launches) == 2 and not tape.gradients[y].any()


# -- threads ------------------------------------------------------------------------------------------------------


@pytest.mark.not_on("opencl", "checks launches on the CPU runtime's threads (threads=)")
def test_launches_on_two_threads_give_the_gradients_of_one(heat):
    u0 = heat.initial_profile(512)
    target = np.linspace(0.0, 0.5, 512)
    kappa = np.array([0.25])
    one = heat.gradients(kappa, u0, target, steps=40, threads=1)
    two = heat.gradients(kappa, u0, target, steps=40, threads=2)
    assert two[0] == pytest.approx(one[0], rel=1e-12)
    assert two[1][0] == pytest.approx(one[1][0], rel=1e-10)
    np.testing.assert_allclose(two[2], one[2], rtol=1e-10, atol=1e-14)


def test_each_python_thread_records_its_own_launches():
    rng = np.random.default_rng(8)
    results, errors = {}, []
    start = threading.Barrier(2)

    def work(name):
        try:
            steps = np.zeros((6, 40))
            steps[0] = rng.random(40)
            w = rng.random(40)
            start.wait()
            with gpuc.Tape() as tape:
                for t in range(5):  # the other thread's launches interleave with these
                    copy_scaled[40](steps[t], steps[t + 1])
                loss = _sum_of([steps[5]], w)
            tape.backward(loss)
            results[name] = (len(tape.launches), tape.gradients[steps[0]].copy(), 2048.0 * w * steps[0])
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    # each thread launches on the test's device (new threads do not inherit using_device: a context each)
    threads = [threading.Thread(target=contextvars.copy_context().run, args=(work, name)) for name in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(results) == 2
    for count, grad, want in results.values():
        assert count == 6
        np.testing.assert_allclose(grad, want, rtol=1e-14)


# -- what passes through --------------------------------------------------------------------------------------------


@gpuc.kernel
def pick(indices, n, seed):
    i = gpuc.index()
    indices[i] = (i * seed + 3) % n


@gpuc.kernel
def gather(x, indices, w, shift, y):
    i = gpuc.index()
    y[i] = w * x[indices[i]] * x[indices[i]] + shift


def test_integer_arrays_and_scalars_are_passed_through():
    rng = np.random.default_rng(9)
    x = rng.random(17)
    indices, y, w = np.zeros(40, np.int64), np.zeros(40), rng.random(40)
    with gpuc.Tape() as tape:
        pick[40](indices, 17, 7)  # an integer array written by one launch and read by the next
        gather[40](x, indices, 0.75, np.int32(2), y)
        loss = _sum_of([y], w)
    tape.backward(loss)
    want_indices = (np.arange(40) * 7 + 3) % 17
    assert (indices == want_indices).all()
    dy = 2 * w * y
    want = np.bincount(want_indices, weights=dy * 0.75 * 2 * x[want_indices], minlength=17)
    np.testing.assert_allclose(tape.gradients[x], want, rtol=1e-12)
    with pytest.raises(KeyError, match="int64 array has no gradient"):
        tape.gradients[indices]


def test_a_kernel_adding_atomically_into_a_loss():
    rng = np.random.default_rng(10)
    x, w = rng.random(300), rng.random(150)
    loss = np.zeros(1)
    with gpuc.Tape() as tape:
        weighted_squares[150](x[:150], w, loss)
        # a second launch adding into the same loss would overwrite memory the first one wrote
        with pytest.raises(ValueError, match=r"weighted_squares writes its argument 2 \(loss\), memory that the "
                                             r"recorded launch of weighted_squares at .*test_tape.py:\d+ wrote"):
            weighted_squares[150](x[150:], w, loss)
        weighted_squares[150](x[150:], w, np.zeros(1))  # its own loss: an input no seed reaches
    assert loss[0] == pytest.approx(np.sum(w * x[:150] ** 2), rel=1e-12)
    value = loss.copy()
    tape.backward(grads=[(loss, 2.0)])
    np.testing.assert_allclose(tape.gradients[x[:150]], 2.0 * 2 * w * x[:150], rtol=1e-12)
    assert not tape.gradients[x[150:]].any()
    np.testing.assert_allclose(tape.gradients[w], 2.0 * x[:150] ** 2, rtol=1e-12)
    np.testing.assert_allclose(loss, value, rtol=1e-14)
    assert tape.gradients[loss][0] == 2.0  # only added to: the seed stays


# -- refusals -------------------------------------------------------------------------------------------------------


class _FakeDeviceArray:
    """Looks like a GPU array to the launcher; nothing is ever run with it."""

    def __init__(self, n: int) -> None:
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "<f8", "data": (0, False), "version": 3,
                                         "strides": None}


def test_gpu_arrays_are_refused_with_the_reason():
    with gpuc.Tape() as tape:
        with pytest.raises(ValueError, match=r"test_tape.py:\d+: gpuc.Tape records launches on NumPy arrays .* "
                                             r"copy_scaled runs on 'cuda' arrays"):
            copy_scaled[4](_FakeDeviceArray(4), np.zeros(4))
    assert tape.launches == ()


def test_adjoint_launches_and_nested_tapes_are_refused():
    x, dx, y, dy = np.ones(4), np.zeros(4), np.zeros(4), np.ones(4)
    with gpuc.Tape() as tape:
        with pytest.raises(ValueError, match="not of the adjoint of copy_scaled: tape.backward launches the adjoints"):
            gpuc.adjoint(copy_scaled)[4](x, dx, y, dy)
        with pytest.raises(ValueError, match="not of the adjoint of copy_scaled"):  # also on the threaded path
            gpuc.adjoint(copy_scaled).launch(4, x, dx, y, dy, threads=2)
        with pytest.raises(RuntimeError, match="tapes do not nest"):
            with gpuc.Tape():
                pass
    assert tape.launches == ()
    gpuc.adjoint(copy_scaled)[4](x, dx, y, dy)  # outside a tape, as before
    assert (dx == 2.0).all()


def test_seeds_must_name_recorded_float_arrays():
    x, y = np.ones(4), np.zeros(4)
    with gpuc.Tape() as tape:
        copy_scaled[4](x, y)
    with pytest.raises(ValueError, match="no recorded launch passed"):
        tape.backward(grads=[(y.copy(), 1.0)])
    with pytest.raises(ValueError, match="needs a seed"):
        tape.backward()
    with pytest.raises(ValueError, match="one-element float array"):
        tape.backward(y)
    tape.backward(grads=[(y, np.arange(4.0))])
    np.testing.assert_array_equal(tape.gradients[x], 2.0 * np.arange(4.0))


@gpuc.kernel
def running_max(x, y):
    i = gpuc.index()
    gpuc.atomic_max(y, 0, x[i])


def test_an_error_in_backward_names_the_recorded_launch():
    x, y = np.ones(8), np.zeros(1)
    with gpuc.Tape() as tape:
        running_max[8](x, y)  # its adjoint cannot be built: an atomic max of floats
        line = sys._getframe().f_lineno - 1
    with pytest.raises(gpuc.CompilationError, match="atomic operations on floats other than") as info:
        tape.backward(grads=[(y, 1.0)])
    assert f"the adjoint of running_max launched at {__file__}:{line}" in "".join(info.value.__notes__)


def test_public_name_and_hint():
    assert "Tape" in gpuc.__all__ and gpuc.Tape is gpuc.runtime.tape.Tape
    with pytest.raises(AttributeError, match="gpuc.Tape"):
        gpuc.tape


# -- arrays the kernels only write ---------------------------------------------------------------------------------


@gpuc.kernel
def smoothed(x, y):
    i = gpuc.index()
    if i > 0 and i < x.shape[0] - 1:
        y[i] = 0.25 * x[i - 1] + 0.5 * x[i] + 0.25 * x[i + 1]


@gpuc.kernel
def product(a, b, y):
    i = gpuc.index()
    y[i] = a[i] * b[i]


def test_backward_leaves_what_a_kernel_only_writes_as_the_forward_left_it(gpuc_device):
    # tape.backward launches gpuc.adjoint(k, primal_writes=False) where a CPU launch's arrays do not overlap: an
    # array the kernel only writes is neither put back nor written again (an element no launch wrote keeps
    # what the user put there after recording); where two inputs are one array, and on OpenCL, the default
    # adjoint runs, which puts back what the arrays held and writes them again
    rng = np.random.default_rng(11)
    x, w = rng.random(64), rng.random(64)
    y = np.zeros(64)
    with gpuc.Tape() as tape:
        smoothed[64](x, y)
        loss = _sum_of([y], w)
    done = y.copy()
    y[0] = 7.0  # smoothed never writes y[0]: the default adjoint's put-back would zero it
    tape.backward(loss)
    g = 2 * w * done
    want = np.zeros(64)
    want[:-2] += 0.25 * g[1:-1]
    want[1:-1] += 0.5 * g[1:-1]
    want[2:] += 0.25 * g[1:-1]
    np.testing.assert_allclose(tape.gradients[x], want, rtol=1e-13)
    kept = gpuc_device == "cpu"
    assert y[0] == (7.0 if kept else 0.0) and np.array_equal(y[1:], done[1:])
    assert not kept or gpuc.adjoint(smoothed, primal_writes=False)._by_layout, "the kept adjoint did not run"

    y2 = np.zeros(64)
    with gpuc.Tape() as tape:
        product[64](x, x, y2)
        loss = _sum_of([y2], w)
    done = y2.copy()
    tape.backward(loss)
    np.testing.assert_allclose(tape.gradients[x], 4 * w * x ** 3, rtol=1e-13)
    np.testing.assert_array_equal(y2, done)
    assert not gpuc.adjoint(product, primal_writes=False)._by_layout, "overlapping inputs took the kept adjoint"
