"""Ordered sums on the CPU (gpuc/targets/ordered_sums.py): LLVM's loop vectorizer keeps a loop's float sums
in order (`-force-ordered-reductions`, gpuc.llvm.passes.OPTIONS), and several of them in one block become a
transpose and vector adds, bit for bit the same. Also the scratch slots' alias scopes of CPU block kernels
(gpuc/plugins/workitems.py), which let such loops run for rows as narrow as the vector."""

from __future__ import annotations

import ctypes
import math

import numpy as np
import pytest
from support.llvm_testing import Jitted

import gpuc
import gpuc.llvm as llvm
from gpuc.targets import NativeTarget, ordered_sums

_CTYPES = {"float": ctypes.c_float, "double": ctypes.c_double}
_DTYPES = {"float": np.float32, "double": np.float64}


def _sums_ir(ty: str, lanes: int, count: int, chained: bool, use_between: bool) -> str:
    """@sums(ptr acc, ptr vecs): acc[k] = reduce.fadd(acc[k], vecs[k]) for k < count (then again with
    vecs[count + k] when `chained`: the pattern of an interleaved vector loop). `use_between`: the first
    result is also stored between the calls, before the last one (the group must end there)."""
    vty = f"<{lanes} x {ty}>"
    size = 4 if ty == "float" else 8
    lines = ["define void @sums(ptr %acc, ptr %vecs) {", "entry:"]
    for k in range(count):
        lines += [f"  %ap{k} = getelementptr {ty}, ptr %acc, i64 {k}", f"  %a{k} = load {ty}, ptr %ap{k}",
                  f"  %vp{k} = getelementptr i8, ptr %vecs, i64 {k * lanes * size}",
                  f"  %v{k} = load {vty}, ptr %vp{k}, align 4"]
        if chained:
            lines += [f"  %wp{k} = getelementptr i8, ptr %vecs, i64 {(count + k) * lanes * size}",
                      f"  %w{k} = load {vty}, ptr %wp{k}, align 4"]
    for k in range(count):
        lines.append(f"  %s{k} = call {ty} @llvm.vector.reduce.fadd.v{lanes}{'f32' if ty == 'float' else 'f64'}"
                     f"({ty} %a{k}, {vty} %v{k})")
        if use_between and k == count // 2:
            lines.append(f"  store {ty} %s0, ptr %ap0")
    last = "s"
    if chained:
        for k in range(count):
            lines.append(f"  %t{k} = call {ty} @llvm.vector.reduce.fadd.v{lanes}{'f32' if ty == 'float' else 'f64'}"
                         f"({ty} %s{k}, {vty} %w{k})")
        last = "t"
    for k in range(count):
        lines.append(f"  store {ty} %{last}{k}, ptr %ap{k}")
    lines += ["  ret void", "}",
              f"declare {ty} @llvm.vector.reduce.fadd.v{lanes}{'f32' if ty == 'float' else 'f64'}({ty}, {vty})"]
    return "\n".join(lines) + "\n"


def _run(text: str, rewrite: bool, acc, vecs):
    module = llvm.Module.parse(text)
    module.triple = NativeTarget().triple()
    rewritten = ordered_sums.rewrite(module) if rewrite else 0
    after = str(module)
    jit = Jitted(module)
    try:
        acc = acc.copy()
        jit.get("sums", None, ctypes.c_void_p, ctypes.c_void_p)(acc.ctypes.data, vecs.ctypes.data)
    finally:
        jit.close()
    return acc, rewritten, after


def _values(rng, dtype, n):
    """Numbers of mixed magnitudes and signs, whose sums depend on the order of the adds."""
    return (rng.standard_normal(n) * 10.0 ** rng.integers(-6, 7, n)).astype(dtype)


@pytest.mark.parametrize("ty", ["float", "double"])
@pytest.mark.parametrize("lanes, count, chained, use_between, left", [
    (8, 16, False, False, 0), (8, 8, False, False, 0), (8, 11, False, False, 3), (8, 5, False, False, 0),
    (8, 3, False, False, 3), (4, 4, True, False, 0), (16, 16, True, False, 0), (16, 9, False, False, 0),
    (8, 8, False, True, 3), (2, 6, False, False, 6)])
def test_rewritten_sums_are_bitwise_the_calls(ty, lanes, count, chained, use_between, left):
    rng = np.random.default_rng(lanes * 100 + count)
    text = _sums_ir(ty, lanes, count, chained, use_between)
    total = count * (2 if chained else 1)
    for trial in range(20):
        acc = _values(rng, _DTYPES[ty], count)
        vecs = _values(rng, _DTYPES[ty], total * lanes)
        if trial == 0:
            vecs[::3] = np.inf if ty == "float" else vecs[::3]  # infinities and NaN propagate alike
            vecs[1] = -np.inf if ty == "float" else vecs[1]
        want, _, _ = _run(text, False, acc, vecs)
        got, rewritten, after = _run(text, True, acc, vecs)
        assert got.tobytes() == want.tobytes()
    assert rewritten == total - left * (2 if chained else 1)
    assert after.count("llvm.vector.reduce.fadd") - 1 == left * (2 if chained else 1)  # - the declaration


def _loop_ir(ty: str, lanes: int, count: int, chained: bool, used_in_loop: bool) -> str:
    """@sums(ptr acc, ptr vecs, i64 n): for each of n iterations, acc[k] = reduce.fadd(acc[k], vecs[it][k]) for
    k < count, the sums in phis of the loop (then again with a second vector when `chained`, an interleaved
    loop's pattern); stored after the loop, through the exit's phis. `used_in_loop`: the first phi is also
    stored in the loop (a use of a carried phi besides its sum)."""
    vty = f"<{lanes} x {ty}>"
    size = 4 if ty == "float" else 8
    suffix = f"v{lanes}{'f32' if ty == 'float' else 'f64'}"
    per = count * lanes * size * (2 if chained else 1)
    lines = [f"define void @sums(ptr %acc, ptr %vecs, i64 %n) {{", "entry:"]
    for k in range(count):
        lines += [f"  %ap{k} = getelementptr {ty}, ptr %acc, i64 {k}", f"  %a{k} = load {ty}, ptr %ap{k}"]
    lines += ["  br label %loop", "loop:", "  %it = phi i64 [ 0, %entry ], [ %next, %loop ]"]
    last = "t" if chained else "s"
    lines += [f"  %p{k} = phi {ty} [ %a{k}, %entry ], [ %{last}{k}, %loop ]" for k in range(count)]
    lines.append(f"  %base = mul i64 %it, {per}")
    for k in range(count):
        lines += [f"  %vo{k} = add i64 %base, {k * lanes * size}", f"  %vp{k} = getelementptr i8, ptr %vecs, i64 %vo{k}",
                  f"  %v{k} = load {vty}, ptr %vp{k}, align 4"]
        if chained:
            lines += [f"  %wo{k} = add i64 %base, {(count + k) * lanes * size}",
                      f"  %wp{k} = getelementptr i8, ptr %vecs, i64 %wo{k}", f"  %w{k} = load {vty}, ptr %wp{k}, align 4"]
    if used_in_loop:
        lines.append(f"  store {ty} %p0, ptr %ap0")
    lines += [f"  %s{k} = call {ty} @llvm.vector.reduce.fadd.{suffix}({ty} %p{k}, {vty} %v{k})" for k in range(count)]
    if chained:
        lines += [f"  %t{k} = call {ty} @llvm.vector.reduce.fadd.{suffix}({ty} %s{k}, {vty} %w{k})"
                  for k in range(count)]
    lines += ["  %next = add i64 %it, 1", "  %more = icmp ult i64 %next, %n", "  br i1 %more, label %loop, label %exit",
              "exit:"]
    lines += [f"  %e{k} = phi {ty} [ %{last}{k}, %loop ]" for k in range(count)]
    lines += [f"  store {ty} %e{k}, ptr %ap{k}" for k in range(count)]
    lines += ["  ret void", "}", f"declare {ty} @llvm.vector.reduce.fadd.{suffix}({ty}, {vty})"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("ty", ["float", "double"])
@pytest.mark.parametrize("lanes, count, chained, used_in_loop", [
    (8, 16, False, False), (8, 5, False, False), (4, 4, True, False), (8, 8, False, True), (8, 12, True, False)])
def test_sums_carried_round_a_loop_stay_in_one_vector(ty, lanes, count, chained, used_in_loop):
    """In a loop whose phis hold the sums, p goes round the loop as a vector phi: no lane moves into it or out
    of it in the loop (only in the exit), and the results are the calls' bit for bit."""
    rng = np.random.default_rng(lanes * 1000 + count)
    text = _loop_ir(ty, lanes, count, chained, used_in_loop)
    iterations = 5
    total = count * (2 if chained else 1)
    for trial in range(10):
        acc = _values(rng, _DTYPES[ty], count)
        vecs = _values(rng, _DTYPES[ty], iterations * total * lanes)
        results = []
        for rewrite in (False, True):
            module = llvm.Module.parse(text)
            module.triple = NativeTarget().triple()
            rewritten = ordered_sums.rewrite(module) if rewrite else 0
            module.verify()
            after = str(module)
            jit = Jitted(module)
            try:
                out = acc.copy()
                jit.get("sums", None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(
                    out.ctypes.data, vecs.ctypes.data, iterations)
            finally:
                jit.close()
            results.append(out)
        assert results[1].tobytes() == results[0].tobytes()
    assert rewritten == total
    loop = after.split("\nloop:")[1].split("\nexit:")[0]
    assert "llvm.vector.reduce.fadd" not in loop
    moved = loop.count("extractelement") + loop.count("insertelement")
    assert moved == (1 if used_in_loop else 0), loop  # the phi's other use reads its lane in the loop
    # the row of starts is loaded as vectors, the row of sums stored as vectors (gpuc/targets/sum_rows.py)
    entry, exit_ = after.split("\nloop:")[0], after.split("\nexit:")[1]
    assert "insertelement" not in entry and entry.count(f"load <") == math.ceil(count / lanes)
    assert "extractelement" not in exit_ and exit_.count("store <") == math.ceil(count / lanes)


def test_reassociable_sums_are_left_to_llvm():
    text = _sums_ir("double", 4, 4, False, False).replace("call double", "call reassoc double")
    _, rewritten, _ = _run(text, True, np.zeros(4), np.ones(16))
    assert rewritten == 0


def test_scalable_vectors_are_left_alone():
    """SVE's `<vscale x 4 x float>` sums (AArch64 hosts): no shuffle transposes them; the calls stay."""
    text = "".join(_sums_ir("float", 4, 4, False, False).replace("<4 x float>", "<vscale x 4 x float>")
                   .replace("v4f32", "nxv4f32"))
    module = llvm.Module.parse(text)
    assert ordered_sums.rewrite(module) == 0
    module.verify()
    assert str(module).count("call float @llvm.vector.reduce.fadd.nxv4f32") == 4


@gpuc.kernel
def eight_sums(x, w, out):
    i = gpuc.index()
    s0, s1, s2, s3 = out[i, 0], out[i, 1], out[i, 2], out[i, 3]
    s4, s5, s6, s7 = out[i, 4], out[i, 5], out[i, 6], out[i, 7]
    for j in range(x.shape[1]):
        v = x[i, j]
        s0 += v * w[0, j]
        s1 += v * w[1, j]
        s2 += v * w[2, j]
        s3 += v * w[3, j]
        s4 += v * w[4, j]
        s5 += v * w[5, j]
        s6 += v * w[6, j]
        s7 += v * w[7, j]
    out[i, 0], out[i, 1], out[i, 2], out[i, 3] = s0, s1, s2, s3
    out[i, 4], out[i, 5], out[i, 6], out[i, 7] = s4, s5, s6, s7


def _eight_sums_python(x, w, out):
    out = out.copy()
    for i in range(x.shape[0]):
        for k in range(8):
            s = out[i, k]
            for j in range(x.shape[1]):
                s = s + x[i, j] * w[k, j]
            out[i, k] = s
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 7, 64, 203])
def test_a_kernel_with_eight_sums_adds_in_order(dtype, n):
    rng = np.random.default_rng(n)
    x = (rng.standard_normal((5, n)) * 10.0 ** rng.integers(-5, 6, (5, n))).astype(dtype)
    w = rng.standard_normal((8, n)).astype(dtype)
    out0 = rng.standard_normal((5, 8)).astype(dtype)
    want = _eight_sums_python(x, w, out0)
    for threads in (1, 2):
        out = out0.copy()
        eight_sums.launch(5, x, w, out, threads=threads)
        assert out.tobytes() == want.tobytes()


def test_a_kernel_with_eight_sums_is_vectorized_with_a_transpose(filecheck):
    x, w, out = np.zeros((4, 64), np.float32), np.zeros((8, 64), np.float32), np.zeros((4, 8), np.float32)
    text = eight_sums.inspect(x, w, out).llvm
    filecheck(text, """
    CHECK: define {{.*}}@eight_sums
    CHECK: vector.body:
    CHECK-COUNT-8: shufflevector <{{[0-9]+}} x float>
    CHECK: fadd <{{[0-9]+}} x float>
    """)
    assert "llvm.vector.reduce.fadd" not in text


@gpuc.kernel
def tiled_matmul(a, b, c):
    sa = gpuc.shared.array((16, 16), gpuc.float32)
    sb = gpuc.shared.array((16, 16), gpuc.float32)
    tx, ty = gpuc.thread_index(0), gpuc.thread_index(1)
    col, row = gpuc.index(0), gpuc.index(1)
    acc = gpuc.float32(0.0)
    for k0 in range(0, a.shape[1], 16):
        sa[ty, tx] = a[row, k0 + tx]
        sb[ty, tx] = b[k0 + ty, col]
        gpuc.barrier()
        for kk in range(16):
            acc += sa[ty, kk] * sb[kk, tx]
        gpuc.barrier()
    c[row, col] = acc


def test_block_kernel_slots_have_alias_scopes_and_no_runtime_overlap_checks(filecheck):
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal((64, 64)).astype(np.float32) for _ in range(2))
    c = np.zeros((64, 64), np.float32)
    text = tiled_matmul.inspect(a, b, c, block=(16, 16)).llvm
    filecheck(text, """
    CHECK: call void @llvm.experimental.noalias.scope.decl(metadata
    CHECK: vector.body
    CHECK: !alias.scope ![[SCOPE:[0-9]+]], !noalias
    """)
    assert "vector.memcheck" not in text
    assert "gpuc.scratch.tiled_matmul" in text
    tiled_matmul.launch((64, 64), a, b, c, block=(16, 16))
    ref = np.zeros_like(c)
    for k0 in range(0, 64, 16):  # the kernel's order of adds, for every element
        for kk in range(16):
            ref = ref + a[:, k0 + kk, None] * b[None, k0 + kk, :]
    assert c.tobytes() == ref.astype(np.float32).tobytes()


@gpuc.kernel
def two_sums(x, out):
    i = gpuc.index()
    s1, s2 = out[i, 0], out[i, 1]
    for j in range(x.shape[1]):
        v = x[i, j]
        s1 += v
        s2 += v * v
    out[i, 0], out[i, 1] = s1, s2


@gpuc.kernel
def two_sums_of_sines(x, out):
    i = gpuc.index()
    s1, s2 = out[i, 0], out[i, 1]
    for j in range(x.shape[1]):
        v = math.sin(x[i, j])
        s1 += v
        s2 += v * v
    out[i, 0], out[i, 1] = s1, s2


def test_a_loop_with_few_sums_and_cheap_work_stays_scalar():
    """ordered_sums.hold_back: two sums of plain arithmetic gain nothing in vector lanes (one chain of adds per
    sum either way): the loop stays scalar; with a math call besides, LLVM's cost model decides."""
    x = np.random.default_rng(5).standard_normal((6, 77))
    for kernel, vectorized in ((two_sums, False), (two_sums_of_sines, True)):
        out = np.zeros((6, 2))
        text = kernel.inspect(x, out).llvm
        assert ('!"llvm.loop.vectorize.enable", i32 0' in text) is not vectorized
        if not vectorized:
            assert "llvm.vector.reduce.fadd" not in text and "vector.body" not in text
        kernel.launch(6, x, out)
        values = np.sin(x) if vectorized else x
        want = np.zeros((6, 2))
        for i in range(6):
            for v in values[i]:
                want[i, 0] += v
                want[i, 1] += v * v
        if vectorized:  # libmvec's sin is within a few ulp of NumPy's: the sums of the kernel's own values
            assert np.allclose(out, want, rtol=1e-13)
        else:
            assert out.tobytes() == want.tobytes()
