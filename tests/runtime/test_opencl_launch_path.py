"""The OpenCL launch path's shortcuts (gpuc/runtime/opencl.py, gpuc/runtime/dispatch.py) keep what they shortcut:
a launch's array views stay frozen dataclasses, launch sizes are read as before, device arrays of one kind share
one type object, and bad strides are still refused by name."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest

from gpuc.runtime import dispatch, opencl

pytestmark = pytest.mark.skipif(not opencl.available() and os.environ.get("CI", "").lower() not in ("1", "true"),
                                reason=str(opencl.unavailable_reason()))


def test_array_views_are_frozen_dataclasses():
    # CLArray's __init__ fills its fields at once (a launch makes one per array); the dataclass is unchanged
    view = opencl.CLArray("buffer", 8, (2, 3), (3, 1), np.dtype(np.float32))
    assert (view.readonly, view.host, view.ptr, view.c_contiguous) == (False, None, 8, True)
    assert view == opencl.CLArray(buffer="buffer", offset=8, shape=(2, 3), strides=(3, 1), dtype=np.dtype(np.float32))
    assert hash(view) == hash(opencl.CLArray("buffer", 8, (2, 3), (3, 1), np.dtype(np.float32)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.offset = 0
    moved = dataclasses.replace(view, offset=0, readonly=True)
    assert (moved.offset, moved.readonly, moved.shape) == (0, True, (2, 3))
    assert "CLArray(buffer='buffer', offset=8" in repr(view)


@pytest.mark.parametrize("size, want", [(7, (7,)), (0, (0,)), (np.int64(5), (5,)), ((3, 4), (3, 4)), ([2, 2, 2], (2, 2, 2))])
def test_launch_sizes(size, want):
    assert opencl._dims(size, "the launch size") == want


@pytest.mark.parametrize("size, error", [(-1, ValueError), (2.0, TypeError), ((1, 2, 3, 4), ValueError), ((), ValueError)])
def test_bad_launch_sizes(size, error):
    with pytest.raises(error, match="the launch size must be an int or a tuple of 1 to 3"):
        opencl._dims(size, "the launch size")


def test_device_arrays_of_one_kind_share_a_type():
    a, b = opencl.zeros(8, np.float32), opencl.zeros(16, np.float32)
    assert dispatch.typeof(a) is dispatch.typeof(b)
    assert dispatch.typeof(a).layout == "C"
    strided = opencl.zeros((4, 6), np.float64)[:, ::2]
    assert dispatch.typeof(strided).layout == "A" and dispatch.typeof(strided).ndim == 2
    assert dispatch.typeof(opencl.zeros((4, 6), np.float64)) is not dispatch.typeof(strided)


class _Strided:
    """A device array of another library: an OpenCL buffer with shape, dtype, byte strides and offset."""

    def __init__(self, base, strides):
        self.base_data, self.context = base.base_data, base.context
        self.shape, self.dtype, self.strides, self.offset = base.shape, base.dtype, strides, 0


def test_device_views_read_strides_and_refuse_bad_ones():
    base = opencl.zeros(8, np.float32)
    view = opencl._device_view(_Strided(base, (8,)), "argument 0", opencl.session())
    assert (view.shape, view.strides, view.offset) == ((8,), (2,), 0)
    for bad in ((6,), (-4,)):
        with pytest.raises(ValueError, match=f"argument 0 has byte stride {bad[0]}: .* multiples of the item size 4"):
            opencl._device_view(_Strided(base, bad), "argument 0", opencl.session())


def test_remembered_strides_are_per_item_size_and_never_bad_ones():
    # element strides are remembered by (byte strides, item size): a bad stride is refused every time
    base = opencl.zeros(8, np.float32)
    s = opencl.session()
    for _ in range(2):
        assert opencl._device_view(_Strided(base, (8,)), "argument 0", s).strides == (2,)
        with pytest.raises(ValueError, match="byte stride 6"):
            opencl._device_view(_Strided(base, (6,)), "argument 0", s)
    wide = opencl.zeros(8, np.float64)
    assert opencl._device_view(_Strided(wide, (8,)), "argument 0", s).strides == (1,)
    with pytest.raises(ValueError, match="byte stride 12: .* multiples of the item size 8"):
        opencl._device_view(_Strided(wide, (12,)), "argument 0", s)
    assert opencl._device_view(_Strided(base, [12]), "argument 0", s).strides == (3,)  # a list: not remembered


def test_numpy_scalars_are_not_device_arrays():
    assert not opencl.is_device_array(np.float32(1.0)) and not opencl.is_device_array(np.int64(3))
    assert opencl.is_device_array(opencl.zeros(2, np.float32))
