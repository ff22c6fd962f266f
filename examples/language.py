"""The language Numba users write, on the CPU: complex numbers (Numba's Mandelbrot example), a uint8 image
blur, views with array methods, types that unify where paths join, and a kernel compiled ahead of time
into a shared library and loaded back.

    .venv/bin/python examples/language.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import gpuc
import blur
import mandelbrot


@gpuc.kernel
def normalize_rows(m, out):
    i = gpuc.index()
    row = m[i, :]                  # a view of row i: no copy
    peak = row.max()
    scale = 0                      # an int64 here ...
    if peak > 0:
        scale = 1.0 / peak         # ... and a float64 here: they unify to float64, as in Numba
    for j, v in enumerate(row):
        out[i, j] = v * scale
    out[i, 0:1] = row.sum()        # a copy into a slice: the row's total in the first column


def section(title: str) -> None:
    print(f"\n=== {title} " + "=" * max(0, 70 - len(title)))


def _report(what: str, good: bool) -> bool:
    print(f"  {what}: {'ok' if good else 'WRONG'}")
    return bool(good)


def main() -> int:
    ok = True
    section("complex numbers: Numba's Mandelbrot example, unchanged but for the decorator")
    image = mandelbrot.create_fractal(-2.0, 1.0, -1.0, 1.0, np.zeros((12, 48), dtype=np.uint8), 20)
    for row in image:
        print("  " + "".join("@" if v == 255 else " .:-=+*#%"[int(v) * 9 // 20] for v in row))
    want = mandelbrot.reference(-2.0, 1.0, -1.0, 1.0, np.zeros_like(image), 20)
    ok &= _report("equals the Python interpreter", np.array_equal(image, want))

    section("uint8 images: a saturating 3x3 box blur of an RGB image")
    picture = np.random.default_rng(0).integers(0, 256, size=(32, 48, 3), dtype=np.uint8)
    ok &= _report("equals NumPy", np.array_equal(blur.box_blur(picture, 3), blur.reference(picture, 3)))

    section("views, array methods and joins")
    m = np.random.default_rng(1).random((5, 7))
    m[2] = 0.0
    out = np.empty_like(m)
    normalize_rows[m.shape[0]](m, out)
    peak = m.max(axis=1, keepdims=True)
    want = np.where(peak > 0, m / np.where(peak > 0, peak, 1.0), 0.0)
    want[:, 0] = m.sum(axis=1)
    ok &= _report("row views, max/sum, a slice copy, an int/float join: equal NumPy", np.allclose(out, want))

    section("ahead of time: `gpuc compile ... --emit lib`, then gpuc.load_library")
    ok &= _ahead_of_time()
    return 0 if ok else 1


def _ahead_of_time() -> bool:
    if shutil.which("cc") is None and shutil.which("ld.lld") is None:
        print("  no C compiler or ld.lld to link a library with: skipped")
        return True
    source = Path(__file__).resolve().with_name("kernels.py")
    with tempfile.TemporaryDirectory() as folder:
        library = Path(folder) / "libkernels.so"
        command = [sys.executable, "-m", "gpuc", "compile", f"{source}:saxpy", "--types", "f32, f32[:], f32[:], f32[:]",
                   "--emit", "lib", "-o", str(library)]
        print("  $ gpuc compile kernels.py:saxpy --types \"f32, f32[:], f32[:], f32[:]\" --emit lib -o libkernels.so")
        done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ""})
        if done.returncode != 0:
            print(done.stderr)
            return _report("the command", False)
        header = library.with_suffix(".h").read_text()
        print("  libkernels.h:", next(line for line in header.splitlines() if line.startswith("void ")).rstrip(",")
              + ", ...);")
        loaded = gpuc.load_library(library)
        x, y = np.arange(1000, dtype=np.float32), np.ones(1000, dtype=np.float32)
        out = np.empty_like(x)
        loaded.saxpy[x.size](np.float32(2.0), x, y, out)
        return _report("the loaded library's saxpy equals NumPy", np.array_equal(out, np.float32(2.0) * x + y))


if __name__ == "__main__":
    sys.exit(main())
