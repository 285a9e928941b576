"""Rewrites `a if p else b` into `rt__.if_exp(p, lambda: a, lambda: b)`.

Both sides stay lazy: Python evaluates only the chosen one; a traced `p` stages `lax.cond`.

    y = x if x > 0 else -x   ->   y = rt__.if_exp(x > 0, lambda: x, lambda: -x)
"""

from __future__ import annotations

import gast

from transpiler import templates
from transpiler.analysis import ownership
from transpiler.context import PassContext
from transpiler.naming import RUNTIME
from transpiler.transformer import Transformer

# What the pipeline looks for before running this pass, and what it may add (features.py).
APPLIES_TO = (gast.IfExp,)
ADDS = (gast.Call, gast.Lambda)


class _ConditionalExpressions(Transformer):
    def __init__(self, aliased: bool):
        super().__init__()
        self.aliased = aliased

    def visit_IfExp(self, node):
        node = self.generic_visit(node)
        # In a function that changes lists in place, the list chosen may be changed through
        # the result: the runtime keeps its identity or refuses (runtime.control_flow).
        aliased = ", aliased=True" if self.aliased else ""
        return templates.replace_as_expression(
            f"{RUNTIME}.if_exp(test, lambda: if_true, lambda: if_false{aliased})",
            test=node.test,
            if_true=node.body,
            if_false=node.orelse,
        )


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    # Its branches are functions of their own by now (the control-flow pass ran): all count.
    owned = ownership.owned_names(fn_node)
    aliased = ownership.changes_in_place(fn_node, owned, nested=True)
    return _ConditionalExpressions(aliased).visit(fn_node)
