"""The Mandelbrot set with complex numbers: Numba's classic `mandel` example, ported to gpuc.

`mandel` is Numba's function unchanged but for the decorator: `complex(x, y)`, `0.0j`, `z * z + c` and
`z.real` / `z.imag` compile to pairs of floats. The kernel gives each pixel a work item (index 0 walks the
columns, index 1 the rows); `create_fractal` launches it, on as many threads as asked. Run it to print a
small picture and check it against the Python interpreter:

    python examples/mandelbrot.py
"""

from __future__ import annotations

import numpy as np

import gpuc


@gpuc.func
def mandel(x, y, max_iters):
    """How many iterations z -> z*z + c take to leave the circle of radius 2 (255: it stays inside)."""
    i = 0
    c = complex(x, y)
    z = 0.0j
    for i in range(max_iters):
        z = z * z + c
        if (z.real * z.real + z.imag * z.imag) >= 4:
            return i
    return 255


@gpuc.kernel
def fractal(min_x, min_y, pixel_size_x, pixel_size_y, image, iters):
    x = gpuc.index(0)
    y = gpuc.index(1)
    real = min_x + x * pixel_size_x
    imag = min_y + y * pixel_size_y
    image[y, x] = mandel(real, imag, iters)


def create_fractal(min_x, max_x, min_y, max_y, image, iters, threads=None):
    """Fill `image` (rows: imaginary axis, columns: real axis) as Numba's create_fractal does."""
    height, width = image.shape
    pixel_size_x = (max_x - min_x) / width
    pixel_size_y = (max_y - min_y) / height
    fractal.launch((width, height), min_x, min_y, pixel_size_x, pixel_size_y, image, iters, threads=threads)
    return image


def reference(min_x, max_x, min_y, max_y, image, iters):
    """The same picture computed by the Python interpreter (mandel's own Python code)."""
    height, width = image.shape
    pixel_size_x = (max_x - min_x) / width
    pixel_size_y = (max_y - min_y) / height
    for x in range(width):
        real = min_x + x * pixel_size_x
        for y in range(height):
            imag = min_y + y * pixel_size_y
            image[y, x] = mandel(real, imag, iters)
    return image


def main() -> None:
    image = create_fractal(-2.0, 1.0, -1.0, 1.0, np.zeros((24, 64), dtype=np.uint8), 20)
    expected = reference(-2.0, 1.0, -1.0, 1.0, np.zeros_like(image), 20)
    for row in image:  # darker where the point escapes later; "@" stays inside
        print("".join("@" if v == 255 else " .:-=+*#%"[int(v) * 9 // 20] for v in row))
    print("matches the Python interpreter:", bool(np.array_equal(image, expected)))


if __name__ == "__main__":
    main()
