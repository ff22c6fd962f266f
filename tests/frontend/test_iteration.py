"""`for` over 1-D arrays, tuples, `enumerate` and `zip` (and tuples indexed at run time): each function runs in
the interpreter and compiled on the CPU, and the results must agree; what cannot be iterated is a located error."""

from __future__ import annotations

import numpy as np
import pytest

import gpuc
from gpuc import Array, boolean, float32, float64, int32, int64, uint32, uint64

from support.located_errors import check
from support.native import assert_same, native, python_args

# The tests that launch kernels or run funcs (support.native) run natively and through OpenCL.
ON_DEVICES = pytest.mark.devices("cpu", "opencl")

A1f64, A1f32, A1i32, A1b, A1u32 = (Array[float64, 1], Array[float32, 1], Array[int32, 1], Array[boolean, 1],
                                   Array[uint32, 1])
F64 = np.array([1.5, -2.0, 3.25, 0.5, 7.0, -1.0])
F32 = F64.astype(np.float32)
I32 = np.array([3, -1, 4, 1, -5, 9], np.int32)

CASES = []  # (func, argtypes, [args, ...])


def case(argtypes, *args):
    def register(fn):
        CASES.append((fn, tuple(argtypes), list(args)))
        return fn
    return register


# -- arrays -----------------------------------------------------------------------------------

@case((A1f64,), F64, F64[::2].copy())
@case((A1f32,), F32)
@case((A1i32,), I32)
@gpuc.func
def array_in_order(a):
    s = a[0] * 0
    for v in a:
        s = s * 3 + v
    return s


@case((A1b,), np.array([True, False, True, True]), np.array([False] * 3))
@gpuc.func
def bool_array(a):
    n = 0
    for v in a:
        if v:
            n += 1
    return n


@case((A1f64, float64), (F64, 3.0), (F64, -5.0), (F64, 100.0), (F64[:0].copy(), 0.0))
@gpuc.func
def break_continue_and_last_value(a, limit):
    s = 0.0
    v = -1.0
    for v in a:
        if v < 0:
            continue
        if v > limit:
            break
        s += v
    return s, v


@case((A1f64,), F64)
@gpuc.func
def body_writes_are_seen(a):
    s = 0.0
    for v in a:
        s += v
        a[len(a) - 1] = s  # the last element is read after every earlier write
    return s


@case((A1f64, A1f64), (F64, F64[::-1].copy()))
@gpuc.func
def rebinding_does_not_change_the_loop(a, b):
    s = 0.0
    for v in a:
        s = s * 2 + v
        a = b
    return s


@case((A1i32,), I32)
@gpuc.func
def nested_over_one_array(a):
    n = 0
    for x in a:
        for y in a:
            if x < y:
                n += 1
    return n


# -- tuples -----------------------------------------------------------------------------------

@case((float64, float64), (1.5, 2.0), (-3.0, 0.25))
@gpuc.func
def literal_tuple_one_type(x, y):
    s = 0.0
    for v in (x, y, 3.0, x * y):
        s = s * 2 + v
    return s


@case((int64, int64), (3, 4), (-7, 0))
@gpuc.func
def tuple_variable_and_shape(x, y):
    t = (x, y, x - y)
    n = 0
    for v in t:
        t = (0, 0, 0)  # the loop goes on over the tuple it started with
        n = n * 10 + v
    return n, t[0]


@case((A1f64,), F64)
@gpuc.func
def over_the_shape(a):
    n = 1
    for extent in a.shape:
        n *= extent
    return n


@case((float32, int64, uint32), (np.float32(1.5), 7, np.uint32(3)), (np.float32(-2.0), -1, np.uint32(0)))
@gpuc.func
def different_types_unroll(x, n, u):
    s = 0
    kinds = 0
    for v in (n, x, u, True, 2.5):
        s = s + v  # int64, then float64 from the float32 x on
        kinds = kinds * 2 + 1
    return s, kinds


@case((float64, int64), (1.5, 2), (-1.0, 5), (4.0, -3))
@gpuc.func
def unrolled_break_and_continue(x, n):
    s = 0.0
    count = 0
    for v in (n, x, 2 * n, x * x):
        count += 1
        if v < 0:
            continue
        if v > 3:
            break
        s += v
    return s, count


@case((float64, int64), (1.5, 2), (-1.0, 5))
@gpuc.func
def unrolled_return(x, n):
    for v in (n, x, True):
        if v > 1.0:
            return float(v)
    return -1.0


@case((int64,), (3,), (-2,))
@gpuc.func
def nested_tuples(n):
    s = 0.0
    for a, b in ((1, 2.5), (n, 0.5), (3, -1.0)):
        s = s * 2 + a * b
    for p in ((1, 2.5), (n, True)):
        s += p[0]
    return s


@case((A1f64, A1f64, int64), (F64, F64 * 2, 0), (F64, F64 * 2, 5), (F64, F64[:3].copy(), 1))
@gpuc.func
def tuple_of_arrays(a, b, i):
    s = 0.0
    for arr in (a, b, a):
        s = s * 2 + arr[i % len(arr)]
    pair = (a, b)
    return s + pair[i % 2][0]


@gpuc.func
def unrolled_over_nothing(n):
    s = n
    for v in ():
        s = 0
    for v in zip():
        s = 1
    return s


CASES.append((unrolled_over_nothing, (int64,), [(4,)]))


@case((int64,), (0,), (3,))
@gpuc.func
def unrolled_inside_a_loop(n):
    s = 0.0
    for i in range(n):
        for v in (i, 0.5, i * i):
            s = s * 0.5 + v
    return s


# -- enumerate and zip -----------------------------------------------------------------------------

@case((A1f64, int32), (F64, np.int32(0)), (F64, np.int32(-3)), (F64[:0].copy(), np.int32(2)))
@gpuc.func
def enumerate_forms(a, start):
    s = 0.0
    for i, v in enumerate(a):
        s += i * v
    for i, v in enumerate(a, 5):
        s += i * v
    for i, v in enumerate(a, start=start):
        s -= i * v
    for i, v in enumerate((1.5, 2.5), -2):
        s += i * v
    for i, j in enumerate(range(3, 10, 3), True):
        s += i * j
    pair = (0, 0.0)
    for pair in enumerate(a):
        pass
    return s, pair[0]


@case((A1f64, A1i32, int64), (F64, I32, 4), (F64, I32[:2].copy(), 9), (F64[:0].copy(), I32, 3))
@gpuc.func
def zip_stops_at_the_shortest(a, b, n):
    s = 0.0
    count = 0
    for x, y, j in zip(a, b, range(n)):
        s = s * 2 + x * y - j
        count += 1
    for x, (y, z) in zip(a, ((1, 2), (3, 4), (5, 6))):
        s += x * (y - z)
        count += 1
    for (x,) in zip(b):
        count += x
    return s, count


@case((A1f64, float32), (F64, np.float32(2.0)), (F64[:2].copy(), np.float32(-1.0)), (F64[:0].copy(), np.float32(1.0)))
@gpuc.func
def zip_with_different_types_ends_early(a, x):
    s = 0.0
    count = 0
    for v, w in zip(a, (1, x, True, 2.5)):  # unrolled, while a has elements
        s = s * 2 + v * w
        count += 1
    return s, count


@case((A1f64, A1i32), (F64, I32), (F64[:3].copy(), I32))
@gpuc.func
def enumerate_of_zip_and_zip_of_enumerate(a, b):
    s = 0.0
    for i, (x, y) in enumerate(zip(a, b), 1):
        if y < 0:
            continue
        s += i * x + y
    for (i, x), y in zip(enumerate(a), (3, 1, 4)):
        s = s * 2 + i * x - y
        if s > 100:
            break
    return s


@case((A1f64,), F64)
@gpuc.func
def element_targets(a):
    for a[0] in (2.0, 4.0):
        pass
    for i, a[i] in enumerate((9.0, 8.0, 7.0), 1):
        pass
    return a[0] + a[1] + a[2] + a[3]


@case((A1f64, int64), (F64, 2), (F64, 0))
@gpuc.func
def loop_carried_like_range_loops(a, n):
    t = 0.0
    for i, v in enumerate(a):
        if i > 0:
            t += w  # the previous iteration's w
        w = v * n
    return t


# -- tuples indexed at run time ------------------------------------------------------------------

@case((int64,), *[(i,) for i in range(-3, 3)])
@case((int32,), *[(np.int32(i),) for i in range(-3, 3)])
@case((uint64,), *[(np.uint64(i),) for i in range(3)])
@gpuc.func
def run_time_tuple_index(i):
    t = (10, 20, 30)
    u = ((1, 2.5), (3, 4.5), (5, 6.5))
    return t[i] + t[i % 3] + u[i][1] + u[2 - i % 3][0]


@ON_DEVICES
@pytest.mark.parametrize("fn, argtypes, args", [
    pytest.param(fn, types, a, id=f"{fn.__name__}-{k}") for fn, types, cases in CASES for k, a in enumerate(cases)])
def test_same_results_as_python(fn, argtypes, args):
    args = args if isinstance(args, tuple) else (args,)
    py_args = python_args(argtypes, args)
    want = fn(*py_args)
    gpu_args = python_args(argtypes, args)
    assert_same(native(fn, argtypes)(*gpu_args), want)
    for p, g in zip(py_args, gpu_args):  # arrays the function wrote to
        if isinstance(p, np.ndarray):
            assert_same(g, p)


@ON_DEVICES
def test_strided_and_reversed_views():
    fn = native(array_in_order, (A1f64,))
    for view in (F64[::2], F64[::-1], F64[1::3]):
        assert fn(view) == array_in_order(view)


def test_unrolled_copies_keep_each_elements_type():
    from gpuc.frontend import TupleType
    from gpuc.frontend.passes.inference import Typing
    typed = Typing(gpuc.NativeTarget()).function(different_types_unroll, (float32, int64, uint32))
    assert typed.return_type == TupleType((float64, int64))
    typed = Typing(gpuc.NativeTarget()).function(zip_with_different_types_ends_early, (A1f64, float32))
    assert typed.return_type == TupleType((float64, int64))


@gpuc.func
def clamped(i):
    t = (10, 20, 30)
    return t[i]


@ON_DEVICES
@pytest.mark.parametrize("t", [int64, int32, uint32, uint64, boolean], ids=str)
def test_an_index_outside_the_tuple_reads_its_nearest_end(t):
    # Python raises IndexError; the docs define the read: past the end the last element, before -n the first
    fn = native(clamped, (t,))
    lo, hi = (0, 1) if t is boolean else (-2**(t.bits - 1) if t.signed else 0, 2**(t.bits - 1) - 1 if t.signed
                                          else 2**t.bits - 1)
    for i in {lo, lo + 1, -4, -3, -1, 0, 1, 2, 3, 4, hi - 1, hi}:
        if lo <= i <= hi:
            value = bool(i) if t is boolean else np.dtype(t.name).type(i)
            want = (10, 20, 30)[min(max(i, -3), 2)] if -3 <= i < 3 else (30 if i >= 3 else 10)
            assert fn(value) == want, (t, i)


@gpuc.func
def int_sum(a):
    s = 0
    for v in a:
        s += v
    return s


def test_what_the_loops_compile_to(filecheck):
    # a loop over a contiguous array is the canonical counted loop, so it vectorizes; a run-time tuple
    # index is straight-line selects, never a tuple in memory
    filecheck(gpuc.code_llvm(int_sum, (Array[int64, 1, "C"],)), """
CHECK-LABEL: @int_sum.A1i64C(
CHECK: load <{{[0-9]+}} x i64>
CHECK: add <{{[0-9]+}} x i64>
""")
    filecheck(gpuc.code_llvm(clamped, (int64,)), """
CHECK-LABEL: @clamped.i64(
CHECK-NOT: alloca
CHECK: select
CHECK: ret i64
""")


@ON_DEVICES
def test_a_kernel_iterates_on_every_target():
    @gpuc.kernel
    def k(a, b, out, n):
        i = gpuc.index()
        s = 0.0
        for arr in (a, b):
            s += arr[i]
        for j, (x, y) in enumerate(zip(a, (1, 2.5, n))):
            s += x * y + j
        for v in a:
            if v > 2:
                break
            s += v
        out[i] = s

    A = Array[float32, 1]
    for target in (gpuc.PTXTarget(), gpuc.GCNTarget(), gpuc.SPIRVTarget()):
        gpuc.compile(gpuc.CompilerJob((k, (A, A, A, int64)), gpuc.CompilerConfig(target)), "llvm")
    a = np.arange(4, dtype=np.float32)
    out = np.zeros(4, np.float32)
    k[4](a, 2 * a, out, 3)
    assert out.tolist() == [3 * i + 11.5 + 3 for i in range(4)]


# -- errors -------------------------------------------------------------------------------------------

def plain_generator(n):
    yield n


@gpuc.func
def over_a_generator(a):
    s = 0.0
    for v in (x * 2 for x in a):
        s += v
    return s


@gpuc.func
def over_reversed(a):
    s = 0.0
    for v in reversed(a):
        s += v
    return s


@gpuc.func
def over_a_dict(a):
    s = 0.0
    for k in {1: 2.0}:
        s += k
    return s


@gpuc.func
def over_dict_items(a):
    s = 0.0
    for k, v in a.items():
        s += v
    return s


@gpuc.func
def over_a_list(a):
    s = 0.0
    for v in [1.0, 2.0]:
        s += v
    return s


@gpuc.func
def over_a_number(a):
    s = 0.0
    for v in a[0]:
        s += v
    return s


@gpuc.func
def over_a_python_generator(a):
    s = 0.0
    for v in plain_generator(3):
        s += v
    return s


GLOBAL_TUPLE = (1, 2, 3)


@gpuc.func
def over_a_global_tuple(a):
    s = 0.0
    for v in GLOBAL_TUPLE:
        s += v
    return s


@gpuc.func
def unpacking_numbers(a):
    s = 0.0
    for x, y in a:
        s += x
    return s


@gpuc.func
def unsigned_enumerate_start(a):
    s = 0.0
    for i, v in enumerate(a, gpuc.uint64(1)):
        s += v
    return s


@gpuc.func
def strict_zip(a):
    s = 0.0
    for x, y in zip(a, a, strict=True):
        s += x
    return s


@gpuc.func
def range_as_a_value(a):
    r = range(3)
    return a[0]


@gpuc.func
def map_in_a_loop(a):
    s = 0.0
    for v in map(abs, a):
        s += v
    return s


@gpuc.func
def over_ndindex(a):
    s = 0.0
    for i in np.ndindex(3):
        s += 1.0
    return s


GLOBAL_ARRAY = np.array([1.5, -2.0, 4.25])


@gpuc.func
def over_a_global_array(a):
    s = 0.0
    for v in GLOBAL_ARRAY:  # frozen at compile time (tests/frontend/test_global_arrays.py)
        s = s * 2 + v
    return s


@ON_DEVICES
def test_a_global_array_is_iterated_as_a_constant():
    assert native(over_a_global_array, (A1f64,))(F64) == over_a_global_array(F64)


@gpuc.func
def read_before_the_first_copy_assigns(a):
    s = 0.0
    for v in (1, 2.5):
        if v > 2:
            s += w
        w = v
    return s


@gpuc.func
def float_tuple_index(a):
    t = (1.0, 2.0)
    return t[a[0]]


@pytest.mark.parametrize("fn, message, fragment, hint", [
    (over_a_generator, "cannot iterate over a generator expression", "in |(x * 2", "loop over the values"),
    (over_reversed, "reversed cannot be called", "in |reversed(a)", "range(len(a) - 1, -1, -1)"),
    (over_a_dict, "cannot iterate over a dict", "in |{1: 2.0}", "zip"),
    (over_dict_items, ".items() of a dict cannot be iterated", "in |a.items()", "zip"),
    (over_a_list, "cannot iterate over a list", "in |[1.0", "for v in (a, b, c)"),
    (over_a_number, "cannot iterate over a float64", "in |a[0]:", "range(...), a 1-D array"),
    (over_a_python_generator, "plain_generator cannot be called", "in |plain_generator", "generators are not"),
    (over_a_global_tuple, "the global tuple GLOBAL_TUPLE cannot be iterated", "in |GLOBAL_TUPLE", "(1, 2, 3)"),
    (unpacking_numbers, "cannot unpack a float64", "for |x, y", None),
    (unsigned_enumerate_start, "the start of enumerate() counts in int64", "a, |gpuc.uint64(1)", "int(...)"),
    (strict_zip, "zip takes no keyword arguments", "strict=|True", None),
    (range_as_a_value, "range cannot be called", "r = |range(3)", "for i in range(n)"),
    (map_in_a_loop, "map cannot be called", "in |map(", "call the function in the loop body"),
    (float_tuple_index, "tuple indices must be integers, not float64", "t[|a[0]]", None),
    (over_ndindex, "ndindex cannot be called", "in |np.ndindex", "nest range loops"),
    (read_before_the_first_copy_assigns, "variable 'w' is used before it is assigned", "s += |w", None),
], ids=lambda v: v.__name__ if callable(v) else None)
def test_what_cannot_be_iterated_is_a_located_error(fn, message, fragment, hint):
    check(fn, (A1f64,), message, fragment, hint=hint)


def test_for_else_is_an_error():
    @gpuc.func
    def f(a):
        for v in a:
            pass
        else:
            return 1.0
        return 0.0
    check(f, (A1f64,), "for/else is not supported", "for v in a:", hint="flag variable")
