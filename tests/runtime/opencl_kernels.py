"""Kernels the OpenCL runtime tests launch (kernels are compiled from real files)."""

import gpuc


@gpuc.kernel
def saxpy(a, x, y):
    i = gpuc.index()
    y[i] = a * x[i] + y[i]


@gpuc.kernel
def shift_add(src, dst):
    i = gpuc.index()
    dst[i] = dst[i] + src[i]


@gpuc.kernel
def fill_block_ids(out):
    i = gpuc.index(0)
    if i < len(out):
        out[i] = gpuc.block_index(0) * 1000 + gpuc.thread_index(0)


@gpuc.kernel
def fill_ids(out):
    i = gpuc.index(0)
    if i < len(out):
        out[i] = i


@gpuc.kernel
def dynamic_reverse(x, out):
    s = gpuc.shared.dynamic(gpuc.float32)
    t, i = gpuc.thread_index(0), gpuc.index(0)
    n = gpuc.block_dim(0)
    s[t] = x[i]
    gpuc.barrier()
    out[i] = s[n - 1 - t]


@gpuc.kernel
def nothing():
    pass


@gpuc.kernel
def big_shared(out):
    s = gpuc.shared.array(1 << 20, gpuc.float64)  # 8 MiB: more than a CPU device's local memory
    t = gpuc.thread_index(0)
    s[t] = t
    gpuc.barrier()
    out[gpuc.index(0)] = s[gpuc.block_dim(0) - 1 - t]


@gpuc.kernel
def linear_ids(out):
    x, y, z = gpuc.index(0), gpuc.index(1), gpuc.index(2)
    if x < out.shape[2] and y < out.shape[1] and z < out.shape[0]:
        out[z, y, x] = gpuc.thread_index(0) + 10 * gpuc.thread_index(1) + 100 * gpuc.thread_index(2)


@gpuc.kernel
def warp_sizes(out):
    i = gpuc.index(0)
    if i < len(out):
        out[i] = gpuc.warp_size()


@gpuc.kernel
def row_sums(a, out):
    r = gpuc.index(0)
    acc = gpuc.float32(0.0)
    for j in range(a.shape[1]):
        acc += a[r, j] * a[r, j]
    out[r] = acc


@gpuc.kernel
def write_two(a, b):
    i = gpuc.index()
    a[i] = i
    b[i] = -i


@gpuc.kernel
def escape_times(cs, out):
    i = gpuc.index()
    c = cs[i]
    z = 0.0
    k = 0
    while k < 50 and abs(z) <= 2.0:
        z = z * z + c  # a recurrence, not a reduction: no vectorizer reorders it
        k += 1
    out[i] = k
