"""What a call in the launch loop's body becomes in lanes: nothing (hints, the launch loop's markers), a
call of libmvec's variant, one vector intrinsic, or a call per lane."""

from __future__ import annotations

from gpuc.abi import SPLIT_MARKER, VECTORIZE_MARKER
from gpuc.llvm import Function, VectorType

#: Calls that vanish from the vector loop (hints and the launch loop's markers).
SKIPPED = {"llvm.assume", "llvm.lifetime.start", "llvm.lifetime.end", "llvm.experimental.noalias.scope.decl",
           "llvm.dbg.value", "llvm.dbg.declare", "llvm.dbg.assign", "llvm.invariant.start", "llvm.invariant.end",
           "llvm.sideeffect"}
MARKERS = {SPLIT_MARKER, VECTORIZE_MARKER}
#: The autodiff plugin's `gpuc.autodiff.sum.<float type>(ptr, value)`: add `value` into the element at `ptr`, in any
#: order with the other items' adds, which it resolves later (gpuc/plugins/autodiff/sums.py). Where `ptr` is one
#: address for every item, lanes make one call with the ordered sum of their values (emit.py's `summed`).
SUM_PREFIX = "gpuc.autodiff.sum."
#: Intrinsics computed lane by lane, overloaded on their result's type only: one vector call does them.
ELEMENTWISE = {"llvm.fabs", "llvm.sqrt", "llvm.fma", "llvm.fmuladd", "llvm.minnum", "llvm.maxnum", "llvm.minimum",
               "llvm.maximum", "llvm.copysign", "llvm.floor", "llvm.ceil", "llvm.trunc", "llvm.rint",
               "llvm.nearbyint", "llvm.round", "llvm.roundeven", "llvm.smin", "llvm.smax", "llvm.umin", "llvm.umax",
               "llvm.abs", "llvm.ctpop", "llvm.ctlz", "llvm.cttz", "llvm.bswap", "llvm.bitreverse", "llvm.fshl",
               "llvm.fshr", "llvm.sadd.sat", "llvm.uadd.sat", "llvm.ssub.sat", "llvm.usub.sat"}
#: Intrinsics overloaded on their result's and their argument's type (saturating conversions).
CONVERSIONS = {"llvm.fptosi.sat", "llvm.fptoui.sat"}
#: Intrinsics that touch no memory but have no single vector form here: they run lane by lane.
MEMORY_FREE_PREFIXES = ("llvm.powi", "llvm.ldexp", "llvm.frexp", "llvm.exp10", "llvm.is.fpclass", "llvm.lrint",
                        "llvm.llrint", "llvm.lround", "llvm.llround", "llvm.smul.with.overflow",
                        "llvm.umul.with.overflow", "llvm.sadd.with.overflow", "llvm.uadd.with.overflow",
                        "llvm.ssub.with.overflow", "llvm.usub.with.overflow", "llvm.fptosi.sat", "llvm.fptoui.sat",
                        "llvm.scmp", "llvm.ucmp")


def callee_name(call) -> str | None:
    callee = call.callee
    return callee.name if isinstance(callee, Function) else None


class Calls:
    """What a call in the body is: skipped, vectorized (libmvec or an elementwise intrinsic), free of
    memory effects, or something else (lane by lane, and opaque to the memory test)."""

    def __init__(self, variants):
        self.variants = variants or {}

    def kind(self, call) -> str:
        name = callee_name(call)
        if name is None:
            return "other"
        if name in SKIPPED or name in MARKERS or name.startswith("llvm.dbg.") or call.intrinsic_name in SKIPPED:
            return "skip"  # (intrinsic_name: `llvm.lifetime.start` for `llvm.lifetime.start.p0`)
        if name.startswith(SUM_PREFIX) and _all_scalar(call) and len(call.args) == 2:
            return "sum"
        if name in self.variants and _all_scalar(call):
            return "libmvec"
        base = call.intrinsic_name
        if base in ELEMENTWISE and _all_scalar(call):
            return "elementwise"
        if base in CONVERSIONS and _all_scalar(call):
            return "conversion"
        if base is not None and base.startswith(MEMORY_FREE_PREFIXES):
            return "pure"
        return "other"

    def pure(self, call) -> bool:
        return self.kind(call) in ("skip", "libmvec", "elementwise", "conversion", "pure")


def _all_scalar(call) -> bool:
    return not isinstance(call.type, VectorType) and not any(isinstance(a.type, VectorType) for a in call.args)
