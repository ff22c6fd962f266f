"""Linking into the module being compiled without renaming what it already defines."""

from __future__ import annotations

from ..errors import CompilationError
from ..llvm import Module

_LOCAL = ("internal", "private")


def link_into(module: Module, other: Module, compiled: dict, defined: dict, *, what: str) -> None:
    """Link `other` (same context; consumed) into `module` and record `defined` (LLVM name ->
    CompiledFunction of `other`'s definitions) in `compiled`.

    LLVM's linker resolves only non-local symbols and renames a local definition of `module` whose
    name `other` also uses; here such names keep pointing at `module`'s functions: a definition that
    `compiled` records as coming from the same source and signature is reused (its copy in `other`
    becomes a declaration), a declaration in `other` resolves to `module`'s definition, and a second,
    different definition of a name is a CompilationError.
    """
    exposed = []  # local definitions of `module` made linkable for the link, and made local again after
    try:
        other.triple, other.data_layout = module.triple, module.data_layout
        for fn in other.functions:
            mine = module.functions.get(fn.name)
            if mine is None or fn.linkage in _LOCAL:
                continue  # a clashing local of `other` gets a fresh name: nothing refers to it from outside
            if not fn.is_declaration and not mine.is_declaration:
                if defined.get(fn.name) is None or compiled.get(fn.name) != defined[fn.name]:
                    origin = compiled.get(fn.name)
                    raise CompilationError(
                        f"{what} defines @{fn.name}, which the module being compiled already defines"
                        + (f" (from {_describe(origin)})" if origin is not None else ""),
                        hint="give one of them another name, or make it internal")
                fn.delete_body()
                fn.linkage = "external"
            if mine.linkage in _LOCAL and not mine.is_declaration:
                mine.linkage = "external"
                exposed.append(fn.name)
        recorded = {name: cf for name, cf in defined.items()
                    if (fn := other.functions.get(name)) is not None and not fn.is_declaration
                    and (fn.linkage not in _LOCAL or module.functions.get(name) is None)}
    except BaseException:
        other.close()
        _hide(module, exposed)
        raise
    try:
        module.link(other)
    finally:
        _hide(module, exposed)
    compiled.update(recorded)


def _hide(module: Module, names) -> None:
    for name in names:
        fn = module.functions.get(name)
        if fn is not None:
            fn.linkage = "internal"


def _describe(origin) -> str:
    source = origin.source
    if origin.signature is None:
        return source.describe() if hasattr(source, "describe") else repr(source)
    return f"{getattr(source, '__qualname__', source)}({', '.join(map(str, origin.signature))})"
