"""The single ordered list of passes, each ordering constraint stated where it applies."""

from __future__ import annotations

import dataclasses

import gast

from transpiler import analysis
from transpiler.naming import Namer
from transpiler.passes import (
    asserts,
    break_statements,
    call_trees,
    conditional_expressions,
    continue_statements,
    control_flow,
    directives,
    lists,
    logical_expressions,
    print_statements,
    return_statements,
    unsupported,
)


@dataclasses.dataclass
class Converted:
    node: gast.FunctionDef
    # return-value variable -> what error messages say about it
    return_values: dict[str, return_statements.ReturnValue]


def run(
    fn_node: gast.FunctionDef,
    globals_: dict | None = None,
    freevars: tuple[str, ...] = (),
    *,
    recursive: bool = True,
) -> Converted:
    """Rewrites a parsed function (origins stamped) into its converted form.

    Args:
      fn_node: the function definition.
      globals_: the function's globals, to tell library calls from user calls.
      freevars: the names of its closure variables.
      recursive: whether calls are rewritten so called user functions convert too.
    """
    globals_ = globals_ if globals_ is not None else {}
    namer = Namer.for_tree(fn_node)
    return_values: dict[str, return_statements.ReturnValue] = {}
    # First: nothing else should waste work on, or trip over, syntax that is rejected anyway.
    unsupported.transform(fn_node)
    # Before the early-exit passes, which move loop bodies around: the directive must be first.
    from transpiler import api

    fn_node = directives.transform(fn_node, globals_, api.loop_options)
    # Early exits become flags before anything else looks at control flow. `return` goes first:
    # inside a loop it becomes flag assignments plus a `break`, which the break pass rewrites.
    fn_node = return_statements.transform(fn_node, namer, return_values)
    fn_node = break_statements.transform(fn_node, namer)
    fn_node = continue_statements.transform(fn_node, namer)
    # Before call trees, which leave `rt__.*` calls alone.
    fn_node = print_statements.transform(fn_node, globals_, freevars)
    fn_node = asserts.transform(fn_node)
    # Appends become assignments before the analyses, so appended lists are loop state.
    fn_node = lists.transform(fn_node, namer)
    if recursive:
        fn_node = call_trees.transform(fn_node, globals_, freevars)
    # The control-flow pass reads activity, liveness and reaching definitions of the code as the
    # early-exit passes left it (flags included), and the break pass's EXTRA_TEST annotations.
    analysis.analyze(fn_node)
    fn_node = control_flow.transform(fn_node, namer)
    # After control flow: the lambdas these two passes add would otherwise look like closures
    # to the analyses (making their names live everywhere), and tests moved into generated
    # functions are rewritten wherever they ended up.
    fn_node = conditional_expressions.transform(fn_node)
    fn_node = logical_expressions.transform(fn_node, namer)
    return Converted(fn_node, return_values)
