"""The OpenCL runtime: gpuc's SPIR-V kernels on OpenCL devices, through pyopencl.

`kernel[n](*args, device="opencl")` compiles the kernel for `SPIRVTarget`, builds the SPIR-V for the
device (the program's binary is kept in gpuc's disk cache, keyed by the SPIR-V and the device) and
enqueues it. The device is the first OpenCL device that takes SPIR-V; `GPUC_OPENCL_DEVICE` picks
another, by its index in `devices()` or a substring of its name.

Arrays: a device array (`to_device(a)`, a `pyopencl.array.Array`, or any object with `base_data` or
`data` a `pyopencl.Buffer`, `shape`, `dtype`, `strides` and an `offset` in bytes) is used in place; a
NumPy array is copied to the device, and copied back after the kernel if the kernel may write it (the
compiled kernel says which it may write). Launches on device arrays only are asynchronous (the queue is
in order; `synchronize()` waits, and reading an array back waits for the kernels before it).

The ICD loader: Python packages that ship an OpenCL driver (Intel's `intel-opencl-rt`) install an ICD
file under `sys.prefix/etc/OpenCL/vendors` naming the path the driver was built at, which does not
exist. Unless the user set `OCL_ICD_VENDORS` or `OCL_ICD_FILENAMES`, gpuc writes a vendors folder
naming the real libraries (those of the environment and of /etc/OpenCL/vendors) and points the loader
at it, before pyopencl is first imported.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..abi import (BOUNDS_DEVICE_RECORD_WORDS, BOUNDS_READER, DYNAMIC_SHARED_PARAMS, LAUNCH_NONE, LAUNCH_SIZES, MAX_EXTENT, ArrayParam, EntryABI,
                   KernelSignature, TupleParam, c_strides, flat_values, is_c_contiguous)
from .bounds import device_error
from .cuda_params import _dims  # launch and block sizes, read as the CUDA runtime reads them

INSTALL_HINT = ("install an OpenCL driver that takes SPIR-V and pyopencl: `pip install 'gpuc[opencl]'` brings "
                "pyopencl and Intel's OpenCL CPU runtime (intel-opencl-rt, intel-cmplr-lib-rt)")


class OpenCLError(RuntimeError):
    """An OpenCL call failed; `log` is the program's build log, when there is one."""

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


class OpenCLUnavailableError(OpenCLError):
    """There is no usable OpenCL device that takes SPIR-V; the message says why and what to install."""


class DeviceLacksError(OpenCLError):
    """The OpenCL device lacks what a kernel needs (float64, an extension, a size); the message names it."""


# -- the ICD loader ---------------------------------------------------------------------------------

_SYSTEM_VENDORS = Path("/etc/OpenCL/vendors")


def _library_of(icd: Path) -> str | None:
    """The driver library an ICD file names, found where it says or in this environment's lib folder."""
    try:
        named = icd.read_text().strip()
    except OSError:
        return None
    if not named:
        return None
    if os.path.isabs(named) and os.path.exists(named):
        return named
    for folder in (Path(sys.prefix) / "lib", Path(sys.base_prefix) / "lib"):
        candidate = folder / Path(named).name
        if candidate.exists():
            return str(candidate)
    return None if os.path.isabs(named) else named  # a bare name: the dynamic loader searches for it


def _vendors_folder(entries: dict) -> Path:
    """A folder of ICD files naming `entries`' libraries: in gpuc's cache folder, or a private temporary one."""
    from ..compiler import cache

    text = "".join(f"{name}={lib}\n" for name, lib in sorted(entries.items()))
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    for base in (cache.folder(), None):
        try:
            if base is None:
                import atexit
                import shutil
                import tempfile
                folder = Path(tempfile.mkdtemp(prefix="gpuc-opencl-vendors-"))
                atexit.register(shutil.rmtree, folder, ignore_errors=True)
            else:
                folder = base / "opencl-vendors" / digest
                folder.mkdir(parents=True, exist_ok=True)
            for name, lib in entries.items():
                path = folder / name
                if not path.exists() or path.read_text().strip() != lib:
                    path.write_text(lib + "\n")
            return folder
        except OSError:
            continue
    raise OSError("no writable folder for the OpenCL vendors list")


def prepare_loader() -> str | None:
    """Point the ICD loader at the OpenCL drivers installed in this environment (see the module doc);
    returns the vendors folder it set, or None when the user's settings or the system's stand."""
    if os.environ.get("OCL_ICD_VENDORS") or os.environ.get("OCL_ICD_FILENAMES"):
        return None
    local = Path(sys.prefix) / "etc" / "OpenCL" / "vendors"
    found = {}
    for folder in (local, _SYSTEM_VENDORS):
        if folder.is_dir():
            for icd in sorted(folder.glob("*.icd")):
                lib = _library_of(icd)
                if lib is not None and icd.name not in found:
                    found[icd.name] = lib
    shipped = local.is_dir() and any(local.glob("*.icd"))
    if not shipped or not found:
        return None  # nothing of this environment's to add: the loader reads /etc/OpenCL/vendors itself
    try:
        folder = _vendors_folder(found)
    except OSError:
        return None
    os.environ["OCL_ICD_VENDORS"] = str(folder)
    return str(folder)


# -- devices and the session ------------------------------------------------------------------------

@dataclass(frozen=True)
class DeviceInfo:
    """An OpenCL device and what it supports, as `devices()` lists it."""

    index: int  # its place in devices(): what GPUC_OPENCL_DEVICE takes
    name: str
    platform: str
    vendor: str
    version: str  # "OpenCL 3.1 ..."
    driver_version: str
    kind: str  # "cpu", "gpu", "accelerator", ...
    il_versions: tuple  # ("SPIR-V_1.0", ...)
    fp64: bool
    fp16: bool
    float_atomics: bool  # cl_ext_float_atomics
    sub_groups: bool  # cl_khr_subgroups or OpenCL 3 sub-group support
    compute_units: int
    max_work_group_size: int
    max_work_item_sizes: tuple
    local_memory: int  # bytes per work-group
    global_memory: int
    extensions: tuple

    @property
    def spirv(self) -> bool:
        """Whether the device takes SPIR-V programs (clCreateProgramWithIL)."""
        return any(v.startswith("SPIR-V") for v in self.il_versions)

    def __str__(self) -> str:
        features = [f for f, on in (("SPIR-V", self.spirv), ("fp64", self.fp64), ("fp16", self.fp16),
                                     ("float atomics", self.float_atomics), ("sub-groups", self.sub_groups)) if on]
        return (f"[{self.index}] {self.name} ({self.platform}, {self.version}, {self.compute_units} compute units): "
                + ", ".join(features))


def _import_pyopencl():
    prepare_loader()
    try:
        import pyopencl
    except ImportError as exc:
        raise OpenCLUnavailableError(f"no OpenCL device: pyopencl is not installed ({exc}); {INSTALL_HINT}") from None
    return pyopencl


def _device_infos(cl) -> list:
    try:
        platforms = cl.get_platforms()
    except cl.Error as exc:
        raise OpenCLUnavailableError(f"no OpenCL device: the ICD loader finds no OpenCL platform ({exc}); "
                                     f"{INSTALL_HINT}") from None
    out = []
    for platform in platforms:
        try:
            found = platform.get_devices()
        except cl.Error:
            continue
        for device in found:
            out.append((device, _describe(device, platform, len(out))))
    return out


def _describe(device, platform, index: int) -> DeviceInfo:
    import pyopencl as cl

    extensions = tuple(device.extensions.split())
    il = tuple(getattr(device, "il_version", "").split())
    kinds = {cl.device_type.CPU: "cpu", cl.device_type.GPU: "gpu", cl.device_type.ACCELERATOR: "accelerator"}
    kind = next((k for bit, k in kinds.items() if device.type & bit), "other")
    version = device.version
    return DeviceInfo(index=index, name=device.name.strip(), platform=platform.name.strip(),
                      vendor=device.vendor.strip(), version=version, driver_version=device.driver_version,
                      kind=kind, il_versions=il, fp64="cl_khr_fp64" in extensions,
                      fp16="cl_khr_fp16" in extensions, float_atomics="cl_ext_float_atomics" in extensions,
                      sub_groups="cl_khr_subgroups" in extensions or "cl_intel_subgroups" in extensions
                      or any(e.startswith("cl_khr_subgroup_") for e in extensions),
                      compute_units=device.max_compute_units, max_work_group_size=device.max_work_group_size,
                      max_work_item_sizes=tuple(device.max_work_item_sizes), local_memory=device.local_mem_size,
                      global_memory=device.global_mem_size, extensions=extensions)


def devices() -> list[DeviceInfo]:
    """Every OpenCL device the ICD loader finds, with what it supports (DeviceInfo.spirv: whether gpuc
    can run kernels on it). An empty list when pyopencl or every driver is missing."""
    try:
        cl = _import_pyopencl()
        return [info for _, info in _device_infos(cl)]
    except OpenCLUnavailableError:
        return []


def _choose(found: list) -> tuple:
    """The device GPUC_OPENCL_DEVICE names, else the first that takes SPIR-V."""
    wanted = os.environ.get("GPUC_OPENCL_DEVICE", "").strip()
    listing = "; ".join(str(info) for _, info in found) or "none"
    if wanted:
        if wanted.isdigit():
            picked = [pair for pair in found if pair[1].index == int(wanted)]
        else:
            picked = [pair for pair in found if wanted.lower() in pair[1].name.lower()]
        if not picked:
            raise OpenCLUnavailableError(f"GPUC_OPENCL_DEVICE={wanted!r} names no OpenCL device (an index or a "
                                         f"part of a name); the devices are: {listing}")
        device, info = picked[0]
        if not info.spirv:
            raise OpenCLUnavailableError(f"GPUC_OPENCL_DEVICE={wanted!r} picks {info.name}, which does not take "
                                         "SPIR-V programs (no IL version); pick another device")
        return device, info
    for device, info in found:
        if info.spirv:
            return device, info
    raise OpenCLUnavailableError(f"no OpenCL device takes SPIR-V (the devices found: {listing}); {INSTALL_HINT}")


class Session:
    """The device gpuc uses, with its context, an in-order queue and its built programs."""

    def __init__(self, cl, device, info: DeviceInfo) -> None:
        self.cl, self.device, self.info = cl, device, info
        self.context = cl.Context([device])
        self.queue = cl.CommandQueue(self.context, device)
        self.pid = os.getpid()
        self.programs: dict = {}  # SPIR-V digest -> built cl.Program
        self.lock = threading.Lock()


_lock = threading.Lock()
_session: Session | str | None = None


def session() -> Session:
    """The process's OpenCL session, opened on first use; OpenCLUnavailableError says why there is none."""
    global _session
    current = _session
    if current is None:
        with _lock:
            if _session is None:
                try:
                    cl = _import_pyopencl()
                    device, info = _choose(_device_infos(cl))
                    _session = Session(cl, device, info)
                except OpenCLUnavailableError as exc:
                    _session = str(exc)
            current = _session
    if isinstance(current, str):
        raise OpenCLUnavailableError(current)
    if current.pid != os.getpid():
        raise OpenCLUnavailableError(f"OpenCL was opened in process {current.pid} before a fork, and a forked child "
                                     "cannot use it; start workers with 'spawn'")
    return current


def available() -> bool:
    """Whether kernels can run on an OpenCL device; never raises (unavailable_reason() says why not)."""
    return unavailable_reason() is None


def unavailable_reason() -> str | None:
    """Why OpenCL cannot be used, or None when it can."""
    try:
        session()
        return None
    except OpenCLError as exc:
        return str(exc)


def device_info() -> DeviceInfo:
    """The device gpuc runs OpenCL kernels on."""
    return session().info


def synchronize() -> None:
    """Wait for every kernel and copy enqueued on gpuc's queue."""
    session().queue.finish()


# -- device arrays ----------------------------------------------------------------------------------

def to_device(a, dtype=None):
    """A copy of `a` (array-like) on the OpenCL device: a `pyopencl.array.Array` in gpuc's context."""
    s = session()
    host = np.ascontiguousarray(a if dtype is None else np.asarray(a, dtype=dtype))
    from pyopencl import array as cl_array
    return cl_array.to_device(s.queue, host)


def device_array(shape, dtype=np.float64):
    """An uninitialized C-contiguous device array."""
    s = session()
    from pyopencl import array as cl_array
    return cl_array.empty(s.queue, shape, np.dtype(dtype))


def zeros(shape, dtype=np.float64):
    """A device array of zeros."""
    s = session()
    from pyopencl import array as cl_array
    return cl_array.zeros(s.queue, shape, np.dtype(dtype))


def copy_to_host(a) -> np.ndarray:
    """The contents of a device array as a NumPy array (waits for the kernels writing it)."""
    get = getattr(a, "get", None)
    if get is None:
        raise TypeError(f"copy_to_host takes an OpenCL device array, not {type(a).__name__}")
    return get()


def is_device_array(value) -> bool:
    """Whether `value` is an array in OpenCL memory: a pyopencl Array, or an object carrying a pyopencl
    Buffer as `base_data` or `data` with `shape` and `dtype`."""
    if type(value) is np.ndarray or isinstance(value, np.generic) or not hasattr(value, "shape") \
            or not hasattr(value, "dtype"):  # a NumPy scalar has both (and a .data that is no buffer)
        return False
    cl = sys.modules.get("pyopencl")
    if cl is None:
        return False
    buffer = getattr(value, "base_data", None)
    if buffer is None:
        try:
            buffer = getattr(value, "data", None)
        except Exception:  # a pyopencl Array with an offset refuses .data; it has base_data
            return False
    return isinstance(buffer, cl.MemoryObjectHolder)


@dataclass(frozen=True, init=False)
class CLArray:
    """An argument's array as the launch sees it: a buffer, the first element's byte offset in it, shape,
    strides in elements, dtype. `host` is the NumPy array it was copied from (copied back when written)."""

    buffer: object
    offset: int
    shape: tuple
    strides: tuple
    dtype: np.dtype
    readonly: bool = False
    host: np.ndarray | None = None

    def __init__(self, buffer, offset: int, shape: tuple, strides: tuple, dtype: np.dtype, readonly: bool = False,
                 host: np.ndarray | None = None) -> None:
        # every launch makes one per array argument: one dict update instead of a frozen __setattr__ per field
        self.__dict__.update(buffer=buffer, offset=offset, shape=shape, strides=strides, dtype=dtype,
                             readonly=readonly, host=host)

    @property
    def ptr(self) -> int:  # what abi's converters read for pointer parameters
        return self.offset

    @property
    def c_contiguous(self) -> bool:
        return is_c_contiguous(self.shape, self.strides)


#: Device arrays' byte strides and item size -> their strides in elements (only strides that are valid).
_ELEMENT_STRIDES: dict = {}


def _device_view(obj, what: str, s: Session) -> CLArray:
    cl = s.cl
    buffer = getattr(obj, "base_data", None)
    if buffer is None:
        buffer = obj.data
    context = getattr(obj, "context", None)  # a pyopencl Array's own attribute (the buffer's costs a driver call)
    if context is None:
        context = buffer.context
    if context is not s.context and context != s.context:
        raise ValueError(f"{what} lives in another OpenCL context than gpuc's ({s.info.name}); make it with "
                         "gpuc.opencl.to_device, or in the context gpuc.opencl.session().context")
    if not isinstance(buffer, cl.MemoryObjectHolder):
        raise TypeError(f"{what} has no OpenCL buffer")
    dtype = np.dtype(obj.dtype)
    shape = tuple(map(int, obj.shape))
    byte_strides = getattr(obj, "strides", None)
    if byte_strides is None:
        strides = c_strides(shape)
    else:
        itemsize = dtype.itemsize
        strides = _ELEMENT_STRIDES.get((byte_strides, itemsize)) if type(byte_strides) is tuple else None
        if strides is None:
            strides = tuple(b // itemsize for b in byte_strides)
            if any(b % itemsize or b < 0 for b in byte_strides):
                bad = [b for b in byte_strides if b % itemsize or b < 0]
                raise ValueError(f"{what} has byte stride {bad[0]}: OpenCL device arrays need non-negative strides "
                                 f"that are multiples of the item size {itemsize}; pass a copy")
            if type(byte_strides) is tuple and len(_ELEMENT_STRIDES) < 4096:
                _ELEMENT_STRIDES[(byte_strides, itemsize)] = strides
    return CLArray(buffer, int(getattr(obj, "offset", 0) or 0), shape, strides, dtype)


# -- programs -------------------------------------------------------------------------------------

def build(spirv: bytes, name: str = "") -> object:
    """The cl.Program of `spirv` built for the device: from this process's programs, from the disk cache
    (the device's binary, keyed by the SPIR-V and the device), or built now (and stored)."""
    s = session()
    digest = hashlib.sha256(spirv).hexdigest()
    program = s.programs.get(digest)
    if program is not None:
        return program
    with s.lock:
        program = s.programs.get(digest)
        if program is None:
            program = s.programs[digest] = _build(s, spirv, digest, name)
    return program


def _binary_key(s: Session, digest: str) -> str:
    info = s.info
    text = "\0".join(("opencl-binary", digest, info.name, info.platform, info.version, info.driver_version))
    return hashlib.sha256(text.encode()).hexdigest()


def _build(s: Session, spirv: bytes, digest: str, name: str):
    from ..compiler import cache

    cl = s.cl
    key = _binary_key(s, digest) if cache.enabled() else None
    hit = cache.load(key)
    if hit is not None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", cl.CompilerWarning)
                return cl.Program(s.context, [s.device], [hit[1]]).build()
        except cl.Error:
            pass  # a binary the driver no longer takes: build from the SPIR-V
    what = f"the SPIR-V of {name!r}" if name else "the SPIR-V program"
    try:
        program = cl.Program(s.context, spirv)
    except cl.Error as exc:
        raise OpenCLError(f"{s.info.name} does not take {what}: {exc}") from None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", cl.CompilerWarning)  # the build log of a success: not the user's
            program = program.build()
    except cl.Error as exc:
        log = _build_log(program, s.device)
        raise OpenCLError(f"{s.info.name} could not build {what}: {exc}" + (f"\nbuild log:\n{log}" if log else ""),
                          log) from None
    if key is not None:
        try:
            binary = program.get_info(cl.program_info.BINARIES)[0]
            if binary:
                cache.store(key, {"device": s.info.name}, bytes(binary))
        except cl.Error:
            pass
    return program


def _build_log(program, device) -> str:
    try:
        import pyopencl as cl
        return program.get_build_info(device, cl.program_build_info.LOG).strip()
    except Exception:  # a program that never got as far as a log
        return ""


# -- launching --------------------------------------------------------------------------------------

_NUMPY_OF_LLVM = {"i1": np.uint8, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
                  "float": np.float32, "double": np.float64, "half": np.uint16}


@dataclass(frozen=True)
class _Slot:
    """How one parameter of the signature reaches the entry: an array, or `count` scalar parameters."""

    param: object
    types: tuple  # the entry's LLVM types of the parameter's scalars (an array: its shapes and strides)


def _plan(signature: KernelSignature, entry: EntryABI) -> tuple[list, bool]:
    """Match the signature's parameters to the entry's: arrays take data, shapes and strides, tuples and
    complex numbers their elements one parameter each (SPIR-V entries take no aggregates: drivers crash on
    them); returns the slots and whether the entry ends with the dynamic shared memory parameters."""
    types, names, k, slots = entry.types, entry.names, 0, []
    for param in signature.params:
        if isinstance(param, ArrayParam):
            count = 1 + 2 * param.ndim
        elif isinstance(param, TupleParam):
            count = len(_flat_types(param))
        else:
            count = 1
        if isinstance(param, ArrayParam):  # whether the kernel may write it, by its data pointer's index
            param = replace(param, written=entry.written is None or k in entry.written)
        part = types[k:k + count]
        if len(part) != count or any(t.startswith("{") or t.startswith("[") or t.startswith("<") for t in part):
            raise OpenCLError(f"@{entry.name} takes ({', '.join(types)}), which does not match its arguments "
                              f"({', '.join(map(str, signature.params))}) as gpuc's SPIR-V entries take them "
                              "(aggregates flattened); OpenCL drivers do not take aggregate kernel parameters")
        slots.append(_Slot(param, tuple(part)))
        k += count
    shared = tuple(names[k:k + 2]) == DYNAMIC_SHARED_PARAMS
    if shared:
        k += 2
    if k != len(types):
        raise OpenCLError(f"@{entry.name} takes {len(types)} parameters, but its arguments flatten to {k}")
    return slots, shared


def _arg_types(slots, dynamic_shared: bool, sizes: bool) -> list:
    """pyopencl's argument types of the entry's parameters (None: a buffer or local memory), which let it
    pack each launch's values without looking at them."""
    out = []
    for slot in slots:
        if isinstance(slot.param, ArrayParam):
            out += [None] + [np.int64] * (2 * slot.param.ndim)
        else:
            out += [_NUMPY_OF_LLVM[t] for t in slot.types]
    if dynamic_shared:
        out += [None, np.int64]
    if sizes:
        out += [np.int64] * 3
    return out


def _converters(signature: KernelSignature, slots, view, entry: EntryABI) -> list:
    """The signature's argument checks, named by the entry's parameter names (one per slot's first)."""
    names, k = [], 0
    for slot in slots:
        names.append(entry.names[k] if k < len(entry.names) else "")
        names += [""] * (len(slot.types) - 1)
        k += len(slot.types)
    # KernelSignature.converters walks names by its own flattening (a tuple is one name): give it one per slot
    out, index = [], 0
    for i, (param, slot) in enumerate(zip(signature.params, slots)):
        name = names[index].removesuffix(".data").split(".")[0] if names[index] else ""
        what = f"argument {i}" + (f" ({name})" if name else "") + f" of @{entry.name}"
        out.append(param.converter(what, view))
        index += len(slot.types)
    return out


def check_device(info: DeviceInfo, spirv: bytes, kernel) -> None:
    """A DeviceLacksError naming what the compiled kernel needs and the device lacks: float64 without
    cl_khr_fp64, float16 arithmetic without cl_khr_fp16 (read from the SPIR-V's capabilities)."""
    capabilities = _capabilities(spirv)
    name = getattr(kernel, "__qualname__", str(kernel))
    if _FLOAT64 in capabilities and not info.fp64:
        raise DeviceLacksError(f"{name} computes with float64, and {info.name} has no float64 (cl_khr_fp64); "
                               "use float32 arrays and scalars on this device")
    if _FLOAT16 in capabilities and not info.fp16:
        raise DeviceLacksError(f"{name} computes with float16, and {info.name} has no float16 arithmetic "
                               "(cl_khr_fp16); convert to float32 to compute")


_CAPABILITY, _FLOAT16, _FLOAT64 = 17, 9, 10  # OpCapability and the Float16 / Float64 capabilities


def _capabilities(spirv: bytes) -> set:
    words = np.frombuffer(spirv[:len(spirv) // 4 * 4], dtype="<u4")
    out, k = set(), 5  # the header is 5 words
    while k < len(words):
        count, opcode = int(words[k]) >> 16, int(words[k]) & 0xFFFF
        if count == 0:
            break
        if opcode == _CAPABILITY and count >= 2:
            out.add(int(words[k + 1]))
        elif opcode not in (_CAPABILITY, 10, 11, 14):  # capabilities come first, among extensions and imports
            break
        k += count
    return out


def _flat_types(param) -> list:
    if isinstance(param, TupleParam):
        out = []
        for element in param.elements:
            out += _flat_types(element)
        return out
    return [param.llvm_type]


class _BoundsReader:
    """The record of a program's bounds checks (abi.BOUNDS_RECORD, a global of the program), read and cleared
    after each launch through the program's kernel abi.BOUNDS_READER: None, or the IndexError of the launch's
    first failed check (docs/debugging.md, "Bounds checks")."""

    def __init__(self, s: Session, program) -> None:
        cl = s.cl
        try:
            room = s.device.max_global_variable_size  # OpenCL 2.0's program-scope variables
        except (cl.Error, AttributeError):
            room = 0
        if room < BOUNDS_DEVICE_RECORD_WORDS * 8:
            raise DeviceLacksError(f"bounds checks keep their record in a global variable of the program, and "
                                   f"{s.info.name} has no program-scope global variables (OpenCL 2.0); launch "
                                   "with device='cpu' to check the kernel's indices")
        self.kernel = cl.Kernel(program, BOUNDS_READER)
        self.record = np.zeros(BOUNDS_DEVICE_RECORD_WORDS, np.int64)
        self.buffer = cl.Buffer(s.context, cl.mem_flags.READ_WRITE, self.record.nbytes)
        self.kernel.set_args(self.buffer)

    def read(self, s: Session, after) -> IndexError | None:
        cl = s.cl
        done = cl.enqueue_nd_range_kernel(s.queue, self.kernel, (1,), (1,), wait_for=[after])
        cl.enqueue_copy(s.queue, self.record, self.buffer, wait_for=[done])  # blocking
        return device_error(self.record)


class OpenCLLauncher:
    """A built kernel with its signature: `launch(n, args, block=None, shared=0)`. With `bounds` (the program
    checks its indices), a launch whose check failed raises its IndexError once the arrays are copied back."""

    def __init__(self, program, entry: EntryABI, signature: KernelSignature, *, whole_blocks: bool = False,
                 name: str = "", bounds: bool = False) -> None:
        s = session()
        self.session, self.entry, self.whole_blocks = s, entry, whole_blocks
        self.bounds = _BoundsReader(s, program) if bounds else None
        self.kernel = s.cl.Kernel(program, entry.name)  # its own kernel object: programs are shared by SPIR-V
        self.signature = signature
        self.slots, self.dynamic_shared = _plan(signature, entry)
        signature = KernelSignature([slot.param for slot in self.slots], entry.launch)
        self.signature = signature
        self.checks = _converters(signature, self.slots, self._view, entry)
        self.sizes = entry.launch == LAUNCH_SIZES
        self.name = name or entry.name
        self._lock = threading.Lock()  # a kernel object's arguments are set, then it is enqueued
        self.kernel.set_arg_types(_arg_types(self.slots, self.dynamic_shared, self.sizes))
        self._program = program
        # the local memory of its shared arrays (asked before any local pointer argument is set)
        self.static_shared = int(self.kernel.get_work_group_info(s.cl.kernel_work_group_info.LOCAL_MEM_SIZE,
                                                                 s.device))

    def sub_group_size(self, block) -> int:
        """The size of the sub-groups the device runs this kernel in, in work-groups of `block` (an int or a
        tuple): what gpuc.warp_size() reads there. The driver picks it per kernel (Intel's CPU runtime: 4 to
        64 lanes, by the kernel's vector width)."""
        cl = self.session.cl
        return int(self.kernel.get_sub_group_info(self.session.device,
                                                  cl.kernel_sub_group_info.MAX_SUB_GROUP_SIZE_FOR_NDRANGE,
                                                  _dims(block, "the block size")))

    def _view(self, arg, what: str) -> CLArray:
        if type(arg) is np.ndarray:
            return _host_view(arg)
        if is_device_array(arg):
            return _device_view(arg, what, self.session)
        hint = ""
        if hasattr(arg, "__cuda_array_interface__"):
            hint = "; a CUDA array cannot be passed to an OpenCL kernel (copy it to the host first)"
        raise TypeError(f"{what} must be an array (NumPy, or an OpenCL device array), not {type(arg).__name__}{hint}")

    def launch(self, n, args, block=None, shared: int = 0) -> None:
        s, cl = self.session, self.session.cl
        if len(args) != len(self.checks):
            raise self.signature.arity_error(args, self.entry.name)
        values = [check(arg) for check, arg in zip(self.checks, args)]  # checked before anything is copied
        n, global_size, local_size = _geometry(n, block, self.whole_blocks, s.info, self.entry.launch)
        if self.dynamic_shared and shared > s.info.local_memory:
            raise DeviceLacksError(f"shared={shared} bytes of dynamic shared memory is more than {s.info.name}'s "
                                   f"local memory ({s.info.local_memory} bytes per work-group)")
        if self.static_shared + (shared if self.dynamic_shared else 0) > s.info.local_memory:
            dynamic = f" and shared={shared} bytes of dynamic shared memory" if self.dynamic_shared and shared else ""
            raise DeviceLacksError(f"@{self.entry.name}'s shared arrays take {self.static_shared} bytes{dynamic}, more "
                                   f"than {s.info.name}'s local memory ({s.info.local_memory} bytes per work-group); "
                                   "make them smaller, or share less per block")
        _check_overlaps(values, self.slots, args)
        if 0 in n:
            return
        copies = _Copies(s)
        try:
            kernel_args = []
            for slot, value in zip(self.slots, values):
                param = slot.param
                if isinstance(param, ArrayParam):
                    buffer = copies.buffer_of(value, param.written)
                    kernel_args.append(buffer)
                    kernel_args += value.shape + value.strides
                else:
                    flat = flat_values(param, value)
                    kernel_args += flat
            if self.dynamic_shared:
                kernel_args += [cl.LocalMemory(max(shared, 1)), shared]
            if self.sizes:
                kernel_args += n + (1,) * (3 - len(n))
            failure = None
            with self._lock:
                self.kernel.set_args(*kernel_args)
                event = cl.enqueue_nd_range_kernel(s.queue, self.kernel, global_size, local_size)
                if self.bounds is not None:
                    failure = self.bounds.read(s, event)
            copies.finish(event)
        except cl.Error as exc:
            raise OpenCLError(f"launching @{self.entry.name} on {s.info.name} failed: {exc}") from None
        finally:
            copies.release()
        if failure is not None:
            raise failure


def _host_view(a: np.ndarray) -> CLArray:
    """A NumPy argument as the kernel sees it: with its own strides when it is copied as the memory from its
    first element to its last (`_gapped`), else C-contiguous."""
    span = _gapped(a)
    strides = c_strides(a.shape) if span is None else span[0]
    return CLArray(None, 0, a.shape, strides, a.dtype, readonly=not a.flags.writeable, host=a)


#: A strided NumPy argument is copied with its gaps (keeping its strides, and with them what depends on them,
#: such as the order of a pairwise sum) when that is at most this many times its own size.
SPAN_FACTOR = 8


def _gapped(a: np.ndarray) -> tuple | None:
    """(element strides, elements from the first to the last) of a strided array copied with its gaps, or
    None for one copied C-contiguous: a C-contiguous one, one with a negative stride (its first element is
    not its lowest), a stride that is no multiple of the item size, or gaps too wide (SPAN_FACTOR)."""
    item = a.itemsize
    if a.flags.c_contiguous or a.size == 0 or any(st < 0 or st % item for st in a.strides):
        return None
    strides = tuple(st // item for st in a.strides)
    elements = 1 + sum((n - 1) * st for n, st in zip(a.shape, strides))
    return (strides, elements) if elements <= SPAN_FACTOR * a.size + 1024 else None


class _Copies:
    """The device buffers of one launch's NumPy arguments: copied in, copied back if written, released.
    The same array passed twice gets one buffer. A strided array is copied with its gaps where `_gapped` says
    so, and only its own elements are written back (the gaps may be other arguments' elements)."""

    def __init__(self, s: Session) -> None:
        self.s = s
        self.buffers: dict = {}  # _identity(host) -> [buffer, host, written, elements of its span or None]

    def buffer_of(self, value: CLArray, written: bool):
        if value.host is None:
            return _sub_buffer(self.s, value)
        cl, host, key = self.s.cl, value.host, _identity(value.host)
        found = self.buffers.get(key)
        if found is None:
            span = _gapped(host)
            if span is None:
                data = np.ascontiguousarray(host)
            else:
                data = np.lib.stride_tricks.as_strided(host, shape=(span[1],), strides=(host.itemsize,)).copy()
            if data.nbytes:
                buffer = cl.Buffer(self.s.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=data)
            else:  # OpenCL has no empty buffers
                buffer = cl.Buffer(self.s.context, cl.mem_flags.READ_WRITE, 1)
            found = self.buffers[key] = [buffer, host, False, None if span is None else span[1]]
        found[2] = found[2] or written
        return found[0]

    def finish(self, event) -> None:
        """Copy the written arrays back (waiting for the kernel); launches on device arrays only stay
        asynchronous."""
        cl = self.s.cl
        for buffer, host, written, span in self.buffers.values():
            if not written or host.size == 0:
                continue
            if span is not None:
                data = np.empty(span, host.dtype)
                cl.enqueue_copy(self.s.queue, data, buffer, wait_for=[event])
                host[...] = np.lib.stride_tricks.as_strided(data, shape=host.shape, strides=host.strides)
            elif host.flags.c_contiguous:
                cl.enqueue_copy(self.s.queue, host, buffer, wait_for=[event])
            else:
                data = np.empty(host.shape, host.dtype)
                cl.enqueue_copy(self.s.queue, data, buffer, wait_for=[event])
                host[...] = data

    def release(self) -> None:
        for buffer, *_ in self.buffers.values():
            buffer.release()  # the driver keeps it until the kernels using it are done
        self.buffers = {}


def _identity(a: np.ndarray) -> tuple:
    return (a.__array_interface__["data"][0], a.shape, a.strides, a.dtype.str)


def _sub_buffer(s: Session, value: CLArray):
    if value.offset == 0:
        return value.buffer
    align = max(s.device.mem_base_addr_align // 8, 1)
    if value.offset % align:
        raise ValueError(f"an OpenCL device array that starts {value.offset} bytes into its buffer: {s.info.name} "
                         f"takes views only at offsets that are multiples of {align} bytes; pass a copy "
                         "(array.copy()) or an array starting at such an offset")
    span = _span(value)
    return value.buffer.get_sub_region(value.offset, max(span, 1))


def _span(value: CLArray) -> int:
    if 0 in value.shape:
        return 0
    last = sum((extent - 1) * stride for extent, stride in zip(value.shape, value.strides))
    return (last + 1) * value.dtype.itemsize


def _check_overlaps(values, slots, args) -> None:
    """NumPy arguments are copied to the device one by one: refuse distinct ones overlapping in memory where
    the kernel writes one of them (the copies would not see each other's writes)."""
    hosts = [(k, v.host, slot.param.written) for k, (v, slot) in enumerate(zip(values, slots))
             if isinstance(slot.param, ArrayParam) and v.host is not None]
    for i in range(len(hosts)):
        for j in range(i + 1, len(hosts)):
            (a, x, wx), (b, y, wy) = hosts[i], hosts[j]
            if (wx or wy) and _identity(x) != _identity(y) and np.shares_memory(x, y):
                raise ValueError(f"arguments {a} and {b} overlap in memory and the kernel may write "
                                 f"{'argument ' + str(a if wx else b)}: an OpenCL launch copies NumPy arrays to "
                                 "the device one by one, so the copies would not see each other's writes; pass "
                                 "arrays that do not overlap, or device arrays (gpuc.opencl.to_device)")


def _geometry(n, block, whole_blocks: bool, info: DeviceInfo, launch: str) -> tuple:
    """(n, global size, local size or None) of a launch over `n`, in blocks of `block` if given."""
    n = _dims(n, "the launch size")
    if block is None:
        if whole_blocks:
            raise ValueError("a kernel compiled for whole blocks is launched with block=")
        _within_limits(n, n)
        return n, n, None
    block = _dims(block, "the block size")
    # a launch and a block of different ranks (a 2-D launch in 3-D blocks): both padded with 1s
    n, block = (dims + (1,) * (max(len(n), len(block)) - len(dims)) for dims in (n, block))
    if 0 in block:
        raise ValueError(f"block {block} has an empty dimension")
    threads = int(np.prod(block))
    if threads > info.max_work_group_size or any(b > m for b, m in zip(block, info.max_work_item_sizes)):
        raise DeviceLacksError(f"block {block} is larger than {info.name} allows: at most "
                               f"{info.max_work_group_size} work items in all, {info.max_work_item_sizes[:len(block)]} "
                               "per dimension")
    if not whole_blocks and launch == LAUNCH_NONE and any(e % b for e, b in zip(n, block)):
        raise ValueError(f"block {block} does not divide the launch size {n}, and this kernel has no launch-size "
                         "check, so the surplus work items would run it too")
    grid = tuple(-(-e // b) for e, b in zip(n, block))
    global_size = tuple(g * b for g, b in zip(grid, block))
    _within_limits(n, global_size)
    return n, global_size, block


def _within_limits(n: tuple, global_size: tuple) -> None:
    """Refuse an index space of 2**62 work items or more, as every runtime does (gpuc/abi.py: MAX_EXTENT; the
    kernels assume their indices below it, and Intel's CPU runtime crashed on such a launch)."""
    total = 1
    for extent in global_size:
        total *= extent
    if total >= MAX_EXTENT:
        whole = "" if global_size == n else f" ({global_size} in whole blocks)"
        raise ValueError(f"the launch size {n}{whole} has {total} work items; a launch may have fewer than 2**62 "
                         "in all (the product of its sizes)")


__all__ = ["CLArray", "DeviceInfo", "DeviceLacksError", "INSTALL_HINT", "OpenCLError", "OpenCLLauncher",
           "OpenCLUnavailableError", "Session", "available", "build", "copy_to_host", "device_array", "device_info",
           "devices", "is_device_array", "prepare_loader", "session", "synchronize", "to_device",
           "unavailable_reason", "zeros"]
