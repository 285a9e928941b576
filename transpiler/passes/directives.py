"""Reads `transpiler.loop_options(...)` at the top of a loop body into the loop's annotations.

    while tok != end:                                  while tok != end:
        transpiler.loop_options(max_iterations=64)  ->     ...
        ...                                            with LOOP_OPTIONS {max_iterations: 64}

The control-flow pass passes the options on (`rt__.while_stmt(..., max_iterations=64)`). The call
is recognised by what it refers to in the function's globals, whatever it is imported as.
"""

from __future__ import annotations

import gast

from transpiler import anno, directives
from transpiler.context import PassContext
from transpiler.errors import ConversionError
from transpiler.transformer import Transformer

# What the pipeline looks for before running this pass, and what it may add (features.py).
APPLIES_TO = (gast.For, gast.While)


class _Directives(Transformer):
    def __init__(self, globals_: dict, directive):
        self.globals = globals_
        self.directive = directive
        self.bounds_loops = False

    def _is_directive(self, stmt: gast.stmt) -> bool:
        if not (isinstance(stmt, gast.Expr) and isinstance(stmt.value, gast.Call)):
            return False
        func, path = stmt.value.func, []
        while isinstance(func, gast.Attribute):
            path.append(func.attr)
            func = func.value
        if not isinstance(func, gast.Name) or func.id not in self.globals:
            return False
        value = self.globals[func.id]
        for attr in reversed(path):
            value = getattr(value, attr, None)
        return value is self.directive

    def _visit_loop(self, node):
        node = self.generic_visit(node)
        if node.body and self._is_directive(node.body[0]):
            call = node.body[0].value
            options = {}
            for keyword in call.keywords:
                if keyword.arg not in directives.LOOP_OPTIONS:
                    raise ConversionError(
                        f"loop_options() has no option {keyword.arg!r}",
                        anno.getanno(call, anno.Static.ORIGIN)
                        if anno.hasanno(call, anno.Static.ORIGIN)
                        else None,
                        f"Known options: {', '.join(sorted(directives.LOOP_OPTIONS))}.",
                    )
                options[keyword.arg] = keyword.value
            anno.setanno(node, anno.Static.LOOP_OPTIONS, options)
            self.bounds_loops = self.bounds_loops or "max_iterations" in options
            node.body = node.body[1:] or [gast.Pass()]
        return node

    visit_While = _visit_loop
    visit_For = _visit_loop


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    found = _Directives(ctx.globals, directives.loop_options)
    fn_node = found.visit(fn_node)
    ctx.bounds_loops = found.bounds_loops
    return fn_node
