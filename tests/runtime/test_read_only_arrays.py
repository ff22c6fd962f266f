"""Which array parameters a kernel may write (gpuc.abi.written_params), and the launchers' refusal of
read-only arrays there: NumPy's flags.writeable on the CPU, __cuda_array_interface__'s flag on CUDA."""

from __future__ import annotations

import numpy as np
import pytest

import gpuc
from gpuc.compiler import CompilerConfig, CompilerJob, IRSource, compile_module
from gpuc.abi import KernelSignature, written_params
from gpuc.runtime import JITModule
from gpuc.runtime.cuda_params import marshal
from gpuc.targets import NativeTarget, PTXTarget

A = gpuc.Array[gpuc.float64, 1]


@gpuc.func
def put(a, i, v):
    a[i] = v


@gpuc.kernel
def four_ways(out, x, via_func, total):
    i = gpuc.index()
    out[i] = x[i] * 2.0
    put(via_func, i, x[i])
    gpuc.atomic_add(total, 0, x[i])


def _written_names(target, opt_level: int = 2) -> set[str]:
    job = CompilerJob((four_ways, (A, A, A, A)), CompilerConfig(target, kernel=True, opt_level=opt_level))
    with compile_module(job) as built:
        entry = built.module.functions[built.entry]
        return {entry.args[i].name.removesuffix(".data") for i in written_params(built.module, entry)}


@pytest.mark.parametrize("target", [NativeTarget(), PTXTarget()], ids=["native", "ptx"])
def test_stores_calls_and_atomics_count_as_writes(target):
    assert _written_names(target) == {"out", "via_func", "total"}


def test_unoptimized_kernels_count_every_array_as_written():
    assert _written_names(NativeTarget(), opt_level=0) >= {"out", "via_func", "total"}


def test_a_stale_readonly_attribute_is_not_trusted():
    # The kernel stores through %p although its parameter claims `readonly`.
    ir = "define void @k(ptr readonly %p, ptr %q) {\n  %v = load i32, ptr %q\n  store i32 %v, ptr %p\n" \
         "  ret void\n}\n"
    job = CompilerJob(IRSource(ir, entry="k"), CompilerConfig(NativeTarget(), kernel=True, optimize=False))
    with compile_module(job) as built:
        entry = built.module.functions["k"]
        assert written_params(built.module, entry) == {0}


def test_escaping_pointers_count_as_written():
    ir = "@g = global ptr null\ndefine void @k(ptr %p, ptr %q) {\n  store ptr %p, ptr @g\n" \
         "  %v = load i32, ptr %q\n  ret void\n}\n"
    job = CompilerJob(IRSource(ir, entry="k"), CompilerConfig(NativeTarget(), kernel=True))
    with compile_module(job) as built:
        assert written_params(built.module, built.module.functions["k"]) == {0}


def test_the_cpu_launcher_checks_only_written_arrays():
    ir = "declare i64 @gpuc.ctx.index(i32)\ndefine void @copy(ptr %out, i64 %n, i64 %s, ptr %in, i64 %m, i64 %t) {\n" \
         "  %i = call i64 @gpuc.ctx.index(i32 0)\n  %a = getelementptr double, ptr %in, i64 %i\n" \
         "  %v = load double, ptr %a\n  %b = getelementptr double, ptr %out, i64 %i\n  store double %v, ptr %b\n" \
         "  ret void\n}\n"
    job = CompilerJob(IRSource(ir, entry="copy"), CompilerConfig(NativeTarget(), kernel=True))
    with JITModule(job, signature=[("array", np.float64, 1)] * 2) as module:
        source = np.frombuffer(np.arange(3.0).tobytes())
        out = np.zeros(3)
        module.launcher()(3, (out, source))
        assert out.tolist() == [0.0, 1.0, 2.0]
        with pytest.raises(ValueError, match=r"argument 0 \(out\) of @copy is read-only"):
            module.launcher()(3, (source, out))


class _DeviceArray:
    def __init__(self, readonly: bool) -> None:
        self.__cuda_array_interface__ = {"shape": (4,), "typestr": "<f8", "data": (4096, readonly), "version": 3}


def test_cuda_signatures_refuse_read_only_device_arrays_where_written():
    spec = [("array", "float64", 1), ("scalar", "int32"), ("array", "float64", 1)]
    signature = KernelSignature(spec, launch="sizes").with_written({0})  # llvm params: out 0-2, n 3, in 4-6
    assert [getattr(p, "written", None) for p in signature.params] == [True, None, False]
    marshal(signature, [_DeviceArray(False), 1, _DeviceArray(True)])
    with pytest.raises(ValueError, match="argument 0 is read-only"):
        marshal(signature, [_DeviceArray(True), 1, _DeviceArray(False)])
