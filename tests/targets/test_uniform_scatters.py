"""Scatters of one value to one address (gpuc/targets/uniform_scatters.py): the native target stores once
where `llvm.masked.scatter` stores a splat value to a splat address, with the same memory after it."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest
from support.block_adjoints import TILE, matmul as tiled_matmul
from support.llvm_testing import Jitted

import gpuc
import gpuc.llvm as llvm
from gpuc.targets import NativeTarget, uniform_scatters

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


def _run(text: str, rewrite: bool, ty: str, v, flag: int, lanes: list[int]):
    module = llvm.Module.parse(text)
    module.triple = NativeTarget().triple()
    rewritten = uniform_scatters.rewrite(module) if rewrite else 0
    module.verify()
    after = str(module)
    dtype = {"i64": np.int64, "double": np.float64, "i32": np.int32}[ty]
    memory = np.full(2, -1, dtype)
    flags, mask = np.array([flag], np.uint8), np.array(lanes, np.uint8)
    scalar = {"i64": ctypes.c_int64, "double": ctypes.c_double, "i32": ctypes.c_int32}[ty]
    jit = Jitted(module)
    try:
        jit.get("f", None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, scalar)(
            memory.ctypes.data, memory[1:].ctypes.data, flags.ctypes.data, mask.ctypes.data, v)
    finally:
        jit.close()
    return memory, rewritten, after


@pytest.mark.parametrize("ty", ["i64", "double", "i32"])
@pytest.mark.parametrize("value", ["splat", "constant", "zero"])
@pytest.mark.parametrize("mask", ["splat", "lanes", "true", "false"])
def test_one_value_to_one_address_is_one_store(ty, value, mask):
    text = _scatter_ir(ty, value, mask, "splat")
    v = 3.25 if ty == "double" else 41
    for flag, lanes in ((1, [0] * LANES), (0, [0] * LANES), (0, [0, 0, 0, 0, 0, 0, 0, 1]), (1, [1, 0, 1, 1, 0, 0, 0, 0]),
                        (1, [1] * LANES)):
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
