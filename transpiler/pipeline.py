"""The single ordered list of passes, each ordering constraint stated where it applies."""

from __future__ import annotations

import gast

from transpiler import analysis
from transpiler.naming import Namer
from transpiler.passes import (
    conditional_expressions,
    control_flow,
    logical_expressions,
    unsupported,
)


def run(fn_node: gast.FunctionDef) -> gast.FunctionDef:
    """Rewrites a parsed function (origins stamped) into its converted form."""
    namer = Namer.for_tree(fn_node)
    # First: nothing else should waste work on, or trip over, syntax that is rejected anyway.
    unsupported.transform(fn_node)
    # The control-flow pass reads activity, liveness and reaching definitions of the user's code.
    analysis.analyze(fn_node)
    fn_node = control_flow.transform(fn_node, namer)
    # After control flow: the lambdas these two passes add would otherwise look like closures
    # to the analyses (making their names live everywhere), and tests moved into generated
    # functions are rewritten wherever they ended up.
    fn_node = conditional_expressions.transform(fn_node)
    fn_node = logical_expressions.transform(fn_node, namer)
    return fn_node
