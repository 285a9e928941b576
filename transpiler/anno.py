"""Typed annotations on AST nodes.

Analyses write annotations, passes read them. Keys are enum members whose value documents what the
annotation holds; reading a missing annotation raises, so a pass never runs on absent facts.
"""

from __future__ import annotations

import enum
from typing import Any

import gast

FIELD = "_astgraph_anno"
"""The attribute of a node that holds its annotations (a dict keyed by `Static`)."""


class Static(enum.Enum):
    """Facts computed by `transpiler.analysis` before a pass runs."""

    # Members are singletons: hashed by identity, not by `Enum.__hash__` (a Python-level call
    # per annotation read, a few percent of a conversion).
    __hash__ = object.__hash__

    ORIGIN = "the user's source location (an `origins.Location`) this node comes from"
    ACTIVITY = (
        "an `activity.Activity`: names a statement reads, binds and mutates, sub-blocks included"
    )
    BODY_ACTIVITY = "an `activity.Activity` of a control-flow node's body and orelse, test excluded"
    LIVE_OUT = "names (frozenset[str]) live right after this statement"
    LIVE_IN = "names (frozenset[str]) live right before this statement"
    LOOP_LIVE_IN = "names (frozenset[str]) live at the top of a loop body, each iteration"
    DEFINED_IN = "names (frozenset[str]) that may be bound right before this statement"
    DEFINITELY_DEFINED_IN = "names (frozenset[str]) bound on every path to this statement"
    BOUND_IN_SOURCE = (
        "True on a Name read (or augmented-assignment target) that is bound on every path to it "
        "in the function as written, before the early-exit passes"
    )
    EXTRA_TEST = (
        "an expression on a For node: the loop also stops once it is false (set by the break pass)"
    )
    TRUTH_TEST = (
        "True on a BoolOp whose value is only tested for truth (an if/while/ternary/assert "
        "test, a `not` operand, or an operand of such a BoolOp): set by the truth-tests pass"
    )
    EXIT_GUARD = (
        "True on the `if C: ...; break` that starts a For body, which the break pass leaves for "
        "the control-flow pass to hand to the runtime as the loop's exit test"
    )
    RETURN_BREAK = (
        "the return flag (str) on a Break the return pass adds: the flag is True when it runs"
    )
    LOOP_OPTIONS = "a dict on a loop node: option name -> expression, from transpiler.loop_options"
    COMPREHENSION = (
        "the construct (str: 'list comprehension', 'generator expression') on a For node the "
        "comprehensions pass makes of one: the runtime's errors name it, not the loop"
    )
    NEW_LIST = (
        "True on the call the comprehensions pass makes of a comprehension's function: it gives "
        "a new list, as the comprehension did, and only iterates its argument"
    )
    AS_WRITTEN = (
        "True on a nested function the passes leave as written (a generator: it runs as Python)"
    )
    MODULE_READ = (
        "True on a Name read that Python resolves in the module's namespace (a global, else a "
        "builtin): not a local of its scope or of an enclosing function, nor a closure variable "
        "of the converted function. Set before the passes run (`activity.mark_module_reads`)"
    )
    SCOPE = (
        "an `activity.Scope` on a function node: its parameters, globals/nonlocals, closure reads"
    )


def setanno(node: gast.AST, key: Static, value: Any) -> None:
    annos = node.__dict__.setdefault(FIELD, {})
    annos[key] = value


def hasanno(node: gast.AST, key: Static) -> bool:
    return key in node.__dict__.get(FIELD, {})


def getanno(node: gast.AST, key: Static) -> Any:
    try:
        return node.__dict__[FIELD][key]
    except KeyError:
        raise KeyError(
            f"{type(node).__name__} node has no {key.name} annotation; run the analysis first"
        ) from None
