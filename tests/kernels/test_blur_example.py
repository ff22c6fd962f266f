"""examples/blur.py: the uint8 box blur equals its NumPy reference (edges, saturation, odd shapes, strided
images) on the CPU and through OpenCL, and compiles for the GPU targets."""

from __future__ import annotations


import numpy as np
import pytest

import gpuc
from support.examples import load_example


pytestmark = pytest.mark.devices("cpu", "opencl")
ONE_RUN = pytest.mark.devices("cpu")  # launches nothing


@pytest.fixture(scope="module")
def blur():
    return load_example("blur", "gpuc_example_blur")


def test_main_checks_itself(blur, capsys):
    assert blur.main() == 0
    out = capsys.readouterr().out
    assert "WRONG" not in out and "matches NumPy: True" in out


@pytest.mark.parametrize("shape", [(1, 1, 3), (2, 7, 3), (31, 17, 3), (64, 96, 3)])
@pytest.mark.parametrize("gain", [0, 1, 2, 5])
def test_blur_equals_numpy(blur, shape, gain):
    image = np.random.default_rng(sum(shape) + gain).integers(0, 256, size=shape, dtype=np.uint8)
    got = blur.box_blur(image, gain, threads=2)
    want = blur.reference(image, gain)
    assert got.dtype == np.uint8 and np.array_equal(got, want)


def test_saturation_and_extremes(blur):
    white = np.full((5, 6, 3), 255, np.uint8)
    assert (blur.box_blur(white) == 255).all()           # 9 * 255 = 2295: the int32 sum does not wrap
    assert (blur.box_blur(white, 3) == 255).all()        # clamped, not wrapped
    assert (blur.box_blur(np.zeros_like(white), 7) == 0).all()
    checker = (np.indices((8, 8)).sum(axis=0) % 2 * 255).astype(np.uint8)[:, :, None].repeat(3, axis=2)
    assert np.array_equal(blur.box_blur(checker), blur.reference(checker))


def test_strided_views(blur):
    base = np.random.default_rng(1).integers(0, 256, size=(40, 50, 3), dtype=np.uint8)
    view = base[::2, ::3]                                # not contiguous: the "A" specialization
    out = np.zeros((40, 50, 3), np.uint8)[1::2, ::3]
    blur.box_blur(view, 2, out=out)
    assert np.array_equal(out, blur.reference(view, 2))


@ONE_RUN
def test_refuses_other_images(blur):
    with pytest.raises(ValueError, match="uint8 \\(H, W, 3\\) image"):
        blur.box_blur(np.zeros((4, 4, 3), np.float32))


TYPES = (gpuc.Array[gpuc.uint8, 3], gpuc.Array[gpuc.uint8, 3], gpuc.int32)


@ONE_RUN
def test_compiles_for_ptx(blur, ptxas):
    ptx = gpuc.code_native(blur.blur, TYPES, target=gpuc.PTXTarget(cap="sm_90"))
    assert "st.global.b8" in ptx or "st.global.u8" in ptx
    ptxas(ptx)


@ONE_RUN
def test_compiles_for_gcn_and_spirv(blur, spirv_val):
    assert "s_endpgm" in gpuc.code_native(blur.blur, TYPES, target=gpuc.GCNTarget())
    job = gpuc.CompilerJob((blur.blur, TYPES), gpuc.CompilerConfig(gpuc.SPIRVTarget()))
    spirv_val(gpuc.compile(job, "obj").output)
