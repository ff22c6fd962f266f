"""print() in kernels and funcs on the CPU (docs/debugging.md, "print"): what Python prints for the same
values, through sys.stdout (pytest's capture sees it), each work item's lines whole and in its order;
located errors for what print() cannot take and for targets without it."""

from __future__ import annotations

import re

import numpy as np
import pytest

import gpuc
from gpuc.runtime.printing import format_line

pytestmark = pytest.mark.devices("cpu")


@gpuc.kernel
def scalars(a, out):
    i = gpuc.index()
    print(a[i])
    print("i =", i, "twice:", 2 * a[i], sep=" ", end=";\n")
    out[i] = a[i]


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, np.int8, np.uint8, np.int16, np.uint16,
                                   np.int32, np.uint32, np.int64, np.uint64, np.bool_, np.complex64, np.complex128])
def test_numbers_print_as_python_prints_them(dtype, capsys):
    values = np.array([0, 1, 7, 100], np.float64)
    if np.dtype(dtype).kind == "f":
        values = np.array([0.1, -2.5, 1e30, np.inf], np.float64)
    elif np.dtype(dtype).kind == "c":
        values = np.array([1 + 2j, -0.5j, 3, 0.1 + 0.2j])
    elif np.dtype(dtype).kind == "i":
        values = np.array([0, -1, 7, -100])
    with np.errstate(over="ignore"):
        a = values.astype(dtype)
    scalars[4](a, np.zeros(4, dtype), threads=1)
    out = capsys.readouterr().out
    with np.errstate(over="ignore"):
        want = "".join(f"{str(a[i])}\ni = {i} twice: {str(2 * a[i])};\n" for i in range(4))  # str(), as print()
    assert out == want


@gpuc.func
def describe(x, i):
    print("item", i, (x, i, (x > 0, -x)), 1.5, True, sep=" | ", end="")
    print()


@gpuc.kernel
def tuples(a):
    describe(a[gpuc.index()], gpuc.index())


def test_tuples_literals_sep_and_end_in_a_func(capsys):
    a = np.array([0.5, -2.0])
    tuples[2](a, threads=1)
    assert capsys.readouterr().out == ("item | 0 | (0.5, 0, (True, -0.5)) | 1.5 | True\n"
                                       "item | 1 | (-2.0, 1, (False, 2.0)) | 1.5 | True\n")


def test_small_types_in_tuples_print_as_numpy_scalars():
    # int64, float64, bool and complex128 are Python's own numbers; the other types print as NumPy's scalars
    assert format_line("\x1f".join([" ", "\n", "(float32,int8)"]), [np.float64(0.5).view(np.int64), 3]) == \
        f"{(np.float32(0.5), np.int8(3))}\n"


@gpuc.kernel
def chatty(out):
    i = gpuc.index()
    for k in range(3):
        print("work item", i, "line", k, "of a line long enough to be written in more than one piece of a line "
              "long enough to be written in more than one piece of a line long enough to be written in more than one")
    out[i] = i


def test_each_work_items_lines_are_whole_and_in_order(capsys):
    n = 400
    chatty[n](np.zeros(n), threads=2)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 * n
    tail = (" of a line long enough to be written in more than one piece of a line long enough to be written in "
            "more than one piece of a line long enough to be written in more than one")
    seen = {}
    for line in lines:
        m = re.fullmatch(r"work item (\d+) line (\d)(.*)", line)
        assert m and m.group(3) == tail, line
        item, k = int(m.group(1)), int(m.group(2))
        assert seen.get(item, -1) == k - 1, f"work item {item}'s lines out of order"
        seen[item] = k
    assert len(seen) == n


@gpuc.kernel
def prints_an_array(a):
    print(a)


@gpuc.kernel
def prints_to_a_file(a):
    print(a[0], file=None)


@gpuc.kernel
def computed_separator(a):
    print(a[0], sep=1)


@pytest.mark.parametrize("kernel, message", [
    (prints_an_array, r"print\(\) in kernels prints numbers, bools, string literals and tuples of them, not a"),
    (prints_to_a_file, r"print\(\) in kernels takes sep= and end=, not file="),
    (computed_separator, r"must be a string literal"),
])
def test_what_print_cannot_take_is_a_located_error(kernel, message):
    with pytest.raises(gpuc.CompilationError, match=message) as info:
        kernel[1](np.zeros(2))
    assert "test_print.py:" in str(info.value)


def test_targets_without_print_say_so():
    # SPIR-V and PTX print through their printf (tests/runtime/test_device_debug.py)
    types = (gpuc.Array[gpuc.float64, 1],) * 2
    job = gpuc.CompilerJob((scalars, types), gpuc.CompilerConfig(gpuc.GCNTarget(), kernel=True))
    with pytest.raises(gpuc.CompilationError,
                       match=r"print\(\) in kernels runs on the CPU, OpenCL \(spirv\) and CUDA \(ptx\), not on gcn"):
        gpuc.compile(job, "llvm")


def test_cached_kernels_still_print(tmp_path, monkeypatch, capsys):
    import subprocess
    import sys
    import textwrap

    script = tmp_path / "p.py"
    script.write_text(textwrap.dedent("""
        import numpy as np, gpuc

        @gpuc.kernel
        def k(a):
            print("value", a[gpuc.index()])

        k[2](np.array([1.5, 2.5]), threads=1)
    """))
    env = {"GPUC_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    import os
    env = {**os.environ, **env}
    runs = [subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
            for _ in range(2)]
    for run in runs:  # compiled, then from the disk cache
        assert run.returncode == 0, run.stderr
        assert run.stdout == "value 1.5\nvalue 2.5\n"


@gpuc.kernel
def control_characters(a):
    print("a\x1fb", a[0])


def test_strings_with_the_descriptions_separators_are_refused():
    with pytest.raises(gpuc.CompilationError, match=r"strings without the characters \\x00 and \\x1f"):
        control_characters[1](np.zeros(1))
