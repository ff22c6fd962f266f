"""Which array elements a work item touches, for the adjoint's adds into shadows.

An access `gep ... %array, offsets` is decomposed into a sum of monomials `c * index(d) * s` and
`c * s`, in bytes, where `index(d)` is the work item's index along dimension d (the values the
adjoint marker names), `s` is 1 or one of the array's own stride or shape parameters and `c` an
integer. An array is:

- "own" when every access is the same injective map of the index (one monomial per dimension, each
  with its own scale, no constant part) over every dimension whose index the kernel reads: each
  element is one work item's, and plain adds suffice (`x[i]` in a kernel that also reads index(1)
  is read by a whole row of items: "any");
- "near" when every access is that map shifted by constants along the dimensions (`a[i - 1]`,
  `a[i, j + 1]`): items farther apart than the shifts never touch the same element, so runs of
  items that far apart can run at once (`reach` per dimension);
- "any" otherwise (`x[idx[i]]`, one element every item reads, Python's wrap-around of a negative
  index): adds into its shadow are atomic when items run at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import gpuc.llvm as llvm

OWN, NEAR, ANY = "own", "near", "any"


@dataclass(frozen=True)
class Footprint:
    """How the work items' accesses of one array overlap: OWN, NEAR (with `reach`, the largest shift
    along each dimension) or ANY."""

    kind: str
    reach: tuple = (0, 0, 0)


def footprints(accesses: dict, indices: dict, size_of, read_dims=(0, 1, 2)) -> dict:
    """base -> Footprint for `accesses` (base -> [pointer, or None for a use that is no access: a
    pointer passed to a call]), given `indices` (value -> dimension), `size_of` (type -> bytes) and
    the dimensions whose index the kernel reads."""
    found = {}
    for base, pointers in accesses.items():
        maps = [None if p is None else _map(p, base, indices, size_of) for p in pointers]
        found[base] = _classify(maps, set(read_dims))
    return found


def _classify(maps, read_dims: set) -> Footprint:
    if not maps or any(m is None for m in maps):
        return Footprint(ANY)
    shape = None
    reach = [0, 0, 0]
    for terms, constants in maps:
        key = tuple(sorted(terms.items()))
        if shape is None:
            shape = key
        elif key != shape:
            return Footprint(ANY)
        dims = [d for d, _ in terms]
        scales = [s for _, s in terms]
        if not terms or len(set(dims)) != len(dims) or len(set(scales)) != len(scales) or not read_dims <= set(dims):
            return Footprint(ANY)
        by_scale = {s: (d, c) for (d, s), c in terms.items()}
        for scale, c in constants.items():
            if c == 0:
                continue
            if scale not in by_scale:
                return Footprint(ANY)
            d, coefficient = by_scale[scale]
            if c % coefficient:
                return Footprint(ANY)
            reach[d] = max(reach[d], abs(c // coefficient))
    return Footprint(OWN) if reach == [0, 0, 0] else Footprint(NEAR, tuple(reach))


def partition(accesses, base, indices, size_of, params) -> int | None:
    """The dimension d such that every access of `base` (an array parameter; `accesses`: (pointer, bytes of
    its element) pairs, the pointer None for a use that is no access) has `index(d)` itself as one
    coordinate, or None. Then work items whose indices along d differ touch different elements, whatever
    their other coordinates (within the array, as indexing promises): blocks of a launch that differ
    along d never meet there.

    A coordinate is the factor of one of the array's strides (`params`: the kernel's parameters, which
    name them) or, in a C-contiguous array (whose last stride no access names), of the element size;
    `index(d)` must be the whole factor, with nothing else on that stride (`a[i + 1, k]` is not), and the
    other coordinates must not hide a stride (a value a loop adds a stride to at every step). An access
    with several such coordinates (`a[i, j]`) counts for each."""
    prefix = base.name.rpartition(".")[0] if isinstance(base, llvm.Argument) else ""
    if not prefix or not accesses:
        return None
    strides = {a.name for a in params if a.name.startswith(prefix + ".stride")}
    last = max(strides, key=lambda name: int(name[len(prefix) + 7:] or 0), default=None)
    common = None  # the (stride, dimension) pairs every access so far has as a coordinate
    for pointer, element_bytes in accesses:
        terms = None if pointer is None else _coordinates(pointer, base, indices, prefix, size_of)
        if terms is None:
            return None
        if any(t[0] == last for t in terms) and any(t[0] == 1 for t in terms):
            return None  # an array whose last stride is named: offsets do not count its elements
        if any(t[0] == 1 and t[1] is None and _mentions(t[3], strides) for t in terms):
            return None
        found = set()
        for scale, dim, bytes_, _ in terms:
            if dim is not None and bytes_ == element_bytes and sum(1 for t in terms if t[0] == scale) == 1 \
                    and not (scale == 1 and last is not None and any(t[0] == last for t in terms)):
                found.add((scale, dim))
        # (an array partitioned two ways, one block's rows and another's columns, has none in common)
        common = found if common is None else common & found
        if not common:
            return None
    return min(common, key=lambda c: (str(c[0]), c[1]))[1]


def _mentions(value, names: set, limit: int = 256) -> bool:
    """Whether `value` may be computed from a parameter named in `names` (through arithmetic, casts, selects
    and phis; loads and calls end the search)."""
    seen, work = set(), [value]
    while work:
        v = work.pop()
        if v in seen:
            continue
        seen.add(v)
        if len(seen) > limit:
            return True
        if isinstance(v, llvm.Argument):
            if v.name in names:
                return True
        elif isinstance(v, llvm.PHINode):
            work += list(v.incoming_values)
        elif isinstance(v, (llvm.BinaryOperator, llvm.CastInst, llvm.SelectInst, llvm.CompareInst)):
            work += list(v.operands)
    return False


def _coordinates(pointer, base, indices, prefix: str, size_of):
    """`pointer` as [(scale, dim or None, bytes, value)] from `base`: each term a stride parameter's name (or
    1) times index(dim) (`bytes` per unit) or times anything else (dim and bytes None; `value`, what it is
    computed from); or None where the address is not such a sum."""
    steps = _steps(pointer, base, size_of)
    if steps is None:
        return None
    terms = []
    for index, size in steps:
        parts = _terms(index, indices, prefix, 0)
        if parts is None:
            return None
        terms += [(scale, dim, None if c is None else c * size, v) for scale, dim, c, v in parts]
    return terms


def _steps(pointer, base, size_of):
    """(index, bytes of the element it counts) of each one-index GEP from `base` to `pointer`, or None where
    `pointer` is not such a chain."""
    steps = []
    while pointer != base:
        if not isinstance(pointer, llvm.GetElementPtrInst) or len(pointer.indices) != 1 or len(steps) > 64:
            return None
        steps.append((pointer.indices[0], size_of(pointer.source_element_type)))
        pointer = pointer.operands[0]
    return steps


def _terms(v, indices, prefix: str, depth: int):
    """`v` as [(scale, dim or None, coefficient or None, value)]: index(dim) (or, dim None, `value`, anything)
    times the stride `scale` (or 1) times the coefficient; None where a stride multiplies something it
    cannot tell apart."""
    if depth > 32:
        return [(1, None, None, v)]
    if v in indices:
        return [(1, indices[v], 1, v)]
    if isinstance(v, llvm.Argument) and prefix and v.name.startswith(prefix + ".stride"):
        return [(v.name, None, None, v)]  # one stride: a coordinate's constant part
    if isinstance(v, llvm.CastInst) and v.opcode_name in ("sext", "zext"):
        return _terms(v.operands[0], indices, prefix, depth + 1)
    if not isinstance(v, llvm.BinaryOperator):
        return [(1, None, None, v)]
    op = v.opcode_name
    x, y = v.operands
    if op == "add":
        for wrap, i in ((x, y), (y, x)):
            if i in indices and _negative_wrap(wrap, i):
                return [(1, indices[i], 1, i)]  # Python's a[i] for i < 0: never, for a work item's index
    if op in ("add", "sub"):
        left, right = _terms(x, indices, prefix, depth + 1), _terms(y, indices, prefix, depth + 1)
        if left is None or right is None:
            return None
        return left + ([(s, d, None if c is None else -c, w) for s, d, c, w in right] if op == "sub" else right)
    if op in ("mul", "shl"):
        for a, k in ((x, y), (y, x)) if op == "mul" else ((x, y),):
            if isinstance(k, llvm.ConstantInt):
                factor = k.value if op == "mul" else (1 << k.value if 0 <= k.value < 62 else None)
                inner = _terms(a, indices, prefix, depth + 1)
                if inner is None or factor is None:
                    return None
                return [(s, d, None if c is None else c * factor, w) for s, d, c, w in inner]
        if op == "mul":
            for a, k in ((x, y), (y, x)):
                if isinstance(k, llvm.Argument) and k.name.startswith(prefix + ".stride"):
                    inner = _terms(a, indices, prefix, depth + 1)
                    if inner is None or any(s != 1 for s, _, _, _ in inner):
                        return None
                    return [(k.name, d, c, w) for _, d, c, w in inner]
    return [(1, None, None, v)]


def same_element(pointer, base, indices, size_of) -> bool:
    """Whether `pointer` is one element of `base` for every work item: its offset a sum of constants and
    of the array's strides and shapes, without a term in the item's index."""
    found = _map(pointer, base, indices, size_of)
    return found is not None and not found[0]


def _map(pointer, base, indices, size_of):
    """`pointer` as ({(dim, scale): coefficient}, {scale: constant}) in bytes from `base`, or None."""
    terms: dict = {}
    constants: dict = {}
    prefix = base.name.rpartition(".")[0] if isinstance(base, llvm.Argument) else ""
    steps = _steps(pointer, base, size_of)
    if steps is None:
        return None
    for index, size in steps:
        monomials = _linear(index, indices, prefix, 0)
        if monomials is None:
            return None
        for dim, scale, c in monomials:
            if dim is None:
                constants[scale] = constants.get(scale, 0) + c * size
            else:
                terms[(dim, scale)] = terms.get((dim, scale), 0) + c * size
    terms = {k: c for k, c in terms.items() if c}
    return terms, constants


def _linear(v, indices, prefix: str, depth: int):
    """`v` as a list of (dim or None, scale, coefficient) monomials, or None."""
    if depth > 32:
        return None
    if v in indices:
        return [(indices[v], 1, 1)]
    if isinstance(v, llvm.ConstantInt):
        return [(None, 1, v.value)]
    if isinstance(v, llvm.Argument):
        name = v.name
        if prefix and (name.startswith(prefix + ".stride") or name.startswith(prefix + ".shape")):
            return [(None, name, 1)]
        return None
    if isinstance(v, llvm.CastInst) and v.opcode_name in ("sext", "zext"):
        return _linear(v.operands[0], indices, prefix, depth + 1)
    if not isinstance(v, llvm.BinaryOperator):
        return None
    op = v.opcode_name
    x, y = v.operands
    if op == "add":
        for wrap, i in ((x, y), (y, x)):
            if i in indices and _negative_wrap(wrap, i):
                return [(indices[i], 1, 1)]  # Python's a[i] for i < 0: never, for a work item's index
    if op == "add" or op == "sub":
        left, right = _linear(x, indices, prefix, depth + 1), _linear(y, indices, prefix, depth + 1)
        if left is None or right is None:
            return None
        return left + ([(d, s, -c) for d, s, c in right] if op == "sub" else right)
    if op == "shl" and isinstance(y, llvm.ConstantInt) and 0 <= y.value < 32:
        inner = _linear(x, indices, prefix, depth + 1)
        return None if inner is None else [(d, s, c << y.value) for d, s, c in inner]
    if op == "mul":
        for a, k in ((x, y), (y, x)):
            if isinstance(k, llvm.ConstantInt):
                inner = _linear(a, indices, prefix, depth + 1)
                return None if inner is None else [(d, s, c * k.value) for d, s, c in inner]
        for a, k in ((x, y), (y, x)):
            scale = _linear(k, indices, prefix, depth + 1)
            if scale is not None and len(scale) == 1 and scale[0][0] is None and scale[0][1] != 1:
                inner = _linear(a, indices, prefix, depth + 1)
                if inner is None or any(s != 1 for _, s, _ in inner):
                    return None
                return [(d, scale[0][1], c * scale[0][2]) for d, _, c in inner]
    return None


def _negative_wrap(v, index) -> bool:
    """Whether `v` is `select (icmp slt index, 0), n, 0`: what Python's negative indices add."""
    if not isinstance(v, llvm.SelectInst):
        return False
    cond, _, otherwise = v.operands
    return (isinstance(cond, llvm.CompareInst) and cond.predicate == "slt" and cond.operands[0] == index
            and isinstance(cond.operands[1], llvm.ConstantInt) and cond.operands[1].value == 0
            and isinstance(otherwise, llvm.ConstantInt) and otherwise.value == 0)
