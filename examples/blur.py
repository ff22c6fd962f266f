"""A 3x3 box blur of a uint8 RGB image (H, W, 3): the small dtypes at work.

Each work item is one pixel (index 0 walks the columns, index 1 the rows). It sums the 3x3
neighbourhood of each channel in an int32 (`total + src[...]` is int32: NumPy 2's promotion; a sum of
uint8 values alone would wrap at 256, as in NumPy), scales it by `gain`, divides by 9 rounding to
nearest and clamps into 0..255 before storing the uint8 result (saturation: a gain above 1 brightens
without wrapping). Pixels past the border repeat the border (edge padding). Run it to check it
against NumPy:

    python examples/blur.py
"""

from __future__ import annotations

import numpy as np

import gpuc


@gpuc.kernel
def blur(src, dst, gain):
    x = gpuc.index(0)
    y = gpuc.index(1)
    height = src.shape[0]
    width = src.shape[1]
    for c in range(3):
        total = gpuc.int32(0)
        for dy in range(-1, 2):
            row = min(max(y + dy, 0), height - 1)
            for dx in range(-1, 2):
                column = min(max(x + dx, 0), width - 1)
                total += src[row, column, c]
        dst[y, x, c] = min(max((total * gain + 4) // 9, 0), 255)


def box_blur(image: np.ndarray, gain: int = 1, out: np.ndarray | None = None, threads: int | None = None):
    """The blurred `image` (uint8, (H, W, 3)); `threads` CPU threads (default: GPUC_NUM_THREADS, else all)."""
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"box_blur takes a uint8 (H, W, 3) image, not {image.dtype} {image.shape}")
    out = np.empty_like(image) if out is None else out
    height, width, _ = image.shape
    blur.launch((width, height), image, out, np.int32(gain), threads=threads)
    return out


def reference(image: np.ndarray, gain: int = 1) -> np.ndarray:
    """The same blur in NumPy: edge padding, nine shifted views summed in int32, rounded, clamped."""
    padded = np.pad(image, ((1, 1), (1, 1), (0, 0)), mode="edge").astype(np.int32)
    height, width, _ = image.shape
    total = sum(padded[dy:dy + height, dx:dx + width] for dy in range(3) for dx in range(3))
    return np.clip((total * gain + 4) // 9, 0, 255).astype(np.uint8)


def main() -> int:
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, size=(48, 64, 3), dtype=np.uint8)
    ok = True
    for gain in (1, 3):
        got, want = box_blur(image, gain), reference(image, gain)
        same = bool(np.array_equal(got, want))
        ok &= same
        print(f"gain {gain}: matches NumPy: {same}" + ("" if same else "  WRONG"))
    print("saturated pixels at gain 3:", int((box_blur(image, 3) == 255).sum()))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
