"""Rewrites `break` into a flag that the loop tests, so the loop can be staged.

    while x < n:                       did_break = False
        if x == t:                     while not did_break and x < n:
            break              ->          if x == t:
        x += 1                                 did_break = True
    else:                                  if not did_break:
        found = False                          x += 1
                                       if not did_break:
                                           found = False

A `break` that is all a leading `if` of a `while` body does is folded into the loop's test
(`while x < n: if x == t: break` is `while x < n and not x == t:`). A leading `if C: ...; break`
of a `for` body stays, marked EXIT_GUARD: the control-flow pass makes it the loop's exit test
(see `runtime.exits`). Otherwise a `for` loop gets the flag; its test (`not did_break`) is
attached as the EXTRA_TEST annotation, which the control-flow pass hands to
`rt__.for_stmt(..., extra_test=...)`: the loop stops fetching items once it is false, and a
staged loop tests it.
"""

from __future__ import annotations

import gast

from transpiler import anno, structure, templates
from transpiler.context import PassContext
from transpiler.naming import Namer
from transpiler.passes import guards
from transpiler.transformer import Transformer

# What the pipeline looks for before running this pass, and what it may add (features.py).
APPLIES_TO = (gast.Break,)
ADDS = (gast.If, gast.Assign, gast.UnaryOp, gast.BoolOp)


class _BreakStatements(Transformer):
    def __init__(self, namer: Namer):
        self.namer = namer

    def _visit_loop(self, node):
        # The flag is named before inner loops take theirs: names follow source order.
        breaks = list(structure.jumps_out(node.body, (gast.Break,)))
        if not breaks:
            return self.generic_visit(node)
        returns = {
            anno.getanno(b, anno.Static.RETURN_BREAK) if _is_return_break(b) else None
            for b in breaks
        }
        if len(returns) == 1 and None not in returns:
            # Every break leaves because of a return: the return flag is the loop's flag (it
            # is False when the loop starts, True once a break would run). One flag, not two.
            flag = returns.pop()
            node = self.generic_visit(node)
            node.body = _drop_return_breaks(node.body)
            assert not any(structure.jumps_out(node.body, (gast.Break,))), "a break survived"
            init = []
        else:
            flag = self.namer.new("did_break")
            node = self.generic_visit(node)  # inner loops first: their breaks are theirs
            node.body, _ = guards.replace_jumps(
                node.body, gast.Break, lambda _: templates.replace("flag = True", flag=flag)
            )
            init = templates.replace("flag = False", flag=flag)
        node.body = guards.guard_block(node.body, flag, into_loops=False)
        if isinstance(node, gast.While):
            node.test = templates.replace_as_expression(
                "not flag and test", flag=flag, test=node.test
            )
        else:
            not_broken = templates.replace_as_expression("not flag", flag=flag)
            anno.setanno(node, anno.Static.EXTRA_TEST, not_broken)
        orelse = node.orelse
        node.orelse = []
        after = (
            templates.replace("if not flag:\n    orelse", flag=flag, orelse=orelse)
            if orelse
            else []
        )
        return init + [node] + after

    def visit_While(self, node):
        return self._visit_loop(_fold_leading_exits(node))

    def visit_For(self, node):
        guard = _exit_guard(node)
        if guard is None:
            return self._visit_loop(node)
        # The guard stays first in the body, marked, for the control-flow pass (which makes it
        # the loop's exit test); the loop's other breaks are rewritten as usual.
        node.body = node.body[1:]
        out = self._visit_loop(node)
        anno.setanno(guard, anno.Static.EXIT_GUARD, True)
        node.body = [guard, *node.body]
        return out


def _fold_leading_exits(node: gast.While) -> gast.While:
    """`while T: if C: break; B` as `while T and not C: B`, as written by hand: the same tests
    in the same order, no flag, no branch around the body (with an `else:` clause the flag
    tells how the loop ended, so that loop keeps it)."""
    while not node.orelse and node.body and _is_exit_guard(node.body[0]):
        guard = node.body[0]
        test = templates.replace_as_expression(
            "test and not exit_test", test=node.test, exit_test=guard.test
        )
        first = test.values[0]
        if isinstance(first, gast.BoolOp) and isinstance(first.op, gast.And):
            test.values[:1] = first.values  # `a and b and not c`, not `(a and b) and not c`
        node.test = test
        node.body = guard.orelse + node.body[1:] or [gast.Pass()]
    return node


# What the exit of a `for` may do before it breaks: it runs once, after the loop.
_EXIT_STATEMENTS = (gast.Assign, gast.AugAssign, gast.AnnAssign, gast.Expr, gast.Pass)


def _exit_guard(node: gast.For) -> gast.If | None:
    """The `if C: <assignments>; break` that starts a `for` body (a `return` there is one, after
    the return pass), if there is one and the loop has no `else:` (which the flag tells)."""
    if node.orelse or not node.body:
        return None
    guard = node.body[0]
    if not (isinstance(guard, gast.If) and not guard.orelse and guard.body):
        return None
    *effects, last = guard.body
    if not isinstance(last, gast.Break):
        return None
    if not all(isinstance(stmt, _EXIT_STATEMENTS) for stmt in effects):
        return None
    if any(isinstance(n, gast.NamedExpr) for n in structure.walk_nodes(guard)):
        return None
    return guard


def _is_exit_guard(stmt: gast.stmt) -> bool:
    """`if C: break` (with or without an `else:`), the break a plain one (not a return's), and
    C without a `:=`, which binds in the function's scope: in the loop's test (a function of
    its own, once converted) it would bind there (the walrus pass turns `while (n := n - 1):`
    into `while True: if not (n := n - 1): break` for that reason)."""
    return (
        isinstance(stmt, gast.If)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], gast.Break)
        and not _is_return_break(stmt.body[0])
        and not any(isinstance(n, gast.NamedExpr) for n in structure.walk_nodes(stmt.test))
    )


def transform(fn_node: gast.FunctionDef, ctx: PassContext) -> gast.FunctionDef:
    return _BreakStatements(ctx.namer).visit(fn_node)


def _drop_return_breaks(stmts: list[gast.stmt]) -> list[gast.stmt]:
    """`stmts` without the loop's return breaks: each follows `do_return = True` in its block,
    or is the body of an `if do_return:` after an inner loop, which goes with it."""
    out = []
    for stmt in stmts:
        if _is_return_break(stmt):
            continue
        if (
            isinstance(stmt, gast.If)
            and not stmt.orelse
            and len(stmt.body) == 1
            and _is_return_break(stmt.body[0])
        ):
            continue
        for block in structure.blocks(stmt):
            if block.role is not structure.Role.LOOP_BODY:
                block.stmts = _drop_return_breaks(block.stmts)
        out.append(stmt)
    return out


def _is_return_break(stmt) -> bool:
    return isinstance(stmt, gast.Break) and anno.hasanno(stmt, anno.Static.RETURN_BREAK)
