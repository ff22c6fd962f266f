"""`jax_kernel(kernel, ...)`: a gpuc kernel as a function of JAX arrays, called through XLA's FFI and
differentiated with gpuc's own derivative kernels (docs/jax.md): a `jax.custom_jvp` whose tangents come from
`gpuc.tangent(kernel)`, launched by a primitive (`gpuc_tangent`) that is linear in them and whose transpose
launches `gpuc.adjoint(kernel)`. So `jax.jvp` runs the tangent kernel, and `jax.grad`/`jax.vjp` the adjoint
alone: JAX transposes the tangent launch without running it."""

from __future__ import annotations

import math
import threading

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero
from jax.extend import core as _core
from jax.interpreters import ad, batching, mlir

from ..errors import user_facing
from ..frontend.core.functions import Kernel
from ..runtime import adjoint as _adjoint
from ..runtime import cpu
from ..runtime import dispatch
from ..runtime import tangent as _tangent
from .ffi import FFILaunch
from .needs import derivative_needs, may_read, probe, shadowed


def jax_kernel(kernel, num_outputs: int = 1, launch_dims=None, output_dims=None, output_dtypes=None):
    """A function of JAX arrays that launches `kernel` (a @gpuc.kernel) on gpuc's CPU runtime.

    The kernel's last `num_outputs` array parameters are its outputs: allocated by XLA, set to zero,
    and returned (one array, or a tuple of them when `num_outputs` > 1). The others are its inputs, in
    order: arrays, and scalars (Python numbers or rank-0 arrays, which may be traced). The launch
    covers the first input array's shape unless `launch_dims` says otherwise; outputs have that shape
    and the dtype of the first float (or complex) input unless `output_dims` / `output_dtypes` say otherwise.
    Each of the three is a value, or a function called with the tuple of the inputs' shapes (`()` for
    a scalar) that returns one; `output_dims` and `output_dtypes` may also give one value per output
    (a list). The function works eagerly, under `jax.jit`, inside `lax.scan` and the like;
    `jax.jvp` runs the kernel's tangent kernel (gpuc.tangent), `jax.grad`, `jax.vjp` and
    `jax.value_and_grad` its adjoint (gpuc.adjoint); `jax.vmap` launches once per batch element."""
    if not isinstance(kernel, Kernel) or isinstance(kernel, _adjoint.AdjointKernel):
        raise TypeError(f"jax_kernel takes a @gpuc.kernel, not {kernel!r}")
    return JaxKernel(kernel, num_outputs, launch_dims, output_dims, output_dtypes)


class JaxKernel:
    """What `jax_kernel` returns (see there). `kernel` is the gpuc kernel, `inputs` and `outputs` the
    names of its input and output parameters."""

    def __init__(self, kernel, num_outputs, launch_dims, output_dims, output_dtypes) -> None:
        code = kernel.py_func.__code__
        names = list(code.co_varnames[:code.co_argcount])
        if type(num_outputs) is not int or not 1 <= num_outputs <= len(names):
            raise ValueError(f"num_outputs of jax_kernel({kernel.__qualname__}) must be an int from 1 to the "
                             f"kernel's {len(names)} parameter(s), not {num_outputs!r}")
        self.kernel, self.inputs, self.outputs = kernel, names[:-num_outputs], names[-num_outputs:]
        self._launch_dims, self._output_dims, self._output_dtypes = launch_dims, output_dims, output_dtypes
        self._launches: dict = {}
        self._lock = threading.Lock()
        self.where = f"{code.co_filename}:{code.co_firstlineno}"
        self.__name__ = self.__qualname__ = f"jax_kernel({kernel.__qualname__})"
        self._call = jax.custom_jvp(self._forward)
        self._call.defjvp(self._jvp, symbolic_zeros=True)

    @user_facing
    def __call__(self, *args):
        if len(args) != len(self.inputs):
            raise TypeError(f"{self.__name__} ({self.where}) takes {len(self.inputs)} input(s) "
                            f"({', '.join(self.inputs)}), got {len(args)}")
        args = tuple(self._as_jax(k, a) for k, a in enumerate(args))
        outs = self._call(*args)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _as_jax(self, k: int, value):
        array = value if isinstance(value, jax.Array) else jnp.asarray(value)
        if array.ndim > 3:
            raise TypeError(f"{self._name(k)}: kernels take arrays of 1 to 3 dimensions (or scalars), "
                            f"not {array.ndim}")
        if jnp.issubdtype(array.dtype, jnp.complexfloating) and array.ndim == 0:
            raise TypeError(f"{self._name(k)}: a complex scalar cannot be passed from JAX; pass a "
                            "one-element array")
        return array

    def _name(self, k: int, outputs: bool = False) -> str:
        names = self.outputs if outputs else self.inputs
        position = k + (len(self.inputs) if outputs else 0)
        return f"argument {position} ({names[k]}) of {self.kernel.__qualname__} ({self.where})"

    # -- shapes -----------------------------------------------------------------------------------

    def _spec(self, args) -> tuple:
        """(the launch's index space, the outputs' shapes, their dtypes) for inputs like `args`."""
        shapes = tuple(tuple(a.shape) for a in args)
        first = next((shape for shape in shapes if shape), None)  # the first input array's shape
        if (self._launch_dims is None or self._output_dims is None) and first is None:
            raise TypeError(f"{self.__name__} ({self.where}) has no input array to take the launch's shape from; "
                            "give launch_dims= and output_dims=")
        floats = [a.dtype for a in args if jnp.issubdtype(a.dtype, jnp.inexact)]
        if self._output_dtypes is None and not floats:
            raise TypeError(f"{self.__name__} ({self.where}) has no float or complex input to take its outputs' dtype from; "
                            "give output_dtypes=")
        n = _value(self._launch_dims, shapes) if self._launch_dims is not None else first
        n = _dims(n, f"launch_dims of {self.__name__}")
        dims = self._per_output(self._output_dims, shapes, "output_dims", first, _is_shape)
        dims = tuple(_dims(d, f"output_dims of {self.__name__} (output {self.outputs[j]})") for j, d in enumerate(dims))
        for j, d in enumerate(dims):
            if not 1 <= len(d) <= 3:
                raise ValueError(f"{self._name(j, True)}: output_dims gives it {len(d)} dimension(s), {d}; "
                                 "kernels take arrays of 1 to 3")
        dtypes = self._per_output(self._output_dtypes, shapes, "output_dtypes", floats[0] if floats else None,
                                  lambda v: not isinstance(v, (list, tuple)))
        dtypes = tuple(_dtype(t, f"output_dtypes of {self.__name__} (output {self.outputs[j]})")
                       for j, t in enumerate(dtypes))
        return n, dims, dtypes

    def _per_output(self, given, shapes, what: str, default, is_one) -> tuple:
        value = default if given is None else _value(given, shapes)
        if is_one(value):
            return (value,) * len(self.outputs)
        values = tuple(value)
        if len(values) != len(self.outputs):
            raise ValueError(f"{what} of {self.__name__} ({self.where}) gives {len(values)} value(s) for "
                             f"{len(self.outputs)} output(s) ({', '.join(self.outputs)})")
        return values

    # -- the forward launch ----------------------------------------------------------------------

    def _forward(self, *args):
        args = tuple(jnp.asarray(a) for a in args)  # JAX may hand a Python scalar on as its own (TypedFloat)
        n, dims, dtypes = self._spec(args)
        launch = self._prepared(("forward", _key(args), n, dims, dtypes),
                                lambda: self._forward_launch(args, n, dims, dtypes))
        results = [jax.ShapeDtypeStruct(d, t) for d, t in zip(dims, dtypes)]
        return tuple(jax.ffi.ffi_call(launch.target, results, vmap_method="sequential")(*args))

    def _forward_launch(self, args, n, dims, dtypes) -> FFILaunch:
        probes = tuple(probe(a.shape, a.dtype) for a in args) + tuple(np.empty(d, t) for d, t in zip(dims, dtypes))
        launcher = dispatch.launcher_for(self.kernel, probes, "cpu")
        for k, param in enumerate(launcher.signature.params[:len(args)]):
            if getattr(param, "written", False):
                raise ValueError(f"{self._name(k)} is a JAX array, and JAX arrays are read-only, but the kernel "
                                 "may write to it; make it an output (the kernel's last num_outputs parameters)")
        sources = tuple(("arg", k) for k in range(len(args))) + tuple(("ret", j) for j in range(len(dims)))
        read = self._read_outputs(args, probes)
        return FFILaunch(launcher, n, probes, sources, zeroed=read, what=self.__name__)

    def _read_outputs(self, args, probes) -> tuple:
        """The outputs the kernel may read (LLVM does not find their parameters `writeonly`): XLA's buffers
        hold whatever was there before, so these are set to zero before each launch (the rest the
        kernel only stores to; it must store every element it returns, as into `numpy.empty`)."""
        key = ("read", _key(args), tuple(p.shape for p in probes[len(args):]))
        found = self._launches.get(key)
        if found is None:
            found = self._launches[key] = may_read(self.kernel, probes, range(len(args), len(probes)))
        return tuple(k - len(args) for k in found)

    def _needs(self, args, n, dims, dtypes) -> tuple:
        """(the float input arrays whose values neither gpuc.adjoint(kernel) nor gpuc.tangent(kernel) reads into a
        derivative, gpuc/jax/needs.py: the kernel is linear in them; the outputs the adjoint only writes). Where
        the derivative kernels cannot be compiled, none of either: the error comes where it always did, from
        the launch that needs them."""
        key = ("needs", _key(args), n, dims, dtypes, cpu.launch_threads(math.prod(cpu.index_space(n))) == 1)
        found = self._launches.get(key)
        if found is None:
            try:
                found = derivative_needs(self.kernel, args, n, dims, dtypes)
            except Exception:  # noqa: BLE001 - raised again, located, by the derivative's own launch
                found = ((), ())
            self._launches[key] = found
        return found

    def _prepared(self, key, make) -> FFILaunch:
        found = self._launches.get(key)
        if found is None:
            with self._lock:
                found = self._launches.get(key)
                if found is None:
                    found = make()
                    found.register(jax)
                    self._launches[key] = found
        return found

    # -- derivatives -----------------------------------------------------------------------------

    def _jvp(self, primals, tangents):
        """The custom_jvp rule: the values, and the tangents of the float outputs from the `gpuc_tangent`
        primitive (zeros of the other outputs)."""
        args = tuple(jnp.asarray(a) for a in primals)
        for k, (t, a) in enumerate(zip(tangents, args)):
            if isinstance(t, SymbolicZero):
                continue
            if a.ndim == 0 and jnp.issubdtype(a.dtype, jnp.inexact):
                raise TypeError(f"{self._name(k)}: gpuc's derivative kernels treat float scalar parameters as "
                                "constants, so no derivative with respect to it is computed; pass it as a "
                                "one-element array (x[0] in the kernel), or close over it so that JAX does not "
                                "differentiate it")
            if jnp.issubdtype(a.dtype, jnp.complexfloating):
                raise TypeError(f"{self._name(k)}: gpuc's derivative kernels differentiate real float arrays, not "
                                f"{a.dtype} ones, so this derivative is not computed")
        out = self._forward(*args)
        n, dims, dtypes = self._spec(args)
        floats_in = [k for k, a in enumerate(args) if shadowed(a.shape, a.dtype)]
        directions = [jnp.zeros(args[k].shape, args[k].dtype) if isinstance(tangents[k], SymbolicZero)
                      else jnp.asarray(tangents[k], args[k].dtype) for k in floats_in]
        # Inputs whose values no derivative reads are left out of the tangent launch's operands, so that JAX
        # keeps no residual of them for the backward pass (a stencil's state at every step of a scan).
        free = self._needs(args, n, dims, dtypes)[0]
        kept = [a for k, a in enumerate(args) if k not in free]
        avals = tuple((tuple(a.shape), np.dtype(a.dtype)) for a in args)
        found = iter(_tangent_p.bind(*kept, *directions, kernel=self, inputs=avals, free=free))
        tangents_out = []
        for d, t in zip(dims, dtypes):
            if shadowed(d, t):
                tangents_out.append(next(found))
            elif jnp.issubdtype(t, jnp.inexact):  # complex outputs: gpuc's tangent kernels have none
                tangents_out.append(SymbolicZero(jax.core.ShapedArray(d, t)))
            else:
                tangents_out.append(SymbolicZero(jax.core.ShapedArray(d, jax.dtypes.float0)))
        return out, tuple(tangents_out)

    def _tangents(self, args, directions, free=()):
        """The tangents of the float outputs after gpuc.tangent(kernel)'s launch on `args`, the float input
        arrays' tangents `directions`: what `gpuc_tangent` computes. The inputs at positions `free` are only
        their shapes (jax.ShapeDtypeStruct): the launch reads zeros in their place."""
        n, dims, dtypes = self._spec(args)
        launch = self._prepared(("tangent", _key(args), n, dims, dtypes, free),
                                lambda: self._tangent_launch(args, n, dims, dtypes, free))
        floats_out = [j for j, (d, t) in enumerate(zip(dims, dtypes)) if shadowed(d, t)]
        results = ([jax.ShapeDtypeStruct(d, t) for d, t in zip(dims, dtypes)]
                   + [jax.ShapeDtypeStruct(dims[j], dtypes[j]) for j in floats_out])
        kept = [a for k, a in enumerate(args) if k not in free]
        out = jax.ffi.ffi_call(launch.target, results, vmap_method="sequential")(*kept, *directions)
        return tuple(out[len(dims):])

    def _tangent_launch(self, args, n, dims, dtypes, free=()) -> FFILaunch:
        """The tangent kernel's launch: operands are the inputs (but those at `free`), then the float input arrays'
        tangents; results are the outputs (written again, as the primal writes them) and the float outputs'
        tangents (zeroed: an element the kernel does not write keeps the tangent of its zero)."""
        tangent = _tangent.tangent(self.kernel)
        probes, sources, zeroed = [], [], []
        operand = {k: i for i, k in enumerate(k for k in range(len(args)) if k not in free)}
        shadow = len(operand)
        for k, a in enumerate(args):
            probes.append(_stand_in(a) if k in free else probe(a.shape, a.dtype))
            sources.append(("fixed", None) if k in free else ("arg", operand[k]))
            if shadowed(a.shape, a.dtype):
                probes.append(np.empty(a.shape, a.dtype))
                sources.append(("arg", shadow))
                shadow += 1
        read = self._read_outputs(args, tuple(probe(a.shape, a.dtype) for a in args)
                                  + tuple(np.empty(d, t) for d, t in zip(dims, dtypes)))
        result = len(dims)
        for j, (d, t) in enumerate(zip(dims, dtypes)):
            probes.append(np.empty(d, t))
            sources.append(("ret", j))
            if j in read:
                zeroed.append(j)
            if shadowed(d, t):
                probes.append(np.empty(d, t))
                sources.append(("ret", result))
                zeroed.append(result)
                result += 1
        launcher = tangent.cpu_launcher(n, tuple(probes))
        return FFILaunch(launcher, n, tuple(probes), tuple(sources), zeroed=tuple(zeroed),
                         what=f"jax_kernel({tangent.__qualname__})")

    def _backward(self, args, cotangents, free=()):
        """The float input arrays' gradients (None for the other inputs) from gpuc.adjoint(kernel)'s launch on
        `args` with the outputs' `cotangents` (None: zero). The inputs at positions `free` are only their
        shapes (jax.ShapeDtypeStruct): the launch reads zeros in their place."""
        args = tuple(a if k in free else jnp.asarray(a) for k, a in enumerate(args))
        n, dims, dtypes = self._spec(args)
        floats_out = [j for j, (d, t) in enumerate(zip(dims, dtypes)) if shadowed(d, t)]
        cotangents = [SymbolicZero(jax.core.ShapedArray(dims[j], dtypes[j])) if c is None else c
                      for j, c in enumerate(cotangents)]
        for j, t in enumerate(dtypes):
            if j not in floats_out and jnp.issubdtype(t, jnp.inexact) and not isinstance(cotangents[j], SymbolicZero):
                raise TypeError(f"{self._name(j, True)}: gpuc.adjoint differentiates real float arrays, not {t} "
                                "ones, so a gradient flowing into this output cannot be taken back through the kernel")
        seeds = [jnp.zeros(dims[j], dtypes[j]) if isinstance(cotangents[j], SymbolicZero)
                 else jnp.asarray(cotangents[j], dtypes[j]) for j in floats_out]
        scratch = self._needs(args, n, dims, dtypes)[1]
        launch = self._prepared(("adjoint", _key(args), n, dims, dtypes, free, scratch),
                                lambda: self._adjoint_launch(args, n, dims, dtypes, free, scratch))
        floats_in = [k for k, a in enumerate(args) if shadowed(a.shape, a.dtype)]
        rewritten = [j for j in range(len(dims)) if j not in scratch]
        results = ([jax.ShapeDtypeStruct(args[k].shape, args[k].dtype) for k in floats_in]
                   + [jax.ShapeDtypeStruct(dims[j], dtypes[j]) for j in rewritten]
                   + [jax.ShapeDtypeStruct(dims[j], dtypes[j]) for j in floats_out])
        kept = [a for k, a in enumerate(args) if k not in free]
        first_seed = len(floats_in) + len(rewritten)
        aliases = {len(kept) + i: first_seed + i for i in range(len(floats_out))}
        out = jax.ffi.ffi_call(launch.target, results, vmap_method="sequential",
                               input_output_aliases=aliases)(*kept, *seeds)
        grads = [None] * len(args)
        for i, k in enumerate(floats_in):
            grads[k] = out[i]
        return tuple(grads)

    def _adjoint_launch(self, args, n, dims, dtypes, free=(), scratch=()) -> FFILaunch:
        """The adjoint's launch: operands are the inputs (but those at `free`), then the float outputs' seeds;
        results are the float input arrays' shadows (zeroed: gradients are added to them), the outputs but
        those at `scratch` (written again by the adjoint, as its primal writes them, and thrown away) and the
        seeds, aliased to their operands (consumed). The outputs at `scratch`, which the adjoint only writes,
        are written into memory of the launch's own: XLA need not allocate them, and concurrent launches
        writing there at once store values nobody reads."""
        adjoint = _adjoint.adjoint(self.kernel)
        shadows = sum(1 for a in args if shadowed(a.shape, a.dtype))
        operand = {k: i for i, k in enumerate(k for k in range(len(args)) if k not in free)}
        probes, sources, zeroed = [], [], []
        for k, a in enumerate(args):
            probes.append(_stand_in(a) if k in free else probe(a.shape, a.dtype))
            sources.append(("fixed", None) if k in free else ("arg", operand[k]))
            if shadowed(a.shape, a.dtype):
                zeroed.append(len(zeroed))
                probes.append(np.empty(a.shape, a.dtype))
                sources.append(("ret", zeroed[-1]))
        result, seed = shadows, shadows + len(dims) - len(scratch)
        read = self._read_outputs(args, tuple(probe(a.shape, a.dtype) for a in args)
                                  + tuple(np.empty(d, t) for d, t in zip(dims, dtypes)))
        for j, (d, t) in enumerate(zip(dims, dtypes)):
            probes.append(np.empty(d, t))
            if j in scratch:
                sources.append(("fixed", None))
            else:
                sources.append(("ret", result))
                if j in read:  # the adjoint runs the primal: it reads what the forward launch read
                    zeroed.append(result)
                result += 1
            if shadowed(d, t):
                probes.append(np.empty(d, t))
                sources.append(("ret", seed))
                seed += 1
        launcher, apart = adjoint.cpu_launcher(n, tuple(probes))
        # The adjoint for work items run in order stays on one thread, whatever GPUC_NUM_THREADS says later.
        return FFILaunch(launcher, n, tuple(probes), tuple(sources), zeroed=tuple(zeroed), apart=apart,
                         threads=1 if apart is None else None, what=f"jax_kernel({adjoint.__qualname__})")

    def __repr__(self) -> str:
        return f"<{self.__name__}: ({', '.join(self.inputs)}) -> ({', '.join(self.outputs)})>"


# -- the primitive of a tangent launch ---------------------------------------------------------------
#
# `gpuc_tangent(*inputs, *directions, kernel=JaxKernel, inputs=avals, free=positions)`: the float outputs' tangents
# along `directions` (one per float input array). Linear in the directions: its transpose is the adjoint launch, so
# that JAX's reverse mode (which linearizes the custom_jvp rule, then transposes) runs gpuc.adjoint and never the
# tangent kernel. The inputs at positions `free` (JaxKernel._needs) are not among its operands: only their shapes
# and dtypes (`inputs` holds every input's) are, so JAX saves no residual of them.

_tangent_p = _core.Primitive("gpuc_tangent")
_tangent_p.multiple_results = True


def _split(args, kernel, inputs, free) -> tuple:
    """(every input, a jax.ShapeDtypeStruct standing for those at `free`; the directions) of the operands `args`."""
    given = iter(args)
    full = tuple(jax.ShapeDtypeStruct(*inputs[k]) if k in free else next(given) for k in range(len(inputs)))
    return full, tuple(given)


def _tangent_impl(*args, kernel, inputs, free):
    full, directions = _split(args, kernel, inputs, free)
    full = tuple(a if k in free else jnp.asarray(a) for k, a in enumerate(full))
    return kernel._tangents(full, directions, free)


def _tangent_abstract(*args, kernel, inputs, free):
    n, dims, dtypes = kernel._spec(tuple(jax.ShapeDtypeStruct(*a) for a in inputs))
    return [jax.core.ShapedArray(d, t) for d, t in zip(dims, dtypes) if shadowed(d, t)]


def _tangent_transpose(cotangents, *args, kernel, inputs, free):
    full, directions = _split(args, kernel, inputs, free)
    if any(ad.is_undefined_primal(a) for a in full):
        raise TypeError(f"{kernel.__name__}: its inputs are not linear in a tangent launch; JAX asked to transpose "
                        "with respect to them")
    # JAX may hand a Python scalar on as its own (TypedFloat)
    full = tuple(a if k in free else jnp.asarray(a) for k, a in enumerate(full))
    n, dims, dtypes = kernel._spec(full)
    floats_out = [j for j, (d, t) in enumerate(zip(dims, dtypes)) if shadowed(d, t)]
    seeds = [None] * len(dims)
    for j, c in zip(floats_out, cotangents):
        seeds[j] = None if type(c) is ad.Zero else c
    grads = kernel._backward(full, seeds, free)
    floats_in = [k for k, a in enumerate(full) if shadowed(a.shape, a.dtype)]
    return [None] * (len(args) - len(directions)) + [grads[k] if ad.is_undefined_primal(d) else None
                                                     for k, d in zip(floats_in, directions)]


def _tangent_batched(args, dims, *, kernel, inputs, free):
    """vmap: one launch per batch element (as the kernel's own launches under vmap)."""
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    moved = [jnp.moveaxis(a, d, 0) if d is not None else jnp.broadcast_to(a, (size, *jnp.shape(a)))
             for a, d in zip(args, dims)]
    out = jax.lax.map(lambda xs: tuple(_tangent_p.bind(*xs, kernel=kernel, inputs=inputs, free=free)), tuple(moved))
    return list(out), [0] * len(out)


_tangent_p.def_impl(_tangent_impl)
_tangent_p.def_abstract_eval(_tangent_abstract)
mlir.register_lowering(_tangent_p, mlir.lower_fun(_tangent_impl, multiple_results=True))
ad.primitive_transposes[_tangent_p] = _tangent_transpose
batching.primitive_batchers[_tangent_p] = _tangent_batched


def _key(args) -> tuple:
    return tuple((tuple(a.shape), np.dtype(a.dtype)) for a in args)


def _stand_in(a):
    """What a derivative launch reads in the place of an input whose values it does not need (JaxKernel._needs):
    zeros it never writes, kept with the launch. Fresh zero pages all map the same page of the kernel's until
    written, so reading them costs no memory traffic; and, unlike a buffer XLA passes, they overlap nothing
    the launch writes (stores into memory the kernel also reads through another pointer are slow)."""
    return np.zeros(a.shape, a.dtype)


def _value(given, shapes):
    """`given`, or what it returns for the inputs' shapes where it is a function (a dtype's type is no function)."""
    return given(shapes) if callable(given) and not isinstance(given, (type, np.dtype)) else given


def _is_shape(value) -> bool:
    return isinstance(value, (int, np.integer)) or (isinstance(value, tuple) and all(
        isinstance(d, (int, np.integer)) for d in value))


def _dims(value, what: str) -> tuple:
    dims = (value,) if isinstance(value, (int, np.integer)) else value
    if not isinstance(dims, tuple) or not all(isinstance(d, (int, np.integer)) and d >= 0 for d in dims):
        raise ValueError(f"{what} must be a shape (an int or a tuple of ints, none negative), not {value!r}")
    return tuple(int(d) for d in dims)


def _dtype(value, what: str) -> np.dtype:
    try:
        return np.dtype(value)
    except TypeError:
        raise TypeError(f"{what} must be a dtype, not {value!r}") from None


__all__ = ["JaxKernel", "jax_kernel"]
