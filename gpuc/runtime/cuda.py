"""The CUDA runtime: a primary context, PTX modules, device memory and kernel launches through
NVIDIA's cuda-bindings driver API, initialized on first use.

Argument marshalling (`__cuda_array_interface__` parsing, the kernelParams array from an
abi.KernelSignature, grid/block sizing) is pure Python and needs no GPU; see gpuc/abi.py and
docs/kernel-abi.md for the parameter layout.
"""

from __future__ import annotations

import os
import threading
import weakref
from dataclasses import dataclass


from ..abi import BOUNDS_DEVICE_RECORD_WORDS, BOUNDS_RECORD, LAUNCH_NONE, LAUNCH_SIZES
from .bounds import device_error
from .cuda_params import (ArrayParam, CudaArray, KernelSignature, LaunchConfig, PackedParams, ScalarParam,  # noqa: F401
                          TupleParam, converters, launch_config, marshal, parse_cuda_array)  # the pure half


class CudaError(RuntimeError):
    """A CUDA driver call failed; `code` is the CUresult (when there is one), `log` any JIT log."""

    def __init__(self, message: str, code=None, log: str = "") -> None:
        super().__init__(message)
        self.code, self.log = code, log


class CudaUnavailableError(CudaError):
    """There is no usable CUDA driver or device; the message says why."""


# -- driver, device and primary context -------------------------------------------------------

@dataclass(frozen=True)
class DeviceInfo:
    ordinal: int
    name: str
    cap: str  # "sm_90": what PTXTarget(cap=...) takes
    total_memory: int  # bytes
    multiprocessors: int
    driver_version: str  # "13.0"


@dataclass(frozen=True)
class _Session:
    driver: object  # the cuda.bindings.driver module
    device: object  # CUdevice
    context: object  # CUcontext: the device's primary context, retained for the life of the process
    info: DeviceInfo
    pid: int


_lock = threading.Lock()
_session: _Session | str | None = None  # a session, or the reason there is none
_heap_raised = False
#: The device heap (`malloc` in kernels: reverse-mode tapes of loops) gpuc asks for before loading the first
#: module that allocates: the driver's default is 8 MiB; this is 1/16 of the device's memory, at most 4 GiB.
_HEAP_SHARE, _HEAP_MOST = 16, 4 << 30


def _raise_heap(session: _Session) -> None:
    """Make the device heap large enough for per-thread tapes, once, before a kernel allocates."""
    global _heap_raised
    with _lock:
        if _heap_raised:
            return
        _heap_raised = True
    limit = session.driver.CUlimit.CU_LIMIT_MALLOC_HEAP_SIZE
    size = min(session.info.total_memory // _HEAP_SHARE, _HEAP_MOST)
    _quietly(lambda: _call(session.driver, "cuCtxSetLimit", limit, size))


def _describe(driver, err) -> str:
    try:
        name = driver.cuGetErrorName(err)[1].decode()
        text = driver.cuGetErrorString(err)[1].decode()
        return f"{name} ({text})"
    except Exception:  # an unknown code, or a driver too broken to describe it
        return str(err)


def _call(driver, fn_name: str, *args):
    """Call `driver.<fn_name>(*args)`; raise CudaError unless it succeeded; return its outputs."""
    err, *out = getattr(driver, fn_name)(*args)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise CudaError(f"{fn_name} failed: {_describe(driver, err)}", code=err)
    return out[0] if len(out) == 1 else (tuple(out) if out else None)


def _import_driver():
    try:
        from cuda.bindings import driver
    except ImportError as exc:
        raise CudaUnavailableError(f"no CUDA device: cuda-bindings is not installed ({exc}); "
                                   "install it with `pip install 'gpuc[cuda]'`") from None
    return driver


def _open_session(driver, ordinal: int = 0) -> _Session:
    """cuInit, pick device `ordinal` and retain its primary context; CudaUnavailableError if impossible."""
    try:
        _call(driver, "cuInit", 0)
    except CudaError as exc:
        raise CudaUnavailableError(f"no CUDA device: {exc}", code=exc.code) from None
    except Exception as exc:  # cuda.pathfinder's DynamicLibNotFoundError, an OSError, ...
        raise CudaUnavailableError(f"no CUDA device: the NVIDIA driver library (libcuda.so) could not be "
                                   f"loaded: {exc}") from None
    count = _call(driver, "cuDeviceGetCount")
    if count <= ordinal:
        raise CudaUnavailableError(f"no CUDA device: the driver reports {count} device(s), "
                                   f"so there is no device {ordinal}")
    device = _call(driver, "cuDeviceGet", ordinal)
    attr = driver.CUdevice_attribute
    major, minor, sms = (_call(driver, "cuDeviceGetAttribute", a, device) for a in (
        attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
        attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT))
    version = _call(driver, "cuDriverGetVersion")
    info = DeviceInfo(ordinal=ordinal,
                      name=_call(driver, "cuDeviceGetName", 256, device).split(b"\0", 1)[0].decode(),
                      cap=f"sm_{major}{minor}", total_memory=int(_call(driver, "cuDeviceTotalMem", device)),
                      multiprocessors=sms, driver_version=f"{version // 1000}.{version % 1000 // 10}")
    context = _call(driver, "cuDevicePrimaryCtxRetain", device)
    return _Session(driver, device, context, info, os.getpid())


def _current() -> _Session:
    """The process's session, opened on first use; raises CudaUnavailableError with the reason."""
    global _session
    session = _session
    if session is None:
        with _lock:
            if _session is None:
                try:
                    _session = _open_session(_import_driver())
                except CudaError as exc:  # remember why, so available() stays cheap
                    _session = str(exc) if isinstance(exc, CudaUnavailableError) else f"no CUDA device: {exc}"
            session = _session
    if isinstance(session, str):
        raise CudaUnavailableError(session)
    if session.pid != os.getpid():
        raise CudaUnavailableError(f"no CUDA device: CUDA was initialized in process {session.pid} before a "
                                   "fork, and a forked child cannot use it; start workers with 'spawn'")
    return session


def _activate() -> _Session:
    """The session, with its primary context made current on the calling thread."""
    session = _current()
    _call(session.driver, "cuCtxSetCurrent", session.context)
    return session


def available() -> bool:
    """Whether a CUDA device can be used; never raises (unavailable_reason() says why not)."""
    try:
        _current()
        return True
    except Exception:
        return False


def unavailable_reason() -> str | None:
    """Why CUDA cannot be used, or None when it can."""
    try:
        _current()
        return None
    except Exception as exc:
        return str(exc)


def driver_call(fn_name: str, *args):
    """Call cuda.bindings.driver.<fn_name> with the primary context current; CudaError on failure.

    For driver functions gpuc does not wrap (events, streams, ...); returns the call's outputs.
    """
    session = _activate()
    return _call(session.driver, fn_name, *args)


def device_info() -> DeviceInfo:
    """Name, compute capability and memory of the device gpuc uses (device 0)."""
    return _current().info


def synchronize() -> None:
    """Wait for all work on the device to finish; raises CudaError for a failed kernel."""
    session = _activate()
    _call(session.driver, "cuCtxSynchronize")


# -- device memory (used by gpuc.cuda.DeviceArray) ---------------------------------------------

def mem_alloc(nbytes: int) -> int:
    """Allocate `nbytes` of device memory; 0 bytes gives the null pointer."""
    if nbytes == 0:
        _current()
        return 0
    session = _activate()
    return int(_call(session.driver, "cuMemAlloc", nbytes))


def mem_free(ptr: int, pid: int | None = None) -> None:
    """Free device memory from mem_alloc; a no-op for the null pointer or in a forked child."""
    if ptr == 0 or (pid is not None and pid != os.getpid()):
        return
    session = _activate()
    _call(session.driver, "cuMemFree", ptr)


def memcpy_htod(dst: int, src_host: int, nbytes: int) -> None:
    if nbytes:
        _call(_activate().driver, "cuMemcpyHtoD", dst, src_host, nbytes)


def memcpy_dtoh(dst_host: int, src: int, nbytes: int) -> None:
    if nbytes:
        _call(_activate().driver, "cuMemcpyDtoH", dst_host, src, nbytes)


def memcpy_dtod(dst: int, src: int, nbytes: int) -> None:
    if nbytes:
        _call(_activate().driver, "cuMemcpyDtoD", dst, src, nbytes)


def _quietly(fn, *args) -> None:
    """Run a release function from a finalizer, where raising would only print noise."""
    try:
        fn(*args)
    except Exception:
        pass


# -- modules ----------------------------------------------------------------------------------

_LOG_BYTES = 64 * 1024


def _unload(handle, pid: int) -> None:
    if pid == os.getpid():
        _call(_activate().driver, "cuModuleUnload", handle)


class CudaModule:
    """PTX loaded into the primary context; `function` is the entry's CUfunction. Unloaded on close()/GC."""

    def __init__(self, handle, info_log: str = "") -> None:
        self.handle, self.info_log = handle, info_log
        self.entry, self.function = None, None
        self._finalizer = weakref.finalize(self, _quietly, _unload, handle, os.getpid())
        self._finalizer.atexit = False  # the driver tears the context down with the process

    @classmethod
    def from_ptx(cls, ptx: str | bytes, entry: str | None = None) -> CudaModule:
        """JIT-compile `ptx` for the device; a CudaError carries the JIT's error log."""
        session = _activate()
        driver = session.driver
        image = (ptx.encode() if isinstance(ptx, str) else bytes(ptx)).rstrip(b"\0") + b"\0"
        if b"malloc" in image:  # the module allocates in kernels
            _raise_heap(session)
        error_log, info_log = bytearray(_LOG_BYTES), bytearray(_LOG_BYTES)  # the driver writes into these
        opt = driver.CUjit_option
        options = {opt.CU_JIT_ERROR_LOG_BUFFER: error_log, opt.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES: _LOG_BYTES,
                   opt.CU_JIT_INFO_LOG_BUFFER: info_log, opt.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES: _LOG_BYTES}
        try:
            handle = _call(driver, "cuModuleLoadDataEx", image, len(options), list(options), list(options.values()))
        except CudaError as exc:
            log = _log_text(error_log)
            what = f"the PTX for {entry!r}" if entry else "the PTX"
            raise CudaError(f"could not load {what}: {exc}" + (f"\nJIT error log:\n{log}" if log else ""),
                            code=exc.code, log=log) from None
        module = cls(handle, _log_text(info_log))
        if entry is not None:
            try:
                module.function = module.get_function(entry)
            except BaseException:
                module.close()
                raise
            module.entry = entry
        return module

    def get_function(self, name: str):
        """The CUfunction for the kernel `name`."""
        try:
            return _call(_activate().driver, "cuModuleGetFunction", self.handle, name.encode())
        except CudaError as exc:
            raise CudaError(f"the module has no kernel {name!r}: {exc}", code=exc.code) from None

    def global_address(self, name: str) -> tuple[int, int]:
        """(device address, size in bytes) of the module's global `name` (cuModuleGetGlobal)."""
        try:
            address, size = _call(_activate().driver, "cuModuleGetGlobal", self.handle, name.encode())
        except CudaError as exc:
            raise CudaError(f"the module has no global {name!r}: {exc}", code=exc.code) from None
        return int(address), int(size)

    def launcher(self, signature, name: str | None = None) -> CUDALauncher:
        """A launcher for the kernel `name` (default: the entry) with the given KernelSignature (or
        its spec), whose `launch` says whether the kernel takes the launch size (%gpuc.n0..n2)."""
        function = self.function if name is None else self.get_function(name)
        if function is None:
            raise ValueError("this module was loaded without an entry; pass the kernel's name")
        return CUDALauncher(function, KernelSignature.from_spec(signature), owner=self, entry=name or self.entry)

    def close(self) -> None:
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _log_text(buffer: bytearray) -> str:
    return bytes(buffer).split(b"\0", 1)[0].decode(errors="replace").strip()


# -- launching --------------------------------------------------------------------------------

#: Dynamic shared memory a kernel gets without opting in (cuFuncSetAttribute) for more.
_DEFAULT_DYNAMIC_SHARED = 48 << 10


def launch(function, grid, block, params, *, shared_mem: int = 0, stream=None, sync: bool = True,
           cooperative: bool = False) -> None:
    """cuLaunchKernel `function` (a CUfunction) on a 3-D grid and block with marshalled `params`.

    `params` is a PackedParams (or a raw void** address, or None for a kernel without parameters).
    With `sync`, waits for the kernel, so that a failing kernel raises here rather than later.
    `cooperative` (a kernel with gpuc.grid_barrier()): cuLaunchCooperativeKernel, after checking that
    every block of the grid can be resident at once.
    """
    session = _activate()
    driver = session.driver
    address = params.address if isinstance(params, PackedParams) else (params or 0)
    wait_for_streams(getattr(params, "streams", ()))
    if shared_mem > _DEFAULT_DYNAMIC_SHARED:  # beyond 48 KiB a kernel must opt in
        attribute = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        _call(driver, "cuFuncSetAttribute", function, attribute, shared_mem)
    if cooperative:
        threads = block[0] * block[1] * block[2]
        per_sm = _call(driver, "cuOccupancyMaxActiveBlocksPerMultiprocessor", function, threads, shared_mem)
        limit = per_sm * session.info.multiprocessors
        blocks = grid[0] * grid[1] * grid[2]
        if blocks > limit:
            raise ValueError(f"a kernel with gpuc.grid_barrier() needs every block resident at once: this launch has "
                             f"{blocks} blocks of {threads} threads, and {session.info.name} holds at most {limit} "
                             f"({per_sm} per multiprocessor); launch fewer blocks (loop over the data in the kernel)")
        _call(driver, "cuLaunchCooperativeKernel", function, *grid, *block, shared_mem,
              driver.CUstream(int(stream or 0)), address)
    else:
        _call(driver, "cuLaunchKernel", function, *grid, *block, shared_mem,
              driver.CUstream(int(stream or 0)), address, 0)
    if sync:
        try:
            _call(driver, "cuCtxSynchronize")
        except CudaError as exc:
            raise CudaError(f"the kernel failed: {exc}", code=exc.code) from None


def wait_for_streams(streams) -> None:
    """Wait for foreign streams that arrays were produced on (per __cuda_array_interface__ v3).

    1 and 2 are the legacy and per-thread default streams, which gpuc's work on the legacy
    default stream is already ordered with.
    """
    for stream in streams:
        if stream is not None and stream not in (1, 2):
            driver = _activate().driver
            _call(driver, "cuStreamSynchronize", driver.CUstream(stream))


class CUDALauncher:
    """A CUfunction with its abi.KernelSignature: `launcher[n](*args)` or `launcher.launch(*args, n=n)`."""

    def __init__(self, function, signature: KernelSignature, owner=None, entry: str | None = None,
                 names=(), cooperative: bool = False, bounds: bool = False) -> None:
        if signature.launch is None:
            raise TypeError("the signature does not say whether the kernel takes the launch size: pass "
                            "KernelSignature(..., launch=\"sizes\") (it takes %gpuc.n0..n2, as kernels using "
                            "gpuc.index() do) or launch=\"none\"")
        if signature.launch not in (LAUNCH_SIZES, LAUNCH_NONE):
            raise TypeError(f"a CUDA kernel takes the launch size as parameters or not at all, not {signature.launch!r}")
        self.function, self.signature = function, signature
        self._entry = entry or ""
        self._convert = converters(signature, names, self._entry)
        self._owner = owner  # keeps the module loaded
        self.cooperative = cooperative
        #: With `bounds` (the module checks its indices: abi.BOUNDS_RECORD, a global of `owner`), each launch
        #: waits for the kernel and raises the IndexError of its first failed check (docs/debugging.md).
        self._record = owner.global_address(BOUNDS_RECORD) if bounds else None

    def launch(self, *args, n, block=None, shared_mem: int = 0, stream=None, sync: bool = True,
               whole_blocks: bool = False) -> None:
        # without the launch-size check in the kernel, surplus threads of a rounded-up grid would run
        # it; a kernel compiled for whole blocks (block=) wants them to
        config = launch_config(n, block, exact=self.signature.launch != LAUNCH_SIZES and not whole_blocks)
        params = marshal(self.signature, args, config.launch_size, self._convert, self._entry)
        if config.empty:
            return
        checked = self._record is not None
        launch(self.function, config.grid, config.block, params, shared_mem=shared_mem, stream=stream,
               sync=sync or checked, cooperative=self.cooperative)
        if checked:
            failure = read_bounds_record(*self._record)
            if failure is not None:
                raise failure

    def __getitem__(self, n):
        return lambda *args, **kwargs: self.launch(*args, n=n, **kwargs)


def read_bounds_record(address: int, size: int) -> IndexError | None:
    """The IndexError the bounds record at `address` (abi.BOUNDS_DEVICE_RECORD_WORDS words, `size` bytes) holds
    after a finished launch, the record cleared for the next; None when no check failed."""
    import numpy as np

    record = np.zeros(BOUNDS_DEVICE_RECORD_WORDS, np.int64)
    nbytes = min(size, record.nbytes)
    memcpy_dtoh(record.ctypes.data, address, nbytes)
    failure = device_error(record)
    if failure is not None:
        memcpy_htod(address, np.zeros(nbytes, np.uint8).ctypes.data, nbytes)
    return failure
