"""Rewrites `print(...)` into `rt__.print_(...)`: Python's print, or JAX's debug print when traced.

    print("loss", loss, sep=": ")   ->   rt__.print_("loss", loss, sep=": ")

Only calls of the builtin `print` are rewritten (not a local or global named `print`).
"""

from __future__ import annotations

import builtins

import gast

from transpiler import templates
from transpiler.analysis import activity
from transpiler.context import PassContext
from transpiler.naming import RUNTIME
from transpiler.transformer import Transformer


class _PrintStatements(Transformer):
    def __init__(self, globals_: dict, shadowed: frozenset[str]):
        self.is_builtin = "print" not in globals_ and "print" not in shadowed
        self.is_builtin &= hasattr(builtins, "print")

    def visit_Call(self, node):
        node = self.generic_visit(node)
        if self.is_builtin and isinstance(node.func, gast.Name) and node.func.id == "print":
            node.func = templates.replace_as_expression(f"{RUNTIME}.print_")
        return node


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    shadowed = set(ctx.freevars) | activity.params_of(fn_node.args)
    for node in gast.walk(fn_node):
        if isinstance(node, gast.Name) and not isinstance(node.ctx, gast.Load):
            shadowed.add(node.id)
    return _PrintStatements(ctx.globals, frozenset(shadowed)).visit(fn_node)
