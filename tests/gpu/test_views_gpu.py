"""Views, copies into views, array methods and global arrays in kernels launched on the GPU, against NumPy."""

from __future__ import annotations

import numpy as np

import gpuc
import gpuc.cuda as cuda

WEIGHTS = np.array([0.5, -1.0, 2.0, 4.0])


@gpuc.kernel
def rows(a, out, scratch):
    i = gpuc.index()
    if i < a.shape[0]:
        r = a[i, ::-1]
        out[i, :] = r
        out[i, 1:3] = WEIGHTS[1:3].sum() + r[1:].max()
        s = scratch[i]
        s[1:] = s[:-1]          # overlapping: through the device heap's temporary
        s[0] = a[i].mean()


def test_views_and_methods_on_the_gpu():
    a = np.random.default_rng(3).standard_normal((300, 4))
    scratch = np.arange(300 * 5, dtype=np.float64).reshape(300, 5)
    want, want_scratch = a[:, ::-1].copy(), scratch.copy()
    for i in range(300):
        want[i, 1:3] = WEIGHTS[1:3].sum() + a[i, ::-1][1:].max()
        want_scratch[i, 1:] = scratch[i, :-1].copy()
        want_scratch[i, 0] = a[i].mean()
    out, dscratch = cuda.to_device(np.zeros((300, 4))), cuda.to_device(scratch)
    rows.launch(320, cuda.to_device(a), out, dscratch, device="cuda")
    np.testing.assert_allclose(out.copy_to_host(), want, rtol=1e-13)
    np.testing.assert_allclose(dscratch.copy_to_host(), want_scratch, rtol=1e-13)
