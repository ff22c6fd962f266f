"""Forward-mode automatic differentiation on LLVM IR (docs/autodiff.md): the tangent transformation."""

from .kinds import carries_floats
from .mathrules import DIFFERENTIABLE
from .tangent import tangent_function, tangent_name

__all__ = ["DIFFERENTIABLE", "carries_floats", "tangent_function", "tangent_name"]
