"""gpuc's built-in plugins at work: function pointers compiled on demand (gpuc.deferred) and
derivatives built from optimized IR (gpuc.derivative, nested to higher orders; gpuc.grad and the
adjoint of a whole kernel in reverse mode).

Both are plugins on the same marker mechanism a user plugin has: the frontend emits a marker call,
and the plugin resolves it inside the one compile (deferred functions at the `early` point,
derivatives at the `optimized` point).
"""

from __future__ import annotations

import math

import numpy as np

import gpuc
from kernels import check_ptx, section

F64 = gpuc.Array[gpuc.float64, 1]


@gpuc.func
def relu(x):
    return max(x, 0.0)


@gpuc.func
def softplus(x):
    return math.log1p(math.exp(-abs(x))) + max(x, 0.0)


@gpuc.kernel
def activate(x, out, smooth):
    i = gpuc.index()
    f = gpuc.deferred(softplus, x[i]) if smooth else gpuc.deferred(relu, x[i])  # chosen at run time
    out[i] = f(x[i])


@gpuc.func
def wave(x):
    return math.sin(x) * math.exp(-0.5 * x)


@gpuc.func
def wave_slope(x):
    return gpuc.derivative(wave, x)


@gpuc.kernel
def slopes(x, first, second):
    i = gpuc.index()
    first[i] = gpuc.derivative(wave, x[i])
    second[i] = gpuc.derivative(wave_slope, x[i])  # the derivative of a derivative


def wave_derivatives(x):
    s, c, e = np.sin(x), np.cos(x), np.exp(-0.5 * x)
    return e * (c - 0.5 * s), e * (-0.75 * s - c)


@gpuc.func
def damped(x0, c, steps):
    x, v = x0, 0.0
    for _ in range(steps):
        v += 0.01 * (-2.0 * x - c * v)
        x += 0.01 * v
    return x


@gpuc.kernel
def smooth_wave(x, y):
    i = gpuc.index()
    y[i] = wave(x[i])


def main() -> int:
    ok = True
    x = np.linspace(-4.0, 4.0, 1001)

    section("gpuc.deferred: a function pointer chosen at run time, compiled on demand")
    for smooth in (False, True):
        out = np.empty_like(x)
        activate[x.size](x, out, smooth)
        expected = np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0.0) if smooth else np.maximum(x, 0.0)
        error = float(np.max(np.abs(out - expected)))
        print(f"  smooth={smooth}: max |error| against NumPy {error:.1e}")
        ok &= error < 1e-12
    result = gpuc.compile(gpuc.CompilerJob((activate, (F64, F64, gpuc.boolean)),
                                           gpuc.CompilerConfig(gpuc.NativeTarget(), kernel=True)))
    for record in result.trace.compilations:
        print(f"  compiled on demand: @{record.symbol} for @{record.requested_by} ({record.seconds * 1e3:.2f} ms)")
    ptx = gpuc.compile(gpuc.CompilerJob((activate, (F64, F64, gpuc.boolean)),
                                        gpuc.CompilerConfig(gpuc.PTXTarget(cap="sm_90"), kernel=True)), "asm")
    ok &= check_ptx(ptx.output)

    section("gpuc.derivative: first and second derivatives from optimized IR")
    first, second = np.empty_like(x), np.empty_like(x)
    slopes[x.size](x, first, second)
    want1, want2 = wave_derivatives(x)
    for order, got, want in ((1, first, want1), (2, second, want2)):
        error = float(np.max(np.abs(got - want) / np.maximum(1.0, np.abs(want))))
        print(f"  order {order}: max relative error against the analytic derivative {error:.1e}")
        ok &= error < 1e-12
    at = gpuc.derivative(wave, 1.0)  # from Python: compiled once for the host, then called
    print(f"  from Python: d/dx wave(1.0) = {at:.15f} (analytic {wave_derivatives(np.array(1.0))[0]:.15f})")
    ok &= math.isclose(at, float(wave_derivatives(np.array(1.0))[0]), rel_tol=1e-12)
    ptx = gpuc.compile(gpuc.CompilerJob((slopes, (F64, F64, F64)),
                                        gpuc.CompilerConfig(gpuc.PTXTarget(cap="sm_90"), kernel=True)), "asm")
    ok &= check_ptx(ptx.output)

    section("reverse mode: gpuc.grad through a loop, and the adjoint of a whole kernel")
    grads = gpuc.grad(damped, 1.5, 0.3, 200)  # one sweep: d/dx0 and d/dc of 200 steps
    step = 1e-6
    central = [(damped(1.5 + step, 0.3, 200) - damped(1.5 - step, 0.3, 200)) / (2 * step),
               (damped(1.5, 0.3 + step, 200) - damped(1.5, 0.3 - step, 200)) / (2 * step)]
    error = max(abs(g - c) / max(1.0, abs(c)) for g, c in zip(grads, central))
    print(f"  gpuc.grad(damped, 1.5, 0.3, 200) = ({grads[0]:.9f}, {grads[1]:.9f}); against central differences "
          f"{error:.1e}")
    ok &= error < 1e-6
    y, dx, dy = np.zeros_like(x), np.zeros_like(x), np.ones_like(x)
    gpuc.adjoint(smooth_wave)[x.size](x, dx, y, dy)  # dx += d(sum y)/dx, dy consumed
    error = float(np.max(np.abs(dx - wave_derivatives(x)[0])))
    print(f"  adjoint kernel: max |error| of the gradient against the analytic derivative {error:.1e}")
    ok &= error < 1e-12 and not dy.any()
    ptx = gpuc.code_native(gpuc.adjoint(smooth_wave), (F64,) * 4, target=gpuc.PTXTarget(cap="sm_90"))
    ok &= check_ptx(ptx)
    print("  built-in plugins:", "ok" if ok else "FAILED")
    return 0 if ok else 1
