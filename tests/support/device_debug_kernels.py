"""Kernels that print and check their indices, launched on the CPU, through OpenCL and CUDA and compiled to PTX by
tests/runtime/test_device_debug.py and tests/gpu/test_cuda_debugging.py (kernels are compiled from real files)."""

import gpuc


@gpuc.kernel
def print_values(a):
    # one work item prints every value, so that the order of the lines is the program's
    for k in range(len(a)):
        print(a[k])
        print("k =", k, "twice:", 2 * a[k], sep=" ", end=";\n")


@gpuc.func
def describe(x, i):
    print("item", i, (x, i, (x > 0, -x)), 1.5, True, sep=" | ", end="")
    print()


@gpuc.kernel
def print_tuples(a):
    for k in range(len(a)):
        describe(a[k], k)


@gpuc.kernel
def print_small_types(a, b):
    print((a[0], b[0]), a[0], "100%", "%d %s")  # NumPy's scalars' repr in a tuple; a % is printed as it is


@gpuc.kernel
def print_complex_tuples(a):
    for k in range(len(a) - 1):
        print((a[k], k), a[k + 1], (a[k].conjugate(),), sep="; ")  # each complex number its own form


@gpuc.kernel
def print_many_complex(a):
    print(a[0], a[1], a[2], a[3], a[4])  # more than printf_format.MOST_CHOICES: each in parentheses


@gpuc.kernel
def print_per_item(out):
    i = gpuc.index()
    print("work item", i, "of", len(out))
    out[i] = i


@gpuc.kernel
def marker(k):
    print("=== case", k)


@gpuc.kernel(boundscheck=True)
def shift(a, out):
    i = gpuc.index()
    out[i] = a[i + 1]


@gpuc.kernel(boundscheck=True)
def from_the_end(a, out, k):
    i = gpuc.index()
    out[i] = a[i - k]


@gpuc.kernel(boundscheck=True)
def store_past(out):
    i = gpuc.index()
    out[2 * i] = 1.0


@gpuc.func(boundscheck=True)
def at(a, i, j):
    return a[i, j]


@gpuc.kernel  # unchecked itself: the func checks its own indices
def diagonal_plus(a, out, d):
    i = gpuc.index()
    out[i] = at(a, i, i + d)


@gpuc.kernel(boundscheck=True)
def shared_reverse(x, out, skew):
    t = gpuc.thread_index()
    buf = gpuc.shared.array(8, gpuc.float64)
    buf[t] = x[gpuc.index()]
    gpuc.barrier()
    out[gpuc.index()] = buf[7 - t + skew]


@gpuc.kernel(boundscheck=True)
def local_window(x, out, width):
    i = gpuc.index()
    w = gpuc.local.array(4, gpuc.float64)
    for k in range(width):
        w[k] = x[i] * k
    out[i] = w[0] + w[1]


@gpuc.kernel(boundscheck=True)
def runaway(a, out):
    i = gpuc.index()
    k = 0
    while a[k] != -1.0:  # no -1 in a: without the check this reads on past the array forever
        k += 1
    out[i] = k


@gpuc.kernel(boundscheck=True)
def count(a, i, hits):
    gpuc.atomic_add(hits, a[i], 1)


def print_cases():
    """The print tests' launches, [(name, kernel, arguments)], the same on every device: values of every dtype
    whose shortest decimal form printf's round-trip precision also gives (docs/debugging.md), and tuples."""
    import numpy as np

    floats = {np.float64: [0.5, -2.5, 3.0, 0.375, 1e30, 2.0 ** -20, np.inf, -np.inf, np.nan, -0.0, 123456789.0],
              np.float32: [0.5, -2.5, 3.0, 0.375, 2.0 ** -10, np.inf, -np.inf, np.nan, -0.0, 65504.0],
              np.float16: [0.5, -2.5, 3.0, 0.375, np.inf, -np.inf, np.nan, -0.0, 100.0]}
    cases = [(np.dtype(t).name, print_values, (np.array(v, t),)) for t, v in floats.items()]
    for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64):
        info = np.iinfo(t)
        cases.append((np.dtype(t).name, print_values, (np.array([0, 1, 7, info.min, info.max], t),)))
    cases.append(("bool", print_values, (np.array([True, False]),)))
    for t in (np.complex64, np.complex128):
        cases.append((np.dtype(t).name, print_values, (np.array([1 + 2j, -0.5 - 1.5j, 3 + 0j, 0.5 - 0.0j], t),)))
    zeros = [2j, -0.0 + 1j, 0j, complex(0.0, -np.inf), complex(-0.0, -0.0), complex(0.0, np.nan)]
    for t in (np.complex64, np.complex128):
        cases.append((np.dtype(t).name + " real +0", print_values, (np.array(zeros, t),)))
    cases.append(("complex in tuples", print_complex_tuples, (np.array(zeros),)))
    cases.append(("tuples", print_tuples, (np.array([0.5, -2.0]),)))
    cases.append(("numpy scalars", print_small_types, (np.array([0.5], np.float32), np.array([-3], np.int8))))
    return cases


@gpuc.kernel(boundscheck=True)
def row_sums(a, out, k):
    i = gpuc.index()
    r = a[i + k, :]
    s = 0.0
    for v in r:
        s += v
    out[i] = s


@gpuc.kernel
def print_first(a):
    print(a[0], a[0] > 0)  # the first statement of the kernel: PTX's argument buffer starts the entry block


@gpuc.func
def weighted(x, w, n):
    s = 0.0
    for k in range(n):
        s += w[k] * x * x
    return s


@gpuc.kernel(boundscheck=True)
def weighted_slopes(xs, w, n, out):
    i = gpuc.index()
    out[i] = gpuc.derivative(weighted, xs[i], w, n)


@gpuc.kernel(boundscheck=True)
def weighted_gradients(xs, w, n, out):
    i = gpuc.index()
    out[i] = gpuc.grad(weighted, xs[i], w, n)[0] + gpuc.derivative(weighted, xs[i], w, n)
