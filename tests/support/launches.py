"""Launch arguments of generated kernels: specs that build fresh NumPy arguments (arrays, strided
views, scalars typed as NumPy or Python numbers, tuples), their values, and perturbed copies that
make other specializations of the same kernel."""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from .numeric import FLOATS, INTS, NUMPY, SMALL, int_range, is_complex, is_float, is_int, part_type, wrap

SIZE_1D = 6
SHAPE_2D = (3, 4)
OUT_LEN = 16


@dataclass
class ArgSpec:
    kind: str                 # "array" or "scalar"
    dtype: str
    value: object             # the scalar (a Python complex for complex types), or the base array's values
    view: tuple = ()          # slices taken of the base array
    numpy: bool = True        # scalars: a NumPy scalar (else a Python int/float/bool)

    def describe(self) -> str:
        if self.kind == "tuple":
            return "(" + "".join(e.describe() + ", " for e in self.value) + ")"
        if self.kind == "scalar":
            return f"{'np.' + self.dtype if self.numpy else type(self.value).__name__}({self.value!r})"
        view = "" if not self.view else "[" + ", ".join(_slice_text(s) for s in self.view) + "]"
        return f"np.array({self.value.tolist()!r}, dtype=np.{self.dtype}){view}"


def _slice_text(s: slice) -> str:
    return ":".join("" if v is None else str(v) for v in (s.start, s.stop, s.step))


def build_args(specs):
    """Fresh launch arguments for `specs`, and for each array a tolerance mask of the same view."""
    args, masks = [], []
    for s in specs:
        if s.kind == "scalar":
            args.append(NUMPY[s.dtype](s.value) if s.numpy else s.value)
            masks.append(None)
        elif s.kind == "tuple":
            args.append(tuple(build_args(s.value)[0]))
            masks.append(None)
        else:
            base = s.value.copy()
            mask = np.zeros(base.shape)  # relative tolerances, 0 for exact
            args.append(base[s.view] if s.view else base)
            masks.append(mask[s.view] if s.view else mask)
    return args, masks



def scalar_value(rng: random.Random, t: str):
    if is_complex(t):  # two parts of the part type
        p = part_type(t)
        return complex(scalar_value(rng, p), scalar_value(rng, p))
    if t == "bool":
        return rng.random() < 0.5
    if is_int(t):
        lo, hi = int_range(t)
        r = rng.random()
        if r < 0.6:
            return wrap(rng.randint(-5, 9), t)
        if r < 0.8:
            return rng.choice([lo, hi, wrap(-1, t), wrap(1 << 31, t), 0])
        return rng.randint(lo, hi)
    r = rng.random()
    if r < 0.5:
        v = rng.choice([0.5, 1.5, -2.0, 3.25, -0.75, 2.0, 10.0])
    elif r < 0.7 and t == "float16":
        v = rng.choice([0.0, -0.0, 65504.0, -1e-7, 6e-5, 1000.5, float("inf"), float("nan")])
    elif r < 0.7:
        v = rng.choice([0.0, -0.0, 1e20, -1e-20, 3e38 if t == "float64" else 3e30, float("inf"), float("nan")])
    else:
        v = rng.uniform(-100, 100)
    return float(NUMPY[t](v))


def array_values(rng: random.Random, dtype: str, shape):
    n = int(np.prod(shape))
    return np.array([scalar_value(rng, dtype) for _ in range(n)], dtype=NUMPY[dtype]).reshape(shape)


def array_spec(rng, dtype, ndim, strided, values=None):
    shape = values.shape if values is not None else (SIZE_1D,) if ndim == 1 else SHAPE_2D
    if not strided:
        base = values if values is not None else array_values(rng, dtype, shape)
        return ArgSpec("array", dtype, base.astype(NUMPY[dtype]))
    if ndim == 1:
        step = rng.choice([2, 3, -1, -2])
        view = (slice(None, None, step),)
        base_shape = (shape[0] * abs(step),)
    else:
        view = (slice(None, None, rng.choice([1, -1])), slice(None, None, 2))
        base_shape = (shape[0], shape[1] * 2)
    base = array_values(rng, dtype, base_shape)
    if values is not None:
        base[view] = values
    return ArgSpec("array", dtype, base, view)


def perturb(rng: random.Random, specs):
    """Another specialization of the same kernel: some argument types, values or layouts changed."""
    with np.errstate(over="ignore"):  # a value beyond a float16 becomes inf, as NumPy converts it
        return _perturbed(rng, specs)


def _perturbed(rng: random.Random, specs):
    out = []
    for s in specs:
        if s.kind == "scalar" and rng.random() < 0.5:
            if is_int(s.dtype):
                t = rng.choice(INTS) if rng.random() < 0.85 else rng.choice(FLOATS)
                t = rng.choice(SMALL) if rng.random() < 0.2 else t
                v = wrap(int(s.value), t) if is_int(t) else float(NUMPY[t](s.value))
            elif is_float(s.dtype):
                t = rng.choice(FLOATS) if rng.random() < 0.9 else rng.choice(INTS)
                t = rng.choice(SMALL) if rng.random() < 0.2 else t
                v = float(NUMPY[t](s.value)) if is_float(t) else scalar_value(rng, t)
            elif is_complex(s.dtype):  # the other width: a complex64 rounds its parts
                t = "complex64" if s.dtype == "complex128" else "complex128"
                v = complex(NUMPY[t](s.value))
            else:
                t, v = "bool", not s.value
            out.append(ArgSpec("scalar", t, v, numpy=t not in ("int64", "float64", "bool", "complex128")
                               or rng.random() < 0.5))
        elif s.kind == "array" and rng.random() < 0.3:
            values = s.value[s.view] if s.view else s.value
            strided = not s.view and rng.random() < 0.5
            if s.view:  # contiguous now, the same values
                out.append(ArgSpec("array", s.dtype, np.ascontiguousarray(values)))
            else:
                out.append(array_spec(rng, s.dtype, values.ndim, strided, values))
        else:
            out.append(s)
    return out
