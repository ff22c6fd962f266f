"""gpuc: a GPU/CPU compiler toolkit for Python on LLVM, with an open, plugin-driven optimization pipeline."""

__version__ = "0.1.0"

from .compiler import (  # noqa: E402
    CompilationError, CompiledFunction, CompileResult, CompilerConfig, CompilerError, CompilerJob, IRIssue,
    IRSource, InternalCompilerError, Plugin, PluginError, ValidationError, build_pipeline, code_llvm,
    code_native, compile, compile_module, make_plugin, register_plugin, registered_plugins, unregister_plugin)
from .targets import GCNTarget, NativeTarget, PTXTarget, SPIRVTarget, Target  # noqa: E402
from .frontend import (Array, atomic_add, bool_, boolean, float32, float64, fma, func, index,  # noqa: E402
                       int32, int64, kernel, marker, ndrange, uint32, uint64)
from . import plugins  # noqa: E402,F401  - registers the built-in plugins
from . import runtime  # noqa: E402,F401  - installs the launcher behind kernel[n](*args)

__all__ = [
    "CompilationError", "CompileResult", "CompiledFunction", "CompilerConfig", "CompilerError", "CompilerJob",
    "GCNTarget", "IRIssue", "IRSource", "InternalCompilerError", "NativeTarget", "PTXTarget", "Plugin",
    "PluginError", "SPIRVTarget", "Target", "ValidationError", "__version__", "build_pipeline", "code_llvm",
    "code_native", "compile", "compile_module", "make_plugin", "register_plugin", "registered_plugins",
    "unregister_plugin",
    # the Python frontend
    "Array", "atomic_add", "bool_", "boolean", "float32", "float64", "fma", "func", "index", "int32", "int64",
    "kernel", "marker", "ndrange", "uint32", "uint64",
]
