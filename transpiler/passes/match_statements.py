"""Rewrites a `match` whose patterns are values, captures and alternatives into `if` statements.

    match k:                         match_subject = k
        case 0:                      if match_subject == 0:
            y = a                        y = a
        case 1 | 2:          ->      elif match_subject == 1 or match_subject == 2:
            y = b                        y = b
        case v if v > 5:             else:
            y = v                        v = match_subject
        case _:                          if v > 5:
            y = c                            y = v
                                         else:
                                             y = c

So a traced subject stages, as an `if` would. The tests are the pattern's own: `==` for a value,
`is` for None/True/False; a capture binds the subject only when its case is tried, before its
guard, as Python does. A `match` with sequence, mapping or class patterns stays Python; its
guards go through `rt__.match_guard`, which refuses a traced one with a StagingError naming
the statement (Python's `match` cannot branch on it).
"""

from __future__ import annotations

import gast

from transpiler import structure, templates
from transpiler.context import PassContext
from transpiler.naming import RUNTIME
from transpiler.transformer import Transformer

# What the pipeline looks for before running this pass, and what it may add (features.py).
APPLIES_TO = (gast.Match,)
ADDS = (gast.If, gast.Assign, gast.Compare, gast.BoolOp, gast.NamedExpr)


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    return _MatchStatements(ctx).visit(fn_node)


def _simple(pattern: gast.pattern) -> bool:
    """Whether `pattern` is a value, None/True/False, `_`, a capture, or alternatives of those."""
    if isinstance(pattern, (gast.MatchValue, gast.MatchSingleton)):
        return True
    if isinstance(pattern, gast.MatchAs):
        return pattern.pattern is None or (_simple(pattern.pattern) and not _binds(pattern.pattern))
    if isinstance(pattern, gast.MatchOr):
        return all(_simple(p) and not _binds(p) for p in pattern.patterns)
    return False


def _binds(pattern: gast.pattern) -> bool:
    return any(isinstance(p, gast.MatchAs) and p.name for p in structure.walk_nodes(pattern))


class _MatchStatements(Transformer):
    def __init__(self, ctx: PassContext):
        self.namer = ctx.namer

    def visit_Match(self, node):
        node = self.generic_visit(node)
        if not all(_simple(case.pattern) for case in node.cases):
            for case in node.cases:  # Python's: a traced guard is refused, naming the match
                if case.guard is not None:
                    case.guard = templates.replace_as_expression(
                        f"{RUNTIME}.match_guard(guard)", guard=case.guard
                    )
            return node
        if isinstance(node.subject, gast.Name):
            subject, bind = node.subject.id, []
        else:
            subject = self.namer.new("match_subject")
            bind = templates.replace("subject = value", subject=subject, value=node.subject)
        return bind + self._chain(node.cases, subject)

    def _chain(self, cases, subject) -> list[gast.stmt]:
        if not cases:
            return []
        case, rest = cases[0], cases[1:]
        test, capture = _test(case.pattern, subject)
        body = case.body
        orelse = self._chain(rest, subject) or [gast.Pass()]
        if capture is not None and test is None and case.guard is not None:
            # `case v if v > 5:` binds v whenever it is tried, then tests the guard.
            bind = templates.replace("name = subject", name=capture, subject=subject)
            return bind + templates.replace(
                "if test:\n    body\nelse:\n    orelse", test=case.guard, body=body, orelse=orelse
            )
        if capture is not None and case.guard is None:
            body = templates.replace("name = subject", name=capture, subject=subject) + body
        elif capture is not None:
            # `case 1 | 2 as w if w > 1:` binds w only when the pattern matched.
            bound = templates.replace_as_expression(
                "(name := subject) is name", name=capture, subject=subject
            )
            test = _and(test, bound)
        if case.guard is not None:
            test = case.guard if test is None else _and(test, case.guard)
        if test is None:  # irrefutable: the last case
            return body
        return templates.replace(
            "if test:\n    body\nelse:\n    orelse", test=test, body=body, orelse=orelse
        )


def _and(left: gast.expr, right: gast.expr) -> gast.expr:
    return gast.BoolOp(op=gast.And(), values=[left, right])


def _test(pattern: gast.pattern, subject: str) -> tuple[gast.expr | None, str | None]:
    """(the test that the subject matches, or None if it always does; the name it binds)."""
    if isinstance(pattern, gast.MatchValue):
        return _compare(subject, gast.Eq(), pattern.value), None
    if isinstance(pattern, gast.MatchSingleton):
        return _compare(subject, gast.Is(), templates.constant(pattern.value)), None
    if isinstance(pattern, gast.MatchOr):
        tests = [_test(p, subject)[0] for p in pattern.patterns]
        if any(t is None for t in tests):
            return None, None
        return gast.BoolOp(op=gast.Or(), values=tests), None
    # MatchAs: `_`, `name`, or `<pattern> as name`.
    test = None if pattern.pattern is None else _test(pattern.pattern, subject)[0]
    return test, pattern.name


def _compare(subject: str, op: gast.cmpop, value: gast.expr) -> gast.expr:
    return gast.Compare(left=templates.name(subject), ops=[op], comparators=[value])
