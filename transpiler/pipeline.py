"""The single ordered list of passes, each ordering constraint stated where it applies."""

from __future__ import annotations

import dataclasses

import gast

from transpiler import features
from transpiler.context import PassContext
from transpiler.passes import (
    asserts,
    assignment_expressions,
    break_statements,
    call_trees,
    comprehensions,
    conditional_expressions,
    continue_statements,
    control_flow,
    declarations,
    directives,
    exceptions,
    fence,
    lists,
    logical_expressions,
    match_statements,
    pick_checks,
    powers,
    print_statements,
    return_statements,
    source_reads,
    truth_tests,
    unbound_names,
)

PASSES = (
    # First: nothing else should waste work on, or trip over, syntax that is rejected anyway.
    fence,
    # Declarations apply to their whole function: where they are written must not matter.
    declarations,
    # Before the early-exit passes, which move loop bodies around: the directive must be first.
    directives,
    # Before every pass that converts loops, ifs, appends and truth tests: the loops it makes
    # of comprehensions are theirs to convert. (It leaves those that bind with `:=` as they are.)
    comprehensions,
    # Before the early-exit passes, so a return in a case is a return in an if branch; before
    # the walrus pass, so a `:=` in a guard is one in an `and` operand, which that pass rewrites.
    match_statements,
    # Before anything moves an expression into a function of its own (a thunk, a loop test),
    # where a `:=` would bind in the wrong scope.
    assignment_expressions,
    # Before anything moves a test into a function or a runtime call, where it is no longer
    # seen to be one; after the walrus pass, which rewrites `and`/`or` operands that bind.
    truth_tests,
    # On the code as written, with its breaks and returns: which reads Python proves bound.
    # After the walrus and match passes, which add reads and bindings of their own.
    source_reads,
    # Before the early-exit passes: a check before each `return` goes where it goes.
    pick_checks,
    # Early exits become flags before anything else looks at control flow. `return` goes first:
    # inside a loop it becomes flag assignments plus a `break`, which the break pass rewrites.
    return_statements,
    break_statements,
    continue_statements,
    # Before call trees, which leave `rt__.*` calls alone.
    print_statements,
    asserts,
    # Appends become assignments before the analyses, so appended lists are loop state.
    lists,
    call_trees,
    # Both read the analyses of the code as the early-exit passes left it (flags included), and
    # the break pass's EXTRA_TEST annotations. Placeholders first: the control-flow pass moves
    # the statements whose definedness decides where they are needed.
    unbound_names,
    control_flow,
    # After control flow: the lambdas these two passes add would otherwise look like closures
    # to the analyses (making their names live everywhere), and tests moved into generated
    # functions are rewritten wherever they ended up.
    conditional_expressions,
    logical_expressions,
    # After control flow: the analysis of what a loop does with its index reads `i ** -1` as
    # written.
    powers,
    # Last: the clause it adds to every try must stay first among the handlers.
    exceptions,
)


@dataclasses.dataclass
class Converted:
    node: gast.FunctionDef
    # return-value variable -> what error messages say about it
    return_values: dict[str, return_statements.ReturnValue]
    # whether the converted code runs on Python values too (not the original): a loop has
    # loop_options(max_iterations=N), which bounds it in Python too, or the function hands a
    # function to library code (`jax.vmap(helper)`), which JAX traces: converted, its staged
    # ifs and loops work
    runs_converted: bool = False
    # the builtins it was converted for (`ctx.builtins_read`): the module must not define them
    builtins_read: frozenset[str] = frozenset()
    # the names of the functions and variables conversion made (`if_true`, `loop_body`)
    generated: frozenset[str] = frozenset()


def run(
    fn_node: gast.FunctionDef,
    globals_: dict | None = None,
    freevars: tuple[str, ...] = (),
    *,
    recursive: bool = True,
    skip_idle_passes: bool = True,
    closure: dict | None = None,
) -> Converted:
    """Rewrites a parsed function (origins stamped) into its converted form.

    Args:
      fn_node: the function definition.
      globals_: the function's globals, to tell library calls from user calls.
      freevars: the names of its closure variables.
      closure: the values of those bound (`callees.closure_of`), to resolve calls.
      recursive: whether calls are rewritten so called user functions convert too.
      skip_idle_passes: skip the passes that would find nothing to rewrite (see
        `transpiler.features`); False runs every pass (what a test compares with).
    """
    ctx = PassContext.for_function(fn_node, globals_, freevars, recursive, closure)
    found = features.present(fn_node)
    for pass_ in PASSES:
        if skip_idle_passes and not features.needed(pass_, found):
            continue  # nothing in the tree for it to rewrite
        fn_node = pass_.transform(fn_node, ctx)
        found.update(getattr(pass_, "ADDS", ()))
    return Converted(
        fn_node,
        ctx.return_values,
        ctx.bounds_loops or ctx.hands_functions,
        ctx.builtins_read(),
        frozenset(ctx.namer.generated),
    )
