"""Pickling @gpuc.kernel and @gpuc.func: by reference when importable, else by value (source, closure, the
globals the code names), loaded and launched in this process and in a fresh one."""

from __future__ import annotations

import copy
import importlib
import math
import os
import pickle
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

import gpuc

REPO = Path(__file__).resolve().parents[2]
SCALE = 1.5
F64 = gpuc.float64  # named only in annotations below
_LOCK = threading.Lock()  # a global no pickle can carry
# The tests that launch kernels run natively and through OpenCL.
ON_DEVICES = pytest.mark.devices("cpu", "opencl")

MODULE = textwrap.dedent('''\
    import gpuc

    SCALE = 3.0


    @gpuc.func
    def twice(x):
        return 2.0 * x


    @gpuc.kernel
    def scale(a, out):
        i = gpuc.index()
        out[i] = twice(a[i]) * SCALE


    class Holder:
        @gpuc.func
        def half(x):
            return 0.5 * x


    def make(factor):
        @gpuc.func
        def mul(x):
            return factor * x

        @gpuc.kernel
        def affine(a, out):
            i = gpuc.index()
            out[i] = mul(a[i]) + twice(1.0)

        return affine, mul
    ''')

SCRIPT = textwrap.dedent('''\
    import math
    import pickle
    import sys

    import numpy as np

    import gpuc
    import kernels_mod

    N = 32
    OFFSET = np.float64(0.25)


    @gpuc.func
    def cube(x):
        return x * x * x


    def fact(n):
        return 1 if n <= 1 else n * fact(n - 1)


    @gpuc.func
    def on_host(n):
        return fact(n)


    def make(factor):
        @gpuc.func
        def mul(x):
            return factor * x

        @gpuc.kernel
        def affine(a, out):
            i = gpuc.index()
            out[i] = mul(a[i]) + kernels_mod.twice(OFFSET)

        return affine


    @gpuc.kernel
    def calculus(a, out):
        i = gpuc.index()
        p = gpuc.deferred(cube, a[i])
        out[i] = p(a[i]) + gpuc.derivative(cube, a[i]) + gpuc.grad(cube, a[i])[0] + math.pi


    @gpuc.kernel
    def reverse_blocks(a, out):
        tile = gpuc.shared.array(N, gpuc.float64)
        i, t = gpuc.index(), gpuc.thread_index()
        tile[t] = a[i]
        gpuc.barrier()
        out[i] = tile[N - 1 - t]


    @gpuc.kernel
    def broken(a):
        i = gpuc.index()
        a[i] = not_defined_anywhere + 1.0


    kernels = {"affine": make(2.0), "calculus": calculus, "reverse_blocks": reverse_blocks, "on_host": on_host,
               "broken": broken, "scale": kernels_mod.scale}
    with open(sys.argv[1], "wb") as f:
        pickle.dump(kernels, f)
    ''')

LOADER = textwrap.dedent('''\
    import math
    import pickle
    import sys

    import numpy as np

    import gpuc
    import kernels_mod

    with open(sys.argv[1], "rb") as f:
        kernels = pickle.load(f)
    a = np.linspace(-1.0, 1.0, 64)
    out = np.zeros_like(a)

    kernels["affine"][64](a, out)
    assert np.allclose(out, 2.0 * a + 0.5), out
    kernels["calculus"][64](a, out)
    assert np.allclose(out, a ** 3 + 6.0 * a ** 2 + math.pi), out
    kernels["reverse_blocks"][64](a, out, block=32)
    assert np.array_equal(out, a.reshape(2, 32)[:, ::-1].ravel()), out
    assert kernels["on_host"](5) == 120
    assert kernels["scale"] is kernels_mod.scale

    try:
        kernels["broken"][64](a)
    except gpuc.CompilationError as exc:
        where = exc.location
        print(f"{where.file}|{where.line}|{where.col}")
    else:
        raise AssertionError("a kernel naming an undefined variable compiled")

    # The script is gone: pickling again takes the source from what loading registered.
    again = pickle.loads(pickle.dumps(kernels["affine"]))
    again[64](a, out)
    assert np.allclose(out, 2.0 * a + 0.5), out
    print("ok")
    ''')


@pytest.fixture
def kernels_mod(tmp_path, monkeypatch):
    """MODULE, importable as kernels_mod from tmp_path."""
    (tmp_path / "kernels_mod.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "kernels_mod", raising=False)
    yield importlib.import_module("kernels_mod")
    sys.modules.pop("kernels_mod", None)


def run_python(folder: Path, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(REPO)])}
    done = subprocess.run([sys.executable, *args], cwd=folder, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def round_trip(obj, protocol=pickle.DEFAULT_PROTOCOL):
    return pickle.loads(pickle.dumps(obj, protocol))


def test_importable_objects_travel_by_reference(kernels_mod):
    for obj in (kernels_mod.scale, kernels_mod.twice, kernels_mod.Holder.half):
        blob = pickle.dumps(obj)
        assert pickle.loads(blob) is obj
        assert b"def " not in blob and len(blob) < 200


@ON_DEVICES
def test_closures_of_an_importable_module_travel_by_value(kernels_mod):
    affine, mul = kernels_mod.make(4.0)
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        loaded = round_trip(mul, protocol)
        assert loaded is not mul and loaded(2.0) == 8.0
        assert loaded.__qualname__ == "make.<locals>.mul" and loaded.__module__ == "kernels_mod"
    a, out, want = np.arange(16.0), np.zeros(16), 4.0 * np.arange(16.0) + 2.0
    affine[16](a, out)
    assert np.allclose(out, want)
    size = len(pickle.dumps(affine))
    loaded = round_trip(affine)
    assert "_gpuc_launchers" in affine.__dict__ and "_gpuc_launchers" not in loaded.__dict__
    assert len(pickle.dumps(affine)) == size  # compiled state is not carried
    out[:] = 0
    loaded[16](a, out)
    assert np.allclose(out, want)


@ON_DEVICES
def test_by_value_kernel_with_closure_globals_and_callees(kernels_mod):
    factor, bias, width = 2.5, np.float64(0.25), 8

    @gpuc.func
    def mul(x: F64) -> F64:
        return factor * x + bias

    @gpuc.func
    def cube(x):
        return x * x * x

    @gpuc.kernel
    def k(a, out):
        i = gpuc.index()
        p = gpuc.deferred(cube, a[i])
        out[i] = mul(a[i]) * SCALE + kernels_mod.twice(a[i]) + p(a[i]) + gpuc.derivative(cube, a[i]) \
            + gpuc.grad(cube, a[i])[0]

    @gpuc.kernel
    def reverse_blocks(a, out):
        tile = gpuc.shared.array(width, gpuc.float64)
        i, t = gpuc.index(), gpuc.thread_index()
        tile[t] = a[i]
        gpuc.barrier()
        out[i] = tile[width - 1 - t]

    loaded, blocks = round_trip((k, reverse_blocks))
    a, out = np.linspace(-1.0, 1.0, 16), np.zeros(16)
    loaded[16](a, out)
    assert np.allclose(out, (2.5 * a + 0.25) * 1.5 + 2.0 * a + a ** 3 + 6.0 * a ** 2)
    blocks[16](a, out, block=8)
    assert np.array_equal(out, a.reshape(2, 8)[:, ::-1].ravel())


def test_self_references_and_plain_functions():
    def fact(n):
        return 1 if n <= 1 else n * fact(n - 1)

    @gpuc.func
    def countdown(n):
        return 0 if n <= 0 else 1 + countdown(n - 1)

    @gpuc.func
    def ping(n):
        return pong(n - 1) + 1 if n > 0 else 0

    @gpuc.func
    def pong(n):
        return ping(n - 1) + 10 if n > 0 else 0

    @gpuc.func
    def on_host(n):
        return fact(n) + countdown(n) + ping(n)

    loaded = round_trip(on_host)
    assert loaded(5) == 120 + 5 + 23
    assert round_trip(loaded)(4) == 24 + 4 + 22


def test_script_kernels_load_in_another_process(tmp_path):
    (tmp_path / "kernels_mod.py").write_text(MODULE)
    (tmp_path / "loader.py").write_text(LOADER)
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    run_python(tmp_path, str(script), "kernels.pkl")
    script.unlink()  # the loading process has only the pickle's copy of the source
    where, ok = run_python(tmp_path, "loader.py", "kernels.pkl").split()
    line = next(n for n, text in enumerate(SCRIPT.splitlines(), 1) if "not_defined_anywhere" in text)
    col = SCRIPT.splitlines()[line - 1].index("not_defined_anywhere") + 1
    assert (where, ok) == (f"{script}|{line}|{col}", "ok")


def test_unpicklable_values_are_named():
    lock = threading.Lock()

    @gpuc.kernel
    def uses_global(a):
        a[0] = 1.0 if _LOCK else 0.0

    @gpuc.kernel
    def uses_closure(a):
        a[0] = 1.0 if lock else 0.0

    with pytest.raises(pickle.PicklingError, match=r"global '_LOCK' of kernel .*uses_global: lock "):
        pickle.dumps(uses_global)
    with pytest.raises(pickle.PicklingError, match=r"closure variable 'lock' of kernel .*uses_closure: lock "):
        pickle.dumps(uses_closure)


def test_what_cannot_travel_by_value_says_so():
    namespace = {"gpuc": gpuc}
    exec("@gpuc.kernel\ndef made_by_exec(a):\n    a[0] = 1.0\n", namespace)  # noqa: S102
    with pytest.raises(pickle.PicklingError, match="made_by_exec by value: its source is not available"):
        pickle.dumps(namespace["made_by_exec"])

    helper = lambda x: x  # noqa: E731

    @gpuc.func
    def calls_lambda(x):
        return helper(x)

    with pytest.raises(pickle.PicklingError, match="lambdas have no source of their own"):
        pickle.dumps(calls_lambda)



@ON_DEVICES
def test_adjoint_kernels_travel_as_their_primal():
    @gpuc.kernel
    def primal(a):
        a[gpuc.index()] *= 2.0

    again = pickle.loads(pickle.dumps(gpuc.adjoint(primal)))
    x, dx = np.arange(4.0), np.ones(4)
    again[4](x, dx)
    assert dx.tolist() == [2.0] * 4


def test_copies_are_the_object_itself():
    @gpuc.func
    def f(x):
        return x + math.e

    assert copy.copy(f) is f and copy.deepcopy([f])[0] is f
