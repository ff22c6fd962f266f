"""GCN's math library: every math function of the frontend in float32 and float64 compiles for AMD GPUs,
from LLVM intrinsics or from libclc's OpenCL built-ins linked into the module; without libclc, the
error says how to install it."""

from __future__ import annotations

import importlib.util
import re
import textwrap

import pytest

import gpuc
from gpuc.frontend.numeric import mathlib
from gpuc.llvm import Context, Module
from gpuc.targets import GCNTarget
from gpuc.targets.libclc import find_libclc, is_scalar_builtin, scalar_builtins

NAMES = sorted(mathlib.MATH)
DTYPES = [gpuc.float32, gpuc.float64]
# Computed by an LLVM intrinsic or instruction the AMDGPU backend expands itself, not by libclc.
EXACT = {"sqrt", "floor", "ceil", "trunc", "rint", "fabs", "copysign", "fma", "fmod"}
WITHOUT_LIBRARY = {32: EXACT | {"exp", "exp2", "log", "log2", "log10"}, 64: EXACT}
# Approximated by AMDGPU's own expansion in float32 (no argument reduction): libclc's in both widths.
FROM_LIBCLC = {"sin", "cos", "pow", "tan", "atan2", "hypot", "cbrt", "erf", "gamma", "lgamma"}
# Composed by the frontend from other functions and arithmetic: the target is not asked about them.
COMPOSED = {"radians", "degrees", "isnan", "isinf", "isfinite"}

needs_libclc = pytest.mark.skipif(find_libclc() is None, reason="libclc not found (apt-get install libclc-22)")

KERNEL = """
import math
import gpuc

@gpuc.kernel
def apply(out, x, y):
    i = gpuc.index()
    out[i] = {terms}
"""


def call(name: str) -> str:
    arity = mathlib.MATH[name].params
    module = "gpuc" if name == "fma" else "math"  # math.fma needs Python 3.13
    return f"{module}.{name}(" + ", ".join(["x[i]", "y[i]", "x[i]"][:max(arity, 1)]) + ")"


@pytest.fixture
def kernel_of(tmp_path):
    """A kernel (in a module written under tmp_path) whose result sums one call of each named function."""
    def make(names):
        path = tmp_path / f"gcn_math_{len(names)}_{names[0]}.py"
        path.write_text(textwrap.dedent(KERNEL.format(terms=" + ".join(call(n) for n in names))))
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.apply
    return make


def compiled(kernel, dtype, kind="asm", target=None, **config):
    job = gpuc.CompilerJob((kernel, (gpuc.Array[dtype, 1],) * 3),
                           gpuc.CompilerConfig(target or GCNTarget(), **config))
    return gpuc.compile(job, kind)


def undefined_symbols(asm: str) -> set[str]:
    """The symbols the assembly refers to (calls, tables) without defining them."""
    referenced = set(re.findall(r"([\w.$]+)@(?:rel32|gotpcrel32|abs32)", asm))
    return referenced - set(re.findall(r"^([\w.$]+):", asm, re.M))


def library_calls(bits: int) -> dict[str, str]:
    """The libclc built-in GCN calls for each math function the frontend asks it about."""
    target, found = GCNTarget(), {}
    for name, op in mathlib.OPS.items():
        how = target.math_lowering(op, bits)
        if name not in COMPOSED and how.kind == "call":
            found[name] = how.symbol
    return found


@pytest.mark.parametrize("bits", [32, 64])
def test_the_target_computes_every_math_function(bits):
    target = GCNTarget()
    assert mathlib.supported_on(target, bits) == NAMES
    assert all(target.math_lowering(op, bits) is not None for op in mathlib.OPS.values())
    calls = library_calls(bits)
    assert not set(calls) & WITHOUT_LIBRARY[bits] and FROM_LIBCLC <= set(calls)
    letter = "f" if bits == 32 else "d"
    for name, symbol in calls.items():
        op = mathlib.OPS[name]
        assert symbol == f"_Z{len(op.c_name)}{op.c_name}{letter * op.params}"


@needs_libclc
def test_libclc_defines_every_builtin_the_target_calls():
    with Context() as context:
        library = Module.parse(scalar_builtins(find_libclc()), context)
        defined = {fn.name for fn in library.functions if not fn.is_declaration and fn.linkage == "external"}
    wanted = set(library_calls(32).values()) | set(library_calls(64).values())
    assert wanted <= defined and all(is_scalar_builtin(name) for name in defined)


@needs_libclc
@pytest.mark.parametrize("arch", ["gfx90a", "gfx942", "gfx1100"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_function_compiles(kernel_of, dtype, arch):
    result = compiled(kernel_of(NAMES), dtype, target=GCNTarget(arch=arch))
    assert result.trace.libraries == ["libclc"]
    assert "s_endpgm" in result.output and undefined_symbols(result.output) == set()
    # libclc's named metadata stays out: the kernel is no "OpenCL C" kernel in the code object
    assert ".language:" not in result.output and "clang version" not in result.output


@needs_libclc
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", NAMES)
def test_each_function_compiles_alone(kernel_of, name, dtype):
    asm = compiled(kernel_of([name]), dtype).output
    assert "s_endpgm" in asm and undefined_symbols(asm) == set()


@needs_libclc
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_the_linked_module_calls_no_external_math(kernel_of, dtype, filecheck):
    ir = compiled(kernel_of(NAMES), dtype, "llvm").output
    filecheck(ir, "CHECK-NOT: declare {{.*}}@{{[^l]}}\nCHECK-NOT: call {{.*}}@_Z\n")
    # unoptimized, the built-ins stay calls: of internal definitions, only of those the kernel uses
    ir = compiled(kernel_of(["sin", "atan2"]), dtype, "llvm", optimize=False).output
    letter = "f" if dtype is gpuc.float32 else "d"
    filecheck(ir, f"CHECK-NOT: declare {{{{.*}}}}@_Z\nCHECK-DAG: define internal {{{{.*}}}}@_Z3sin{letter}(\n"
                  f"CHECK-DAG: define internal {{{{.*}}}}@_Z5atan2{letter}{letter}(\n")
    assert f"@_Z3cos{letter}(" not in ir and f"@_Z3exp{letter}(" not in ir
    assert undefined_symbols(compiled(kernel_of(["sin", "atan2"]), dtype, optimize=False).output) == set()


@needs_libclc
def test_a_definition_in_the_module_keeps_its_name():
    # libclc's own _Z3sinf is linked as an internal function beside it, never as a second definition
    ir = ("declare float @_Z3cosf(float)\ndefine float @_Z3sinf(float %x) {\n  ret float %x\n}\n"
          "define void @kernel(ptr addrspace(1) %p, float %x) {\n  %s = call float @_Z3sinf(float %x)\n"
          "  %c = call float @_Z3cosf(float %s)\n  store float %c, ptr addrspace(1) %p\n  ret void\n}\n")
    job = gpuc.CompilerJob(gpuc.IRSource(ir, entry="kernel"), gpuc.CompilerConfig(GCNTarget(), optimize=False))
    result = gpuc.compile(job, "llvm")
    assert result.trace.libraries == ["libclc"]
    assert "@_Z3sinf(float %x) {\n  ret float %x\n}" in result.output
    assert "define internal float @_Z3cosf(" in result.output


def test_missing_libclc_says_how_to_install_it(kernel_of, tmp_path, monkeypatch, no_disk_cache):
    missing = tmp_path / "nowhere" / "amdgcn-amd-amdhsa.bc"
    monkeypatch.setenv("GPUC_LIBCLC", str(missing))
    with pytest.raises(gpuc.ValidationError) as info:
        compiled(kernel_of(["sin", "hypot"]), gpuc.float64)
    issues = info.value.issues
    assert {issue.symbol for issue in issues} == {"_Z3sind", "_Z5hypotdd"}
    for issue in issues:
        assert issue.kind == "undefined-external" and issue.function.startswith("apply.")
        text = str(issue)
        assert f"GPUC_LIBCLC names {missing}" in text and "apt-get install libclc-22" in text
    # functions computed without the library still compile
    assert "s_endpgm" in compiled(kernel_of(["sqrt", "fmod", "floor"]), gpuc.float64).output


@pytest.mark.parametrize("content", [b"not bitcode", None], ids=["garbage", "nvptx"])
def test_a_file_that_is_no_amdgcn_libclc_is_named(kernel_of, tmp_path, monkeypatch, no_disk_cache, content):
    path = tmp_path / "amdgcn-amd-amdhsa.bc"
    if content is None:  # bitcode for another target
        with Context() as context:
            module = Module.parse('target triple = "nvptx64-nvidia-cuda"\ndefine float @_Z3sinf(float %x) {\n'
                                  '  ret float %x\n}\n', context)
            content = module.to_bitcode()
    path.write_bytes(content)
    monkeypatch.setenv("GPUC_LIBCLC", str(path))
    with pytest.raises(gpuc.CompilationError, match=f"libclc's bitcode {re.escape(str(path))} cannot be read"):
        compiled(kernel_of(["sin"]), gpuc.float32)
