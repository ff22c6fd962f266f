"""Vector math on the CPU: glibc's libmvec variants of math functions, named for LLVM's loop vectorizer.

A loop calling `llvm.sin.f64` is vectorized by LLVM into `llvm.sin.v8f64`, which the backend splits
into eight scalar calls of libm's `sin`: the loop runs no faster than its scalar form. libmvec has
the same functions on vectors (`_ZGVeN8v_sin` takes eight doubles in a zmm register), in the x86
vector function ABI's mangling: `_ZGV<isa>N<lanes><v per argument>_<name>`, isa `b` (SSE2, 128-bit
registers), `d` (AVX2, 256-bit) or `e` (AVX-512, 512-bit).

Before the optimize segment (`Target.annotate_for_vectorizer`, `annotate`), every call of a mapped
function gets the attribute `vector-function-abi-variant` naming the variant of the widest ISA the
target's features have, with its declaration: what LLVM's `inject-tli-mappings` pass adds for
`-vector-library=LIBMVEC`, but per module instead of through a process-global command-line option,
so each target chooses (`NativeTarget(vector_math=False)` keeps libm's calls). The vectorizer weighs
the variant in its cost model. After optimization (`Target.finish_module`, `call_variants`) the calls
it left call the same variant, so that a function has one result per argument wherever it is called.
Code that calls a variant needs libmvec: the JIT finds it in the process (the host's target loads it,
`host_libmvec`); an object or library built from such code links with `-lmvec`.

Accuracy: glibc documents libmvec's functions as at most 4 ulp from the exact result (libm's are
mostly within 1-2); docs/targets.md gives the bounds tests/targets/test_vector_math.py checks.
"""

from __future__ import annotations

import ctypes
import threading

from ..llvm import Builder, CallInst, Constant, ConstantInt, FunctionType, VectorType

#: The functions mapped, by C name (the float32 one adds "f"), with their argument count. Each has
#: `b`, `c`, `d` and `e` variants in float64 and float32 in libmvec since glibc 2.35.
FUNCTIONS = {
    "sin": 1, "cos": 1, "tan": 1, "asin": 1, "acos": 1, "atan": 1, "atan2": 2,
    "sinh": 1, "cosh": 1, "tanh": 1, "asinh": 1, "acosh": 1, "atanh": 1,
    "exp": 1, "exp2": 1, "expm1": 1, "log": 1, "log2": 1, "log10": 1, "log1p": 1, "pow": 2,
    "cbrt": 1, "erf": 1, "erfc": 1, "hypot": 2,
}
#: The x86 vector ABI's ISA letters, widest first: (letter, the LLVM feature it needs, register bits).
ISAS = (("e", "avx512f", 512), ("d", "avx2", 256), ("b", "sse2", 128))
# Attribute LLVM's vectorizer reads on a call: the vector variants it may call instead.
VARIANT_ATTRIBUTE = "vector-function-abi-variant"
# Where a 512-bit variant is called, a CPU that prefers 256-bit vectors would split its argument into
# two ymm registers unless the caller keeps 512-bit vectors legal (clang sets the same attribute).
_MIN_LEGAL_WIDTH = "min-legal-vector-width"

LIBRARY = "libmvec.so.1"


def isas(triple: str, features: str) -> tuple[tuple[str, int], ...]:
    """(ISA letter, register bits) of the libmvec variants code for `triple` with `features` may call:
    x86-64 Linux with glibc only (SSE2 is the architecture's baseline)."""
    arch, _, rest = triple.partition("-")
    if arch != "x86_64" or "linux" not in rest or "gnu" not in rest:
        return ()
    enabled = {"sse2"}
    for feature in features.split(","):  # in order: a later "-avx2" takes back an earlier "+avx2"
        if feature[:1] == "+":
            enabled.add(feature[1:])
        elif feature[:1] == "-":
            enabled.discard(feature[1:])
    # A variant needs its ISA and every narrower one (AVX-512F implies AVX2).
    found = []
    for letter, feature, bits in reversed(ISAS):
        if feature not in enabled:
            break
        found.insert(0, (letter, bits))
    return tuple(found)


def variants(isa) -> dict[str, tuple[str, int, int]]:
    """Scalar callee name -> (vector function, lanes, register bits) of the ISA `isa` ((letter, bits),
    one of `isas`) for every mapped function: both its LLVM intrinsic (`llvm.sin.f64`, where LLVM has
    one) and its libm name (`sin`, `sinf`)."""
    if isa is None:
        return {}
    letter, width = isa
    table = {}
    for name, arity in FUNCTIONS.items():
        for bits, suffix in ((64, ""), (32, "f")):
            lanes = width // bits
            table[f"llvm.{name}.f{bits}"] = table[name + suffix] = (
                f"_ZGV{letter}N{lanes}{'v' * arity}_{name}{suffix}", lanes, width)
    return table


def annotate(module, table) -> int:
    """Give each call of a function in `table` the attribute naming its vector variant, and declare
    it; returns the number of calls annotated."""
    annotated = 0
    for fn in [f for f in module.functions if f.is_declaration and f.name in table]:
        calls = [use.user for use in fn.uses if isinstance(use.user, CallInst) and use.user.callee == fn]
        if not calls:
            continue
        vector_name, lanes, bits = table[fn.name]
        _declare(module, fn, vector_name, lanes)
        value = f"{vector_name[:vector_name.index('_', 4) + 1]}{fn.name}({vector_name})"
        if not fn.name.startswith("llvm."):
            # libm's functions may set errno, which makes them calls the vectorizer keeps; kernels
            # cannot read errno (and libmvec sets none): the call reads and writes no memory.
            fn.attributes.add("memory", 0)
        for call in calls:
            call.attributes.add(VARIANT_ATTRIBUTE, value)
            caller = call.function
            if bits > 256 and _MIN_LEGAL_WIDTH not in caller.attributes:
                caller.attributes.add(_MIN_LEGAL_WIDTH, str(bits))
            annotated += 1
    return annotated


def call_variants(module, table) -> int:
    """After vectorization: every call of a mapped function the vectorizer left (scalar calls, in the
    loops' remainders and in code it did not vectorize, and vector calls of other widths, which the
    backend would split into libm calls) calls the vector variant instead, its arguments spread over
    the variant's lanes. So each function computes the same result for the same argument wherever
    the call is: in a vector lane or not, whatever the thread count or the launch size (libmvec's
    SSE, AVX2 and AVX-512 variants differ in their last bits). Returns the number of calls rewritten."""
    rewritten, masks = 0, {}
    for fn in list(module.functions):
        key = _scalar_key(fn.name) if fn.is_declaration else None
        if key not in table:
            continue
        calls = [use.user for use in fn.uses if isinstance(use.user, CallInst) and use.user.callee == fn]
        if not calls:
            continue
        vector_name, lanes, bits = table[key]
        variant = _declare(module, fn, vector_name, lanes)
        with Builder(module.context) as b:
            for call in calls:
                b.position_before(call)
                result = _through_variant(b, module.context.i32, variant, lanes, call.args, call.type, masks)
                call.replace_all_uses_with(result)
                call.erase()
                caller = result.function
                if bits > 256 and _MIN_LEGAL_WIDTH not in caller.attributes:
                    caller.attributes.add(_MIN_LEGAL_WIDTH, str(bits))
                rewritten += 1
    return rewritten


def _scalar_key(name: str) -> str:
    """`llvm.sin.v4f64` -> `llvm.sin.f64` (a vector intrinsic's scalar form); other names unchanged."""
    if name.startswith("llvm."):
        base, _, suffix = name.rpartition(".")
        if suffix.startswith("v") and "f" in suffix:
            return f"{base}.{suffix[suffix.index('f'):]}"
    return name


def _declare(module, scalar_fn, vector_name: str, lanes: int):
    """The declaration of `vector_name`, the variant of `scalar_fn` on `lanes` lanes."""
    fnty = scalar_fn.function_type
    element = fnty.return_type
    if isinstance(element, VectorType):
        element = element.element_type
    vty = VectorType.get(element, lanes)
    return module.get_or_insert_function(vector_name, FunctionType.get(vty, [vty] * len(fnty.params)))


def through_variant(b, i32, variant, lanes: int, args, result_type, masks: dict | None = None):
    """The call of `variant` (declared for `lanes` lanes) on the scalars or vectors `args`, built at
    `b`, with the result in `result_type`: how code that vectorizes its own way (gpuc/plugins/vectorize)
    calls the variant every other call of the function calls, so that each lane gets their result.
    `masks`: a dict keeping the shuffles' lane lists for later calls in the same context."""
    return _through_variant(b, i32, variant, lanes, args, result_type, masks)


def _through_variant(b, i32, variant, lanes: int, args, result_type, masks: dict | None = None):
    """The result of the scalar or vector call of `args` computed by `variant`: the arguments' lanes go
    in chunks of `lanes` (the last one padded with its first lane, a value the function is computed on
    anyway), the results come back into the call's type. One shuffle per argument and chunk, two per
    chunk for the result (a scalar call: its argument in every lane, its result from lane 0)."""
    count = result_type.count if isinstance(result_type, VectorType) else 0
    vty = variant.function_type.return_type
    masks = {} if masks is None else masks

    def mask(picks):
        picks = tuple(picks)
        found = masks.get(picks)
        if found is None:
            found = masks[picks] = Constant.vector([Constant.poison(i32) if k is None else ConstantInt.get(i32, k)
                                                    for k in picks])
        return found

    if not count:
        packed = []
        for arg in args:
            one = b.insert_element(Constant.poison(vty), arg, ConstantInt.get(i32, 0))
            packed.append(b.shuffle_vector(one, Constant.poison(vty), mask([0] * lanes)))
        return b.extract_element(b.call(variant, packed), ConstantInt.get(i32, 0))
    result = None
    for start in range(0, count, lanes):
        used = min(lanes, count - start)
        chunk = mask([start + k if k < used else start for k in range(lanes)])
        out = b.call(variant, [b.shuffle_vector(arg, Constant.poison(arg.type), chunk) for arg in args])
        if used == count:  # the whole call in one chunk
            return out if lanes == count else b.shuffle_vector(out, Constant.poison(vty), mask(range(count)))
        # the chunk's results at their places in a vector of the call's type, the rest of it left undefined ...
        placed = b.shuffle_vector(out, Constant.poison(vty), mask(
            [k - start if start <= k < start + used else None for k in range(count)]))
        # ... then merged into what the chunks before gave
        result = placed if result is None else b.shuffle_vector(result, placed, mask(
            [count + k if start <= k < start + used else k for k in range(count)]))
    return result


_lock = threading.Lock()
_loaded: list = []  # [path or None], once tried


def host_libmvec() -> str | None:
    """Load libmvec into this process (once; RTLD_GLOBAL, so that the JIT resolves its symbols like
    libm's) and return its path, or None where it cannot be loaded (no glibc, or one before 2.35)."""
    with _lock:
        if not _loaded:
            _loaded.append(_load())
        return _loaded[0]


def _load() -> str | None:
    try:
        lib = ctypes.CDLL(LIBRARY, mode=ctypes.RTLD_GLOBAL)
        probe = ctypes.cast(lib._ZGVbN2v_sin, ctypes.c_void_p)
        # The b variants of the 2.35 functions (acosh, erfc, ...): older libmvecs lack most of FUNCTIONS.
        ctypes.cast(lib._ZGVbN2v_erfc, ctypes.c_void_p)
    except (OSError, AttributeError):
        return None
    return _path_of(probe) or LIBRARY


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _path_of(address) -> str | None:
    """The file of the shared object holding `address` (dladdr), for the disk cache's key."""
    info = _DlInfo()
    try:
        found = ctypes.CDLL(None).dladdr(address, ctypes.byref(info))
    except (OSError, AttributeError):
        return None
    return info.dli_fname.decode() if found and info.dli_fname else None
