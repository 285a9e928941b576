"""Rewrites `assert test, msg` into `rt__.assert_(test, lambda: msg)`.

    assert jnp.all(x > 0), "x must be positive"
        ->   rt__.assert_(jnp.all(x > 0), lambda: "x must be positive")

The message stays lazy, as in Python. A traced test becomes a check that runs with the compiled
program (see `runtime.debugging.assert_`).
"""

from __future__ import annotations

import gast

from transpiler import templates
from transpiler.context import PassContext
from transpiler.naming import RUNTIME
from transpiler.transformer import Transformer

# What the pipeline looks for before running this pass, and what it may add (features.py).
APPLIES_TO = (gast.Assert,)
ADDS = (gast.Call, gast.Lambda)


class _Asserts(Transformer):
    def visit_Assert(self, node):
        node = self.generic_visit(node)
        if node.msg is None:
            return templates.replace(f"{RUNTIME}.assert_(test)", test=node.test)
        return templates.replace(
            f"{RUNTIME}.assert_(test, lambda: msg)", test=node.test, msg=node.msg
        )


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    return _Asserts().visit(fn_node)
