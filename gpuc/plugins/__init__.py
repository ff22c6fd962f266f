"""Built-in plugins, registered at import through the same public API a third party would use."""

from ..compiler import register_plugin
from ..compiler.plugins import mark_builtin
from . import context

#: The context-propagation plugin (markers gpuc.ctx.index and gpuc.ctx.ndrange), resolved early so
#: that it also works with optimize=False.
CONTEXT = register_plugin("gpuc.ctx", early_callback=context.resolve, markers=context.MARKERS)
mark_builtin(CONTEXT.name)  # kept in configs that name their own plugin set

__all__ = ["CONTEXT", "context"]
