"""SPIR-V: the OpenCL math built-ins are declared free of memory effects (gpuc/targets/spirv.py), so a call
whose value only the code after a loop reads is computed after the loop; left in it, such a call crashed
Intel's OpenCL compiler. Sine and cosine of one argument are one sincos, as sin and cos of x beside sin
and cos of sin(x) crashed it too. And OpenCL's fmod is exact, as NumPy's."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gpuc

ROOT = Path(gpuc.__file__).resolve().parents[1]


@gpuc.kernel
def fmods(out, a, b):
    i = gpuc.index()
    out[i] = math.fmod(a[i], b[i])


@gpuc.kernel
def last_fmod_of_a_loop(out, a, c):
    v = 0.0
    for e in a:
        v = math.fmod(e, c)
    out[0] = v


@gpuc.kernel
def last_floor_division_of_a_loop(out, a, c):
    v = 0.0
    for e in a:
        v = e // c  # float // computes C's fmod
    out[0] = v


@gpuc.kernel
def last_cbrt_of_a_loop(out, a, c):
    v = 0.0
    for e in a:
        v = math.cbrt(e * c)
    out[0] = v


LOOPS = {"fmod": (last_fmod_of_a_loop, lambda x, c: math.fmod(x, c)),
         "floor_division": (last_floor_division_of_a_loop, lambda x, c: x // c),
         "cbrt": (last_cbrt_of_a_loop, lambda x, c: np.cbrt(x * c))}

RUN = """
import sys
import numpy as np
sys.path.insert(0, {folder!r})
import test_spirv_math_calls as t
kernel = t.LOOPS[{name!r}][0]
a = np.array([0.5, -46.6, -0.75, 57.5, -0.75, -6.9], np.{dtype})
out = np.zeros(1, np.{dtype})
kernel.launch(1, out, a, np.{dtype}(3), device={device!r})
print(repr(float(out[0])))
"""


# Intel's OpenCL compiler died of SIGSEGV (in its ADCE pass) on a loop with no other effect whose last
# fmod, cbrt, sin, ... call the code after it reads; OpenCL C source crashes it the same way. In a
# process of its own: a crash is this test's failure, not the run's end.
@pytest.mark.devices("cpu", "opencl")
@pytest.mark.parametrize("name", sorted(LOOPS))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_math_call_whose_last_value_leaves_a_loop(name, dtype, gpuc_device, tmp_path):
    script = RUN.format(folder=str(Path(__file__).parent), name=name, dtype=dtype, device=gpuc_device)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    t = getattr(np, dtype)
    want, got = t(LOOPS[name][1](t(-6.9), t(3))), t(float(proc.stdout.strip()))
    assert got == want if name != "cbrt" else abs(got - want) <= 4 * abs(np.spacing(want))  # within 4 ulp


def test_math_calls_are_declared_pure_and_leave_the_loop():
    f64 = gpuc.Array[gpuc.float64, 1, "C"]
    ir = gpuc.code_llvm(last_fmod_of_a_loop, (f64, f64, gpuc.float64), target=gpuc.SPIRVTarget())
    loop = ir[ir.index("for.body"):]
    loop = loop[:loop.index("br i1")]
    assert "_Z4fmoddd" not in loop and "_Z4fmoddd" in ir
    declaration = next(line for line in ir.splitlines() if line.startswith("declare double @_Z4fmoddd"))
    attributes = declaration.rsplit("#", 1)[1]
    assert "memory(none)" in next(line for line in ir.splitlines() if line.startswith(f"attributes #{attributes} "))


SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, 3.0, -7.25, 1e300, -1e-300, 5e-324, math.inf, -math.inf, math.nan, 1e17, 2.0 ** 60]


@pytest.mark.devices("cpu", "opencl")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fmod_is_exact(dtype):
    rng = np.random.default_rng(3)
    n = 20000
    a = np.concatenate([np.repeat(SPECIAL, len(SPECIAL)), rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30, n)])
    b = np.concatenate([np.tile(SPECIAL, len(SPECIAL)), rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30, n)])
    with np.errstate(all="ignore"):
        a, b = a.astype(dtype), b.astype(dtype)
        want = np.fmod(a, b)
    out = np.zeros_like(a)
    fmods[a.size](out, a, b)
    same = (out == want) & (np.signbit(out) == np.signbit(want)) | np.isnan(out) & np.isnan(want)
    assert same.all(), list(zip(a[~same][:5], b[~same][:5], out[~same][:5], want[~same][:5]))


@gpuc.kernel
def sines_of_sines(o, a):
    x = a[gpuc.index()]
    s = math.sin(x)
    o[gpuc.index()] = math.sin(s) * math.cos(s) * math.cos(x)


@gpuc.func
def nested_sines(x, y):
    return math.sin(math.sin(math.cos(y * 3.0))) * x


@gpuc.kernel
def gradient_of_nested_sines(o, a):
    i = gpuc.index()
    o[i] = gpuc.grad(nested_sines, a[i], a[i] + 1.0)[1]


SINES = """
import sys
import numpy as np
sys.path.insert(0, {folder!r})
import test_spirv_math_calls as t
a = np.array([0.3, -1.25, 2.0], np.{dtype})
out = np.zeros(3, np.{dtype})
getattr(t, {kernel!r})[3](out, a, device={device!r})
print(" ".join(repr(float(v)) for v in out))
"""


# Intel's OpenCL compiler died of SIGSEGV in its instcombine on sin(x) and cos(x) beside sin(s) and cos(s),
# s = sin(x) (the gradient of sin(sin(cos(3y))) holds them); OpenCL C source crashes it the same way.
@pytest.mark.devices("cpu", "opencl")
@pytest.mark.parametrize("kernel", ["sines_of_sines", "gradient_of_nested_sines"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_sines_and_cosines_of_sines(kernel, dtype, gpuc_device, tmp_path):
    script = SINES.format(folder=str(Path(__file__).parent), kernel=kernel, dtype=dtype, device=gpuc_device)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    x = np.array([0.3, -1.25, 2.0])
    if kernel == "sines_of_sines":
        want = np.sin(np.sin(x)) * np.cos(np.sin(x)) * np.cos(x)
    else:  # d/dy sin(sin(cos(3y))) * x at y = x + 1
        y = x + 1.0
        want = x * np.cos(np.sin(np.cos(3 * y))) * np.cos(np.cos(3 * y)) * -np.sin(3 * y) * 3
    np.testing.assert_allclose([float(v) for v in proc.stdout.split()], want, rtol=1e-5 if dtype == "float32" else 1e-13)


def test_sine_and_cosine_of_one_argument_are_one_sincos(spirv_val):
    f64 = gpuc.Array[gpuc.float64, 1, "C"]
    job = gpuc.CompilerJob((sines_of_sines, (f64, f64)), gpuc.CompilerConfig(gpuc.SPIRVTarget(), kernel=True))
    ir = gpuc.compile(job, "llvm").output
    assert ir.count("call spir_func double @_Z6sincosdPd(") == 2 and "@llvm.sin" not in ir and "@llvm.cos" not in ir
    spirv_val(gpuc.compile(job, "obj").output)


UNDEFINED_ON_ONE_PATH = """
define spir_kernel void @k(ptr addrspace(1) %o, ptr addrspace(1) %a) {
entry:
  %x = load double, ptr addrspace(1) %a, align 8
  %c = fcmp ogt double %x, 0.0
  br i1 %c, label %then, label %join
then:
  %y = fmul double %x, 2.0
  br label %join
join:
  %p = phi double [ %y, %then ], [ undef, %entry ]
  br i1 %c, label %use, label %done
use:
  %s = call double @llvm.sin.f64(double %p)
  %k = call double @llvm.cos.f64(double %p)
  %m = fmul double %s, %k
  store double %m, ptr addrspace(1) %o, align 8
  br label %done
done:
  ret void
}
declare double @llvm.sin.f64(double)
declare double @llvm.cos.f64(double)
"""


# A sincos placed where its argument was defined ran on the path where the argument, a phi's value from a
# branch that does not compute it, is undefined: Intel's runtime died of SIGSEGV running such a kernel (the
# derivative of a vjp of a func with an if/else). It goes where the sine and cosine were.
def test_sincos_runs_where_the_sine_and_cosine_ran(spirv_val):
    job = gpuc.CompilerJob(gpuc.IRSource(UNDEFINED_ON_ONE_PATH, entry="k"),
                           gpuc.CompilerConfig(gpuc.SPIRVTarget(), kernel=True, optimize=False))
    ir = gpuc.compile(job, "llvm").output
    use = ir[ir.index("\nuse:"):]
    assert "@_Z6sincosdPd(double %p" in use[:use.index("br label")], ir
    spirv_val(gpuc.compile(job, "obj").output)
