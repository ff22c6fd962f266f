"""Deep nesting: long chains of @gpuc.func calls and long expressions compile; beyond the frontend's limit they
are located CompilationErrors, never RecursionError, InternalCompilerError or a crashed interpreter."""

from __future__ import annotations

import textwrap

import pytest

# A module of `calls` funcs f0 .. f{calls-1}, each calling the previous one, and a kernel k whose
# one statement adds `terms` copies of x to the chain's result: k stores x + calls + terms * x.
MAKE_MODULE = '''
import importlib.util, sys, pathlib
def make_module(name, calls, terms):
    lines = ["import gpuc", "@gpuc.func", "def f0(x):", "    return x + 1"]
    for i in range(1, calls):
        lines += ["@gpuc.func", f"def f{i}(x):", f"    return f{i - 1}(x) + 1"]
    lines += ["@gpuc.kernel", "def k(out, x):", f"    out[0] = f{calls - 1}(x) + " + " + ".join(["x"] * terms)]
    path = pathlib.Path(name + ".py")
    path.write_text("\\n".join(lines) + "\\n")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
'''


def case(body: str) -> str:
    return MAKE_MODULE + textwrap.dedent(body)


@pytest.mark.devices("cpu", "opencl")
def test_hundreds_of_nested_calls_compile_and_run(survive):
    # a chain of 60 funcs was an InternalCompilerError (RecursionError)
    result = survive(case("""
        import numpy as np, gpuc
        limit = sys.getrecursionlimit()
        m = make_module("chain", 500, 1)
        out = np.zeros(1, dtype=np.int64)
        m.k[1](out, 3)
        assert out[0] == 3 + 500 + 3, out
        assert sys.getrecursionlimit() == limit, sys.getrecursionlimit()
        print("CHAIN-OK")
    """), timeout=300)
    assert "CHAIN-OK" in result.stdout, result.stderr


@pytest.mark.devices("cpu", "opencl")
def test_thousands_of_terms_compile_and_run(survive):
    # an expression of 1,000 terms was an InternalCompilerError (RecursionError)
    result = survive(case("""
        import numpy as np, gpuc
        m = make_module("long", 1, 2500)
        out = np.zeros(1, dtype=np.int64)
        m.k[1](out, 2)
        assert out[0] == 2 + 1 + 2500 * 2, out
        print("TERMS-OK")
    """), timeout=300)
    assert "TERMS-OK" in result.stdout, result.stderr


def test_deep_programs_compile_for_the_gpu_targets(survive):
    # LLVM's side (inlining 300 levels, a 1,500-term sum) copes too
    result = survive(case("""
        import gpuc
        m = make_module("both", 300, 1500)
        sig = (gpuc.Array[gpuc.int64, 1], gpuc.int64)
        for target in (gpuc.PTXTarget(), gpuc.GCNTarget(), gpuc.SPIRVTarget()):
            output = "obj" if isinstance(target, gpuc.SPIRVTarget) else "asm"
            gpuc.compile(gpuc.CompilerJob((m.k, sig), gpuc.CompilerConfig(target)), output)
        print("GPU-OK")
    """), timeout=300)
    assert "GPU-OK" in result.stdout, result.stderr


def test_beyond_the_limit_is_a_located_compilation_error(survive):
    result = survive(case("""
        import numpy as np, gpuc
        limit = sys.getrecursionlimit()
        m = make_module("toodeep", 3000, 1)
        try:
            m.k[1](np.zeros(1, dtype=np.int64), 1)
        except gpuc.CompilationError as exc:
            assert "nests too deeply for gpuc" in exc.message, exc
            assert exc.location is not None and "toodeep.py" in str(exc), exc
            print("LOCATED-OK")
        assert sys.getrecursionlimit() == limit
    """), timeout=300)
    assert "LOCATED-OK" in result.stdout, result.stdout + result.stderr


def test_a_deep_caller_and_concurrent_compiles(survive):
    # the frontend's depth does not depend on how deep the caller already is, nor on other compiles
    result = survive(case("""
        import threading
        import numpy as np, gpuc
        limit = sys.getrecursionlimit()
        modules = [make_module(f"m{n}", 200, 200) for n in range(4)]

        def deep(n, module):
            if n:
                return deep(n - 1, module)
            out = np.zeros(1, dtype=np.int64)
            module.k[1](out, 1)
            return int(out[0])

        assert deep(limit - 100, modules[0]) == 1 + 200 + 200 * 1
        results = []
        threads = [threading.Thread(target=lambda m=m: results.append(deep(300, m))) for m in modules[1:]]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == [401] * 3, results
        assert sys.getrecursionlimit() == limit
        print("DEEP-CALLER-OK")
    """), timeout=300)
    assert "DEEP-CALLER-OK" in result.stdout, result.stderr


def test_ctrl_c_during_a_long_frontend_run(survive):
    # an interrupted caller returned at once, restoring the recursion limit under the deep frontend
    # thread ("Fatal Python error: Cannot recover from stack overflow") and freeing its LLVM context
    result = survive(case("""
        import os, signal, threading
        import numpy as np, gpuc
        warm = make_module("warm", 2, 2)
        warm.k[1](np.zeros(1, dtype=np.int64), 1)  # LLVM loaded: the signal lands in the frontend run
        m = make_module("interrupted", 400, 1500)
        timer = threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGINT))
        timer.start()
        try:
            m.k[1](np.zeros(1, dtype=np.int64), 1)
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a signal arriving after the run: not this test's
            timer.cancel()
            print("FINISHED-BEFORE-THE-SIGNAL")
        except KeyboardInterrupt:
            print("INTERRUPTED-OK")
    """), timeout=300)
    assert "INTERRUPTED-OK" in result.stdout or "FINISHED-BEFORE-THE-SIGNAL" in result.stdout, result.stderr
