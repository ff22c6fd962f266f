"""Overlapping copies into views where the target has no allocator (GCN, SPIR-V) or the allocation fails
(docs/frontend.md, Views): exact where a stack buffer or an ordered loop does it, else a defined failure
(a trap; on SPIR-V the statement writes nothing), never a value different from NumPy's."""

from __future__ import annotations

import numpy as np
import pytest

import gpuc
from gpuc import Array, float64, int64

from support.native import native

A1, A2 = Array[float64, 1], Array[float64, 2]


@gpuc.func
def overlapping(a, m, kind):
    if kind == 0:
        a[:] = a[::-1]                  # no shift: a buffer
    elif kind == 1:
        a[:(len(a) + 1) // 2] = a[::2]  # different strides: forwards
    elif kind == 2:
        a[::2] = a[:(len(a) + 1) // 2]  # backwards
    elif kind == 3:
        m[:, :] = m[::-1, ::-1]         # 2-D, no shift
    elif kind == 4:
        m[:, 0] = m[0, :]               # a row into a column
    elif kind == 5:
        a[1:] = a[3:4]                  # one element, broadcast


def run_numpy(a, m, kind):
    a, m = a.copy(), m.copy()
    {0: lambda: a.__setitem__(slice(None), a[::-1].copy()),
     1: lambda: a.__setitem__(slice(None, (len(a) + 1) // 2), a[::2].copy()),
     2: lambda: a.__setitem__(slice(None, None, 2), a[:(len(a) + 1) // 2].copy()),
     3: lambda: m.__setitem__((slice(None), slice(None)), m[::-1, ::-1].copy()),
     4: lambda: m.__setitem__((slice(None), 0), m[0, :].copy()),
     5: lambda: a.__setitem__(slice(1, None), a[3:4].copy())}[kind]()
    return a, m


@pytest.mark.parametrize("heap", [True, False], ids=["heap", "no-heap"])
def test_overlapping_copies_that_fit_the_stack_buffer_or_an_order_are_exact(heap, monkeypatch, no_disk_cache):
    if not heap:  # what GCN and SPIR-V have
        monkeypatch.setattr(gpuc.NativeTarget, "heap_functions", None)
    fn = native(overlapping, (A1, A2, int64))
    for kind in range(6):
        # 4x4 float64 fit the 256-byte buffer; 200 elements do not, but kinds 1, 2, 4, 5 have an order
        for n in ([4, 31] if kind in (0, 3) else [4, 31, 200]):
            a, m = np.arange(float(n)) * 1.5 - 2.0, np.arange(float(n * n)).reshape(n, n)
            if kind in (0, 3) and n * 8 * (n if kind == 3 else 1) > 256 and not heap:
                continue  # neither fits: the trap, checked in the IR below
            want_a, want_m = run_numpy(a, m, kind)
            fn(a, m, kind)
            assert a.tolist() == want_a.tolist() and m.tolist() == want_m.tolist(), (kind, n)


@gpuc.kernel
def reverse_rows(x):
    i = gpuc.index()
    x[i, :] = x[i, ::-1]


@gpuc.kernel
def stretch(x):
    i = gpuc.index()
    x[i, ::2] = x[i, :(len(x[i]) + 1) // 2]


def test_gcn_keeps_exact_copies_and_traps_on_the_rest(filecheck):
    target = gpuc.GCNTarget()
    ir = gpuc.code_llvm(reverse_rows, (A2,), target=target, optimize=False)
    filecheck(ir, """
CHECK: %copy.buffer = alloca [256 x i8], align 16
CHECK: getelementptr {{.*}} %copy.buffer
CHECK: copy.ordered:
CHECK: call void @llvm.trap()
CHECK-NEXT: unreachable
CHECK-NOT: malloc
""")
    asm = gpuc.compile(gpuc.CompilerJob((reverse_rows, (A2,)), gpuc.CompilerConfig(target)), "asm").output
    assert "s_trap" in asm and "malloc" not in asm


def test_spirv_writes_nothing_where_it_cannot_copy_exactly(filecheck, spirv_val):
    target = gpuc.SPIRVTarget()
    ir = gpuc.code_llvm(reverse_rows, (A2,), target=target, optimize=False)
    filecheck(ir, """
CHECK: %copy.buffer = alloca [256 x i8], align 16
CHECK: getelementptr {{.*}} %copy.buffer
CHECK-NOT: llvm.trap
CHECK-NOT: malloc
""")
    for k in (reverse_rows, stretch):
        spirv_val(gpuc.compile(gpuc.CompilerJob((k, (A2,)), gpuc.CompilerConfig(target)), "obj").output)


def test_a_failed_allocation_traps_on_the_cpu_and_ptx(filecheck, ptxas):
    # the heap temporary's null result no longer falls back to a direct (possibly wrong) copy
    for target in (gpuc.NativeTarget(), gpuc.PTXTarget()):
        ir = gpuc.code_llvm(reverse_rows, (A2,), target=target, optimize=False)
        filecheck(ir, """
CHECK: [[BUF:%.*]] = call ptr @malloc(
CHECK-NEXT: icmp {{eq|ne}} ptr [[BUF]], null
CHECK: call void @free(ptr {{.*}}[[BUF]])
""")
        filecheck(ir, "CHECK: call void @llvm.trap()\nCHECK-NEXT: unreachable\n")
    ptx = gpuc.compile(gpuc.CompilerJob((reverse_rows, (A2,)), gpuc.CompilerConfig(gpuc.PTXTarget())), "asm").output
    ptxas(ptx)
