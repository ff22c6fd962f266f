"""`gpuc.Tape`: reverse mode over many kernel launches (docs/autodiff.md, "A tape for many launches").

Inside `with gpuc.Tape() as tape:` each launch of a @gpuc.kernel on the CPU comes here (through
`dispatch.recording`), is checked, recorded with its arguments and run. `tape.backward(...)` launches
`gpuc.adjoint` of each recorded kernel in reverse order, as the primal was launched, with shadow
arrays the tape owns.

Shadows mirror memory: one zeroed buffer per span of bytes the recorded float arrays cover, and each
array's shadow is the view at its own offset with its own strides. Views of one buffer (the rows
`u[t]` of a history array, a new view object at each launch) therefore share their gradient as they
share their data, and `tape.gradients[x]` answers for any view of recorded memory.

An adjoint reruns its primal kernel on the arrays as they are when it runs and consumes the seeds of
what it overwrote. Two rules make that exact over many launches:
- memory a recorded launch read or wrote is never written by a later launch: that launch is refused
  when it is recorded, before it runs. When the adjoint of launch k runs, every array k reads
  therefore holds what it held when k ran, except
- the arrays k itself may write: what they held before k ran is kept when k is recorded (nothing
  when every byte was zero, the usual fresh output) and put back before its adjoint runs, so that
  in-place updates (`x[i] *= x[i]`, atomic sums into a loss) rerun from the same values and leave
  memory as the forward launches left it.
"""

from __future__ import annotations

import bisect
import os
import sys
from collections.abc import Mapping

import numpy as np

from ..abi import ArrayParam
from . import dispatch
from .adjoint import _distinct, adjoint

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_ALIGN = 64  # a shadow starts at its array's address modulo this: aligned as the array is


class Launch:
    """One recorded launch: the kernel, its index space, arguments and options as given, the positions
    of the arrays it may write, and where the user's code made it (`file:line`)."""

    __slots__ = ("kernel", "n", "args", "threads", "block", "shared", "written", "where", "_before", "device")

    def __init__(self, kernel, n, args, threads, block, shared, written, where, before, device="cpu") -> None:
        self.kernel, self.n, self.args, self.device = kernel, n, tuple(args), device
        self.threads, self.block, self.shared = threads, block, shared
        self.written, self.where, self._before = written, where, before

    @property
    def name(self) -> str:
        return getattr(self.kernel, "__qualname__", repr(self.kernel))

    def _names(self) -> tuple:
        """The kernel's parameter names (none where it has no Python function)."""
        code = getattr(getattr(self.kernel, "py_func", None), "__code__", None)
        return code.co_varnames[:code.co_argcount] if code is not None else ()

    def argument(self, k: int) -> str:
        """`argument k (its parameter name)`, for messages."""
        names = self._names()
        return f"argument {k} ({names[k]})" if k < len(names) else f"argument {k}"

    def restore(self, keep=frozenset()) -> None:
        """Put back what the arrays this launch may write held before it ran, but for those of the parameters
        named in `keep` (which its adjoint neither reads nor writes)."""
        names = self._names()
        for k, before in self._before.items():
            if k < len(names) and names[k] in keep:
                continue
            self.args[k][...] = 0 if before is None else before

    def __repr__(self) -> str:
        return f"<gpuc.Tape launch of {self.name}[{self.n!r}] at {self.where}>"


class Tape:
    """Records kernel launches and runs their adjoints in reverse (docs/autodiff.md, "A tape for many
    launches").

        with gpuc.Tape() as tape:
            for t in range(steps):
                step[n](u[t], u[t + 1], params)
            loss_kernel[n](u[steps], target, loss)
        tape.backward(loss)                  # or grads=[(array, seed), ...]
        tape.gradients[params]               # d loss / d params, an array like params

    Launches made in the `with` block on this thread are recorded (the CPU only); `backward` seeds the
    shadows and launches `gpuc.adjoint` of each recorded kernel, last first, with the same index space,
    threads, block and shared memory. `tape.gradients[x]` is the gradient with respect to what x held
    when recording began: the inputs' gradients; memory the launches overwrote has had its gradient
    consumed (zero) unless the launches only added to it (an atomic loss keeps its seed). Calling
    `backward` again adds the same gradients again (the seeds are set, not added); `zero()` clears the
    gradients and keeps the recording, `reset()` clears both.
    """

    def __init__(self) -> None:
        self._tokens: list = []  # one per `with` block entered and not left
        self._forget()

    def _forget(self) -> None:
        self._launches: list[Launch] = []
        self._used = _Spans()  # (array, launch number, position) of each distinct array recorded
        self._seen: set = set()  # memory keys of the arrays in _used
        self._floats: list = []  # the float arrays among them: the ones with shadows
        self._shadows: _Shadows | None = None
        self._shadowed = 0  # how many of _floats the shadows cover

    # -- recording ---------------------------------------------------------------------------------

    def __enter__(self) -> Tape:
        if dispatch.recording.get() is not None:
            raise RuntimeError("a gpuc.Tape is already recording here: tapes do not nest; record every launch "
                               "with one tape")
        self._tokens.append(dispatch.recording.set(self._record))
        return self

    def __exit__(self, *exc) -> None:
        dispatch.recording.reset(self._tokens.pop())

    def _record(self, kernel, n, args, *, device, threads, block, shared) -> None:
        """Check a launch, keep what it may overwrite, run it and record it."""
        where = _caller()
        name = getattr(kernel, "__qualname__", repr(kernel))
        if getattr(kernel, "adjoint_of", None) is not None:
            raise ValueError(f"{where}: gpuc.Tape records launches of primal kernels, not of the adjoint of "
                             f"{kernel.adjoint_of.__qualname__}: tape.backward launches the adjoints itself (launch "
                             "gpuc.adjoint(...) outside the tape's with block)")
        device = device or dispatch._device_of(args)
        if device not in ("cpu", "opencl") or any(type(a) is not np.ndarray and (hasattr(a, "__cuda_array_interface__")
                                                                or dispatch._opencl_array(a)) for a in args):
            raise ValueError(f"{where}: gpuc.Tape records launches on NumPy arrays (run on the CPU, or copied to an "
                             f"OpenCL device), but this launch of {name} runs on {device!r} arrays: launch it with "
                             "NumPy arrays inside the tape, or write the reverse loop over gpuc.adjoint launches "
                             "yourself")
        launcher = dispatch.launcher_for(kernel, args, device, whole_blocks=block is not None)
        params = launcher.signature.params
        written = tuple(k for k, p in enumerate(params[:len(args)])
                        if isinstance(p, ArrayParam) and p.written and isinstance(args[k], np.ndarray))
        launch = Launch(kernel, n, args, threads, block, shared, written, where, {}, device)
        self._check(launch)
        launch._before.update((k, _contents(args[k])) for k in written)
        launcher(n, args, threads, block=block, shared=shared)
        self._add(launch)

    def _check(self, launch: Launch) -> None:
        """Refuse a launch that writes memory another of its arguments, or an earlier launch, uses."""
        args = launch.args
        for k in launch.written:
            for j, other in enumerate(args):
                if j != k and isinstance(other, np.ndarray) and _overlap(args[k], other):
                    raise ValueError(f"{launch.where}: {launch.name} may write {launch.argument(k)}, which shares "
                                     f"memory with its {launch.argument(j)}: gpuc.Tape pairs every array with a "
                                     "shadow of the same memory, and a kernel that reads what another of its "
                                     "arguments writes is a race; pass an array it updates in place once "
                                     "(x[i] += ... inside the kernel), or separate arrays")
            users = [item for item in self._used.near(*_bounds(args[k])) if _overlap(args[k], item[0])]
            if users:
                _, number, position = min(users, key=lambda item: item[1])
                earlier = self._launches[number]
                how = "wrote" if position in earlier.written else "read"
                raise ValueError(
                    f"{launch.where}: {launch.name} writes its {launch.argument(k)}, memory that the recorded "
                    f"launch of {earlier.name} at {earlier.where} {how} (its {earlier.argument(position)}): "
                    "gpuc.Tape differentiates by rerunning each launch backwards on the arrays it used, so "
                    "memory a recorded launch used must not be overwritten later (in-place time stepping); "
                    "write each step's result to an array of its own (one array per step, e.g. the rows of "
                    "u = numpy.zeros((steps + 1, n)): step[n](u[t], u[t + 1], ...))")

    def _add(self, launch: Launch) -> None:
        number = len(self._launches)
        self._launches.append(launch)
        for position, array in enumerate(launch.args):
            if not isinstance(array, np.ndarray):
                continue
            key = _key(array)
            if key in self._seen:
                continue
            self._seen.add(key)
            if array.size:  # an empty array overlaps nothing
                self._used.add(*_bounds(array), (array, number, position))
            if array.dtype.kind == "f":  # the arrays gpuc.adjoint pairs with shadows
                self._floats.append(array)

    @property
    def launches(self) -> tuple:
        """The recorded launches, in the order they ran."""
        return tuple(self._launches)

    # -- the reverse pass -------------------------------------------------------------------------

    def backward(self, loss=None, grads=None) -> None:
        """Run the adjoints of the recorded launches, last first. `loss`: a one-element float array,
        seeded with 1; `grads`: (array, seed) pairs (NumPy arrays are not hashable, so a dict works only
        for hashable array types), each seed anything that broadcasts to its array. Seeds are set into
        the shadows (backward twice adds the gradients twice); the gradients land in `tape.gradients`."""
        seeds = [] if loss is None else [(_loss_array(loss), 1.0)]
        if grads is not None:
            seeds += list(grads.items() if isinstance(grads, Mapping) else grads)
        if not seeds:
            raise ValueError("tape.backward needs a seed: backward(loss) for a one-element loss array, or "
                             "backward(grads=[(array, seed), ...])")
        shadows, seeded = self._shadows_now(), []
        for pair in seeds:
            array, seed = _seed_pair(pair)
            shadow = shadows.of(array) if array.dtype.kind == "f" else None
            if shadow is None:
                raise ValueError(f"tape.backward: a seed is given for a {array.dtype.name} array of shape "
                                 f"{array.shape} that no recorded launch passed (a copy of one?); seed a float array "
                                 "the recorded launches wrote, such as the loss")
            seeded.append((shadow, np.broadcast_to(np.asarray(seed, dtype=array.dtype), array.shape)))
        for shadow, seed in seeded:
            shadow[...] = seed
        token = dispatch.recording.set(None)  # the adjoints' own launches are not recorded
        try:
            for launch in reversed(self._launches):
                args = []
                for arg in launch.args:
                    args.append(arg)
                    if isinstance(arg, np.ndarray) and arg.dtype.kind == "f":
                        args.append(shadows.of(arg))
                try:
                    if launch.device == "cpu" and _distinct(args):
                        # the arrays the kernel only writes keep what the forward launches left there: neither
                        # put back before the adjoint nor written again by it
                        adjoint(launch.kernel, primal_writes=False)._launch(
                            launch.n, args, launch.device, launch.threads, launch.block, launch.shared,
                            before=launch.restore)
                    else:
                        launch.restore()
                        adjoint(launch.kernel).launch(launch.n, *args, device=launch.device, threads=launch.threads,
                                                      block=launch.block, shared=launch.shared)
                except Exception as error:
                    error.add_note(f"in tape.backward, the adjoint of {launch.name} launched at {launch.where}")
                    raise
        finally:
            dispatch.recording.reset(token)

    def _shadows_now(self) -> _Shadows:
        if self._shadows is None or self._shadowed < len(self._floats):
            self._shadows = _Shadows(self._floats, self._shadows)
            self._shadowed = len(self._floats)
        return self._shadows

    @property
    def gradients(self) -> Gradients:
        """The gradients of the recorded float arrays, by array (see Gradients)."""
        return Gradients(self._floats, self._shadows)

    def zero(self) -> None:
        """Zero the gradients; the recording stays."""
        if self._shadows is not None:
            self._shadows.zero()

    def reset(self) -> None:
        """Forget the recorded launches and the gradients."""
        self._forget()

    def __repr__(self) -> str:
        return f"<gpuc.Tape of {len(self._launches)} launch(es)>"


class Gradients(Mapping):
    """`tape.gradients`: for a recorded float array x (the object itself, or any view of memory the
    recorded float arrays cover), the gradient with respect to what x held when recording began, as an
    array of x's shape and dtype: a view of the tape's gradient memory, which `zero()` and later
    `backward` calls change in place (copy it to keep it). Iterating gives the recorded float arrays."""

    def __init__(self, arrays: list, shadows: _Shadows | None) -> None:
        self._arrays, self._shadows = arrays, shadows

    def __getitem__(self, array) -> np.ndarray:
        if not isinstance(array, np.ndarray):
            raise KeyError(f"tape.gradients is indexed by NumPy arrays, not {type(array).__name__}")
        if array.dtype.kind != "f":
            raise KeyError(f"a {array.dtype.name} array has no gradient: only float arrays have shadows")
        if self._shadows is None:
            raise KeyError("the tape has no gradients yet: call tape.backward first")
        found = self._shadows.of(array)
        if found is None:
            raise KeyError(f"no recorded launch passed the memory of this {array.dtype.name} array of shape "
                           f"{array.shape}")
        return found

    def __iter__(self):
        return iter(self._arrays if self._shadows is not None else ())

    def __len__(self) -> int:
        return len(self._arrays) if self._shadows is not None else 0


# -- memory ----------------------------------------------------------------------------------------


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def _bounds(array: np.ndarray) -> tuple[int, int]:
    """The bytes [low, high) an array's elements cover."""
    low = high = _address(array)
    if array.size == 0:
        return low, high
    for n, stride in zip(array.shape, array.strides):
        if stride < 0:
            low += stride * (n - 1)
        else:
            high += stride * (n - 1)
    return low, high + array.itemsize


def _key(array: np.ndarray) -> tuple:
    return (_address(array), array.shape, array.strides, array.dtype.str)


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    (alow, ahigh), (blow, bhigh) = _bounds(a), _bounds(b)
    if alow >= bhigh or blow >= ahigh:
        return False
    if _key(a) == _key(b):
        return True
    try:
        return bool(np.shares_memory(a, b, max_work=1 << 20))
    except np.exceptions.TooHardError:
        return True  # cannot tell: taken as shared, a refusal rather than a wrong gradient


def _contents(array: np.ndarray):
    """What an array held before a launch that may write it: None when every byte was zero, else a copy."""
    zero = not array.any() and not (array.dtype.kind == "f" and np.signbit(array).any())
    return None if zero else array.copy()


class _Spans:
    """Byte ranges [low, high), sorted and merged where they overlap (with `touching`, also where they
    touch), each with the items added in it."""

    def __init__(self, touching: bool = False) -> None:
        self.lows: list[int] = []
        self.highs: list[int] = []
        self.items: list[list] = []
        self._touching = touching

    def _reach(self, low: int, high: int) -> tuple[int, int]:
        """The spans [i, j) that overlap [low, high) (or touch it, with `touching`)."""
        if self._touching:
            i = j = bisect.bisect_left(self.highs, low)
            while j < len(self.lows) and self.lows[j] <= high:
                j += 1
        else:
            i = j = bisect.bisect_right(self.highs, low)
            while j < len(self.lows) and self.lows[j] < high:
                j += 1
        return i, j

    def near(self, low: int, high: int):
        i, j = self._reach(low, high)
        for items in self.items[i:j]:
            yield from items

    def add(self, low: int, high: int, item=None) -> None:
        i, j = self._reach(low, high)
        items = [x for found in self.items[i:j] for x in found] + [item]
        if j > i:
            low, high = min(low, self.lows[i]), max(high, self.highs[j - 1])
        self.lows[i:j], self.highs[i:j], self.items[i:j] = [low], [high], [items]


class _Shadows:
    """The tape's gradient memory: one zeroed buffer per span of the float arrays' bytes, holding at
    each address the gradient of the float there. Built again, keeping its values, when the recording
    has grown since (spans only grow and merge)."""

    def __init__(self, arrays: list, previous: _Shadows | None = None) -> None:
        spans = _Spans(touching=True)  # the rows of one array share a buffer: a view of all of them works
        for array in arrays:
            spans.add(*_bounds(array))
        self.lows, self.highs, self.buffers, self.starts = spans.lows, spans.highs, [], []
        for low, high in zip(self.lows, self.highs):
            buffer = np.zeros(high - low + _ALIGN, np.uint8)
            self.buffers.append(buffer)
            self.starts.append((low - _address(buffer)) % _ALIGN)
        if previous is not None:
            for low, high, buffer, start in zip(previous.lows, previous.highs, previous.buffers, previous.starts):
                i = bisect.bisect_right(self.lows, low) - 1
                at = self.starts[i] + low - self.lows[i]
                self.buffers[i][at:at + high - low] = buffer[start:start + high - low]

    def of(self, array: np.ndarray) -> np.ndarray | None:
        """The shadow of `array` (a view with its shape, dtype and strides), None outside the spans."""
        low, high = _bounds(array)
        i = bisect.bisect_right(self.lows, low) - 1
        if i < 0 or high > self.highs[i]:
            return None
        offset = self.starts[i] + _address(array) - self.lows[i]
        return np.ndarray(array.shape, array.dtype, buffer=self.buffers[i], offset=offset, strides=array.strides)

    def zero(self) -> None:
        for buffer in self.buffers:
            buffer.fill(0)


def _loss_array(loss) -> np.ndarray:
    if not isinstance(loss, np.ndarray) or loss.size != 1 or loss.dtype.kind != "f":
        raise ValueError("tape.backward(loss): the loss is a one-element float array that a recorded launch "
                         "wrote; for other seeds pass grads=[(array, seed), ...]")
    return loss


def _seed_pair(pair) -> tuple:
    try:
        array, seed = pair
    except (TypeError, ValueError):
        raise TypeError("tape.backward(grads=...) takes (array, seed) pairs (or a mapping of them)") from None
    if not isinstance(array, np.ndarray):
        raise TypeError(f"tape.backward(grads=...): seeds are given for NumPy arrays, not {type(array).__name__}")
    return array, seed


def _caller() -> str:
    """`file:line` of the innermost frame outside gpuc: the user's launch."""
    frame = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame = frame.f_back
    return f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else "<unknown>"


__all__ = ["Gradients", "Launch", "Tape"]
