"""gpuc kernels inside JAX programs: `jax_kernel(kernel, ...)` (docs/jax.md)."""

from __future__ import annotations

from .kernel import JaxKernel, jax_kernel

__all__ = ["JaxKernel", "jax_kernel"]
