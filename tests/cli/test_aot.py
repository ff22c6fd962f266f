"""`gpuc compile FILE.py:NAME --types ...`: Python kernels and funcs ahead of time, for every target and
emit kind; `--emit lib` libraries called from C and loaded back with gpuc.load_library, against the
JIT-compiled kernels; errors in the command line shown with a caret under what is wrong."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import gpuc
from gpuc.cli import main
from gpuc.runtime import aot

KERNELS = textwrap.dedent("""\
    import math

    import gpuc


    @gpuc.func
    def axpy(a, x, y):
        return a * x + y


    @gpuc.kernel
    def saxpy(a, x, y, out):
        i = gpuc.index()
        out[i] = axpy(a, x[i], y[i])


    @gpuc.kernel
    def wave(t, grid):
        i = gpuc.index(0)
        j = gpuc.index(1)
        grid[j, i] = math.sin(t * i) + math.cos(t * j)


    @gpuc.kernel
    def mix(k, flags, counts, out):
        i = gpuc.index()
        if flags[i]:
            out[i] = counts[i] * k + 1
        else:
            out[i] = counts[i] // k


    @gpuc.func
    def clamp(v, lo, hi):
        return min(max(v, lo), hi)


    def plain(x):
        return x


    @gpuc.func
    def sqrt(x):  # a C library's name
        return x
""")

SAXPY = ["kernels.py:saxpy", "--types", "f32, f32[:], f32[:], f32[:]"]
WAVE = ["kernels.py:wave", "--types", "f64, f64[:, ::1]"]
MIX = ["kernels.py:mix", "--types", "u32, bool[:], uint32[:], u32[:]"]
AXPY = ["kernels.py:axpy", "--types", "f64, f64, f64"]
CLAMP = ["kernels.py:clamp", "--types", "i64, i64, i64"]
ALL = [*SAXPY, *WAVE, *MIX, *AXPY, *CLAMP]


@pytest.fixture
def folder(tmp_path, monkeypatch):
    (tmp_path / "kernels.py").write_text(KERNELS)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def kernels(folder, monkeypatch):
    """The test's kernels.py imported, for the JIT-compiled side of the comparisons."""
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, "kernels", raising=False)
    import kernels as module
    return module


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def library(folder, capsys):
    """libkernels.so (and libkernels.h) of every function in kernels.py."""
    code, _, err = run(capsys, "compile", *ALL, "--emit", "lib", "-o", "libkernels.so")
    assert code == 0, err
    assert "wrote libkernels.so and libkernels.h" in err
    return folder / "libkernels.so"


# -- every target and emit kind ---------------------------------------------------------------------

@pytest.mark.parametrize("target,emit,check", [
    ("native", "llvm", lambda out: "define void @saxpy(ptr %sizes" in out and "define void @saxpy.range(" in out
     and "define double @axpy(" in out and "@gpuc_library = constant" in out),
    ("native", "asm", lambda out: "saxpy.range:" in out and "axpy:" in out),
    ("native", "obj", lambda out: out[:4] == b"\x7fELF"),
    ("ptx", "llvm", lambda out: "define ptx_kernel void @saxpy(" in out and "define double @axpy(" in out),
    ("ptx", "asm", lambda out: ".visible .entry saxpy(" in out and ".visible .func  (.param .b64 func_retval0) axpy("
     in out),
    ("gcn", "llvm", lambda out: "define amdgpu_kernel void @saxpy(" in out),
    ("gcn", "asm", lambda out: "saxpy:" in out and ".amdhsa_kernel saxpy" in out),
    ("gcn", "obj", lambda out: out[:4] == b"\x7fELF"),
    ("spirv", "llvm", lambda out: "define spir_kernel void @saxpy(" in out),
    ("spirv", "asm", lambda out: "OpEntryPoint Kernel" in out and '"saxpy"' in out),
    ("spirv", "obj", lambda out: out[:4] == b"\x03\x02\x23\x07"),
])
def test_every_target_and_emit(folder, capsys, target, emit, check):
    code, _, err = run(capsys, "compile", *SAXPY, *AXPY, "--target", target, "--emit", emit, "-o", "out")
    assert code == 0, err
    data = (folder / "out").read_bytes()
    assert check(data if emit == "obj" else data.decode()), data[:2000]


def test_ptx_obj_is_a_cubin_with_ptxas(folder, capsys):
    from gpuc.targets.ptx import find_ptxas
    if find_ptxas() is None:
        pytest.skip("ptxas not found (the ptx extra)")
    code, _, err = run(capsys, "compile", *SAXPY, "--target", "ptx", "--cap", "sm_80", "--emit", "obj", "-o", "k.cubin")
    assert code == 0, err
    data = (folder / "k.cubin").read_bytes()
    assert data[:4] == b"\x7fELF" and b"saxpy" in data and "note" not in err


def test_ptx_obj_without_ptxas_is_ptx_with_a_note(folder, capsys, monkeypatch):
    monkeypatch.setattr("gpuc.targets.ptx.find_ptxas", lambda: None)
    code, _, err = run(capsys, "compile", *SAXPY, "--target", "ptx", "--emit", "obj", "-o", "k.ptx")
    assert code == 0, err
    assert ".visible .entry saxpy(" in (folder / "k.ptx").read_text()
    assert "gpuc: note: ptxas is not installed" in err and "ptx extra" in err


def test_an_ir_file_assembles_to_a_cubin_too(folder, capsys):
    # `--target ptx --emit obj` on an IR file once ended in a traceback (PTX has no object emitter)
    from gpuc.targets.ptx import find_ptxas
    if find_ptxas() is None:
        pytest.skip("ptxas not found (the ptx extra)")
    (folder / "k.ll").write_text("define void @k(ptr %p) {\n  store i32 1, ptr %p\n  ret void\n}\n")
    code, _, err = run(capsys, "compile", "k.ll", "--entry", "k", "--kernel", "--target", "ptx", "--emit", "obj",
                       "-o", "k.cubin", "--trace")
    assert code == 0, err
    assert (folder / "k.cubin").read_bytes()[:4] == b"\x7fELF" and "assemble" in err


def test_trace_names_the_stages(folder, capsys):
    code, _, err = run(capsys, "compile", *SAXPY, "--emit", "lib", "-o", "lib.so", "--trace")
    assert code == 0, err
    for stage in ("irgen", "optimize", "finish", "codegen"):
        assert stage in err


def test_one_name_for_two_signatures_gets_two_symbols(folder, capsys):
    code, out, err = run(capsys, "compile", "kernels.py:axpy", "--types", "f32, f32, f32", "kernels.py:axpy",
                         "--types", "f64, f64, f64", "--target", "ptx", "--emit", "asm")
    assert code == 0, err
    assert ") axpy_f32_f32_f32(" in out and ") axpy_f64_f64_f64(" in out


def test_python_m_gpuc_runs_the_command(folder):
    proc = subprocess.run([sys.executable, "-m", "gpuc", "compile", *SAXPY, "--target", "ptx", "--emit", "asm"],
                          capture_output=True, text=True, cwd=folder, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert ".visible .entry saxpy(" in proc.stdout


# -- libraries: from C --------------------------------------------------------------------------------

C_PROGRAM = textwrap.dedent("""\
    #include <stdio.h>
    #include <string.h>
    #include "libkernels.h"

    int main(void) {
        enum { N = 1000, W = 7, H = 5 };
        static float x[N], y[N], out[N];
        for (int i = 0; i < N; i++) { x[i] = 0.5f * i; y[i] = 1000.0f - i; }
        int64_t sizes[3] = {N, 1, 1};
        saxpy(sizes, 0, 300, 2.5f, x, N, 1, y, N, 1, out, N, 1);      /* two ranges, as two threads would */
        saxpy(sizes, 300, N, 2.5f, x, N, 1, y, N, 1, out, N, 1);
        static double grid[H][W];
        int64_t gsizes[3] = {W, H, 1};
        wave(gsizes, 0, W * H, 0.25, &grid[0][0], H, W, W, 1);
        static bool flags[N];
        static uint32_t counts[N], mixed[N];
        for (int i = 0; i < N; i++) { flags[i] = i % 3 == 0; counts[i] = 4000000000u - 7u * i; }
        mix(sizes, 0, N, 3u, flags, N, 1, counts, N, 1, mixed, N, 1);
        printf("saxpy");
        for (int i = 0; i < N; i++) printf(" %.9g", out[i]);
        printf("\\nwave");
        for (int j = 0; j < H; j++) for (int i = 0; i < W; i++) printf(" %.17g", grid[j][i]);
        printf("\\nmix");
        for (int i = 0; i < N; i++) printf(" %u", mixed[i]);
        printf("\\naxpy %.17g\\nclamp %lld %lld\\n", axpy(2.0, 3.0, 0.5), (long long)clamp(-5, 0, 10),
               (long long)clamp(50, 0, 10));
        printf("described %d\\n", strstr(gpuc_library, "\\"saxpy\\"") != NULL);
        return 0;
    }
""")


def test_a_c_program_links_the_library(library, kernels):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler (cc, gcc, clang)")
    folder = library.parent
    (folder / "main.c").write_text(C_PROGRAM)
    build = subprocess.run([cc, "-std=c11", "-Wall", "-Werror", "main.c", "-I.", str(library), f"-Wl,-rpath,{folder}",
                            "-o", "main"], capture_output=True, text=True, cwd=folder)
    assert build.returncode == 0, build.stderr
    proc = subprocess.run([str(folder / "main")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = {line.split()[0]: line.split()[1:] for line in proc.stdout.splitlines()}

    n = 1000
    x, y = (0.5 * np.arange(n)).astype(np.float32), (1000.0 - np.arange(n)).astype(np.float32)
    out = np.zeros(n, np.float32)
    kernels.saxpy[n](np.float32(2.5), x, y, out)
    assert np.array_equal(np.array(lines["saxpy"], dtype=np.float32), out)
    grid = np.zeros((5, 7))
    kernels.wave[(7, 5)](0.25, grid)
    assert np.array_equal(np.array(lines["wave"], dtype=np.float64), grid.ravel())
    flags = np.arange(n) % 3 == 0
    counts = (4_000_000_000 - 7 * np.arange(n)).astype(np.uint32)
    mixed = np.zeros(n, np.uint32)
    kernels.mix[n](np.uint32(3), flags, counts, mixed)
    assert np.array_equal(np.array(lines["mix"], dtype=np.uint32), mixed)
    assert float(lines["axpy"][0]) == 6.5
    assert lines["clamp"] == ["0", "10"] and lines["described"] == ["1"]


def test_the_header_documents_each_parameter(library):
    header = library.with_suffix(".h").read_text()
    assert "void saxpy(const int64_t sizes[3], int64_t begin, int64_t end, float a, const float *x," in header
    assert "float *out, int64_t out_shape0, int64_t out_stride0);" in header
    assert "*   x_stride0: the distance between neighbours of x along dimension 0, in elements (not bytes)" in header
    assert "*   out: out (f32[:]), the address of element [0]; the kernel may write through it" in header
    assert "(must be 1: C-contiguous)" in header  # wave's grid is f64[:, ::1]
    assert "double axpy(double a, double x, double y);" in header
    assert "int64_t clamp(int64_t v, int64_t lo, int64_t hi);" in header
    assert "void mix(const int64_t sizes[3], int64_t begin, int64_t end, uint32_t k, const bool *flags," in header


# -- libraries: loaded back into Python ---------------------------------------------------------------

def test_loaded_kernels_equal_the_jit_kernels(library, kernels):
    lib = gpuc.load_library(library)
    rng = np.random.default_rng(7)
    n = 100_000
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    got, want = np.zeros(n, np.float32), np.zeros(n, np.float32)
    lib.saxpy[n](1.75, x, y, got)
    kernels.saxpy[n](np.float32(1.75), x, y, want)
    assert np.array_equal(got, want)
    got2 = np.zeros(n, np.float32)
    lib.saxpy.launch(n, 1.75, x, y, got2, threads=3)  # split into ranges over three threads
    assert np.array_equal(got2, want)

    grid, ref = np.zeros((300, 200)), np.zeros((300, 200))
    lib.wave[(200, 300)](0.01, grid)
    kernels.wave[(200, 300)](0.01, ref)
    assert np.array_equal(grid, ref)

    flags = rng.random(n) < 0.5
    counts = rng.integers(0, 2**32, n, dtype=np.uint32)
    got3, want3 = np.zeros(n, np.uint32), np.zeros(n, np.uint32)
    lib.mix[n](5, flags, counts, got3)
    kernels.mix[n](np.uint32(5), flags, counts, want3)
    assert np.array_equal(got3, want3)

    assert lib.axpy(2.0, 3.0, 0.5) == kernels.axpy(2.0, 3.0, 0.5) == 6.5
    assert type(lib.axpy(2.0, 3.0, 0.5)) is np.float64
    assert [lib["clamp"](v, -3, 3) for v in (-10, 0, 10)] == [-3, 0, 3]


def test_loaded_kernels_check_arguments_like_kernel_n(library):
    lib = gpuc.load_library(library)
    x = np.zeros(10, np.float32)
    with pytest.raises(TypeError, match="must hold float32, not '<f8'"):
        lib.saxpy[10](1.0, np.zeros(10), x, x)
    with pytest.raises(TypeError, match="must have 1 dimension"):
        lib.saxpy[10](1.0, np.zeros((2, 5), np.float32), x, x)
    with pytest.raises(TypeError, match="takes 4 argument"):
        lib.saxpy[10](1.0, x, x)
    with pytest.raises(ValueError, match="read-only"):
        lib.saxpy[10](1.0, x, x, np.broadcast_to(np.float32(0), (10,)))
    lib.saxpy[10](1.0, np.broadcast_to(np.float32(2), (10,)), x, x)  # read-only where only read: fine
    assert np.all(x == 2)
    with pytest.raises(ValueError, match="C-contiguous"):
        lib.wave[(3, 3)](0.5, np.zeros((6, 6))[::2, ::2])
    with pytest.raises(TypeError, match="must be a number"):
        lib.saxpy[10]("1", x, x, x)
    with pytest.raises(OverflowError, match="does not fit"):
        lib.mix[10](-1, np.zeros(10, bool), np.zeros(10, np.uint32), np.zeros(10, np.uint32))
    with pytest.raises(ValueError, match="2\\*\\*62|2\\^62|below"):
        lib.saxpy[1 << 62](1.0, x, x, x)
    with pytest.raises(AttributeError, match="has no kernel or func 'saxpi'; it has"):
        lib.saxpi


def test_a_library_describes_itself(library):
    lib = gpuc.load_library(library)
    assert sorted(lib.kernels) == ["mix", "saxpy", "wave"] and sorted(lib.funcs) == ["axpy", "clamp"]
    record = lib.kernels["saxpy"].record
    assert record["types"] == ["f32", "f32[:]", "f32[:]", "f32[:]"] and record["python"] == "kernels.py:saxpy"
    assert json.loads(json.dumps(lib.description)) == lib.description


def test_loading_what_is_not_a_gpuc_library(folder):
    import ctypes.util
    libm = ctypes.util.find_library("m")
    if libm is None:
        pytest.skip("no libm to load")
    with pytest.raises(ValueError, match="is not a gpuc library: it exports no gpuc_library"):
        gpuc.load_library(libm)
    with pytest.raises(OSError, match="cannot load"):
        gpuc.load_library(folder / "missing.so")


# -- errors, located in the command line --------------------------------------------------------------

def _caret_under(err: str, text: str) -> None:
    """The error shows the command line with carets exactly under `text`."""
    lines = err.splitlines()
    for k, line in enumerate(lines[:-1]):
        carets = lines[k + 1]
        if carets.strip() and set(carets.strip()) == {"^"}:
            start = len(carets) - len(carets.lstrip())
            assert line[start:start + len(carets.strip())] == text, err
            return
    raise AssertionError(f"no caret line in:\n{err}")


@pytest.mark.parametrize("types,bad,message", [
    ("f32, f32[:], f33[:], f32[:]", "f33", "unknown type 'f33'"),
    ("f32, f32[:], f32[:], f128[:]", "f128", "float128 is not a type gpuc kernels take"),
    ("f32, f32[:], f32[::1, :], f32[:]", "::1", "only the last dimension can be '::1'"),
    ("f32, f32[:], f32[:] f32[:]", "f32", "expected ',' between types, not 'f32'"),
    ("f32, f32[:], f32[:], f32[:, :, :, :]", "[:, :, :, :]", "arrays have 1 to 3 dimensions, not 4"),
    ("f32, f32[:], f32[x], f32[:]", "x", "expected ':' or '::1' for a dimension"),
    ("f32, f32[:], f32[:]", "]", "takes 4 argument(s) (a, x, y, out), --types gives 3"),
])
def test_bad_types_are_located(folder, capsys, types, bad, message):
    code, _, err = run(capsys, "compile", "kernels.py:saxpy", "--types", types)
    assert code == 2
    assert message in err, err
    _caret_under(err, bad)
    assert "Traceback" not in err


def test_bad_types_say_what_is_accepted(folder, capsys):
    code, _, err = run(capsys, "compile", "kernels.py:saxpy", "--types", "float, f32[:], f32[:], f32[:]")
    assert code == 2
    assert "unknown type 'float'" in err and "accepted: scalars bool, i32, i64" in err and "T[:, ::1]" in err


@pytest.mark.parametrize("spec,types,bad,message", [
    ("kernels.py:sxapy", "f32", "sxapy", "kernels.py has no 'sxapy'; did you mean 'saxpy'?"),
    ("kernels.py:plain", "f32", "plain", "kernels.py:plain is a function (defined at kernels.py:38), not a "
                                         "@gpuc.kernel or @gpuc.func"),
    ("kernels.py:math", "f32", "math", "kernels.py:math is a module"),
    ("missing.py:saxpy", "f32", "missing.py", "no such file missing.py"),
])
def test_missing_or_wrong_functions_are_located(folder, capsys, spec, types, bad, message):
    code, _, err = run(capsys, "compile", spec, "--types", types)
    assert code == 2
    assert message in err, err
    _caret_under(err, bad)
    if spec.startswith("kernels.py"):
        assert "kernels.py defines axpy, clamp, mix, saxpy, sqrt, wave" in err


@pytest.mark.parametrize("argv,message", [
    (["kernels.py:saxpy"], "kernels.py:saxpy needs its argument types: --types after it"),
    (["kernels.py", "--types", "f32"], "kernels.py: name the function to compile, kernels.py:NAME"),
    (["--types", "f32", *SAXPY], "--types 'f32' follows no FILE.py:NAME"),
    ([*SAXPY, "--emit", "lib"], "--emit lib writes a shared library and its header: name it with -o"),
    ([*SAXPY, "--emit", "lib", "--target", "ptx", "-o", "x.so"], "--emit lib builds a shared library for this "
                                                                 "machine (--target native)"),
    ([*SAXPY, "--entry", "saxpy"], "--entry and --kernel are for LLVM IR files"),
    ([*SAXPY, *SAXPY], "kernels.py:saxpy is exported twice"),
    (["kernels.py:sqrt", "--types", "f64", "--emit", "lib", "-o", "lib.so"],
     "a library exporting 'sqrt' would shadow the C library's sqrt"),
    (["kernels.py:saxpy", "--types", "f64, f64[:], f64[:], f64[:]", "kernels.py:axpy", "--types",
      "f64, f64, f64", "--types", "f32"], "--types 'f32' follows no FILE.py:NAME"),
])
def test_usage_errors(folder, capsys, argv, message):
    code, _, err = run(capsys, "compile", *argv)
    assert code == 2
    assert message in err, err


def test_a_kernel_that_does_not_compile_is_a_located_compilation_error(folder, capsys):
    code, _, err = run(capsys, "compile", "kernels.py:saxpy", "--types", "f32, f32, f32[:], f32[:]")
    assert code == 1
    assert "CompilationError" in err and "kernels.py:14:" in err, err


MARKED = textwrap.dedent("""\
    import gpuc

    probe = gpuc.marker("aot.probe", gpuc.int64, (gpuc.int64,))


    @gpuc.kernel
    def probed(out):
        i = gpuc.index()
        out[i] = probe(i)
""")

PROBE_PLUGIN = textwrap.dedent("""\
    import gpuc
    from gpuc.llvm import ConstantInt


    def replace(state, marker, module):
        calls = [use.user for use in marker.uses]
        for call in calls:  # probe(i) becomes 7
            call.replace_all_uses_with(ConstantInt.get(call.type, 7))
            call.erase()
        return bool(calls)


    def make():
        return gpuc.make_plugin("aot.probe", early_callback=replace)
""")


def test_plugins_take_part_as_for_ir_files(folder, capsys):
    (folder / "marked.py").write_text(MARKED)
    (folder / "probeplugin.py").write_text(PROBE_PLUGIN)
    code, _, err = run(capsys, "compile", "marked.py:probed", "--types", "i64[:]", "--emit", "lib", "-o", "lib.so")
    assert code == 1 and "calls @aot.probe, which nothing defines" in err, err  # nothing resolves the marker
    code, _, err = run(capsys, "compile", "marked.py:probed", "--types", "i64[:]", "--emit", "lib", "-o", "lib.so",
                       "--plugin", "probeplugin.py:make")
    assert code == 0, err
    out = np.zeros(5, np.int64)
    gpuc.load_library(folder / "lib.so").probed[5](out)
    assert out.tolist() == [7] * 5


UNEXPORTABLE = textwrap.dedent("""\
    import gpuc


    @gpuc.kernel
    def reverse_blocks(a):
        tile = gpuc.shared.array(32, gpuc.float32)
        t = gpuc.thread_index()
        tile[t] = a[gpuc.index()]
        gpuc.barrier()
        a[gpuc.index()] = tile[31 - t]


    @gpuc.func
    def where():
        return gpuc.index()


    @gpuc.kernel
    def rotate(z, out, w):
        i = gpuc.index()
        out[i] = z[i] * w[0]


    @gpuc.kernel
    def rotate_by(z, out, w):
        i = gpuc.index()
        out[i] = z[i] * w
""")


@pytest.mark.parametrize("argv,message", [
    (["more.py:reverse_blocks", "--types", "f32[:]"], "reverse_blocks uses the block model"),
    (["more.py:where", "--types", ""], "func where reads the launch context"),
    (["more.py:rotate_by", "--types", "c64[:], c64[:], c64"], "rotate_by takes a complex64 parameter"),
])
def test_what_a_library_cannot_export(folder, capsys, argv, message):
    (folder / "more.py").write_text(UNEXPORTABLE)
    code, _, err = run(capsys, "compile", *argv, "--emit", "lib", "-o", "lib.so")
    assert code == 2
    assert message in err, err


def test_the_link_step_needs_a_compiler(folder, capsys, monkeypatch):
    monkeypatch.setattr(aot, "find_linker", lambda: None)
    code, _, err = run(capsys, "compile", *SAXPY, "--emit", "lib", "-o", "lib.so")
    assert code == 2
    assert "links with a C compiler" in err


def test_complex_arrays_cross_the_library_boundary(folder, capsys):
    (folder / "more.py").write_text(UNEXPORTABLE)
    code, _, err = run(capsys, "compile", "more.py:rotate", "--types", "c128[:], complex128[:], c128[::1]",
                       "--emit", "lib", "-o", "librotate.so")
    assert code == 0, err
    assert "const double _Complex *z" in (folder / "librotate.h").read_text()
    lib = gpuc.load_library(folder / "librotate.so")
    z = np.arange(6) * (1 + 2j)
    out, w = np.zeros_like(z), np.array([0.5 - 1j])
    lib.rotate[z.size](z, out, w)
    assert np.array_equal(out, z * w[0])


def test_a_library_kernel_that_prints_is_a_located_error(folder, capsys):
    (folder / "chatty.py").write_text("import gpuc\n\n\n@gpuc.kernel\ndef chatty(x):\n    print(x[gpuc.index()])\n")
    code, _, err = run(capsys, "compile", "chatty.py:chatty", "--types", "f64[:]", "--emit", "lib", "-o", "libc.so")
    assert code != 0 and "chatty calls print(), which runs only in kernels the CPU runtime launches" in err, err
    assert "Traceback" not in err


def test_libraries_build_without_bounds_checks_under_the_switch(folder, capsys, monkeypatch):
    monkeypatch.setenv("GPUC_BOUNDSCHECK", "1")
    code, _, err = run(capsys, "compile", *SAXPY, "--emit", "lib", "-o", "libsaxpy.so")
    assert code == 0, err
    assert gpuc.load_library(folder / "libsaxpy.so") is not None
