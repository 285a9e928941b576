"""Rewrites `print(...)` into `rt__.print_(...)`: Python's print, or JAX's debug print when traced.

    print("loss", loss, sep=": ")   ->   rt__.print_("loss", loss, sep=": ")
    print(f"x={x:.3f}")             ->   rt__.print_(rt__.fstring('x=', (x, '', '.3f')))

Only calls of the builtin `print` are rewritten (not a local or global named `print`). The
f-strings among their arguments become `rt__.fstring` calls, which keep traced values apart from
the text, so a staged print shows their values, not the tracers.
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
            node.args = [_FormattedStrings().visit(arg) for arg in node.args]
        return node


class _FormattedStrings(gast.NodeTransformer):
    """`f"a {x!r:>8}"` -> `rt__.fstring('a ', (x, 'r', '>8'))`."""

    def visit_JoinedStr(self, node):
        node = self.generic_visit(node)
        parts = []
        for value in node.values:
            if isinstance(value, gast.FormattedValue):
                conversion = chr(value.conversion) if value.conversion > 0 else ""
                spec = value.format_spec if value.format_spec is not None else ""
                spec = spec if isinstance(spec, gast.expr) else templates.constant(spec)
                field = [value.value, templates.constant(conversion), spec]
                parts.append(gast.Tuple(elts=field, ctx=gast.Load()))
            else:
                parts.append(value)
        call = templates.replace_as_expression(f"{RUNTIME}.fstring()")
        call.args = parts
        return call

    def visit_FormattedValue(self, node):
        # The format spec of a field is itself a JoinedStr: `f"{x:{width}}"`.
        if node.format_spec is not None:
            node.format_spec = self.visit(node.format_spec)
        node.value = self.visit(node.value)
        return node


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    shadowed = set(ctx.freevars) | activity.params_of(fn_node.args)
    for node in gast.walk(fn_node):
        if isinstance(node, gast.Name) and not isinstance(node.ctx, gast.Load):
            shadowed.add(node.id)
    return _PrintStatements(ctx.globals, frozenset(shadowed)).visit(fn_node)
