"""Rewrites `a if p else b` into `rt__.if_exp(p, lambda: a, lambda: b)`.

Both sides stay lazy: Python evaluates only the chosen one; a traced `p` stages `lax.cond`.

    y = x if x > 0 else -x   ->   y = rt__.if_exp(x > 0, lambda: x, lambda: -x)
"""

from __future__ import annotations

import gast

from transpiler import templates
from transpiler.analysis import ownership, plain
from transpiler.context import PassContext
from transpiler.naming import RUNTIME
from transpiler.transformer import Transformer

# What the pipeline looks for before running this pass, and what it may add (features.py).
APPLIES_TO = (gast.IfExp,)
ADDS = (gast.Call, gast.Lambda)


class _ConditionalExpressions(Transformer):
    def __init__(self, changed: frozenset[str], owned: frozenset[str]):
        super().__init__()
        self.changed = changed  # the names whose lists the function changes in place
        self.owned = owned  # the names that own their containers (`ownership.owned_names`)

    def visit_Assign(self, node):
        # `buf = a if c else b; buf[0] += 1`: the list chosen is changed through the result;
        # the runtime keeps its identity or refuses (runtime.control_flow).
        value = node.value
        node = self.generic_visit(node)
        # So is a container it holds (`p = (a, b) if c else (b, a); a["w"] += 1`).
        chosen = isinstance(value, gast.IfExp) and any(
            isinstance(t, gast.Name)
            and (t.id in self.changed or ownership.items(t.id) in self.changed)
            for t in node.targets
        )
        if chosen:
            node.value.keywords.append(
                gast.keyword(arg="aliased", value=gast.Constant(value=True, kind=None))
            )
        elif isinstance(value, gast.IfExp) and all(
            isinstance(t, gast.Name) and t.id in self.owned for t in node.targets
        ):
            # No other name can see which object it holds (see runtime.identity.detached).
            node.value.keywords.append(
                gast.keyword(arg="owned", value=gast.Constant(value=True, kind=None))
            )
        if isinstance(value, gast.IfExp) and [type(t) for t in node.targets] == [gast.Name]:
            # (What messages call the value: `'cur'` of `cur = a if c else b`.)
            target = gast.Constant(value=node.targets[0].id, kind=None)
            node.value.keywords.append(gast.keyword(arg="target", value=target))
        return node

    def visit_IfExp(self, node):
        node = self.generic_visit(node)
        call = templates.replace_as_expression(
            f"{RUNTIME}.if_exp(test, lambda: if_true, lambda: if_false)",
            test=node.test,
            if_true=node.body,
            if_false=node.orelse,
        )
        if plain.expression(node.body) and plain.expression(node.orelse):  # a select, untraced
            call.keywords.append(gast.keyword(arg="plain", value=gast.Constant(True, None)))
        return call


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    # Its branches are functions of their own by now (the control-flow pass ran): all count.
    resolve = ctx.callees(fn_node)
    changed = ownership.aliased_names(fn_node, nested=True, resolve=resolve)
    return _ConditionalExpressions(changed, ownership.owned_names(fn_node, resolve)).visit(fn_node)
