"""What the device a test runs on (tests/conftest.py, the `devices` mark) decides for its references."""

from __future__ import annotations

from gpuc.runtime import dispatch

#: gpuc.warp_size() on the CPU (and CUDA).
CPU_WARP = 32


def warp_of(kernel, args, block) -> int:
    """gpuc.warp_size() in `kernel`'s launches on `args` in blocks of `block` on the device the test runs on:
    32 on the CPU; on OpenCL the size of the sub-groups the driver runs the kernel in, which it picks per
    kernel (Intel's CPU runtime: 4 to 64 lanes, by the kernel's vector width)."""
    run = dispatch.launcher_for(kernel, args, whole_blocks=True)
    opencl = getattr(run, "opencl", None)
    return CPU_WARP if opencl is None else opencl.sub_group_size(block)


#: Why a multi-dimensional block's lanes are not the CUDA layout on OpenCL where its rows are not whole warps.
DEVICE_LANES = ("OpenCL leaves the mapping of work items to sub-groups to the device: Intel's CPU runtime forms "
                "them along x, a row at a time, not from consecutive linear indices as CUDA's warps")
