"""The CPU runtime: compile a job for the host, run it through the ORC LLJIT, launch kernels on threads.

A kernel job (`CompilerConfig(kernel=True)`, or any entry the context plugin gave a `ptr %gpuc.ctx`)
gets a generated wrapper in its module, before the module goes to the JIT:

    void @<entry>.range(ptr %argv, i64 %begin, i64 %end, ptr %ndrange)

It runs work items `begin <= i < end` of the index space `ndrange` (3 x i64). A linear index
maps to (index0, index1, index2) in row-major order with dimension 0 fastest:
`i = index0 + n0 * (index1 + n1 * index2)`, so consecutive items walk dimension 0 and a chunk
of linear indices is a run of rows. `argv` holds one 8-byte slot per scalar the kernel takes
(docs/kernel-abi.md flattening: an array is its data pointer, shapes and strides; a tuple its
elements), the value itself in the slot's low bytes (`i1` as a byte 0/1; see cpu_params.py).
The wrapper loads them once, then loops over rows and, within a row, over index0 calling the kernel, which is marked `alwaysinline` so
that LLVM inlines it, promotes the context to registers and can vectorize the inner loop.

`launch` splits `[0, total)` into chunks that the calling thread and pool threads take in turn
(gpuc/runtime/pool.py); ctypes releases the GIL during foreign calls, so chunks run in parallel.
"""

from __future__ import annotations

import ctypes
import operator
import os
import struct
import math
import weakref
from dataclasses import dataclass

from ..compiler import CompilerJob, compile_module
from ..errors import CompilationError
from ..llvm import LLJIT, Builder, Constant, ConstantInt, Function, FunctionType, Module, StructType, run_passes
from ..abi import MAX_EXTENT, context_type, has_context_param
from ..targets import NativeTarget
from .cpu_params import SLOT_FORMATS, KernelSignature, as_signature, marshallers, slot_types
from .pool import run_chunks
from .written import written_params


class JITModule:
    """A compiled job loaded into its own JIT; symbols stay valid until `close()` or until the module
    and every launcher and function taken from it are dropped.

    `signature` (a KernelSignature) is the default for `launch`. The module keeps no reference to
    its job: a kernel's launcher cache holds modules compiled from that kernel, and a reference
    back would be a cycle that keeps every dropped kernel's JIT alive until a full garbage collection.
    """

    def __init__(self, job: CompilerJob, signature: "KernelSignature | None" = None) -> None:
        if not isinstance(job.config.target, NativeTarget):
            raise ValueError(f"only NativeTarget jobs can run on the CPU, not {job.config.target!r}")
        self.signature = as_signature(signature) if signature is not None else None
        # Launchers keep their module alive, not the other way round: no reference cycle, so the
        # JIT and its code are freed as soon as the last launcher (or the module) is dropped.
        self._launchers: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        built = compile_module(job)
        self.entry, self.trace = built.entry, built.trace
        try:
            _check_externals(built.module, job)
            entry = built.module.functions[self.entry]
            self.has_context = has_context_param(entry)
            types = entry.function_type.params[:-1] if self.has_context else entry.function_type.params
            #: The LLVM types of the kernel's parameters (without the context), as LLVM prints them.
            self.params = tuple(str(t) for t in types)
            #: Their names (for messages), and the indices of pointer parameters the kernel may write.
            self.param_names = tuple(arg.name for arg in entry.args[:len(types)])
            self.written, self.slots = frozenset(), ()
            slots = [slot_types(t) for t in types]
            self.range_name = None
            if (job.config.kernel or self.has_context) and str(entry.return_type) == "void" \
                    and all(s is not None for s in slots):
                self.slots = tuple(t for s in slots for t in s)  # the argv slots
                self.written = written_params(built.module, entry)
                tm = job.config.target.cached_target_machine(job.config.opt_level)
                self.range_name = add_range_wrapper(built.module, entry, self.has_context)
                pipeline = "always-inline"
                if job.config.opt_level:  # the target's own pipeline, as the compile used
                    segments = job.config.target.pipeline_segments(job.config.opt_level)
                    pipeline = ",".join(segments[name] for name in ("simplify", "optimize", "cleanup"))
                run_passes(built.module, pipeline, tm)
        except BaseException:
            built.close()
            raise
        self._jit = LLJIT()
        try:
            self._jit.add_module(built.module)  # consumes the module and its context
        except BaseException:
            built.close()
            self._jit.close()
            raise

    def lookup(self, name: str | None = None) -> int:
        """The address of `name` (default: the entry point)."""
        return self._jit.lookup(name or self.entry)

    def function(self, restype, *argtypes, name: str | None = None):
        """A ctypes callable for `name` (default: the entry point) with the given C signature."""
        fn = ctypes.CFUNCTYPE(restype, *argtypes)(self.lookup(name))
        fn._gpuc_owner = self  # keep the JIT (and the code) alive as long as the callable
        return fn

    def kernel(self, signature=None) -> "Kernel":
        """The launcher for `signature` (default: the module's), cached while it is in use."""
        signature = as_signature(signature) if signature is not None else self.signature
        if signature is None:
            raise TypeError(f"launching @{self.entry} needs its KernelSignature: pass signature=... to launch() "
                            "or to JITModule()")
        launcher = self._launchers.get(signature)
        if launcher is None:
            launcher = self._launchers[signature] = Kernel(self, signature)
        return launcher

    @property
    def closed(self) -> bool:
        return self._jit.closed

    def close(self) -> None:
        """Free the JIT and its code. Launchers taken from the module then refuse to run; ctypes
        functions from `function()` must not be called any more."""
        self._launchers.clear()
        self._jit.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_PROCESS = ctypes.CDLL(None)


def _check_externals(module: Module, job: CompilerJob) -> None:
    """Every function the module calls but does not define must exist in this process (libc,
    libm, ...); otherwise say which, instead of the JIT's bare "failed to materialize"."""
    missing = []
    for fn in module.functions:
        if fn.is_declaration and fn.uses and not fn.name.startswith("llvm."):
            try:
                getattr(_PROCESS, fn.name)
            except AttributeError:
                missing.append(fn.name)
    if missing:
        names = ", ".join(f"@{name}" for name in sorted(missing))
        raise CompilationError(f"{job.describe()} calls {names}, which nothing defines: not the module, not this "
                               "process", hint="if it is a marker, register a plugin that resolves it "
                               "(gpuc.register_plugin); otherwise load the library that defines it "
                               "(ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)) before compiling")


def load(job: CompilerJob, signature=None) -> JITModule:
    """Compile `job` (a NativeTarget job) and load it into a fresh JIT."""
    return JITModule(job, signature)


# -- the range wrapper -------------------------------------------------------------------------

def add_range_wrapper(module: Module, kernel: Function, with_context: bool) -> str:
    """Add `void @<kernel>.range(ptr %argv, i64 %begin, i64 %end, ptr %ndrange)` (see the module doc)."""
    llctx = module.context
    i32, i64, ptr = llctx.i32, llctx.i64, llctx.ptr()
    name = f"{kernel.name}.range"
    fn = module.add_function(name, FunctionType.get(llctx.void, [ptr, i64, i64, ptr]))
    argv, begin, end, ndrange = fn.args
    for arg, arg_name in zip(fn.args, ("argv", "begin", "end", "ndrange")):
        arg.name = arg_name
    fn.attributes.add("nounwind")
    if "noinline" not in kernel.attributes:
        kernel.attributes.add("alwaysinline")
    ctx_ty = context_type(module)
    blocks = {b: fn.append_block(b) for b in ("entry", "rows", "row", "items", "done")}

    def const(v, ty=i64):
        return ConstantInt.get(ty, v)

    def ctx_field(b, field, dim):
        return b.gep(ctx_ty, ctx, [const(0, i32), const(field, i32), const(dim, i32)])

    with Builder(llctx) as b:
        b.position_at_end(blocks["entry"])
        ctx = b.alloca(ctx_ty, "ctx")
        params = kernel.function_type.params
        slots = iter(range(1 << 62))
        args = [_load_param(b, llctx, argv, slots, ty) for ty in (params[:-1] if with_context else params)]
        n = [b.load(i64, b.gep(i64, ndrange, [const(d)]), f"n{d}", align=8) for d in range(3)]
        for d in range(3):
            b.store(n[d], ctx_field(b, 1, d), align=8)
        b.br(blocks["rows"])

        b.position_at_end(blocks["rows"])  # one row: a run of index0 at fixed (index1, index2)
        linear = b.phi(i64, [(begin, blocks["entry"])], "linear")
        b.cond_br(b.icmp("ult", linear, end), blocks["row"], blocks["done"])

        b.position_at_end(blocks["row"])
        first = b.urem(linear, n[0], "first0")
        rest = b.udiv(linear, n[0])
        b.store(b.urem(rest, n[1], "index1"), ctx_field(b, 0, 1), align=8)
        b.store(b.udiv(rest, n[1], "index2"), ctx_field(b, 0, 2), align=8)
        row_end = b.add(b.sub(linear, first), n[0])
        limit = b.select(b.icmp("ult", row_end, end), row_end, end, "limit")
        stop = b.add(first, b.sub(limit, linear), "stop0")
        b.br(blocks["items"])

        b.position_at_end(blocks["items"])
        index0 = b.phi(i64, [(first, blocks["row"])], "index0")
        b.store(index0, ctx_field(b, 0, 0), align=8)
        b.call(kernel, [*args, ctx] if with_context else args)
        following = b.nuw_add(index0, const(1))
        index0.add_incoming(following, blocks["items"])
        b.cond_br(b.icmp("ult", following, stop), blocks["items"], blocks["rows"])
        linear.add_incoming(limit, blocks["items"])

        b.position_at_end(blocks["done"])
        b.ret()
    return name


def _load_param(b: Builder, llctx, argv, slots, ty):
    """A parameter from the next argv slots: a scalar from one, a literal struct from one per element."""
    if isinstance(ty, StructType):
        value = Constant.poison(ty)
        for k, element in enumerate(ty.elements):
            value = b.insert_value(value, _load_param(b, llctx, argv, slots, element), k)
        return value
    i = next(slots)
    slot = b.gep(llctx.i8, argv, [ConstantInt.get(llctx.i64, 8 * i)], f"slot{i}")
    if str(ty) == "i1":
        return b.icmp("ne", b.load(llctx.i8, slot, align=8), ConstantInt.get(llctx.i8, 0), f"arg{i}")
    return b.load(ty, slot, f"arg{i}", align=8)


class Kernel:
    """A launcher: `kernel(n, args, threads=None)` with marshalling precomputed for one signature."""

    def __init__(self, module: JITModule, signature: KernelSignature) -> None:
        if module.range_name is None:
            raise TypeError(f"@{module.entry} cannot be launched: only void kernels (CompilerConfig(kernel=True)) "
                            "with scalar, tuple and pointer parameters get a launch wrapper")
        if signature.llvm_types() != module.params:
            raise TypeError(f"the signature {signature.params} flattens to ({', '.join(signature.llvm_types())}) "
                            f"but @{module.entry} takes ({', '.join(module.params)})")
        self.module, self.signature = module, signature
        self._fn = module.function(None, ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_char_p,
                                   name=module.range_name)
        self._pack = struct.Struct("<" + "".join(SLOT_FORMATS[t] for t in module.slots)).pack
        self._marshallers = marshallers(signature, module.written, module.param_names, module.entry)

    def marshal(self, args) -> bytes:
        """The argv buffer for `args` (checked against the signature)."""
        if len(args) != len(self._marshallers):
            raise TypeError(f"@{self.module.entry} takes {len(self._marshallers)} argument(s), got {len(args)}")
        values: list = []
        for marshal, arg in zip(self._marshallers, args):
            values += marshal(arg)
        return self._pack(*values)

    def __call__(self, n, args, threads: int | None = None) -> None:
        if self.module.closed:  # its code is unmapped: calling it would crash the process
            raise ValueError(f"the module of @{self.module.entry} was closed; its kernels can no longer run")
        launch_marshalled(self._fn, self.marshal(args), n, threads)


def launch(module: JITModule, n, args, threads: int | None = None, *, signature=None) -> None:
    """Run the kernel of `module` for every index in `n` (an int or a tuple of up to 3 ints).

    `args` are the kernel's arguments (numpy arrays for array parameters); `signature` (default:
    the module's) says what they are. `threads` defaults to `GPUC_NUM_THREADS`, else `os.cpu_count()`.
    """
    module.kernel(signature)(n, args, threads)


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


def ndrange(n) -> tuple[int, int, int]:
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
#: A launch on k threads is split into up to k * CHUNKS_PER_THREAD chunks of at least
#: MIN_ITEMS_PER_CHUNK items (but at least k chunks): threads that finish early take more, and an
#: interrupted launch stops at the next chunk boundary.
CHUNKS_PER_THREAD = 8
MIN_ITEMS_PER_CHUNK = 4096  # a chunk costs a couple of microseconds: as much as ~10k cheap items


def launch_marshalled(fn, argv: bytes, n, threads: int | None = None) -> None:
    """Call a range wrapper `fn` over `n` on `threads` threads (the calling thread is one of them)."""
    n0, n1, n2 = ndrange(n)
    total = n0 * n1 * n2
    if total == 0:
        return
    sizes = struct.pack("<3q", n0, n1, n2)
    if threads is None:
        # Handing a chunk to a pool thread costs tens of microseconds: by default, small index
        # spaces run on the calling thread (an explicit `threads=` is always honoured).
        threads = max(1, min(default_threads(), total // MIN_ITEMS_PER_THREAD))
    else:
        threads = operator.index(threads)
        if threads < 1:
            raise ValueError(f"threads must be at least 1, not {threads}")
        threads = min(threads, total)
    if threads == 1:
        fn(argv, 0, total, sizes)
        return
    chunks = max(threads, min(threads * CHUNKS_PER_THREAD, total // MIN_ITEMS_PER_CHUNK))
    bounds = [total * k // chunks for k in range(chunks + 1)]
    run_chunks(fn, argv, bounds, sizes, helpers=threads - 1)
