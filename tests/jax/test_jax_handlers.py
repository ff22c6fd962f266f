"""The FFI handlers in machine code (gpuc/jax/handlers.py) called with call frames made here, whose thread pool runs
a helper task at once, refuses it, or runs it only after the call returned: the launch is whole in every case."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

pytest.importorskip("jax")

import gpuc  # noqa: E402
from gpuc.jax.ffi import FFILaunch  # noqa: E402
from gpuc.jax.handlers import (API_ERROR_DESTROY, API_SCHEDULE, BUFFER_DATA, EXECUTE, FRAME_API,  # noqa: E402
                               FRAME_ARGS, FRAME_RETS, FRAME_STAGE, LIST_ITEMS)
from gpuc.runtime import dispatch  # noqa: E402

N = 100_000
_CALL = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
_TASK = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


@gpuc.kernel
def saxpy(a, x, y, out):
    i = gpuc.index()
    out[i] = a * x[i] + y[i]


class Frame:
    """An XLA_FFI_CallFrame of the EXECUTE stage over `operands` and `results` (NumPy arrays), its API's
    thread pool scheduling tasks with `schedule(task, data)`: None (accepted) or an error's address."""

    def __init__(self, operands, results, schedule) -> None:
        self.destroyed = []
        self._buffers = [self._buffer(a) for a in (*operands, *results)]
        addresses = [ctypes.addressof(b) for b in self._buffers]
        self._lists = [(ctypes.c_void_p * len(group))(*addresses[start:start + len(group)])
                       for start, group in ((0, operands), (len(operands), results))]
        self._schedule = _CALL(lambda args: schedule(*(ctypes.c_void_p.from_address(args + k).value for k in (24, 32))))
        self._destroy = _CALL(lambda args: self.destroyed.append(ctypes.c_void_p.from_address(args + 16).value))
        self._api = (ctypes.c_uint8 * 256)()
        ctypes.c_size_t.from_buffer(self._api).value = API_SCHEDULE + 16
        for offset, fn in ((API_SCHEDULE, self._schedule), (API_ERROR_DESTROY, self._destroy)):
            ctypes.c_void_p.from_buffer(self._api, offset).value = ctypes.cast(fn, ctypes.c_void_p).value
        self.frame = (ctypes.c_uint8 * 256)()
        ctypes.c_void_p.from_buffer(self.frame, FRAME_API).value = ctypes.addressof(self._api)
        ctypes.c_int32.from_buffer(self.frame, FRAME_STAGE).value = EXECUTE
        for base, items in ((FRAME_ARGS, self._lists[0]), (FRAME_RETS, self._lists[1])):
            ctypes.c_int64.from_buffer(self.frame, base + 16).value = len(items)
            ctypes.c_void_p.from_buffer(self.frame, base + LIST_ITEMS).value = ctypes.addressof(items)

    @staticmethod
    def _buffer(array):
        buffer = (ctypes.c_uint8 * 48)()
        ctypes.c_void_p.from_buffer(buffer, BUFFER_DATA).value = array.ctypes.data
        return buffer


def handler(monkeypatch):
    monkeypatch.setenv("GPUC_NUM_THREADS", "2")
    probes = (np.float32(0), np.empty(N, np.float32), np.empty(N, np.float32), np.empty(N, np.float32))
    launcher = dispatch.launcher_for(saxpy, probes, "cpu")
    launch = FFILaunch(launcher, N, probes, (("arg", 0), ("arg", 1), ("arg", 2), ("ret", 0)), what="saxpy")
    phases, threads = launch._chunks()
    assert threads == 2 and len(phases[0]) > 2
    return _CALL(launch._compiled(f"gpuc_test_{id(launch)}"))


@pytest.mark.parametrize("pool", ["at once", "refused", "after the call"])
def test_a_launch_on_two_threads_is_whole_whatever_the_pool_does(monkeypatch, pool):
    call = handler(monkeypatch)
    rng = np.random.default_rng(31)
    a = np.asarray(np.float32(1.5))
    x, y = rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)
    out = np.full(N, np.nan, np.float32)
    later, error = [], (ctypes.c_uint8 * 8)()

    def schedule(task, data):
        if pool == "at once":
            _TASK(task)(data)
        elif pool == "refused":
            return ctypes.addressof(error)
        else:
            later.append((task, data))
        return None

    frame = Frame((a, x, y), (out,), schedule)
    assert call(ctypes.addressof(frame.frame)) is None
    np.testing.assert_array_equal(out, np.float32(1.5) * x + y)
    if pool == "refused":
        assert frame.destroyed == [ctypes.addressof(error)]
    for task, data in later:  # the caller ran every chunk; the late helper finds none, and frees the state
        _TASK(task)(data)
    assert len(later) == (1 if pool == "after the call" else 0)
