"""The compiler driver: jobs and configs, the staged pipeline with plugin callback points, reflection."""

from .config import CompiledFunction, CompilerConfig, CompilerJob, IRSource
from .driver import OUTPUTS, STAGES, CompileResult, ModuleResult, code_llvm, code_native, compile, compile_module
from ..errors import (CompilationError, CompilerError, InternalCompilerError, IRIssue, PluginError,
                     SourceLocation, ValidationError)
from .pipeline import Pipeline, build_pipeline
from .plugins import POINTS, Plugin, make_plugin, register_plugin, registered_plugins, unregister_plugin
from .trace import Trace

__all__ = [
    "CompilationError", "CompileResult", "CompiledFunction", "CompilerConfig", "CompilerError", "CompilerJob",
    "IRIssue", "IRSource", "InternalCompilerError", "ModuleResult", "OUTPUTS", "POINTS", "Pipeline", "Plugin",
    "PluginError", "STAGES", "SourceLocation", "Trace", "ValidationError", "build_pipeline", "code_llvm",
    "code_native", "compile", "compile_module", "make_plugin", "register_plugin", "registered_plugins",
    "unregister_plugin",
]
