"""OpenCL from Python: gpuc kernels on OpenCL devices that take SPIR-V (docs/targets.md, "OpenCL").

    import gpuc, gpuc.opencl
    kernel[n](x, y, device="opencl")          # NumPy arrays: copied in, written ones copied back
    xd = gpuc.opencl.to_device(x)             # a pyopencl.array.Array in gpuc's context
    kernel[n](xd, yd)                         # device arrays: runs there, asynchronously
    print(gpuc.opencl.devices())              # what the ICD loader finds, and what each supports

The device is the first that takes SPIR-V; GPUC_OPENCL_DEVICE picks another (an index in devices(),
or part of a name). Intel's OpenCL CPU runtime (`pip install 'gpuc[opencl]'`) is found in the Python
environment without any setting.
"""

from .runtime.opencl import (CLArray, DeviceInfo, DeviceLacksError, OpenCLError, OpenCLUnavailableError,
                             available, copy_to_host, device_array, device_info, devices, session, synchronize,
                             to_device, unavailable_reason, zeros)

__all__ = ["CLArray", "DeviceInfo", "DeviceLacksError", "OpenCLError", "OpenCLUnavailableError", "available",
           "copy_to_host", "device_array", "device_info", "devices", "session", "synchronize", "to_device",
           "unavailable_reason", "zeros"]
