"""The kernel ABI of gpuc/abi.py as the runtimes use it: the CPU launch entry added inside the one
driver run, launch forms read from the entry's parameters, and one signature both runtimes marshal."""

from __future__ import annotations

import ctypes
import struct

import numpy as np
import pytest

import gpuc
from gpuc import abi
from gpuc.compiler import CompilerConfig, CompilerJob, IRSource, compile_module
from gpuc.llvm import passes
from gpuc.runtime import CPULauncher, JITModule, launch
from gpuc.runtime.cuda_params import marshal
from gpuc.targets import NativeTarget, PTXTarget


def _job(ir: str, target=None, entry: str = "k", **config) -> CompilerJob:
    config.setdefault("kernel", True)
    return CompilerJob(IRSource(ir, entry=entry), CompilerConfig(target or NativeTarget(), **config))


FILL_IR = """\
declare i64 @gpuc.ctx.index(i32)
define void @k(ptr %out, i64 %n, i64 %s, double %v) {
  %i = call i64 @gpuc.ctx.index(i32 0)
  %o = mul i64 %i, %s
  %p = getelementptr double, ptr %out, i64 %o
  store double %v, ptr %p
  ret void
}
"""


@gpuc.kernel
def scale(out, x, a):
    i = gpuc.index()
    out[i] = a * x[i]


# -- one driver run -----------------------------------------------------------------------------

class _RecordingLib:
    """Stands in for the LLVM-C library in gpuc.llvm.passes: records each pipeline it runs."""

    def __init__(self, lib) -> None:
        self._lib, self.pipelines = lib, []

    def LLVMRunPasses(self, module, pipeline, tm, options):  # noqa: N802 - the C function's name
        self.pipelines.append(pipeline.decode())
        return self._lib.LLVMRunPasses(module, pipeline, tm, options)

    def __getattr__(self, name):
        return getattr(self._lib, name)


def test_the_cpu_launch_entry_is_added_inside_the_one_driver_run(monkeypatch):
    recording = _RecordingLib(passes.lib)
    monkeypatch.setattr(passes, "lib", recording)
    job = CompilerJob((scale, (gpuc.Array[gpuc.float64, 1],) * 2 + (gpuc.float64,)),
                      CompilerConfig(NativeTarget(), kernel=True))
    with JITModule(job, signature=[("array", np.float64, 1)] * 2 + [("scalar", "double")]) as module:
        x, out = np.arange(5.0), np.zeros(5)
        launch(module, 5, (out, x, 3.0))
        assert out.tolist() == [0.0, 3.0, 6.0, 9.0, 12.0]
    segments = [s.name for s in module.trace.segments]
    assert module.launch_entry == f"{module.entry}.range"
    assert segments.count("launch_entry") == 1 and segments.index("launch_entry") < segments.index("simplify")
    # the context plugin ran before it; the vectorizer and the clamp split after the simplify segment
    assert [(c.point, c.plugin) for c in module.trace.callbacks] == [
        ("early", "gpuc.ctx"), ("simplified", "gpuc.cpu.vectorize"), ("simplified", "gpuc.cpu.split_clamps")]
    # Each pass segment of the target's pipeline ran once: nothing re-ran the pipeline after the driver.
    for text in NativeTarget().pipeline_segments(2).values():
        assert sum(text in pipeline for pipeline in recording.pipelines) == 1, recording.pipelines


def test_a_kernel_compiles_to_a_module_holding_its_inlined_range_wrapper():
    result = gpuc.compile(_job(FILL_IR), "llvm")
    assert result.launch_entry == "k.range"
    body = result.output.split("define void @k.range(", 1)[1].split("\n}\n", 1)[0]
    assert "call void @k(" not in body  # the kernel was inlined into the loop by the one pipeline
    assert "define void @k(" in result.output  # and the entry stays external


def test_without_optimization_the_launch_entry_is_its_own_stage():
    result = gpuc.compile(_job(FILL_IR, optimize=False), "llvm")
    assert result.launch_entry == "k.range" and "launch_entry" in result.trace.stage_names
    assert "call void @k(" in result.output.split("define void @k.range(", 1)[1]


def test_gpu_targets_add_no_launch_entry():
    assert gpuc.compile(_job(FILL_IR, PTXTarget()), "asm").launch_entry is None


# -- launch forms are read from the entry ----------------------------------------------------------

CONTEXT_IR = """\
%gpuc.Context = type { [3 x i64], [3 x i64] }
define void @k(ptr %out, i64 %n, i64 %s, ptr %gpuc.ctx) {
  %f = getelementptr %gpuc.Context, ptr %gpuc.ctx, i32 0, i32 0, i32 0
  %i = load i64, ptr %f
  %p = getelementptr i64, ptr %out, i64 %i
  store i64 %i, ptr %p
  ret void
}
"""
# The same parameters, but the last pointer is the kernel's own: no context, whatever its type.
POINTER_IR = """\
define void @k(ptr %out, i64 %n, i64 %s, ptr %other) {
  %v = load i64, ptr %other
  %i = atomicrmw add ptr %out, i64 %v monotonic
  ret void
}
"""


def test_an_ir_kernel_taking_the_context_itself_is_launched_with_it():
    with JITModule(_job(CONTEXT_IR), signature=[("array", np.int64, 1)]) as module:
        assert module.abi.launch == abi.LAUNCH_CONTEXT and module.abi.types == ("ptr", "i64", "i64")
        out = np.full(6, -1, np.int64)
        launch(module, 6, (out,), threads=2)
        assert out.tolist() == list(range(6))


def test_a_trailing_pointer_of_another_name_is_a_parameter():
    with JITModule(_job(POINTER_IR), signature=[("array", np.int64, 1), ("scalar", "ptr")]) as module:
        assert module.abi.launch == abi.LAUNCH_NONE
        out, step = np.zeros(1, np.int64), np.array([5], np.int64)
        launch(module, 4, (out, step.ctypes.data))
        assert out[0] == 20
        with pytest.raises(TypeError, match="flattens to"):
            module.launcher([("array", np.int64, 1)])


SIZES_IR = """\
define void @k(ptr %out, i64 %n, i64 %s, i64 %{0}, i64 %{1}, i64 %{2}) {{
  store i64 1, ptr %out
  ret void
}}
"""


@pytest.mark.parametrize("names, form", [(abi.LAUNCH_SIZE_PARAMS, abi.LAUNCH_SIZES), (("a", "b", "c"), abi.LAUNCH_NONE)])
def test_gpu_launch_sizes_are_named_not_counted(names, form):
    with compile_module(_job(SIZES_IR.format(*names), PTXTarget())) as built:
        entry = abi.EntryABI.of(built.module.functions[built.entry])
    assert entry.launch == form
    signature = abi.KernelSignature([("array", np.int64, 1)] + [("scalar", "i64")] * 3 * (form == abi.LAUNCH_NONE))
    assert signature.for_entry(entry).launch == form
    with pytest.raises(TypeError, match="launch context reaches @k as 'context'"):
        abi.KernelSignature(signature.params, launch=abi.LAUNCH_CONTEXT).for_entry(entry)


# -- one signature, two runtimes -------------------------------------------------------------------

TUPLE_IR = """\
declare i64 @gpuc.ctx.index(i32)
define void @k(ptr %out, i64 %n, i64 %s, { i32, { i1, double } } %t, i64 %c) {
  %i = call i64 @gpuc.ctx.index(i32 0)
  %b = extractvalue { i32, { i1, double } } %t, 1, 1
  %o = mul i64 %i, %s
  %p = getelementptr double, ptr %out, i64 %o
  store double %b, ptr %p
  ret void
}
"""


class _GPUArray:
    """A device array as CuPy would export it, mirroring a host array's pointer, shape and strides."""

    def __init__(self, host: np.ndarray) -> None:
        self.__cuda_array_interface__ = {"shape": host.shape, "typestr": host.dtype.str, "strides": host.strides,
                                         "data": (host.ctypes.data, False), "version": 3}


def test_both_runtimes_marshal_from_one_signature_object():
    signature = abi.KernelSignature([("array", np.float64, 1), ("tuple", (("scalar", "i32"), ("tuple", (
        ("scalar", "i1"), ("scalar", "double"))))), ("scalar", "i64")])
    with JITModule(_job(TUPLE_IR), signature=signature) as module:
        cpu = module.launcher()
        assert isinstance(cpu, CPULauncher) and type(cpu.signature) is abi.KernelSignature
        assert cpu.signature.params == signature.params and cpu.signature.launch == abi.LAUNCH_CONTEXT
        host = np.zeros(7)[::2]
        args = (host, (-3, (True, 2.5)), 2**32 + 1)
        argv = struct.unpack("<" + "".join(abi.SLOT_FORMATS[t] for t in module.slots), cpu.marshal(args))
        cpu(4, args)
        assert host.tolist() == [2.5] * 4
    gpu = marshal(abi.KernelSignature(signature.params, abi.LAUNCH_NONE), (_GPUArray(host),) + args[1:])
    pointer, shape, stride, packed, count = (v.value if hasattr(v, "value") else v for v in gpu.values)
    assert (pointer, shape, stride) == argv[:3] and count == argv[-1]
    assert (packed.f0, packed.f1.f0, packed.f1.f1) == argv[3:6]
    assert ctypes.sizeof(packed) == 24  # the C layout of { i32, { i1, double } }
    for bad, error in (((host, (2**32, (True, 0.0)), 0), "does not fit in i32"),
                       ((host, (0, (1, 0.0)), 0), "must be a bool")):
        with pytest.raises((OverflowError, TypeError), match=error):
            cpu.marshal(bad)
        with pytest.raises((OverflowError, TypeError), match=error):
            marshal(abi.KernelSignature(signature.params, abi.LAUNCH_NONE), (_GPUArray(host),) + bad[1:])
