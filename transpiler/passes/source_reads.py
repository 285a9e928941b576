"""Marks the reads that Python's own scoping proves bound, before the early-exit passes hide it.

The early-exit passes turn `break` and `return` into flags, after which the analyses can no
longer see that a variable set just before a `break` is bound after the loop:

    for x in xs:                          for x in xs:                 (did_break in the state)
        if x > tol:                           if x > tol:
            found = x              ->             found = x
            break                                 did_break = True
    else:                                 if not did_break:
        found = None                          found = None
    return found                          return found                 (bound on every path?)

Here, on the function as written, `found` is bound on every path to the `return`; the read is
marked (BOUND_IN_SOURCE), so that the unbound-names pass reads it without a check when the
program runs (a host callback, which costs as much as a small loop).
"""

from __future__ import annotations

import gast

from transpiler import anno, features, structure
from transpiler.analysis import activity, reaching_definitions
from transpiler.context import PassContext

# What the pipeline looks for before running this pass, and what it may add (features.py).
# Without early exits the analyses of the converted code see the same bindings, except in an
# assert's message, which the assert pass moves into a lambda (whose reads it then checks).
APPLIES_TO = (features.EARLY_RETURN, gast.Break, gast.Continue, gast.Assert)

_A = anno.Static

# Where a read does not happen when its statement starts: a lambda or nested function runs
# later (a closure reads the variable then), a generator expression when it is iterated.
_DEFERRED = (gast.Lambda, gast.FunctionDef, gast.AsyncFunctionDef, gast.ClassDef, gast.GeneratorExp)


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    """Annotates the reads of `fn_node` (and of its nested functions); changes nothing."""
    activity.analyze(fn_node)
    reaching_definitions.analyze(fn_node)
    for scope in activity.function_scopes(fn_node):
        for stmt in structure.walk(scope.body):
            bound = anno.getanno(stmt, _A.DEFINITELY_DEFINED_IN)
            for expression in _evaluated_first(stmt, bound):
                _mark(expression, bound)
    return fn_node


def _evaluated_first(stmt: gast.stmt, bound: frozenset[str]) -> list[gast.AST]:
    """The parts of `stmt` that run when it starts, before any block of it: its test, iterable,
    subject or context managers, or all of a simple statement. (A while loop's test runs again
    after each iteration, when a `del` in the body may have unbound a name: not included.)"""
    if isinstance(stmt, gast.If):
        return [stmt.test]
    if isinstance(stmt, (gast.For, gast.AsyncFor)):
        return [stmt.iter]
    if isinstance(stmt, (gast.With, gast.AsyncWith)):
        return [item.context_expr for item in stmt.items]
    if isinstance(stmt, gast.Match):
        return [stmt.subject]
    if isinstance(stmt, gast.AugAssign):
        if isinstance(stmt.target, gast.Name) and stmt.target.id in bound:
            anno.setanno(stmt.target, _A.BOUND_IN_SOURCE, True)  # read first, though a Store
        return [stmt]
    if any(True for _ in structure.blocks(stmt)) or isinstance(stmt, structure.SCOPES):
        return []
    return [stmt]


def _mark(node: gast.AST, bound: frozenset[str]) -> None:
    stack = [node]
    while stack:
        node = stack.pop()
        if isinstance(node, _DEFERRED):
            continue
        if isinstance(node, gast.Name) and isinstance(node.ctx, gast.Load) and node.id in bound:
            anno.setanno(node, _A.BOUND_IN_SOURCE, True)
        stack.extend(structure.children(node))
