"""The CPU runtime: compile a job for the host, run it through the ORC LLJIT, launch kernels on threads.

A kernel job compiles (in its one driver run) to a module with a launch entry, the range wrapper
of gpuc/targets/cpu_launch.py:

    void @<entry>.range(ptr %argv, i64 %begin, i64 %end, ptr %sizes)

which runs work items `begin <= i < end` of the index space whose sizes (3 x i64) `sizes` points
to, reading the kernel's flattened arguments from `argv` (gpuc/abi.py: one 8-byte slot per LLVM
scalar). This module hands the finished module to the JIT and marshals arguments with the
kernel's `abi.KernelSignature`.

`launch` runs `[0, total)` in chunks that the calling thread and pool threads claim in turn
(gpuc/runtime/pool.py); ctypes releases the GIL during foreign calls, so chunks run in parallel.
"""

from __future__ import annotations

import ctypes
import functools
import math
import operator
import os
import struct
import threading
import weakref

import numpy as np

from ..abi import BOUNDS_RECORD, BOUNDS_RECORD_WORDS, BOUNDS_SHAPE_WORDS, INTERRUPT_FLAG, PRINT_HOOK, BLOCK_ERROR_WORDS, BLOCKS_LAUNCH_PARAM, GRID_LAUNCH_PARAM, GRID_RECORD_WORDS, MAX_EXTENT, SLOT_FORMATS, EntryABI, KernelSignature, as_signature, slot_types, written_params
from ..compiler import CompilerJob, Trace, cache, compile_module
from ..errors import CompilationError
from ..llvm import LLJIT, ArrayType, Constant, Module, capi, initialize, process_lifetime
from ..llvm import Target as LLVMTarget
from . import interrupts
from .geometry import Geometry
from .pool import run_chunks, run_phases


class JITModule:
    """A compiled job loaded into its own JIT; symbols stay valid until `close()` or until the module
    and every launcher and function taken from it are dropped.

    `signature` (an abi.KernelSignature, or its spec) is the default for `launch`. The module keeps
    no reference to its job: a kernel's launcher cache holds modules compiled from that kernel, and
    a reference back would be a cycle that keeps every dropped kernel's JIT alive until a full
    garbage collection.
    """

    def __init__(self, job: CompilerJob, signature: "KernelSignature | None" = None) -> None:
        if not job.config.target.host_executable:
            raise ValueError(f"only NativeTarget jobs for this machine (targets that are host_executable) can run "
                             f"on the CPU, not {job.config.target!r}")
        self.signature = as_signature(signature) if signature is not None else None
        # Launchers keep their module alive, not the other way round: no reference cycle, so the
        # JIT and its code are freed as soon as the last launcher (or the module) is dropped.
        self._launchers: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        #: Objects holding calls into the code (prepared launches): `close()` calls their `forget()`.
        self.holders: weakref.WeakSet = weakref.WeakSet()
        key = cache.key(job, "jit")
        hit = cache.load(key)
        if hit is not None:
            self._load_cached(job, *hit)
            return
        built = compile_module(job)
        self.entry, self.trace = built.entry, built.trace
        #: The range wrapper launches call (the driver's launch entry), None if the entry has none.
        self.launch_entry = built.launch_entry
        try:
            check_externals(built.module, job)
            #: The entry's ABI (launch form, parameter types and names, which pointers it may write),
            #: its argv slots, whether its wrapper runs whole blocks (gpuc/targets/cpu_launch.py:
            #: add_blocks_wrapper) and whether it has grid barriers (the launch then runs in phases).
            self.abi, self.slots, self.blocks, self.grid = describe_entry(built.module, self.entry, self.launch_entry)
            #: Whether the kernel checks its indices (CompilerConfig(boundscheck=True)): its record of
            #: the first failed check is defined here and read after every chunk of a launch.
            self.bounds = built.module.globals.get(BOUNDS_RECORD) is not None
            #: Whether the kernel prints (print() in a kernel or func): its PRINT_HOOK is defined here.
            self.prints = built.module.globals.get(PRINT_HOOK) is not None
            #: Whether its loops poll the process's interrupt flag (gpuc/runtime/interrupts.py).
            self.polls = built.module.globals.get(INTERRUPT_FLAG) is not None
        except BaseException:
            built.close()
            raise
        self._jit = LLJIT()
        self._define_support()
        if key is None:
            try:
                self._jit.add_module(built.module)  # consumes the module and its context
            except BaseException:
                built.close()
                self._jit.close()
                raise
            return
        # Cacheable: machine code is generated here (relocatable, for the JIT to link), stored, and
        # linked from the same bytes a later process loads.
        try:
            externals = _externals(built.module)
            with built.trace.stage("codegen"):
                code = jit_machine(job).emit(built.module, "obj", verify=False, preserve=False)
            self._jit.add_object(code)
        except BaseException:
            self._jit.close()
            raise
        finally:
            built.close()
        self.trace.cache = "miss"
        cache.store(key, {"trace": self.trace.record(), "entry": self.entry, "launch_entry": self.launch_entry,
                          "blocks": self.blocks, "bounds": self.bounds, "prints": self.prints, "polls": self.polls,
                          "grid": self.grid, "slots": list(self.slots), "externals": externals,
                          "abi": self.abi.record()},
                    code)

    def _load_cached(self, job: CompilerJob, header: dict, code: bytes) -> None:
        """Set up from a disk cache entry (see __init__ for what each attribute is)."""
        missing = [name for name in header["externals"] if not hasattr(_PROCESS, name)]
        if missing:
            _missing_externals(missing, job)
        self.entry, self.launch_entry = header["entry"], header["launch_entry"]
        self.trace = Trace.from_record(header["trace"])  # the autodiff plugin's findings included
        self.blocks, self.grid = header["blocks"], header["grid"]
        self.abi = EntryABI.from_record(header["abi"])
        self.slots = tuple(header["slots"])
        self.bounds, self.prints = header.get("bounds", False), header.get("prints", False)
        self.polls = header.get("polls", False)
        self._jit = LLJIT()
        try:
            self._define_support()
            self._jit.add_object(code)
        except BaseException:
            self._jit.close()
            raise

    def _define_support(self) -> None:
        """Define in the JIT, before the kernel's code links against them, the runtime's globals the kernel
        declares: the record bounds checks fill (abi.BOUNDS_RECORD, read through `bounds_record`), the
        function print() calls (abi.PRINT_HOOK, set to `printing.PRINT_LINE`) and the pointer to the
        interrupt flag loops poll (abi.INTERRUPT_FLAG, set to `interrupts.flag_address()`)."""
        self.bounds_record = None
        if not (self.bounds or self.prints or self.polls):
            return
        support = Module("gpuc.support")
        i64, ptr = support.context.i64, support.context.ptr()
        for wanted, name, ty in ((self.bounds, BOUNDS_RECORD, ArrayType.get(i64, BOUNDS_RECORD_WORDS)),
                                 (self.prints, PRINT_HOOK, ptr), (self.polls, INTERRUPT_FLAG, ptr)):
            if wanted:
                gv = support.add_global(ty, name)
                gv.initializer = Constant.null(ty)
                gv.alignment = 8
        self._jit.add_module(support)
        if self.bounds:
            self.bounds_record = (ctypes.c_int64 * BOUNDS_RECORD_WORDS).from_address(self._jit.lookup(BOUNDS_RECORD))
        if self.prints:
            from .printing import PRINT_LINE
            ctypes.c_void_p.from_address(self._jit.lookup(PRINT_HOOK)).value = ctypes.cast(PRINT_LINE, ctypes.c_void_p).value
        if self.polls:
            ctypes.c_void_p.from_address(self._jit.lookup(INTERRUPT_FLAG)).value = interrupts.flag_address()

    def lookup(self, name: str | None = None) -> int:
        """The address of `name` (default: the entry point)."""
        return self._jit.lookup(name or self.entry)

    def function(self, restype, *argtypes, name: str | None = None):
        """A ctypes callable for `name` (default: the entry point) with the given C signature."""
        fn = ctypes.CFUNCTYPE(restype, *argtypes)(self.lookup(name))
        fn._gpuc_owner = self  # keep the JIT (and the code) alive as long as the callable
        return fn

    def launcher(self, signature=None) -> "CPULauncher":
        """The launcher for `signature` (default: the module's), cached while it is in use."""
        signature = as_signature(signature) if signature is not None else self.signature
        if signature is None:
            raise TypeError(f"launching @{self.entry} needs its KernelSignature: pass signature=... to launch() "
                            "or to JITModule()")
        launcher = self._launchers.get(signature)
        if launcher is None:
            launcher = self._launchers[signature] = CPULauncher(self, signature)
        return launcher

    @property
    def closed(self) -> bool:
        return self._jit.closed

    @property
    def jit(self):
        """The gpuc.llvm.LLJIT holding the code (`jit.closed` once the module is closed)."""
        return self._jit

    def close(self) -> None:
        """Free the JIT and its code. Launchers taken from the module then refuse to run; ctypes
        functions from `function()` must not be called any more."""
        self._launchers.clear()
        for holder in list(self.holders):
            holder.forget()
        self._jit.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def describe_entry(module: Module, entry_name: str, launch_entry: str | None) -> tuple:
    """What a launcher needs of a finished module's kernel entry: its abi.EntryABI, its argv slots
    (LLVM scalar types), whether its launch entry runs whole blocks and whether it has grid barriers."""
    last = module.functions[launch_entry].args[3].name if launch_entry is not None else ""
    entry = module.functions[entry_name]
    written = written_params(module, entry) if launch_entry is not None else None
    abi = EntryABI.of(entry, written)
    slots = tuple(t for ty in entry.function_type.params[:len(abi.types)] for t in (slot_types(ty) or ()))
    return abi, slots, last in (BLOCKS_LAUNCH_PARAM, GRID_LAUNCH_PARAM), last == GRID_LAUNCH_PARAM


_PROCESS = ctypes.CDLL(None)


def defined_in_process(name: str) -> bool:
    """Whether this process has a symbol `name` (libc's, libm's, a library loaded globally, ...)."""
    return hasattr(_PROCESS, name)


def _externals(module: Module) -> list[str]:
    """The functions the module calls but does not define (intrinsics aside)."""
    return sorted(fn.name for fn in module.functions
                  if fn.is_declaration and fn.uses and not fn.name.startswith("llvm."))


def check_externals(module: Module, job: CompilerJob) -> None:
    """Every function the module calls but does not define must exist in this process (libc,
    libm, ...); otherwise say which, instead of the JIT's bare "failed to materialize"."""
    missing = [name for name in _externals(module) if not hasattr(_PROCESS, name)]
    if missing:
        _missing_externals(missing, job)


def _missing_externals(missing: list[str], job: CompilerJob) -> None:
    names = ", ".join(f"@{name}" for name in sorted(missing))
    raise CompilationError(f"{job.describe()} calls {names}, which nothing defines: not the module, not this "
                           "process", hint="if it is a marker, register a plugin that resolves it "
                           "(gpuc.register_plugin); otherwise load the library that defines it "
                           "(ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)) before compiling")


_machines = threading.local()


def jit_machine(job: CompilerJob):
    """The target machine that generates the JIT's machine code for `job` (relocatable, as the JIT
    links it), one per thread and configuration (machines are not thread-safe)."""
    target, level = job.config.target, job.config.opt_level
    machines = _machines.__dict__.setdefault("machines", {})
    tm = machines.get((target, level))
    if tm is None:
        initialize(target.llvm_target)
        tm = machines[(target, level)] = process_lifetime(LLVMTarget.from_triple(target.triple()).machine(
            target.cpu(), target.features(), opt_level=level, reloc=capi.LLVMRelocPIC))
    return tm


def load(job: CompilerJob, signature=None) -> JITModule:
    """Compile `job` (a NativeTarget job) and load it into a fresh JIT."""
    return JITModule(job, signature)


# -- launching ----------------------------------------------------------------------------


class HostArray:
    """A NumPy array as the ABI sees it (gpuc/abi.py: ArrayParam): strides in elements; its flags
    are read only when a check asks for them."""

    __slots__ = ("array", "ptr", "shape", "strides", "dtype")

    def __init__(self, array: np.ndarray, what: str) -> None:
        size, strides = array.itemsize, array.strides
        for stride in strides:
            if stride % size:
                raise ValueError(f"{what}: strides {strides} are not multiples of the item size {size}")
        self.array, self.ptr, self.shape, self.dtype = array, array.ctypes.data, array.shape, array.dtype
        self.strides = [stride // size for stride in strides]

    @property
    def readonly(self) -> bool:
        return not self.array.flags.writeable

    @property
    def c_contiguous(self) -> bool:
        return self.array.flags.c_contiguous


def host_array(arg, what: str) -> HostArray:
    """`arg` (a NumPy array, or a CPU array with `__dlpack__`) as an abi array view; a TypeError for anything else."""
    if type(arg) is not np.ndarray and not isinstance(arg, np.ndarray):
        if not hasattr(arg, "__dlpack__"):
            raise TypeError(f"{what} must be a numpy array, not {type(arg).__name__}")
        arg = from_dlpack(arg, what)
    return HostArray(arg, what)


#: DLPack's device type of host memory (dlpack.h: kDLCPU).
_DLPACK_CPU = 1


def from_dlpack(value, what: str) -> np.ndarray:
    """A CPU array with `__dlpack__` (a JAX array, a PyTorch tensor, ...) as a NumPy array over the same
    memory, no copy; read-only where the exporter says so (JAX arrays are)."""
    device = getattr(value, "__dlpack_device__", None)
    kind = device()[0] if device is not None else _DLPACK_CPU
    if kind != _DLPACK_CPU:
        raise TypeError(f"{what} ({type(value).__name__}) is on DLPack device {device()}, not in host memory: a "
                        "CPU launch cannot read it (GPU arrays reach CUDA launches through __cuda_array_interface__)")
    try:
        return np.from_dlpack(value)
    except (TypeError, ValueError, BufferError, RuntimeError) as e:
        raise TypeError(f"{what} ({type(value).__name__}) could not be read through DLPack: {e}") from None


def items_of(n) -> int:
    """The work items of index space `n` (an int or a tuple of ints); for anything else more than any
    limit (the launch that follows reports what is wrong with it)."""
    if n.__class__ is int:
        return n
    try:
        return math.prod(int(k) for k in n)
    except (TypeError, ValueError):
        return 1 << 62


class CPULauncher:
    """Runs a JITModule's kernel: `launcher(n, args, threads=None)`, marshalling precomputed for one
    signature (the abi.KernelSignature bound to the compiled entry)."""

    def __init__(self, module: JITModule, signature: KernelSignature) -> None:
        if module.launch_entry is None:
            raise TypeError(f"@{module.entry} cannot be launched: only void kernels (CompilerConfig(kernel=True)) "
                            "with scalar, tuple and pointer parameters get a launch wrapper")
        self.module, self.signature = module, signature.for_entry(module.abi)
        self._fn = module.function(None, ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_char_p,
                                   name=module.launch_entry)
        if module.bounds_record is not None:  # every chunk of a launch, however it is run, checks the record
            self._fn = _checking_bounds(self._fn, module.bounds_record)
        if module.polls:  # Ctrl-C reaches its loops
            self._fn = interrupts.chunk(self._fn)
        self._pack = struct.Struct("<" + "".join(SLOT_FORMATS[t] for t in module.slots)).pack
        self._converters = self.signature.flat_converters(host_array, module.abi.names, module.entry)
        #: Whether the launch entry runs whole blocks (a block kernel: gpuc/plugins/workitems.py).
        self.blocks, self.grid = module.blocks, module.grid
        #: The launch geometry checks (gpuc/runtime/geometry.py).
        self.geometry = Geometry.of(module.abi)
        #: Set on a launcher compiled without streaming stores (dispatch.launcher_for): the fewest work
        #: items from which its launches take the variant that may stream them instead.
        self.item_limit = None

    def marshal(self, args) -> bytes:
        """The argv buffer for `args` (checked against the signature)."""
        if len(args) != len(self._converters):
            raise self.signature.arity_error(args, self.module.entry)
        values: list = []
        for convert, arg in zip(self._converters, args):
            values += convert(arg)
        return self._pack(*values)

    def __call__(self, n, args, threads: int | None = None, *, apart: tuple | None = None, block=None,
                 shared: int = 0, apart_blocks: tuple = ()) -> None:
        """Run over `n`. `apart` (items along each dimension): run at once only work items at least
        that far apart, in two phases of alternate runs (see launch_in_two_phases). `block`: in whole
        blocks of that size, with `shared` bytes of dynamic shared memory each; `apart_blocks`: run at once
        only blocks that differ along every one of these dimensions (see block_phases)."""
        self.run(n, self.marshal(args), threads, apart=apart, block=block, shared=shared, apart_blocks=apart_blocks)

    def run(self, n, argv: bytes, threads: int | None = None, *, apart: tuple | None = None, block=None,
            shared: int = 0, apart_blocks: tuple = ()) -> None:
        """`__call__` with the arguments already marshalled (`marshal`, or a launch plan's)."""
        if self.module.closed:  # its code is unmapped: calling it would crash the process
            raise ValueError(f"the module of @{self.module.entry} was closed; its kernels can no longer run")
        if n.__class__ is not int:
            self.geometry.check(n, block)
        if self.blocks:
            if block is None:
                self.geometry.check(n, block)
            launch_blocks(self._fn, argv, n, block, shared, threads, grid_barriers=self.grid, apart=apart_blocks)
            return
        if apart_blocks:
            raise ValueError(f"@{self.module.entry} does not run in whole blocks: apart_blocks= has no meaning for it")
        if block is not None:  # a kernel that never reads the launch context: the whole blocks' items
            n = tuple(g * b for g, b in zip(*_grid(index_space(n), block)))
        if apart is None:
            launch_marshalled(self._fn, argv, n, threads)
        else:
            launch_in_two_phases(self._fn, argv, n, threads, apart)


def _checking_bounds(fn, record):
    """`fn` (a launch entry) raising IndexError after a call in which a bounds check failed; the
    chunk that sees it stops the launch (gpuc/runtime/pool.py), and the record is cleared for the next."""
    def run(argv, begin, end, sizes):
        fn(argv, begin, end, sizes)
        if record[0]:
            raise _bounds_error(record)
    run._gpuc_owner = fn
    return run


def _bounds_error(record) -> IndexError:
    site = ctypes.string_at(record[1]).decode() if record[1] else "?"
    dim, index, ndim = record[2], record[3], record[4]
    shape = tuple(record[5:5 + min(ndim, BOUNDS_SHAPE_WORDS)])
    shape_text = "(" + ", ".join(map(str, shape)) + ("," if ndim == 1 else "") + (", ..." if ndim > BOUNDS_SHAPE_WORDS else "") + ")"
    for k in range(BOUNDS_RECORD_WORDS):
        record[k] = 0
    where, _, what = site.partition(": ")
    return IndexError(f"{where}: index {index} is out of bounds for axis {dim} with size {shape[dim] if dim < len(shape) else '?'} "
                      f"in {what} (an array of shape {shape_text}); the launch stopped at the first work item "
                      "whose index failed its check")


def launch(module: JITModule, n, args, threads: int | None = None, *, signature=None) -> None:
    """Run the kernel of `module` for every index in `n` (an int or a tuple of up to 3 ints).

    `args` are the kernel's arguments (numpy arrays for array parameters); `signature` (default:
    the module's) says what they are. `threads` defaults to `GPUC_NUM_THREADS`, else `os.cpu_count()`.
    """
    module.launcher(signature)(n, args, threads)


# -- threads -------------------------------------------------------------------------------


def default_threads() -> int:
    env = os.environ.get("GPUC_NUM_THREADS")
    if env:
        try:
            value = int(env)
        except ValueError:
            value = 0
        if value < 1:
            raise ValueError(f"GPUC_NUM_THREADS must be a positive integer, not {env!r}")
        return value
    return os.cpu_count() or 1


#: The most work items one launch may have (the product of the index space's sizes): linear
#: work-item numbers and indices must stay far from the 64-bit limit (docs/kernel-abi.md).
MAX_WORK_ITEMS = MAX_EXTENT


def index_space(n) -> tuple[int, int, int]:
    """`n` (an int or up to 3 ints) as (n0, n1, n2), padded with 1."""
    dims = (n,) if not isinstance(n, (tuple, list)) else tuple(n)
    if not 1 <= len(dims) <= 3:
        raise ValueError(f"an index space has 1 to 3 dimensions, not {len(dims)}: {n!r}")
    dims = tuple(operator.index(d) for d in dims)
    if any(d < 0 for d in dims):
        raise ValueError(f"index space sizes must not be negative: {n!r}")
    if any(d >= MAX_EXTENT for d in dims):
        raise ValueError(f"index space sizes must be below 2**62: {n!r}")
    total = math.prod(dims)
    if total >= MAX_WORK_ITEMS:
        raise ValueError(f"the index space {n!r} has {total} work items; a launch may have fewer than "
                         "2**62 in all (the product of its sizes)")
    return dims + (1,) * (3 - len(dims))


#: With the default thread count, each thread gets at least this many work items.
MIN_ITEMS_PER_THREAD = 4096
#: A launch on k threads is cut into chunks as the threads claim them, large first and small last, each
#: lasting at most a few milliseconds (gpuc/runtime/pool.py: run_chunks). A launch with `apart=` runs
#: in up to 2 * k * CHUNKS_PER_THREAD runs (launch_in_two_phases).
CHUNKS_PER_THREAD = 8
MIN_ITEMS_PER_CHUNK = 4096  # a chunk costs a couple of microseconds: as much as ~10k cheap items
#: A launch on one thread runs in at most this many chunks, one after another, so that Ctrl-C stops it
#: between two of them.
SERIAL_CHUNKS = 64


def launch_threads(total: int, threads: int | None = None) -> int:
    """How many threads a launch of `total` work items with `threads=` runs on."""
    if threads is None:
        # Handing a chunk to a pool thread costs tens of microseconds: by default, small index
        # spaces run on the calling thread (an explicit `threads=` is always honoured).
        return max(1, min(default_threads(), total // MIN_ITEMS_PER_THREAD))
    threads = operator.index(threads)
    if threads < 1:
        raise ValueError(f"threads must be at least 1, not {threads}")
    return max(1, min(threads, total))


def _launch_shape(n, threads):
    """(the index space's sizes, its packed form, its item count, the threads to run it on)."""
    dims = index_space(n)
    total = math.prod(dims)
    return dims, struct.pack("<3q", *dims), total, launch_threads(total, threads) if total else 1


def launch_marshalled(fn, argv: bytes, n, threads: int | None = None) -> None:
    """Call a range wrapper `fn` over `n` on `threads` threads (the calling thread is one of them)."""
    if n.__class__ is int and 0 < n < _ONE_CALL and (threads is None or threads.__class__ is int and threads == 1):
        fn(argv, 0, n, _SIZES.pack(n, 1, 1))  # what the general case below does for it, sooner
        return
    if n.__class__ is int and threads.__class__ is int and 1 < threads < n < MAX_WORK_ITEMS:
        # An explicit thread count over a 1-D space: what the general case below does for it, with
        # less Python before the threads start (in a cold process, tens of microseconds).
        run_chunks(fn, argv, [0, n], _SIZES.pack(n, 1, 1), helpers=threads - 1)
        return
    _, sizes, total, threads = _launch_shape(n, threads)
    if total == 0:
        return
    if threads == 1:
        # In order, as one call would run them, but in chunks: Ctrl-C stops the launch between two
        # (Python raises KeyboardInterrupt only when a call into compiled code returns).
        chunks = min(SERIAL_CHUNKS, total // MIN_ITEMS_PER_CHUNK)
        if chunks <= 1:
            fn(argv, 0, total, sizes)
            return
        begin = 0
        for k in range(1, chunks + 1):
            end = total * k // chunks
            fn(argv, begin, end, sizes)
            begin = end
        return
    run_chunks(fn, argv, [0, total], sizes, helpers=threads - 1)


_SIZES = struct.Struct("<3q")
#: Launches of fewer work items on the default thread count run in one call on the calling thread
#: (see launch_threads and SERIAL_CHUNKS).
_ONE_CALL = 2 * max(MIN_ITEMS_PER_THREAD, MIN_ITEMS_PER_CHUNK)


def _grid(dims, block):
    """(the grid, the block) of a launch of `dims` (padded to 3) in blocks of `block` (or 1 per item)."""
    if block is None:
        return dims, (1, 1, 1)
    given = (block,) if not isinstance(block, (tuple, list)) else tuple(block)
    if not 1 <= len(given) <= 3:
        raise ValueError(f"block= has 1 to 3 dimensions, not {len(given)}: {block!r}")
    try:
        given = tuple(operator.index(b) for b in given)
    except TypeError:
        raise TypeError(f"block= is an int or a tuple of ints, not {block!r}") from None
    if any(b < 1 for b in given):
        raise ValueError(f"block sizes must be positive: {block!r}")
    block3 = given + (1,) * (3 - len(given))
    if math.prod(block3) > MAX_BLOCK_ITEMS:
        raise ValueError(f"the block {block!r} has {math.prod(block3)} work items; at most {MAX_BLOCK_ITEMS}")
    return tuple(-(-d // b) for d, b in zip(dims, block3)), block3


#: The most work items a block may have on the CPU (CUDA allows 1024).
MAX_BLOCK_ITEMS = 1 << 16
#: With the default thread count, each thread gets at least this many work items of whole blocks.
MIN_BLOCK_ITEMS_PER_THREAD = 4096


def launch_blocks(fn, argv: bytes, n, block, shared: int, threads: int | None, *, grid_barriers: bool = False,
                  apart: tuple = ()) -> None:
    """Call a block kernel's wrapper `fn` (gpuc/targets/cpu_launch.py: add_blocks_wrapper) for the
    blocks of a launch of `n` in blocks of `block` (None: one work item each), spread over threads.
    With `grid_barriers`, in phases: each runs every block up to its next grid barrier (or its end),
    the block's state kept in its grid record (gpuc/abi.py: GRID_RECORD_WORDS) until the next. With
    `apart`, blocks that do not differ along every one of its dimensions never run at once (block_phases)."""
    dims = index_space(n)
    grid, block3 = _grid(dims, block)
    blocks = math.prod(grid)
    if math.prod(dims) == 0 and block is None or blocks == 0:
        return
    record = (ctypes.c_int64 * BLOCK_ERROR_WORDS)()
    states = (ctypes.c_int64 * (GRID_RECORD_WORDS * blocks))() if grid_barriers else None
    launch = struct.pack("<3q3q3q3qqQQ", *dims, *block3, *grid, 0, 0, 0, shared, ctypes.addressof(record),
                         ctypes.addressof(states) if states is not None else 0)
    items = math.prod(block3)
    if threads is None:
        threads = max(1, min(default_threads(), blocks * items // MIN_BLOCK_ITEMS_PER_THREAD, blocks))
    else:
        threads = max(1, min(launch_threads(blocks, threads), blocks))
    try:
        while True:
            if threads == 1:  # in order, in chunks between which Ctrl-C stops the launch
                serial = max(1, min(SERIAL_CHUNKS, blocks * items // MIN_ITEMS_PER_CHUNK, blocks))
                for k in range(serial):
                    fn(argv, blocks * k // serial, blocks * (k + 1) // serial, launch)
            elif apart:
                phases, after = block_order(grid, apart, threads)
                run_phases(fn, argv, phases, launch, helpers=threads - 1, after=after)
            else:
                run_chunks(fn, argv, [0, blocks], launch, helpers=threads - 1)
            if record[0]:
                _diverged(record, grid, block3)
            if states is None or not _next_phase(states, blocks, grid):
                return
    finally:
        if states is not None:
            for b in range(blocks):
                if states[GRID_RECORD_WORDS * b]:
                    _LIBC.free(ctypes.c_void_p(states[GRID_RECORD_WORDS * b]))


_LIBC = ctypes.CDLL(None)


@functools.lru_cache(maxsize=16)
def block_phases(grid, apart, threads: int) -> list:
    """The blocks of `grid` (their linear numbers, x fastest) in phases, each a list of (begin, end) runs of
    them, such that any two blocks of one phase differ along every dimension in `apart` (a block adjoint's
    blocks that may add into one element of a shadow otherwise: gpuc.adjoint's blockwise schedule). Phases
    are keyed by the other dimensions' coordinates and, where `apart` has several, by the sums of the first
    one's coordinate with each other's, modulo the largest of their extents (a Latin square: two blocks
    with one such key and one coordinate alike are alike in every one). Each phase's runs are about a
    quarter of a thread's share of it. (Kept for the next launch of the same grid: the caller must not
    change the lists.)"""
    ids = np.arange(math.prod(grid), dtype=np.int64)
    coords = (ids % grid[0], ids // grid[0] % grid[1], ids // (grid[0] * grid[1]))
    dims = sorted(apart)
    modulus = max(grid[d] for d in dims)
    key = np.zeros_like(ids)
    for d in dims[1:]:
        key = key * modulus + (coords[dims[0]] + coords[d]) % modulus
    for d in range(3):
        if d not in dims:
            key = key * grid[d] + coords[d]
    order = np.argsort(key, kind="stable")
    cuts = np.flatnonzero(np.diff(key[order])) + 1
    phases = []
    for members in np.split(order, cuts):  # each in increasing order (a stable sort of increasing numbers)
        size = max(1, -(-len(members) // (4 * threads)))
        # runs of consecutive numbers, each cut into pieces of at most `size`
        starts = np.flatnonzero(np.diff(members, prepend=-2) != 1)
        ends = np.append(starts[1:], len(members))
        runs = []
        for a, b in zip(starts.tolist(), ends.tolist()):
            first = int(members[a])
            runs += [(first + k, first + min(k + size, b - a)) for k in range(0, b - a, size)]
        phases.append(runs)
    return phases


@functools.lru_cache(maxsize=16)
def block_order(grid, apart, threads: int) -> tuple:
    """(block_phases' phases, and per run of them, in order, the earlier runs it must follow): for each
    dimension in `apart` and each coordinate along it of the run's blocks, the last earlier run with a block
    at that coordinate. Only blocks alike along such a dimension add into one element of a shadow, so these
    runs alone keep every element's adds in the phases' order (the same bits), while a run whose own
    predecessors have ended starts before the rest of the phase before it has (run_phases' `after`)."""
    phases = block_phases(grid, apart, threads)
    strides = (1, grid[0], grid[0] * grid[1])
    last, after, k = {}, [], 0
    for phase in phases:
        for begin, end in phase:
            keys = {(d, b // strides[d] % grid[d]) for b in range(begin, end) for d in apart}
            after.append(sorted({last[key] for key in keys if key in last}))
            for key in keys:  # the runs of one phase share none (their blocks differ along every one)
                last[key] = k
            k += 1
    return phases, after


def _next_phase(states, blocks: int, grid) -> bool:
    """Whether blocks wait at a grid barrier (all at the same one: else a KernelError)."""
    waiting = {}
    for b in range(blocks):
        site = states[GRID_RECORD_WORDS * b + 1]
        if site > 0 and site not in waiting:
            waiting[site] = b
    if len(waiting) > 1:
        from ..errors import KernelError
        (a, first), (_, second) = list(waiting.items())[:2]

        def described(b):
            where = ctypes.string_at(states[GRID_RECORD_WORDS * b + 2]).decode()
            return f"block {(b % grid[0], b // grid[0] % grid[1], b // (grid[0] * grid[1]))} at {where}"
        raise KernelError(f"blocks arrived at different grid barriers: {described(first)}, {described(second)}; "
                          "every block must reach the same grid barriers in the same order (a block whose work "
                          "items all returned counts as arrived)")
    return bool(waiting)


def _diverged(record, grid, block3) -> None:
    from ..errors import KernelError

    if record[0] == 2:  # gpuc/plugins/workitems.py: OUT_OF_MEMORY
        raise MemoryError(f"a block of this launch needs {record[2]:,} bytes of scratch memory (values kept per "
                          "work item across barriers, local arrays, shared memory), which malloc could not give; "
                          "use smaller blocks, smaller arrays or less dynamic shared memory (shared=)")

    def item(linear):
        x, rest = linear % block3[0], linear // block3[0]
        return (x, rest % block3[1], rest // block3[1])

    def site(address):
        return ctypes.string_at(address).decode() if address else "a return"

    linear = record[1]
    where = (linear % grid[0], linear // grid[0] % grid[1], linear // (grid[0] * grid[1]))
    a, b = item(record[2]), item(record[3])
    raise KernelError(f"work items of block {where} arrived at different barriers: thread {a} at {site(record[4])}, "
                      f"thread {b} at {site(record[5])}; every work item of a block must reach the same barriers "
                      "in the same order (a work item that returns counts as arrived)")


def launch_in_two_phases(fn, argv: bytes, n, threads: int | None, apart: tuple) -> None:
    """Like launch_marshalled, but work items whose indices differ by at most `apart[d]` along every
    dimension d never run at once: the linear index space is cut into runs longer than twice the
    farthest such pair, the even runs first (in parallel), each odd run once the two even runs beside
    it have ended (the only ones it can meet): no thread waits for the whole first phase."""
    (n0, n1, _), sizes, total, threads = _launch_shape(n, threads)
    if total == 0:
        return
    span = 2 * (apart[0] + n0 * apart[1] + n0 * n1 * apart[2]) + 1  # runs at least this long never meet
    runs = min(2 * threads * CHUNKS_PER_THREAD, total // span)
    runs -= runs % 2
    if threads == 1 or runs < 2:
        fn(argv, 0, total, sizes)
        return
    phases, after = _alternate_runs(total, runs)
    run_phases(fn, argv, phases, sizes, helpers=min(threads, runs // 2) - 1, after=after)


@functools.lru_cache(maxsize=16)
def _alternate_runs(total: int, runs: int) -> tuple:
    """(the two phases of `runs` alternate runs over `total` items, the runs each odd one follows: its two
    neighbours), the same lists for the same launch shape, so that the scheduler's tables built for them
    are found again (pool._runs_table)."""
    bounds = [total * k // runs for k in range(runs + 1)]
    phases = [[(bounds[k], bounds[k + 1]) for k in range(phase, runs, 2)] for phase in (0, 1)]
    half = runs // 2
    # even run 2m is run m of the first phase; odd run 2m + 1 (half + m) follows even runs 2m and 2m + 2
    after = [[] for _ in range(half)] + [[m] + ([m + 1] if m + 1 < half else []) for m in range(half)]
    return phases, after
