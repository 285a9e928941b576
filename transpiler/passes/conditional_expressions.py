"""Rewrites `a if p else b` into `rt__.if_exp(p, lambda: a, lambda: b)`.

Both sides stay lazy: Python evaluates only the chosen one; a traced `p` stages `lax.cond`.

    y = x if x > 0 else -x   ->   y = rt__.if_exp(x > 0, lambda: x, lambda: -x)
"""

from __future__ import annotations

import gast

from transpiler import templates
from transpiler.context import PassContext
from transpiler.naming import RUNTIME
from transpiler.transformer import Transformer

# What the pipeline looks for before running this pass, and what it may add (features.py).
APPLIES_TO = (gast.IfExp,)
ADDS = (gast.Call, gast.Lambda)


class _ConditionalExpressions(Transformer):
    def visit_IfExp(self, node):
        node = self.generic_visit(node)
        return templates.replace_as_expression(
            f"{RUNTIME}.if_exp(test, lambda: if_true, lambda: if_false)",
            test=node.test,
            if_true=node.body,
            if_false=node.orelse,
        )


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    return _ConditionalExpressions().visit(fn_node)
