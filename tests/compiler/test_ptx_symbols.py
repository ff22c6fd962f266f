"""PTX symbol names: definitions renamed to valid, distinct PTX identifiers; entry lookups keep working."""

from __future__ import annotations

import re
import subprocess

import pytest

import gpuc
from gpuc.targets.ptx import ptx_symbol

from support.toolchain import find_ptxas

PTX_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_$]*|[_$%][A-Za-z0-9_$]+")
NAMES = ["saxpy", "_k", "axpy.f32.f32", "axpy_$_f32_$_f32", "a.b", "a_$_b", "a$b", "a$24_b", "$", "ядро",
         "ядро.f32", "1st", "$31_st", "x-y", "x y", "%v", "é", "e\u0301", "a..b", "a._b", "a_.b", "🙂", "_"]


def test_plain_names_are_kept():
    for name in ("saxpy", "_k", "Kernel_2"):
        assert ptx_symbol(name) == name


@pytest.mark.parametrize("name", [n for n in NAMES if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n)])
def test_mangled_names_are_valid_ptx(name):
    mangled = ptx_symbol(name)
    assert PTX_IDENTIFIER.fullmatch(mangled) and "$" in mangled, mangled


def test_mangling_is_injective_and_deterministic():
    mangled = [ptx_symbol(n) for n in NAMES]
    assert len(set(mangled)) == len(NAMES), sorted(zip(mangled, NAMES))
    assert mangled == [ptx_symbol(n) for n in NAMES]
    assert ptx_symbol("axpy.f32") == "axpy_$_f32"  # LLVM's own spelling of "." for local symbols


def test_entry_and_globals_with_unusual_names(make_job):
    # NVPTX aborted on "Symbol name with unsupported characters" for any of these.
    ir = """\
@"глобал" = global i32 7
@"a.b" = global i32 1
@"a_$_b" = global i32 2

define void @"ядро.f32"(ptr %p) {
  %x = load i32, ptr @"глобал"
  %y = load i32, ptr @"a.b"
  %z = load i32, ptr @"a_$_b"
  %s = add i32 %x, %y
  %t = add i32 %s, %z
  store i32 %t, ptr %p
  ret void
}
"""
    result = gpuc.compile(make_job(ir, entry="ядро.f32", target=gpuc.PTXTarget(), kernel=True), "asm")
    assert result.entry == ptx_symbol("ядро.f32")
    assert f".entry {result.entry}(" in result.output
    ptxas = find_ptxas()
    if ptxas is not None:
        done = subprocess.run([ptxas, "-arch=sm_90", "-o", "/dev/null", "-"], input=result.output, text=True,
                              capture_output=True)
        assert done.returncode == 0, done.stderr


def test_declaration_with_an_invalid_name_is_reported(make_job):
    ir = '@"ext.ern" = external global i32\n\ndefine void @kernel(ptr %p) {\n' \
         '  %v = load i32, ptr @"ext.ern"\n  store i32 %v, ptr %p\n  ret void\n}\n'
    with pytest.raises(gpuc.ValidationError, match=r"global @ext\.ern cannot be compiled for PTXTarget.*"
                                                   r"a declaration keeps its name"):
        gpuc.compile(make_job(ir, target=gpuc.PTXTarget()), "asm")


def test_python_kernel_named_in_cyrillic_runs_by_its_mangled_name():
    @gpuc.kernel
    def заполнить(out):
        out[gpuc.index()] = 3.0

    job = gpuc.CompilerJob((заполнить, (gpuc.Array[gpuc.float32, 1],)), gpuc.CompilerConfig(gpuc.PTXTarget()))
    result = gpuc.compile(job, "asm")
    assert result.entry.isascii() and f".entry {result.entry}(" in result.output
