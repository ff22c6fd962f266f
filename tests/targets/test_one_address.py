"""Gathers and scatters through one address (gpuc/targets/one_address.py): the native target loads once where
`llvm.masked.gather` reads through a splat address, and stores once where `llvm.masked.scatter` stores a splat
value to a splat address, with the same results and the same memory after it."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest
from support.block_adjoints import TILE, matmul as tiled_matmul
from support.llvm_testing import Jitted

import gpuc
import gpuc.llvm as llvm
from gpuc.targets import NativeTarget, one_address

LANES = 8


def _scatter_ir(ty: str, value: str, mask: str, pointers: str) -> str:
    """@f(ptr %slot, ptr %other, ptr %flags, ptr %lanes, <ty> %v): one masked scatter of `value` through `pointers`
    under `mask`. Masks: "splat" (lane 0 of %flags, in every lane), "lanes" (one byte of %lanes per lane),
    "true", "false". Values: "splat" (%v in every lane), "constant" (a constant splat), "zero", "spread" (%v + the
    lane). Pointers: "splat" (%slot in every lane), "spread" (%slot, %other alternating)."""
    vty, mty = f"<{LANES} x {ty}>", f"<{LANES} x i1>"
    suffix = {"i64": "v8i64", "double": "v8f64", "i32": "v8i32"}[ty]
    lines = [f"define void @f(ptr %slot, ptr %other, ptr %flags, ptr %lanes, {ty} %v) {{", "entry:"]
    lines += ["  %flag = load i8, ptr %flags", "  %c = icmp ne i8 %flag, 0",
              f"  %ci = insertelement {mty} poison, i1 %c, i64 0",
              f"  %splatmask = shufflevector {mty} %ci, {mty} poison, <{LANES} x i32> zeroinitializer",
              f"  %bytes = load <{LANES} x i8>, ptr %lanes", f"  %lanemask = icmp ne <{LANES} x i8> %bytes, zeroinitializer",
              f"  %vi = insertelement {vty} poison, {ty} %v, i64 0",
              f"  %splatv = shufflevector {vty} %vi, {vty} poison, <{LANES} x i32> zeroinitializer",
              f"  %pi = insertelement <{LANES} x ptr> poison, ptr %slot, i64 0",
              f"  %splatp = shufflevector <{LANES} x ptr> %pi, <{LANES} x ptr> poison, <{LANES} x i32> zeroinitializer",
              f"  %oi = insertelement <{LANES} x ptr> poison, ptr %other, i64 0",
              f"  %splato = shufflevector <{LANES} x ptr> %oi, <{LANES} x ptr> poison, <{LANES} x i32> zeroinitializer",
              f"  %spreadp = shufflevector <{LANES} x ptr> %splatp, <{LANES} x ptr> %splato, "
              f"<{LANES} x i32> <{', '.join(f'i32 {k if k % 2 == 0 else LANES + k}' for k in range(LANES))}>"]
    if ty == "double":
        lines.append(f"  %steps = uitofp <{LANES} x i32> <{', '.join(f'i32 {k}' for k in range(LANES))}> to {vty}")
        lines.append(f"  %spreadv = fadd {vty} %splatv, %steps")
        constant = f"splat ({ty} 2.5)"
    else:
        lines.append(f"  %spreadv = add {vty} %splatv, <{', '.join(f'{ty} {k}' for k in range(LANES))}>")
        constant = f"splat ({ty} 7)"
    values = {"splat": "%splatv", "constant": constant, "zero": "zeroinitializer", "spread": "%spreadv"}
    masks = {"splat": "%splatmask", "lanes": "%lanemask", "true": "splat (i1 true)", "false": "zeroinitializer"}
    lines += [f"  call void @llvm.masked.scatter.{suffix}.v8p0({vty} {values[value]}, <{LANES} x ptr> align 8 "
              f"{'%splatp' if pointers == 'splat' else '%spreadp'}, {mty} {masks[mask]}), !noalias !0",
              "  ret void", "}",
              f"declare void @llvm.masked.scatter.{suffix}.v8p0({vty}, <{LANES} x ptr>, {mty})",
              "!0 = !{!1}", "!1 = distinct !{!1, !2}", "!2 = distinct !{!2}"]
    return "\n".join(lines) + "\n"


_DTYPES = {"i64": np.int64, "double": np.float64, "i32": np.int32}


def _jit_f(text: str, rewrite: bool, memory, flag: int, lanes: list[int], last, last_type):
    """Run @f(ptr %slot, ptr %other, ptr %flags, ptr %lanes, <last>) of `text`, rewritten or not, with %slot and
    %other the two elements of `memory`: (how many accesses were rewritten, the IR after)."""
    module = llvm.Module.parse(text)
    module.triple = NativeTarget().triple()
    rewritten = one_address.rewrite(module) if rewrite else 0
    module.verify()
    after = str(module)
    flags, mask = np.array([flag], np.uint8), np.array(lanes, np.uint8)
    jit = Jitted(module)
    try:
        jit.get("f", None, *[ctypes.c_void_p] * 4, last_type)(
            memory.ctypes.data, memory[1:].ctypes.data, flags.ctypes.data, mask.ctypes.data, last)
    finally:
        jit.close()
    return rewritten, after


#: (the flag a splat mask is of, the lanes of a per-lane mask): none, one, some and every lane active.
_MASK_CASES = ((1, [0] * LANES), (0, [0] * LANES), (0, [0, 0, 0, 0, 0, 0, 0, 1]), (1, [1, 0, 1, 1, 0, 0, 0, 0]),
               (1, [1] * LANES))


def _run(text: str, rewrite: bool, ty: str, v, flag: int, lanes: list[int]):
    memory = np.full(2, -1, _DTYPES[ty])
    scalar = {"i64": ctypes.c_int64, "double": ctypes.c_double, "i32": ctypes.c_int32}[ty]
    rewritten, after = _jit_f(text, rewrite, memory, flag, lanes, v, scalar)
    return memory, rewritten, after


@pytest.mark.parametrize("ty", ["i64", "double", "i32"])
@pytest.mark.parametrize("value", ["splat", "constant", "zero"])
@pytest.mark.parametrize("mask", ["splat", "lanes", "true", "false"])
def test_one_value_to_one_address_is_one_store(ty, value, mask):
    text = _scatter_ir(ty, value, mask, "splat")
    v = 3.25 if ty == "double" else 41
    for flag, lanes in _MASK_CASES:
        want, _, _ = _run(text, False, ty, v, flag, lanes)
        got, rewritten, after = _run(text, True, ty, v, flag, lanes)
        assert got.tobytes() == want.tobytes(), (flag, lanes, got, want)
        assert rewritten == 1
        assert "call void @llvm.masked.scatter" not in after
        if mask in ("true", "false"):  # no branch where the mask is known
            assert "br i1" not in after
        if mask != "false":
            assert re.search(r"store \w+ [^,]+, ptr %slot, align 8, !noalias", after), after  # its alias metadata
        if mask == "lanes":
            assert "llvm.vector.reduce.or" in after


@pytest.mark.parametrize("value, pointers", [("spread", "splat"), ("splat", "spread")])
def test_scatters_of_several_values_or_addresses_stay(value, pointers):
    text = _scatter_ir("i64", value, "lanes", pointers)
    for lanes in ([1, 0, 1, 1, 0, 0, 0, 1], [0, 1, 0, 0, 0, 0, 0, 0]):
        want, _, _ = _run(text, False, "i64", 5, 1, lanes)
        got, rewritten, after = _run(text, True, "i64", 5, 1, lanes)
        assert got.tobytes() == want.tobytes()
        assert rewritten == 0 and "call void @llvm.masked.scatter" in after


def test_the_tiled_matmul_stores_its_tile_counter_once():
    """The block's next tile counter, stored under a condition every item computes alike, was a scatter of 8
    lanes to the block's slot (two per tile in the primal, three in the adjoint): now a store."""
    m = 64
    a, b, c = (np.zeros((m, m), np.float32) for _ in range(3))
    primal = tiled_matmul.inspect(a, b, c, block=(TILE, TILE), threads=1).llvm
    adjoint = gpuc.adjoint(tiled_matmul).inspect(a, a.copy(), b, b.copy(), c, c.copy(), block=(TILE, TILE),
                                                  threads=1).llvm
    for ir in (primal, adjoint):
        assert "load <" in ir  # the loops are vectorized
        assert not re.findall(r"@llvm\.masked\.scatter\.[\w.]+\([^)]*<\d+ x ptr> align \d+ %broadcast\.splat", ir)


def _gather_ir(ty: str, mask: str, passthru: str, pointers: str) -> str:
    """@f(ptr %slot, ptr %other, ptr %flags, ptr %lanes, ptr %out): `out` (LANES elements) = a masked gather
    through `pointers` under `mask` (as in _scatter_ir), with pass-through `passthru` ("poison", "zero", "spread":
    lane k holds k + 100)."""
    vty, mty = f"<{LANES} x {ty}>", f"<{LANES} x i1>"
    suffix = {"i64": "v8i64", "double": "v8f64", "i32": "v8i32"}[ty]
    lines = ["define void @f(ptr %slot, ptr %other, ptr %flags, ptr %lanes, ptr %out) {", "entry:",
             "  %flag = load i8, ptr %flags", "  %c = icmp ne i8 %flag, 0",
             f"  %ci = insertelement {mty} poison, i1 %c, i64 0",
             f"  %splatmask = shufflevector {mty} %ci, {mty} poison, <{LANES} x i32> zeroinitializer",
             f"  %bytes = load <{LANES} x i8>, ptr %lanes", f"  %lanemask = icmp ne <{LANES} x i8> %bytes, zeroinitializer",
             f"  %pi = insertelement <{LANES} x ptr> poison, ptr %slot, i64 0",
             f"  %splatp = shufflevector <{LANES} x ptr> %pi, <{LANES} x ptr> poison, <{LANES} x i32> zeroinitializer",
             f"  %oi = insertelement <{LANES} x ptr> poison, ptr %other, i64 0",
             f"  %splato = shufflevector <{LANES} x ptr> %oi, <{LANES} x ptr> poison, <{LANES} x i32> zeroinitializer",
             f"  %spreadp = shufflevector <{LANES} x ptr> %splatp, <{LANES} x ptr> %splato, "
             f"<{LANES} x i32> <{', '.join(f'i32 {k if k % 2 == 0 else LANES + k}' for k in range(LANES))}>"]
    spread = ", ".join(f"{ty} {k + 100}.0" if ty == "double" else f"{ty} {k + 100}" for k in range(LANES))
    passthrus = {"poison": "poison", "zero": "zeroinitializer", "spread": f"<{spread}>"}
    masks = {"splat": "%splatmask", "lanes": "%lanemask", "true": "splat (i1 true)", "false": "zeroinitializer"}
    lines += [f"  %g = call {vty} @llvm.masked.gather.{suffix}.v8p0(<{LANES} x ptr> align 8 "
              f"{'%splatp' if pointers == 'splat' else '%spreadp'}, {mty} {masks[mask]}, {vty} {passthrus[passthru]}), "
              "!noalias !0",
              f"  store {vty} %g, ptr %out, align 8", "  ret void", "}",
              f"declare {vty} @llvm.masked.gather.{suffix}.v8p0(<{LANES} x ptr>, {mty}, {vty})",
              "!0 = !{!1}", "!1 = distinct !{!1, !2}", "!2 = distinct !{!2}"]
    return "\n".join(lines) + "\n"


def _gathered(text: str, rewrite: bool, ty: str, flag: int, lanes: list[int]):
    out = np.zeros(LANES, _DTYPES[ty])
    rewritten, after = _jit_f(text, rewrite, np.array([7, 9], _DTYPES[ty]), flag, lanes, out.ctypes.data,
                              ctypes.c_void_p)
    return out, rewritten, after


@pytest.mark.parametrize("ty", ["i64", "double", "i32"])
@pytest.mark.parametrize("passthru", ["zero", "spread", "poison"])
@pytest.mark.parametrize("mask", ["splat", "lanes", "true", "false"])
def test_one_address_gathered_is_one_load(ty, passthru, mask):
    text = _gather_ir(ty, mask, passthru, "splat")
    for flag, lanes in _MASK_CASES:
        want, _, _ = _gathered(text, False, ty, flag, lanes)
        got, rewritten, after = _gathered(text, True, ty, flag, lanes)
        active = {"splat": [flag] * LANES, "lanes": lanes, "true": [1] * LANES, "false": [0] * LANES}[mask]
        if passthru == "poison":  # the lanes that are off hold anything: compare the others
            want, got = want[np.array(active, bool)], got[np.array(active, bool)]
        assert got.tobytes() == want.tobytes(), (flag, lanes, got, want)
        assert rewritten == 1
        assert "@llvm.masked.gather" not in after.split("declare")[0]
        if mask != "false":
            assert re.search(r"load \w+, ptr %slot, align 8, !noalias", after), after


def test_gathers_through_several_addresses_stay():
    text = _gather_ir("i64", "lanes", "zero", "spread")
    got, rewritten, after = _gathered(text, True, "i64", 1, [1] * LANES)
    assert rewritten == 0 and "call <8 x i64> @llvm.masked.gather" in after
    assert got.tolist() == [7, 9] * (LANES // 2)


SMALL = 8


@gpuc.kernel
def matmul8(a, b, c):
    sa = gpuc.shared.array((SMALL, SMALL), gpuc.float32)
    sb = gpuc.shared.array((SMALL, SMALL), gpuc.float32)
    tx, ty = gpuc.thread_index(0), gpuc.thread_index(1)
    col, row = gpuc.index(0), gpuc.index(1)
    m, k, n = a.shape[0], a.shape[1], b.shape[1]
    acc = gpuc.float32(0.0)
    for k0 in range(0, k, SMALL):
        sa[ty, tx] = a[row, k0 + tx] if row < m and k0 + tx < k else gpuc.float32(0.0)
        sb[ty, tx] = b[k0 + ty, col] if k0 + ty < k and col < n else gpuc.float32(0.0)
        gpuc.barrier()
        for kk in range(SMALL):
            acc += sa[ty, kk] * sb[kk, tx]
        gpuc.barrier()
    if row < m and col < n:
        c[row, col] = acc


@pytest.mark.parametrize("threads", [1, 2])
def test_the_tiled_matmul_with_8x8_tiles_reads_its_shared_elements_once(threads):
    """With tiles of 8x8 the adjoint's regions test per-item flags: its loads of `sa[ty, kk]`, one element for the
    row of items, were gathers through one address (40 of them), now a load each; the gradients hold."""
    m = 40
    a, b, c = (np.zeros((m, m), np.float32) for _ in range(3))
    adjoint = gpuc.adjoint(matmul8).inspect(a, a.copy(), b, b.copy(), c, c.copy(), block=(SMALL, SMALL),
                                            threads=1).llvm
    assert "load <" in adjoint
    assert not re.findall(r"@llvm\.masked\.gather\.[\w.]+\(<\d+ x ptr> align \d+ %broadcast\.splat", adjoint)
    rng = np.random.default_rng(threads)
    a[:], b[:] = rng.uniform(-1, 1, (m, m)), rng.uniform(-1, 1, (m, m))
    seed = rng.uniform(-1, 1, (m, m)).astype(np.float32)
    da, db = np.zeros_like(a), np.zeros_like(b)
    gpuc.adjoint(matmul8).launch((m, m), a, da, b, db, c, seed.copy(), block=(SMALL, SMALL), threads=threads)
    a64, b64, s64 = (v.astype(np.float64) for v in (a, b, seed))
    np.testing.assert_allclose(da, s64 @ b64.T, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(db, a64.T @ s64, rtol=2e-5, atol=2e-5)
