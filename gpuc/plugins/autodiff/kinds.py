"""What has a tangent, and errors that say where: shared by the tangent transformation's modules."""

from __future__ import annotations

import linecache
import re

import gpuc.llvm as llvm
from gpuc.abi import BOUNDS_FAILURE
from gpuc.errors import CompilationError, SourceLocation


#: Intrinsics that compute no floats and touch no memory a tangent or adjoint lives in, and the call a failed
#: bounds check makes (it writes only the runtime's record, and again changes nothing): both modes copy or
#: drop them as they are.
TRANSPARENT = ("llvm.lifetime.", "llvm.assume", "llvm.experimental.noalias.scope.decl", "llvm.invariant.",
               "llvm.sideeffect", "llvm.prefetch", "llvm.var.annotation", "llvm.donothing", "llvm.dbg.",
               BOUNDS_FAILURE)


def carries_floats(ty: llvm.Type) -> bool:
    """Whether values of `ty` have a tangent: floating point, vectors of it, or literal structs and
    arrays holding some."""
    if isinstance(ty, llvm.FloatingType):
        return True
    if isinstance(ty, llvm.StructType):
        return any(carries_floats(e) for e in ty.elements)
    if isinstance(ty, (llvm.ArrayType, llvm.VectorType)):
        return carries_floats(ty.element_type)
    return False


def define(module: llvm.Module, name: str, fnty, existing, build) -> llvm.Function:
    """The internal function `name` of type `fnty` (filling in the declaration `existing`, if any),
    its body made by `build(fn)`. If that raises, no half-built body is left: what was added is
    removed, or the declaration there was is left as it was."""
    fn = existing if existing is not None else module.add_function(name, fnty)
    fn.linkage = "internal"
    try:
        build(fn)
    except BaseException:
        fn.delete_body()
        if existing is None and not fn.uses:
            fn.erase()
        else:
            fn.linkage = "external"
        raise
    return fn


def error(fn: llvm.Function, inst, message: str, hint: str | None = None) -> CompilationError:
    """A CompilationError naming `fn` and the instruction `inst`, located where debug info says."""
    where = f" at `{str(inst).strip()}`" if inst is not None else ""
    return CompilationError(f"cannot differentiate {fn.name}{where}: {message}", locate(fn, inst), hint)


_DBG = re.compile(r"!dbg (![0-9]+)")


def locate(fn: llvm.Function, inst) -> SourceLocation | None:
    """The source location of `inst` (or of `fn`) from its debug info, None without."""
    text = str(inst) if inst is not None else ""
    found = _DBG.search(text)
    if not found:
        return _site_of(text)
    nodes = _metadata_nodes(str(fn.parent))
    node = nodes.get(found.group(1), "")
    line, col, scope = _field(node, "line"), _field(node, "column"), _field(node, "scope")
    file_node = None
    while scope and file_node is None:
        scope_text = nodes.get(scope, "")
        file_node = _field(scope_text, "file")
        scope = _field(scope_text, "scope") if file_node is None else None
    file_text = nodes.get(file_node or "", "")
    filename, directory = _field(file_text, "filename"), _field(file_text, "directory")
    if not (line and filename):
        return None
    path = filename if not directory or filename.startswith("/") else f"{directory}/{filename}"
    return SourceLocation(path, int(line), int(col or 0), linecache.getline(path, int(line)))


#: A marker call's site operand (gpuc.abi.site_text): "file:line:col" or "file:line:col: what is there".
_SITE = re.compile(r'@"?gpuc\.site\d*\.(.+?):(\d+):(\d+)')


def _site_of(text: str) -> SourceLocation | None:
    """The location a call without debug info names in its site operand (a barrier's), None without."""
    found = _SITE.search(text)
    if not found:
        return None
    path, line, col = found.group(1), int(found.group(2)), int(found.group(3))
    return SourceLocation(path, line, col, linecache.getline(path, line))


def _metadata_nodes(module_text: str) -> dict[str, str]:
    nodes = {}
    for line in module_text.splitlines():
        if line.startswith("!") and " = " in line:
            key, _, value = line.partition(" = ")
            nodes[key.strip()] = value
    return nodes


def _field(node: str, name: str) -> str | None:
    m = re.search(rf"\b{name}: (\"[^\"]*\"|![0-9]+|[0-9]+)", node)
    return m.group(1).strip('"') if m else None


