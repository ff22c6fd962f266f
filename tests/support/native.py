"""Helpers for the frontend tests: run a @gpuc.func on the test's device, the CPU through the JIT with the
flattened array ABI, or (in tests marked devices) an OpenCL device in one work item of a kernel calling it."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

import gpuc
import gpuc.runtime
from gpuc.frontend.core.types import ArrayType, ScalarType, TupleType

CTYPES = {"bool": ctypes.c_bool, "int32": ctypes.c_int32, "int64": ctypes.c_int64, "uint32": ctypes.c_uint32,
          "uint64": ctypes.c_uint64, "float32": ctypes.c_float, "float64": ctypes.c_double}
NUMPY = {"bool": np.bool_, "int32": np.int32, "int64": np.int64, "uint32": np.uint32, "uint64": np.uint64,
         "float32": np.float32, "float64": np.float64}

_loaded: dict = {}


def _ctype(t):
    if t is None or t == gpuc.frontend.core.types.none:
        return None
    if isinstance(t, ScalarType):
        return CTYPES[t.name]
    if isinstance(t, TupleType):
        fields = [(f"f{k}", _ctype(e)) for k, e in enumerate(t.elements)]
        return type("Tuple", (ctypes.Structure,), {"_fields_": fields})
    raise TypeError(t)


def _params(t) -> list:
    if isinstance(t, ArrayType):
        return [ctypes.c_void_p] + [ctypes.c_int64] * (2 * t.ndim)
    return [_ctype(t)]


def native(fn, argtypes):
    """A Python callable running `fn` compiled for `argtypes` (numpy arrays pass by reference) on the default
    device: the CPU, or OpenCL in tests marked devices (gpuc.runtime.dispatch.using_device)."""
    from gpuc.runtime.dispatch import default_device

    argtypes = tuple(gpuc.frontend.as_type(t) for t in argtypes)
    device = default_device.get()
    key = (fn, argtypes) if device == "cpu" else (fn, argtypes, device)
    if key in _loaded:
        return _loaded[key]
    from gpuc.frontend.passes.inference import Typing
    restype = Typing(gpuc.NativeTarget()).function(fn, argtypes).return_type
    if device != "cpu":
        _loaded[key] = _in_a_kernel(fn, argtypes, restype, device)
        return _loaded[key]
    if isinstance(restype, TupleType):
        # The C ABI returns most structs in memory, LLVM in registers: go through output arrays instead.
        _loaded[key] = _tuple_returning(fn, argtypes, restype)
        return _loaded[key]
    job = gpuc.CompilerJob((fn, argtypes), gpuc.CompilerConfig(gpuc.NativeTarget()))
    module = gpuc.runtime.load(job)
    cfn = module.function(_ctype(restype), *[p for t in argtypes for p in _params(t)])

    def call(*args):
        flat = []
        for t, a in zip(argtypes, args):
            if isinstance(t, ArrayType):
                assert a.dtype == NUMPY[t.dtype.name] and a.ndim == t.ndim
                flat += [a.ctypes.data, *a.shape, *(s // a.itemsize for s in a.strides)]
            else:
                flat.append(a)
        result = cfn(*flat)
        if isinstance(result, ctypes.Structure):
            return tuple(getattr(result, f) for f, _ in result._fields_)
        return result
    _loaded[key] = call
    return call


def python_args(argtypes, args):
    """Arguments for the interpreter: typed scalars become NumPy scalars, arrays are copied."""
    out = []
    for t, a in zip(argtypes, args):
        t = gpuc.frontend.as_type(t)
        if isinstance(t, ArrayType):
            out.append(a.copy())
        elif isinstance(t, ScalarType) and t.name not in ("int64", "float64", "bool"):
            out.append(NUMPY[t.name](a))
        else:
            out.append(a)
    return out


def assert_same(got, want, rtol=1e-12, path="result"):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), f"{path}: {got!r} != {want!r}"
        for k, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, rtol, f"{path}[{k}]")
        return
    if isinstance(want, np.ndarray):
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=rtol, atol=0, err_msg=path)
        else:
            np.testing.assert_array_equal(got, want, err_msg=path)
        return
    if isinstance(want, (float, np.floating)):
        if np.isnan(want):
            assert np.isnan(got), f"{path}: {got!r} is not nan"
        elif want == 0:
            assert got == 0 and np.copysign(1, got) == np.copysign(1, want), f"{path}: {got!r} != {want!r}"
        else:
            assert got == want or abs(got - want) <= rtol * abs(want), f"{path}: {got!r} != {want!r}"
        return
    if isinstance(want, (bool, np.bool_)):
        assert bool(got) == bool(want), f"{path}: {got!r} != {want!r}"
        return
    assert got == want, f"{path}: {got!r} != {want!r}"


_WRAPPER = """\
import gpuc
import gpuc.runtime

@gpuc.func
def unpack_results({params}):
    t = target({args})
{stores}
"""


def _tuple_returning(fn, argtypes, restype):
    import importlib.util
    import tempfile

    n = len(argtypes)
    params = [f"a{k}" for k in range(n)] + [f"o{k}" for k in range(len(restype.elements))]
    stores = "\n".join(f"    o{k}[0] = t[{k}]" for k in range(len(restype.elements)))
    text = _WRAPPER.format(params=", ".join(params), args=", ".join(params[:n]), stores=stores)
    outs = [gpuc.Array[e, 1] for e in restype.elements]
    # gpuc reads a function's source from its file, needed only until it is compiled (here, at once)
    with tempfile.TemporaryDirectory(prefix="gpuc_wrap_") as folder:
        path = Path(folder) / f"wrap_{fn.__name__}.py"
        path.write_text(text)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        module.target = fn
        spec.loader.exec_module(module)
        inner = native(module.unpack_results, tuple(argtypes) + tuple(outs))

    def call(*args):
        arrays = [np.zeros(1, NUMPY[e.name]) for e in restype.elements]
        inner(*args, *arrays)
        return tuple(a[0].item() for a in arrays)
    return call


_KERNEL = """\
import gpuc

@gpuc.kernel
def in_one_work_item({params}):
{body}
"""


def _in_a_kernel(fn, argtypes, restype, device):
    """`fn` called by a kernel launched over one work item on `device`; the result comes back through one-element
    arrays (a tuple's elements one each). Compiled at once, so that a compile error is raised here, as on the CPU."""
    import importlib.util
    import tempfile

    from gpuc.runtime.dispatch import launcher_for

    none = restype is None or restype == gpuc.frontend.core.types.none
    results = [] if none else list(restype.elements) if isinstance(restype, TupleType) else [restype]
    if any(not isinstance(t, ScalarType) for t in results):
        raise TypeError(f"{fn.__qualname__} returns {restype}: run on {device} are funcs returning scalars or "
                        "tuples of scalars")
    ins, outs = [f"a{k}" for k in range(len(argtypes))], [f"o{k}" for k in range(len(results))]
    call = f"target({', '.join(ins)})"
    if none:
        body = f"    {call}"
    elif isinstance(restype, TupleType):
        body = f"    t = {call}\n" + "\n".join(f"    {o}[0] = t[{k}]" for k, o in enumerate(outs))
    else:
        body = f"    o0[0] = {call}"
    dtypes = [np.dtype(t.name) for t in results]
    with tempfile.TemporaryDirectory(prefix="gpuc_wrap_") as folder:
        path = Path(folder) / f"kernel_{fn.__name__}.py"
        path.write_text(_KERNEL.format(params=", ".join(ins + outs), body=body))
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        module.target = fn
        spec.loader.exec_module(module)
        kernel = module.in_one_work_item
        kernel.source_info  # read while the file exists: later specializations reuse it
    launcher_for(kernel, [_sample(t) for t in argtypes] + [np.zeros(1, d) for d in dtypes], device)

    def call(*args):
        values = [_typed(t, a) for t, a in zip(argtypes, args)]
        arrays = [np.zeros(1, d) for d in dtypes]
        kernel.launch(1, *values, *arrays, device=device)
        if none:
            return None
        got = tuple(a[0].item() for a in arrays)
        return got if isinstance(restype, TupleType) else got[0]
    return call


def _sample(t):
    """A value of type `t` to compile a launch for (a C-contiguous array for an array type)."""
    if isinstance(t, ArrayType):
        return np.zeros((1,) * t.ndim, np.dtype(t.dtype.name))
    if isinstance(t, TupleType):
        return tuple(_sample(e) for e in t.elements)
    return np.dtype(t.name).type(0)


def _typed(t, value):
    """`value` as a launch argument of type `t`: integers wrap into the type, as ctypes converts them on the CPU."""
    if isinstance(t, ArrayType):
        return value
    if isinstance(t, TupleType):
        return tuple(_typed(e, v) for e, v in zip(t.elements, value))
    dtype = np.dtype(t.name)
    if dtype.kind in "iu":
        bits = 8 * dtype.itemsize
        v = int(value) & ((1 << bits) - 1)
        return dtype.type(v - (1 << bits) if dtype.kind == "i" and v >> (bits - 1) else v)
    return dtype.type(value)
