"""Moves `global` and `nonlocal` declarations to the top of their function.

A declaration applies to its whole function wherever it is written; written inside an `if` or a
loop it would otherwise end up inside a generated branch or loop-body function, and apply there:

    def f(x):                      def f(x):
        if x > 0:                      global count
            global count     ->        if x > 0:
            count += 1                     count += 1
"""

from __future__ import annotations

import gast

from transpiler import structure
from transpiler.analysis import activity
from transpiler.context import PassContext

# What the pipeline looks for before running this pass, and what it may add (features.py).
APPLIES_TO = (gast.Global, gast.Nonlocal)

_DECLARATIONS = (gast.Global, gast.Nonlocal)


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    for scope in activity.function_scopes(fn_node):
        found: list[gast.stmt] = []
        scope.body = _remove(scope.body, found)
        if found:
            start = structure.docstring_length(scope.body)
            scope.body[start:start] = found
    return fn_node


def _remove(stmts: list[gast.stmt], found: list[gast.stmt]) -> list[gast.stmt]:
    kept = []
    for stmt in stmts:
        if isinstance(stmt, _DECLARATIONS):
            found.append(stmt)
            continue
        for block in structure.blocks(stmt):
            if block.stmts:  # a block that held only declarations still needs a statement
                block.stmts = _remove(block.stmts, found) or [gast.Pass()]
        kept.append(stmt)
    return kept
