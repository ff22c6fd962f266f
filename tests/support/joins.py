"""Funcs joining two values at an if: x and y have their own types, c steers the paths (tests/frontend's join
and unification tests share them)."""

from __future__ import annotations

import gpuc


@gpuc.func
def if_no_else(x, y, c):
    v = x
    if c > 0:
        v = y
    return v


@gpuc.func
def if_else_first_binding(x, y, c):
    if c > 1:
        v = x
    else:
        v = y
    return v
