"""The Python frontend: @gpuc.func / @gpuc.kernel functions, typed per signature and lowered to LLVM IR.

Layers, each importing only those above it in this list (tests/test_layers.py checks it):

- `core/`: the types, type specs, the decorators' functions, the stubs of the index space, plans and
  the `Handler` base, the typing environment, porting hints, and `registry.py`, through which every
  construct makes itself known;
- `numeric/`: operators on numbers and their promotion, complex numbers, the small dtypes and the math
  library: what typing and lowering use for every operator;
- `arrays/`: array views, copies, pairwise sums, array methods and global arrays;
- `constructs/` and `passes/`, side by side: the builtins and gpuc's calls (atomics, bit operations,
  the block model, function pointers, NumPy's functions, derivatives), each registering itself; and
  inference, lowering and iteration, which reach constructs only through the registry;
- `program.py`: a function and a signature as the compiler's input, and its fingerprint.

This file assembles them: importing a construct registers it, and the public names below are the
registry's (docs/frontend.md, "Adding a builtin").
"""

from .core import registry
from .core.functions import Func, GpucFunction, Kernel, func, kernel
from .core.intrinsics import Marker
from .core.types import (SCALARS, Array, ArrayType, ComplexType, FunctionPointerType, GType, ScalarType, TupleType,
                         as_type, promote)
from . import constructs  # noqa: F401  - registers every construct
from .program import FunctionSource

#: What a kernel can call from gpuc, as the registry lists it: {public name: PublicName}.
PUBLIC = registry.public_names()
globals().update({name: entry.obj for name, entry in PUBLIC.items()})

__all__ = ["Array", "ArrayType", "ComplexType", "Func", "FunctionPointerType", "FunctionSource", "GType",
           "GpucFunction", "Kernel", "Marker", "SCALARS", "ScalarType", "TupleType", "as_type", "func", "kernel",
           "promote", *PUBLIC]
