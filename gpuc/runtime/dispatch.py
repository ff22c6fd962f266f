"""Launching @gpuc.kernel functions: argument typing, a per-kernel cache of compiled launchers, devices.

`kernel[n](*args)` and `kernel.launch(n, *args, device=..., threads=...)` come here. The types of
the arguments pick the specialization (NumPy arrays -> Array[dtype, ndim], Python int -> int64,
float -> float64, bool -> bool, NumPy scalars -> their dtype); the device is "cuda" when an
argument lives on a GPU (`__cuda_array_interface__`), "opencl" when one is an OpenCL device array
(gpuc/runtime/opencl.py), else the default device: "cpu", or what `default_device` says. Each (types, device) pair is
compiled once per kernel, also when several threads launch a fresh kernel at once (the others
wait for that compile); a warm launch is a dictionary lookup plus argument marshalling.
"""

from __future__ import annotations

import contextvars
import sys
import threading

import numpy as np

from ..abi import BOUNDS_READER, BOUNDS_RECORD, EntryABI, KernelSignature, c_strides, written_params
from ..compiler import CompilerConfig, CompilerJob, cache, compile_module
from ..compiler.config import STREAMING_BYTES
from ..frontend.core.types import SCALARS, ArrayType, GType, ScalarType, TupleType, as_type, boolean, float64, int64
from ..targets import NativeTarget, PTXTarget, SPIRVTarget
from ..frontend.core.types import COMPLEX, ComplexType, complex128
from . import cpu, plans
from .geometry import Geometry

#: The most launch plans a kernel keeps per kind of launch (launches of further signatures take the full path).
MAX_PLANS = 8

DEVICES = ("cpu", "cuda", "opencl")
_LLVM_SCALAR = {"bool": "i1", "int32": "i32", "uint32": "i32", "int64": "i64", "uint64": "i64",
                "float32": "float", "float64": "double", "int8": "i8", "uint8": "i8", "int16": "i16",
                "uint16": "i16", "float16": "half"}
_BY_DTYPE = {np.dtype(s.name if s.name != "bool" else "bool"): s for s in SCALARS}
_BY_DTYPE.update({np.dtype(c.name): c for c in COMPLEX})  # complex numbers: NumPy's complex64/complex128
_ARRAY_TYPES: dict = {}


def typeof(value, position: int = 0) -> GType:
    """The gpuc type of a launch argument."""
    kind = type(value)
    if kind is np.ndarray:
        key = (value.dtype, value.ndim, value.flags.c_contiguous)
        found = _ARRAY_TYPES.get(key)
        if found is None:
            found = _ARRAY_TYPES[key] = _array_type(value.dtype, value.ndim, position, key[2])
        return found
    if kind is bool or kind is np.bool_:
        return boolean
    if kind is int:
        return int64
    if kind is float:
        return float64
    if kind is complex:
        return complex128
    if isinstance(value, np.generic):
        return _scalar_of(value.dtype, position)
    if kind is tuple:
        return _tuple_type(value, position)
    interface = getattr(value, "__cuda_array_interface__", None)
    if interface is None and _opencl_array(value):
        dtype, shape, strides = np.dtype(value.dtype), tuple(value.shape), getattr(value, "strides", None)
        contiguous = strides is None or tuple(strides) == c_strides(shape, dtype.itemsize)
        key = (dtype, len(shape), contiguous)  # one type object per key, as for NumPy arrays: cheap to hash
        found = _ARRAY_TYPES.get(key)
        if found is None:
            found = _ARRAY_TYPES[key] = _array_type(dtype, len(shape), position, contiguous)
        return found
    if interface is not None:
        dtype, shape, strides = np.dtype(interface["typestr"]), interface["shape"], interface.get("strides")
        contiguous = strides is None or tuple(strides) == c_strides(shape, dtype.itemsize)
        return _array_type(dtype, len(shape), position, contiguous)
    if hasattr(value, "__dlpack__"):  # a CPU array of another library: typed as the NumPy view the launch takes
        return typeof(cpu.from_dlpack(value, f"argument {position}"), position)
    raise TypeError(f"argument {position}: cannot pass a {kind.__name__} to a kernel; pass NumPy arrays "
                    "(or CPU arrays with __dlpack__, or GPU arrays), bool, int, float, NumPy scalars or tuples of scalars")


def _tuple_type(value: tuple, position: int) -> TupleType:
    elements = []
    for element in value:
        t = typeof(element, position)
        if not isinstance(t, (ScalarType, ComplexType, TupleType)):
            raise TypeError(f"argument {position}: a tuple passed to a kernel holds scalars (or tuples of "
                            f"them), not a {type(element).__name__}; pass arrays as separate arguments")
        elements.append(t)
    return TupleType(tuple(elements))


def _scalar_of(dtype: np.dtype, position: int) -> ScalarType:
    found = _BY_DTYPE.get(dtype)
    if found is None:
        kinds = {"b": 0, "i": 1, "u": 1, "f": 2, "c": 3}  # bools, integers by width (signed first), floats, complex
        names = [d.name for d in sorted({np.dtype(t.name) for t in (*SCALARS, *COMPLEX)},
                                        key=lambda d: (kinds[d.kind], d.itemsize, d.kind))]
        raise TypeError(f"argument {position}: dtype {dtype} is not supported; use {', '.join(names[:-1])} or "
                        f"{names[-1]}")
    return found


def _array_type(dtype: np.dtype, ndim: int, position: int, c_contiguous: bool) -> ArrayType:
    if not 1 <= ndim <= 3:
        raise TypeError(f"argument {position}: kernels take arrays of 1 to 3 dimensions, not {ndim}")
    return ArrayType(_scalar_of(dtype, position), ndim, "C" if c_contiguous else "A")


def signature_spec(types, *, exact: bool = False) -> list[tuple]:
    """The abi.KernelSignature spec for gpuc argument types (docs/kernel-abi.md). Scalars are
    signless LLVM types (the launch typed them already), or with `exact` their NumPy types, whose
    ranges the launch checks (a compiled library's fixed signature: -1 is no uint32)."""
    spec = []
    for i, t in enumerate(types):
        if isinstance(t, ArrayType):
            spec.append(("array", np.dtype(t.dtype.name), t.ndim) + (("C",) if t.layout == "C" else ()))
        elif isinstance(t, (ScalarType, ComplexType, TupleType)):
            spec.append(_scalar_spec(t, exact))
        else:
            raise TypeError(f"argument {i}: a kernel cannot take a {t}; pass its elements as separate arguments")
    return spec


def _scalar_spec(t, exact: bool = False) -> tuple:
    if isinstance(t, TupleType):
        return ("tuple", tuple(_scalar_spec(e, exact) for e in t.elements))
    if isinstance(t, ComplexType):
        return ("scalar", t.name)  # passed as a {re, im} struct (abi.ComplexParam)
    return ("scalar", t.name if exact else _LLVM_SCALAR[t.name])


def _opencl_array(value) -> bool:
    opencl = sys.modules.get("gpuc.runtime.opencl")  # only arrays made after pyopencl is loaded can be OpenCL's
    return opencl is not None and opencl.is_device_array(value)


def _device_of(args) -> str:
    for arg in args:
        if type(arg) is not np.ndarray:
            if hasattr(arg, "__cuda_array_interface__"):
                return "cuda"
            if _opencl_array(arg):
                return "opencl"
    return default_device.get()


#: The device launches on host arrays run on when no `device=` is given: "cpu" unless changed in a
#: context (`with using_device("opencl"): ...`, as the tests run every kernel on every device).
default_device: contextvars.ContextVar = contextvars.ContextVar("gpuc.runtime.dispatch.default_device",
                                                                 default="cpu")


class using_device:
    """`with using_device(name):` launches without `device=` on host arrays run on `name` in this context."""

    def __init__(self, device: str) -> None:
        if device not in DEVICES:
            raise ValueError(f"device must be one of {', '.join(DEVICES)}, not {device!r}")
        self.device, self._token = device, None

    def __enter__(self):
        self._token = default_device.set(self.device)
        return self

    def __exit__(self, *exc) -> None:
        default_device.reset(self._token)


def launch(kernel, n, args, *, device: str | None = None, threads: int | None = None, block=None,
           shared: int = 0) -> None:
    """Run `kernel` over the index space `n` with `args` (see the module doc); with `block`, in whole
    blocks of that size with `shared` bytes of dynamic shared memory each."""
    if shared.__class__ is not int or not 0 <= shared < _MAX_SHARED:
        shared = _shared_bytes(shared)
    record = recording.get()
    if record is not None:  # a gpuc.Tape records this launch, then runs it
        record(kernel, n, args, device=device, threads=threads, block=block, shared=shared)
        return
    launchers = kernel.__dict__.get("_gpuc_launchers")
    if launchers is not None and launchers.plans and (device or default_device.get()) == "cpu":
        # A warm CPU launch: the plan of a signature the full path below accepted before (plans.py).
        for plan in launchers.plans[block is not None]:
            if plan.launch(n, args, threads, block, shared):
                return
    launcher = launcher_for(kernel, args, device, whole_blocks=block is not None, n=n)
    launcher(n, args, threads, block=block, shared=shared)
    if isinstance(launcher, cpu.CPULauncher):
        _launchers_of(kernel).remember(launcher, args, block is not None)


#: While a gpuc.Tape records in this context (gpuc/runtime/tape.py): the function that takes `launch`'s
#: arguments and runs the launch in its place.
recording: contextvars.ContextVar = contextvars.ContextVar("gpuc.runtime.dispatch.recording", default=None)


_MAX_SHARED = 1 << 40


def _shared_bytes(shared) -> int:
    import operator
    try:
        shared = operator.index(shared)
    except TypeError:
        raise TypeError(f"shared= is a number of bytes, not {type(shared).__name__}") from None
    if not 0 <= shared < _MAX_SHARED:
        raise ValueError(f"shared= is a number of bytes (0 or more), not {shared}")
    return shared


def launcher_for(kernel, args, device: str | None = None, *, whole_blocks: bool = False, n=None):
    """The compiled launcher `kernel` runs `args` with (compiled on first use): `launcher(n, args,
    threads, block=None, shared=0)`; on the CPU a CPULauncher, whose `module.trace` is the compile's.
    `whole_blocks`: the variant launched with `block=` (CompilerConfig.whole_blocks). With the launch's
    index space `n`, a CPU launch too small to stream a store (`item_limit`) gets, unless the variant that
    may stream is compiled already, one compiled without streaming stores (`launcher.item_limit` set):
    the loops that stream cost compile time (docs/targets.md, "Streaming stores")."""
    types = tuple(typeof(a, i) for i, a in enumerate(args))
    device = _device_of(args) if device is None else device
    launchers = kernel.__dict__.get("_gpuc_launchers")
    if launchers is None:
        launchers = _launchers_of(kernel)
    key = (types, (device, "blocks") if whole_blocks else device)
    launcher = launchers.get(key)  # the variant that may stream stores: right for every launch
    if launcher is not None:
        return launcher
    if device not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(DEVICES)}, not {device!r}")
    compiler = _COMPILERS[device]
    limit = item_limit(kernel, types) if device == "cpu" else None
    if limit is not None:
        small = (types, ((device, "blocks", "small") if whole_blocks else (device, "small")))
        fits = n is not None and cpu.items_of(n) < limit
        launcher = launchers.get(small)
        if launcher is not None and (n is None or fits):  # (without `n`: whichever is compiled)
            return launcher
        if fits:
            def build():
                made = compiler(kernel, types, whole_blocks=whole_blocks, streams=False)
                made.item_limit = limit
                return made
            return launchers.compile_once(small, build)
    build = (lambda: compiler(kernel, types, whole_blocks=True)) if whole_blocks else (lambda: compiler(kernel, types))
    return launchers.compile_once(key, build)


def item_limit(kernel, types) -> int | None:
    """The fewest work items with which a CPU launch of `kernel` on arguments of `types` may stream a store:
    each item streams at most one element of each array it writes (docs/targets.md, "Streaming stores"),
    so below CompilerConfig.streaming_bytes over the arrays' bytes per item none can. None where every
    launch may stream or none may (streaming_bytes 0 or None, no arrays)."""
    threshold = (getattr(kernel, "options", None) or {}).get("streaming_bytes", STREAMING_BYTES)
    per_item = sum(max(1, t.dtype.bits // 8) for t in types if isinstance(t, ArrayType))
    if not threshold or not per_item:
        return None
    return -(-threshold // per_item)



class _Launchers(dict):
    """A kernel's compiled launchers by (types, device). Each key is compiled by one thread while
    the others launching it wait, so concurrent first launches share one compile. `plans`: the launch
    plans (gpuc/runtime/plans.py) of the CPU launches that took the full path, without and with
    `block=`, newest first, at most MAX_PLANS of each."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._key_locks: dict = {}  # key -> the lock held while that key compiles
        self.plans: tuple = ()

    def remember(self, launcher, args, whole_blocks: bool) -> None:
        """Make and keep the plan of `launcher` for arguments of the kind of `args` (just launched), unless
        it has one for them (which, then, refused these arguments: a plan made again would too)."""
        kinds = plans.kinds_of(args)
        if any(p.kinds == kinds and p.launcher is launcher for p in (self.plans or ((), ()))[whole_blocks]):
            return
        plan = plans.make_plan(launcher, args)
        if plan is None:
            return
        with self._lock:  # a new tuple: launches reading the old one on other threads are undisturbed
            both = list(self.plans) or [(), ()]
            others = [p for p in both[whole_blocks] if p.kinds != plan.kinds or p.launcher is not launcher]
            both[whole_blocks] = (plan, *others)[:MAX_PLANS]
            self.plans = tuple(both)

    def compile_once(self, key, build):
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            launcher = dict.get(self, key)
            if launcher is None:  # the first thread here, or the one before it failed: compile
                launcher = self[key] = build()
        return launcher


_LAUNCHERS_LOCK = threading.Lock()


def _launchers_of(kernel) -> _Launchers:
    with _LAUNCHERS_LOCK:
        return kernel.__dict__.setdefault("_gpuc_launchers", _Launchers())


def launch_job(kernel, types, device: str, whole_blocks: bool = False, streams: bool = True) -> CompilerJob:
    """The CompilerJob a launch of `kernel` on arguments of `types` compiles on `device` (with `whole_blocks`:
    the variant launched with `block=`; without `streams`: the variant for launches too small to stream a
    store, CompilerConfig(streaming_bytes=None)), with the kernel's decorator options
    (`@gpuc.kernel(opt_level=3)`)."""
    options = getattr(kernel, "options", None) or {}
    if device == "cpu":
        target = NativeTarget(vector_math=options.get("vector_math", True))
    elif device == "cuda":
        from . import cuda
        target = PTXTarget(cap=cuda.device_info().cap)
    elif device == "opencl":
        from . import opencl
        # Intel's CPU runtime reorders float reductions in loops (gpuc/targets/ordered_reductions.py)
        target = SPIRVTarget(ordered_reductions=opencl.device_info().kind == "cpu")
    else:
        raise ValueError(f"device must be one of {', '.join(DEVICES)}, not {device!r}")
    return CompilerJob((kernel, tuple(types)), CompilerConfig(target, kernel=True, whole_blocks=whole_blocks,
                                                              opt_level=options.get("opt_level", 2),
                                                              vectorize=options.get("vectorize", True),
                                                              streaming_bytes=options.get("streaming_bytes",
                                                                                          STREAMING_BYTES)
                                                              if streams else None,
                                                              boundscheck=options.get("boundscheck")))


def inspect(kernel, args, *, device: str | None = None, whole_blocks: bool = False):
    """`kernel.inspect(*args, ...)`: the CompileResult of what that launch runs (gpuc/frontend/core/functions.py)."""
    from ..compiler import CompileResult

    types = tuple(typeof(a, i) for i, a in enumerate(args))
    device = _device_of(args) if device is None else device
    job = launch_job(kernel, types, device, whole_blocks)
    with compile_module(job) as built:
        llvm = str(built.module)
        assembly = built.emit("asm")
        return CompileResult(assembly, built.entry, built.trace, job, built.launch_entry, built.compiled,
                             built.entries, llvm=llvm)


def _cpu_launcher(kernel, types, whole_blocks: bool = False, streams: bool = True):
    job = launch_job(kernel, types, "cpu", whole_blocks, streams)
    module = cpu.JITModule(job, signature=KernelSignature(signature_spec(types)))
    launcher = module.launcher()
    launcher.geometry.name = kernel.__qualname__
    return launcher


def _cuda_launcher(kernel, types, whole_blocks: bool = False):
    from . import cuda

    job = launch_job(kernel, types, "cuda", whole_blocks)
    key = cache.key(job, "cuda")
    hit = cache.load(key)
    if hit is not None:
        header, ptx = hit
        ptx = ptx.decode()
        abi, cooperative = header["abi"], header["cooperative"]
        entry = EntryABI.from_record(abi)
        bounds = header.get("bounds", False)
    else:
        with compile_module(job) as built:
            fn = built.module.functions[built.entry]
            entry = EntryABI.of(fn, written_params(built.module, fn))  # launch form and written arrays
            cooperative = any("grid_barrier" in g.name for g in built.module.globals)  # PTXTarget's grid barrier
            bounds = built.module.globals.get(BOUNDS_RECORD) is not None  # it checks its indices
            ptx = built.emit("asm")
        cache.store(key, {"cooperative": cooperative, "abi": entry.record(), "bounds": bounds}, ptx.encode())
    signature = KernelSignature(signature_spec(types)).for_entry(entry)
    module = cuda.CudaModule.from_ptx(ptx, entry.name)  # looks the entry up
    run = cuda.CUDALauncher(module.function, signature, owner=module, entry=entry.name, names=entry.names,
                            cooperative=cooperative, bounds=bounds)

    geometry = Geometry.of(entry, kernel.__qualname__)

    def launch(n, args, threads, block=None, shared=0):
        geometry.check(n, block)
        run.launch(*args, n=n, block=block, shared_mem=shared, whole_blocks=whole_blocks)
    launch.geometry = geometry
    return launch


def _opencl_launcher(kernel, types, whole_blocks: bool = False):
    from . import opencl

    s = opencl.session()  # a clear error, before compiling, when there is no device
    job = launch_job(kernel, types, "opencl", whole_blocks)
    key = cache.key(job, "opencl")
    hit = cache.load(key)
    if hit is not None:
        header, spirv = hit
        entry = EntryABI.from_record(header["abi"])
        bounds = header.get("bounds", False)
    else:
        with compile_module(job) as built:
            fn = built.module.functions[built.entry]
            entry = EntryABI.of(fn, written_params(built.module, fn))
            bounds = built.module.functions.get(BOUNDS_READER) is not None  # it checks its indices
            spirv = built.emit("obj")
        cache.store(key, {"abi": entry.record(), "bounds": bounds}, spirv)
    opencl.check_device(s.info, spirv, kernel)
    program = opencl.build(spirv, entry.name)
    run = opencl.OpenCLLauncher(program, entry, KernelSignature(signature_spec(types), entry.launch),
                                whole_blocks=whole_blocks, bounds=bounds)

    geometry = Geometry.of(entry, kernel.__qualname__)

    def launch(n, args, threads, block=None, shared=0):
        geometry.check(n, block)
        run.launch(n, args, block=block, shared=shared)  # the device schedules its work items: threads= is moot
    launch.opencl, launch.signature = run, run.signature  # the signature: which arrays it may write
    launch.geometry = geometry
    return launch


_COMPILERS = {"cpu": _cpu_launcher, "cuda": _cuda_launcher, "opencl": _opencl_launcher}

__all__ = ["DEVICES", "default_device", "launch", "signature_spec", "typeof", "as_type", "using_device"]
