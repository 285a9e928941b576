"""Reaching definitions: which names may be bound when a statement starts.

A forward "may" analysis over the structured AST, starting from the function's parameters. The
control-flow pass uses it to decide which state variables need an `Undefined` placeholder: a name
that cannot be bound before an `if` or a loop is passed in as `rt__.Undefined('x')`.

Annotates every statement with DEFINED_IN.
"""

from __future__ import annotations

import gast

from transpiler import anno
from transpiler.analysis import activity

_A = anno.Static


def analyze(fn_node: gast.FunctionDef) -> None:
    """Annotates `fn_node` and its nested functions; needs the activity analysis."""
    scope = anno.getanno(fn_node, _A.SCOPE)
    _block(fn_node.body, scope.params)
    for node in activity.walk_scope(fn_node.body):
        if isinstance(node, gast.FunctionDef):
            analyze(node)


def _block(stmts: list[gast.stmt], defined: frozenset[str]) -> frozenset[str]:
    for stmt in stmts:
        defined = _stmt(stmt, defined)
    return defined


def _stmt(node: gast.stmt, defined: frozenset[str]) -> frozenset[str]:
    anno.setanno(node, _A.DEFINED_IN, defined)
    if isinstance(node, gast.If):
        defined |= activity.of(node.test).bound  # walrus in the test
        return _block(node.body, defined) | _block(node.orelse, defined)
    if isinstance(node, (gast.While, gast.For)):
        if isinstance(node, gast.For):
            entry = defined | activity.of(node.iter).bound
            each = entry | activity.of(node.target).bound
        else:
            entry = each = defined | activity.of(node.test).bound
        # A second pass sees what earlier iterations bound; a third would add nothing.
        each |= _block(node.body, each)
        after_body = _block(node.body, each)
        return _block(node.orelse, entry | after_body) | entry | after_body
    if isinstance(node, (gast.With, gast.AsyncWith)):
        for item in node.items:
            defined |= activity.of(item).bound
        return _block(node.body, defined)
    if isinstance(node, (gast.Try, getattr(gast, "TryStar", gast.Try))):
        body = _block(node.body, defined)
        out = _block(node.orelse, body)
        for handler in node.handlers:
            handler_in = defined | body
            if handler.name is not None:
                handler_in |= {handler.name.id}
            out |= _block(handler.body, handler_in)
        return _block(node.finalbody, out | body | defined)
    if isinstance(node, gast.Match):
        out = defined
        for case in node.cases:
            out |= _block(case.body, defined | activity.of(case.pattern).bound)
        return out
    return defined | anno.getanno(node, _A.ACTIVITY).bound
