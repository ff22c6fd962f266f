"""User errors raised while typing and lowering Python functions, located at an AST node."""

from __future__ import annotations

import ast

from ...errors import CompilationError


class UserError(Exception):
    """The user's code is at fault. Raised anywhere; the visitor attaches the node it was visiting."""

    def __init__(self, message: str, hint: str | None = None, node: ast.AST | None = None) -> None:
        super().__init__(message)
        self.message, self.hint, self.node = message, hint, node


def located(error: UserError, info) -> CompilationError:
    """A CompilationError pointing at `error.node` in the function described by `info` (a SourceInfo)."""
    node = error.node
    location = info.location(node) if node is not None and hasattr(node, "lineno") else None
    return CompilationError(error.message, location, error.hint)


class LocatingVisitor(ast.NodeVisitor):
    """An AST visitor that pins a UserError raised below a node to that node, unless a deeper
    node already claimed it: errors point at the innermost construct at fault."""

    def visit(self, node: ast.AST):
        try:
            return super().visit(node)
        except UserError as exc:
            if exc.node is None:
                exc.node = node
            raise
        except RecursionError:  # past the frontend's depth limit (see depth.py): a user error, located here
            raise UserError("this code nests too deeply for gpuc: calls of @gpuc.func functions inside one "
                            "another and nested expressions together exceed the frontend's depth limit",
                            hint="split long expressions into statements with intermediate variables, "
                                 "and flatten long chains of calls", node=node) from None
