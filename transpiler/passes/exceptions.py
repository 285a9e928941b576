"""Lets the errors that mean "this cannot be staged" through every `except` clause.

    try:                              try:
        y = f(x)                          y = f(x)
    except Exception:         ->      except rt__.CANNOT_STAGE:
        y = fallback                      raise
                                      except Exception:
                                          y = fallback

Python never raises a StagingError, nor JAX's error for a tracer where a value is needed: they
come from tracing. Caught by the user's `except` while tracing, they would silently make the
compiled program take the except clause for every input.
"""

from __future__ import annotations

import gast

from transpiler import structure, templates
from transpiler.context import PassContext
from transpiler.naming import RUNTIME
from transpiler.transformer import Transformer

# What the pipeline looks for before running this pass, and what it may add (features.py).
APPLIES_TO = (gast.Try, gast.TryStar) if hasattr(gast, "TryStar") else (gast.Try,)


class _Exceptions(Transformer):
    def generic_visit(self, node):
        node = super().generic_visit(node)
        if isinstance(node, structure.TRY) and node.handlers:
            (guard,) = templates.replace(
                f"try:\n    pass\nexcept {RUNTIME}.CANNOT_STAGE:\n    raise"
            )[0].handlers
            node.handlers = [guard, *node.handlers]
        return node


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    return _Exceptions().visit(fn_node)
