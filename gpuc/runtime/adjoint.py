"""`gpuc.adjoint(kernel)`: the adjoint kernel of a kernel, launched like any kernel (docs/autodiff.md).

Its parameters are the primal kernel's with each float array followed by its shadow (same shape,
dtype and strides). Which arguments are shadows follows from the arguments' types, so one
adjoint object serves every signature: each layout of float arrays gets a generated kernel
whose one statement asks the frontend for the primal body and the plugin for its reverse sweep.
"""

from __future__ import annotations

import linecache
import math
import re
import threading

import numpy as np

from ..abi import adjoint_shared_bytes
from ..errors import user_facing
from ..frontend.constructs.reverse import BLOCKWISE, CONCURRENT, PARITY, SERIAL, AdjointRequest
from ..frontend.core.functions import Kernel, _NOT_FOUND
from ..frontend.core.types import ArrayType, as_type
from . import cpu
from .cpu import index_space, launch_threads
from .dispatch import _device_of, launcher_for, recording, typeof

class ShadowedKernel(Kernel):
    """A kernel derived from `primal` (a @gpuc.kernel) whose parameters are the primal's with each float array
    followed by its shadow (same shape, dtype and strides): adjoint and tangent kernels. Which arguments
    are shadows follows from their types, so one object serves every signature, each layout of float
    arrays getting a generated kernel of its own (`_kernel`)."""

    #: "adjoint" or "tangent": what it is, in names and messages
    what = ""

    def __init__(self, primal: Kernel) -> None:
        if not isinstance(primal, Kernel) or isinstance(primal, ShadowedKernel):
            derived = f"{primal.what} kernel" if isinstance(primal, ShadowedKernel) else None
            article = "an" if derived and derived[0] in "aeiou" else "a"
            raise TypeError(f"gpuc.{self.what} takes a @gpuc.kernel, not "
                            + (f"{article} {derived}" if derived else repr(primal))
                            + ("; for funcs use gpuc.grad or gpuc.vjp" if callable(primal) and not derived else ""))
        self.primal = primal
        self.options = primal.options
        self.__name__ = f"{primal.__name__}_{self.what}"
        self.__qualname__ = f"{primal.__qualname__}.{self.what}"
        self.__doc__ = f"The {self.what} kernel of {primal.__qualname__}."
        self.__module__ = primal.__module__
        self._by_layout: dict = {}
        self._lock = threading.Lock()
        code = primal.py_func.__code__  # its names without parsing its source (a cached launch parses nothing)
        self._params = list(code.co_varnames[:code.co_argcount])

    @property
    def source_info(self):
        return self.primal.source_info

    def resolve(self, name: str):
        return _NOT_FOUND

    def _checked_layout(self, args) -> tuple:
        """The layout of `args` (see _layout), each shadow checked against its array."""
        flags = self._layout([typeof(a, k) for k, a in enumerate(args)])
        for k, shadow in enumerate(flags):
            if shadow:
                _check_shadow(args[k - 1], args[k], k)
        return flags

    def _layout(self, types) -> tuple:
        """Which of the arguments (of these types) are shadows: the one after each float array."""
        flags, k, expected = [], 0, []
        for name in self._params:
            if k >= len(types):
                expected.append(f"{name} [and its shadow if a float array]")
                continue
            flags.append(False)
            t = types[k]
            k += 1
            expected.append(name)
            if isinstance(t, ArrayType) and getattr(t.dtype, "is_float", False):  # (complex arrays have none)
                flags.append(True)
                expected.append(f"{name}'s shadow")
                k += 1
        if len(flags) != len(types) or len(self._params) != sum(1 for f in flags if not f):
            raise TypeError(f"{self.__qualname__} takes {self.primal.__qualname__}'s arguments with each float "
                            f"array followed by its shadow: ({', '.join(expected)}) for the arrays given, but "
                            f"{len(types)} argument(s) were given")
        return tuple(flags)

    def _kernel(self, flags: tuple, schedule: str | None = None, spans: tuple | None = None,
                distinct: bool = False) -> Kernel:
        key = (flags, schedule, spans, distinct)
        found = self._by_layout.get(key)
        if found is None:
            with self._lock:
                found = self._by_layout.get(key)
                if found is None:
                    found = self._by_layout[key] = _generate(
                        self, flags, self._request(flags, schedule, spans, distinct), schedule, spans, distinct)
        return found

    def _request(self, flags: tuple, schedule: str | None, spans: tuple | None = None, distinct: bool = False):
        raise NotImplementedError


class AdjointKernel(ShadowedKernel):
    """The adjoint of `primal` (a @gpuc.kernel): `gpuc.adjoint(k)[n](x, dx, y, dy, a)`.

    On entry the shadow of an array the kernel writes holds the incoming gradient (the seed); after
    the launch the shadow of every array it reads has the gradient added, and the shadows of the
    elements it overwrote were consumed (zeroed before the reads' shares were added). Float scalar
    parameters are constants: pass a one-element array to get a scalar's gradient. The launch does
    what the primal does besides; with `primal_writes=False`, the arrays the kernel only stores into
    keep what they hold (see `adjoint`)."""

    what = "adjoint"

    def __init__(self, primal: Kernel, primal_writes: bool = True) -> None:
        super().__init__(primal)
        self.adjoint_of = primal
        self.primal_writes = primal_writes

    def __reduce__(self):
        # the primal travels (by reference or by value); the adjoint is made again from it
        return (adjoint, (self.primal,)) if self.primal_writes else (_adjoint_keeping_outputs, (self.primal,))

    def _request(self, flags: tuple, schedule: str | None, spans: tuple | None = None, distinct: bool = False):
        return AdjointRequest(self.primal, flags, schedule, spans, distinct, self.primal_writes)

    @user_facing
    def launch(self, n, *args, device: str | None = None, threads: int | None = None, block=None,
               shared: int = 0) -> None:
        record = recording.get()
        if record is not None:  # a gpuc.Tape refuses it (its backward launches adjoints), located
            record(self, n, args, device=device, threads=threads, block=block, shared=shared)
            return
        self._launch(n, args, device, threads, block, shared)

    def _launch(self, n, args, device, threads, block, shared, before=None) -> None:
        """`launch`, and with `before` (CPU launches), `before(kept)` right before the adjoint runs, `kept` the
        names of the parameters whose arrays it leaves as they are (`primal_writes=False`: those the compiled
        kernel only stores into; else none): gpuc.Tape puts back what the others held before it runs."""
        flags = self._checked_layout(args)
        distinct = _distinct_blocks(args, block, shared)
        if not self.primal_writes and not (distinct or _distinct(args)):
            raise ValueError(f"gpuc.adjoint({self.primal.__qualname__}, primal_writes=False) needs array arguments "
                             "that do not overlap in memory (an array passed twice, or views of one buffer that "
                             "share elements): the arrays the kernel only writes must not be arrays it reads; "
                             "pass copies, or use gpuc.adjoint(kernel), which redoes the primal's writes")
        device = device or _device_of(args)
        # the primal's dynamic shared memory, then its shadow (gpuc.abi.adjoint_shared_bytes)
        if isinstance(shared, (int, np.integer)) and not isinstance(shared, bool) and shared > 0:
            shared = adjoint_shared_bytes(int(shared))
        blocks = {"block": block, "shared": shared} if block is not None or shared else {}
        dims = index_space(n)
        if device != "cpu":
            if before is not None:
                raise ValueError(f"the hook before an adjoint runs is for CPU launches, not {device!r} ones")
            self._kernel(flags, CONCURRENT, spans_of(dims), distinct).launch(n, *args, device=device, threads=threads,
                                                                             **blocks)
        elif launch_threads(math.prod(dims), threads) == 1:
            # Work items run one after another: adds into shadows they share need no atomics.
            kernel = self._kernel(flags, SERIAL, None, distinct)
            _before(before, kernel, args, n, block is not None)
            kernel.launch(n, *args, device=device, threads=threads, **blocks)
        elif blocks:
            self._launch_blocks(flags, n, args, dims, threads, block, shared, distinct, before)
        else:
            # Work items whose elements may meet (a stencil's neighbours) never run at once: only the
            # arrays any item may touch anywhere (a gather's) need atomic adds.
            launcher = launcher_for(self._kernel(flags, PARITY, spans_of(dims), distinct), args, device, n=n)
            if before is not None:
                before(_kept(launcher))
            launcher(n, args, threads, apart=_apart(launcher, dims))

    def _launch_blocks(self, flags, n, args, dims, threads, block, shared, distinct, before=None) -> None:
        """Blocks at once on several CPU threads, each on a thread of its own: in phases of blocks that differ
        along every dimension the plugin asks (cpu.block_phases), so that adds into arrays one coordinate of
        which is a work item's index along such a dimension (a tiled kernel's) need no atomics, where each
        phase keeps the threads busy; else all at once, every add that items may share atomic."""
        spans = spans_of(dims)
        grid, _ = cpu._grid(dims, block)
        if max(grid) >= BLOCKS_PER_THREAD_IN_A_PHASE * cpu.launch_threads(math.prod(grid), threads):
            # (else no phase could keep the threads busy)
            launcher = launcher_for(self._kernel(flags, BLOCKWISE, spans, distinct), args, "cpu", whole_blocks=True,
                                    n=n)
            apart = tuple(_detail(launcher, "blocks apart") or ())
            if launcher.blocks and (not apart or _busy_phases(grid, apart, threads)):
                if before is not None:
                    before(_kept(launcher))
                launcher(n, args, threads, block=block, shared=shared, apart_blocks=apart)
                return
        kernel = self._kernel(flags, CONCURRENT, spans, distinct)
        _before(before, kernel, args, n, block is not None)
        kernel.launch(n, *args, device="cpu", threads=threads, block=block, shared=shared)

    @user_facing
    def inspect(self, *args, device: str | None = None, block=None, shared: int = 0, threads: int | None = None):
        """The CompileResult of the adjoint these arguments compile (Kernel.inspect): with `threads=1` on the
        CPU the one a launch on one thread runs, whose adds where work items meet are plain (they run one
        after another); else the one for work items that run at once (GPUs; CPU launches on several threads
        run it, or a variant needing fewer atomics that the launch picks by the index space)."""
        flags = self._checked_layout(args)
        device = device or _device_of(args)
        schedule = SERIAL if device == "cpu" and threads == 1 else CONCURRENT
        return self._kernel(flags, schedule, None, _distinct_blocks(args, block, shared)).inspect(
            *args, device=device, block=block, shared=shared, threads=threads)

    def cpu_launcher(self, n, args, threads: int | None = None) -> tuple:
        """(the CPU launcher, its `apart=`) that `launch(n, *args, threads=threads)` runs a launch with, for
        callers that marshal arguments themselves (gpuc.jax hands the launcher XLA's buffers)."""
        flags = self._layout([typeof(a, k) for k, a in enumerate(args)])
        dims = index_space(n)
        if launch_threads(math.prod(dims), threads) == 1:
            return launcher_for(self._kernel(flags, SERIAL), args, "cpu"), None
        launcher = launcher_for(self._kernel(flags, PARITY, spans_of(dims)), args, "cpu")
        return launcher, _apart(launcher, dims)

    def __gpuc_source__(self, argtypes):
        """The adjoint compiled on its own (`gpuc.code_llvm(gpuc.adjoint(k), types)`) is the one for
        concurrent work items, as GPUs and multi-threaded CPU launches run it."""
        types = [as_type(t) for t in (argtypes if isinstance(argtypes, (tuple, list)) else (argtypes,))]
        return self._kernel(self._layout(types), CONCURRENT).__gpuc_source__(tuple(types))


def spans_of(dims) -> tuple:
    """The dimensions along which an index space (as index_space gives it) has more than one work item: the
    adjoint of a launch over it is compiled for them (AdjointRequest.spans)."""
    return tuple(d for d, extent in enumerate(dims) if extent > 1)


def _apart(launcher, dims) -> tuple:
    """How far apart (in items, per dimension) work items of a launch over `dims` must be to run at once, as
    the autodiff plugin found it for the compiled adjoint: its reach, and where arrays are partitioned by the
    index along a dimension (its "slab"), every item of a slab (along the dimensions before it)."""
    found = _detail(launcher, "reach")
    apart = [0, 0, 0] if found is None else list(found)
    slab = _detail(launcher, "slab")
    for d in range(slab or 0):
        apart[d] = max(apart[d], dims[d] - 1)
    return tuple(apart)


def _kept(launcher) -> frozenset:
    """The names of the parameters whose arrays the compiled adjoint leaves as they are."""
    return frozenset(_detail(launcher, "outputs kept") or ())


def _before(before, kernel, args, n, whole_blocks: bool) -> None:
    """Call `before` (see AdjointKernel._launch) with what `kernel`'s CPU launch over `n` on `args` keeps: from
    the launcher that launch takes (dispatch.launch's)."""
    if before is not None:
        before(_kept(launcher_for(kernel, args, "cpu", whole_blocks=whole_blocks, n=n)))


def _detail(launcher, name: str):
    """What the autodiff plugin recorded as `name` in the trace of the compiled adjoint, or None."""
    for record in reversed(launcher.module.trace.transformations):
        found = dict(record.details).get(name)
        if found is not None:
            return found
    return None


#: The blockwise schedule is taken where its phases hold at least this many blocks per thread, on average.
BLOCKS_PER_THREAD_IN_A_PHASE = 2


#: ... and where its runs are not too many: blocks that must differ along y or z are never consecutive, so
#: each run is one block (the schedule's table, cpu.block_phases, has a row per run).
MAX_BLOCKWISE_RUNS = 1 << 16


def _busy_phases(grid, apart, threads) -> bool:
    """Whether the blockwise phases of a launch of these blocks keep `threads` busy (and are not too many)."""
    if tuple(apart) != (0,) and math.prod(grid) > MAX_BLOCKWISE_RUNS:
        return False
    modulus = max(grid[d] for d in apart)
    phases = math.prod(grid[d] for d in range(3) if d not in apart) * modulus ** (len(apart) - 1)
    workers = cpu.launch_threads(math.prod(grid), threads)
    return math.prod(grid) >= BLOCKS_PER_THREAD_IN_A_PHASE * workers * phases


def _generate(derived: ShadowedKernel, flags: tuple, request, schedule: str | None, spans: tuple | None = None,
              distinct: bool = False) -> Kernel:
    """The kernel of one layout: `def k_<what>(x, x_shadow, ...): request(x, x_shadow, ...)`."""
    names, primal_names = [], iter(derived._params)
    last = None
    for shadow in flags:
        if shadow:
            names.append(_fresh(f"{last}_shadow", derived._params + names))
        else:
            last = next(primal_names)
            names.append(last)
    name = re.sub(r"\W", "_", f"{derived.primal.__name__}_{derived.what}")
    lines = [f"def {name}({', '.join(names)}):\n", f"    request({', '.join(names)})\n"]
    # Named by what it is made from, the same in every process: the disk cache keys it by its source.
    layout = "".join("s" if shadow else "p" for shadow in flags)
    how = (f", {schedule}" if schedule else "") + ("" if spans is None else f", spans {','.join(map(str, spans))}") \
        + (", distinct" if distinct else "") + ("" if getattr(derived, "primal_writes", True) else ", outputs kept")
    filename = f"<gpuc.{derived.what} of {derived.primal.__module__}.{derived.primal.__qualname__}, {layout}{how}>"
    linecache.cache[filename] = (sum(map(len, lines)), None, lines, filename)
    namespace = {"request": request}
    exec(compile("".join(lines), filename, "exec"), namespace)
    generated = Kernel(namespace[name], derived.primal.options)  # compiled as the primal is (opt_level, ...)
    generated.__qualname__ = derived.__qualname__
    generated.adjoint_of = derived.primal  # errors in its derivative point at the primal kernel
    return generated


def _fresh(name: str, taken) -> str:
    while name in taken:
        name += "_"
    return name


def _distinct_blocks(args, block, shared) -> bool:
    """`_distinct(args)` for a launch in blocks (`block=` or `shared=`), else False: only a kernel with shared
    memory has tiles its reverse may load again (restore.py), and other launches save the check (about 2.5 us
    an array)."""
    return (block is not None or bool(shared)) and _distinct(args)


def _distinct(args) -> bool:
    """Whether no two array arguments overlap in memory (an array passed twice overlaps itself): then an
    array the kernel never writes holds the same values throughout the adjoint's launch, which may load it
    again in its reverse sweep instead of keeping what it read (gpuc.abi.ADJOINT_DISTINCT_ATTRIBUTE).
    Arguments whose memory is not known (an OpenCL buffer) make it False."""
    spans = []
    for arg in args:
        if isinstance(arg, (bool, int, float, complex, np.generic)):
            continue
        span = _span(arg)
        if span is None:
            return False
        if span[0] < span[1]:
            spans.append(span)
    spans.sort()
    return all(high <= low for (_, high), (low, _) in zip(spans, spans[1:]))


def _span(array):
    """The bytes [low, high) a NumPy or CUDA array's elements cover; None for anything else."""
    if isinstance(array, np.ndarray):
        address, shape, strides, size = array.__array_interface__["data"][0], array.shape, array.strides, array.itemsize
    else:
        interface = getattr(array, "__cuda_array_interface__", None)
        if not isinstance(interface, dict):
            return None
        size = np.dtype(interface["typestr"]).itemsize
        shape = tuple(interface["shape"])
        strides = interface.get("strides")
        if strides is None:
            from ..abi import c_strides
            strides = c_strides(shape, size)
        address = interface["data"][0]
    if math.prod(shape) == 0:
        return address, address
    low = high = address
    for n, stride in zip(shape, strides):
        if stride < 0:
            low += stride * (n - 1)
        else:
            high += stride * (n - 1)
    return low, high + size


def _check_shadow(primal, shadow, position: int) -> None:
    """A shadow has its array's dtype, shape and strides; arrays with shadows do not overlap themselves."""
    p, s = _layout_of(primal), _layout_of(shadow)
    if p != s:
        raise TypeError(f"argument {position} (the shadow of argument {position - 1}) must have that array's dtype, "
                        f"shape and strides {p}, not {s}: make it with numpy.zeros_like of a contiguous array")
    dtype, shape, strides = p
    extents = sorted((abs(st), (n - 1) * abs(st)) for n, st in zip(shape, strides) if n > 1)
    reach = 0  # the farthest element the smaller-stride dimensions reach: each stride must step past it
    for step, extent in extents:
        if step <= reach:
            raise TypeError(f"argument {position - 1} has elements that overlap (strides {strides} for shape "
                            f"{shape}): its shadow could not tell them apart; pass numpy.ascontiguousarray of it")
        reach += extent


def _layout_of(array):
    if isinstance(array, np.ndarray):
        return (array.dtype.str, tuple(array.shape), tuple(s // array.itemsize for s in array.strides))
    interface = getattr(array, "__cuda_array_interface__", None)
    if interface is None:  # an OpenCL device array (gpuc/runtime/opencl.py): shape, dtype, strides in bytes
        dtype, shape, strides = np.dtype(array.dtype), tuple(array.shape), getattr(array, "strides", None)
        strides = tuple(strides) if strides is not None else None
    else:
        dtype = np.dtype(interface["typestr"])
        shape = tuple(interface["shape"])
        strides = interface.get("strides")
    if strides is None:
        from ..abi import c_strides
        strides = c_strides(shape, dtype.itemsize)
    return (dtype.str, shape, tuple(s // dtype.itemsize for s in strides))


_ADJOINTS_LOCK = threading.Lock()


def adjoint(kernel, primal_writes: bool = True) -> AdjointKernel:
    """The adjoint kernel of `kernel` (see AdjointKernel): one per kernel and `primal_writes`, so that its
    compiled launchers are kept with it (`gpuc.adjoint(k)[n](...)` in a loop compiles once).

    Its launch also does what the primal does, its writes included. With `primal_writes=False` it leaves out
    the primal's stores into the arrays the kernel only stores into (never loads, updates atomically or
    passes to a call), which keep what they hold: for a backward after the forward launch ran on the same
    inputs (as Warp's `tape.backward` and Enzyme's reverse-only mode assume), it saves their write-back. The
    gradients are the same bits; arrays the kernel reads and writes are written as by the primal. Its array
    arguments must not overlap (a ValueError where they do)."""
    if not isinstance(primal_writes, bool):
        raise TypeError(f"gpuc.adjoint: primal_writes must be True or False, not {primal_writes!r}")
    slot = "_gpuc_adjoint" if primal_writes else "_gpuc_adjoint_outputs_kept"
    found = getattr(kernel, "__dict__", {}).get(slot)
    if found is None:
        made = AdjointKernel(kernel, primal_writes)
        with _ADJOINTS_LOCK:
            found = kernel.__dict__.setdefault(slot, made)
    return found


def _adjoint_keeping_outputs(kernel) -> AdjointKernel:
    """`adjoint(kernel, primal_writes=False)` (what such an adjoint pickles as)."""
    return adjoint(kernel, primal_writes=False)
