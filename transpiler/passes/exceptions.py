"""Lets the errors that mean "this cannot be staged" through every `except` clause.

    try:                              try:
        y = f(x)                          try:
    except Exception:         ->              y = f(x)
        y = fallback                      except Exception as rt__error:
                                              rt__.raise_cannot_stage(rt__error)
                                              raise
                                      except rt__.CANNOT_STAGE:
                                          raise
                                      except Exception:
                                          y = fallback

Python never raises a StagingError, nor JAX's error for a tracer where a value is needed, nor
the TypeError of hashing a tracer (`table[i]`, a traced `i`): they come from tracing. Caught by
the user's `except` while tracing, they would silently make the compiled program take the except
clause for every input. Nor can an `except` catch what a staged check raises when the program
runs (a `raise` under a traced condition): compiled, it is raised after the function returned;
run at once (under `jax.vmap` without `jax.jit`), it stands for the elements that take that path
only, and caught it would send every element into the handler: refused (a StagingError).
"""

from __future__ import annotations

import gast

from transpiler import structure, templates
from transpiler.context import PassContext
from transpiler.naming import RUNTIME
from transpiler.transformer import Transformer

# What the pipeline looks for before running this pass, and what it may add (features.py).
APPLIES_TO = (gast.Try, gast.TryStar) if hasattr(gast, "TryStar") else (gast.Try,)


_GUARD = f"""
try:
    try:
        body
    except Exception as {RUNTIME}error:
        {RUNTIME}.raise_cannot_stage({RUNTIME}error)
        raise
except {RUNTIME}.CANNOT_STAGE:
    raise
"""


# (The inner clause catches every Exception, re-raised as it is unless it stands for what
# cannot be staged: a check the program makes when it runs raises the program's own type, a
# KeyError or an IndexError as well as a TypeError; see `runtime.staging.raise_cannot_stage`.)


class _Exceptions(Transformer):
    def generic_visit(self, node):
        node = super().generic_visit(node)
        if isinstance(node, structure.TRY) and node.handlers:
            # The body in a try of its own: Python's TypeError for hashing a tracer (a dict
            # lookup with a traced key) is told apart there, and raised as what it means.
            (guarded,) = templates.replace(_GUARD, body=node.body)
            node.body = guarded.body
            node.handlers = [*guarded.handlers, *node.handlers]
        return node


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    return _Exceptions().visit(fn_node)
