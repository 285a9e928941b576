"""Static analyses the passes need: activity (scopes), liveness, reaching definitions.

Each analysis annotates the tree (see `transpiler.anno`); `analyze` runs them all, in order.
"""

from __future__ import annotations

import gast

from transpiler.analysis import activity, liveness, reaching_definitions


def analyze(fn_node: gast.FunctionDef) -> None:
    """Annotates `fn_node` and every function nested in it with all analyses."""
    activity.analyze(fn_node)
    liveness.analyze(fn_node)
    reaching_definitions.analyze(fn_node)
