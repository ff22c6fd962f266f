"""gpuc: a GPU/CPU compiler toolkit for Python on LLVM, with an open, plugin-driven optimization pipeline."""

from ._version import __version__  # noqa: E402,F401

from .compiler import (  # noqa: E402
    CompilationError, CompiledFunction, CompileResult, CompileState, CompilerConfig, CompilerError, CompilerJob,
    IRIssue, IRSource, InternalCompilerError, Plugin, PluginError, ValidationError, build_pipeline, code_llvm,
    cache, code_native, compile, compile_module, make_plugin, plugin_scope, register_plugin, registered_plugins,
    unregister_plugin)
from .errors import KernelError  # noqa: E402
from .targets import GCNTarget, NativeTarget, PTXTarget, SPIRVTarget, Target  # noqa: E402
from .frontend import (Array, atomic_add, atomic_and, atomic_cas, atomic_dec, atomic_exch, atomic_inc,  # noqa: E402
                       atomic_max, atomic_min, atomic_or, atomic_sub, atomic_xor, bool_, boolean, clz, deferred,
                       derivative, ffs, float32, float64, fma, func, grad, index, int32, int64, jvp, kernel, marker,
                       ndrange, popc, uint32, uint64, value_and_grad, vjp)
from .frontend import (ballot, barrier, barrier_all, barrier_any, barrier_count, block_dim, block_index,  # noqa: E402
                       fence, fence_block, grid_barrier, grid_dim, lane_index, local, shared, shfl_down, shfl_idx,
                       shfl_up, shfl_xor, syncwarp, thread_index, vote_all, vote_any, warp_size)
from .frontend import complex64, complex128  # noqa: E402  - complex numbers (docs/frontend.md)
from .frontend import float16, int8, int16, uint8, uint16  # noqa: E402  - the small dtypes (docs/frontend.md)
from . import plugins  # noqa: E402,F401  - registers the built-in plugins
from . import runtime  # noqa: E402,F401  - installs the launcher behind kernel[n](*args)
from .runtime import derivatives as _derivatives  # noqa: E402,F401  - gpuc.derivative/jvp called from Python
from .runtime.adjoint import adjoint  # noqa: E402
from .runtime.tape import Tape  # noqa: E402  - reverse mode over many launches (docs/autodiff.md)
from .runtime.library import load_library  # noqa: E402  - libraries from `gpuc compile --emit lib` (docs/aot.md)

__all__ = [
    "CompilationError", "CompileResult", "CompileState", "CompiledFunction", "CompilerConfig", "CompilerError",
    "CompilerJob", "GCNTarget", "IRIssue", "IRSource", "InternalCompilerError", "NativeTarget", "PTXTarget",
    "Plugin", "PluginError", "SPIRVTarget", "Target", "ValidationError", "__version__", "build_pipeline",
    "code_llvm", "code_native", "compile", "compile_module", "load_library", "make_plugin", "plugin_scope", "register_plugin",
    "registered_plugins", "unregister_plugin",
    # the Python frontend
    "Array", "adjoint", "atomic_add", "atomic_and", "atomic_cas", "atomic_dec", "atomic_exch", "atomic_inc",
    "atomic_max", "atomic_min", "atomic_or", "atomic_sub", "atomic_xor", "bool_", "boolean", "clz", "deferred",
    "derivative", "ffs", "float32", "float64", "fma", "func", "grad", "index", "int32", "int64", "jvp", "kernel",
    "marker", "ndrange", "popc", "uint32", "uint64", "value_and_grad", "vjp",
    # the block model (docs/frontend.md, "Blocks")
    "ballot", "barrier", "barrier_all", "barrier_any", "barrier_count", "block_dim", "block_index", "fence",
    "fence_block", "grid_barrier", "grid_dim", "lane_index", "local", "shared", "shfl_down", "shfl_idx", "shfl_up",
    "shfl_xor", "syncwarp", "thread_index", "vote_all", "vote_any", "warp_size",
]
__all__ += ["complex64", "complex128"]
__all__ += ["float16", "int8", "int16", "uint8", "uint16"]
__all__ += ["Tape"]

# What people coming from CUDA or Numba reach for, and what gpuc has instead.
from .frontend.blocks import NUMBA_CUDA_SPELLINGS  # noqa: E402

_INSTEAD = {
    **NUMBA_CUDA_SPELLINGS,
    "atomic": "gpuc's atomics are functions named after numba's cuda.atomic ones: gpuc.atomic_add(a, i, v), "
              "atomic_sub, atomic_min, atomic_max, atomic_exch, atomic_and, atomic_or, atomic_xor, atomic_inc, "
              "atomic_dec and atomic_cas(a, i, expected, new)",
    "compare_and_swap": "gpuc.atomic_cas(a, i, expected, new) (with an index, as numba's cuda.atomic.cas)",
    **dict.fromkeys(("atomic_nanmax", "atomic_nanmin"),
                    "gpuc.atomic_max / gpuc.atomic_min on floats already let a NaN operand lose (IEEE maxNum/minNum)"),
    **dict.fromkeys(("popcount", "bit_count"), "gpuc.popc(x) counts the bits set in an integer"),
    "jit": "compile with @gpuc.kernel (an entry point) or @gpuc.func (a device function)",
    **dict.fromkeys(("gradient", "diff", "differentiate", "autograd", "jacfwd", "jacobian", "hessian"),
                    "gpuc differentiates @gpuc.func functions: gpuc.grad(f, *args) (reverse mode, every float "
                    "argument at once), gpuc.derivative(f, x, *consts) and gpuc.jvp(f, primals, tangents) (forward "
                    "mode); nest them for higher orders"),
    **dict.fromkeys(("backward", "jacrev"),
                    "gpuc.vjp(f, primals, cotangent) pulls a cotangent back through a func; gpuc.adjoint(kernel) is "
                    "the reverse sweep of a whole kernel; gpuc.Tape records many launches and runs their adjoints "
                    "backwards (tape.backward)"),
    **dict.fromkeys(("tape", "GradientTape"),
                    "with gpuc.Tape() as tape: records kernel launches; tape.backward(loss) runs their adjoints in "
                    "reverse and tape.gradients[x] is the gradient of an input array x"),
}
_IN_KERNELS = ("gpuc.index, gpuc.ndrange, gpuc.atomic_add and the other atomics (atomic_sub, atomic_min, "
               "atomic_max, atomic_exch, atomic_and, atomic_or, atomic_xor, atomic_inc, atomic_dec, atomic_cas), "
               "the block model (gpuc.thread_index, block_index, block_dim, grid_dim, lane_index, warp_size, "
               "gpuc.shared.array, gpuc.shared.dynamic, gpuc.local.array, gpuc.barrier, barrier_count, barrier_all, "
               "barrier_any, fence, fence_block, syncwarp, shfl_idx, shfl_up, shfl_down, shfl_xor, ballot, vote_any, "
               "vote_all), gpuc.popc, gpuc.clz, gpuc.ffs, gpuc.fma, gpuc.deferred (function pointers), "
               "gpuc.derivative and gpuc.jvp (forward-mode derivatives), gpuc.grad, gpuc.value_and_grad and "
               "gpuc.vjp (reverse mode), gpuc.marker(...) objects, the types "
               "gpuc.bool_, gpuc.int8, gpuc.uint8, gpuc.int16, gpuc.uint16, gpuc.int32, gpuc.int64, gpuc.uint32, "
               "gpuc.uint64, gpuc.float16, gpuc.float32, gpuc.float64, gpuc.complex64, gpuc.complex128, "
               "and gpuc.Array[dtype, ndim] for signatures")


def __getattr__(name: str):
    """A missing attribute's error says what gpuc has instead (also inside kernels, where it is a located error)."""
    if name.startswith("__"):
        raise AttributeError(f"module 'gpuc' has no attribute {name!r}")
    import difflib

    close = difflib.get_close_matches(name, __all__, n=3, cutoff=0.75)
    advice = _INSTEAD.get(name) or (f"did you mean {' or '.join('gpuc.' + c for c in close)}?" if close else
                                    f"inside kernels gpuc offers {_IN_KERNELS}")
    raise AttributeError(f"module 'gpuc' has no attribute {name!r}: {advice}")
