"""Rows of ordered sums that a vector loop carries, loaded and stored as vectors (gpuc/targets/sum_rows.py, through
gpuc/targets/ordered_sums.py): the loop vectorizer's shape, a vector loop then a scalar remainder, the sums'
starts loaded from a row before it and stored back after it. The JIT runs the IR as it was and rewritten: the
same bits in memory; and only where nothing else touches memory between the row's accesses."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from support.llvm_testing import Jitted

import gpuc.llvm as llvm
from gpuc.targets import NativeTarget, ordered_sums

_DTYPES = {"float": np.float32, "double": np.float64}


def _rows_ir(ty: str, lanes: int, count: int, stride: int = 1, between_loads: str = "",
             between_stores: str = "") -> str:
    """@rows(ptr acc, ptr vecs, ptr tail, ptr other, i64 n, i64 m): acc[k * stride] for k < count go round n
    iterations of a vector loop (reduce.fadd of vecs' vectors) and m of a scalar remainder (tail's
    elements), then back into acc. `between_loads` / `between_stores`: an instruction between the row's first
    two loads / stores (touching `other`)."""
    vty = f"<{lanes} x {ty}>"
    size = 4 if ty == "float" else 8
    suffix = f"v{lanes}{'f32' if ty == 'float' else 'f64'}"
    lines = ["define void @rows(ptr %acc, ptr %vecs, ptr %tail, ptr %other, i64 %n, i64 %m) {", "entry:"]
    for k in range(count):
        lines += [f"  %ap{k} = getelementptr {ty}, ptr %acc, i64 {k * stride}", f"  %a{k} = load {ty}, ptr %ap{k}"]
        if k == 0 and between_loads:
            lines.append("  " + between_loads)
    lines += ["  br label %loop", "loop:", "  %it = phi i64 [ 0, %entry ], [ %next, %loop ]"]
    lines += [f"  %p{k} = phi {ty} [ %a{k}, %entry ], [ %s{k}, %loop ]" for k in range(count)]
    lines.append(f"  %base = mul i64 %it, {count * lanes * size}")
    for k in range(count):
        lines += [f"  %vo{k} = add i64 %base, {k * lanes * size}",
                  f"  %vp{k} = getelementptr i8, ptr %vecs, i64 %vo{k}", f"  %v{k} = load {vty}, ptr %vp{k}, align 4",
                  f"  %s{k} = call {ty} @llvm.vector.reduce.fadd.{suffix}({ty} %p{k}, {vty} %v{k})"]
    lines += ["  %next = add i64 %it, 1", "  %more = icmp ult i64 %next, %n",
              "  br i1 %more, label %loop, label %middle", "middle:"]
    lines += [f"  %e{k} = phi {ty} [ %s{k}, %loop ]" for k in range(count)]
    lines += ["  %none = icmp eq i64 %m, 0", "  br i1 %none, label %join, label %rem", "rem:",
              "  %j = phi i64 [ 0, %middle ], [ %j.next, %rem ]"]
    lines += [f"  %q{k} = phi {ty} [ %e{k}, %middle ], [ %r{k}, %rem ]" for k in range(count)]
    lines.append(f"  %tb = mul i64 %j, {count}")
    for k in range(count):
        lines += [f"  %ti{k} = add i64 %tb, {k}", f"  %tp{k} = getelementptr {ty}, ptr %tail, i64 %ti{k}",
                  f"  %x{k} = load {ty}, ptr %tp{k}", f"  %r{k} = fadd {ty} %q{k}, %x{k}"]
    lines += ["  %j.next = add i64 %j, 1", "  %again = icmp ult i64 %j.next, %m",
              "  br i1 %again, label %rem, label %join", "join:"]
    lines += [f"  %f{k} = phi {ty} [ %e{k}, %middle ], [ %r{k}, %rem ]" for k in range(count)]
    for k in range(count):
        lines.append(f"  store {ty} %f{k}, ptr %ap{k}")
        if k == 0 and between_stores:
            lines.append("  " + between_stores)
    lines += ["  ret void", "}", f"declare {ty} @llvm.vector.reduce.fadd.{suffix}({ty}, {vty})"]
    return "\n".join(lines) + "\n"


def _run(text: str, rewrite: bool, ty: str, count: int, stride: int, n: int, m: int, seed: int):
    """(acc and other after @rows, the IR after the rewrite or not)."""
    rng = np.random.default_rng(seed)
    dtype = _DTYPES[ty]
    lanes = 8
    acc = rng.uniform(-1e3, 1e3, count * stride + 1).astype(dtype)
    vecs = rng.uniform(-1, 1, max(n, 1) * count * lanes).astype(dtype)
    tail = rng.uniform(-1, 1, max(m, 1) * count).astype(dtype)
    other = np.array([7.0, 0.0], dtype)
    module = llvm.Module.parse(text)
    module.triple = NativeTarget().triple()
    if rewrite:
        assert ordered_sums.rewrite(module) == count
    module.verify()
    after = str(module)
    jit = Jitted(module)
    try:
        jit.get("rows", None, *[ctypes.c_void_p] * 4, ctypes.c_int64, ctypes.c_int64)(
            acc.ctypes.data, vecs.ctypes.data, tail.ctypes.data, other.ctypes.data, n, m)
    finally:
        jit.close()
    return np.concatenate([acc, other]), after


def _section(text: str, label: str) -> str:
    return text.split(f"\n{label}:")[1].split("\n\n")[0]


@pytest.mark.parametrize("ty", ["float", "double"])
@pytest.mark.parametrize("count", [8, 16, 5, 12])
def test_a_row_of_sums_is_loaded_and_stored_as_vectors(ty, count):
    text = _rows_ir(ty, 8, count)
    for n, m in [(1, 0), (3, 0), (2, 5), (1, 1), (4, 7)]:
        before, _ = _run(text, False, ty, count, 1, n, m, seed=n * 31 + m)
        after, ir = _run(text, True, ty, count, 1, n, m, seed=n * 31 + m)
        assert after.tobytes() == before.tobytes(), (n, m)
    vectors = -(-count // 8)
    entry = ir.split("\nloop:")[0]
    assert "insertelement" not in entry and entry.count("load <") == vectors
    join = ir.split("\njoin:")[1]
    assert join.count("store <") == vectors and f"store {ty} " not in join
    assert "join.row:" in ir  # the remainder's scalars go into a vector on their edge, not round its loop
    assert "insertelement" not in _section(ir, "rem")


@pytest.mark.parametrize("where", ["loads", "stores"])
def test_a_row_with_another_access_between_stays_scalar(where):
    """A store between the row's loads, or a load between its stores: the accesses stay as they are."""
    touch = "store float 1.0, ptr %other" if where == "loads" else "%o = load float, ptr %other"
    text = _rows_ir("float", 8, 8, between_loads=touch if where == "loads" else "",
                    between_stores=touch if where == "stores" else "")
    for n, m in [(2, 3), (1, 0)]:
        before, _ = _run(text, False, "float", 8, 1, n, m, seed=5)
        after, ir = _run(text, True, "float", 8, 1, n, m, seed=5)
        assert after.tobytes() == before.tobytes()
    if where == "loads":
        assert "load <8 x float>, ptr %ap0" not in ir and ir.split("\nloop:")[0].count("insertelement") == 8
        assert ir.split("\njoin:")[1].count("store <") == 1
    else:
        assert "load <8 x float>, ptr %ap0" in ir
        assert "store <" not in ir.split("\njoin:")[1]


def test_a_row_with_gaps_stays_scalar():
    text = _rows_ir("float", 8, 8, stride=2)
    before, _ = _run(text, False, "float", 8, 2, 3, 2, seed=9)
    after, ir = _run(text, True, "float", 8, 2, 3, 2, seed=9)
    assert after.tobytes() == before.tobytes()
    assert "load <8 x float>, ptr %ap0" not in ir and "store <" not in ir.split("\njoin:")[1]
