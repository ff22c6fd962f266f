"""IR-level kernels that reach the gpuc.ctx markers through device functions (shared with tests/runtime)."""

from __future__ import annotations

import numpy as np

import gpuc

_XYZ = "012"


def indexing_kernel(ndim: int) -> str:
    """@kernel(double %a, Array[f64, ndim] in, Array[f64, ndim] out): out[i] = a * in[i] + linear(i).

    The markers sit three device functions below the kernel: kernel -> body -> offset -> ixD ->
    marker (and body -> linear -> ixD / nD). linear(i) = i0 + n0 * (i1 + n1 * i2)."""
    shapes = ", ".join(f"i64 %{{p}}s{d}" for d in range(ndim))
    strides = ", ".join(f"i64 %{{p}}t{d}" for d in range(ndim))
    array = lambda p: f"ptr %{p}, {shapes.format(p=p)}, {strides.format(p=p)}"  # noqa: E731
    strides_of = lambda p: ", ".join(f"i64 %{p}t{d}" for d in range(ndim))  # noqa: E731
    offset_terms = "\n".join(
        f"  %i{d} = call i64 @ix{d}()\n  %m{d} = mul i64 %i{d}, %t{d}\n"
        f"  %o{d} = add i64 %o{d - 1}, %m{d}" if d else
        f"  %i0 = call i64 @ix0()\n  %o0 = mul i64 %i0, %t0" for d in range(ndim))
    helpers = "\n".join(f"""
define internal i64 @ix{d}() {{
  %i = call i64 @gpuc.ctx.index(i32 {d})
  ret i64 %i
}}
define internal i64 @nd{d}() {{
  %n = call i64 @gpuc.ctx.ndrange(i32 {d})
  ret i64 %n
}}""" for d in range(3))
    return f"""\
declare i64 @gpuc.ctx.index(i32)
declare i64 @gpuc.ctx.ndrange(i32)
{helpers}

define internal i64 @linear() {{
  %i0 = call i64 @ix0()
  %i1 = call i64 @ix1()
  %i2 = call i64 @ix2()
  %n0 = call i64 @nd0()
  %n1 = call i64 @nd1()
  %a = mul i64 %n1, %i2
  %b = add i64 %i1, %a
  %c = mul i64 %n0, %b
  %d = add i64 %i0, %c
  ret i64 %d
}}

define internal i64 @offset({", ".join(f"i64 %t{d}" for d in range(ndim))}) {{
{offset_terms}
  ret i64 %o{ndim - 1}
}}

define internal void @body(double %a, ptr %in, {strides_of("in")}, ptr %out, {strides_of("out")}) {{
  %oi = call i64 @offset({", ".join(f"i64 %int{d}" for d in range(ndim))})
  %oo = call i64 @offset({", ".join(f"i64 %outt{d}" for d in range(ndim))})
  %pi = getelementptr double, ptr %in, i64 %oi
  %po = getelementptr double, ptr %out, i64 %oo
  %v = load double, ptr %pi
  %w = fmul double %a, %v
  %l = call i64 @linear()
  %lf = sitofp i64 %l to double
  %r = fadd double %w, %lf
  store double %r, ptr %po
  ret void
}}

define void @kernel(double %a, {array("in")}, {array("out")}) {{
  call void @body(double %a, ptr %in, {strides_of("in")}, ptr %out, {strides_of("out")})
  ret void
}}
"""


def indexing_signature(ndim: int):
    return [("scalar", "double"), ("array", np.float64, ndim), ("array", np.float64, ndim)]


def indexing_expected(a: float, inp: np.ndarray) -> np.ndarray:
    n = inp.shape + (1,) * (3 - inp.ndim)
    linear = np.arange(int(np.prod(n)), dtype=np.float64).reshape(n[::-1]).T.reshape(inp.shape)
    return a * inp + linear


# A recursive function and a mutually recursive pair, both reaching the index marker.
RECURSIVE_IR = """\
declare i64 @gpuc.ctx.index(i32)

define internal i64 @sum_to_index(i64 %k) {
  %done = icmp eq i64 %k, 0
  br i1 %done, label %base, label %step
base:
  ret i64 0
step:
  %k1 = sub i64 %k, 1
  %rest = call i64 @sum_to_index(i64 %k1)
  %i = call i64 @gpuc.ctx.index(i32 0)
  %r = add i64 %rest, %i
  ret i64 %r
}

define internal i64 @even(i64 %k) {
  %z = icmp eq i64 %k, 0
  br i1 %z, label %yes, label %no
yes:
  %i = call i64 @gpuc.ctx.index(i32 0)
  ret i64 %i
no:
  %k1 = sub i64 %k, 1
  %r = call i64 @odd(i64 %k1)
  ret i64 %r
}

define internal i64 @odd(i64 %k) {
  %z = icmp eq i64 %k, 0
  br i1 %z, label %yes, label %no
yes:
  ret i64 -1
no:
  %k1 = sub i64 %k, 1
  %r = call i64 @even(i64 %k1)
  ret i64 %r
}

; out[i] = i * 3 (recursively: i added three times) + even(4) (= i)
define void @kernel(ptr %out, i64 %s0, i64 %t0) {
  %i = call i64 @gpuc.ctx.index(i32 0)
  %s = call i64 @sum_to_index(i64 3)
  %e = call i64 @even(i64 4)
  %v = add i64 %s, %e
  %o = mul i64 %i, %t0
  %p = getelementptr i64, ptr %out, i64 %o
  store i64 %v, ptr %p
  ret void
}
"""

MARKER_FREE_IR = """\
define void @kernel(ptr %out, i64 %s0, i64 %t0) {
  atomicrmw add ptr %out, i64 1 monotonic
  ret void
}
"""


def job(ir: str, target=None, entry: str = "kernel", **config) -> gpuc.CompilerJob:
    config.setdefault("kernel", True)
    return gpuc.CompilerJob(gpuc.IRSource(ir, entry=entry), gpuc.CompilerConfig(target or gpuc.NativeTarget(),
                                                                                 **config))
