"""Built-in plugins, registered at import through the same public API a third party would use."""

from ..compiler import register_plugin
from . import context

#: The context-propagation plugin (markers gpuc.ctx.index and gpuc.ctx.ndrange), resolved early so
#: that it also works with optimize=False; built in, so configs that name their own plugin set keep it.
CONTEXT = register_plugin("gpuc.ctx", early_callback=context.resolve, markers=context.MARKERS, builtin=True)

__all__ = ["CONTEXT", "context"]
