"""SPIR-V: constant addresses (constant getelementptr expressions) reach the backend as instructions, so
that a byte offset into a shared array keeps its size whatever instructions use it (gpuc/targets/spirv.py)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import gpuc

I64 = gpuc.Array[gpuc.int64, 1, "C"]


@gpuc.kernel
def constant_slots(out, v):
    s = gpuc.shared.array(4, gpuc.int64)
    t = gpuc.thread_index(0)
    if t == 0:
        s[1] = v[0]
        s[2] = v[1]
        s[0] = 0
        s[3] = 0
    gpuc.barrier()
    if t == 1:
        gpuc.atomic_add(s, 2, 100)
    if t == 2:
        gpuc.atomic_max(s, 3, 9)
        gpuc.atomic_cas(s, 0, 0, 4)
    gpuc.barrier()
    out[gpuc.index(0)] = s[t % 4] * 1000 + s[1]


# The backend typed `getelementptr (i8, @shared, 16)`, used by a store and an atomic, as an offset of 16
# int64s: the atomics and the stores beside them went past the shared array (s[2] and s[3] read garbage).
@pytest.mark.devices("cpu", "opencl")
def test_atomics_on_constant_slots_of_a_shared_array():
    out = np.zeros(8, np.int64)
    constant_slots.launch(8, out, np.array([3, 5], np.int64), block=8)
    assert out.tolist() == [4003, 3003, 105003, 9003] * 2


def test_no_constant_address_expression_reaches_the_backend():
    job = gpuc.CompilerJob((constant_slots, (I64, I64)),
                           gpuc.CompilerConfig(gpuc.SPIRVTarget(), kernel=True, whole_blocks=True))
    ir = gpuc.compile(job, "llvm").output
    assert "getelementptr" in ir and not re.search(r"getelementptr [a-z ]*\(", ir), ir
