"""float16 conversions for x86 CPUs without F16C: the two functions LLVM's backend calls there.

Without F16C the x86 backend converts between `half` and `float` by calling compiler-rt's
`__extendhfsf2` and `__truncsfhf2`, which the JIT does not find in a Python process. NativeTarget
links these definitions into modules that use `half` when its features lack F16C. They are kept
through the optimizer (`llvm.compiler.used`: the calls appear only at code generation, and gpuc
internalizes every function but the entry points, so the calls bind to these copies). `__truncsfhf2` rounds to nearest even as the
hardware does; NaNs become the quiet NaN 0x7e00 with their sign.
"""

from __future__ import annotations

from ..llvm import Module

HALF_CONVERSIONS = r"""
@llvm.compiler.used = appending global [2 x ptr] [ptr @__extendhfsf2, ptr @__truncsfhf2], section "llvm.metadata"

define weak float @__extendhfsf2(half %h) nounwind {
  %bits = bitcast half %h to i16
  %x = zext i16 %bits to i32
  %magnitude = and i32 %x, 32767
  %shifted = shl i32 %magnitude, 13
  %exponent = and i32 %shifted, 260046848
  %rebiased = add i32 %shifted, 939524096
  %is_special = icmp eq i32 %exponent, 260046848
  %special = add i32 %rebiased, 939524096
  %is_small = icmp eq i32 %exponent, 0
  %small_bits = add i32 %rebiased, 8388608
  %small_float = bitcast i32 %small_bits to float
  %small_value = fsub float %small_float, 0x3F10000000000000
  %small = bitcast float %small_value to i32
  %pick1 = select i1 %is_special, i32 %special, i32 %rebiased
  %pick2 = select i1 %is_small, i32 %small, i32 %pick1
  %sign = and i32 %x, 32768
  %sign32 = shl i32 %sign, 16
  %result = or i32 %pick2, %sign32
  %f = bitcast i32 %result to float
  ret float %f
}

define weak half @__truncsfhf2(float %f) nounwind {
  %u0 = bitcast float %f to i32
  %sign = and i32 %u0, -2147483648
  %u = xor i32 %u0, %sign
  %is_big = icmp uge i32 %u, 1199570944
  %is_nan = icmp ugt i32 %u, 2139095040
  %big = select i1 %is_nan, i32 32256, i32 31744
  %is_small = icmp ult i32 %u, 947912704
  %uf = bitcast i32 %u to float
  %added = fadd float %uf, 5.000000e-01
  %added_bits = bitcast float %added to i32
  %small = sub i32 %added_bits, 1056964608
  %odd_bit = lshr i32 %u, 13
  %odd = and i32 %odd_bit, 1
  %biased = add i32 %u, -939520001
  %rounded = add i32 %biased, %odd
  %normal = lshr i32 %rounded, 13
  %pick1 = select i1 %is_small, i32 %small, i32 %normal
  %pick2 = select i1 %is_big, i32 %big, i32 %pick1
  %sign16 = lshr i32 %sign, 16
  %result = or i32 %pick2, %sign16
  %r16 = trunc i32 %result to i16
  %h = bitcast i16 %r16 to half
  ret half %h
}
"""

NAMES = ("__extendhfsf2", "__truncsfhf2")


def needs_half_conversions(triple: str, features: str, module: Module) -> bool:
    """Whether code generation for this x86 CPU will call the conversions: no F16C, and `half` in use."""
    if not triple.startswith(("x86_64", "i386", "i686")) or "+f16c" in features.split(","):
        return False
    if any(fn.name in NAMES for fn in module.functions):  # defined (or declared) there already
        return False
    return " half" in str(module)


def link_half_conversions(module: Module) -> list[str]:
    """Link the weak definitions into `module`; returns the names of what was linked."""
    library = Module.parse(HALF_CONVERSIONS, module.context, name="<gpuc half conversions>")
    library.triple, library.data_layout = module.triple, module.data_layout
    module.link(library)
    return ["half conversions"]
