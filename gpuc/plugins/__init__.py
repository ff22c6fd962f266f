"""Built-in plugins, registered at import through the same public API a third party would use."""

from ..compiler import register_plugin
from . import clamp_split, context, deferred, vectorize
from .autodiff import plugin as autodiff
from .autodiff import sums as autodiff_sums

#: The context-propagation plugin (markers gpuc.ctx.index and gpuc.ctx.ndrange), resolved early so
#: that it also works with optimize=False; built in, so configs that name their own plugin set keep it.
CONTEXT = register_plugin("gpuc.ctx", early_callback=context.resolve, markers=context.MARKERS, builtin=True)

#: Deferred compilation (marker gpuc.lookup): compiles the functions gpuc.deferred points to, early,
#: before plugins of default priority at that point (docs/deferred.md).
DEFERRED = register_plugin(deferred.MARKER, early_callback=deferred.resolve, priority=deferred.PRIORITY,
                           builtin=True)

#: Automatic differentiation (markers gpuc.autodiff.fwd.* and .rev.*): tangent and gradient functions
#: built from optimized IR at the optimized point, inner requests first (docs/autodiff.md); adjoints of
#: kernels that use blocks at the early point, before the context plugin lowers the block model.
AUTODIFF = register_plugin("gpuc.autodiff", pipeline_callback=autodiff.resolve, markers=autodiff.MARKERS,
                           early_callback=autodiff.resolve_blocks, priority=autodiff.PRIORITY, builtin=True)

#: Adds of every work item into one element of a shadow (marker gpuc.autodiff.sum.*, called by multi-thread
#: CPU adjoints): summed per chunk of items in the CPU's launch entry, at the last point (autodiff/sums.py).
AUTODIFF_SUMS = register_plugin("gpuc.autodiff.sums", last_callback=autodiff_sums.resolve,
                                markers=(autodiff_sums.MARKER,), builtin=True)

#: Stencils on the CPU (marker gpuc.cpu.split_clamps, declared by the CPU launch entry): its loop over
#: index 0 runs the range where neighbour clamps return their input without them, at the simplified point.
CLAMP_SPLIT = register_plugin(clamp_split.MARKER, simplified_callback=clamp_split.resolve,
                              pipeline_callback=clamp_split.resolve, builtin=True)

#: Vectorization across work items (marker gpuc.cpu.vectorize, declared by the CPU launch entry with
#: CompilerConfig(vectorize=True)): the loop over index 0 runs several items at once in vector lanes,
#: at the simplified point, before the clamp split (docs/targets.md).
VECTORIZE = register_plugin(vectorize.MARKER, simplified_callback=vectorize.resolve,
                            pipeline_callback=vectorize.resolve, priority=vectorize.PRIORITY, builtin=True)

__all__ = ["AUTODIFF", "AUTODIFF_SUMS", "CLAMP_SPLIT", "CONTEXT", "DEFERRED", "VECTORIZE", "autodiff", "autodiff_sums", "clamp_split", "context",
           "deferred", "vectorize"]
