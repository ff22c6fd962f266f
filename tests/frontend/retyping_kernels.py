"""Programs whose first typing round is not their last: a loop header that unifies the entry's type with
the back edge's, recursion whose returns unify past the first return's type (compiled from this file).
Called from Python, the funcs run as Python: the reference."""

import gpuc


@gpuc.func
def wraps_in_loop(u, n):
    v = u  # uint32 before the loop
    for i in range(n):
        if i > 0:
            v %= -4  # float64 here: the header unifies uint32 with the float64 below
        v = v * 0.5
    return v


@gpuc.func
def halves_until(u, limit):
    v = u
    while v > limit:
        if v < 100:
            v //= -3  # an int entry, a float back edge
        v = v / 2
    return v


@gpuc.func
def power(n, x):
    if n <= 0:
        return 1
    return power(n - 1, x) * x


@gpuc.func
def even(n, x):
    if n <= 0:
        return 1
    return odd(n - 1, x) * x


@gpuc.func
def odd(n, x):
    if n <= 0:
        return 2
    return even(n - 1, x) * x


@gpuc.func
def still_wrong(u, n):
    v = u
    for i in range(n):
        v %= -4  # uint32 on every path: a real error
    return v


@gpuc.kernel
def run_wraps(out, u, n):
    out[0] = wraps_in_loop(u, n)


@gpuc.kernel
def run_halves(out, u, limit):
    out[0] = halves_until(u, limit)


@gpuc.kernel
def run_power(out, n, x):
    out[0] = power(n, x)


@gpuc.kernel
def run_even(out, n, x):
    out[0] = even(n, x)


@gpuc.kernel
def run_still_wrong(out, u, n):
    out[0] = still_wrong(u, n)
