"""IR snippets and callbacks shared by the compiler tests (imported by name); tools come from support.toolchain."""

from __future__ import annotations

from gpuc.llvm import CallInst

from support.toolchain import find_ptxas, find_spirv_val  # noqa: F401  (re-exported for the tests)

# The seed scenario: the marker is called through an internal helper that the inliner folds
# into @kernel during optimization.
SEED_IR = """\
declare void @gpucompiler.mark(i64)

define internal void @helper(i64 %x) {
  call void @gpucompiler.mark(i64 %x)
  ret void
}

define void @kernel(ptr %p, i64 %x) {
  call void @helper(i64 %x)
  store i64 %x, ptr %p
  ret void
}
"""

# A GPU-shaped kernel with a global-memory pointer argument; valid on every target.
STORE_KERNEL_IR = """\
define void @kernel(ptr addrspace(1) %p, i32 %x) {
  %y = mul i32 %x, 3
  store i32 %y, ptr addrspace(1) %p
  ret void
}
"""

# A PTX kernel calling a libdevice math function (linked on demand).
SINF_KERNEL = """\
declare float @__nv_sinf(float)

define void @kernel(ptr addrspace(1) %p, float %x) {
  %s = call float @__nv_sinf(float %x)
  store float %s, ptr addrspace(1) %p
  ret void
}
"""


def erase_unused_calls(job, marker, module) -> bool:
    """The seed's pipeline_callback: erase every call to `marker` whose result is unused."""
    changed = False
    for use in list(marker.uses):
        call = use.user
        if isinstance(call, CallInst) and not call.uses:
            call.erase()
            changed = True
    return changed


def callers_of(marker) -> list[str]:
    """Names of the functions containing a call to `marker`."""
    return sorted({use.user.function.name for use in marker.uses})

