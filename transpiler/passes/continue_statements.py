"""Rewrites `continue` into a flag that guards the rest of the loop body.

    for x in xs:                   for x in xs:
        if x < 0:                      did_continue = False
            continue       ->          if x < 0:
        total += x                         did_continue = True
                                       if not did_continue:
                                           total += x

The flag is reset at the top of every iteration, so it is never loop state.
"""

from __future__ import annotations

import gast

from transpiler import anno, structure, templates
from transpiler.context import PassContext
from transpiler.naming import Namer
from transpiler.passes import guards
from transpiler.transformer import Transformer

# What the pipeline looks for before running this pass, and what it may add (features.py).
APPLIES_TO = (gast.Continue,)
ADDS = (gast.If, gast.Assign, gast.UnaryOp)


class _ContinueStatements(Transformer):
    def __init__(self, namer: Namer):
        self.namer = namer

    def _visit_loop(self, node):
        # The flag is named before inner loops take theirs: names follow source order.
        if not any(structure.jumps_out(node.body, (gast.Continue,))):
            return self.generic_visit(node)
        flag = self.namer.new("did_continue")
        node = self.generic_visit(node)
        body, _ = guards.replace_jumps(
            node.body, gast.Continue, lambda _: templates.replace("flag = True", flag=flag)
        )
        reset = templates.replace("flag = False", flag=flag)
        # A `for` loop's exit guard (break pass) stays first: it is the loop's exit test.
        guard = body[:1] if body and anno.hasanno(body[0], anno.Static.EXIT_GUARD) else []
        node.body = guard + reset + guards.guard_block(body[len(guard) :], flag, into_loops=False)
        return node

    visit_While = _visit_loop
    visit_For = _visit_loop


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    return _ContinueStatements(ctx.namer).visit(fn_node)
