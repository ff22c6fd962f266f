"""gpuc: a GPU/CPU compiler toolkit for Python on LLVM, with an open, plugin-driven optimization pipeline."""

from ._version import __version__  # noqa: E402,F401

from .compiler import (  # noqa: E402
    CompilationError, CompiledFunction, CompileResult, CompileState, CompilerConfig, CompilerError, CompilerJob,
    IRIssue, IRSource, InternalCompilerError, Plugin, PluginError, ValidationError, build_pipeline, code_llvm,
    cache, code_native, compile, compile_module, make_plugin, plugin_scope, register_plugin, registered_plugins,
    unregister_plugin)
from .errors import KernelError, LaunchWarning  # noqa: E402
from .targets import GCNTarget, NativeTarget, PTXTarget, SPIRVTarget, Target  # noqa: E402
from . import frontend as _frontend  # noqa: E402
from .frontend import func, kernel  # noqa: E402
globals().update({_name: _entry.obj for _name, _entry in _frontend.PUBLIC.items()})  # gpuc.atomic_add, gpuc.float32, ...
from . import plugins  # noqa: E402,F401  - registers the built-in plugins
from . import runtime  # noqa: E402,F401  - installs the launcher behind kernel[n](*args)
from .runtime import derivatives as _derivatives  # noqa: E402,F401  - gpuc.derivative/jvp called from Python
from .runtime.adjoint import adjoint  # noqa: E402
from .runtime.tangent import tangent  # noqa: E402  - forward mode over a whole launch (docs/autodiff.md)
from .runtime.tape import Tape  # noqa: E402  - reverse mode over many launches (docs/autodiff.md)
from .runtime.prepared import PreparedLaunch  # noqa: E402  - what kernel.prepare returns (docs/launching.md)
from .runtime.library import load_library  # noqa: E402  - libraries from `gpuc compile --emit lib` (docs/aot.md)

__all__ = [
    "CompilationError", "CompileResult", "CompileState", "CompiledFunction", "CompilerConfig", "CompilerError",
    "CompilerJob", "GCNTarget", "IRIssue", "IRSource", "InternalCompilerError", "NativeTarget", "PTXTarget",
    "Plugin", "PluginError", "SPIRVTarget", "Target", "ValidationError", "__version__", "build_pipeline",
    "code_llvm", "code_native", "compile", "compile_module", "load_library", "make_plugin", "plugin_scope", "register_plugin",
    "registered_plugins", "unregister_plugin",
    # the Python frontend: the decorators, then what kernels call, as the frontend's registry lists it
    "adjoint", "func", "kernel", "tangent", *_frontend.PUBLIC,
]
__all__ += ["Tape"]
__all__ += ["LaunchWarning", "PreparedLaunch"]  # docs/debugging.md, "Launch geometry"; docs/launching.md

# What people coming from CUDA or Numba reach for, and what gpuc has instead.
from .frontend.core.hints import NUMBA_CUDA_SPELLINGS  # noqa: E402

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
                    "mode); nest them for higher orders; gpuc.tangent(kernel) and gpuc.adjoint(kernel) differentiate "
                    "whole kernels"),
    **dict.fromkeys(("backward", "jacrev"),
                    "gpuc.vjp(f, primals, cotangent) pulls a cotangent back through a func; gpuc.adjoint(kernel) is "
                    "the reverse sweep of a whole kernel; gpuc.Tape records many launches and runs their adjoints "
                    "backwards (tape.backward)"),
    **dict.fromkeys(("tape", "GradientTape"),
                    "with gpuc.Tape() as tape: records kernel launches; tape.backward(loss) runs their adjoints in "
                    "reverse and tape.gradients[x] is the gradient of an input array x"),
}


def _in_kernels() -> str:
    """What kernels can call from gpuc, by group, in the registry's order."""
    groups: dict[str, list[str]] = {}
    for name, entry in _frontend.PUBLIC.items():
        groups.setdefault(entry.group, []).append(f"gpuc.{name}")
    return "; ".join(f"{group}: {', '.join(names)}" if group else ", ".join(names) for group, names in groups.items())


def __getattr__(name: str):
    """A missing attribute's error says what gpuc has instead (also inside kernels, where it is a located error)."""
    if name.startswith("__"):
        raise AttributeError(f"module 'gpuc' has no attribute {name!r}")
    import difflib

    close = difflib.get_close_matches(name, __all__, n=3, cutoff=0.75)
    advice = _INSTEAD.get(name) or (f"did you mean {' or '.join('gpuc.' + c for c in close)}?" if close else
                                    f"inside kernels gpuc offers {_in_kernels()}")
    raise AttributeError(f"module 'gpuc' has no attribute {name!r}: {advice}")
