"""Accuracy measurements of math functions: distances in ulp, and arguments spread over every binade."""

from __future__ import annotations

import math

import numpy as np


def specials(dtype) -> np.ndarray:
    """NaNs, infinities, signed zeros, the extreme subnormals and normals, and values where math functions
    have edges (multiples of pi, 1e22 for trigonometric reductions, exp's overflow and underflow)."""
    info = np.finfo(dtype)
    values = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, info.smallest_subnormal, -info.smallest_subnormal,
              info.smallest_normal, info.max, -info.max, 1.0, -1.0, 0.5, -0.5, 2.0, math.pi, -math.pi, math.pi / 2,
              1e22, -1e22, 1e300 if dtype == np.float64 else 1e30, 710.0, -745.0, 88.7, -103.0, 1e-310, 3e-39]
    return np.array(values, dtype=np.float64).astype(dtype)


def samples(dtype, count: int, seed: int) -> np.ndarray:
    """Random values over every binade (denormals included) of both signs, uniform values in [-10, 10] and
    [-1, 1] (`count` of each) and the special values, repeated so each lands in vector lanes and in the scalar
    tail of a vectorized loop (an odd length)."""
    rng = np.random.default_rng(seed)
    info = np.finfo(dtype)
    low, high = math.log2(info.smallest_subnormal), math.log2(info.max)
    spread = np.exp2(rng.uniform(low, high, count)) * rng.choice([-1.0, 1.0], count)
    near = rng.uniform(-10.0, 10.0, count)
    unit = rng.uniform(-1.0, 1.0, count)
    repeated = np.tile(specials(dtype), 8)
    values = np.concatenate([spread, near, unit]).astype(dtype)
    return np.concatenate([values, repeated, repeated[:7]])


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The number of representable values from a to b, of one dtype (0 for two NaNs, the maximum for one)."""
    bits = 8 * a.itemsize
    signed, unsigned = (np.int64, np.uint64) if bits == 64 else (np.int32, np.uint32)
    top = np.uint64(1) << np.uint64(bits - 1)

    def ordered(x):  # the bit patterns on one line in the order of the values (-0.0 and 0.0 meet)
        raw = x.view(signed)
        magnitude = (raw.view(unsigned) & unsigned(int(top) - 1)).astype(np.uint64)
        return np.where(raw < 0, top - magnitude, top + magnitude)

    oa, ob = ordered(a), ordered(b)
    distance = np.where(oa >= ob, oa - ob, ob - oa)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    return np.where(nan_a & nan_b, np.uint64(0), np.where(nan_a | nan_b, np.iinfo(np.uint64).max, distance))


def same_specials(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Where `want` is special (NaN, an infinity or a zero): whether `got` is the same, a zero of the same sign."""
    special = ~np.isfinite(want) | (want == 0)
    same = (got == want) & (np.signbit(got) == np.signbit(want)) | (np.isnan(got) & np.isnan(want))
    return same | ~special
