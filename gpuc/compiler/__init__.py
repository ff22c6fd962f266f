"""The compiler driver: jobs and configs, the source protocol, the staged pipeline with plugin
callback points and the compile state plugins work with, reflection."""

from . import cache
from .config import CompilerConfig, CompilerJob
from .cfg import dominates, immediate_dominators
from .depth import run_deep
from .driver import OUTPUTS, STAGES, CompileResult, ModuleResult, code_llvm, code_native, compile, compile_module
from ..targets.cfg import natural_loop, on_cycle, reverse_postorder
from ..errors import (CompilationError, CompilerError, InternalCompilerError, IRIssue, PluginError,
                     SourceLocation, ValidationError)
from .linking import link_into
from .pipeline import Pipeline, build_pipeline
from .plugins import (POINTS, Plugin, make_plugin, plugin_scope, register_plugin, registered_plugins,
                      unregister_plugin)
from .source import CompiledFunction, IRSource, Source, as_source
from .state import CompileState
from .trace import Trace, TransformationRecord
from .validate import site as source_site
from .workarounds import freeze_reads_before_writes

__all__ = [
    "CompilationError", "CompileResult", "CompileState", "CompiledFunction", "CompilerConfig", "CompilerError",
    "CompilerJob", "IRIssue", "IRSource", "InternalCompilerError", "ModuleResult", "OUTPUTS", "POINTS", "Pipeline",
    "Plugin", "PluginError", "STAGES", "Source", "SourceLocation", "Trace", "TransformationRecord",
    "ValidationError", "as_source",
    "build_pipeline", "cache", "code_llvm", "code_native", "compile", "compile_module", "dominates",
    "freeze_reads_before_writes", "immediate_dominators",
    "link_into", "make_plugin", "natural_loop", "on_cycle", "reverse_postorder",
    "plugin_scope", "register_plugin", "registered_plugins", "run_deep", "source_site", "unregister_plugin",
]
