"""The block model in kernels and funcs: launch geometry, shared and local arrays, barriers, fences and
warp operations (docs/frontend.md, "Blocks").

Each call lowers to a call of a `gpuc.ctx.*` marker (gpuc/abi.py); the context plugin resolves them per
target, through the target's hooks on GPUs and with work-item loops on the CPU. Shared arrays are globals
in the target's shared address space, one per `gpuc.shared.array` in a function's source (so a func
called twice uses the same memory, as a `__shared__` variable is), reached through `gpuc.ctx.shared`;
local arrays are allocas, zeroed where they are declared.

Called from Python, every one of them refuses to run: they mean something only for work items of a
launch.
"""

from __future__ import annotations

import ast
import operator
import types as _pytypes

from ... import abi
from ...llvm import ArrayType as LLArray
from ...llvm import Constant, ConstantInt
from ..core import registry
from ..core.errors import UserError
from ..core.plans import CallPlan, Handler
from .builtins import ContextIntrinsic
from ..core.functions import _NOT_FOUND
from ..core.types import NUMBERS  # complex numbers are array elements too (complex.py)
from ..core.types import ArrayType, ScalarType, as_type, boolean, int32, int64, none, uint64
from ..core.types import an


def _outside(name: str):
    raise RuntimeError(f"gpuc.{name}() only works inside a compiled @gpuc.kernel or @gpuc.func, where work "
                       "items of a launch run it; launch the kernel instead of calling it from Python")


# -- the Python objects ----------------------------------------------------------------------------

def thread_index(dim: int = 0) -> int:
    """The index of this work item within its block along `dim` (CUDA's threadIdx)."""
    _outside("thread_index")


def block_index(dim: int = 0) -> int:
    """The index of this work item's block along `dim` (CUDA's blockIdx)."""
    _outside("block_index")


def block_dim(dim: int = 0) -> int:
    """Work items per block along `dim` (CUDA's blockDim): the launch's `block=`."""
    _outside("block_dim")


def grid_dim(dim: int = 0) -> int:
    """Blocks in the launch along `dim` (CUDA's gridDim)."""
    _outside("grid_dim")


def lane_index() -> int:
    """This work item's lane in its warp: its linear index in the block modulo gpuc.warp_size()."""
    _outside("lane_index")


def warp_size() -> int:
    """Work items per warp: 32 on PTX and the CPU, 64 on GCN, the sub-group size on SPIR-V."""
    _outside("warp_size")


def barrier() -> None:
    """Wait until every work item of the block has arrived here (CUDA's __syncthreads)."""
    _outside("barrier")


def barrier_count(predicate) -> int:
    """A barrier that returns for how many work items of the block `predicate` is true (an int32)."""
    _outside("barrier_count")


def barrier_all(predicate) -> bool:
    """A barrier that returns whether `predicate` is true for every work item of the block."""
    _outside("barrier_all")


def barrier_any(predicate) -> bool:
    """A barrier that returns whether `predicate` is true for any work item of the block."""
    _outside("barrier_any")


def grid_barrier() -> None:
    """Wait until every work item of the launch has arrived here."""
    _outside("grid_barrier")


def fence() -> None:
    """Order this work item's memory accesses for every work item of the launch (CUDA's __threadfence)."""
    _outside("fence")


def fence_block() -> None:
    """Order this work item's memory accesses for the work items of its block (__threadfence_block)."""
    _outside("fence_block")


def syncwarp() -> None:
    """Wait until every lane of the warp has arrived here (CUDA's __syncwarp)."""
    _outside("syncwarp")


def shfl_idx(value, lane):
    """`value` as lane `lane` (modulo the warp size) of the warp holds it (the caller's own value for a
    lane that is not active)."""
    _outside("shfl_idx")


def shfl_up(value, delta):
    """`value` as lane `lane_index() - delta` holds it (the caller's own below lane 0)."""
    _outside("shfl_up")


def shfl_down(value, delta):
    """`value` as lane `lane_index() + delta` holds it (the caller's own past the warp's last lane)."""
    _outside("shfl_down")


def shfl_xor(value, lane_mask):
    """`value` as lane `lane_index() ^ lane_mask` holds it (a butterfly exchange)."""
    _outside("shfl_xor")


def ballot(predicate) -> int:
    """A uint64 whose bit k is set when `predicate` is true in lane k of the warp."""
    _outside("ballot")


def vote_any(predicate) -> bool:
    """Whether `predicate` is true in any active lane of the warp."""
    _outside("vote_any")


def vote_all(predicate) -> bool:
    """Whether `predicate` is true in every active lane of the warp."""
    _outside("vote_all")


def _shared_array(shape, dtype):
    """An array in the block's shared memory: `shape` a constant int or tuple of them, `dtype` a gpuc or
    NumPy scalar type. Every work item of the block sees the same elements; they start undefined."""
    _outside("shared.array")


def _shared_dynamic(dtype):
    """The dynamic shared memory of the launch (its `shared=` bytes) as a 1-D array of `dtype`; every
    call views the same bytes."""
    _outside("shared.dynamic")


def _local_array(shape, dtype):
    """An array of this work item's own, zeroed where it is declared: `shape` a constant int or tuple."""
    _outside("local.array")


_shared_array.__name__ = _shared_array.__qualname__ = "array"
_shared_dynamic.__name__ = _shared_dynamic.__qualname__ = "dynamic"
_local_array.__name__ = _local_array.__qualname__ = "array"

#: `gpuc.shared`: shared.array(shape, dtype) and shared.dynamic(dtype).
shared = _pytypes.ModuleType("gpuc.shared", "Per-block shared memory in kernels: array(shape, dtype), dynamic(dtype).")
shared.array, shared.dynamic = _shared_array, _shared_dynamic
#: `gpuc.local`: local.array(shape, dtype).
local = _pytypes.ModuleType("gpuc.local", "Per-work-item arrays in kernels: array(shape, dtype).")
local.array = _local_array


# -- typing helpers --------------------------------------------------------------------------------

def _site(lw, node):
    """A `ptr` to the constant C string "file:line:col" of `node`: the CPU names it when work items of a
    block reach different barriers."""
    return lw.site(str(lw.typed.info.location(node)))


def _predicate(handler, typer, node):
    (t,) = handler.args(typer, node, 1)
    if not isinstance(t, ScalarType):
        raise UserError(f"gpuc.{handler.name}() needs a bool or a number (its truth), not {an(t)}", node=node.args[0])
    return t


def _no_args(handler, typer, node):
    if node.args or node.keywords:
        raise UserError(f"gpuc.{handler.name}() takes no arguments")


class Barrier(Handler):
    """gpuc.barrier(), grid_barrier(), syncwarp() and barrier_count/all/any(predicate)."""

    def __init__(self, name: str, marker: str, kind: str | None = None) -> None:
        self.name, self.marker, self.kind = name, marker, kind

    def type(self, typer, node):
        if self.kind is None:
            _no_args(self, typer, node)
            return CallPlan(none, ())
        t = _predicate(self, typer, node)
        return CallPlan(int32 if self.kind == "count" else boolean, (t,))

    def lower(self, lw, node, plan):
        ctx, site = lw.ctx, _site(lw, node)
        if self.kind is None:
            lw.b.call(lw.declare(self.marker, ctx.void, [ctx.ptr()]), [site])
            return None
        truth = lw.truth(lw.expr(node.args[0]), plan.args[0])
        result = ctx.i32 if self.kind == "count" else ctx.i1
        return lw.b.call(lw.declare(self.marker, result, [ctx.i1, ctx.ptr()]), [truth, site])


class Fence(Handler):
    """gpuc.fence() and gpuc.fence_block()."""

    def __init__(self, name: str, scope: str) -> None:
        self.name, self.marker = name, abi.FENCE_MARKERS[scope]

    def type(self, typer, node):
        _no_args(self, typer, node)
        return CallPlan(none, ())

    def lower(self, lw, node, plan):
        lw.b.call(lw.declare(self.marker, lw.ctx.void, []), [])
        return None




class Shuffle(Handler):
    """gpuc.shfl_idx/up/down/xor(value, operand): value an int32, int64, uint32, uint64, float32 or float64
    (a bool travels as an int32 and comes back a bool); the result has value's type."""

    def __init__(self, kind: str) -> None:
        self.kind, self.name = kind, f"shfl_{kind}"

    def type(self, typer, node):
        t, o = self.args(typer, node, 2)
        if not isinstance(t, ScalarType):
            raise UserError(f"gpuc.{self.name}() shuffles a number or bool, not {an(t)}", node=node.args[0])
        if not (isinstance(o, ScalarType) and o.is_int and not o.is_bool):
            raise UserError(f"the second argument of gpuc.{self.name}() is an integer (a lane or a distance), "
                            f"not {an(o)}", node=node.args[1])
        if typer.is_literal(node.args[0]):
            typer.fit(node.args[0], t)
        return CallPlan(t, (t, o))

    def lower(self, lw, node, plan):
        t, o = plan.args
        b, ctx = lw.b, lw.ctx
        value = lw.operand(node.args[0], t)
        if t.is_bool:
            value = b.zext(value, ctx.i32)
        operand = lw.convert(lw.expr(node.args[1]), o, int64)
        operand = b.trunc(operand, ctx.i32)
        vty = value.type
        name = f"{abi.SHUFFLE_MARKER_PREFIX}{self.kind}.{vty}"
        out = b.call(lw.declare(name, vty, [vty, ctx.i32, ctx.ptr()]), [value, operand, _site(lw, node)])
        return b.icmp("ne", out, ConstantInt.get(ctx.i32, 0)) if t.is_bool else out


class Vote(Handler):
    """gpuc.ballot(p) (a uint64), vote_any(p), vote_all(p) (bools)."""

    def __init__(self, name: str, kind: str) -> None:
        self.name, self.marker, self.kind = name, abi.VOTE_MARKERS[kind], kind

    def type(self, typer, node):
        t = _predicate(self, typer, node)
        return CallPlan(uint64 if self.kind == "ballot" else boolean, (t,))

    def lower(self, lw, node, plan):
        ctx = lw.ctx
        truth = lw.truth(lw.expr(node.args[0]), plan.args[0])
        result = ctx.i64 if self.kind == "ballot" else ctx.i1
        return lw.b.call(lw.declare(self.marker, result, [ctx.i1, ctx.ptr()]), [truth, _site(lw, node)])


# -- shared and local arrays -----------------------------------------------------------------------

_FOLD = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
         ast.LShift: operator.lshift}
_NOT_CONSTANT = object()


def _constant(typer, node):
    """The compile-time value of `node`: a literal, a module-level value (also through an attribute), a
    local variable assigned once from a constant, a tuple or an arithmetic expression of these."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Tuple):
        return tuple(_constant(typer, e) for e in node.elts)
    if isinstance(node, ast.BinOp) and type(node.op) in _FOLD:
        left, right = _constant(typer, node.left), _constant(typer, node.right)
        if type(left) is int and type(right) is int:
            return _FOLD[type(node.op)](left, right)
        return _NOT_CONSTANT
    if isinstance(node, ast.Name):
        if node.id in typer.locals:
            return _local_constant(typer, node.id)
        value = typer.typed.function.resolve(node.id)
        return _NOT_CONSTANT if value is _NOT_FOUND else value
    if isinstance(node, ast.Attribute):
        base = _constant(typer, node.value)
        return _NOT_CONSTANT if base is _NOT_CONSTANT else getattr(base, node.attr, _NOT_CONSTANT)
    return _NOT_CONSTANT


def _local_constant(typer, name: str):
    """The value of a local variable assigned exactly once, from a constant, and never otherwise bound."""
    found = []
    for node in ast.walk(typer.tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id == name:
                    found.append(node.value if len(node.targets) == 1 else None)
                elif any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(target)):
                    return _NOT_CONSTANT
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.NamedExpr)):
            target = node.target
            if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(target)):
                return _NOT_CONSTANT
    if len(found) != 1 or found[0] is None:
        return _NOT_CONSTANT
    return _constant(typer, found[0])


def _shape(typer, node) -> tuple:
    value = _constant(typer, node)
    if type(value) is int:
        value = (value,)
    if (type(value) is not tuple or not 1 <= len(value) <= 3
            or any(type(v) is not int for v in value)):
        raise UserError("the shape of a shared or local array is a constant: an int or a tuple of 1 to 3 ints, "
                        "written as literals, module-level constants or local variables assigned once from them",
                        hint="sizes known only at run time: use gpuc.shared.dynamic(dtype) with the launch's "
                             "shared= bytes, or pass an array", node=node)
    if any(v <= 0 for v in value):
        raise UserError(f"the shape {value} of a shared or local array must be positive", node=node)
    if _count(value) > 1 << 31:
        raise UserError(f"the shape {value} is too large for a shared or local array", node=node)
    return value


def _dtype(typer, node) -> ScalarType:
    value = _constant(typer, node)
    t = None
    if value is not _NOT_CONSTANT:
        try:
            t = as_type(value)
        except TypeError:
            t = None
    if not isinstance(t, NUMBERS):
        raise UserError("the dtype of a shared or local array is a scalar type: gpuc.float32, gpuc.int64, "
                        "np.float64, ...", node=node)
    return t


def _count(shape) -> int:
    n = 1
    for v in shape:
        n *= v
    return n


def _arguments(handler, node, names):
    """The call's arguments by name (positional or keyword, as numba's `shape=`, `dtype=`)."""
    given = dict(zip(names, node.args))
    if len(node.args) > len(names):
        raise UserError(f"{handler.name}() takes {len(names)} argument(s): {', '.join(names)}")
    for k in node.keywords:
        if k.arg not in names or k.arg in given:
            raise UserError(f"{handler.name}() takes the arguments {', '.join(names)}", node=k.value)
        given[k.arg] = k.value
    missing = [n for n in names if n not in given]
    if missing:
        raise UserError(f"{handler.name}() needs {', '.join(missing)}")
    return [given[n] for n in names]


def _array_value(lw, t: ArrayType, data, shape):
    """The array struct {data, shapes, strides} of a C-contiguous array of `shape` at `data`."""
    i64 = lw.ctx.i64
    value = Constant.poison(lw.ltype(t))
    fields = [data, *shape, *abi.c_strides(tuple(s if isinstance(s, int) else 1 for s in shape))]
    if not all(isinstance(s, int) for s in shape):  # a dynamic length: 1-D, stride 1
        fields = [data, *shape, 1]
    for k, f in enumerate(fields):
        value = lw.b.insert_value(value, f if not isinstance(f, int) else ConstantInt.get(i64, f), k)
    return value


class SharedArray(Handler):
    """gpuc.shared.array(shape, dtype)."""

    name = "gpuc.shared.array"
    keywords = True

    def type(self, typer, node):
        shape_node, dtype_node = _arguments(self, node, ("shape", "dtype"))
        shape, dtype = _shape(typer, shape_node), _dtype(typer, dtype_node)
        return CallPlan(ArrayType(dtype, len(shape), "C", "shared"), (), shape)

    def lower(self, lw, node, plan):
        t, shape = plan.result, plan.extra
        module, space = lw.program.module, lw.target.shared_address_space
        storage = lw.ctx.i8 if getattr(t.dtype, "is_bool", False) else lw.ltype(t.dtype)
        ty = LLArray.get(storage, _count(shape))
        base = f"{abi.SHARED_GLOBAL_PREFIX}{lw.fn.name}."
        k = 0
        while module.globals.get(f"{base}{k}") is not None:
            k += 1
        gv = module.add_global(ty, f"{base}{k}", space)
        gv.initializer = Constant.undef(ty)
        gv.linkage = "internal"
        gv.alignment = max(16, t.dtype.bits // 8)
        ptr = lw.b.call(lw.declare(abi.SHARED_MARKER, gv.type, [gv.type]), [gv])
        return _array_value(lw, t, ptr, shape)


class SharedDynamic(Handler):
    """gpuc.shared.dynamic(dtype): the launch's `shared=` bytes as a 1-D array."""

    name = "gpuc.shared.dynamic"
    keywords = True

    def type(self, typer, node):
        (dtype_node,) = _arguments(self, node, ("dtype",))
        return CallPlan(ArrayType(_dtype(typer, dtype_node), 1, "C", "shared"), ())

    def lower(self, lw, node, plan):
        t = plan.result
        module, space, ctx = lw.program.module, lw.target.shared_address_space, lw.ctx
        gv = module.globals.get(abi.DYNAMIC_SHARED_GLOBAL)
        if gv is None:
            gv = module.add_global(LLArray.get(ctx.i8, 0), abi.DYNAMIC_SHARED_GLOBAL, space)
            gv.alignment = 16
        ptr = lw.b.call(lw.declare(abi.SHARED_MARKER, gv.type, [gv.type]), [gv])
        size = lw.b.call(lw.declare(abi.SHARED_BYTES_MARKER, ctx.i64, [ctx.i32]), [ConstantInt.get(ctx.i32, 0)])
        length = lw.b.udiv(size, ConstantInt.get(ctx.i64, max(1, t.dtype.bits // 8)))
        return _array_value(lw, t, ptr, [length])


class LocalArray(Handler):
    """gpuc.local.array(shape, dtype): zeroed where it is declared."""

    name = "gpuc.local.array"
    keywords = True

    def type(self, typer, node):
        shape_node, dtype_node = _arguments(self, node, ("shape", "dtype"))
        shape, dtype = _shape(typer, shape_node), _dtype(typer, dtype_node)
        return CallPlan(ArrayType(dtype, len(shape), "C", "local"), (), shape)

    def lower(self, lw, node, plan):
        t, shape, ctx = plan.result, plan.extra, lw.ctx
        storage = ctx.i8 if getattr(t.dtype, "is_bool", False) else lw.ltype(t.dtype)
        ty = LLArray.get(storage, _count(shape))
        align = max(8, t.dtype.bits // 8)
        ptr = lw.alloca_builder.alloca(ty, "local", align=align)
        nbytes = _count(shape) * max(1, t.dtype.bits // 8)
        memset = lw.declare(f"llvm.memset.p{lw.target.local_address_space}.i64", ctx.void,
                            [ptr.type, ctx.i8, ctx.i64, ctx.i1])
        lw.b.call(memset, [ptr, ConstantInt.get(ctx.i8, 0), ConstantInt.get(ctx.i64, nbytes),
                           ConstantInt.get(ctx.i1, 0)])
        return _array_value(lw, t, ptr, shape)


_HANDLERS = {thread_index: ContextIntrinsic("thread_index", abi.THREAD_INDEX_MARKER),
             block_index: ContextIntrinsic("block_index", abi.BLOCK_INDEX_MARKER),
             block_dim: ContextIntrinsic("block_dim", abi.BLOCK_DIM_MARKER),
             grid_dim: ContextIntrinsic("grid_dim", abi.GRID_DIM_MARKER),
             lane_index: ContextIntrinsic("lane_index", abi.LANE_INDEX_MARKER, takes_dim=False),
             warp_size: ContextIntrinsic("warp_size", abi.WARP_SIZE_MARKER, takes_dim=False),
             barrier: Barrier("barrier", abi.BARRIER_MARKER),
             barrier_count: Barrier("barrier_count", abi.BARRIER_PREDICATE_MARKERS["count"], "count"),
             barrier_all: Barrier("barrier_all", abi.BARRIER_PREDICATE_MARKERS["all"], "all"),
             barrier_any: Barrier("barrier_any", abi.BARRIER_PREDICATE_MARKERS["any"], "any"),
             grid_barrier: Barrier("grid_barrier", abi.GRID_BARRIER_MARKER),
             fence: Fence("fence", "device"), fence_block: Fence("fence_block", "block"),
             syncwarp: Barrier("syncwarp", abi.SYNCWARP_MARKER),
             shfl_idx: Shuffle("idx"), shfl_up: Shuffle("up"), shfl_down: Shuffle("down"), shfl_xor: Shuffle("xor"),
             ballot: Vote("ballot", "ballot"), vote_any: Vote("vote_any", "any"), vote_all: Vote("vote_all", "all")}
for _fn, _handler in _HANDLERS.items():
    registry.register(_fn, _handler, public=_fn.__name__, group="the block model")
registry.register(_shared_array, SharedArray())
registry.register(_shared_dynamic, SharedDynamic())
registry.register(_local_array, LocalArray())
registry.expose("shared", shared, group="the block model")
registry.expose("local", local, group="the block model")
