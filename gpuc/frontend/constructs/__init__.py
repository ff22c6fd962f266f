"""gpuc's calls in kernels, each module registering its handlers (gpuc/frontend/core/registry.py):
Python's builtins, NumPy's scalar types and functions, atomics, bit operations, the block model,
function pointers, complex numbers' calls and derivatives (forward and reverse). Importing this
package registers them all; none of them imports the passes."""

from . import builtins, numpy_scalars, numpy_math, atomics, bitops, blocks, pointers, autodiff, reverse  # noqa: F401
from . import printing  # noqa: F401
from . import complex_calls  # noqa: F401  - last: a layer over the calls the others registered
