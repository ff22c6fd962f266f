"""Device memory bandwidth: a gpuc-compiled copy kernel against the driver's cuMemcpyDtoD.

The kernel is LLVM IR following docs/kernel-abi.md (one element per work item, element strides,
the launch-size bound check), compiled to PTX by gpuc for the device's compute capability, loaded
with gpuc.runtime.cuda and launched with the default 256-thread blocks. Times come from CUDA
events around `--reps` back-to-back launches (after a warm-up); bandwidth counts the bytes read
plus the bytes written. Without a CUDA device the script says why and exits with status 0.

    python benchmarks/bench_cuda_bandwidth.py                 # 1 GiB buffers, 20 repetitions
    python benchmarks/bench_cuda_bandwidth.py --mib 256 --reps 50 --json out.json
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import _common  # noqa: F401 - puts the repository on sys.path
from _common import banner, machine_facts, table, write_json

import gpuc
import gpuc.cuda as cuda
from gpuc.runtime import cuda as rt

_COPY_IR = """\
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()

define void @copy(ptr %dst, i64 %dst.n0, i64 %dst.s0, ptr %src, i64 %src.n0, i64 %src.s0,
                  i64 %gpuc.n0, i64 %gpuc.n1, i64 %gpuc.n2) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %ctaid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %t = zext i32 %tid to i64
  %nt = zext i32 %ntid to i64
  %c = zext i32 %ctaid to i64
  %base = mul i64 %c, %nt
  %i = add i64 %base, %t
  %inside = icmp ult i64 %i, %gpuc.n0
  br i1 %inside, label %body, label %done
body:
  %so = mul i64 %i, %src.s0
  %ps = getelementptr {T}, ptr %src, i64 %so
  %v = load {T}, ptr %ps
  %do = mul i64 %i, %dst.s0
  %pd = getelementptr {T}, ptr %dst, i64 %do
  store {T} %v, ptr %pd
  br label %done
done:
  ret void
}
"""
_LLVM_TYPE = {"float32": "float", "float64": "double"}


def _event_seconds(run, reps: int) -> float:
    """Seconds per call of `run()`, from CUDA events around `reps` calls after one warm-up."""
    start, end = (rt.driver_call("cuEventCreate", 0) for _ in range(2))
    try:
        run()
        from cuda.bindings.driver import CUstream

        stream = CUstream(0)  # the legacy default stream, where gpuc launches
        rt.driver_call("cuEventRecord", start, stream)
        for _ in range(reps):
            run()
        rt.driver_call("cuEventRecord", end, stream)
        rt.driver_call("cuEventSynchronize", end)
        return rt.driver_call("cuEventElapsedTime", start, end) / 1e3 / reps
    finally:
        for event in (start, end):
            rt.driver_call("cuEventDestroy", event)


def _kernel_copy(dtype: str, dst, src, cap: str):
    job = gpuc.CompilerJob(gpuc.IRSource(_COPY_IR.replace("{T}", _LLVM_TYPE[dtype]), entry="copy"),
                           gpuc.CompilerConfig(gpuc.PTXTarget(cap=cap), kernel=True))
    module = cuda.CudaModule.from_ptx(gpuc.compile(job, "asm").output, "copy")
    launcher = module.launcher(cuda.KernelSignature([("array", dtype, 1)] * 2, launch="sizes"))
    config = cuda.launch_config(dst.size)
    params = cuda.marshal(launcher.signature, (dst, src), config.launch_size)  # once: time the GPU only
    return module, lambda: cuda.launch(launcher.function, config.grid, config.block, params, sync=False)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=1024, help="size of each buffer in MiB (default 1024)")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--json", metavar="OUT")
    args = parser.parse_args(argv)
    if not cuda.available():
        print(f"bench_cuda_bandwidth: skipped, {cuda.unavailable_reason()}")
        return 0
    info = cuda.device_info()
    nbytes = min(args.mib << 20, info.total_memory // 4)
    facts = machine_facts()
    print(banner(facts))
    print(f"{info.name} ({info.cap}, {info.total_memory / 2**30:.0f} GiB, driver {info.driver_version}); "
          f"buffers of {nbytes / 2**20:.0f} MiB, {args.reps} repetitions\n")
    src, dst = cuda.device_array(nbytes, np.uint8), cuda.device_array(nbytes, np.uint8)
    rt.driver_call("cuMemsetD8", src.ptr, 1, nbytes)
    rows, results = [], {}
    for name in ("float32", "float64"):
        count = nbytes // np.dtype(name).itemsize
        module, run = _kernel_copy(name, _Typed(dst, name, count), _Typed(src, name, count), info.cap)
        with module:
            results[f"kernel_{name}"] = _event_seconds(run, args.reps)
    results["cuMemcpyDtoD"] = _event_seconds(lambda: rt.driver_call("cuMemcpyDtoD", dst.ptr, src.ptr, nbytes),
                                             args.reps)
    for label, seconds in results.items():
        rows.append([label, f"{seconds * 1e3:.3f}", f"{2 * nbytes / seconds / 1e9:.1f}"])
    print(table(["copy", "ms", "GB/s (read + write)"], rows))
    if args.json:
        write_json(args.json, {"facts": facts, "device": info.__dict__, "bytes": nbytes, "reps": args.reps,
                               "seconds": results})
    return 0


class _Typed:
    """A 1-D view of a byte DeviceArray as `count` elements of `dtype`."""

    def __init__(self, base, dtype: str, count: int) -> None:
        self.size = count
        self.__cuda_array_interface__ = {"shape": (count,), "typestr": np.dtype(dtype).str,
                                         "data": (base.ptr, False), "strides": None, "version": 3}


if __name__ == "__main__":
    sys.exit(main())
